//! One value -> the column types that could hold it, by pgtide's
//! conservative reading (narrower than PostgreSQL's input functions on
//! purpose: a value is given a type only when that type keeps it exactly
//! and nobody would read it differently).
//!
//! | type | accepted here | stays text (examples) |
//! |---|---|---|
//! | boolean | `true`/`false` any case, `t`/`f` | `yes`, `no`, `y`, `on`, `1`, `0`, `T`, `F` |
//! | integers | `-?digits`, no leading zero | `007`, `+5`, ` 5`, `1_000` |
//! | numeric | `-?digits.digits`, `-?.digits`, no leading zero | `5.`, `01.5`, `1,5` |
//! | double precision | a mantissa with `e`/`E` exponent, `NaN`, `[-]Infinity`, `[-]inf` | hex floats |
//! | date | `YYYY-MM-DD` (ISO 8601), a real calendar day | `03/04/2024`, `4 Mar 2024`, `20240304` |
//! | timestamp | ISO date + `T` or space + `HH:MM[:SS[.f]]`, at most 6 fraction digits | `2024-03-04 10:00 UTC` |
//! | timestamptz | a timestamp followed by `Z` or `+HH`, `+HHMM`, `+HH:MM` | named zones |
//! | time | `HH:MM:SS[.f]` (seconds required: `12:30` may be minutes) | `24:00:00`, `12:30` |
//! | interval | ISO 8601 durations (`P1DT2H`), PostgreSQL's `1 day 02:00:00` style | `1d`, `2h` |
//! | uuid | `8-4-4-4-12` hex digits | braces, no hyphens (a hash) |
//! | jsonb | a JSON object or array (RFC 8259), no `\u0000`, no key twice in an object | JSON scalars |

/// A set of candidate types, as bits.
pub type Mask = u16;

/// `boolean`
pub const BOOL: Mask = 1;
/// `smallint`
pub const INT2: Mask = 1 << 1;
/// `integer`
pub const INT4: Mask = 1 << 2;
/// `bigint`
pub const INT8: Mask = 1 << 3;
/// `numeric`
pub const NUMERIC: Mask = 1 << 4;
/// `double precision`
pub const FLOAT8: Mask = 1 << 5;
/// `date`
pub const DATE: Mask = 1 << 6;
/// `timestamp`
pub const TIMESTAMP: Mask = 1 << 7;
/// `timestamptz`
pub const TIMESTAMPTZ: Mask = 1 << 8;
/// `time`
pub const TIME: Mask = 1 << 9;
/// `interval`
pub const INTERVAL: Mask = 1 << 10;
/// `uuid`
pub const UUID: Mask = 1 << 11;
/// `jsonb`
pub const JSONB: Mask = 1 << 12;
/// Every type but text.
pub const ALL: Mask = (1 << 13) - 1;

/// What one value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Class {
    /// The types that hold it exactly.
    pub mask: Mask,
    /// A number (not NaN or an infinity).
    pub number: bool,
    /// Written with an exponent, or NaN/Infinity: prefer double precision.
    pub floaty: bool,
    /// Digits before the decimal point (numbers).
    pub int_digits: u32,
    /// Digits after it.
    pub scale: u32,
}

/// Classifies one non-NULL value.
pub fn classify(v: &[u8]) -> Class {
    let Ok(s) = std::str::from_utf8(v) else {
        return Class::default();
    };
    if let Some(mut c) = number(s) {
        if !in_double_range(s) {
            c.mask &= !FLOAT8;
        }
        return c;
    }
    let mask = if is_bool(s) {
        BOOL
    } else if is_uuid(s) {
        UUID
    } else if let Some(m) = datetime(s) {
        m
    } else if is_interval(s) {
        INTERVAL
    } else if super::json::fits_jsonb(s) {
        JSONB
    } else {
        0
    };
    Class {
        mask,
        ..Class::default()
    }
}

/// Whether a number's value is within double precision's range: its
/// written exponent may be, and the value not (`999999999999999e300` is
/// about 1e314, which float8in refuses as out of range, as it refuses a
/// nonzero value that would be 0). NaN and the infinities are.
fn in_double_range(s: &str) -> bool {
    match s.parse::<f64>() {
        Ok(v) if v.is_infinite() => s.to_ascii_lowercase().contains("inf"),
        Ok(0.0) => !s
            .bytes()
            .take_while(|&b| b != b'e' && b != b'E')
            .any(|b| matches!(b, b'1'..=b'9')),
        _ => true,
    }
}

fn is_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") || s == "t" || s == "f"
}

