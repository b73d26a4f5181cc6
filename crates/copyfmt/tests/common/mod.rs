//! Helpers shared by the scanner tests: feeding a scanner in pieces and
//! building binary COPY files.
#![allow(dead_code)]

use pgtide_copyfmt::scan::{Boundary, Dialect, Eol, Format, LeadBytes, Scanner, Stop};

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

/// What the reference reads from a stream.
pub struct Reference {
    /// Every record end.
    pub ends: Vec<usize>,
    /// Whether each record has a line-ending error.
    pub bad: Vec<bool>,
    /// The end marker was seen.
    pub eod: bool,
    /// The settled style, and the end of the first record.
    pub eol: Eol,
    pub first_end: Option<usize>,
}

/// A deliberately simple transcription of PostgreSQL's `CopyReadLineText`
/// (text and CSV), for a stream that may continue. Where the server raises
/// a line-ending error, the reference marks the record bad and goes on
/// where pgtide ends such a record: at the style's terminator.
pub fn reference_full(d: &Dialect, input: &[u8]) -> Reference {
    let csv = d.format == Format::Csv;
    let quotec = d.quote;
    let escapec = (csv && d.escape != d.quote).then_some(d.escape);
    let mut r = Reference {
        ends: Vec::new(),
        bad: Vec::new(),
        eod: false,
        eol: Eol::Unknown,
        first_end: None,
    };
    let mut i = 0;
    'records: while i < input.len() {
        let mut in_quote = false;
        let mut last_was_esc = false;
        let mut first_char_in_line = true;
        let mut bad = false;
        loop {
            let Some(&c) = input.get(i) else {
                return r;
            };
            i += 1;
            if csv {
                if in_quote && Some(c) == escapec {
                    last_was_esc = !last_was_esc;
                }
                if c == quotec && !last_was_esc {
                    in_quote = !in_quote;
                }
                if Some(c) != escapec {
                    last_was_esc = false;
                }
            }
            let unquoted = !csv || !in_quote;
            let ended = match c {
                b'\r' if unquoted => match r.eol {
                    Eol::Unknown | Eol::CrNl => match input.get(i) {
                        None => return r, // cannot tell yet
                        Some(b'\n') => {
                            i += 1;
                            r.eol = Eol::CrNl;
                            true
                        }
                        Some(_) if r.eol == Eol::Unknown => {
                            r.eol = Eol::Cr;
                            true
                        }
                        Some(_) => {
                            bad = true;
                            false
                        }
                    },
                    Eol::Nl => {
                        bad = true;
                        false
                    }
                    Eol::Cr => true,
                },
                b'\n' if unquoted => match r.eol {
                    Eol::Cr => {
                        bad = true;
                        false
                    }
                    Eol::CrNl => {
                        bad = true;
                        true
                    }
                    _ => {
                        r.eol = Eol::Nl;
                        true
                    }
                },
                _ => false,
            };
            if ended {
                r.ends.push(i);
                r.bad.push(bad);
                r.first_end.get_or_insert(i);
                continue 'records;
            }
            if c == b'\\' && (!csv || first_char_in_line) {
                if d.end_marker
                    && (first_char_in_line || d.mid_record_marker)
                    && input.get(i) == Some(&b'.')
                {
                    // `CopyReadLineText` after `\.`: `c2` is `None` at the
                    // end of the stream so far (cannot tell yet).
                    let mut j = i + 1;
                    // Not the end marker: data (CSV) or an error (`err`).
                    let mut not_end = false;
                    let mut err = false;
                    if r.eol == Eol::CrNl {
                        match input.get(j) {
                            None => return r,
                            Some(b'\r') => j += 1,
                            Some(_) if csv => not_end = true,
                            Some(_) => err = true, // `\n`: another style; else corrupt
                        }
                    }
                    if !not_end && !err {
                        match input.get(j) {
                            None => return r,
                            Some(&c2) if c2 != b'\r' && c2 != b'\n' => err = !csv, // corrupt
                            Some(&c2) => {
                                let fits = match r.eol {
                                    Eol::Nl | Eol::CrNl => c2 == b'\n',
                                    Eol::Cr => c2 == b'\r',
                                    Eol::Unknown => true,
                                };
                                if !fits {
                                    err = true;
                                } else {
                                    if !first_char_in_line {
                                        r.ends.push(j + 1); // text, mid-record
                                        r.bad.push(bad);
                                    }
                                    r.eod = true;
                                    return r;
                                }
                            }
                        }
                    }
                    // The server stops at the error; pgtide reads the
                    // record to its end, as data.
                    bad |= err;
                }
                if !csv {
                    // The escaped byte, whatever it is; from PostgreSQL 14
                    // the whole character it starts.
                    let escaped = input.get(i).copied();
                    i += 1;
                    if let Some(e) = escaped.filter(|&e| d.escape_whole_char && e >= 0x80) {
                        i += trailing(d, e, &input[i..]);
                    }
                }
            }
            first_char_in_line = false;
            // `encoding_embeds_ascii`: the rest of the character, by its
            // first byte, is skipped whatever it holds.
            if c >= 0x80 {
                i += trailing(d, c, &input[i..]);
            }
        }
    }
    r
}

