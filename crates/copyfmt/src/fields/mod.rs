//! Splitting one record into decoded field values.
//!
//! [`crate::scan`] only finds where records end, which is all that
//! COPY-based loading needs. Methods that need values (binary encoding,
//! INSERTs, routing rows by key) call [`split_record`] on one record at a
//! time. It does what PostgreSQL's `CopyReadAttributesText` and
//! `CopyReadAttributesCSV` do, followed by the FORCE_NULL / FORCE_NOT_NULL
//! step of `NextCopyFrom`, so that a value reaches the server exactly as
//! `COPY` would have read it.
//!
//! The output goes into a caller-owned [`Fields`], whose buffers are reused
//! from record to record: after the first few records nothing is allocated.
//!
//! ```
//! use pgtide_copyfmt::fields::{split_record, Fields, NullSpec};
//! use pgtide_copyfmt::scan::Dialect;
//!
//! let d = Dialect::csv();
//! let mut fields = Fields::new();
//! split_record(&d, &NullSpec::csv(), b"1,,\"\",\"a \"\"b\"\"\"\r\n", &mut fields).unwrap();
//! assert_eq!(fields.get(0), Some(&b"1"[..]));
//! assert_eq!(fields.get(1), None); // unquoted empty: NULL
//! assert_eq!(fields.get(2), Some(&b""[..])); // quoted empty: empty string
//! assert_eq!(fields.get(3), Some(&b"a \"b\""[..]));
//! ```
//!
//! Two PostgreSQL rules are easy to miss. The NULL string is compared with
//! the field's *raw* bytes, before any unescaping (so in text format `\N`
//! is NULL but `\\N` is the two characters `\N`). And in CSV a quoted
//! field is never NULL unless FORCE_NULL says so, which is how `""` and an
//! empty unquoted field differ.
//!
//! Values are bytes in the file's encoding; this module does not check the
//! encoding, except that it refuses a NUL byte produced by an escape
//! (`\0`, `\x00`), which no PostgreSQL encoding accepts.

use std::fmt;

use crate::scan::{Dialect, Format};

mod binary;
mod csv;
mod text;

#[cfg(test)]
mod tests;

use binary::split_binary;
use csv::split_csv;
use text::split_text;

/// The decoded fields of one record, in buffers reused across records.
#[derive(Clone, Debug, Default)]
pub struct Fields {
    buf: Vec<u8>,
    slots: Vec<Slot>,
}

/// Where one field's value is in [`Fields::buf`], and how it was read.
#[derive(Clone, Copy, Debug)]
struct Slot {
    start: usize,
    end: usize,
    null: bool,
    quoted: bool,
}

impl Fields {
    /// Empty buffers; they grow to fit the widest record seen.
    pub fn new() -> Self {
        Fields::default()
    }

    /// Number of fields in the last record split.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True if the last split produced no fields (only after an error).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Field `i`'s decoded value; `None` for SQL NULL (or if `i >=
    /// len()`). In binary format, the field's raw binary bytes.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let slot = self.slots.get(i).filter(|s| !s.null)?;
        self.buf.get(slot.start..slot.end)
    }

    /// True if field `i` is SQL NULL.
    pub fn is_null(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(|s| s.null)
    }

    /// CSV: true if field `i` contained a quote character.
    pub fn raw_was_quoted(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(|s| s.quoted)
    }

    /// The values in order, `None` for NULL.
    pub fn iter(&self) -> impl Iterator<Item = Option<&[u8]>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.slots.clear();
    }

    /// Ends the field whose value started at `start` in `buf`.
    fn push(&mut self, start: usize, null: bool, quoted: bool) {
        if null {
            self.buf.truncate(start);
        }
        self.slots.push(Slot {
            start,
            end: self.buf.len(),
            null,
            quoted,
        });
    }
}

/// How NULL is spelled, and the CSV per-column overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NullSpec {
    /// The NULL string (`NULL` option): text default `\N`, CSV default
    /// empty. Compared with the raw, still-escaped field.
    pub null: Vec<u8>,
    /// CSV `FORCE_NULL`, by field position: a quoted field equal to the
    /// NULL string is NULL too. Missing entries are false.
    pub force_null: Vec<bool>,
    /// CSV `FORCE_NOT_NULL`, by field position: a field equal to the NULL
    /// string is that string, never NULL. Missing entries are false.
    pub force_not_null: Vec<bool>,
}

impl NullSpec {
    /// Text format default: `\N`.
    pub fn text() -> Self {
        NullSpec::with_null(b"\\N")
    }

