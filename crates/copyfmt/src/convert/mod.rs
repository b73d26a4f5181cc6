//! Text value → binary send format, per column type, or "ask the server".
//!
//! Why: with `--method binary`, pgtide parses CSV/text fields itself and
//! sends binary COPY, so the server skips its text input functions. That is
//! only allowed if every value loads **exactly** as text COPY would have
//! loaded it. So each encoder here re-implements the strict, unambiguous
//! core of one PostgreSQL input function (`int4in`, `numeric_in`,
//! `date_in`, ...) and emits what the matching *send* function would
//! produce for the result. Anything outside that core (a form that depends
//! on a session setting, a PostgreSQL version, a platform's `strtod`, or
//! that is simply invalid) returns [`Uncertain`], and the caller sends that
//! row by text COPY, where the server decides and, if the value is bad,
//! writes the real error message. The encoders never invent an error and
//! never alter a value.
//!
//! What is accepted exactly, per type (all other forms are deferred):
//!
//! | type | accepted | deferred |
//! |---|---|---|
//! | bool | `t`/`true`/`y`/`yes`/`on`/`off`/`f`/`false`/`n`/`no`/`1`/`0` and prefixes, as `boolin` | anything else |
//! | int2/4/8 | `[ws][+-]digits[ws]` in range | `0x`, `_` (PG 16+ only), out of range |
//! | float4/8 | decimal and exponent forms, `NaN`, `[+-]inf[inity]` | hex floats, `-nan`, overflow, underflow to 0 |
//! | numeric | decimal, exponent (`\|e\| ≤ 1000`), `NaN`, infinities; `numeric(p,s)` rounding and overflow check | `0x`, `_`, precision overflow |
//! | text, varchar(n), bpchar(n), name | valid UTF-8 without NUL; bpchar padded | over-length values (PG truncates spaces or errors) |
//! | bytea | `\x` hex and the escape format | invalid escapes |
//! | date | `YYYY-MM-DD[ BC]`, `infinity`, `-infinity` | every other form |
//! | time | `HH:MM[:SS[.frac]]` | zones, `24:00`, leap seconds |
//! | timestamp | `date[( \|T)time][ BC]`, infinities | offsets (PG ignores them) |
//! | timestamptz | as timestamp plus `Z`/`±HH[[:]MM]`; no offset only in a UTC session | named zones, no offset otherwise |
//! | interval | `N years N mons N days [-]HH:MM[:SS[.frac]]` subset | ISO 8601, fractions of units, several signs |
//! | uuid | 32 hex digits, `-` after any 4, optional `{}` (exactly `uuid_in`) | anything else |
//! | json/jsonb | RFC 8259 JSON (validated here) | `\u0000`, lone surrogates, deep nesting |
//! | one-dimensional arrays of the above | `{a,"b c",NULL}` | nested, `[1:2]=`, whitespace, unquoted `\` |
//!
//! Fractional seconds with more than six digits are rounded the way
//! `ParseFractionalSecond` does (`rint(strtod(frac) * 1e6)`), except where
//! the product is within a hair of a tie, which is deferred.
//!
//! Assumptions the caller must keep: the connection's `client_encoding` is
//! UTF8, `array_nulls` is on (the default), and the [`Session`] describes
//! the session that runs the COPY.
//!
//! Column typmods other than numeric's, varchar's and bpchar's (such as
//! `timestamp(3)`) need no work here: the server's receive functions apply
//! them exactly as its input functions do.
//!
//! How it is checked: the expected bytes in the unit tests were produced by
//! PostgreSQL's own send functions, and the accepted forms were loaded by
//! both text and binary COPY into a PostgreSQL 15 server under two sets of
//! session settings (UTC/ISO/postgres and a non-UTC zone with `SQL, DMY`
//! and `sql_standard`), with identical stored values.

mod array;
mod datetime;
mod float;
mod int;
mod interval;
mod json;
mod numeric;
pub mod oid;
mod text;

use std::fmt;

use crate::binary::FieldTooLarge;

/// Why a value was not encoded: the caller should send the row by text
/// COPY and let the server convert (or reject) it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uncertain {
    /// The value is not valid input for the type, as far as the encoder can
    /// tell; the server will produce the real error.
    Invalid,
    /// The value may be valid, but in a form this encoder does not convert
    /// (for example hexadecimal integers, which only PostgreSQL 16+ reads).
    Unsupported,
    /// The meaning of the value depends on a session setting (TimeZone,
    /// DateStyle, IntervalStyle) that only the server should apply.
    Ambiguous,
}

