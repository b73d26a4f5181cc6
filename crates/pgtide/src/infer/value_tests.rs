use super::*;

fn mask(v: &str) -> Mask {
    classify(v.as_bytes()).mask
}

#[test]
fn booleans_are_conservative() {
    for v in ["true", "false", "TRUE", "False", "t", "f"] {
        assert_eq!(mask(v), BOOL, "{v}");
    }
    for v in [
        "yes", "no", "y", "n", "on", "off", "T", "F", "1", "0", "tru",
    ] {
        assert_eq!(mask(v) & BOOL, 0, "{v}");
    }
}

#[test]
fn integers_by_range() {
    assert_eq!(mask("0"), INT2 | INT4 | INT8 | NUMERIC | FLOAT8);
    assert_eq!(mask("-32768") & INT2, INT2);
    assert_eq!(mask("32768") & (INT2 | INT4), INT4);
    assert_eq!(mask("-2147483648") & INT4, INT4);
    assert_eq!(mask("2147483648") & (INT4 | INT8), INT8);
    assert_eq!(mask("9223372036854775807"), INT8 | NUMERIC); // past 2^53: no double
    assert_eq!(mask("9223372036854775808"), NUMERIC);
    assert_eq!(mask("123456789012345678901234567890"), NUMERIC);
}

#[test]
fn leading_zeros_plus_signs_and_spaces_stay_text() {
    for v in [
        "007", "00", "-01", "+5", " 5", "5 ", "1_000", "1,000", "0x1F", "-", "", "01.5",
    ] {
        assert_eq!(mask(v), 0, "{v:?}");
    }
}

#[test]
fn decimals() {
    let c = classify(b"-12.340");
    assert_eq!(c.mask, NUMERIC | FLOAT8);
    assert_eq!((c.int_digits, c.scale, c.floaty), (2, 3, false));
    assert_eq!(mask("0.5"), NUMERIC | FLOAT8);
    assert_eq!(mask(".5"), NUMERIC | FLOAT8);
    assert_eq!(mask("-.5"), NUMERIC | FLOAT8);
    assert_eq!(mask("5."), 0);
    assert_eq!(mask("1.2.3"), 0);
    // More significant digits than a double keeps: numeric only.
    assert_eq!(mask("3.14159265358979323846"), NUMERIC);
}

#[test]
fn exponents_and_specials_are_double() {
    for v in ["1e5", "1E5", "-1.5e-3", "2.5E+10", "0e0"] {
        let c = classify(v.as_bytes());
        assert_eq!(c.mask, FLOAT8 | NUMERIC, "{v}");
        assert!(c.floaty && c.number, "{v}");
    }
    for v in ["NaN", "nan", "Infinity", "-Infinity", "inf", "-inf"] {
        let c = classify(v.as_bytes());
        assert_eq!(c.mask, FLOAT8 | NUMERIC, "{v}");
        assert!(c.floaty && !c.number, "{v}");
    }
    for v in ["1e", "e5", "1e5.5", "1e999", "12E4A", "1.e5"] {
        assert_eq!(mask(v), 0, "{v}");
    }
}

#[test]
fn dates_only_iso() {
    assert_eq!(mask("2024-02-29"), DATE | TIMESTAMP);
    assert_eq!(mask("2000-02-29"), DATE | TIMESTAMP);
    for v in [
        "2023-02-29",
        "1900-02-29",
        "2024-13-01",
        "2024-04-31",
        "0000-01-01",
        "2024-1-5",
        "03/04/2024",
        "04.03.2024",
        "4 Mar 2024",
        "20240304",
        "Mar 4, 2024",
    ] {
        assert_eq!(mask(v) & (DATE | TIMESTAMP), 0, "{v}");
    }
}

