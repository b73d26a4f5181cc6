//! The row-boundary scanner against a table of cases, at every split point,
//! and against a byte-at-a-time reference written from PostgreSQL's
//! `CopyReadLineText`.
//!
//! Every case is checked four ways: the expected ends written in the table,
//! the reference implementation, the scanner fed in one piece, and the
//! scanner fed in two pieces at every split point and one byte at a time
//! (with both `Stop::First` and `Stop::Last`).

use pgtide_copyfmt::scan::{records, Boundary, Dialect, Format, RecordSpan, Scanner, Stop};
use proptest::prelude::*;

/// What a whole feed of the scanner produced, in absolute offsets.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Every record end.
    ends: Vec<usize>,
    /// The end of data was seen.
    eod: bool,
    at_record_start: bool,
    pending: u64,
    error: bool,
}

fn is_binary(d: &Dialect) -> bool {
    d.format == Format::Binary
}

fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

fn scanner(d: &Dialect) -> Scanner {
    Scanner::new(d.clone())
}

/// Feeds `pieces` with `Stop::First`, re-feeding the rest after each
/// boundary, and checks each boundary's counts on the way.
fn feed_first(d: &Dialect, input: &[u8], cuts: &[usize]) -> Outcome {
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
fn feed_last(d: &Dialect, input: &[u8], cuts: &[usize], expected: &[usize]) -> Outcome {
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

fn outcome(s: &Scanner, ends: Vec<usize>) -> Outcome {
    Outcome {
        ends,
        eod: s.end_of_data(),
        at_record_start: s.at_record_start(),
        pending: s.pending_len(),
        error: s.error().is_some(),
    }
}

/// The scanner gives the same answer however the input is cut.
fn check_every_split(d: &Dialect, input: &[u8]) -> Outcome {
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

/// A deliberately simple transcription of PostgreSQL's `CopyReadLineText`
/// (text and CSV), for a stream that may continue: returns the record ends
/// and whether the end marker was seen.
fn reference(d: &Dialect, input: &[u8]) -> (Vec<usize>, bool) {
    let csv = d.format == Format::Csv;
    let quotec = d.quote;
    let escapec = (csv && d.escape != d.quote).then_some(d.escape);
    let mut ends = Vec::new();
    let mut i = 0;
    'records: while i < input.len() {
        let mut in_quote = false;
        let mut last_was_esc = false;
        let mut first_char_in_line = true;
        loop {
            let Some(&c) = input.get(i) else {
                return (ends, false);
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
            if c == b'\n' && (!csv || !in_quote) {
                ends.push(i);
                continue 'records;
            }
            if c == b'\\' && (!csv || first_char_in_line) {
                if d.end_marker {
                    // Look for ".\n" or ".\r\n" after the backslash.
                    let rest = &input[i..];
                    let marker = [&b".\n"[..], &b".\r\n"[..]];
                    if let Some(m) = marker.iter().find(|m| rest.starts_with(m)) {
                        if !first_char_in_line {
                            ends.push(i + m.len()); // text, mid-record
                        }
                        return (ends, true);
                    }
                    if marker.iter().any(|m| m.starts_with(rest)) {
                        return (ends, false); // cannot tell yet
                    }
                }
                if !csv {
                    i += 1; // the escaped byte, whatever it is
                }
            }
            first_char_in_line = false;
        }
    }
    (ends, false)
}

fn csv_with(quote: u8, escape: u8) -> Dialect {
    Dialect {
        quote,
        escape,
        ..Dialect::csv()
    }
}

fn no_marker(mut d: Dialect) -> Dialect {
    d.end_marker = false;
    d
}

struct Case {
    name: &'static str,
    dialect: Dialect,
    input: &'static [u8],
    ends: &'static [usize],
    eod: bool,
}

fn case(name: &'static str, d: Dialect, input: &'static [u8], ends: &'static [usize]) -> Case {
    Case {
        name,
        dialect: d,
        input,
        ends,
        eod: false,
    }
}

fn eod(name: &'static str, d: Dialect, input: &'static [u8], ends: &'static [usize]) -> Case {
    Case {
        eod: true,
        ..case(name, d, input, ends)
    }
}

fn run(cases: &[Case]) {
    for c in cases {
        let d = &c.dialect;
        let (ref_ends, ref_eod) = reference(d, c.input);
        assert_eq!(
            (&ref_ends[..], ref_eod),
            (c.ends, c.eod),
            "reference disagrees with the table: {}",
            c.name
        );
        let got = std::panic::catch_unwind(|| check_every_split(d, c.input))
            .unwrap_or_else(|_| panic!("case {:?} failed", c.name));
        assert_eq!((&got.ends[..], got.eod), (c.ends, c.eod), "case {}", c.name);
        let last_end = c.ends.last().copied().unwrap_or(0);
        if !got.eod {
            let pending = (c.input.len() - last_end) as u64;
            assert_eq!(got.pending, pending, "pending bytes: {}", c.name);
            assert_eq!(got.at_record_start, pending == 0, "{}", c.name);
        }
    }
}

#[test]
fn csv_cases() {
    let csv = Dialect::csv;
    run(&[
        case("empty input", csv(), b"", &[]),
        case("two rows", csv(), b"a,b\nc,d\n", &[4, 8]),
        case("empty lines", csv(), b"\n\n", &[1, 2]),
        case("quoted newline", csv(), b"1,\"a\nb\"\n2\n", &[8, 10]),
        case(
            "quoted delimiter and quotes",
            csv(),
            b"\"x,\"\"y\"\"\n\",z\n",
            &[13],
        ),
        case(
            "quote opens mid-field",
            csv(),
            b"ab\"c\nd\"e\nf\n",
            &[9, 11],
        ),
        case("doubled quote then newline", csv(), b"\"a\"\"\nb\"\n", &[8]),
        case("empty quoted field", csv(), b"\"\"\n\"\"\"\"\n", &[3, 8]),
        case("crlf", csv(), b"a,b\r\nc\r\n", &[5, 8]),
        case("quoted crlf", csv(), b"\"a\r\nb\"\r\n", &[8]),
        case("missing final newline", csv(), b"a\nb", &[2]),
        case("unterminated quote", csv(), b"a\n\"b\nc\n", &[2]),
        case("escape is quote by default", csv(), b"\"a\\\"\nb\"\n", &[5]),
        case(
            "backslash escape",
            csv_with(b'"', b'\\'),
            b"\"a\\\"\nb\"\n",
            &[8],
        ),
        case(
            "escaped escape",
            csv_with(b'"', b'\\'),
            b"\"a\\\\\"\nb\n",
            &[6, 8],
        ),
        case(
            "escape before plain",
            csv_with(b'"', b'\\'),
            b"\"a\\b\"\n",
            &[6],
        ),
        case(
            "escape outside quotes",
            csv_with(b'"', b'\\'),
            b"a\\\"b\"\n",
            &[6],
        ),
        case(
            "escape before newline",
            csv_with(b'"', b'\\'),
            b"\"\\\n\"\n",
            &[5],
        ),
        case(
            "single quote",
            csv_with(b'\'', b'\''),
            b"'a\nb',\"c\n",
            &[9],
        ),
        case(
            "quote as escape target",
            csv_with(b'\'', b'!'),
            b"'a!'\n'\n",
            &[7],
        ),
        eod("end marker", csv(), b"a\n\\.\nb\n", &[2]),
        eod("end marker crlf", csv(), b"a\r\n\\.\r\nb\r\n", &[3]),
        eod("end marker first", csv(), b"\\.\nb\n", &[]),
        eod("end marker after empty line", csv(), b"\n\\.\n", &[1]),
        case("quoted end marker", csv(), b"\"\\.\"\n", &[5]),
        case("end marker then text", csv(), b"\\.x\n", &[4]),
        case("end marker then cr", csv(), b"\\.\rx\n", &[5]),
        case("end marker in quoted field", csv(), b"\"a\n\\.\n\"\n", &[8]),
        case(
            "mid-record marker is data in csv",
            csv(),
            b"a\\.\nb\n",
            &[4, 6],
        ),
        case("unterminated end marker", csv(), b"a\n\\.", &[2]),
        case(
            "end marker off",
            no_marker(csv()),
            b"a\n\\.\nb\n",
            &[2, 5, 7],
        ),
        eod(
            "backslash quote marker",
            csv_with(b'\\', b'\\'),
            b"\\a\\\n\\.\n",
            &[4],
        ),
        case(
            "backslash quote",
            csv_with(b'\\', b'\\'),
            b"\\a\n\\\n",
            &[5],
        ),
    ]);
}

#[test]
fn text_cases() {
    let text = Dialect::text;
    run(&[
        case("empty input", text(), b"", &[]),
        case("two rows", text(), b"a\tb\nc\n", &[4, 6]),
        case("backslash newline is data", text(), b"a\\\nb\n", &[5]),
        case(
            "escaped backslash before newline",
            text(),
            b"a\\\\\nb\n",
            &[4, 6],
        ),
        case("three backslashes", text(), b"a\\\\\\\nb\n", &[7]),
        case("crlf", text(), b"a\r\nb\r\n", &[3, 6]),
        case("null markers", text(), b"\\N\tx\n\\N\n", &[5, 8]),
        case("quotes mean nothing", text(), b"\"a\n\"\n", &[3, 5]),
        case("missing final newline", text(), b"a\nb\\", &[2]),
        eod("end marker", text(), b"a\n\\.\nb\n", &[2]),
        eod("end marker crlf", text(), b"a\r\n\\.\r\nb\r\n", &[3]),
        eod("end marker first", text(), b"\\.\n", &[]),
        eod("mid-record end marker", text(), b"a\\.\nb\n", &[4]),
        eod(
            "mid-record end marker crlf",
            text(),
            b"x\ta\\.\r\nb\n",
            &[7],
        ),
        case("escaped backslash then dot", text(), b"a\n\\\\.\n", &[2, 6]),
        case("end marker then text", text(), b"\\.x\n", &[4]),
        case("end marker then cr", text(), b"\\.\rx\n", &[5]),
        case("unterminated end marker", text(), b"a\n\\.", &[2]),
        case(
            "end marker off",
            no_marker(text()),
            b"a\n\\.\nb\n",
            &[2, 5, 7],
        ),
    ]);
}

#[test]
fn long_rows_cross_blocks() {
    // Rows longer than the 64-byte fast-path block, with quotes, escapes and
    // markers landing on both sides of block edges.
    let mut csv = Vec::new();
    let mut text = Vec::new();
    for i in 0..40 {
        let pad = "x".repeat(i * 7 % 90);
        csv.extend_from_slice(format!("{i},\"{pad}\n\"\"{pad}\",{pad}\n").as_bytes());
        text.extend_from_slice(format!("{i}\t{pad}\\\n\\\\{pad}\\N\n").as_bytes());
    }
    csv.extend_from_slice(b"\\.\nlost\n");
    text.extend_from_slice(b"\\.\nlost\n");
    for (d, input) in [(Dialect::csv(), &csv), (Dialect::text(), &text)] {
        let (ends, eod) = reference(&d, input);
        assert_eq!(ends.len(), 40);
        assert!(eod);
        let mut s = Scanner::new(d.clone());
        let b = s.scan(input, Stop::Last).unwrap();
        assert_eq!(b.offset, *ends.last().unwrap());
        assert_eq!(b.records, 40);
        assert_eq!(b.lines, 80);
        assert!(s.end_of_data());
        // Every split point of a long input, with Stop::Last only (cheap).
        for cut in 0..input.len() {
            let want: Vec<usize> = ends.clone();
            assert_eq!(feed_last(&d, input, &[cut], &want).ends, ends);
        }
    }
}

#[test]
fn counts_after_end_of_data_are_frozen() {
    let mut s = Scanner::new(Dialect::text());
    assert_eq!(s.scan(b"\\.\n", Stop::Last), None);
    assert!(s.end_of_data());
    assert_eq!(s.scan(b"a\nb\n", Stop::Last), None);
    assert!(s.at_record_start());
}

#[test]
fn finish_recognises_a_final_end_marker() {
    for d in [Dialect::text(), Dialect::csv()] {
        for (input, is_marker) in [
            (&b"a\n\\."[..], true),
            (b"a\n\\.\r", true),
            (b"a\n\\", false),
            (b"a\nb", false),
            (b"a\n", false),
        ] {
            let mut s = Scanner::new(d.clone());
            s.scan(input, Stop::Last);
            assert_eq!(s.finish(), is_marker, "{input:?}");
            assert_eq!(s.end_of_data(), is_marker);
        }
    }
}

/// A binary COPY file: header (with `ext` extension bytes), tuples, and
/// optionally the trailer. Returns the bytes and the end of each tuple.
fn binary_file(
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

fn sample_tuples() -> Vec<Vec<Option<Vec<u8>>>> {
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
    assert_eq!(spans[1].line, 1);
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

#[test]
fn records_splits_whole_buffers() {
    let d = Dialect::csv();
    let input = b"a,\"x\ny\"\r\nb\n\nc";
    let spans: Vec<RecordSpan> = records(&d, input).collect();
    let want = [(0, 9, 0), (9, 11, 2), (11, 12, 3), (12, 13, 4)];
    let got: Vec<(usize, usize, u64)> = spans.iter().map(|r| (r.start, r.end, r.line)).collect();
    assert_eq!(got, want);
    // The end marker, terminated or not, ends the records.
    for input in [&b"a\nb\n\\.\nc\n"[..], b"a\nb\n\\.", b"a\nb\n\\.\r"] {
        let n = records(&Dialect::text(), input).count();
        assert_eq!(n, 2, "{input:?}");
    }
    assert_eq!(records(&Dialect::text(), b"").count(), 0);
    // A mid-record text marker keeps its record.
    let spans: Vec<RecordSpan> = records(&Dialect::text(), b"a\nb\\.\nc\n").collect();
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[1].end, 6);
}

#[test]
fn invalid_dialects_are_errors() {
    let mut quote_is_delim = Dialect::csv();
    quote_is_delim.quote = b',';
    let mut newline_delim = Dialect::text();
    newline_delim.delimiter = b'\n';
    let mut letter_delim = Dialect::text();
    letter_delim.delimiter = b'a';
    let mut newline_quote = Dialect::csv();
    newline_quote.quote = b'\n';
    for d in [quote_is_delim, newline_delim, letter_delim, newline_quote] {
        assert!(d.validate().is_err(), "{d:?}");
        let mut s = Scanner::new(d);
        assert!(s.error().is_some());
        assert_eq!(s.scan(b"a\n", Stop::Last), None);
    }
    for d in [Dialect::text(), Dialect::csv(), Dialect::binary()] {
        assert_eq!(d.validate(), Ok(()));
    }
}

/// Bytes that matter to some dialect, and a lot of plain `a`s so that long
/// inputs take the 64-byte fast path too.
fn special_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    (0usize..40).prop_flat_map(move |plain| {
        let mut alphabet = b"\"\\,\n\r.'".to_vec();
        alphabet.resize(alphabet.len() + plain, b'a');
        prop::collection::vec(prop::sample::select(alphabet), 0..max)
    })
}

fn dialects() -> impl Strategy<Value = Dialect> {
    let base = prop::sample::select(vec![
        Dialect::text(),
        Dialect::csv(),
        csv_with(b'"', b'\\'),
        csv_with(b'\'', b'\''),
        csv_with(b'\'', b'"'),
        csv_with(b'\\', b'\\'),
        csv_with(b'.', b'.'),
    ]);
    (base, any::<bool>()).prop_map(|(mut d, marker)| {
        d.end_marker = marker;
        d
    })
}

/// Sorted, deduplicated cut points inside `0..=len`.
fn cuts(len: usize, raw: &[usize]) -> Vec<usize> {
    let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn agrees_with_reference(d in dialects(), input in special_bytes(300),
                             raw in prop::collection::vec(any::<usize>(), 0..6)) {
        let (ends, eod) = reference(&d, &input);
        let cuts = cuts(input.len(), &raw);
        let first = feed_first(&d, &input, &cuts);
        prop_assert_eq!(&first.ends, &ends);
        prop_assert_eq!(first.eod, eod);
        let last = feed_last(&d, &input, &cuts, &ends);
        prop_assert_eq!(&last, &first);
        let whole = feed_first(&d, &input, &[]);
        prop_assert_eq!(&whole, &first);
    }

    #[test]
    fn byte_at_a_time_equals_one_feed(d in dialects(), input in special_bytes(150)) {
        let whole = feed_first(&d, &input, &[]);
        let bytes: Vec<usize> = (1..input.len()).collect();
        prop_assert_eq!(&feed_last(&d, &input, &bytes, &whole.ends), &whole);
        prop_assert_eq!(&feed_first(&d, &input, &bytes), &whole);
    }

    #[test]
    fn records_agree_with_scanner(d in dialects(), input in special_bytes(200)) {
        let (ends, eod) = reference(&d, &input);
        let spans: Vec<RecordSpan> = records(&d, &input).collect();
        let mut start = 0;
        for (span, &end) in spans.iter().zip(&ends) {
            prop_assert_eq!((span.start, span.end), (start, end));
            prop_assert_eq!(span.line, newlines(&input[..start]));
            start = end;
        }
        let last = ends.last().copied().unwrap_or(0);
        let rest = &input[last..];
        let marker = rest == b"\\." || rest == b"\\.\r";
        let final_marker = d.end_marker && marker;
        let tail = !(eod || rest.is_empty() || final_marker);
        prop_assert_eq!(spans.len(), ends.len() + usize::from(tail));
    }

    #[test]
    fn never_panics(d in dialects(), input in prop::collection::vec(any::<u8>(), 0..300),
                    raw in prop::collection::vec(any::<usize>(), 0..4)) {
        let cuts = cuts(input.len(), &raw);
        feed_first(&d, &input, &cuts);
        let mut b = Dialect::binary();
        b.end_marker = d.end_marker;
        feed_first(&b, &input, &cuts);
        let _ = records(&d, &input).count();
        let _ = records(&b, &input).count();
    }

    #[test]
    fn binary_tuples_at_any_split(
        tuples in prop::collection::vec(
            prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..40)), 0..5),
            0..8),
        ext in 0usize..4, trailer in any::<bool>(),
        raw in prop::collection::vec(any::<usize>(), 0..5)) {
        let (file, ends) = binary_file(ext, &tuples, trailer);
        let cuts = cuts(file.len(), &raw);
        let got = feed_first(&Dialect::binary(), &file, &cuts);
        prop_assert_eq!(&got.ends, &ends);
        prop_assert_eq!(got.eod, trailer);
        prop_assert_eq!(&feed_last(&Dialect::binary(), &file, &cuts, &ends), &got);
    }
}