impl fmt::Display for Uncertain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Uncertain::Invalid => "value is not valid input for its type",
            Uncertain::Unsupported => "value form not converted client-side",
            Uncertain::Ambiguous => "value depends on session settings",
        })
    }
}

impl std::error::Error for Uncertain {}

impl From<FieldTooLarge> for Uncertain {
    fn from(_: FieldTooLarge) -> Uncertain {
        Uncertain::Unsupported
    }
}

/// The settings of the session that will run the COPY, as far as they
/// change how text input is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The session `TimeZone` is UTC (or GMT, or a fixed +00): a
    /// timestamptz without an offset then means UTC.
    pub timezone_utc: bool,
    /// `DateStyle` reads `YYYY-MM-DD` as year-month-day. PostgreSQL does so
    /// in every DateStyle (a first field of 3+ digits is a year), so this
    /// is normally true; when false, date and timestamp columns get no
    /// encoder at all.
    pub datestyle_iso_ymd: bool,
    /// The server stores date/time values as int64 microseconds (always
    /// true since PostgreSQL 10); when false, time, timestamp and interval
    /// columns get no encoder.
    pub integer_datetimes: bool,
    /// `array_nulls` is on (the default): an unquoted `NULL` in an array
    /// is a NULL element. When off it is the string `NULL`, and array
    /// columns get no encoder.
    pub array_nulls: bool,
}

impl Default for Session {
    /// The safe default: TimeZone not known to be UTC.
    fn default() -> Session {
        Session {
            timezone_utc: false,
            datestyle_iso_ymd: true,
            integer_datetimes: true,
            array_nulls: true,
        }
    }
}

/// A converter from one column type's text input to its binary form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Encoder {
    /// `boolean`.
    Bool,
    /// `smallint`.
    Int2,
    /// `integer`.
    Int4,
    /// `bigint`.
    Int8,
    /// `real`.
    Float4,
    /// `double precision`.
    Float8,
    /// `numeric` without a typmod.
    Numeric,
    /// `numeric(precision, scale)`: rounded to `scale`, checked against
    /// `precision` (a negative scale exists from PostgreSQL 15).
    NumericTypmod {
        /// Total significant digits allowed.
        precision: i32,
        /// Digits kept after the decimal point.
        scale: i32,
    },
    /// `text`, and `varchar`/`bpchar` without a length.
    Text,
    /// `name`: at most 63 bytes (longer input is truncated by the server,
    /// so it is deferred).
    Name,
    /// `varchar(n)`: at most `n` characters.
    VarChar(u32),
    /// `char(n)`/`bpchar(n)`: at most `n` characters, padded with spaces.
    BpChar(u32),
    /// `bytea`.
    Bytea,
    /// `date`.
    Date,
    /// `time without time zone`.
    Time,
    /// `timestamp without time zone`.
    Timestamp,
    /// `timestamptz`, in a session whose TimeZone is not known to be UTC:
    /// only values with an explicit numeric offset are converted.
    Timestamptz,
    /// `timestamptz` in a UTC session: a value without offset means UTC.
    TimestamptzUtc,
    /// `interval` (with no field restriction; a precision is fine).
    Interval,
    /// `uuid`.
    Uuid,
    /// `json`: validated, sent as the text itself.
    Json,
    /// `jsonb`: validated, sent as version 1 and the text.
    Jsonb,
    /// A one-dimensional array of the inner encoder's type, whose element
    /// type OID is the second field.
    Array(Box<Encoder>, u32),
}

/// The longest value accepted (PostgreSQL's 1 GB field limit, less room
/// for headers); larger input is [`Uncertain::Unsupported`].
const MAX_VALUE_LEN: usize = (1 << 30) - 64;

