//! `interval`.
//!
//! `interval_in` (`DecodeInterval`) reads the postgres, verbose, SQL and
//! ISO 8601 styles, and its reading of signs depends on `IntervalStyle`:
//! under `sql_standard`, a leading `-` applies to every following field
//! (`-1 day 01:00:00` is minus one day *and minus one hour*). So only a
//! subset that means the same under every style is converted:
//!
//! * space-separated components, each at most once: `N year[s]`,
//!   `N mon[s]`/`N month[s]`, `N day[s]`, `N hour[s]`,
//!   `N min[s]`/`N minute[s]`, `N sec[s]`/`N second[s]` (units in any
//!   case, `N` up to 7 digits), and one time `H:MM[:SS[.frac]]` (up to 6
//!   hour digits, minutes and seconds below 60), as PostgreSQL prints them
//!   (`1 year 2 mons 3 days 04:05:06`);
//! * a `-` sign only when the value has a single component (`-3 days`,
//!   `-01:30:00`), where every style agrees.
//!
//! Deferred: several signs, fractional units (`1.5 days` spills into
//! smaller fields), ISO 8601 `P1D`, `@ ... ago`, bare numbers (their unit
//! depends on the column's field restriction), `infinity` (PostgreSQL 17+).
//! A column with a field restriction (`interval day to second`) gets no
//! encoder; a precision alone (`interval(3)`) is applied by the server's
//! receive function as by its input function.
//!
//! Send format (`interval_send`): int64 microseconds, int32 days, int32
//! months.

use super::datetime::fraction_micros;
use super::{trim_pg_space, Uncertain};

/// `INTERVAL_FULL_RANGE`: the typmod field mask meaning "no restriction".
const FULL_RANGE: i32 = 0x7FFF;
const USECS_PER_SEC: i64 = 1_000_000;

/// Whether an interval column's typmod leaves text input unrestricted.
pub(super) fn typmod_ok(typmod: i32) -> bool {
    typmod < 0 || (typmod >> 16) & 0x7FFF == FULL_RANGE
}

/// The fields of an interval, and which were given.
#[derive(Default)]
struct Fields {
    months: i64,
    days: i64,
    micros: i64,
    seen: u8,
}

const YEAR: u8 = 1;
const MONTH: u8 = 2;
const DAY: u8 = 4;
const HOUR: u8 = 8;
const MINUTE: u8 = 16;
const SECOND: u8 = 32;

fn unit(word: &[u8]) -> Option<u8> {
    const UNITS: [(&[u8], u8); 18] = [
        (b"year", YEAR),
        (b"years", YEAR),
        (b"mon", MONTH),
        (b"mons", MONTH),
        (b"month", MONTH),
        (b"months", MONTH),
        (b"day", DAY),
        (b"days", DAY),
        (b"hour", HOUR),
        (b"hours", HOUR),
        (b"min", MINUTE),
        (b"mins", MINUTE),
        (b"minute", MINUTE),
        (b"minutes", MINUTE),
        (b"sec", SECOND),
        (b"secs", SECOND),
        (b"second", SECOND),
        (b"seconds", SECOND),
    ];
    UNITS
        .iter()
        .find(|(w, _)| word.eq_ignore_ascii_case(w))
        .map(|&(_, u)| u)
}

/// Digits only, 1 to `max` of them.
fn number(s: &[u8], max: usize) -> Result<i64, Uncertain> {
    if s.is_empty() || s.len() > max || !s.iter().all(u8::is_ascii_digit) {
        return Err(Uncertain::Unsupported);
    }
    Ok(s.iter().fold(0, |a, &b| a * 10 + i64::from(b - b'0')))
}

/// `H:MM[:SS[.frac]]` as microseconds.
fn clock(s: &[u8]) -> Result<i64, Uncertain> {
    let mut parts = s.splitn(3, |&b| b == b':');
    let h = number(parts.next().unwrap_or_default(), 6)?;
    let m = parts.next().ok_or(Uncertain::Unsupported)?;
    if m.len() != 2 {
        return Err(Uncertain::Unsupported);
    }
    let m = number(m, 2)?;
    let (mut sec, mut frac) = (0, 0);
    if let Some(rest) = parts.next() {
        let (whole, f) = match rest.iter().position(|&b| b == b'.') {
            Some(dot) => (&rest[..dot], Some(&rest[dot + 1..])),
            None => (rest, None),
        };
        if whole.len() != 2 {
            return Err(Uncertain::Unsupported);
        }
        sec = number(whole, 2)?;
        if let Some(f) = f {
            frac = fraction_micros(f)?;
        }
    }
    if m > 59 || sec > 59 || frac >= USECS_PER_SEC {
        return Err(Uncertain::Unsupported);
    }
    Ok(((h * 60 + m) * 60 + sec) * USECS_PER_SEC + frac)
}

