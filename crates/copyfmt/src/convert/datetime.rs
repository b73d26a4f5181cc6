//! `date`, `time`, `timestamp`, `timestamptz`.
//!
//! PostgreSQL's date/time input (`ParseDateTime` + `DecodeDateTime`) reads
//! dozens of forms, several of which depend on `DateStyle`, `TimeZone` or
//! the zone abbreviation files. Only the ISO 8601 core is converted here,
//! in forms that mean the same thing under every setting:
//!
//! * date: `YYYY-MM-DD` (a 4-digit first field is a year in every
//!   DateStyle), optional ` BC`; `infinity`, `-infinity`.
//! * time: `HH:MM`, `HH:MM:SS`, `HH:MM:SS.frac`, with hours 00-23.
//! * timestamp: a date, optionally followed by ` ` or `T` and a time, then
//!   optionally ` BC`; `infinity`, `-infinity`.
//! * timestamptz: the same, with the time followed by `Z` or a numeric
//!   offset `±HH`, `±HH:MM`, `±HHMM` (hours ≤ 14). Without an offset only
//!   when the session TimeZone is UTC; otherwise the server's zone rules
//!   decide, so the value is deferred as ambiguous.
//!
//! Leading and trailing whitespace is ignored, as in PostgreSQL. Deferred:
//! every other form (`today`, `epoch`, month names, `MM/DD/YYYY`, Julian
//! days, zone names, an offset on a timestamp *without* time zone, which
//! PostgreSQL silently drops), seconds of 60, a fraction that rounds up to
//! a whole second, and years outside 4713 BC – 9999 AD.
//!
//! Fractional seconds: up to six digits are exact. Longer fractions are
//! rounded as `ParseFractionalSecond` does, `rint(strtod(".ddd") * 1e6)`,
//! computed with the same correctly rounded IEEE double operations, unless
//! the product lies within 1e-6 of a tie, where a platform's `rint` or
//! `strtod` could tip the other way: those are deferred.
//!
//! Send formats: date = int32 days since 2000-01-01 (`i32::MAX`/`MIN` for
//! ±infinity); time = int64 microseconds since midnight; timestamp(tz) =
//! int64 microseconds since 2000-01-01 00:00:00 (UTC for timestamptz),
//! `i64::MAX`/`MIN` for ±infinity. A column precision such as
//! `timestamp(3)` is applied by the server's receive function exactly as
//! its input function would.

use super::{trim_pg_space, Uncertain};

/// `POSTGRES_EPOCH_JDATE`: the Julian day of 2000-01-01.
const EPOCH_JDATE: i64 = 2_451_545;
const USECS_PER_SEC: i64 = 1_000_000;
const USECS_PER_DAY: i64 = 86_400 * USECS_PER_SEC;
/// The earliest year taken, as a BC year: well after the start of
/// PostgreSQL's Julian day range (4714-11-24 BC).
const MAX_BC_YEAR: i32 = 4713;

/// How a timestamp treats time zones.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Zone {
    /// `timestamp`: no offset allowed.
    Without,
    /// `timestamptz` in a session of unknown TimeZone: offset required.
    Explicit,
    /// `timestamptz` in a UTC session: offset optional.
    Utc,
}

/// `date2j`: the Julian day number of a proleptic Gregorian date, with
/// astronomical years (1 BC = 0).
fn date2j(year: i32, month: u32, day: u32) -> i64 {
    let (mut y, mut m) = (i64::from(year), i64::from(month));
    if m > 2 {
        m += 1;
        y += 4800;
    } else {
        m += 13;
        y += 4799;
    }
    let century = y / 100;
    let mut julian = y * 365 - 32167;
    julian += y / 4 - century + century / 4;
    julian + 7834 * m / 256 + i64::from(day)
}