#[test]
fn timestamps_with_and_without_offsets() {
    for v in [
        "2024-03-04 10:00",
        "2024-03-04T10:00:00",
        "2024-03-04 23:59:59.123456",
    ] {
        assert_eq!(mask(v), TIMESTAMP, "{v}");
    }
    for v in [
        "2024-03-04T10:00:00Z",
        "2024-03-04 10:00:00+00",
        "2024-03-04 10:00:00.5-05:30",
        "2024-03-04T10:00+0100",
    ] {
        assert_eq!(mask(v), TIMESTAMPTZ, "{v}");
    }
    for v in [
        "2024-03-04 24:00:00",
        "2024-03-04 10:00:00.1234567", // PostgreSQL would round
        "2024-03-04 10:00:00 UTC",
        "2024-03-04 10:00:00 +00:00",
        "2024-03-04 10:00:00+16",
        "2024-03-04X10:00:00",
        "2024-03-04 1:00:00",
    ] {
        assert_eq!(mask(v), 0, "{v}");
    }
}

#[test]
fn times_need_seconds() {
    assert_eq!(mask("10:30:00"), TIME | INTERVAL);
    assert_eq!(mask("00:00:00.5"), TIME | INTERVAL);
    for v in ["10:30", "24:00:00", "9:30:00", "10:60:00", "10:30:61"] {
        assert_eq!(mask(v) & TIME, 0, "{v}");
    }
}

#[test]
fn intervals() {
    for v in [
        "P1D",
        "P1Y2M3DT4H5M6S",
        "PT0.5S",
        "P2W",
        "1 day",
        "3 days",
        "-3 days",
        "1 year 2 mons 3 days 04:05:06",
        "1 day 02:00:00",
        "25:00:00",
        "-01:00:00",
        "2 hours",
    ] {
        assert_eq!(mask(v), INTERVAL, "{v}");
    }
    for v in [
        "P",
        "PT",
        "P1H",
        "1d",
        "2h",
        "day",
        "1 dy",
        "P1.5D",
        "PT1.5M",
        // More than microseconds would be rounded.
        "PT1.1234567S",
        "P1DT2H3M4.99999999S",
        "PT1.2.3S",
    ] {
        assert_eq!(mask(v), 0, "{v}");
    }
}

/// A value past double precision's range, with an exponent within it,
/// is numeric only (float8in refuses it as out of range).
#[test]
fn numbers_past_double_range_are_numeric() {
    for v in [
        "999999999999999e300",
        "10000000000e300",
        "0.000000000000000000000001e-300",
    ] {
        assert_eq!(mask(v) & FLOAT8, 0, "{v}");
        assert_ne!(mask(v) & NUMERIC, 0, "{v}");
    }
    for v in ["1e300", "9e300", "0e300", "0.0e-300", "-1.5e-300"] {
        assert_ne!(mask(v) & FLOAT8, 0, "{v}");
    }
}

#[test]
fn uuids_canonical_only() {
    assert_eq!(mask("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), UUID);
    assert_eq!(mask("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"), UUID);
    for v in [
        "a0eebc999c0b4ef8bb6d6bb9bd380a11",
        "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
    ] {
        assert_eq!(mask(v), 0, "{v}");
    }
}

#[test]
fn json_objects_and_arrays() {
    for v in [
        r#"{"a": 1}"#,
        "[1, 2]",
        "{}",
        "[]",
        r#"{"a": {"b": [null, true]}}"#,
        r#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}"#,
        r#"{"a": 1.5e3, "b": -7, "c": "x"}"#,
    ] {
        assert_eq!(mask(v), JSONB, "{v}");
    }
    for v in [
        "{1,2,3}", // a PostgreSQL array
        r#"{"a": 1"#,
        r#""text""#,
        r#" {"a": 1}"#,
        r#"{"a": "\u0000"}"#,
        // jsonb keeps only the last of a repeated key.
        r#"{"a": 1, "a": 2}"#,
        r#"[{"b": {"a": 1, "\u0061": 2}}]"#,
    ] {
        assert_eq!(mask(v), 0, "{v}");
    }
}

#[test]
fn invalid_utf8_is_text() {
    assert_eq!(classify(b"\xff\xfe").mask, 0);
}
