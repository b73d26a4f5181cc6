//! `numeric` and `numeric(p, s)`.
//!
//! Input, as `numeric_in`/`set_var_from_str`: optional whitespace, an
//! optional sign, digits with at most one decimal point (at least one
//! digit), an optional exponent `e[+-]digits`, optional whitespace; or
//! `NaN`, `Infinity`, `+Infinity`, `-Infinity`, `inf`, `+inf`, `-inf` in
//! any case. The display scale is the number of digits after the point,
//! minus the exponent, never below zero. With a typmod, `apply_typmod`
//! rounds half away from zero to the scale (the display scale becomes the
//! scale) and errors if the integer digits exceed `p - s`; infinities are
//! errors there.
//!
//! Deferred: exponents beyond ±1000 (an error in PostgreSQL 14, accepted
//! later), `0x`/`_` forms (PostgreSQL 16+), values whose weight or display
//! scale approach the storage limits, precision overflow (the server
//! reports it), anything malformed.
//!
//! Send format (`numeric_send`): int16 ndigits, int16 weight, uint16 sign
//! (0x0000 +, 0x4000 -, 0xC000 NaN, 0xD000 +Inf, 0xF000 -Inf), int16
//! dscale, then ndigits base-10000 digits, most significant first, with
//! leading and trailing zero digits stripped. Zero has no digits, weight 0
//! and a positive sign (`-0.00` becomes `0.00`).

use super::{trim_pg_space, Encoder, Uncertain};

const SIGN_POS: u16 = 0x0000;
const SIGN_NEG: u16 = 0x4000;
const SIGN_NAN: u16 = 0xC000;
const SIGN_PINF: u16 = 0xD000;
const SIGN_NINF: u16 = 0xF000;
/// What `numeric_send` reports as the dscale of an infinity: the stored
/// special header read through the short-format dscale mask
/// (`0xD000 & 0x1F80 >> 7`), observed on the wire.
const INF_DSCALE: u16 = 0x20;
/// PostgreSQL 14 rejects larger exponents; later versions accept them.
const MAX_EXPONENT: i64 = 1000;
/// `NUMERIC_DSCALE_MAX`.
const MAX_DSCALE: i64 = 0x3FFF;
/// Far inside the int16 weight PostgreSQL stores (`NUMERIC_WEIGHT_MAX`),
/// so no storage limit is ever reached: 32764 integer digits.
const MAX_WEIGHT: i64 = 8190;
const POW10: [u32; 4] = [1, 10, 100, 1000];

/// The encoder for a numeric column's typmod (`((p << 16) | s) + 4`, with
/// `s` an 11-bit signed field since PostgreSQL 15).
pub(super) fn for_typmod(typmod: i32) -> Option<Encoder> {
    if typmod < 4 {
        return Some(Encoder::Numeric);
    }
    let t = typmod - 4;
    let precision = (t >> 16) & 0xffff;
    let scale = ((t & 0x7ff) ^ 1024) - 1024;
    if !(1..=1000).contains(&precision) || !(-1000..=1000).contains(&scale) {
        return None;
    }
    Some(Encoder::NumericTypmod { precision, scale })
}

fn header(out: &mut Vec<u8>, ndigits: u16, weight: i16, sign: u16, dscale: u16) {
    out.extend_from_slice(&ndigits.to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&dscale.to_be_bytes());
}

/// The infinities `numeric_in` knows, by their sign.
fn infinity(t: &[u8]) -> Option<bool> {
    const FORMS: [(&[u8], bool); 6] = [
        (b"infinity", false),
        (b"+infinity", false),
        (b"-infinity", true),
        (b"inf", false),
        (b"+inf", false),
        (b"-inf", true),
    ];
    FORMS
        .iter()
        .find(|(f, _)| t.eq_ignore_ascii_case(f))
        .map(|&(_, neg)| neg)
}

/// A syntactically checked decimal: `int_digits.frac_digits × 10^exp`.
struct Decimal<'a> {
    negative: bool,
    int_digits: &'a [u8],
    frac_digits: &'a [u8],
    exp: i64,
}

fn parse(t: &[u8]) -> Result<Decimal<'_>, Uncertain> {
    let (negative, body) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits_from = |i: usize| {
        body[i..]
            .iter()
            .position(|b| !b.is_ascii_digit())
            .map_or(body.len(), |n| i + n)
    };
    let mut i = digits_from(0);
    let int_digits = &body[..i];
    let mut frac_digits: &[u8] = &[];
    if body.get(i) == Some(&b'.') {
        let end = digits_from(i + 1);
        frac_digits = &body[i + 1..end];
        i = end;
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(Uncertain::Invalid);
    }
    let mut exp = 0;
    if matches!(body.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_negative = body.get(i) == Some(&b'-');
        if matches!(body.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = digits_from(i);
        let n = end - i;
        if n == 0 {
            return Err(Uncertain::Invalid);
        }
        if n > 4 {
            return Err(Uncertain::Unsupported);
        }
        exp = body[i..end]
            .iter()
            .fold(0i64, |a, &b| a * 10 + i64::from(b - b'0'));
        if exp_negative {
            exp = -exp;
        }
        if exp.abs() > MAX_EXPONENT {
            return Err(Uncertain::Unsupported);
        }
        i = end;
    }
    if let Some(&c) = body.get(i) {
        // `0x1F` and `1_000` are PostgreSQL 16+ input.
        return Err(if c == b'_' || c.is_ascii_alphabetic() {
            Uncertain::Unsupported
        } else {
            Uncertain::Invalid
        });
    }
    Ok(Decimal {
        negative,
        int_digits,
        frac_digits,
        exp,
    })
}