    /// CSV default: an unquoted empty field.
    pub fn csv() -> Self {
        NullSpec::with_null(b"")
    }

    /// The default for `d`'s format.
    pub fn for_dialect(d: &Dialect) -> Self {
        match d.format {
            Format::Csv => NullSpec::csv(),
            Format::Text | Format::Binary => NullSpec::text(),
        }
    }

    fn with_null(null: &[u8]) -> Self {
        NullSpec {
            null: null.to_vec(),
            force_null: Vec::new(),
            force_not_null: Vec::new(),
        }
    }

    fn flag(flags: &[bool], field: usize) -> bool {
        flags.get(field).copied().unwrap_or(false)
    }
}

/// Why a record could not be split (the server would reject it too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    message: &'static str,
    field: usize,
}

impl FieldError {
    fn new(message: &'static str, field: usize) -> Self {
        FieldError { message, field }
    }

    /// What is wrong, in PostgreSQL's words where it has some.
    pub fn message(&self) -> &str {
        self.message
    }

    /// The 0-based position of the field where the problem was found.
    pub fn field(&self) -> usize {
        self.field
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (field {})", self.message, self.field + 1)
    }
}

impl std::error::Error for FieldError {}

/// Splits one record (terminator included or not; `\r\n`/`\n` stripped)
/// into decoded field values.
///
/// `record` should be one record as [`crate::scan::records`] returns it.
/// An unescaped (text) or unquoted (CSV) newline or carriage return that is
/// not the record's terminator is an error, as in PostgreSQL. A binary
/// record is one tuple: its fields are returned as raw bytes.
pub fn split_record(
    d: &Dialect,
    nulls: &NullSpec,
    record: &[u8],
    out: &mut Fields,
) -> Result<(), FieldError> {
    split_record_prefix(d, nulls, record, out, usize::MAX)
}

/// [`split_record`], stopped after the first `fields` fields (at least
/// one): the rest of
/// the record is not read, so an error there (or a wrong field count) is
/// not reported. For callers that need only leading fields and leave the
/// record's verdict to the server, such as routing a row by its partition
/// key (splitting whole records was 15% of a sharded load's client CPU).
/// Binary records are always split whole.
pub fn split_record_prefix(
    d: &Dialect,
    nulls: &NullSpec,
    record: &[u8],
    out: &mut Fields,
    fields: usize,
) -> Result<(), FieldError> {
    out.clear();
    d.validate().map_err(|m| FieldError::new(m, 0))?;
    // The server splits fields after converting the line to its own
    // encoding; the raw bytes of an encoding that hides ASCII bytes in its
    // characters (`表` is `0x95 0x5C` in Shift JIS) cannot be split here.
    if d.format != Format::Binary
        && d.lead_bytes.embeds_ascii()
        && record.iter().any(|&b| b >= 0x80)
    {
        return Err(FieldError::new(
            "multibyte characters in an encoding whose characters may hold ASCII bytes",
            0,
        ));
    }
    match d.format {
        Format::Text => split_text(d.delimiter, nulls, record, out, fields),
        Format::Csv => split_csv(d, nulls, record, out, fields),
        Format::Binary => split_binary(record, out),
    }
}

/// Where a field ended: its raw end, and where the next field starts.
struct FieldEnd {
    raw_end: usize,
    next: Option<usize>,
}

/// The field ends at `i` if `rec[i..]` is the record's terminator.
fn line_end(
    rec: &[u8],
    i: usize,
    message: &'static str,
    field: usize,
) -> Result<FieldEnd, FieldError> {
    match &rec[i..] {
        b"\n" | b"\r\n" | b"\r" => Ok(FieldEnd {
            raw_end: i,
            next: None,
        }),
        _ => Err(FieldError::new(message, field)),
    }
}

/// Index of the first byte of `rec[from..]` in `special`, or `rec.len()`.
///
/// Two vectorised searches instead of a loop over bytes: the first three
/// bytes, then the fourth only before the first hit (it is a carriage
/// return, which is rare, or repeats one of the three). A byte loop made
/// field splitting a third of a binary load's client CPU on the seed's
/// 1.2 KB text fields (docs/benchmarks.md, "the client's CPU").
fn next_special(rec: &[u8], from: usize, special: [u8; 4]) -> usize {
    let hay = &rec[from..];
    let [a, b, c, d] = special;
    let first = memchr::memchr3(a, b, c, hay).unwrap_or(hay.len());
    let k = if d == a || d == b || d == c {
        first
    } else {
        memchr::memchr(d, &hay[..first]).unwrap_or(first)
    };
    from + k
}
