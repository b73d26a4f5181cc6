//! Throughput of the row-boundary scanner.
//!
//! Run with `cargo bench -p pgtide-copyfmt --bench scan`. It builds about
//! 256 MB of each kind of input in memory, scans it several times, and
//! prints the median in GB/s (10^9 bytes per second). Plain `std::time`, no
//! harness: the numbers are meant for `docs/benchmarks.md`, next to the
//! command that produced them. Set `SCAN_BENCH_MB` to change the size.

use std::hint::black_box;
use std::time::{Duration, Instant};

use pgtide_copyfmt::scan::{records, Dialect, Scanner, Stop};

/// How many times each input is scanned; the median is reported.
const RUNS: usize = 7;

/// The piece size the chunker feeds: reading 1 MiB at a time is typical
/// for a `BufReader` over a file or a decompressor.
const PIECE: usize = 1 << 20;

/// A small deterministic generator, so every run scans the same bytes.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

const WORDS: [&str; 8] = [
    "some", "text", "with", "comma", "quoted", "data", "x", "pgtide",
];

fn words(rng: &mut Lcg, sep: &str) -> String {
    let n = 1 + rng.next(5) as usize;
    let picked: Vec<&str> = (0..n).map(|_| WORDS[rng.next(8) as usize]).collect();
    picked.join(sep)
}

/// CSV rows like `123,"some text, with comma",456,"quoted ""x"" y"`, with
/// an occasional quoted newline.
fn csv_quoted(size: usize) -> Vec<u8> {
    let mut rng = Lcg(1);
    let mut out = Vec::with_capacity(size + 256);
    while out.len() < size {
        let i = rng.next(1_000_000);
        let a = words(&mut rng, ", ");
        let j = rng.next(1000);
        let b = words(&mut rng, " ");
        let nl = if rng.next(50) == 0 { "\n" } else { "" };
        let row = format!("{i},\"{a}\",{j},\"quoted \"\"{b}\"\"{nl} y\"\n");
        out.extend_from_slice(row.as_bytes());
    }
    out
}

/// Text-format rows with tabs, a `\N` NULL now and then and a few escapes.
fn text_rows(size: usize) -> Vec<u8> {
    let mut rng = Lcg(2);
    let mut out = Vec::with_capacity(size + 256);
    while out.len() < size {
        let i = rng.next(1_000_000);
        let a = words(&mut rng, " ");
        let b = if rng.next(4) == 0 {
            "\\N".to_string()
        } else {
            words(&mut rng, "\\t")
        };
        let j = rng.next(1000);
        let row = format!("{i}\t{a}\t{b}\t{j}\t2024-01-{:02}\n", 1 + rng.next(28));
        out.extend_from_slice(row.as_bytes());
    }
    out
}

/// CSV without any quotes (numbers and plain words).
fn csv_plain(size: usize) -> Vec<u8> {
    let mut rng = Lcg(3);
    let mut out = Vec::with_capacity(size + 256);
    while out.len() < size {
        let row = format!(
            "{},{},{},{}\n",
            rng.next(1 << 30),
            words(&mut rng, " "),
            rng.next(1000),
            rng.next(7)
        );
        out.extend_from_slice(row.as_bytes());
    }
    out
}

/// Binary COPY: header, then tuples of (int4, text, int8, NULL or int4).
fn binary_tuples(size: usize) -> Vec<u8> {
    let mut rng = Lcg(4);
    let mut out = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0".to_vec();
    while out.len() < size {
        let text = words(&mut rng, " ");
        out.extend_from_slice(&4i16.to_be_bytes());
        out.extend_from_slice(&4i32.to_be_bytes());
        out.extend_from_slice(&(rng.next(1 << 31) as i32).to_be_bytes());
        out.extend_from_slice(&(text.len() as i32).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(&8i32.to_be_bytes());
        out.extend_from_slice(&rng.next(u64::MAX).to_be_bytes());
        if rng.next(3) == 0 {
            out.extend_from_slice(&(-1i32).to_be_bytes());
        } else {
            out.extend_from_slice(&4i32.to_be_bytes());
            out.extend_from_slice(&(rng.next(1000) as i32).to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

/// Scans `data` in `piece`-sized calls with `Stop::Last`; returns records.
fn scan_pieces(d: &Dialect, data: &[u8], piece: usize) -> u64 {
    let mut s = Scanner::new(d.clone());
    let mut records = 0;
    for chunk in data.chunks(piece) {
        if let Some(b) = s.scan(black_box(chunk), Stop::Last) {
            records += b.records;
        }
    }
    records
}

fn median_gbps(bytes: usize, mut f: impl FnMut() -> u64) -> (f64, u64) {
    let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
    let mut result = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        result = black_box(f());
        times.push(t.elapsed());
    }
    times.sort();
    let median = times[RUNS / 2].as_secs_f64();
    (bytes as f64 / median / 1e9, result)
}

/// `header`: bytes before the first record, which `records()` must skip.
fn report(name: &str, data: &[u8], header: usize, d: &Dialect) {
    let mb = data.len() as f64 / 1e6;
    let (pieces, n) = median_gbps(data.len(), || scan_pieces(d, data, PIECE));
    let (whole, m) = median_gbps(data.len(), || scan_pieces(d, data, data.len()));
    assert_eq!(n, m, "piece size must not change the record count");
    // records(): every span of a buffer, as the sharded router, the rejects
    // screen and isolation walk it (text/CSV: one pass per 16 KiB window;
    // binary: one Stop::First call per tuple).
    let sample = &data[header..data.len().min(32 << 20)];
    let (spans, _) = median_gbps(sample.len(), || records(d, sample).count() as u64);
    println!(
        "{name:<12} {mb:>6.0} MB {n:>10} records | scan 1 MiB pieces {pieces:>5.2} GB/s \
         | scan whole {whole:>5.2} GB/s | records() {spans:>5.2} GB/s"
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then a tiny size keeps the smoke run fast.
    let bench = std::env::args().any(|a| a == "--bench");
    let default_mb = if bench { 256 } else { 1 };
    let mb: usize = std::env::var("SCAN_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_mb);
    let size = mb << 20;
    println!("row-boundary scanner, median of {RUNS} runs");
    report("csv quoted", &csv_quoted(size), 0, &Dialect::csv());
    report("csv plain", &csv_plain(size), 0, &Dialect::csv());
    report("text", &text_rows(size), 0, &Dialect::text());
    report("binary", &binary_tuples(size), 19, &Dialect::binary());
}
