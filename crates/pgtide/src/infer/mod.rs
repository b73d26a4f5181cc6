//! `--create`: a table from the file itself.
//!
//! ```text
//! sample::sample (head of each input, then evenly spaced records of a
//!   plain file) -> fields (COPY's own NULL rules) -> ColumnStats::add
//!   (value::classify: the types that hold the value exactly)
//! -> ColumnStats::choose (narrowest type holding every sampled value)
//! -> names::columns (header -> identifiers) -> create::plan (CREATE TABLE,
//!   --type overrides, checked on the server inside a rolled-back
//!   transaction)
//! ```
//!
//! The inference is pure (no I/O) in this file, `value` and `names`:
//! sampled values in, a type out. Only ISO 8601 dates and times become
//! date/time types; every other spelling stays text (see `value`).

pub mod create;
mod json;
pub mod names;
pub mod sample;
pub mod value;

use std::fmt;

use value::{Mask, ALL};

/// A column type `--create` can infer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    /// `boolean`
    Boolean,
    /// `smallint`: only when every row was sampled.
    SmallInt,
    /// `integer`
    Integer,
    /// `bigint`
    BigInt,
    /// `numeric`, or `numeric(p, s)` when every row was sampled.
    Numeric(Option<(u32, u32)>),
    /// `double precision`
    Double,
    /// `date`
    Date,
    /// `timestamp`
    Timestamp,
    /// `timestamptz`
    Timestamptz,
    /// `time`
    Time,
    /// `interval`
    Interval,
    /// `uuid`
    Uuid,
    /// `jsonb`
    Jsonb,
    /// `text`
    Text,
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            SqlType::Boolean => "boolean",
            SqlType::SmallInt => "smallint",
            SqlType::Integer => "integer",
            SqlType::BigInt => "bigint",
            SqlType::Numeric(Some((p, s))) => return write!(f, "numeric({p}, {s})"),
            SqlType::Numeric(None) => "numeric",
            SqlType::Double => "double precision",
            SqlType::Date => "date",
            SqlType::Timestamp => "timestamp",
            SqlType::Timestamptz => "timestamptz",
            SqlType::Time => "time",
            SqlType::Interval => "interval",
            SqlType::Uuid => "uuid",
            SqlType::Jsonb => "jsonb",
            SqlType::Text => "text",
        };
        f.write_str(s)
    }
}

/// Spellings people use for "no value". When they alone make a column
/// text, the plan says so and suggests `--null`.
const NULLISH: &[&str] = &["NA", "N/A", "n/a", "NULL", "null", "None", "none", "-", "?"];

/// What the sampled values of one column say.
#[derive(Debug, Clone)]
pub struct ColumnStats {
    mask: Mask,
    /// The mask ignoring `NULLISH` values and empty strings.
    mask_without_nullish: Mask,
    floaty: bool,
    int_digits: u32,
    scale: u32,
    /// The smallest scale seen: `numeric(p, s)` only when every number
    /// has `s` digits after the point (it would print `1.5` as `1.50`).
    min_scale: u32,
    /// Numbers seen (NaN and infinities are not evidence on their own).
    numbers: u64,
    /// Non-NULL values seen.
    pub values: u64,
    /// NULLs seen.
    pub nulls: u64,
    /// The first NULL-like spelling that was seen ("" for an empty string).
    pub nullish: Option<String>,
    /// The first value that fits none of the inferred types, to explain a
    /// `text` column.
    pub first_text: Option<String>,
}

impl Default for ColumnStats {
    fn default() -> Self {
        ColumnStats {
            mask: ALL,
            mask_without_nullish: ALL,
            floaty: false,
            int_digits: 0,
            scale: 0,
            min_scale: u32::MAX,
            numbers: 0,
            values: 0,
            nulls: 0,
            nullish: None,
            first_text: None,
        }
    }
}

impl ColumnStats {
    /// Adds one sampled value (`None` = NULL).
    pub fn add(&mut self, v: Option<&[u8]>) {
        let Some(v) = v else {
            self.nulls += 1;
            return;
        };
        self.values += 1;
        let c = value::classify(v);
        if c.mask == 0 && self.first_text.is_none() {
            self.first_text = Some(String::from_utf8_lossy(v).chars().take(40).collect());
        }
        self.mask &= c.mask;
        let nullish = std::str::from_utf8(v)
            .ok()
            .filter(|s| s.is_empty() || NULLISH.contains(s));
        match nullish {
            Some(s) => {
                if self.nullish.is_none() {
                    self.nullish = Some(s.to_string());
                }
            }
            None => self.mask_without_nullish &= c.mask,
        }
        self.floaty |= c.floaty;
        if c.number {
            self.numbers += 1;
            self.int_digits = self.int_digits.max(c.int_digits);
            self.scale = self.scale.max(c.scale);
            self.min_scale = self.min_scale.min(c.scale);
        }
    }

    /// The narrowest type that holds every sampled value. `complete`: the
    /// sample is the whole input, so exact-fit types (smallint,
    /// `numeric(p, s)`) cannot be contradicted by a later row.
    pub fn choose(&self, complete: bool) -> SqlType {
        self.choose_from(self.mask, complete)
    }

    /// The type the column would have if its NULL-like values were NULL,
    /// when that differs from [`ColumnStats::choose`].
    pub fn without_nullish(&self, complete: bool) -> Option<SqlType> {
        let t = self.choose_from(self.mask_without_nullish, complete);
        (self.nullish.is_some() && t != self.choose(complete) && t != SqlType::Text).then_some(t)
    }

    fn choose_from(&self, mask: Mask, complete: bool) -> SqlType {
        use value::*;
        if self.values == 0 || mask == 0 {
            return SqlType::Text;
        }
        let numeric_family = INT2 | INT4 | INT8 | NUMERIC | FLOAT8;
        if mask & numeric_family != 0 && self.numbers == 0 {
            // Only NaN or infinities: no evidence of a number.
            return SqlType::Text;
        }
        let has = |m: Mask| mask & m != 0;
        if has(BOOL) {
            SqlType::Boolean
        } else if has(INT2) && complete {
            SqlType::SmallInt
        } else if has(INT4) {
            SqlType::Integer
        } else if has(INT8) {
            SqlType::BigInt
        } else if has(FLOAT8) && self.floaty {
            SqlType::Double
        } else if has(NUMERIC) {
            let p = self.int_digits.max(1) + self.scale;
            let exact = complete
                && !self.floaty
                && self.scale > 0
                && self.min_scale == self.scale
                && p <= 1000;
            SqlType::Numeric(exact.then_some((p, self.scale)))
        } else if has(FLOAT8) {
            SqlType::Double
        } else if has(DATE) {
            SqlType::Date
        } else if has(TIME) {
            SqlType::Time
        } else if has(TIMESTAMP) {
            SqlType::Timestamp
        } else if has(TIMESTAMPTZ) {
            SqlType::Timestamptz
        } else if has(INTERVAL) {
            SqlType::Interval
        } else if has(UUID) {
            SqlType::Uuid
        } else if has(JSONB) {
            SqlType::Jsonb
        } else {
            SqlType::Text
        }
    }
}

/// Infers one column's type from its values (`None` = NULL): the pure
/// entry point the tests use.
pub fn infer<'a>(values: impl IntoIterator<Item = Option<&'a [u8]>>, complete: bool) -> SqlType {
    let mut s = ColumnStats::default();
    for v in values {
        s.add(v);
    }
    s.choose(complete)
}

#[cfg(test)]
mod tests;
