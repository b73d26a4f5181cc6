//! `boolean`, `smallint`, `integer`, `bigint`.
//!
//! Integers follow `pg_strtoint16/32/64` (and `scanint8` in PostgreSQL 14):
//! optional leading whitespace, an optional `+` or `-`, one or more decimal
//! digits, optional trailing whitespace, and the value in range. PostgreSQL
//! 16 also reads `0x`/`0o`/`0b` prefixes and `_` between digits; 14 and 15
//! reject them, so those forms are deferred (the server of the day
//! decides). Send format: big-endian two's complement of 2, 4 or 8 bytes.
//!
//! Booleans follow `boolin`/`parse_bool_with_len` exactly: after trimming
//! whitespace, any case-insensitive prefix of `true`, `false`, `yes`, `no`,
//! plus `on`, `of`, `off`, `1` and `0`. Send format: one byte, 0 or 1.

use super::{trim_pg_space, Uncertain};

/// Parses a decimal integer the way `pg_strtoint*` does, within
/// `min..=max`.
fn parse_int(v: &[u8], min: i64, max: i64) -> Result<i64, Uncertain> {
    let t = trim_pg_space(v);
    let (neg, digits) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() {
        return Err(Uncertain::Invalid);
    }
    // Magnitude of i64::MIN fits u64; anything longer overflows.
    let mut mag: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            // `0x10`, `1_000`: valid only on PostgreSQL 16+.
            let prefixed = digits.len() > 2
                && digits[0] == b'0'
                && matches!(digits[1], b'x' | b'X' | b'o' | b'O' | b'b' | b'B');
            return Err(if prefixed || b == b'_' {
                Uncertain::Unsupported
            } else {
                Uncertain::Invalid
            });
        }
        mag = mag
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(b - b'0')))
            .ok_or(Uncertain::Invalid)?;
    }
    let value = if neg {
        -i128::from(mag)
    } else {
        i128::from(mag)
    };
    if value < i128::from(min) || value > i128::from(max) {
        return Err(Uncertain::Invalid);
    }
    // In range, so the conversion cannot fail.
    i64::try_from(value).map_err(|_| Uncertain::Invalid)
}

pub(super) fn encode_int2(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let n = parse_int(v, i16::MIN.into(), i16::MAX.into())?;
    out.extend_from_slice(&(n as i16).to_be_bytes());
    Ok(())
}

pub(super) fn encode_int4(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let n = parse_int(v, i32::MIN.into(), i32::MAX.into())?;
    out.extend_from_slice(&(n as i32).to_be_bytes());
    Ok(())
}

