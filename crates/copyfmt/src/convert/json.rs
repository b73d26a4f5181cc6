//! `json` and `jsonb`.
//!
//! Both receive functions take the JSON text itself (`jsonb_recv` after a
//! version byte, 1) and run it through the same parser as the input
//! functions, so sending the field's bytes is exact: `json` keeps them
//! verbatim, and `jsonb` is normalised by the server just as for text
//! COPY. What this module adds is validation, so that a value the server
//! would reject goes by text COPY (the encoders never let the server fail
//! a binary COPY on bad input, and never invent an error of their own).
//!
//! Accepted: RFC 8259 JSON as PostgreSQL's lexer reads it: whitespace is
//! space, tab, CR and LF; literals `true`/`false`/`null`; numbers
//! `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; strings without
//! control characters, with the escapes `\" \\ \/ \b \f \n \r \t \uXXXX`.
//!
//! Deferred: `\u0000` (valid for `json`, an error for `jsonb`), unpaired
//! surrogate escapes (their handling has varied across versions), nesting
//! deeper than 256 levels (PostgreSQL's stack depth limit could be hit),
//! and for `jsonb` numbers that `numeric_in` might refuse (exponent beyond
//! ±1000, or longer than 1000 characters). `jsonb` escapes of characters
//! the database encoding cannot hold fail the same way on either path.

use super::{check_text, Uncertain};

/// Nesting depth taken; deeper documents are deferred to the server.
const MAX_DEPTH: usize = 256;
/// `jsonb` numbers become `numeric`; stay inside its limits.
const JSONB_MAX_NUMBER_LEN: usize = 1000;
const JSONB_MAX_EXPONENT: i64 = 1000;
/// The version byte `jsonb_send` writes and `jsonb_recv` requires.
const JSONB_VERSION: u8 = 1;

pub(super) fn encode_json(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    check_text(v)?;
    validate(v, false)?;
    out.extend_from_slice(v);
    Ok(())
}

pub(super) fn encode_jsonb(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    check_text(v)?;
    validate(v, true)?;
    out.push(JSONB_VERSION);
    out.extend_from_slice(v);
    Ok(())
}

fn ws(s: &[u8], mut i: usize) -> usize {
    while matches!(s.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Checks that `s` is one JSON value, surrounded by optional whitespace.
fn validate(s: &[u8], jsonb: bool) -> Result<(), Uncertain> {
    use Uncertain::Invalid;
    let mut stack = [0u8; MAX_DEPTH];
    let mut depth = 0;
    let mut i = ws(s, 0);
    'value: loop {
        match s.get(i) {
            Some(&open @ (b'{' | b'[')) => {
                if depth == MAX_DEPTH {
                    return Err(Uncertain::Unsupported);
                }
                let close = if open == b'{' { b'}' } else { b']' };
                i = ws(s, i + 1);
                if s.get(i) == Some(&close) {
                    i += 1;
                } else {
                    stack[depth] = open;
                    depth += 1;
                    if open == b'{' {
                        i = key(s, i)?;
                    }
                    continue 'value;
                }
            }
            Some(b'"') => i = string(s, i)?,
            Some(b'-' | b'0'..=b'9') => i = number(s, i, jsonb)?,
            Some(b't') => i = literal(s, i, b"true")?,
            Some(b'f') => i = literal(s, i, b"false")?,
            Some(b'n') => i = literal(s, i, b"null")?,
            _ => return Err(Invalid),
        }
        // After a value: close containers, or go on to the next element.
        loop {
            i = ws(s, i);
            if depth == 0 {
                return if i == s.len() { Ok(()) } else { Err(Invalid) };
            }
            let top = stack[depth - 1];
            match s.get(i) {
                Some(b',') => {
                    i = ws(s, i + 1);
                    if top == b'{' {
                        i = key(s, i)?;
                    }
                    continue 'value;
                }
                Some(b'}') if top == b'{' => {}
                Some(b']') if top == b'[' => {}
                _ => return Err(Invalid),
            }
            depth -= 1;
            i += 1;
        }
    }
}

/// An object key, the colon and the whitespace up to the value.
fn key(s: &[u8], i: usize) -> Result<usize, Uncertain> {
    if s.get(i) != Some(&b'"') {
        return Err(Uncertain::Invalid);
    }
    let i = ws(s, string(s, i)?);
    if s.get(i) != Some(&b':') {
        return Err(Uncertain::Invalid);
    }
    Ok(ws(s, i + 1))
}

fn literal(s: &[u8], i: usize, word: &[u8]) -> Result<usize, Uncertain> {
    if s[i..].starts_with(word) {
        Ok(i + word.len())
    } else {
        Err(Uncertain::Invalid)
    }
}

fn hex4(s: &[u8], i: usize) -> Result<u32, Uncertain> {
    let h = s.get(i..i + 4).ok_or(Uncertain::Invalid)?;
    h.iter().try_fold(0, |acc, &b| {
        let d = (b as char).to_digit(16).ok_or(Uncertain::Invalid)?;
        Ok(acc << 4 | d)
    })
}

/// A string starting at the quote at `i`; returns the index after it.
fn string(s: &[u8], mut i: usize) -> Result<usize, Uncertain> {
    use Uncertain::{Invalid, Unsupported};
    i += 1;
    loop {
        match *s.get(i).ok_or(Invalid)? {
            b'"' => return Ok(i + 1),
            b'\\' => match s.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    let cp = hex4(s, i + 2)?;
                    i += 6;
                    match cp {
                        0 | 0xDC00..=0xDFFF => return Err(Unsupported),
                        0xD800..=0xDBFF => {
                            if s.get(i..i + 2) != Some(b"\\u") {
                                return Err(Unsupported);
                            }
                            if !(0xDC00..=0xDFFF).contains(&hex4(s, i + 2)?) {
                                return Err(Unsupported);
                            }
                            i += 6;
                        }
                        _ => {}
                    }
                }
                _ => return Err(Invalid),
            },
            0..=0x1f => return Err(Invalid),
            _ => i += 1,
        }
    }
}