impl Encoder {
    /// The encoder for a column of type `oid` with typmod `typmod`
    /// (`atttypmod`, -1 for none), in `session`.
    ///
    /// `None` means the type has no safe binary form here: the caller
    /// loads the table by text COPY.
    pub fn for_type(oid: u32, typmod: i32, session: &Session) -> Option<Encoder> {
        use self::oid as o;
        let dates = session.datestyle_iso_ymd;
        let times = dates && session.integer_datetimes;
        let enc = match oid {
            o::BOOL => Encoder::Bool,
            o::BYTEA => Encoder::Bytea,
            o::NAME => Encoder::Name,
            o::INT8 => Encoder::Int8,
            o::INT2 => Encoder::Int2,
            o::INT4 => Encoder::Int4,
            o::TEXT => Encoder::Text,
            o::JSON => Encoder::Json,
            o::FLOAT4 => Encoder::Float4,
            o::FLOAT8 => Encoder::Float8,
            o::BPCHAR => match char_len(typmod) {
                Some(n) => Encoder::BpChar(n),
                None => Encoder::Text,
            },
            o::VARCHAR => match char_len(typmod) {
                Some(n) => Encoder::VarChar(n),
                None => Encoder::Text,
            },
            o::DATE if dates => Encoder::Date,
            o::TIME if times => Encoder::Time,
            o::TIMESTAMP if times => Encoder::Timestamp,
            o::TIMESTAMPTZ if times && session.timezone_utc => Encoder::TimestamptzUtc,
            o::TIMESTAMPTZ if times => Encoder::Timestamptz,
            o::INTERVAL if times && interval::typmod_ok(typmod) => Encoder::Interval,
            o::NUMERIC => numeric::for_typmod(typmod)?,
            o::UUID => Encoder::Uuid,
            o::JSONB => Encoder::Jsonb,
            _ if !session.array_nulls => return None,
            _ => {
                let elem = oid::element_of(oid)?;
                let inner = Encoder::for_type(elem, typmod, session)?;
                Encoder::Array(Box::new(inner), elem)
            }
        };
        Some(enc)
    }

    /// Appends the binary send format of the text value `v` to `out`.
    ///
    /// `v` is one field's bytes after COPY/CSV de-escaping, expected to be
    /// UTF-8. On `Err`, `out` is left exactly as it was.
    pub fn encode(&self, v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
        if v.len() > MAX_VALUE_LEN {
            return Err(Uncertain::Unsupported);
        }
        let start = out.len();
        let r = self.encode_unchecked(v, out);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    /// `encode` without the cleanup; may leave partial output on error.
    fn encode_unchecked(&self, v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
        match self {
            Encoder::Bool => int::encode_bool(v, out),
            Encoder::Int2 => int::encode_int2(v, out),
            Encoder::Int4 => int::encode_int4(v, out),
            Encoder::Int8 => int::encode_int8(v, out),
            Encoder::Float4 => float::encode_float4(v, out),
            Encoder::Float8 => float::encode_float8(v, out),
            Encoder::Numeric => numeric::encode(v, None, out),
            Encoder::NumericTypmod { precision, scale } => {
                numeric::encode(v, Some((*precision, *scale)), out)
            }
            Encoder::Text => text::encode_text(v, out),
            Encoder::Name => text::encode_name(v, out),
            Encoder::VarChar(n) => text::encode_varchar(v, *n, out),
            Encoder::BpChar(n) => text::encode_bpchar(v, *n, out),
            Encoder::Bytea => text::encode_bytea(v, out),
            Encoder::Uuid => text::encode_uuid(v, out),
            Encoder::Date => datetime::encode_date(v, out),
            Encoder::Time => datetime::encode_time(v, out),
            Encoder::Timestamp => datetime::encode_timestamp(v, datetime::Zone::Without, out),
            Encoder::Timestamptz => datetime::encode_timestamp(v, datetime::Zone::Explicit, out),
            Encoder::TimestamptzUtc => datetime::encode_timestamp(v, datetime::Zone::Utc, out),
            Encoder::Interval => interval::encode(v, out),
            Encoder::Json => json::encode_json(v, out),
            Encoder::Jsonb => json::encode_jsonb(v, out),
            Encoder::Array(inner, elem) => array::encode(v, inner, *elem, out),
        }
    }
}

/// The declared length of `varchar(n)`/`bpchar(n)`, from the typmod
/// (`n + 4`); `None` when there is no limit.
fn char_len(typmod: i32) -> Option<u32> {
    u32::try_from(typmod.checked_sub(4)?)
        .ok()
        .filter(|&n| n > 0)
}

/// C `isspace` for the bytes PostgreSQL's input functions test with it:
/// the six ASCII whitespace characters (no byte ≥ 0x80 is a space in the
/// C or any UTF-8 locale).
fn is_pg_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `v` without leading and trailing [`is_pg_space`] bytes.
fn trim_pg_space(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&b| !is_pg_space(b)).unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| !is_pg_space(b))
        .map_or(start, |i| i + 1);
    &v[start..end]
}

