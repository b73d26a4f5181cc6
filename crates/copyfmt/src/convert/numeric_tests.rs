//! Tests for `numeric`: exact bytes checked against `numeric_send` on a
//! PostgreSQL 15 server, and round trips through a re-implementation of
//! `numeric_out`.

use super::super::{Encoder, Uncertain};
use proptest::prelude::*;

fn enc(e: &Encoder, v: &str) -> Result<Vec<u8>, Uncertain> {
    let mut out = Vec::new();
    e.encode(v.as_bytes(), &mut out).map(|()| out)
}

fn num(v: &str) -> Result<Vec<u8>, Uncertain> {
    enc(&Encoder::Numeric, v)
}

fn typed(p: i32, s: i32, v: &str) -> Result<Vec<u8>, Uncertain> {
    enc(
        &Encoder::NumericTypmod {
            precision: p,
            scale: s,
        },
        v,
    )
}

/// ndigits, weight, sign, dscale, digits → send bytes.
fn bytes(weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&(digits.len() as u16).to_be_bytes());
    v.extend_from_slice(&weight.to_be_bytes());
    v.extend_from_slice(&sign.to_be_bytes());
    v.extend_from_slice(&dscale.to_be_bytes());
    for d in digits {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v
}

/// `numeric_out` for the send format.
fn to_text(b: &[u8]) -> String {
    let word = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let (nd, weight, sign, dscale) = (
        word(0) as i64,
        word(2) as i16 as i64,
        word(4),
        word(6) as usize,
    );
    match sign {
        0xC000 => return "NaN".into(),
        0xD000 => return "Infinity".into(),
        0xF000 => return "-Infinity".into(),
        _ => {}
    }
    let at = |w: i64| {
        let i = weight - w;
        if (0..nd).contains(&i) {
            word(8 + 2 * i as usize)
        } else {
            0
        }
    };
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    if weight < 0 {
        s.push('0');
    } else {
        s += &at(weight).to_string();
        for w in (0..weight).rev() {
            s += &format!("{:04}", at(w));
        }
    }
    if dscale > 0 {
        let mut frac = String::new();
        let mut w = -1;
        while frac.len() < dscale {
            frac += &format!("{:04}", at(w));
            w -= 1;
        }
        s.push('.');
        s += &frac[..dscale];
    }
    s
}

#[test]
fn exact_send_bytes() {
    assert_eq!(num("1234.5678"), Ok(bytes(0, 0, 4, &[1234, 5678])));
    assert_eq!(num("0"), Ok(bytes(0, 0, 0, &[])));
    assert_eq!(num("-0.00"), Ok(bytes(0, 0, 2, &[])));
    assert_eq!(num(" +12 "), Ok(bytes(0, 0, 0, &[12])));
    assert_eq!(num("-1"), Ok(bytes(0, 0x4000, 0, &[1])));
    assert_eq!(num("10000"), Ok(bytes(1, 0, 0, &[1])));
    assert_eq!(num("0.0001"), Ok(bytes(-1, 0, 4, &[1])));
    assert_eq!(num("0.00001"), Ok(bytes(-2, 0, 5, &[1000])));
    assert_eq!(num("1.50"), Ok(bytes(0, 0, 2, &[1, 5000])));
    assert_eq!(num("1.5e3"), Ok(bytes(0, 0, 0, &[1500])));
    assert_eq!(num("1.5E-3"), Ok(bytes(-1, 0, 4, &[15])));
    assert_eq!(num("15e-1"), Ok(bytes(0, 0, 1, &[1, 5000])));
    assert_eq!(num(".5"), Ok(bytes(-1, 0, 1, &[5000])));
    assert_eq!(num("5."), Ok(bytes(0, 0, 0, &[5])));
    assert_eq!(num("007.10"), Ok(bytes(0, 0, 2, &[7, 1000])));
    assert_eq!(
        num("12345678901234567890"),
        Ok(bytes(4, 0, 0, &[1234, 5678, 9012, 3456, 7890]))
    );
    assert_eq!(num("1e1000").map(|b| b[2..4].to_vec()), Ok(vec![0, 250]));
    assert_eq!(num("NaN"), Ok(bytes(0, 0xC000, 0, &[])));
    assert_eq!(num(" nan "), Ok(bytes(0, 0xC000, 0, &[])));
    assert_eq!(num("Infinity"), Ok(bytes(0, 0xD000, 0x20, &[])));
    assert_eq!(num("-inf"), Ok(bytes(0, 0xF000, 0x20, &[])));
    assert_eq!(num("+INF"), Ok(bytes(0, 0xD000, 0x20, &[])));
}

