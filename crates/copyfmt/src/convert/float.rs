//! `real` and `double precision`.
//!
//! `float4in`/`float8in` skip whitespace, call `strtof`/`strtod`, allow
//! trailing whitespace, and reject results that overflowed to infinity or
//! underflowed to zero (subnormal results are kept). Both C functions are
//! correctly rounded on the platforms PostgreSQL runs on, and so is Rust's
//! `str::parse`, so for the decimal forms below the bits are identical:
//!
//! * `[+-]digits[.digits][(e|E)[+-]digits]` and `[+-].digits[...]`;
//! * `NaN` (any case) → the canonical quiet NaN `strtod` returns;
//! * `inf`, `infinity` with optional sign, any case.
//!
//! Deferred: C99 hexadecimal floats and `nan(...)`/`-nan` (accepted by
//! glibc but not portable; `-nan` keeps its sign bit), out-of-range values
//! (the server reports them), anything else. Send format: the IEEE 754
//! bits, big-endian. `-0` keeps its sign, as it does in PostgreSQL.

use super::{trim_pg_space, Uncertain};

/// What a float literal is, after the syntax check.
enum Literal<'a> {
    Nan,
    Infinity {
        negative: bool,
    },
    /// A decimal number; `nonzero` says whether any mantissa digit is not
    /// 0, to tell an underflow (error) from a true zero.
    Finite {
        text: &'a str,
        nonzero: bool,
    },
}

/// Checks `t` (already trimmed) against the accepted forms.
fn classify(t: &[u8]) -> Result<Literal<'_>, Uncertain> {
    let (negative, body) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Ok(Literal::Infinity { negative });
    }
    if body.eq_ignore_ascii_case(b"nan") {
        // glibc reads "-nan" and "+nan" too, keeping the sign bit; be
        // conservative and only take the bare spelling.
        return if body.len() == t.len() {
            Ok(Literal::Nan)
        } else {
            Err(Uncertain::Unsupported)
        };
    }
    let mut i = 0;
    let mut ndigits = 0;
    let mut nonzero = false;
    let mut seen_point = false;
    while let Some(&b) = body.get(i) {
        if b.is_ascii_digit() {
            ndigits += 1;
            nonzero |= b != b'0';
        } else if b == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if ndigits == 0 {
        return Err(Uncertain::Invalid);
    }
    if matches!(body.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(body.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while body.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return Err(Uncertain::Invalid);
        }
    }
    if i != body.len() {
        // `0x1p3` and the like are read by glibc's strtod; defer them.
        let c = body.get(i).copied().unwrap_or(0);
        return Err(if c.is_ascii_alphanumeric() || c == b'_' {
            Uncertain::Unsupported
        } else {
            Uncertain::Invalid
        });
    }
    // Only ASCII was accepted above.
    let text = std::str::from_utf8(t).map_err(|_| Uncertain::Invalid)?;
    Ok(Literal::Finite { text, nonzero })
}

pub(super) fn encode_float8(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let x: f64 = match classify(trim_pg_space(v))? {
        // The NaN `strtod` returns; `f64::NAN` has the same bits, but
        // spell them out so no platform detail can change them.
        Literal::Nan => f64::from_bits(0x7ff8_0000_0000_0000),
        Literal::Infinity { negative: false } => f64::INFINITY,
        Literal::Infinity { negative: true } => f64::NEG_INFINITY,
        Literal::Finite { text, nonzero } => {
            let x: f64 = text.parse().map_err(|_| Uncertain::Invalid)?;
            if x.is_infinite() || (x == 0.0 && nonzero) {
                // "out of range for type double precision"
                return Err(Uncertain::Invalid);
            }
            x
        }
    };
    out.extend_from_slice(&x.to_bits().to_be_bytes());
    Ok(())
}

