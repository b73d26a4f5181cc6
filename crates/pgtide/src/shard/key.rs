//! Partition key values: one field's text, read as the server reads it,
//! into a form that can be hashed and compared as the server does.
//!
//! Reading goes through `copyfmt::convert::Encoder`, which accepts only
//! the forms it can prove equal to the server's input function and says
//! `Uncertain` otherwise; an uncertain key value sends the row through the
//! coordinator instead of guessing its partition.

use std::cmp::Ordering;

use copyfmt::convert::{oid, Encoder, Session};

use super::hash;

/// A key column type routed on the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// `boolean` (hashed by `hashcharextended`).
    Bool,
    /// `smallint`.
    Int2,
    /// `integer`.
    Int4,
    /// `bigint`.
    Int8,
    /// `date` (int32 days, `hashint4extended`).
    Date,
    /// `timestamp` (int64 microseconds, `hashint8extended`).
    Timestamp,
    /// `timestamptz`: only values with an explicit offset are read on the
    /// client (their meaning does not depend on any session's TimeZone).
    Timestamptz,
    /// `text` and `varchar`.
    Text,
    /// `char(n)`: compared and hashed without trailing spaces.
    BpChar,
    /// `uuid`.
    Uuid,
    /// `numeric`.
    Numeric,
}

/// One key value, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// Integers, bool (0/1), date, timestamp(tz).
    Int(i64),
    /// text/varchar/bpchar (trailing spaces removed) and uuid bytes.
    Bytes(Vec<u8>),
    /// `numeric_send` form.
    Numeric(Vec<u8>),
}

impl KeyType {
    /// The key type for a column of type `type_oid`, or `None` when the
    /// client does not route it.
    pub fn for_type(type_oid: u32) -> Option<KeyType> {
        Some(match type_oid {
            oid::BOOL => KeyType::Bool,
            oid::INT2 => KeyType::Int2,
            oid::INT4 => KeyType::Int4,
            oid::INT8 => KeyType::Int8,
            oid::DATE => KeyType::Date,
            oid::TIMESTAMP => KeyType::Timestamp,
            oid::TIMESTAMPTZ => KeyType::Timestamptz,
            oid::TEXT | oid::VARCHAR => KeyType::Text,
            oid::BPCHAR => KeyType::BpChar,
            oid::UUID => KeyType::Uuid,
            oid::NUMERIC => KeyType::Numeric,
            _ => return None,
        })
    }

    /// Whether byte order is the type's order under a "C" collation (or
    /// needs no collation): text types compare by collation, the others
    /// never.
    pub fn collatable(self) -> bool {
        matches!(self, KeyType::Text | KeyType::BpChar)
    }
}

/// Reads key values of one column: its type and typmod (a `numeric(p,s)`
/// or `char(n)` value is read as the column stores it).
#[derive(Debug, Clone)]
pub struct KeyReader {
    ty: KeyType,
    encoder: Encoder,
}

impl KeyReader {
    /// The reader for a column, or `None` when the type is not routed.
    pub fn new(type_oid: u32, typmod: i32) -> Option<KeyReader> {
        let ty = KeyType::for_type(type_oid)?;
        // Not UTC: a timestamptz without an explicit offset is uncertain,
        // whatever the TimeZone of the sessions that load it.
        let encoder = Encoder::for_type(type_oid, typmod, &Session::default())?;
        Some(KeyReader { ty, encoder })
    }

    /// The key type.
    pub fn ty(&self) -> KeyType {
        self.ty
    }

    /// The value of the text `v` (a de-escaped field), or `None` when the
    /// client cannot be sure how the server reads it.
    pub fn read(&self, v: &[u8], buf: &mut Vec<u8>) -> Option<Key> {
        buf.clear();
        self.encoder.encode(v, buf).ok()?;
        let b = buf.as_slice();
        Some(match self.ty {
            KeyType::Bool => Key::Int(i64::from(*b.first()?)),
            KeyType::Int2 => Key::Int(i64::from(i16::from_be_bytes(b.try_into().ok()?))),
            KeyType::Int4 | KeyType::Date => {
                Key::Int(i64::from(i32::from_be_bytes(b.try_into().ok()?)))
            }
            KeyType::Int8 | KeyType::Timestamp | KeyType::Timestamptz => {
                Key::Int(i64::from_be_bytes(b.try_into().ok()?))
            }
            KeyType::Text | KeyType::Uuid => Key::Bytes(b.to_vec()),
            KeyType::BpChar => {
                let len = b.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
                Key::Bytes(b[..len].to_vec())
            }
            KeyType::Numeric => Key::Numeric(b.to_vec()),
        })
    }
}

