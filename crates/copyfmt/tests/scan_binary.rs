//! The scanner on PostgreSQL binary COPY files: NULLs, the trailer, header
//! extensions, truncation, resuming mid-stream, malformed input.

mod common;

use common::*;
use pgtide_copyfmt::scan::{records, Dialect, RecordSpan, Scanner, Stop};

#[test]
fn binary_with_nulls_and_trailer() {
    let (file, ends) = binary_file(0, &sample_tuples(), true);
    let got = check_every_split(&Dialect::binary(), &file);
    assert_eq!(got.ends, ends);
    assert!(got.eod);
    assert!(!got.error);
    let mut s = Scanner::new(Dialect::binary());
    let b = s.scan(&file, Stop::Last).unwrap();
    assert_eq!((b.offset, b.records, b.lines), (ends[3], 4, 4));
    assert_eq!(s.binary_header_len(), Some(19));
}

#[test]
fn binary_header_extension_and_truncation() {
    let (file, ends) = binary_file(5, &sample_tuples(), false);
    let cut = file.len() - 10;
    let got = check_every_split(&Dialect::binary(), &file[..cut]);
    assert_eq!(got.ends, ends[..3]);
    assert!(!got.eod && !got.at_record_start && !got.error);
    assert_eq!(got.pending, (cut - ends[2]) as u64);
    let mut s = Scanner::new(Dialect::binary());
    assert_eq!(s.binary_header_len(), None);
    s.scan(&file[..24], Stop::Last);
    assert_eq!(s.binary_header_len(), Some(24));
}

#[test]
fn binary_resume_and_records() {
    let (file, ends) = binary_file(0, &sample_tuples(), true);
    let body = &file[19..];
    let mut s = Scanner::resume(Dialect::binary());
    let b = s.scan(body, Stop::Last).unwrap();
    assert_eq!(b.offset, ends[3] - 19);
    assert!(s.end_of_data());
    let spans: Vec<RecordSpan> = records(&Dialect::binary(), body).collect();
    let got: Vec<usize> = spans.iter().map(|r| r.end + 19).collect();
    assert_eq!(got, ends);
    // A tuple's line is its index: pgtide places any record of any format
    // at its chunk's first line + `line` (`Chunk::line_of`).
    for (i, span) in spans.iter().enumerate() {
        assert_eq!(span.line, i as u64);
    }
}

#[test]
fn binary_errors_are_reported() {
    let (good, _) = binary_file(0, &sample_tuples(), true);
    let mut bad_sig = good.clone();
    bad_sig[5] = b'X';
    let mut oids = good.clone();
    oids[12] = 1; // flags bit 16
    let mut critical = good.clone();
    critical[11] = 0x80;
    let mut neg_ext = good.clone();
    neg_ext[15] = 0xff;
    let mut bad_size = good.clone();
    bad_size[21..25].copy_from_slice(&(-2i32).to_be_bytes());
    let mut bad_count = good.clone();
    bad_count[19..21].copy_from_slice(&(-3i16).to_be_bytes());
    for (name, input) in [
        ("signature", bad_sig),
        ("oids", oids),
        ("critical flags", critical),
        ("extension length", neg_ext),
        ("field size", bad_size),
        ("field count", bad_count),
    ] {
        let mut s = Scanner::new(Dialect::binary());
        assert_eq!(s.scan(&input, Stop::Last), None, "{name}");
        assert!(s.error().is_some(), "{name}");
        // Errors are sticky.
        assert_eq!(s.scan(&good, Stop::Last), None);
        // And the same at every split point.
        assert!(
            check_every_split(&Dialect::binary(), &input).error,
            "{name}"
        );
    }
}
