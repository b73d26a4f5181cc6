use super::*;

/// Splits `rec` and returns the values, `None` for NULL.
fn split(d: &Dialect, nulls: &NullSpec, rec: &[u8]) -> Result<Vec<Option<Vec<u8>>>, FieldError> {
    let mut f = Fields::new();
    split_record(d, nulls, rec, &mut f)?;
    Ok(f.iter().map(|v| v.map(<[u8]>::to_vec)).collect())
}

fn v(s: &[u8]) -> Option<Vec<u8>> {
    Some(s.to_vec())
}

fn text(rec: &[u8]) -> Vec<Option<Vec<u8>>> {
    split(&Dialect::text(), &NullSpec::text(), rec).unwrap()
}

fn csv(rec: &[u8]) -> Vec<Option<Vec<u8>>> {
    split(&Dialect::csv(), &NullSpec::csv(), rec).unwrap()
}

#[test]
fn text_fields_and_nulls() {
    assert_eq!(text(b"a\tb\n"), [v(b"a"), v(b"b")]);
    assert_eq!(text(b"a\t\\N\t\n"), [v(b"a"), None, v(b"")]);
    assert_eq!(text(b""), [v(b"")]);
    assert_eq!(text(b"\r\n"), [v(b"")]);
    assert_eq!(text(b"x\r"), [v(b"x")]);
    // The NULL check uses the raw bytes.
    assert_eq!(text(b"\\\\N\t\\N\\N\n"), [v(b"\\N"), v(b"NN")]);
    // An escaped delimiter is data.
    assert_eq!(text(b"a\\\tb\n"), [v(b"a\tb")]);
    // A backslash that ends the data is no part of the field, also for
    // the NULL check (the server gives NULL for each of these).
    assert_eq!(text(b"x\t\\N\\"), [v(b"x"), None]);
    assert_eq!(text(b"x\t\\"), [v(b"x"), v(b"")]);
    let na = NullSpec {
        null: b"NA".to_vec(),
        ..NullSpec::text()
    };
    assert_eq!(
        split(&Dialect::text(), &na, b"x\tNA\\").unwrap(),
        [v(b"x"), None]
    );
}

#[test]
fn text_escapes() {
    let table: &[(&[u8], &[u8])] = &[
        (b"\\b\\f\\n\\r\\t\\v\\\\", b"\x08\x0c\n\r\t\x0b\\"),
        (b"\\101\\1012\\7\\18", b"AA2\x07\x018"),
        (b"\\0", b"\0"),
        (b"\\x00", b"\0"),
        (b"\\x41\\x4g\\xg\\xFF", b"A\x04gxg\xff"),
        (b"\\q\\N\\\\.", b"qN\\."),
        (b"\\477", b"\x3f"),
        (b"a\\", b"a"),
        (b"a\\\n", b"a\n"),
        (b"a\\\r\n", b"a\r"),
    ];
    for (raw, want) in table {
        let mut f = Fields::new();
        let r = split_record(&Dialect::text(), &NullSpec::text(), raw, &mut f);
        if want.contains(&0) {
            assert!(r.is_err(), "{raw:?}: NUL must be refused");
            continue;
        }
        r.unwrap();
        assert_eq!(f.get(0), Some(*want), "{raw:?}");
    }
    // `\.` never reaches the server's field splitter as data: refused.
    for raw in [&b"a\\.b"[..], b"\\.", b"x\ty\\.\n"] {
        let mut f = Fields::new();
        let r = split_record(&Dialect::text(), &NullSpec::text(), raw, &mut f);
        assert!(r.is_err(), "{raw:?}");
    }
    // A NUL escape in a field that is NULL does not matter.
    let nulls = NullSpec {
        null: b"\\0".to_vec(),
        ..NullSpec::text()
    };
    assert_eq!(split(&Dialect::text(), &nulls, b"\\0").unwrap(), [None]);
}

#[test]
fn text_errors() {
    for rec in [&b"a\nb\n"[..], b"a\rb\n", b"a\r\r\n"] {
        let err = split(&Dialect::text(), &NullSpec::text(), rec).unwrap_err();
        assert!(err.message().starts_with("literal"), "{rec:?}: {err}");
    }
    let mut bad = Dialect::text();
    bad.delimiter = b'\\';
    assert!(split(&bad, &NullSpec::text(), b"a").is_err());
}

