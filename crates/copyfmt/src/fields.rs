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
    out.clear();
    d.validate().map_err(|m| FieldError::new(m, 0))?;
    match d.format {
        Format::Text => split_text(d.delimiter, nulls, record, out),
        Format::Csv => split_csv(d, nulls, record, out),
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
fn next_special(rec: &[u8], from: usize, special: [u8; 4]) -> usize {
    rec[from..]
        .iter()
        .position(|b| special.contains(b))
        .map_or(rec.len(), |k| from + k)
}

fn split_text(delim: u8, nulls: &NullSpec, rec: &[u8], out: &mut Fields) -> Result<(), FieldError> {
    let mut i = 0;
    loop {
        let field = out.len();
        let start = out.buf.len();
        let mut saw_nul = false;
        let end = text_field(delim, rec, i, out, &mut saw_nul)?;
        let null = rec[i..end.raw_end] == nulls.null[..];
        // As in PostgreSQL, a bad escape only matters if the field is not
        // NULL: the NULL check comes first.
        if saw_nul && !null {
            return Err(FieldError::new(
                "invalid byte sequence: an escape produced a NUL byte",
                field,
            ));
        }
        out.push(start, null, false);
        match end.next {
            Some(next) => i = next,
            None => return Ok(()),
        }
    }
}

/// Decodes one text field starting at `i` into `out.buf`.
fn text_field(
    delim: u8,
    rec: &[u8],
    mut i: usize,
    out: &mut Fields,
    saw_nul: &mut bool,
) -> Result<FieldEnd, FieldError> {
    loop {
        let run = next_special(rec, i, [delim, b'\\', b'\n', b'\r']);
        out.buf.extend_from_slice(&rec[i..run]);
        i = run;
        match rec.get(i) {
            None => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: None,
                })
            }
            Some(&b'\\') => i = unescape(rec, i + 1, &mut out.buf, saw_nul),
            Some(&b'\n') => return line_end(rec, i, "literal newline found in data", out.len()),
            Some(&b'\r') => {
                return line_end(rec, i, "literal carriage return found in data", out.len())
            }
            Some(_) => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: Some(i + 1),
                })
            }
        }
    }
}

/// Decodes the escape whose backslash was just before `i`; returns the
/// index after it. A backslash at the very end is dropped, as PostgreSQL
/// does.
fn unescape(rec: &[u8], i: usize, buf: &mut Vec<u8>, saw_nul: &mut bool) -> usize {
    let Some(&c) = rec.get(i) else {
        return i;
    };
    let (value, next) = match c {
        b'0'..=b'7' => {
            let digits = rec[i..]
                .iter()
                .take(3)
                .take_while(|d| matches!(d, b'0'..=b'7'));
            let (value, n) =
                digits.fold((0u32, 0), |(v, n), d| (v * 8 + u32::from(d - b'0'), n + 1));
            ((value & 0xff) as u8, i + n)
        }
        b'x' => match rec.get(i + 1).and_then(|&h| hex(h)) {
            Some(hi) => match rec.get(i + 2).and_then(|&h| hex(h)) {
                Some(lo) => (hi * 16 + lo, i + 3),
                None => (hi, i + 2),
            },
            None => (b'x', i + 1),
        },
        b'b' => (0x08, i + 1),
        b'f' => (0x0c, i + 1),
        b'n' => (b'\n', i + 1),
        b'r' => (b'\r', i + 1),
        b't' => (b'\t', i + 1),
        b'v' => (0x0b, i + 1),
        other => (other, i + 1),
    };
    *saw_nul |= value == 0;
    buf.push(value);
    next
}

fn hex(h: u8) -> Option<u8> {
    char::from(h).to_digit(16).map(|v| v as u8)
}