/// Text COPY would reject a line that is not valid in the client encoding
/// (UTF-8 here) or that holds a NUL byte, so such a value is never sent.
fn check_text(v: &[u8]) -> Result<&str, Uncertain> {
    if memchr::memchr(0, v).is_some() {
        return Err(Uncertain::Invalid);
    }
    std::str::from_utf8(v).map_err(|_| Uncertain::Invalid)
}

/// Appends a big-endian int32 length, then returns where it was, to be
/// patched by [`patch_len`].
fn len_placeholder(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

/// Writes the number of bytes after the placeholder at `at` into it.
fn patch_len(out: &mut [u8], at: usize) -> Result<(), Uncertain> {
    let len = i32::try_from(out.len() - at - 4).map_err(|_| Uncertain::Unsupported)?;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_exactly_the_c_spaces() {
        assert_eq!(trim_pg_space(b" \t\n\x0b\x0c\rx y\r\n"), b"x y");
        assert_eq!(trim_pg_space(b"   "), b"");
        assert_eq!(trim_pg_space(b"\xc2\xa0x"), b"\xc2\xa0x");
    }

    #[test]
    fn for_type_maps_oids_and_typmods() {
        let s = Session::default();
        let f = |oid, tm| Encoder::for_type(oid, tm, &s);
        assert_eq!(f(23, -1), Some(Encoder::Int4));
        assert_eq!(f(1043, 14), Some(Encoder::VarChar(10)));
        assert_eq!(f(1043, -1), Some(Encoder::Text));
        assert_eq!(f(1042, 5), Some(Encoder::BpChar(1)));
        assert_eq!(f(1184, -1), Some(Encoder::Timestamptz));
        let utc = Session {
            timezone_utc: true,
            ..s
        };
        assert_eq!(
            Encoder::for_type(1184, -1, &utc),
            Some(Encoder::TimestamptzUtc)
        );
        assert_eq!(
            f(1700, (10 << 16 | 2) + 4),
            Some(Encoder::NumericTypmod {
                precision: 10,
                scale: 2
            })
        );
        assert_eq!(
            f(1007, -1),
            Some(Encoder::Array(Box::new(Encoder::Int4), 23))
        );
        assert_eq!(
            f(1015, 9),
            Some(Encoder::Array(Box::new(Encoder::VarChar(5)), 1043))
        );
        assert_eq!(f(600, -1), None); // point
        assert_eq!(f(1266, -1), None); // timetz
        let old = Session {
            integer_datetimes: false,
            ..s
        };
        assert_eq!(Encoder::for_type(1114, -1, &old), None);
        assert_eq!(Encoder::for_type(1082, -1, &old), Some(Encoder::Date));
    }

    fn all_encoders() -> Vec<Encoder> {
        let utc = Session {
            timezone_utc: true,
            ..Session::default()
        };
        let mut oids: Vec<(u32, i32)> = [
            16, 17, 19, 20, 21, 23, 25, 114, 700, 701, 1042, 1043, 1082, 1083, 1114, 1184, 1186,
            1700, 2950, 3802,
        ]
        .iter()
        .flat_map(|&o| [(o, -1), (oid::array_of(o).unwrap(), -1)])
        .collect();
        oids.extend([(1042, 8), (1043, 7), (1700, (5 << 16 | 2) + 4)]);
        let mut encs: Vec<Encoder> = oids
            .iter()
            .map(|&(o, t)| Encoder::for_type(o, t, &Session::default()).unwrap())
            .collect();
        encs.push(Encoder::for_type(1184, -1, &utc).unwrap());
        encs
    }

    proptest::proptest! {
        /// No input makes an encoder panic, and a refusal leaves the
        /// buffer as it was.
        #[test]
        fn never_panics_and_refusals_leave_no_bytes(
            v in proptest::collection::vec(proptest::sample::select(
                b"0123456789-+.:eE TZxXbcdf{}[],\\\"nNaulIy\t\xc3\xa9\xff\0".to_vec()), 0..40),
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            for e in all_encoders() {
                for input in [&v, &raw] {
                    let mut out = b"xy".to_vec();
                    if e.encode(input, &mut out).is_err() {
                        proptest::prop_assert_eq!(&out, b"xy");
                    }
                }
            }
        }
    }

    #[test]
    fn error_leaves_output_unchanged() {
        let mut out = b"abc".to_vec();
        let e = Encoder::Array(Box::new(Encoder::Int4), 23);
        assert_eq!(e.encode(b"{1,2,x}", &mut out), Err(Uncertain::Invalid));
        assert_eq!(out, b"abc");
    }
}
