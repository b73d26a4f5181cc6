//! The row-boundary scanner against a table of cases, at every split point,
//! and against a byte-at-a-time reference written from PostgreSQL's
//! `CopyReadLineText` (`common::reference`); the random inputs are in
//! `scan_props.rs`.
//!
//! Every case is checked four ways: the expected ends written in the table,
//! the reference implementation, the scanner fed in one piece, and the
//! scanner fed in two pieces at every split point and one byte at a time
//! (with both `Stop::First` and `Stop::Last`).

use pgtide_copyfmt::scan::{records, Dialect, Format, RecordSpan, Scanner, Stop};

mod common;

use common::*;

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
        eod("end marker then cr", csv(), b"\\.\rx\n", &[]),
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
        case(
            "mid-record marker is data from PostgreSQL 18",
            Dialect {
                mid_record_marker: false,
                ..text()
            },
            b"a\\.\nb\n",
            &[4, 6],
        ),
        eod(
            "mid-record end marker crlf",
            text(),
            b"x\ta\\.\r\nb\n",
            &[6],
        ),
        case("escaped backslash then dot", text(), b"a\n\\\\.\n", &[2, 6]),
        case("end marker then text", text(), b"\\.x\n", &[4]),
        eod("end marker then cr", text(), b"\\.\rx\n", &[]),
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

/// A `\.` with no line break after it is not the end marker: the server
/// reads past the end of the data and finds none (issue 8: an unterminated
/// `\.` line was dropped, and a CSV row `\.` lost with it).
#[test]
fn an_unterminated_end_marker_is_a_last_record() {
    use pgtide_copyfmt::scan::EolError;
    for d in [Dialect::text(), Dialect::csv()] {
        let text = d.format == Format::Text;
        for (input, error) in [
            (&b"a\n\\."[..], text.then_some(EolError::MarkerCorrupt)),
            (b"a\n\\.\r", Some(EolError::MarkerStyle)),
            (
                b"a\r\n\\.\r",
                Some(match text {
                    true => EolError::MarkerCorrupt,
                    false => EolError::CarriageReturn,
                }),
            ),
            (b"a\n\\", None),
            (b"a\nb", None),
        ] {
            let mut s = Scanner::new(d.clone());
            s.scan(input, Stop::Last);
            assert!(!s.finish(), "{input:?}");
            assert!(!s.end_of_data());
            assert_eq!(s.pending_error(), error, "{d:?} {input:?}");
        }
    }
}