/// The column's extended hash with `seed`, as its default hash opclass
/// computes it.
pub fn hash_key(ty: KeyType, key: &Key, seed: u64) -> Option<u64> {
    Some(match (ty, key) {
        (KeyType::Bool | KeyType::Int2 | KeyType::Int4 | KeyType::Date, Key::Int(v)) => {
            hash::hash_int4(*v as i32, seed)
        }
        (KeyType::Int8 | KeyType::Timestamp | KeyType::Timestamptz, Key::Int(v)) => {
            hash::hash_int8(*v, seed)
        }
        // bpchar values are stored without trailing spaces already.
        (KeyType::Text | KeyType::BpChar | KeyType::Uuid, Key::Bytes(b)) => {
            hash::hash_bytes_extended(b, seed)
        }
        (KeyType::Numeric, Key::Numeric(n)) => hash::hash_numeric(n, seed)?,
        _ => return None,
    })
}

/// `compute_partition_hash_value`: NULLs skipped, the rest combined in key
/// order.
pub fn row_hash(types: &[KeyType], keys: &[Option<Key>]) -> Option<u64> {
    let mut h = 0u64;
    for (ty, key) in types.iter().zip(keys) {
        if let Some(k) = key {
            h = hash::hash_combine64(h, hash_key(*ty, k, hash::HASH_PARTITION_SEED)?);
        }
    }
    Some(h)
}

/// The server's btree order of two values of one type (text types by
/// bytes: only valid under a "C" collation, which the caller checks).
pub fn compare(a: &Key, b: &Key) -> Option<Ordering> {
    match (a, b) {
        (Key::Int(x), Key::Int(y)) => Some(x.cmp(y)),
        (Key::Bytes(x), Key::Bytes(y)) => Some(x.as_slice().cmp(y.as_slice())),
        (Key::Numeric(x), Key::Numeric(y)) => {
            Some(numeric_cmp(&Numeric::parse(x)?, &Numeric::parse(y)?))
        }
        _ => None,
    }
}

/// A `numeric_send` value, for comparing.
struct Numeric {
    /// -2 -Inf, -1 negative, 0 zero, 1 positive, 2 +Inf, 3 NaN (NaN sorts
    /// above everything in PostgreSQL).
    class: i8,
    weight: i16,
    digits: Vec<i16>,
}

impl Numeric {
    fn parse(b: &[u8]) -> Option<Numeric> {
        if b.len() < 8 {
            return None;
        }
        let n = u16::from_be_bytes([b[0], b[1]]) as usize;
        if b.len() != 8 + 2 * n {
            return None;
        }
        let weight = i16::from_be_bytes([b[2], b[3]]);
        let sign = u16::from_be_bytes([b[4], b[5]]);
        let mut digits: Vec<i16> = b[8..]
            .chunks_exact(2)
            .map(|d| i16::from_be_bytes([d[0], d[1]]))
            .collect();
        let lead = digits.iter().take_while(|&&d| d == 0).count();
        digits.drain(..lead);
        while digits.last() == Some(&0) {
            digits.pop();
        }
        let weight = weight - lead as i16;
        let class = match sign {
            0xC000 => 3,
            0xD000 => 2,
            0xF000 => -2,
            _ if digits.is_empty() => 0,
            0x4000 => -1,
            0x0000 => 1,
            _ => return None,
        };
        Some(Numeric {
            class,
            weight,
            digits,
        })
    }
}

fn numeric_cmp(a: &Numeric, b: &Numeric) -> Ordering {
    if a.class != b.class || !matches!(a.class, -1 | 1) {
        return a.class.cmp(&b.class);
    }
    let magnitude = a
        .weight
        .cmp(&b.weight)
        .then_with(|| a.digits.cmp(&b.digits));
    if a.class < 0 {
        magnitude.reverse()
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Key {
        let r = KeyReader::new(oid::NUMERIC, -1).unwrap();
        r.read(s.as_bytes(), &mut Vec::new()).unwrap()
    }

    #[test]
    fn numeric_order() {
        let sorted = [
            "-Infinity",
            "-100",
            "-1.5",
            "-1",
            "-0.0001",
            "0",
            "0.0001",
            "1",
            "1.5",
            "2",
            "100",
            "10000.5",
            "Infinity",
            "NaN",
        ];
        for (i, a) in sorted.iter().enumerate() {
            for (j, b) in sorted.iter().enumerate() {
                assert_eq!(compare(&num(a), &num(b)), Some(i.cmp(&j)), "{a} vs {b}");
            }
        }
        assert_eq!(compare(&num("1.50"), &num("1.5")), Some(Ordering::Equal));
    }

    #[test]
    fn timestamptz_without_offset_is_uncertain() {
        let r = KeyReader::new(oid::TIMESTAMPTZ, -1).unwrap();
        assert!(r.read(b"2024-01-01 00:00:00", &mut Vec::new()).is_none());
        assert!(r.read(b"2024-01-01 00:00:00+02", &mut Vec::new()).is_some());
    }
}