pub(super) fn encode_float4(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let x: f32 = match classify(trim_pg_space(v))? {
        Literal::Nan => f32::from_bits(0x7fc0_0000),
        Literal::Infinity { negative: false } => f32::INFINITY,
        Literal::Infinity { negative: true } => f32::NEG_INFINITY,
        Literal::Finite { text, nonzero } => {
            // Parsed straight to f32 (no double rounding), like strtof.
            let x: f32 = text.parse().map_err(|_| Uncertain::Invalid)?;
            if x.is_infinite() || (x == 0.0 && nonzero) {
                return Err(Uncertain::Invalid);
            }
            x
        }
    };
    out.extend_from_slice(&x.to_bits().to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Encoder, Uncertain};
    use proptest::prelude::*;

    fn f8(v: &str) -> Result<u64, Uncertain> {
        let mut out = Vec::new();
        Encoder::Float8.encode(v.as_bytes(), &mut out)?;
        Ok(u64::from_be_bytes(out.try_into().unwrap()))
    }

    fn f4(v: &str) -> Result<u32, Uncertain> {
        let mut out = Vec::new();
        Encoder::Float4.encode(v.as_bytes(), &mut out)?;
        Ok(u32::from_be_bytes(out.try_into().unwrap()))
    }

    #[test]
    fn float8_exact_bits() {
        assert_eq!(f8("1.5"), Ok(0x3ff8_0000_0000_0000));
        assert_eq!(f8(" -2 "), Ok(0xc000_0000_0000_0000));
        assert_eq!(f8("-0"), Ok(0x8000_0000_0000_0000));
        assert_eq!(f8("0"), Ok(0));
        assert_eq!(f8(".5"), Ok(0x3fe0_0000_0000_0000));
        assert_eq!(f8("5."), Ok(0x4014_0000_0000_0000));
        assert_eq!(f8("1e3"), Ok(1000f64.to_bits()));
        assert_eq!(f8("0.1"), Ok(0.1f64.to_bits()));
        assert_eq!(f8("0e99999"), Ok(0));
        assert_eq!(f8("4.9e-324"), Ok(1)); // smallest subnormal is kept
        assert_eq!(f8("NaN"), Ok(0x7ff8_0000_0000_0000));
        assert_eq!(f8("nan"), Ok(0x7ff8_0000_0000_0000));
        assert_eq!(f8("Infinity"), Ok(0x7ff0_0000_0000_0000));
        assert_eq!(f8("-inf"), Ok(0xfff0_0000_0000_0000));
        assert_eq!(f8("+INFINITY"), Ok(0x7ff0_0000_0000_0000));
        assert_eq!(f8("1.7976931348623157e308"), Ok(f64::MAX.to_bits()));
    }

    #[test]
    fn float4_exact_bits() {
        assert_eq!(f4("1.5"), Ok(0x3fc0_0000));
        assert_eq!(f4("0.1"), Ok(0.1f32.to_bits()));
        assert_eq!(f4("-0"), Ok(0x8000_0000));
        assert_eq!(f4("NaN"), Ok(0x7fc0_0000));
        assert_eq!(f4("-Infinity"), Ok(0xff80_0000));
        assert_eq!(f4("1e-45"), Ok(1));
        assert_eq!(f4("3.4028235e38"), Ok(f32::MAX.to_bits()));
        // 16777217 is not a float4: strtof rounds it straight to even.
        assert_eq!(f4("16777217"), Ok(16_777_216f32.to_bits()));
    }

    #[test]
    fn floats_deferred() {
        use Uncertain::*;
        for (v, why) in [
            ("", Invalid),
            (".", Invalid),
            ("e5", Invalid),
            ("1e", Invalid),
            ("1e+", Invalid),
            ("1.5.2", Invalid),
            ("1,5", Invalid),
            ("infinit", Invalid),
            ("1e400", Invalid),
            ("-1e400", Invalid),
            ("1e-400", Invalid),
            ("-nan", Unsupported),
            ("0x1p3", Unsupported),
            ("1_000.5", Unsupported),
            ("nan(1)", Invalid),
        ] {
            assert_eq!(f8(v), Err(why), "{v:?}");
        }
        assert_eq!(f4("3.5e38"), Err(Invalid));
        assert_eq!(f4("1e-46"), Err(Invalid));
    }

    proptest! {
        #[test]
        fn float8_debug_round_trip(bits: u64) {
            let x = f64::from_bits(bits);
            prop_assume!(x.is_finite());
            prop_assert_eq!(f8(&format!("{x:?}")), Ok(bits));
            prop_assert_eq!(f8(&format!("{x:e}")), Ok(bits));
        }

        #[test]
        fn float4_debug_round_trip(bits: u32) {
            let x = f32::from_bits(bits);
            prop_assume!(x.is_finite());
            prop_assert_eq!(f4(&format!("{x:?}")), Ok(bits));
        }
    }
}