fn split_csv(
    d: &Dialect,
    nulls: &NullSpec,
    rec: &[u8],
    out: &mut Fields,
) -> Result<(), FieldError> {
    let mut i = 0;
    loop {
        let field = out.len();
        let start = out.buf.len();
        let mut quoted = false;
        let end = csv_field(d, rec, i, out, &mut quoted)?;
        let mut null = !quoted && rec[i..end.raw_end] == nulls.null[..];
        if null && NullSpec::flag(&nulls.force_not_null, field) {
            null = false; // the value is the NULL string itself
        } else if !null
            && NullSpec::flag(&nulls.force_null, field)
            && out.buf[start..] == nulls.null[..]
        {
            null = true;
        }
        out.push(start, null, quoted);
        match end.next {
            Some(next) => i = next,
            None => return Ok(()),
        }
    }
}

/// Decodes one CSV field starting at `i`: it alternates between unquoted
/// and quoted stretches until a delimiter or the end of the line.
fn csv_field(
    d: &Dialect,
    rec: &[u8],
    mut i: usize,
    out: &mut Fields,
    quoted: &mut bool,
) -> Result<FieldEnd, FieldError> {
    let field = out.len();
    loop {
        let run = next_special(rec, i, [d.delimiter, d.quote, b'\n', b'\r']);
        out.buf.extend_from_slice(&rec[i..run]);
        i = run;
        match rec.get(i) {
            None => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: None,
                })
            }
            Some(&b'\n') => return line_end(rec, i, "unquoted newline found in data", field),
            Some(&b'\r') => {
                return line_end(rec, i, "unquoted carriage return found in data", field)
            }
            Some(&c) if c == d.delimiter => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: Some(i + 1),
                })
            }
            Some(_) => {
                *quoted = true;
                i = csv_quoted(d, rec, i + 1, &mut out.buf)
                    .ok_or_else(|| FieldError::new("unterminated CSV quoted field", field))?;
            }
        }
    }
}

/// Decodes a quoted stretch starting after its opening quote; returns the
/// index after the closing quote, or `None` if there is none.
fn csv_quoted(d: &Dialect, rec: &[u8], mut i: usize, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        let run = next_special(rec, i, [d.quote, d.escape, d.quote, d.escape]);
        buf.extend_from_slice(&rec[i..run]);
        i = run;
        let c = *rec.get(i)?;
        // Test the escape first: when QUOTE = ESCAPE, a doubled quote is an
        // escaped quote and a single one ends the stretch.
        if c == d.escape {
            if let Some(&next) = rec.get(i + 1).filter(|&&n| n == d.escape || n == d.quote) {
                buf.push(next);
                i += 2;
                continue;
            }
        }
        if c == d.quote {
            return Some(i + 1);
        }
        buf.push(c); // an escape before an ordinary byte is itself data
        i += 1;
    }
}

