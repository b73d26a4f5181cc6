//! Whether a JSON document survives `jsonb`: `jsonb` keeps only the last
//! value of a key that an object repeats, so `{"a": 1, "a": 2}` would
//! lose `1` on its way in. Such a document stays text.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON object or array that `jsonb` keeps whole: valid JSON, no key
/// twice in one object, no `\u0000` (which `jsonb` refuses).
pub fn fits_jsonb(s: &str) -> bool {
    (s.starts_with('{') || s.starts_with('['))
        && !s.contains("\\u0000")
        && serde_json::from_str::<Unrepeated>(s).is_ok()
}

/// A JSON value, read only to check that no object repeats a key.
struct Unrepeated;

impl<'de> Deserialize<'de> for Unrepeated {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk)
    }
}

struct Walk;

impl<'de> Visitor<'de> for Walk {
    type Value = Unrepeated;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unrepeated, E> {
        Ok(Unrepeated)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Unrepeated, E> {
        Ok(Unrepeated)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Unrepeated, E> {
        Ok(Unrepeated)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Unrepeated, E> {
        Ok(Unrepeated)
    }

    fn visit_str<E>(self, _: &str) -> Result<Unrepeated, E> {
        Ok(Unrepeated)
    }

    fn visit_unit<E>(self) -> Result<Unrepeated, E> {
        Ok(Unrepeated)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unrepeated, A::Error> {
        while seq.next_element::<Unrepeated>()?.is_some() {}
        Ok(Unrepeated)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unrepeated, A::Error> {
        // Keys as jsonb compares them: after unescaping, byte for byte.
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                return Err(de::Error::custom("a key repeated in one object"));
            }
            map.next_value::<Unrepeated>()?;
        }
        Ok(Unrepeated)
    }
}