fn parse(t: &[u8]) -> Result<Fields, Uncertain> {
    let mut f = Fields::default();
    let tokens: Vec<&[u8]> = t.split(|&b| b == b' ').collect();
    if tokens.iter().any(|t| t.is_empty()) {
        return Err(Uncertain::Unsupported);
    }
    let mut i = 0;
    let mut components = 0;
    let mut negative = false;
    while i < tokens.len() {
        let mut tok = tokens[i];
        if let Some(rest) = tok.strip_prefix(b"-") {
            negative = true;
            tok = rest;
        }
        components += 1;
        if tok.contains(&b':') {
            let bits = HOUR | MINUTE | SECOND;
            if f.seen & bits != 0 {
                return Err(Uncertain::Unsupported);
            }
            f.seen |= bits;
            f.micros += clock(tok)?;
            i += 1;
            continue;
        }
        let n = number(tok, 7)?;
        let u = tokens
            .get(i + 1)
            .and_then(|w| unit(w))
            .ok_or(Uncertain::Unsupported)?;
        if f.seen & u != 0 {
            return Err(Uncertain::Unsupported);
        }
        f.seen |= u;
        match u {
            YEAR => f.months += n * 12,
            MONTH => f.months += n,
            DAY => f.days += n,
            HOUR => f.micros += n * 3600 * USECS_PER_SEC,
            MINUTE => f.micros += n * 60 * USECS_PER_SEC,
            _ => f.micros += n * USECS_PER_SEC,
        }
        i += 2;
    }
    if negative {
        // Only a lone component reads the same in every IntervalStyle.
        if components != 1 {
            return Err(Uncertain::Ambiguous);
        }
        f.months = -f.months;
        f.days = -f.days;
        f.micros = -f.micros;
    }
    Ok(f)
}

pub(super) fn encode(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let t = trim_pg_space(v);
    if t.is_empty() {
        return Err(Uncertain::Invalid);
    }
    let f = parse(t)?;
    // 7-digit fields cannot overflow these; check anyway.
    let months = i32::try_from(f.months).map_err(|_| Uncertain::Unsupported)?;
    let days = i32::try_from(f.days).map_err(|_| Uncertain::Unsupported)?;
    out.extend_from_slice(&f.micros.to_be_bytes());
    out.extend_from_slice(&days.to_be_bytes());
    out.extend_from_slice(&months.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Encoder, Uncertain};

    fn hex(v: &str) -> Result<String, Uncertain> {
        let mut out = Vec::new();
        Encoder::Interval.encode(v.as_bytes(), &mut out)?;
        Ok(out.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Expected bytes from `interval_send` on PostgreSQL 15.
    #[test]
    fn accepted_forms() {
        for (v, want) in [
            (
                "1 year 2 mons 3 days 04:05:06",
                "000000036c8bc080000000030000000e",
            ),
            ("1 years", "0000000000000000000000000000000c"),
            ("2 mon", "00000000000000000000000000000002"),
            ("3 month", "00000000000000000000000000000003"),
            ("5 day", "00000000000000000000000500000000"),
            ("6 hour", "000000050775d8000000000000000000"),
            ("9 mins", "00000000202fbf000000000000000000"),
            ("10 minute", "0000000023c346000000000000000000"),
            ("13 secs", "0000000000c65d400000000000000000"),
            ("15 seconds", "0000000000e4e1c00000000000000000"),
            ("-3 days", "0000000000000000fffffffd00000000"),
            ("-01:30:00", "fffffffebe228a000000000000000000"),
            ("100:00:00", "00000053d1ac10000000000000000000"),
            ("1:30", "0000000141dd76000000000000000000"),
            ("1 day 02:00:00.123456", "00000001ad292a400000000100000000"),
            (" 1 DAY ", "00000000000000000000000100000000"),
            ("1 day 1 hour 30 mins", "0000000141dd76000000000100000000"),
            ("00:00:00.1234567", "000000000001e2410000000000000000"),
        ] {
            assert_eq!(hex(v).as_deref(), Ok(want), "{v}");
        }
    }

    #[test]
    fn deferred_forms() {
        use Uncertain::*;
        for (v, why) in [
            ("", Invalid),
            ("-1 day 01:00:00", Ambiguous),
            ("1 day -01:00:00", Ambiguous),
            ("1.5 days", Unsupported),
            ("1 day 2 days", Unsupported),
            ("1 hour 01:00:00", Unsupported),
            ("P1D", Unsupported),
            ("@ 1 day", Unsupported),
            ("1 day ago", Unsupported),
            ("5", Unsupported),
            ("1  day", Unsupported),
            ("1 fortnight", Unsupported),
            ("12:60", Unsupported),
            ("12:00:60", Unsupported),
            ("infinity", Unsupported),
            ("+1 day", Unsupported),
            ("12345678 days", Unsupported),
        ] {
            assert_eq!(hex(v), Err(why), "{v}");
        }
    }

    #[test]
    fn typmod_with_field_restriction_has_no_encoder() {
        use super::super::Session;
        let s = Session::default();
        assert_eq!(Encoder::for_type(1186, -1, &s), Some(Encoder::Interval));
        // interval(3): full range, precision 3.
        assert_eq!(
            Encoder::for_type(1186, 0x7FFF << 16 | 3, &s),
            Some(Encoder::Interval)
        );
        // interval day to second: DAY|HOUR|MINUTE|SECOND range bits.
        assert_eq!(Encoder::for_type(1186, 0x1C08 << 16 | 0xFFFF, &s), None);
    }
}
