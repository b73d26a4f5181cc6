//! Throughput of text → binary conversion for a mixed row: int4, numeric,
//! date, timestamp, text, uuid and jsonb, framed with `RowWriter`.
//!
//! Run with `cargo bench -p pgtide-copyfmt --bench convert`. No harness
//! crate: it times fixed batches with `Instant`, keeps the best of a few
//! runs (the least disturbed by other work on the machine) and prints
//! rows/s and MB/s of input text, plus ns per value for each encoder.
//! `cargo test --benches` runs it once, quickly, as a smoke test.

use std::hint::black_box;
use std::time::{Duration, Instant};

use pgtide_copyfmt::binary::{write_header, write_trailer, RowWriter};
use pgtide_copyfmt::convert::{Encoder, Session};

/// Column types (OID, typmod) and one value for each.
const ROW: [(u32, i32, &str); 7] = [
    (23, -1, "1234567"),
    (1700, -1, "12345.6789"),
    (1082, -1, "2024-01-15"),
    (1114, -1, "2024-01-15 12:34:56.789"),
    (25, -1, "the quick brown fox jumps"),
    (2950, -1, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    (3802, -1, r#"{"id": 17, "tags": ["a", "b"], "ok": true}"#),
];

/// Rows per timed batch; the output buffer is reset every `FLUSH` rows
/// as a COPY sender would, so it stays in cache like a real 64 KiB chunk.
const BATCH: usize = 200_000;
const FLUSH: usize = 500;

fn best_of<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then one small batch is enough to show the code still runs.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (batch, runs) = if quick { (2_000, 1) } else { (BATCH, 5) };
    let session = Session::default();
    let encoders: Vec<Encoder> = ROW
        .iter()
        .map(|&(oid, typmod, _)| Encoder::for_type(oid, typmod, &session).unwrap())
        .collect();
    let values: Vec<&[u8]> = ROW.iter().map(|&(_, _, v)| v.as_bytes()).collect();
    let text_bytes: usize = values.iter().map(|v| v.len() + 1).sum();

    let mut out = Vec::with_capacity(FLUSH * 256);
    let elapsed = best_of(runs, || {
        out.clear();
        write_header(&mut out);
        for n in 0..batch {
            if n % FLUSH == 0 {
                out.clear();
            }
            let mut row = RowWriter::begin_row(&mut out, ROW.len() as u16);
            for (enc, v) in encoders.iter().zip(&values) {
                row.field(|buf| enc.encode(black_box(v), buf)).unwrap();
            }
            row.finish().unwrap();
        }
        write_trailer(&mut out);
        black_box(&out);
    });
    let secs = elapsed.as_secs_f64();
    println!(
        "convert/mixed-row ({} cols): {:.0} rows/s, {:.1} MB/s of text, {:.0} ns/row",
        ROW.len(),
        batch as f64 / secs,
        (batch * text_bytes) as f64 / secs / 1e6,
        secs * 1e9 / batch as f64,
    );

    for ((oid, _, v), enc) in ROW.iter().zip(&encoders) {
        let mut buf = Vec::with_capacity(FLUSH * 64);
        let per = best_of(runs, || {
            for n in 0..batch {
                if n % FLUSH == 0 {
                    buf.clear();
                }
                enc.encode(black_box(v.as_bytes()), &mut buf).unwrap();
            }
            black_box(&buf);
        });
        println!(
            "convert/{oid:<5} {:>9.1} ns/value  {v}",
            per.as_secs_f64() * 1e9 / batch as f64,
        );
    }
}
