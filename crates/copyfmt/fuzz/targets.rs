//! Fuzz targets for the byte-level code that reads untrusted input: the
//! text, CSV and binary scanners, the field splitter (the binary decoder
//! among it) and the mapping from the server's `line N` to a record.
//!
//! Each target takes raw bytes, so the same functions serve `cargo fuzz`
//! (`fuzz/fuzz_targets/*.rs`) and the proptest runs in `tests/fuzz.rs`,
//! which add a check of their own: no single allocation larger than the
//! input justifies (a length field must never size a buffer).
//!
//! The first bytes of the input choose the options (dialect, cut points,
//! line number); the rest is the data. A target panics when an invariant
//! does not hold.
#![allow(dead_code)]

use pgtide_copyfmt::fields::{split_record, Fields, NullSpec};
use pgtide_copyfmt::scan::{
    record_at_server_line, records, server_lines, Dialect, Eol, Format, Scanner, Stop,
};

/// The dialects worth telling apart, with and without the end marker.
pub fn dialect(selector: u8) -> Dialect {
    let csv = |quote, escape| Dialect {
        quote,
        escape,
        ..Dialect::csv()
    };
    let mut d = match selector % 8 {
        0 => Dialect::text(),
        1 => Dialect::csv(),
        2 => csv(b'"', b'\\'),
        3 => csv(b'\'', b'\''),
        4 => csv(b'\'', b'"'),
        5 => csv(b'\\', b'\\'),
        6 => Dialect {
            delimiter: b'|',
            ..Dialect::text()
        },
        _ => Dialect::binary(),
    };
    d.end_marker = selector & 8 == 0;
    d
}

/// Splits a fuzz input into (options, data): `n` option bytes, padded
/// with zeros when the input is shorter.
fn options<const N: usize>(input: &[u8]) -> ([u8; N], &[u8]) {
    let mut opts = [0u8; N];
    let n = input.len().min(N);
    opts[..n].copy_from_slice(&input[..n]);
    (opts, &input[n..])
}

/// What feeding a scanner produced: record ends (absolute), end of data,
/// error, pending bytes. (Line counts are per call, so they depend on the
/// cuts; `tests/scan_split.rs` and `tests/scan_props.rs` check them
/// against a reference.)
#[derive(Debug, PartialEq, Eq)]
struct Feed {
    ends: Vec<usize>,
    eod: bool,
    error: bool,
    pending: u64,
}

/// Feeds `data` cut at `cuts` (sorted offsets), with `stop`.
fn feed(d: &Dialect, data: &[u8], cuts: &[usize], stop: Stop) -> Feed {
    let mut s = Scanner::new(d.clone());
    let mut ends = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(Some(&data.len())) {
        let mut pos = start;
        while pos < cut {
            let piece = &data[pos..cut];
            let Some(b) = s.scan(piece, stop) else {
                break;
            };
            assert!(b.offset <= piece.len(), "boundary past the piece");
            assert!(b.records >= 1 && b.bad <= b.records);
            if stop == Stop::First {
                assert_eq!(b.records, 1, "Stop::First ends one record");
                // Offset 0 only for a record ended by a lone `\r` that
                // was the last byte of the previous piece.
                assert!(b.offset > 0 || (pos > 0 && data[pos - 1] == b'\r'));
                ends.push(pos + b.offset);
                pos += b.offset;
            } else {
                // Stop::Last consumes the piece; only its last end is known.
                ends.push(pos + b.offset);
                break;
            }
        }
        start = cut;
    }
    Feed {
        ends,
        eod: s.end_of_data(),
        error: s.error().is_some(),
        pending: s.pending_len(),
    }
}