/// `-?` then digits without a leading zero (`0` itself is fine).
fn plain_digits(s: &str) -> Option<&str> {
    let d = s.strip_prefix('-').unwrap_or(s);
    let ok = !d.is_empty()
        && d.bytes().all(|b| b.is_ascii_digit())
        && (d.len() == 1 || !d.starts_with('0'));
    ok.then_some(d)
}

fn number(s: &str) -> Option<Class> {
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "nan" | "infinity" | "-infinity" | "inf" | "-inf"
    ) {
        return Some(Class {
            mask: FLOAT8 | NUMERIC,
            floaty: true,
            ..Class::default()
        });
    }
    if let Some(digits) = plain_digits(s) {
        let mask = match s.parse::<i64>() {
            Ok(n) if i16::try_from(n).is_ok() => INT2 | INT4 | INT8 | NUMERIC | FLOAT8,
            Ok(n) if i32::try_from(n).is_ok() => INT4 | INT8 | NUMERIC | FLOAT8,
            Ok(n) if n.unsigned_abs() <= 1 << 53 => INT8 | NUMERIC | FLOAT8,
            Ok(_) => INT8 | NUMERIC,
            Err(_) => NUMERIC,
        };
        return Some(Class {
            mask,
            number: true,
            int_digits: digits.len() as u32,
            ..Class::default()
        });
    }
    // Mantissa and exponent.
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let Some((int_part, frac)) = mantissa.split_once('.') else {
        return exponent_only(s);
    };
    let int_ok = matches!(int_part, "" | "-") || plain_digits(int_part).is_some();
    if !int_ok || frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        // `1e5` has no point: try it as an integer mantissa.
        return exponent_only(s);
    }
    let int_digits = int_part.trim_start_matches('-').len() as u32;
    match exponent {
        None => {
            let significant = (int_part.trim_start_matches(['-', '0']).len() + frac.len()) as u32;
            let mut mask = NUMERIC;
            if significant <= 15 {
                mask |= FLOAT8;
            }
            Some(Class {
                mask,
                number: true,
                int_digits,
                scale: frac.len() as u32,
                ..Class::default()
            })
        }
        Some(e) => exponent_ok(e).then(|| with_exponent(int_part.len() + frac.len(), int_part)),
    }
}

/// `12e3`, `-1E-5`: an integer mantissa with an exponent.
fn exponent_only(s: &str) -> Option<Class> {
    let i = s.find(['e', 'E'])?;
    let mantissa = &s[..i];
    (plain_digits(mantissa).is_some() && exponent_ok(&s[i + 1..]))
        .then(|| with_exponent(mantissa.len(), mantissa))
}

/// A number written with an exponent, whose mantissa is `len` bytes
/// starting with `int_part`: double precision only when it keeps the
/// value, i.e. for at most 15 significant digits (`9007199254740993e0`
/// would become ...992); `numeric` always (never `numeric(p, s)`:
/// `floaty`).
fn with_exponent(len: usize, int_part: &str) -> Class {
    let sign = usize::from(int_part.starts_with('-'));
    let zeros = int_part[sign..].len() - int_part[sign..].trim_start_matches('0').len();
    let significant = len.saturating_sub(sign + zeros);
    let mut mask = NUMERIC;
    if significant <= 15 {
        mask |= FLOAT8;
    }
    Class {
        mask,
        number: true,
        floaty: true,
        ..Class::default()
    }
}

/// `[+-]digits`, within double precision's range.
fn exponent_ok(e: &str) -> bool {
    let d = e.strip_prefix(['+', '-']).unwrap_or(e);
    !d.is_empty() && d.len() <= 3 && d.bytes().all(|b| b.is_ascii_digit()) && {
        let n: u32 = d.parse().unwrap_or(u32::MAX);
        n <= 300
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// `n` ASCII digits as a number.
fn digits(s: &str, n: usize) -> Option<u32> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
}

/// `YYYY-MM-DD`, a day that exists (year 1 to 9999).
pub(crate) fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(&s[..4], 4), digits(&s[5..7], 2), digits(&s[8..], 2))
    else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    y >= 1 && (1..=days).contains(&d)
}

/// `HH:MM:SS[.f]` (or `HH:MM` when `seconds_optional`), hour 0-23, at
/// most 6 fraction digits (more would be rounded by PostgreSQL).
fn is_clock(s: &str, seconds_optional: bool) -> bool {
    let mut parts = s.splitn(3, ':');
    let (Some(h), Some(m)) = (parts.next(), parts.next()) else {
        return false;
    };
    let hm = matches!(digits(h, 2), Some(0..=23)) && matches!(digits(m, 2), Some(0..=59));
    match parts.next() {
        None => hm && seconds_optional,
        Some(sec) => {
            let (whole, frac) = match sec.split_once('.') {
                Some((w, f)) => (w, Some(f)),
                None => (sec, None),
            };
            hm && matches!(digits(whole, 2), Some(0..=59))
                && frac.is_none_or(|f| {
                    (1..=6).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_digit())
                })
        }
    }
}