fn is_leap(year: i32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Reads exactly `n` ASCII digits at the start of `s`.
fn digits(s: &[u8], n: usize) -> Option<u32> {
    let d = s.get(..n)?;
    d.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// `YYYY-MM-DD` at the start of `s` (10 bytes), as a year (not yet BC
/// adjusted), month and day.
fn parse_ymd(s: &[u8]) -> Option<(i32, u32, u32)> {
    if s.get(4) != Some(&b'-') || s.get(7) != Some(&b'-') {
        return None;
    }
    let year = digits(s, 4)? as i32;
    let month = digits(&s[5..], 2)?;
    let day = digits(&s[8..], 2)?;
    Some((year, month, day))
}

/// Validates a date and returns its day number since 2000-01-01.
fn day_number(year: i32, month: u32, day: u32, bc: bool) -> Result<i64, Uncertain> {
    // There is no year 0 in AD/BC notation.
    if year == 0 || !(1..=12).contains(&month) || day == 0 {
        return Err(Uncertain::Invalid);
    }
    if bc && year > MAX_BC_YEAR {
        return Err(Uncertain::Unsupported);
    }
    let astro = if bc { 1 - year } else { year };
    const DAYS: [u32; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let max = DAYS[month as usize - 1] + u32::from(month == 2 && is_leap(astro));
    if day > max {
        return Err(Uncertain::Invalid);
    }
    Ok(date2j(astro, month, day) - EPOCH_JDATE)
}

/// Strips a trailing ` BC` (any case); true if it was there.
fn strip_bc(s: &[u8]) -> (&[u8], bool) {
    match s.len().checked_sub(3) {
        Some(at) if s[at..].eq_ignore_ascii_case(b" bc") => (&s[..at], true),
        _ => (s, false),
    }
}

/// Which infinity, if `t` is `infinity` or `-infinity` (any case).
fn infinity(t: &[u8]) -> Option<bool> {
    if t.eq_ignore_ascii_case(b"infinity") {
        Some(false)
    } else if t.eq_ignore_ascii_case(b"-infinity") {
        Some(true)
    } else {
        None
    }
}

pub(super) fn encode_date(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let t = trim_pg_space(v);
    let days = match infinity(t) {
        Some(false) => i32::MAX,
        Some(true) => i32::MIN,
        None => {
            let (t, bc) = strip_bc(t);
            if t.len() != 10 {
                return Err(Uncertain::Unsupported);
            }
            let (y, m, d) = parse_ymd(t).ok_or(Uncertain::Unsupported)?;
            // Within ±3.7M days: fits.
            day_number(y, m, d, bc)? as i32
        }
    };
    out.extend_from_slice(&days.to_be_bytes());
    Ok(())
}

/// Microseconds for the fraction digits after a seconds field.
pub(super) fn fraction_micros(frac: &[u8]) -> Result<i64, Uncertain> {
    if frac.is_empty() || !frac.iter().all(u8::is_ascii_digit) {
        return Err(Uncertain::Unsupported);
    }
    if frac.len() <= 6 {
        let n = frac.iter().fold(0i64, |a, &b| a * 10 + i64::from(b - b'0'));
        return Ok(n * 10i64.pow(6 - frac.len() as u32));
    }
    // Beyond ~20 digits the rounding is no longer worth emulating.
    if frac.len() > 20 {
        return Err(Uncertain::Unsupported);
    }
    let mut text = [b'0'; 22];
    text[1] = b'.';
    text[2..2 + frac.len()].copy_from_slice(frac);
    let text = std::str::from_utf8(&text[..2 + frac.len()]).map_err(|_| Uncertain::Invalid)?;
    let x = text.parse::<f64>().map_err(|_| Uncertain::Invalid)? * 1e6;
    if ((x - x.floor()) - 0.5).abs() < 1e-6 {
        return Err(Uncertain::Unsupported);
    }
    Ok(x.round_ties_even() as i64)
}

/// `HH:MM[:SS[.frac]]` exactly filling `s`, as microseconds since
/// midnight (hours 0-23, below 24:00:00).
fn parse_time(s: &[u8]) -> Result<i64, Uncertain> {
    let bad = Uncertain::Unsupported;
    if s.len() < 5 || s[2] != b':' {
        return Err(bad);
    }
    let (h, m) = (digits(s, 2).ok_or(bad)?, digits(&s[3..], 2).ok_or(bad)?);
    let (mut sec, mut micros) = (0, 0);
    if s.len() > 5 {
        if s[5] != b':' || s.len() < 8 {
            return Err(bad);
        }
        sec = digits(&s[6..], 2).ok_or(bad)?;
        if s.len() > 8 {
            if s[8] != b'.' {
                return Err(bad);
            }
            micros = fraction_micros(&s[9..])?;
        }
    }
    if h > 23 || m > 59 || sec > 59 {
        // 24:00:00 and leap seconds are accepted by PostgreSQL in some
        // types and positions only; let it decide.
        return Err(if h == 24 || sec == 60 {
            bad
        } else {
            Uncertain::Invalid
        });
    }
    if micros >= USECS_PER_SEC {
        // A fraction rounded up into the next second: rare, defer.
        return Err(bad);
    }
    let secs = i64::from((h * 60 + m) * 60 + sec);
    Ok(secs * USECS_PER_SEC + micros)
}

pub(super) fn encode_time(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let micros = parse_time(trim_pg_space(v))?;
    out.extend_from_slice(&micros.to_be_bytes());
    Ok(())
}

/// A numeric UTC offset at the end of a time, in seconds east of UTC, and
/// the time text before it.
fn split_offset(s: &[u8]) -> Option<(&[u8], i64)> {
    if let Some(rest) = s.strip_suffix(b"Z").or_else(|| s.strip_suffix(b"z")) {
        return Some((rest, 0));
    }
    let at = s.iter().rposition(|&b| b == b'+' || b == b'-')?;
    let (time, off) = (&s[..at], &s[at + 1..]);
    let (h, m) = match off.len() {
        2 => (digits(off, 2)?, 0),
        4 => (digits(off, 2)?, digits(&off[2..], 2)?),
        5 if off[2] == b':' => (digits(off, 2)?, digits(&off[3..], 2)?),
        _ => return None,
    };
    if h > 14 || m > 59 {
        return None;
    }
    let secs = i64::from(h * 3600 + m * 60);
    Some((time, if s[at] == b'-' { -secs } else { secs }))
}

pub(super) fn encode_timestamp(v: &[u8], zone: Zone, out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let t = trim_pg_space(v);
    let micros = match infinity(t) {
        Some(false) => i64::MAX,
        Some(true) => i64::MIN,
        None => timestamp_micros(t, zone)?,
    };
    out.extend_from_slice(&micros.to_be_bytes());
    Ok(())
}

fn timestamp_micros(t: &[u8], zone: Zone) -> Result<i64, Uncertain> {
    let (t, bc) = strip_bc(t);
    if t.len() < 10 {
        return Err(Uncertain::Unsupported);
    }
    let (y, m, d) = parse_ymd(t).ok_or(Uncertain::Unsupported)?;
    let days = day_number(y, m, d, bc)?;
    let rest = &t[10..];
    let (time, offset) = if rest.is_empty() {
        (0, None)
    } else {
        if !matches!(rest[0], b' ' | b'T') {
            return Err(Uncertain::Unsupported);
        }
        let clock = &rest[1..];
        let (clock, offset) = match split_offset(clock) {
            Some((c, off)) if c.len() >= 5 => (c, Some(off)),
            _ => (clock, None),
        };
        (parse_time(clock)?, offset)
    };
    let offset = match (zone, offset) {
        (Zone::Without, None) => 0,
        // PostgreSQL ignores an offset given to a timestamp without time
        // zone; keep such data on the text path.
        (Zone::Without, Some(_)) => return Err(Uncertain::Unsupported),
        (_, Some(off)) => off,
        (Zone::Utc, None) => 0,
        (Zone::Explicit, None) => return Err(Uncertain::Ambiguous),
    };
    Ok(days * USECS_PER_DAY + time - offset * USECS_PER_SEC)
}

#[cfg(test)]
#[path = "datetime_tests.rs"]
mod tests;