#[test]
fn csv_fields_quotes_and_nulls() {
    assert_eq!(csv(b"a,b,c\n"), [v(b"a"), v(b"b"), v(b"c")]);
    assert_eq!(csv(b",\"\",\n"), [None, v(b""), None]);
    assert_eq!(csv(b"\"a,b\",\"x\"\"y\"\r\n"), [v(b"a,b"), v(b"x\"y")]);
    assert_eq!(csv(b"\"multi\nline\"\n"), [v(b"multi\nline")]);
    // A quote opens a quoted stretch anywhere in a field.
    assert_eq!(csv(b"ab\"c,d\"e,f"), [v(b"abc,de"), v(b"f")]);
    // Backslashes are plain data in CSV.
    assert_eq!(csv(b"\\N,\\.\n"), [v(b"\\N"), v(b"\\.")]);
    let mut f = Fields::new();
    split_record(&Dialect::csv(), &NullSpec::csv(), b"a,\"b\"", &mut f).unwrap();
    assert!(!f.raw_was_quoted(0) && f.raw_was_quoted(1) && !f.raw_was_quoted(2));
}

#[test]
fn csv_custom_quote_escape_delimiter() {
    let d = Dialect {
        delimiter: b';',
        quote: b'\'',
        escape: b'\\',
        ..Dialect::csv()
    };
    let got = split(&d, &NullSpec::csv(), b"'a;\\'b\\\\';'c\\d';\"x\"\n").unwrap();
    assert_eq!(got, [v(b"a;'b\\"), v(b"c\\d"), v(b"\"x\"")]);
    // With a distinct escape, a doubled quote closes and reopens.
    assert_eq!(split(&d, &NullSpec::csv(), b"'a''b'").unwrap(), [v(b"ab")]);
}

#[test]
fn csv_force_null_and_force_not_null() {
    let nulls = NullSpec {
        null: b"NA".to_vec(),
        force_null: vec![true, false, true],
        force_not_null: vec![false, true, true],
    };
    let got = split(&Dialect::csv(), &nulls, b"\"NA\",NA,NA,\"NA\",NA\n").unwrap();
    // 0: quoted + FORCE_NULL -> NULL; 1: FORCE_NOT_NULL -> "NA";
    // 2: both: FORCE_NOT_NULL wins for unquoted; 3: quoted -> "NA";
    // 4: unquoted -> NULL.
    assert_eq!(got, [None, v(b"NA"), v(b"NA"), v(b"NA"), None]);
    let empty = NullSpec {
        force_null: vec![true],
        ..NullSpec::csv()
    };
    assert_eq!(
        split(&Dialect::csv(), &empty, b"\"\",\"\"").unwrap(),
        [None, v(b"")]
    );
}

#[test]
fn csv_errors() {
    let cases: &[(&[u8], &str)] = &[
        (b"\"abc\n", "unterminated CSV quoted field"),
        (b"a,\"b", "unterminated CSV quoted field"),
        (b"a\nb", "unquoted newline found in data"),
        (b"a\rb\n", "unquoted carriage return found in data"),
    ];
    for (rec, msg) in cases {
        let err = split(&Dialect::csv(), &NullSpec::csv(), rec).unwrap_err();
        assert_eq!(err.message(), *msg, "{rec:?}");
    }
    let err = split(&Dialect::csv(), &NullSpec::csv(), b"a,\"b").unwrap_err();
    assert_eq!(err.field(), 1);
    assert_eq!(err.to_string(), "unterminated CSV quoted field (field 2)");
}

#[test]
fn binary_tuples() {
    let mut rec = 3i16.to_be_bytes().to_vec();
    rec.extend_from_slice(&2i32.to_be_bytes());
    rec.extend_from_slice(b"hi");
    rec.extend_from_slice(&(-1i32).to_be_bytes());
    rec.extend_from_slice(&0i32.to_be_bytes());
    let nulls = NullSpec::text();
    let got = split(&Dialect::binary(), &nulls, &rec).unwrap();
    assert_eq!(got, [v(b"hi"), None, v(b"")]);
    for bad in [
        &rec[..rec.len() - 1],
        &rec[..5],
        &(-1i16).to_be_bytes()[..],
        &[0],
    ] {
        assert!(split(&Dialect::binary(), &nulls, bad).is_err(), "{bad:?}");
    }
    let mut extra = rec.clone();
    extra.push(0);
    assert!(split(&Dialect::binary(), &nulls, &extra).is_err());
}

/// Encodes values the way `COPY TO` would (text format), with some
/// bytes written as octal or hex escapes chosen by `style`.
fn encode_text(values: &[Option<Vec<u8>>], style: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        let Some(value) = value else {
            out.extend_from_slice(b"\\N");
            continue;
        };
        for (k, &b) in value.iter().enumerate() {
            match (b, (k as u8).wrapping_add(style) % 5) {
                (b'\\', _) => out.extend_from_slice(b"\\\\"),
                (b'\n', _) => out.extend_from_slice(b"\\n"),
                (b'\r', _) => out.extend_from_slice(b"\\r"),
                (b'\t', _) => out.extend_from_slice(b"\\t"),
                (_, 0) => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
                (_, 1) => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                _ => out.push(b),
            }
        }
    }
    out.push(b'\n');
    out
}