/// Cut points from two option bytes, inside `0..=len`.
fn cuts(len: usize, a: u8, b: u8) -> Vec<usize> {
    let mut cuts = vec![usize::from(a) % (len + 1), usize::from(b) * 7 % (len + 1)];
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Text, CSV or binary scanner: no panic; the same record ends, line
/// count, end of data and error whatever the cut points; `records` agrees
/// and covers the input; every record splits into fields without panic.
pub fn scan(input: &[u8]) {
    let ([sel, a, b], data) = options::<3>(input);
    let d = dialect(sel);
    let whole = feed(&d, data, &[], Stop::First);
    let cut = cuts(data.len(), a, b);
    let pieces = feed(&d, data, &cut, Stop::First);
    assert_eq!(pieces, whole, "cut at {cut:?}");
    // Stop::Last reports one end per piece: the last of `whole`'s ends in it.
    let last = feed(&d, data, &cut, Stop::Last);
    for e in &last.ends {
        assert!(
            whole.ends.contains(e),
            "Stop::Last end {e} not a record end"
        );
    }
    assert_eq!(
        (last.eod, last.error, last.pending),
        (whole.eod, whole.error, whole.pending)
    );
    assert!(whole.ends.windows(2).all(|w| w[0] < w[1]));

    // `records` on whole buffers (as a chunk is split again for rejects).
    let body = match d.format {
        Format::Binary => {
            let mut s = Scanner::new(d.clone());
            s.scan(data, Stop::First);
            match s.binary_header_len() {
                Some(h) if h <= data.len() => &data[h..],
                _ => data,
            }
        }
        _ => data,
    };
    let mut fields = Fields::new();
    let nulls = NullSpec::for_dialect(&d);
    let mut next = 0;
    for span in records(&d, body) {
        assert_eq!(span.start, next, "records leave a gap");
        assert!(span.start < span.end && span.end <= body.len());
        next = span.end;
        let _ = split_record(&d, &nulls, &body[span.start..span.end], &mut fields);
        for i in 0..fields.len() {
            let _ = (fields.get(i), fields.is_null(i), fields.raw_was_quoted(i));
        }
    }
}

/// The binary decoder (`split_record` on one tuple) and the binary
/// scanner on the same bytes: no panic; a tuple the decoder accepts is one
/// the scanner ends exactly there, and its values are inside the input.
pub fn binary(input: &[u8]) {
    let d = Dialect::binary();
    let nulls = NullSpec::for_dialect(&d);
    let mut fields = Fields::new();
    if split_record(&d, &nulls, input, &mut fields).is_ok() {
        let total: usize = (0..fields.len())
            .filter_map(|i| fields.get(i))
            .map(<[u8]>::len)
            .sum();
        assert!(total + 2 + 4 * fields.len() == input.len());
        let mut s = Scanner::resume(d.clone());
        let b = s.scan(input, Stop::First);
        assert_eq!(b.map(|b| b.offset), Some(input.len()), "scanner disagrees");
    }
    // And as a whole file, header included.
    let mut file = pgtide_copyfmt::binary::SIGNATURE.to_vec();
    file.extend_from_slice(&[0; 8]);
    file.extend_from_slice(input);
    let mut s = Scanner::new(d.clone());
    let _ = s.scan(&file, Stop::Last);
    let _ = records(&d, input).count();
}

/// The record index for the server's `line N` (CSV counts quoted line
/// breaks, text counts records): no panic, and equal to a walk over the
/// records that counts the server's way.
pub fn line_mapping(input: &[u8]) {
    let ([sel, l0, l1], data) = options::<3>(input);
    let mut d = dialect(sel);
    if d.format == Format::Binary {
        d = Dialect::csv();
    }
    // A chunk sent in one COPY never holds an end marker (the chunker
    // stops before it), so the mapping is defined without one.
    d.end_marker = false;
    let line = u64::from(u16::from_le_bytes([l0, l1]));
    let got = record_at_server_line(&d, data, line);
    assert_eq!(got, expected_record(&d, data, line), "line {line}");
    // Extremes never panic.
    for line in [0, u64::MAX, u64::MAX - 1] {
        let _ = record_at_server_line(&d, data, line);
    }
}

/// The server's count: each record starts one line after the previous
/// one ended; in CSV a record also spans its quoted line breaks, counted
/// in the style settled by the first record (unknown while in it).
fn expected_record(d: &Dialect, data: &[u8], line: u64) -> Option<u64> {
    let mut first = 1u64;
    let mut eol = Eol::Unknown;
    let mut settled = Scanner::resume(d.clone());
    for (index, span) in records(d, data).enumerate() {
        let rec = &data[span.start..span.end];
        let extra = match d.format {
            Format::Csv => server_lines(d, eol, rec),
            _ => 0,
        };
        if (first..=first + extra).contains(&line) {
            return Some(index as u64);
        }
        first += extra + 1;
        if index == 0 {
            settled.scan(rec, Stop::First);
            settled.finish();
            eol = settled.eol();
        }
    }
    None
}