/// The line breaks the scanner reports for bytes `from..to` of one call
/// (see `Boundary::lines`): `\n` bytes, or `\r` bytes once the style is
/// a lone `\r`, whose first one counts at the start of the next record:
/// in the call that reads the byte after it (with `Stop::First`, the call
/// that ends there; the next call starts after it).
pub fn line_breaks(d: &Dialect, input: &[u8], from: usize, to: usize, stop: Stop) -> u64 {
    if is_binary(d) {
        return 0;
    }
    let r = reference_full(d, input);
    let Some(f) = r.first_end.filter(|_| r.eol == Eol::Cr) else {
        return newlines(&input[from..to]);
    };
    let counted = (from..to).filter(|&p| match p {
        p if p + 1 < f => input[p] == b'\n',
        p if p + 1 == f => false,
        p => input[p] == b'\r',
    });
    let settled_here = match stop {
        Stop::First => from <= f && to == f,
        Stop::Last => from <= f && f <= to,
    };
    counted.count() as u64 + u64::from(settled_here)
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
                line_breaks(d, input, p, p + b.offset, Stop::First)
            };
            assert_eq!(
                b.lines,
                lines,
                "lines of the record ending at {}",
                p + b.offset
            );
            assert!(b.offset > 0 || (p > 0 && input[p - 1] == b'\r'));
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
        // A record ended by a lone `\r` that settles the style is only
        // known at the next byte: it is reported by the call that reads it.
        let r = (!is_binary(d)).then(|| reference_full(d, input));
        let settle = r
            .as_ref()
            .filter(|r| r.eol == Eol::Cr)
            .and_then(|r| r.first_end);
        let inside: Vec<usize> = expected
            .iter()
            .copied()
            .filter(|&e| match settle {
                Some(f) if e == f => start <= f && f < cut,
                _ => e > start && e <= cut,
            })
            .collect();
        let bad = r.map(|r| r.bad).unwrap_or_default();
        let want = inside.last().map(|&last| Boundary {
            offset: last - start,
            records: inside.len() as u64,
            lines: if is_binary(d) {
                inside.len() as u64
            } else {
                line_breaks(d, input, start, last, Stop::Last)
            },
            bad: expected
                .iter()
                .zip(bad.iter().chain(std::iter::repeat(&false)))
                .filter(|(&e, &b)| b && inside.contains(&e))
                .count() as u64,
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

/// The reference's record ends and end-of-data flag.
pub fn reference(d: &Dialect, input: &[u8]) -> (Vec<usize>, bool) {
    let r = reference_full(d, input);
    (r.ends, r.eod)
}

pub fn csv_with(quote: u8, escape: u8) -> Dialect {
    Dialect {
        quote,
        escape,
        ..Dialect::csv()
    }
}

/// Bytes after the high byte `c` in its character (`pg_encoding_mblen`)
/// among `after`, the bytes that follow it: up to the first that no
/// character of the encoding holds there (an ASCII byte outside its
/// trail range ends the character early).
fn trailing(d: &Dialect, c: u8, after: &[u8]) -> usize {
    let n = match d.lead_bytes {
        LeadBytes::Ascii => 0,
        LeadBytes::Sjis if (0xa1..=0xdf).contains(&c) => 0,
        LeadBytes::Johab if c == 0x8f => 2,
        _ => 1,
    };
    let trail = |b: u8| {
        b >= 0x80
            || match d.lead_bytes {
                LeadBytes::Sjis => (0x40..=0x7e).contains(&b),
                LeadBytes::Double => (0x30..=0x7e).contains(&b) && !(0x3a..=0x3f).contains(&b),
                _ => false,
            }
    };
    after.iter().take(n).take_while(|&&b| trail(b)).count()
}