pub(super) fn encode_int8(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let n = parse_int(v, i64::MIN, i64::MAX)?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

/// `parse_bool_with_len`: is `t` a case-insensitive prefix of `word` of at
/// least `min` bytes?
fn prefix_of(t: &[u8], word: &[u8], min: usize) -> bool {
    t.len() >= min && t.len() <= word.len() && t.eq_ignore_ascii_case(&word[..t.len()])
}

pub(super) fn encode_bool(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let t = trim_pg_space(v);
    let value = match t.first().map(u8::to_ascii_lowercase) {
        Some(b't') if prefix_of(t, b"true", 1) => true,
        Some(b'f') if prefix_of(t, b"false", 1) => false,
        Some(b'y') if prefix_of(t, b"yes", 1) => true,
        Some(b'n') if prefix_of(t, b"no", 1) => false,
        // "o" alone is not unique enough: `on` needs 2 bytes, `off` 2+.
        Some(b'o') if prefix_of(t, b"on", 2) => true,
        Some(b'o') if prefix_of(t, b"off", 2) => false,
        Some(b'1') if t.len() == 1 => true,
        Some(b'0') if t.len() == 1 => false,
        _ => return Err(Uncertain::Invalid),
    };
    out.push(u8::from(value));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Encoder, Uncertain};
    use proptest::prelude::*;

    fn enc(e: Encoder, v: &str) -> Result<Vec<u8>, Uncertain> {
        let mut out = Vec::new();
        e.encode(v.as_bytes(), &mut out).map(|()| out)
    }

    #[test]
    fn integers_exact_bytes() {
        assert_eq!(enc(Encoder::Int4, "42"), Ok(vec![0, 0, 0, 42]));
        assert_eq!(enc(Encoder::Int4, " \t+42 \n"), Ok(vec![0, 0, 0, 42]));
        assert_eq!(enc(Encoder::Int4, "-1"), Ok(vec![0xff; 4]));
        assert_eq!(enc(Encoder::Int4, "-0"), Ok(vec![0; 4]));
        assert_eq!(enc(Encoder::Int4, "007"), Ok(vec![0, 0, 0, 7]));
        assert_eq!(enc(Encoder::Int2, "-32768"), Ok(vec![0x80, 0]));
        assert_eq!(enc(Encoder::Int2, "32767"), Ok(vec![0x7f, 0xff]));
        assert_eq!(enc(Encoder::Int4, "-2147483648"), Ok(vec![0x80, 0, 0, 0]));
        assert_eq!(
            enc(Encoder::Int8, "-9223372036854775808"),
            Ok(i64::MIN.to_be_bytes().to_vec())
        );
    }

    #[test]
    fn integers_deferred() {
        use Uncertain::*;
        for (e, v, why) in [
            (Encoder::Int2, "32768", Invalid),
            (Encoder::Int4, "2147483648", Invalid),
            (Encoder::Int8, "9223372036854775808", Invalid),
            (Encoder::Int8, "99999999999999999999999", Invalid),
            (Encoder::Int4, "", Invalid),
            (Encoder::Int4, "  ", Invalid),
            (Encoder::Int4, "-", Invalid),
            (Encoder::Int4, "+-1", Invalid),
            (Encoder::Int4, "1.0", Invalid),
            (Encoder::Int4, "1e3", Invalid),
            (Encoder::Int4, "abc", Invalid),
            (Encoder::Int4, "1 2", Invalid),
            (Encoder::Int4, "\u{a0}1", Invalid),
            (Encoder::Int4, "1_000", Unsupported),
            (Encoder::Int4, "0x1F", Unsupported),
            (Encoder::Int4, "0o17", Unsupported),
            (Encoder::Int4, "0b101", Unsupported),
        ] {
            assert_eq!(enc(e, v), Err(why), "{v:?}");
        }
    }

    #[test]
    fn bool_forms_of_boolin() {
        for v in [
            "t", "tr", "tru", "true", "TRUE", "y", "ye", "yes", "on", "ON", "1", " true\t",
        ] {
            assert_eq!(enc(Encoder::Bool, v), Ok(vec![1]), "{v:?}");
        }
        for v in ["f", "fa", "false", "FaLsE", "n", "no", "of", "off", "0"] {
            assert_eq!(enc(Encoder::Bool, v), Ok(vec![0]), "{v:?}");
        }
        for v in [
            "", "o", "truee", "onn", "offf", "yess", "2", "01", "nope", "t rue",
        ] {
            assert_eq!(enc(Encoder::Bool, v), Err(Uncertain::Invalid), "{v:?}");
        }
    }

    proptest! {
        #[test]
        fn int8_round_trip(n: i64) {
            prop_assert_eq!(
                enc(Encoder::Int8, &n.to_string()),
                Ok(n.to_be_bytes().to_vec())
            );
        }

        #[test]
        fn int4_round_trip(n: i32) {
            prop_assert_eq!(
                enc(Encoder::Int4, &format!(" {n} ")),
                Ok(n.to_be_bytes().to_vec())
            );
        }

        #[test]
        fn int2_range(n: i32) {
            let r = enc(Encoder::Int2, &n.to_string());
            match i16::try_from(n) {
                Ok(s) => prop_assert_eq!(r, Ok(s.to_be_bytes().to_vec())),
                Err(_) => prop_assert_eq!(r, Err(Uncertain::Invalid)),
            }
        }
    }
}