/// One binary tuple: int16 field count, then int32 length (-1 = NULL) and
/// bytes for each field.
fn split_binary(rec: &[u8], out: &mut Fields) -> Result<(), FieldError> {
    let count = rec
        .first_chunk::<2>()
        .map(|b| i16::from_be_bytes(*b))
        .ok_or_else(|| FieldError::new("truncated tuple: missing field count", 0))?;
    if count == -1 {
        return Err(FieldError::new(
            "the end-of-data trailer is not a record",
            0,
        ));
    }
    let count = usize::try_from(count).map_err(|_| FieldError::new("invalid field count", 0))?;
    let mut pos = 2;
    for field in 0..count {
        let len = rec
            .get(pos..)
            .and_then(|r| r.first_chunk::<4>())
            .map(|b| i32::from_be_bytes(*b))
            .ok_or_else(|| FieldError::new("unexpected EOF in COPY data", field))?;
        pos += 4;
        let start = out.buf.len();
        if len == -1 {
            out.push(start, true, false);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| FieldError::new("invalid field size", field))?;
        let value = rec
            .get(pos..pos + len)
            .ok_or_else(|| FieldError::new("unexpected EOF in COPY data", field))?;
        out.buf.extend_from_slice(value);
        out.push(start, false, false);
        pos += len;
    }
    if pos != rec.len() {
        return Err(FieldError::new(
            "extra data after the tuple's last field",
            count,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits `rec` and returns the values, `None` for NULL.
    fn split(
        d: &Dialect,
        nulls: &NullSpec,
        rec: &[u8],
    ) -> Result<Vec<Option<Vec<u8>>>, FieldError> {
        let mut f = Fields::new();
        split_record(d, nulls, rec, &mut f)?;
        Ok(f.iter().map(|v| v.map(<[u8]>::to_vec)).collect())
    }

    fn v(s: &[u8]) -> Option<Vec<u8>> {
        Some(s.to_vec())
    }

    fn text(rec: &[u8]) -> Vec<Option<Vec<u8>>> {
        split(&Dialect::text(), &NullSpec::text(), rec).unwrap()
    }

    fn csv(rec: &[u8]) -> Vec<Option<Vec<u8>>> {
        split(&Dialect::csv(), &NullSpec::csv(), rec).unwrap()
    }

    #[test]
    fn text_fields_and_nulls() {
        assert_eq!(text(b"a\tb\n"), [v(b"a"), v(b"b")]);
        assert_eq!(text(b"a\t\\N\t\n"), [v(b"a"), None, v(b"")]);
        assert_eq!(text(b""), [v(b"")]);
        assert_eq!(text(b"\r\n"), [v(b"")]);
        assert_eq!(text(b"x\r"), [v(b"x")]);
        // The NULL check uses the raw bytes.
        assert_eq!(text(b"\\\\N\t\\N\\N\n"), [v(b"\\N"), v(b"NN")]);
        // An escaped delimiter is data.
        assert_eq!(text(b"a\\\tb\n"), [v(b"a\tb")]);
    }

    #[test]
    fn text_escapes() {
        let table: &[(&[u8], &[u8])] = &[
            (b"\\b\\f\\n\\r\\t\\v\\\\", b"\x08\x0c\n\r\t\x0b\\"),
            (b"\\101\\1012\\7\\18", b"AA2\x07\x018"),
            (b"\\0", b"\0"),
            (b"\\x00", b"\0"),
            (b"\\x41\\x4g\\xg\\xFF", b"A\x04gxg\xff"),
            (b"\\q\\.\\N", b"q.N"),
            (b"\\477", b"\x3f"),
            (b"a\\", b"a"),
            (b"a\\\n", b"a\n"),
            (b"a\\\r\n", b"a\r"),
        ];
        for (raw, want) in table {
            let mut f = Fields::new();
            let r = split_record(&Dialect::text(), &NullSpec::text(), raw, &mut f);
            if want.contains(&0) {
                assert!(r.is_err(), "{raw:?}: NUL must be refused");
                continue;
            }
            r.unwrap();
            assert_eq!(f.get(0), Some(*want), "{raw:?}");
        }
        // A NUL escape in a field that is NULL does not matter.
        let nulls = NullSpec {
            null: b"\\0".to_vec(),
            ..NullSpec::text()
        };
        assert_eq!(split(&Dialect::text(), &nulls, b"\\0").unwrap(), [None]);
    }

    #[test]
    fn text_errors() {
        for rec in [&b"a\nb\n"[..], b"a\rb\n", b"a\r\r\n"] {
            let err = split(&Dialect::text(), &NullSpec::text(), rec).unwrap_err();
            assert!(err.message().starts_with("literal"), "{rec:?}: {err}");
        }
        let mut bad = Dialect::text();
        bad.delimiter = b'\\';
        assert!(split(&bad, &NullSpec::text(), b"a").is_err());
    }

    #[test]
    fn csv_fields_quotes_and_nulls() {
        assert_eq!(csv(b"a,b,c\n"), [v(b"a"), v(b"b"), v(b"c")]);
        assert_eq!(csv(b",\"\",\n"), [None, v(b""), None]);
        assert_eq!(csv(b"\"a,b\",\"x\"\"y\"\r\n"), [v(b"a,b"), v(b"x\"y")]);
        assert_eq!(csv(b"\"multi\nline\"\n"), [v(b"multi\nline")]);
        // A quote opens a quoted stretch anywhere in a field.
        assert_eq!(csv(b"ab\"c,d\"e,f"), [v(b"abc,de"), v(b"f")]);
        // Backslashes are plain data in CSV.
        assert_eq!(csv(b"\\N,\\.\n"), [v(b"\\N"), v(b"\\.")]);
        let mut f = Fields::new();
        split_record(&Dialect::csv(), &NullSpec::csv(), b"a,\"b\"", &mut f).unwrap();
        assert!(!f.raw_was_quoted(0) && f.raw_was_quoted(1) && !f.raw_was_quoted(2));
    }

    #[test]
    fn csv_custom_quote_escape_delimiter() {
        let d = Dialect {
            delimiter: b';',
            quote: b'\'',
            escape: b'\\',
            ..Dialect::csv()
        };
        let got = split(&d, &NullSpec::csv(), b"'a;\\'b\\\\';'c\\d';\"x\"\n").unwrap();
        assert_eq!(got, [v(b"a;'b\\"), v(b"c\\d"), v(b"\"x\"")]);
        // With a distinct escape, a doubled quote closes and reopens.
        assert_eq!(split(&d, &NullSpec::csv(), b"'a''b'").unwrap(), [v(b"ab")]);
    }

    #[test]
    fn csv_force_null_and_force_not_null() {
        let nulls = NullSpec {
            null: b"NA".to_vec(),
            force_null: vec![true, false, true],
            force_not_null: vec![false, true, true],
        };
        let got = split(&Dialect::csv(), &nulls, b"\"NA\",NA,NA,\"NA\",NA\n").unwrap();
        // 0: quoted + FORCE_NULL -> NULL; 1: FORCE_NOT_NULL -> "NA";
        // 2: both: FORCE_NOT_NULL wins for unquoted; 3: quoted -> "NA";
        // 4: unquoted -> NULL.
        assert_eq!(got, [None, v(b"NA"), v(b"NA"), v(b"NA"), None]);
        let empty = NullSpec {
            force_null: vec![true],
            ..NullSpec::csv()
        };
        assert_eq!(
            split(&Dialect::csv(), &empty, b"\"\",\"\"").unwrap(),
            [None, v(b"")]
        );
    }

    #[test]
    fn csv_errors() {
        let cases: &[(&[u8], &str)] = &[
            (b"\"abc\n", "unterminated CSV quoted field"),
            (b"a,\"b", "unterminated CSV quoted field"),
            (b"a\nb", "unquoted newline found in data"),
            (b"a\rb\n", "unquoted carriage return found in data"),
        ];
        for (rec, msg) in cases {
            let err = split(&Dialect::csv(), &NullSpec::csv(), rec).unwrap_err();
            assert_eq!(err.message(), *msg, "{rec:?}");
        }
        let err = split(&Dialect::csv(), &NullSpec::csv(), b"a,\"b").unwrap_err();
        assert_eq!(err.field(), 1);
        assert_eq!(err.to_string(), "unterminated CSV quoted field (field 2)");
    }

    #[test]
    fn binary_tuples() {
        let mut rec = 3i16.to_be_bytes().to_vec();
        rec.extend_from_slice(&2i32.to_be_bytes());
        rec.extend_from_slice(b"hi");
        rec.extend_from_slice(&(-1i32).to_be_bytes());
        rec.extend_from_slice(&0i32.to_be_bytes());
        let nulls = NullSpec::text();
        let got = split(&Dialect::binary(), &nulls, &rec).unwrap();
        assert_eq!(got, [v(b"hi"), None, v(b"")]);
        for bad in [
            &rec[..rec.len() - 1],
            &rec[..5],
            &(-1i16).to_be_bytes()[..],
            &[0],
        ] {
            assert!(split(&Dialect::binary(), &nulls, bad).is_err(), "{bad:?}");
        }
        let mut extra = rec.clone();
        extra.push(0);
        assert!(split(&Dialect::binary(), &nulls, &extra).is_err());
    }

    /// Encodes values the way `COPY TO` would (text format), with some
    /// bytes written as octal or hex escapes chosen by `style`.
    fn encode_text(values: &[Option<Vec<u8>>], style: u8) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, value) in values.iter().enumerate() {
            if i > 0 {
                out.push(b'\t');
            }
            let Some(value) = value else {
                out.extend_from_slice(b"\\N");
                continue;
            };
            for (k, &b) in value.iter().enumerate() {
                match (b, (k as u8).wrapping_add(style) % 5) {
                    (b'\\', _) => out.extend_from_slice(b"\\\\"),
                    (b'\n', _) => out.extend_from_slice(b"\\n"),
                    (b'\r', _) => out.extend_from_slice(b"\\r"),
                    (b'\t', _) => out.extend_from_slice(b"\\t"),
                    (_, 0) => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
                    (_, 1) => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                    _ => out.push(b),
                }
            }
        }
        out.push(b'\n');
        out
    }

    /// Encodes values as CSV: NULL unquoted empty, values quoted when they
    /// must be (or when `style` says so).
    fn encode_csv(values: &[Option<Vec<u8>>], style: u8) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, value) in values.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let Some(value) = value else { continue };
            let special = |b: &u8| b",\"\r\n".contains(b);
            // `\.` alone at the start of a line would be the end marker.
            let marker = i == 0 && value == b"\\.";
            if marker || value.is_empty() || value.iter().any(special) || (i as u8 ^ style) & 1 == 0
            {
                out.push(b'"');
                for &b in value {
                    if b == b'"' {
                        out.push(b'"');
                    }
                    out.push(b);
                }
                out.push(b'"');
            } else {
                out.extend_from_slice(value);
            }
        }
        out.extend_from_slice(if style & 2 == 0 { b"\n" } else { b"\r\n" });
        out
    }

    fn values() -> impl proptest::strategy::Strategy<Value = Vec<Option<Vec<u8>>>> {
        use proptest::prelude::*;
        let byte = prop::sample::select(b"a,\"\\\n\r\t.N'x\xff".to_vec());
        prop::collection::vec(prop::option::of(prop::collection::vec(byte, 0..8)), 1..6)
    }

    proptest::proptest! {
        #[test]
        fn text_round_trip(values in values(), style in 0u8..5) {
            let rec = encode_text(&values, style);
            let d = Dialect::text();
            let spans: Vec<_> = crate::scan::records(&d, &rec).collect();
            proptest::prop_assert_eq!(spans.len(), 1);
            proptest::prop_assert_eq!(split(&d, &NullSpec::text(), &rec).unwrap(), values);
        }

        #[test]
        fn csv_round_trip(values in values(), style in 0u8..4) {
            let rec = encode_csv(&values, style);
            let d = Dialect::csv();
            let spans: Vec<_> = crate::scan::records(&d, &rec).collect();
            proptest::prop_assert_eq!(spans.len(), 1);
            proptest::prop_assert_eq!(split(&d, &NullSpec::csv(), &rec).unwrap(), values);
        }
    }

    #[test]
    fn buffers_are_reused() {
        let mut f = Fields::new();
        split_record(
            &Dialect::csv(),
            &NullSpec::csv(),
            b"aaaa,bbbb,cccc\n",
            &mut f,
        )
        .unwrap();
        let cap = (f.buf.capacity(), f.slots.capacity());
        split_record(&Dialect::csv(), &NullSpec::csv(), b"x,y\n", &mut f).unwrap();
        assert_eq!((f.buf.capacity(), f.slots.capacity()), cap);
        assert_eq!(f.len(), 2);
        assert_eq!(f.get(2), None);
        assert!(!f.is_null(2));
    }
}