/// `Z`, `+HH`, `+HHMM`, `+HH:MM` (hours up to 15).
fn is_offset(s: &str) -> bool {
    if s == "Z" {
        return true;
    }
    let Some(rest) = s.strip_prefix(['+', '-']) else {
        return false;
    };
    let (h, m) = match rest.len() {
        2 => (rest, "00"),
        4 => (&rest[..2], &rest[2..]),
        5 if rest.as_bytes()[2] == b':' => (&rest[..2], &rest[3..]),
        _ => return false,
    };
    matches!(digits(h, 2), Some(0..=15)) && matches!(digits(m, 2), Some(0..=59))
}

/// Dates, timestamps (with and without an offset) and times.
fn datetime(s: &str) -> Option<Mask> {
    if is_date(s) {
        return Some(DATE | TIMESTAMP);
    }
    if is_clock(s, false) {
        return Some(TIME | INTERVAL);
    }
    if s.len() < 16 || !is_date(s.get(..10)?) || !matches!(s.as_bytes()[10], b'T' | b' ') {
        return None;
    }
    let rest = &s[11..];
    let split = rest.find(['Z', '+', '-']).unwrap_or(rest.len());
    let (clock, offset) = rest.split_at(split);
    if !is_clock(clock, true) {
        return None;
    }
    match offset {
        "" => Some(TIMESTAMP),
        o if is_offset(o) => Some(TIMESTAMPTZ),
        _ => None,
    }
}

/// ISO 8601 durations and PostgreSQL's own output style.
fn is_interval(s: &str) -> bool {
    iso_duration(s) || pg_interval(s)
}

/// `P[nY][nM][nW][nD][T[nH][nM][n[.f]S]]`, at least one part.
fn iso_duration(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('P') else {
        return false;
    };
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let parts = |p: &str, units: &[u8], last_fraction: bool| -> Option<usize> {
        let mut n = 0;
        let mut num = String::new();
        let mut allowed = units;
        for c in p.bytes() {
            if c.is_ascii_digit() || (c == b'.' && last_fraction) {
                num.push(c as char);
            } else {
                let at = allowed.iter().position(|u| *u == c)?;
                // Seconds keep up to 6 fraction digits: more would be
                // rounded (microseconds), so such a value stays text.
                let fraction_ok = match num.split_once('.') {
                    None => true,
                    Some((_, f)) => last_fraction && c == b'S' && f.len() <= 6 && !f.contains('.'),
                };
                if num.is_empty() || !fraction_ok || num.ends_with('.') {
                    return None;
                }
                allowed = &allowed[at + 1..];
                num.clear();
                n += 1;
            }
        }
        num.is_empty().then_some(n)
    };
    let Some(d) = parts(date, b"YMWD", false) else {
        return false;
    };
    match time {
        None => d > 0,
        Some(t) => matches!(parts(t, b"HMS", true), Some(n) if n > 0),
    }
}

/// `1 year 2 mons 3 days 04:05:06.5`, `-3 days`, `25:00:00`.
fn pg_interval(s: &str) -> bool {
    const UNITS: &[&str] = &[
        "year", "years", "mon", "mons", "month", "months", "week", "weeks", "day", "days", "hour",
        "hours", "min", "mins", "minute", "minutes", "sec", "secs", "second", "seconds",
    ];
    let words: Vec<&str> = s.split(' ').collect();
    let mut i = 0;
    let mut units = 0;
    while i + 1 < words.len() && UNITS.contains(&words[i + 1]) {
        if plain_digits(words[i]).is_none() {
            return false;
        }
        units += 1;
        i += 2;
    }
    match &words[i..] {
        [] => units > 0,
        [clock] => {
            let c = clock.strip_prefix('-').unwrap_or(clock);
            let Some((h, rest)) = c.split_once(':') else {
                return false;
            };
            let hours_ok = !h.is_empty()
                && h.len() <= 9
                && h.bytes().all(|b| b.is_ascii_digit())
                && (h.len() >= 2);
            // `HH:MM:SS` with HH 24 or more, a sign, or after units: a
            // plain time of day is classified by `datetime` first.
            hours_ok && is_clock(&format!("00:{rest}"), false)
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "value_tests.rs"]
mod tests;
