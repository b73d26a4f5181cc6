//! Tests for date/time encoders. Expected bytes were produced by
//! `date_send`/`time_send`/`timestamp_send`/`timestamptz_send` on a
//! PostgreSQL 15 server whose TimeZone was UTC.

use super::super::{Encoder, Uncertain};
use proptest::prelude::*;

fn hex(e: Encoder, v: &str) -> Result<String, Uncertain> {
    let mut out = Vec::new();
    e.encode(v.as_bytes(), &mut out)?;
    Ok(out.iter().map(|b| format!("{b:02x}")).collect())
}

#[test]
fn dates() {
    for (v, want) in [
        ("2024-01-15", "0000224c"),
        ("2000-01-01", "00000000"),
        (" 1999-12-31\t", "ffffffff"),
        ("0001-01-01", "fff4dbf9"),
        ("0001-12-31 BC", "fff4dbf8"),
        ("0001-12-31 bc", "fff4dbf8"),
        ("4713-01-01 BC", "ffda97cd"),
        ("9999-12-31", "002c95d3"),
        ("2024-02-29", "00002279"),
        ("0001-02-29 BC", "fff4dac6"),
        ("infinity", "7fffffff"),
        ("-Infinity", "80000000"),
    ] {
        assert_eq!(hex(Encoder::Date, v).as_deref(), Ok(want), "{v}");
    }
}

#[test]
fn dates_deferred() {
    use Uncertain::*;
    for (v, why) in [
        ("2023-02-29", Invalid),
        ("2024-13-01", Invalid),
        ("2024-00-10", Invalid),
        ("2024-01-00", Invalid),
        ("2024-04-31", Invalid),
        ("0000-01-01", Invalid),
        ("4714-01-01 BC", Unsupported),
        ("2024-1-5", Unsupported),
        ("24-01-15", Unsupported),
        ("10000-01-01", Unsupported),
        ("01/15/2024", Unsupported),
        ("2024-01-15 00:00", Unsupported),
        ("20240115", Unsupported),
        ("today", Unsupported),
        ("epoch", Unsupported),
        ("+infinity", Unsupported),
        ("", Unsupported),
    ] {
        assert_eq!(hex(Encoder::Date, v), Err(why), "{v}");
    }
}

#[test]
fn times() {
    for (v, want) in [
        ("12:34:56.789", "0000000a8be62608"),
        ("00:00", "0000000000000000"),
        ("23:59:59.999999", "000000141dd75fff"),
        (" 12:00 ", "0000000a0eebb000"),
    ] {
        assert_eq!(hex(Encoder::Time, v).as_deref(), Ok(want), "{v}");
    }
    use Uncertain::*;
    for (v, why) in [
        ("24:00:00", Unsupported),
        ("12:00:60", Unsupported),
        ("25:00", Invalid),
        ("12:60", Invalid),
        ("1:00", Unsupported),
        ("12:00:00.", Unsupported),
        ("12:00:00+02", Unsupported),
        ("12:00:00Z", Unsupported),
        ("23:59:59.9999999", Unsupported),
        ("allballs", Unsupported),
    ] {
        assert_eq!(hex(Encoder::Time, v), Err(why), "{v}");
    }
}