fn number(s: &[u8], start: usize, jsonb: bool) -> Result<usize, Uncertain> {
    let digits = |mut i: usize| {
        while s.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = start + usize::from(s[start] == b'-');
    match s.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i),
        _ => return Err(Uncertain::Invalid),
    }
    if s.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return Err(Uncertain::Invalid);
        }
        i = end;
    }
    let mut exp = 0i64;
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return Err(Uncertain::Invalid);
        }
        exp = s[i..end].iter().fold(0i64, |a, &b| {
            a.saturating_mul(10).saturating_add(i64::from(b - b'0'))
        });
        i = end;
    }
    if jsonb && (i - start > JSONB_MAX_NUMBER_LEN || exp > JSONB_MAX_EXPONENT) {
        return Err(Uncertain::Unsupported);
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::super::{Encoder, Uncertain};

    fn enc(e: Encoder, v: &str) -> Result<Vec<u8>, Uncertain> {
        let mut out = Vec::new();
        e.encode(v.as_bytes(), &mut out).map(|()| out)
    }

    #[test]
    fn valid_documents_are_sent_verbatim() {
        for v in [
            r#"{"a": 1, "b": [true, false, null], "c": {"d": "e"}}"#,
            " [ ] ",
            "{}",
            "0",
            "-0.5e+10",
            "1E-3",
            r#""x""#,
            "null",
            r#"{"k":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}"#,
            "[1,[2,[3,[]]]]\n",
            "{\"é\": \"ü\"}",
            "\"\x7f\"",
        ] {
            assert_eq!(enc(Encoder::Json, v), Ok(v.as_bytes().to_vec()), "{v}");
            let mut jsonb = vec![1];
            jsonb.extend_from_slice(v.as_bytes());
            assert_eq!(enc(Encoder::Jsonb, v), Ok(jsonb), "{v}");
        }
    }

    #[test]
    fn invalid_documents_are_deferred() {
        for v in [
            "",
            " ",
            "{",
            "}",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{a:1}",
            "{\"a\":1,}",
            "[1 2]",
            "01",
            "1.",
            ".5",
            "-",
            "+1",
            "1e",
            "NaN",
            "tru",
            "truex",
            "nul",
            "'a'",
            "\"a",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\tb\"",
            "[1]]",
            "{}{}",
            "\u{a0}1",
            "1\x0c",
        ] {
            assert_eq!(enc(Encoder::Json, v), Err(Uncertain::Invalid), "{v:?}");
            assert_eq!(enc(Encoder::Jsonb, v), Err(Uncertain::Invalid), "{v:?}");
        }
    }

    #[test]
    fn risky_documents_are_deferred() {
        for v in [
            r#""\u0000""#,
            r#""\uD800""#,
            r#""\uDC00""#,
            r#""\uD800\u0041""#,
        ] {
            assert_eq!(enc(Encoder::Json, v), Err(Uncertain::Unsupported), "{v}");
        }
        let deep = format!("{}{}", "[".repeat(257), "]".repeat(257));
        assert_eq!(enc(Encoder::Json, &deep), Err(Uncertain::Unsupported));
        let ok = format!("{}{}", "[".repeat(256), "]".repeat(256));
        assert!(enc(Encoder::Json, &ok).is_ok());
        // numeric_in limits apply to jsonb only.
        assert!(enc(Encoder::Json, "1e1001").is_ok());
        assert_eq!(enc(Encoder::Jsonb, "1e1001"), Err(Uncertain::Unsupported));
        assert!(enc(Encoder::Jsonb, "1e1000").is_ok());
        assert!(enc(Encoder::Jsonb, "1e-1000").is_ok());
    }
}
