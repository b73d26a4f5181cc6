use super::*;

fn t(values: &[Option<&str>], complete: bool) -> SqlType {
    infer(values.iter().map(|v| v.map(str::as_bytes)), complete)
}

fn all(values: &[&str]) -> SqlType {
    t(&values.iter().map(|v| Some(*v)).collect::<Vec<_>>(), false)
}

#[test]
fn integers_widen_and_smallint_only_when_complete() {
    assert_eq!(all(&["1", "2", "300"]), SqlType::Integer);
    assert_eq!(t(&[Some("1"), Some("300")], true), SqlType::SmallInt);
    assert_eq!(t(&[Some("1"), Some("40000")], true), SqlType::Integer);
    assert_eq!(all(&["1", "3000000000"]), SqlType::BigInt);
    assert_eq!(all(&["1", "99999999999999999999"]), SqlType::Numeric(None));
}

#[test]
fn ids_with_leading_zeros_stay_text() {
    assert_eq!(all(&["001", "002", "010"]), SqlType::Text);
    assert_eq!(all(&["1", "2", "007"]), SqlType::Text);
    assert_eq!(all(&["02134", "90210"]), SqlType::Text); // ZIP codes
}

#[test]
fn decimals_are_numeric_and_exact_only_when_complete() {
    assert_eq!(all(&["1.5", "2", "-3.25"]), SqlType::Numeric(None));
    // Exact only when every value has the scale: numeric(4, 2) would
    // print 1.5 as 1.50.
    assert_eq!(
        t(&[Some("1.5"), Some("12"), Some("-3.25")], true),
        SqlType::Numeric(None)
    );
    assert_eq!(
        t(&[Some("1.50"), Some("12.00"), Some("-3.25")], true),
        SqlType::Numeric(Some((4, 2)))
    );
    assert_eq!(t(&[Some("0.001")], true), SqlType::Numeric(Some((4, 3))));
}

#[test]
fn exponents_and_nan_make_double() {
    assert_eq!(all(&["1e5", "2.5"]), SqlType::Double);
    assert_eq!(all(&["1.5", "NaN", "2"]), SqlType::Double);
    assert_eq!(all(&["3", "-Infinity"]), SqlType::Double);
    // A value a double would round keeps numeric.
    assert_eq!(
        all(&["1e5", "3.14159265358979323846"]),
        SqlType::Numeric(None)
    );
    // So does one written with an exponent and more than 15 digits.
    assert_eq!(all(&["2e0", "9007199254740993e0"]), SqlType::Numeric(None));
    assert_eq!(
        all(&["1e5", "1.2345678901234567890123e5"]),
        SqlType::Numeric(None)
    );
    assert_eq!(
        all(&["-123456789012345e3", "0.12345678901234e-7"]),
        SqlType::Double
    );
    // NaN alone is no evidence of a number.
    assert_eq!(all(&["NaN", "NaN"]), SqlType::Text);
}

#[test]
fn nulls_are_ignored_and_all_null_is_text() {
    assert_eq!(t(&[None, Some("5"), None], false), SqlType::Integer);
    assert_eq!(t(&[None, None], false), SqlType::Text);
    assert_eq!(t(&[], false), SqlType::Text);
}

#[test]
fn empty_strings_are_values_not_nulls() {
    // CSV `""` (or an empty text-format field): the server would refuse
    // it as an integer, so the column is text.
    assert_eq!(t(&[Some("1"), Some("")], false), SqlType::Text);
}

#[test]
fn na_spellings_keep_text_and_say_so() {
    let mut s = ColumnStats::default();
    for v in ["39.1", "NA", "40.3"] {
        s.add(Some(v.as_bytes()));
    }
    assert_eq!(s.choose(false), SqlType::Text);
    assert_eq!(s.without_nullish(false), Some(SqlType::Numeric(None)));
    assert_eq!(s.nullish.as_deref(), Some("NA"));
    assert_eq!(s.first_text.as_deref(), Some("NA"));
    let mut plain = ColumnStats::default();
    plain.add(Some(b"x"));
    plain.add(Some(b"NA"));
    assert_eq!(plain.without_nullish(false), None);
}

#[test]
fn booleans() {
    assert_eq!(all(&["t", "f", "t"]), SqlType::Boolean);
    assert_eq!(all(&["true", "FALSE"]), SqlType::Boolean);
    assert_eq!(all(&["yes", "no"]), SqlType::Text);
    assert_eq!(all(&["1", "0", "1"]), SqlType::Integer);
    assert_eq!(all(&["t", "1"]), SqlType::Text);
}

#[test]
fn dates_times_and_mixes() {
    assert_eq!(all(&["2024-01-31", "1999-12-31"]), SqlType::Date);
    assert_eq!(all(&["2024-01-31", "2024-02-01 10:00"]), SqlType::Timestamp);
    assert_eq!(
        all(&["2024-01-31T10:00:00Z", "2024-02-01 10:00:00+02"]),
        SqlType::Timestamptz
    );
    // With and without an offset: the session's zone would decide.
    assert_eq!(
        all(&["2024-01-31 10:00:00", "2024-02-01 10:00:00+02"]),
        SqlType::Text
    );
    assert_eq!(all(&["2024-01-31", "31/01/2024"]), SqlType::Text);
    assert_eq!(all(&["10:00:00", "23:59:59.5"]), SqlType::Time);
    assert_eq!(all(&["10:00:00", "36:00:00"]), SqlType::Interval);
    assert_eq!(all(&["P1D", "1 day 02:00:00"]), SqlType::Interval);
}

#[test]
fn uuid_json_text() {
    assert_eq!(
        all(&[
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12"
        ]),
        SqlType::Uuid
    );
    assert_eq!(all(&[r#"{"a":1}"#, "[1,2]"]), SqlType::Jsonb);
    assert_eq!(all(&[r#"{"a":1}"#, "plain"]), SqlType::Text);
    assert_eq!(all(&["Adelie", "Gentoo"]), SqlType::Text);
}

#[test]
fn type_names_are_sql() {
    assert_eq!(SqlType::Double.to_string(), "double precision");
    assert_eq!(
        SqlType::Numeric(Some((10, 2))).to_string(),
        "numeric(10, 2)"
    );
    assert_eq!(SqlType::Timestamptz.to_string(), "timestamptz");
}