/// Encodes values as CSV: NULL unquoted empty, values quoted when they
/// must be (or when `style` says so).
fn encode_csv(values: &[Option<Vec<u8>>], style: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let Some(value) = value else { continue };
        let special = |b: &u8| b",\"\r\n".contains(b);
        // `\.` alone at the start of a line would be the end marker.
        let marker = i == 0 && value == b"\\.";
        if marker || value.is_empty() || value.iter().any(special) || (i as u8 ^ style) & 1 == 0 {
            out.push(b'"');
            for &b in value {
                if b == b'"' {
                    out.push(b'"');
                }
                out.push(b);
            }
            out.push(b'"');
        } else {
            out.extend_from_slice(value);
        }
    }
    out.extend_from_slice(if style & 2 == 0 { b"\n" } else { b"\r\n" });
    out
}

fn values() -> impl proptest::strategy::Strategy<Value = Vec<Option<Vec<u8>>>> {
    use proptest::prelude::*;
    let byte = prop::sample::select(b"a,\"\\\n\r\t.N'x\xff".to_vec());
    prop::collection::vec(prop::option::of(prop::collection::vec(byte, 0..8)), 1..6)
}

proptest::proptest! {
    #[test]
    fn text_round_trip(values in values(), style in 0u8..5) {
        let rec = encode_text(&values, style);
        let d = Dialect::text();
        let spans: Vec<_> = crate::scan::records(&d, &rec).collect();
        proptest::prop_assert_eq!(spans.len(), 1);
        proptest::prop_assert_eq!(split(&d, &NullSpec::text(), &rec).unwrap(), values);
    }

    #[test]
    fn next_special_finds_what_a_byte_loop_finds(
        rec in proptest::collection::vec(proptest::sample::select(b"ab,\"\\\n\r".to_vec()), 0..40),
        from in 0usize..40,
        special in proptest::sample::select(vec![*b",\"\n\r", *b"\"\"\"\"", *b"\"\\\"\\", *b",\\\n\r"]),
    ) {
        let from = from.min(rec.len());
        let naive = rec[from..]
            .iter()
            .position(|b| special.contains(b))
            .map_or(rec.len(), |k| from + k);
        proptest::prop_assert_eq!(next_special(&rec, from, special), naive);
    }

    #[test]
    fn csv_round_trip(values in values(), style in 0u8..4) {
        let rec = encode_csv(&values, style);
        let d = Dialect::csv();
        let spans: Vec<_> = crate::scan::records(&d, &rec).collect();
        proptest::prop_assert_eq!(spans.len(), 1);
        proptest::prop_assert_eq!(split(&d, &NullSpec::csv(), &rec).unwrap(), values);
    }
}

#[test]
fn buffers_are_reused() {
    let mut f = Fields::new();
    split_record(
        &Dialect::csv(),
        &NullSpec::csv(),
        b"aaaa,bbbb,cccc\n",
        &mut f,
    )
    .unwrap();
    let cap = (f.buf.capacity(), f.slots.capacity());
    split_record(&Dialect::csv(), &NullSpec::csv(), b"x,y\n", &mut f).unwrap();
    assert_eq!((f.buf.capacity(), f.slots.capacity()), cap);
    assert_eq!(f.len(), 2);
    assert_eq!(f.get(2), None);
    assert!(!f.is_null(2));
}

/// The first `n` fields of `rec`, as [`split_record_prefix`] reads them.
fn prefix(d: &Dialect, rec: &[u8], n: usize) -> Result<Vec<Option<Vec<u8>>>, FieldError> {
    let mut f = Fields::new();
    split_record_prefix(d, &NullSpec::for_dialect(d), rec, &mut f, n)?;
    Ok(f.iter().map(|v| v.map(<[u8]>::to_vec)).collect())
}

#[test]
fn a_prefix_split_reads_the_leading_fields_as_a_whole_split_does() {
    let (c, t) = (Dialect::csv(), Dialect::text());
    let rec = b"\"a,\"\"b\",,\"c\nd\",e\r\n";
    assert_eq!(prefix(&c, rec, 1).unwrap(), [v(b"a,\"b")]);
    assert_eq!(prefix(&c, rec, 2).unwrap(), [v(b"a,\"b"), None]);
    assert_eq!(prefix(&c, rec, 9).unwrap(), csv(rec));
    assert_eq!(
        prefix(&t, b"\\N\tx\\ty\tz\n", 2).unwrap(),
        [None, v(b"x\ty")]
    );
    // A record with fewer fields gives what it has.
    assert_eq!(prefix(&c, b"1,2\n", 3).unwrap(), [v(b"1"), v(b"2")]);
    // What follows the prefix is not read: its errors are the server's.
    assert!(split(&c, &NullSpec::csv(), b"1,x\ry\n").is_err());
    assert_eq!(prefix(&c, b"1,x\ry\n", 1).unwrap(), [v(b"1")]);
    // An error inside the prefix is still one.
    assert!(prefix(&c, b"\"1,2\n", 1).is_err());
}