#[test]
fn thousand_digits() {
    let int: String = "1234567890".repeat(100);
    let b = num(&int).unwrap();
    assert_eq!(to_text(&b), int);
    assert_eq!(&b[0..2], &250u16.to_be_bytes());
    let frac = format!("-0.{}", "9".repeat(1000));
    assert_eq!(to_text(&num(&frac).unwrap()), frac);
}

#[test]
fn typmod_rounds_half_away_from_zero() {
    assert_eq!(typed(5, 2, "1.5"), Ok(bytes(0, 0, 2, &[1, 5000])));
    assert_eq!(typed(5, 2, "1"), Ok(bytes(0, 0, 2, &[1])));
    assert_eq!(typed(5, 2, "123.455"), Ok(bytes(0, 0, 2, &[123, 4600])));
    assert_eq!(typed(5, 2, "123.454"), Ok(bytes(0, 0, 2, &[123, 4500])));
    assert_eq!(
        typed(5, 2, "-123.455"),
        Ok(bytes(0, 0x4000, 2, &[123, 4600]))
    );
    assert_eq!(typed(5, 2, "0.005"), Ok(bytes(-1, 0, 2, &[100])));
    assert_eq!(typed(5, 2, "0.004"), Ok(bytes(0, 0, 2, &[])));
    assert_eq!(typed(5, 2, "-0.004"), Ok(bytes(0, 0, 2, &[])));
    assert_eq!(typed(5, 2, "5e-5"), Ok(bytes(0, 0, 2, &[])));
    assert_eq!(typed(5, 0, "9999.5"), Ok(bytes(1, 0, 0, &[1])));
    assert_eq!(typed(7, 2, "9999.995"), Ok(bytes(1, 0, 2, &[1])));
    assert_eq!(typed(6, 2, "9999.995"), Err(Uncertain::Invalid));
    assert_eq!(typed(5, 2, "999.995"), Err(Uncertain::Invalid));
    assert_eq!(typed(5, 2, "1000"), Err(Uncertain::Invalid));
    assert_eq!(typed(3, 3, "0.9995"), Err(Uncertain::Invalid));
    assert_eq!(typed(3, 3, "0.9994"), Ok(bytes(-1, 0, 3, &[9990])));
    assert_eq!(typed(5, 2, "NaN"), Ok(bytes(0, 0xC000, 0, &[])));
    assert_eq!(typed(5, 2, "Infinity"), Err(Uncertain::Invalid));
    // PostgreSQL 15+: negative scale rounds to tens, hundreds...
    assert_eq!(typed(5, -2, "12345"), Ok(bytes(1, 0, 0, &[1, 2300])));
    assert_eq!(typed(5, -2, "12350"), Ok(bytes(1, 0, 0, &[1, 2400])));
    assert_eq!(typed(2, -2, "9950"), Err(Uncertain::Invalid));
    // ... and a scale above the precision bounds the value below 1.
    assert_eq!(typed(2, 4, "0.00123"), Ok(bytes(-1, 0, 4, &[12])));
    assert_eq!(typed(2, 4, "0.0123"), Err(Uncertain::Invalid));
}