/// What PostgreSQL 15-17 do after `\.` (checked against the servers): a
/// line break of the stream's style ends the data; another style is an
/// error in both formats; anything else an error in text, data in CSV.
#[test]
fn end_marker_errors_follow_the_server() {
    use pgtide_copyfmt::scan::EolError;
    const STYLE: Option<EolError> = Some(EolError::MarkerStyle);
    const CORRUPT: Option<EolError> = Some(EolError::MarkerCorrupt);
    type Case = (&'static [u8], &'static [(usize, Option<EolError>)]);
    let text: [Case; 6] = [
        (b"1\n\\.\r\n3\n", &[(2, None), (6, STYLE), (8, None)]),
        (b"1\r\n\\.\n3\r\n", &[(3, None), (6, STYLE), (9, None)]),
        (b"1\r\\.\n3\r", &[(2, None), (7, STYLE)]),
        (b"1\r\n\\.x\r\n", &[(3, None), (8, CORRUPT)]),
        (b"1\n\\.\rx\n", &[(2, None), (7, STYLE)]),
        (b"a\\.b\nc\n", &[(5, CORRUPT), (7, None)]),
    ];
    let csv: [Case; 5] = [
        (b"1\n\\.\r\n3\n", &[(2, None), (6, STYLE), (8, None)]),
        (
            b"1\r\n\\.\n3\r\n",
            &[(3, None), (6, Some(EolError::Newline)), (9, None)],
        ),
        (b"1\r\\.\n3\r", &[(2, None), (7, STYLE)]),
        (b"1\r\n\\.x\r\n", &[(3, None), (8, None)]),
        (b"1\r\n\\.\r\r3\r\n", &[(3, None), (10, STYLE)]),
    ];
    for (d, cases) in [(Dialect::text(), &text[..]), (Dialect::csv(), &csv[..])] {
        for (input, want) in cases {
            let got: Vec<(usize, Option<EolError>)> =
                records(&d, input).map(|r| (r.end, r.eol_error)).collect();
            assert_eq!(
                &got,
                want,
                "{:?} {:?}",
                d.format,
                String::from_utf8_lossy(input)
            );
        }
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
    // The end marker ends the records; without a line break after it, it
    // is a last record (the server rejects it in text).
    for (input, n) in [
        (&b"a\nb\n\\.\nc\n"[..], 2),
        (b"a\nb\n\\.", 3),
        (b"a\nb\n\\.\r", 3),
    ] {
        assert_eq!(records(&Dialect::text(), input).count(), n, "{input:?}");
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

/// Issue 8 A1: `\n`, `\r\n` and a lone `\r` end records; the first record
/// settles the style, and a record with a line break that does not fit it
/// is marked, as the server would reject it.
#[test]
fn line_endings_follow_the_first_record() {
    use pgtide_copyfmt::scan::{records_with, Eol, EolError};
    // Constants, not locals: the expected spans below are `'static`.
    const CR: EolError = EolError::CarriageReturn;
    const NL: EolError = EolError::Newline;
    type Ends = &'static [(usize, Option<EolError>)];
    let cases: [(Dialect, &[u8], Ends); 8] = [
        (
            Dialect::csv(),
            b"id,v\r1,a\r2,b\r3,c\r",
            &[(5, None), (9, None), (13, None), (17, None)],
        ),
        (Dialect::text(), b"1\ta\r2\tb", &[(4, None), (7, None)]),
        (
            Dialect::csv(),
            b"1,\"a\r\nb\"\r\n2,x\r\n",
            &[(10, None), (15, None)],
        ),
        (
            Dialect::csv(),
            b"1,a\n2,b\r\n3,c\n",
            &[(4, None), (9, Some(CR)), (13, None)],
        ),
        (
            Dialect::csv(),
            b"1,a\r\n2,b\n3,c\r\n",
            &[(5, None), (9, Some(NL)), (14, None)],
        ),
        (
            Dialect::csv(),
            b"1,a\r\n2,\rb\r\n",
            &[(5, None), (11, Some(CR))],
        ),
        (
            Dialect::text(),
            b"1\ta\r2\nb\r3\r",
            &[(4, None), (8, Some(NL)), (10, None)],
        ),
        (
            Dialect::csv(),
            b"1,\"a\rb\"\n2\r\n",
            &[(8, None), (11, Some(CR))],
        ),
    ];
    for (d, input, want) in cases {
        check_every_split(&d, input);
        let got: Vec<_> = records(&d, input).map(|r| (r.end, r.eol_error)).collect();
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(input));
    }
    // A chunk of a `\n` file that starts with a bad record is read in the
    // file's style, not settled anew by that record.
    let got: Vec<_> = records_with(&Dialect::csv(), Eol::Nl, b"a\rb\nc\n")
        .map(|r| (r.end, r.eol_error))
        .collect();
    assert_eq!(got, [(4, Some(CR)), (6, None)]);
    // A `\r\n` file whose last line ends in a lone `\r`.
    let got: Vec<_> = records(&Dialect::csv(), b"a\r\nb\r")
        .map(|r| (r.end, r.eol_error))
        .collect();
    assert_eq!(got, [(3, None), (5, Some(CR))]);
}

/// Issue 8 A2: the server's `line N` counts quoted `\r` while the style is
/// unknown (always so inside a COPY's first record) or `\r`-based, quoted
/// `\n` once it is `\n`.
#[test]
fn server_line_numbers_follow_the_servers_count() {
    use pgtide_copyfmt::scan::record_at_server_line;
    let csv = Dialect::csv();
    // The issue's file: record 0 spans server lines 1..=2.
    let data = b"1,\"a\r\nb\"\r\n2,x\r\nbad,y\r\n4,z\r\n";
    let at = |line| record_at_server_line(&csv, data, line);
    assert_eq!(
        [at(1), at(2), at(3), at(4), at(5), at(6)],
        [Some(0), Some(0), Some(1), Some(2), Some(3), None]
    );
    // `\n` style: a quoted `\n` in the first record is not counted, later ones are.
    let data = b"1,\"a\nb\"\n2,\"c\nd\"\n3,x\n";
    let at = |line| record_at_server_line(&csv, data, line);
    assert_eq!(
        [at(1), at(2), at(3), at(4), at(5)],
        [Some(0), Some(1), Some(1), Some(2), None]
    );
    // Text counts records only.
    let text = Dialect::text();
    assert_eq!(record_at_server_line(&text, b"a\\\nb\nc\n", 2), Some(1));
    assert_eq!(record_at_server_line(&text, b"a\nc\n", 3), None);
}