pub(super) fn encode(
    v: &[u8],
    typmod: Option<(i32, i32)>,
    out: &mut Vec<u8>,
) -> Result<(), Uncertain> {
    let t = trim_pg_space(v);
    if t.eq_ignore_ascii_case(b"nan") {
        // NaN is allowed in any numeric(p, s).
        header(out, 0, 0, SIGN_NAN, 0);
        return Ok(());
    }
    if let Some(negative) = infinity(t) {
        if typmod.is_some() {
            // "numeric field overflow"
            return Err(Uncertain::Invalid);
        }
        let sign = if negative { SIGN_NINF } else { SIGN_PINF };
        header(out, 0, 0, sign, INF_DSCALE);
        return Ok(());
    }
    let d = parse(t)?;
    encode_decimal(&d, typmod, out)
}

fn encode_decimal(
    d: &Decimal<'_>,
    typmod: Option<(i32, i32)>,
    out: &mut Vec<u8>,
) -> Result<(), Uncertain> {
    let ni = d.int_digits.len();
    let n = ni + d.frac_digits.len();
    let digit = |k: usize| -> u32 {
        let b = if k < ni {
            d.int_digits[k]
        } else {
            d.frac_digits[k - ni]
        };
        u32::from(b - b'0')
    };
    // Digit k stands for digit(k) × 10^place(k).
    let point = ni as i64 + d.exp;
    let place = |k: usize| point - 1 - k as i64;

    let mut dscale = (d.frac_digits.len() as i64 - d.exp).max(0);
    // Digits [0, end) are kept; round_up adds one unit in the last place.
    let (end, round_up, scale) = match typmod {
        None => (n, false, 0),
        Some((_, scale)) => {
            dscale = i64::from(scale).max(0);
            let cut = point + i64::from(scale);
            if cut >= n as i64 {
                (n, false, scale)
            } else if cut < 0 {
                (0, false, scale)
            } else {
                let cut = cut as usize;
                (cut, digit(cut) >= 5, scale)
            }
        }
    };
    if dscale > MAX_DSCALE {
        return Err(Uncertain::Unsupported);
    }

    let h = out.len();
    header(out, 0, 0, 0, 0);
    let first = (0..end).find(|&k| digit(k) != 0);
    let mut weight = 0;
    if let Some(first) = first {
        // Skip trailing zeros unless rounding must land on the last place.
        let stop = if round_up {
            end
        } else {
            (first..end)
                .rev()
                .find(|&k| digit(k) != 0)
                .map_or(end, |k| k + 1)
        };
        weight = place(first).div_euclid(4);
        let mut group = weight;
        let mut acc = 0;
        for k in first..stop {
            let p = place(k);
            if p.div_euclid(4) != group {
                push_digit(out, acc);
                acc = 0;
                group -= 1;
            }
            acc += digit(k) * POW10[p.rem_euclid(4) as usize];
        }
        push_digit(out, acc);
    } else if round_up {
        // Everything kept was zero: the result is one unit in the last
        // place, in a group of its own.
        weight = i64::from(-scale).div_euclid(4);
        push_digit(out, 0);
    }
    if round_up {
        let unit = POW10[i64::from(-scale).rem_euclid(4) as usize];
        if add_to_last(out, h + 8, unit) {
            weight += 1;
        }
    }
    while out.len() > h + 8 && out[out.len() - 2..] == [0, 0] {
        out.truncate(out.len() - 2);
    }
    let ndigits = (out.len() - h - 8) / 2;
    let sign = if ndigits == 0 {
        weight = 0;
        SIGN_POS
    } else if d.negative {
        SIGN_NEG
    } else {
        SIGN_POS
    };
    if !(-MAX_WEIGHT..=MAX_WEIGHT).contains(&weight) {
        return Err(Uncertain::Unsupported);
    }
    if let (Some((precision, scale)), true) = (typmod, ndigits > 0) {
        let top = u16::from_be_bytes([out[h + 8], out[h + 9]]);
        let top_digits = POW10.iter().filter(|&&p| u32::from(top) >= p).count();
        // Integer digits of the rounded value, as apply_typmod counts them.
        let ddigits = weight * 4 + top_digits as i64;
        if ddigits > i64::from(precision) - i64::from(scale) {
            // "numeric field overflow"
            return Err(Uncertain::Invalid);
        }
    }
    // The bounds above keep every field within 16 bits.
    out[h..h + 2].copy_from_slice(&(ndigits as u16).to_be_bytes());
    out[h + 2..h + 4].copy_from_slice(&(weight as i16).to_be_bytes());
    out[h + 4..h + 6].copy_from_slice(&sign.to_be_bytes());
    out[h + 6..h + 8].copy_from_slice(&(dscale as u16).to_be_bytes());
    Ok(())
}

fn push_digit(out: &mut Vec<u8>, d: u32) {
    out.extend_from_slice(&(d as u16).to_be_bytes());
}

/// Adds `unit` to the last base-10000 digit after `start`, carrying
/// upwards; returns true if the carry created a new leading digit.
fn add_to_last(out: &mut Vec<u8>, start: usize, unit: u32) -> bool {
    let mut carry = unit;
    let mut pos = out.len();
    while carry > 0 && pos > start {
        pos -= 2;
        let v = u32::from(u16::from_be_bytes([out[pos], out[pos + 1]])) + carry;
        let (digit, next) = if v >= 10000 { (v - 10000, 1) } else { (v, 0) };
        out[pos..pos + 2].copy_from_slice(&(digit as u16).to_be_bytes());
        carry = next;
    }
    if carry > 0 {
        out.splice(start..start, [0, 1]);
        return true;
    }
    false
}

#[cfg(test)]
#[path = "numeric_tests.rs"]
mod tests;
