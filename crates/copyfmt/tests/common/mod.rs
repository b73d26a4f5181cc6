//! Helpers shared by the scanner tests: feeding a scanner in pieces and
//! building binary COPY files.
#![allow(dead_code)]

use pgtide_copyfmt::scan::{Boundary, Dialect, Format, Scanner, Stop};

/// What a whole feed of the scanner produced, in absolute offsets.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Every record end.
    pub ends: Vec<usize>,
    /// The end of data was seen.
    pub eod: bool,
    pub at_record_start: bool,
    pub pending: u64,
    pub error: bool,
}

pub fn is_binary(d: &Dialect) -> bool {
    d.format == Format::Binary
}

pub fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

pub fn scanner(d: &Dialect) -> Scanner {
    Scanner::new(d.clone())
}

/// Feeds `pieces` with `Stop::First`, re-feeding the rest after each
/// boundary, and checks each boundary's counts on the way.
pub fn feed_first(d: &Dialect, input: &[u8], cuts: &[usize]) -> Outcome {
    let mut s = scanner(d);
    let mut ends = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(Some(&input.len())) {
        let mut p = start;
        while p < cut {
            let Some(b) = s.scan(&input[p..cut], Stop::First) else {
                break;
            };
            assert_eq!(b.records, 1, "Stop::First reports one record");
            let lines = if is_binary(d) {
                1
            } else {
                newlines(&input[p..p + b.offset])
            };
            assert_eq!(
                b.lines,
                lines,
                "lines of the record ending at {}",
                p + b.offset
            );
            assert!(b.offset > 0);
            p += b.offset;
            ends.push(p);
            assert!(s.at_record_start());
        }
        start = cut;
    }
    outcome(&s, ends)
}

/// Feeds `pieces` with `Stop::Last` and checks each answer against the ends
/// found with `Stop::First` (`expected`).
pub fn feed_last(d: &Dialect, input: &[u8], cuts: &[usize], expected: &[usize]) -> Outcome {
    let mut s = scanner(d);
    let mut ends = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(Some(&input.len())) {
        let got = s.scan(&input[start..cut], Stop::Last);
        let inside: Vec<usize> = expected
            .iter()
            .copied()
            .filter(|&e| e > start && e <= cut)
            .collect();
        let want = inside.last().map(|&last| Boundary {
            offset: last - start,
            records: inside.len() as u64,
            lines: if is_binary(d) {
                inside.len() as u64
            } else {
                newlines(&input[start..last])
            },
        });
        assert_eq!(got, want, "Stop::Last on piece {start}..{cut}");
        ends.extend(inside);
        start = cut;
    }
    outcome(&s, ends)
}

pub fn outcome(s: &Scanner, ends: Vec<usize>) -> Outcome {
    Outcome {
        ends,
        eod: s.end_of_data(),
        at_record_start: s.at_record_start(),
        pending: s.pending_len(),
        error: s.error().is_some(),
    }
}

/// The scanner gives the same answer however the input is cut.
pub fn check_every_split(d: &Dialect, input: &[u8]) -> Outcome {
    let whole = feed_first(d, input, &[]);
    let ends = &whole.ends;
    assert_eq!(
        feed_last(d, input, &[], ends),
        whole,
        "one piece, Stop::Last"
    );
    for cut in 0..=input.len() {
        assert_eq!(feed_first(d, input, &[cut]), whole, "split at {cut}, First");
        assert_eq!(
            feed_last(d, input, &[cut], ends),
            whole,
            "split at {cut}, Last"
        );
    }
    let bytes: Vec<usize> = (1..input.len()).collect();
    assert_eq!(feed_first(d, input, &bytes), whole, "byte at a time, First");
    assert_eq!(
        feed_last(d, input, &bytes, ends),
        whole,
        "byte at a time, Last"
    );
    whole
}

/// A binary COPY file: header (with `ext` extension bytes), tuples, and
/// optionally the trailer. Returns the bytes and the end of each tuple.
pub fn binary_file(
    ext: usize,
    tuples: &[Vec<Option<Vec<u8>>>],
    trailer: bool,
) -> (Vec<u8>, Vec<usize>) {
    let mut out = b"PGCOPY\n\xff\r\n\0".to_vec();
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&(ext as u32).to_be_bytes());
    out.extend(std::iter::repeat_n(7u8, ext));
    let mut ends = Vec::new();
    for t in tuples {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        for f in t {
            match f {
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(v) => {
                    out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    out.extend_from_slice(v);
                }
            }
        }
        ends.push(out.len());
    }
    if trailer {
        out.extend_from_slice(&(-1i16).to_be_bytes());
    }
    (out, ends)
}

pub fn sample_tuples() -> Vec<Vec<Option<Vec<u8>>>> {
    vec![
        vec![
            Some(b"\x00\x00\x00\x01".to_vec()),
            None,
            Some(b"hi\n".to_vec()),
        ],
        vec![],
        vec![None, None, Some(Vec::new())],
        vec![Some(vec![b'\n'; 300])],
    ]
}