#[test]
fn timestamps() {
    for (v, want) in [
        ("2024-01-15 12:34:56.789", "0002b1fa0296a608"),
        ("2024-01-15T12:34:56", "0002b1fa028a9c00"),
        ("2024-01-15", "0002b1ef76b08000"),
        ("1999-12-31 23:59:59.999999", "ffffffffffffffff"),
        ("0044-03-15 12:00:00 BC", "ff1af9e8fb46d000"),
        ("2024-01-15 12:34", "0002b1f9ff341e00"),
        ("2000-01-01 00:00:00.12345651", "000000000001e241"),
        ("2000-01-01 00:00:00.9999994", "00000000000f423f"),
        ("infinity", "7fffffffffffffff"),
        ("-infinity", "8000000000000000"),
    ] {
        assert_eq!(hex(Encoder::Timestamp, v).as_deref(), Ok(want), "{v}");
    }
    use Uncertain::*;
    for (v, why) in [
        // Near-ties of the strtod/rint rounding are left to the server.
        ("2000-01-01 00:00:00.1234565", Unsupported),
        ("2000-01-01 00:00:00.0000005", Unsupported),
        ("2024-01-15 12:00:00+02", Unsupported),
        ("2024-01-15 12:00:00Z", Unsupported),
        ("2024-01-15  12:00:00", Unsupported),
        ("2024-01-15 24:00:00", Unsupported),
        ("2024-01-15 12:00:00 PST", Unsupported),
        ("2024-02-30 12:00:00", Invalid),
        ("2024-01-15 12:61:00", Invalid),
        ("now", Unsupported),
    ] {
        assert_eq!(hex(Encoder::Timestamp, v), Err(why), "{v}");
    }
}

#[test]
fn timestamptz_with_offsets() {
    for e in [Encoder::Timestamptz, Encoder::TimestamptzUtc] {
        for (v, want) in [
            ("2024-01-15 12:34:56+02", "0002b1f855635400"),
            ("2024-01-15 12:34:56Z", "0002b1fa028a9c00"),
            ("2024-01-15T12:34:56-08:00", "0002b200b727bc00"),
            ("2024-01-15 12:34:56+0530", "0002b1f5665e9600"),
            ("2024-01-15 12:34:56.5-0930", "0002b201f90cd320"),
            ("2024-01-15 12:34:56+02 BC", "fe3cf9898cde5400"),
            ("-infinity", "8000000000000000"),
        ] {
            assert_eq!(hex(e.clone(), v).as_deref(), Ok(want), "{v}");
        }
        for v in [
            "2024-01-15 12:34:56+15",
            "2024-01-15 12:34:56+0260",
            "2024-01-15 12:34:56 +02",
            "2024-01-15 12:34:56 Europe/Paris",
            "2024-01-15 12:34:56+2",
            "2024-01-15 12:34:56+02:00:00",
        ] {
            assert_eq!(hex(e.clone(), v), Err(Uncertain::Unsupported), "{v}");
        }
    }
    // Without an offset, only a UTC session knows what the value means.
    for (v, want) in [
        ("2024-01-15 12:34:56", "0002b1fa028a9c00"),
        ("2024-01-15", "0002b1ef76b08000"),
    ] {
        assert_eq!(hex(Encoder::TimestamptzUtc, v).as_deref(), Ok(want));
        assert_eq!(hex(Encoder::Timestamptz, v), Err(Uncertain::Ambiguous));
    }
}

fn days_in(y: i32, m: u32) -> u32 {
    match m {
        2 if super::is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn date_bytes(y: i32, m: u32, d: u32) -> i32 {
    let mut out = Vec::new();
    Encoder::Date
        .encode(format!("{y:04}-{m:02}-{d:02}").as_bytes(), &mut out)
        .unwrap();
    i32::from_be_bytes(out.try_into().unwrap())
}

proptest! {
    #[test]
    fn consecutive_days_differ_by_one(y in 1i32..9999, m in 1u32..=12, d in 1u32..=31) {
        prop_assume!(d <= days_in(y, m));
        let (ny, nm, nd) = if d < days_in(y, m) {
            (y, m, d + 1)
        } else if m < 12 {
            (y, m + 1, 1)
        } else {
            (y + 1, 1, 1)
        };
        prop_assert_eq!(date_bytes(y, m, d) + 1, date_bytes(ny, nm, nd));
    }

    #[test]
    fn six_digit_fractions_are_exact(us in 0u32..1_000_000) {
        let v = format!("2000-01-01 00:00:00.{us:06}");
        prop_assert_eq!(
            hex(Encoder::Timestamp, &v),
            Ok(format!("{:016x}", us))
        );
    }
}