#[test]
fn for_typmod_decodes_precision_and_scale() {
    let f = super::for_typmod;
    assert_eq!(f(-1), Some(Encoder::Numeric));
    assert_eq!(
        f((5 << 16 | 2) + 4),
        Some(Encoder::NumericTypmod {
            precision: 5,
            scale: 2
        })
    );
    assert_eq!(
        f((5 << 16 | (-2i32 & 0x7ff)) + 4),
        Some(Encoder::NumericTypmod {
            precision: 5,
            scale: -2
        })
    );
    assert_eq!(f((2000 << 16) + 4), None);
}

#[test]
fn deferred_forms() {
    use Uncertain::*;
    for (v, why) in [
        ("", Invalid),
        (".", Invalid),
        ("-", Invalid),
        ("1.2.3", Invalid),
        ("1e", Invalid),
        ("1e+", Invalid),
        ("1 2", Invalid),
        ("abc", Invalid),
        ("+NaN", Invalid),
        ("1e1001", Unsupported),
        ("1e-1001", Unsupported),
        ("1e00001", Unsupported),
        ("0x1F", Unsupported),
        ("1_000", Unsupported),
        ("1e 5", Invalid),
    ] {
        assert_eq!(num(v), Err(why), "{v:?}");
    }
    let huge = format!("1{}", "0".repeat(40_000));
    assert_eq!(num(&huge), Err(Unsupported));
    let tiny = format!("0.{}1", "0".repeat(17_000));
    assert_eq!(num(&tiny), Err(Unsupported));
}

/// Digits, a point and a sign in canonical `numeric_out` form.
fn canonical(negative: bool, int: &str, frac: &str) -> String {
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let zero = int == "0" && frac.bytes().all(|b| b == b'0');
    let sign = if negative && !zero { "-" } else { "" };
    if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

proptest! {
    #[test]
    fn decimal_round_trip(neg: bool, int in "[0-9]{0,30}", frac in "[0-9]{0,30}") {
        prop_assume!(!int.is_empty() || !frac.is_empty());
        let text = format!("{}{int}.{frac}", if neg { "-" } else { "" });
        let b = num(&text).unwrap();
        prop_assert_eq!(to_text(&b), canonical(neg, &int, &frac));
    }

    #[test]
    fn exponent_shifts_the_point(digits in "[1-9][0-9]{0,20}", exp in -40i64..40) {
        let with_exp = num(&format!("{digits}e{exp}")).unwrap();
        // Shift the point by hand.
        let n = digits.len() as i64;
        let shifted = if exp >= 0 {
            format!("{digits}{}", "0".repeat(exp as usize))
        } else if -exp < n {
            let (a, b) = digits.split_at((n + exp) as usize);
            format!("{a}.{b}")
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - n) as usize))
        };
        prop_assert_eq!(with_exp, num(&shifted).unwrap());
    }

    #[test]
    fn typmod_matches_integer_rounding(m: i64, f in 0u32..10, s in 0i32..8, extra in 1i32..12) {
        let p = s + extra;
        let mag = i128::from(m).unsigned_abs();
        let text = if f == 0 {
            m.to_string()
        } else {
            let digits = format!("{:0>width$}", mag, width = f as usize + 1);
            let (a, b) = digits.split_at(digits.len() - f as usize);
            format!("{}{a}.{b}", if m < 0 { "-" } else { "" })
        };
        let (f, s) = (f as i32, s);
        let q = if f > s {
            let div = 10u128.pow((f - s) as u32);
            mag / div + u128::from(mag % div * 2 >= div)
        } else {
            mag * 10u128.pow((s - f) as u32)
        };
        let int_part = q / 10u128.pow(s as u32);
        let got = typed(p, s, &text);
        if int_part.to_string().len() as i32 > p - s && int_part != 0 {
            prop_assert_eq!(got, Err(Uncertain::Invalid));
        } else {
            let digits = format!("{:0>width$}", q, width = s as usize + 1);
            let (a, b) = digits.split_at(digits.len() - s as usize);
            prop_assert_eq!(to_text(&got.unwrap()), canonical(m < 0, a, b));
        }
    }
}
