//! Mapping a server error inside a chunk back to the original input.
//!
//! The server only knows the chunk: its error context says
//! `COPY t, line N[, column c: "v"]` relative to the COPY it ran. This
//! module finds the record that N designates (CSV counts newlines inside
//! quoted fields into N, text and binary count records) and reports the
//! record's first physical line and byte offset in the input file.

use copyfmt::scan::{self, Dialect, Format};
use serde::Serialize;

use crate::chunk::Chunk;

/// One input row that the server refused.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RowFailure {
    /// Input name.
    pub input: String,
    /// Physical line where the row starts (1-based).
    pub line: u64,
    /// Record number in the input (1-based, header excluded).
    pub record: u64,
    /// Byte offset of the row in the decompressed input.
    pub byte: u64,
    /// Column the server named, when it named one.
    pub column: Option<String>,
    /// SQLSTATE.
    pub sqlstate: Option<String>,
    /// The server's message.
    pub message: String,
}

/// Locates the failing row of `chunk` from the server's error.
pub fn locate(
    chunk: &Chunk,
    dialect: &Dialect,
    relname: &str,
    err: &tokio_postgres::Error,
) -> Option<RowFailure> {
    let db = err.as_db_error()?;
    let (line, column) = parse_context(db.where_()?, relname)?;
    let (index, span) = match dialect.format {
        Format::Csv => scan::records(dialect, &chunk.data)
            .enumerate()
            .take_while(|(_, s)| s.line < line)
            .last()?,
        _ => scan::records(dialect, &chunk.data)
            .enumerate()
            .nth(usize::try_from(line).ok()?.checked_sub(1)?)?,
    };
    let line_in_file = match dialect.format {
        Format::Binary => chunk.first_line + index as u64,
        _ => chunk.first_line + span.line,
    };
    Some(RowFailure {
        input: chunk.input.to_string(),
        line: line_in_file,
        record: chunk.first_record + index as u64,
        byte: chunk.first_byte + span.start as u64,
        column,
        sqlstate: Some(db.code().code().to_owned()),
        message: db.message().to_owned(),
    })
}

/// From `COPY t, line 3, column b: "x"` returns `(3, Some("b"))`. The word
/// "line" may be translated, so the number is taken as the first digits
/// after `COPY <relname>, `; the column is read only from the untranslated
/// English form.
fn parse_context(context: &str, relname: &str) -> Option<(u64, Option<String>)> {
    let head = format!("COPY {relname}, ");
    let rest = context.lines().find_map(|l| l.strip_prefix(&head))?;
    let digits_at = rest.find(|c: char| c.is_ascii_digit())?;
    let digits: String = rest[digits_at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let line = digits.parse().ok()?;
    let after = &rest[digits_at + digits.len()..];
    let column = after
        .strip_prefix(", column ")
        .and_then(|c| c.split_once(':').map(|(name, _)| name).or(Some(c)))
        .map(str::to_owned);
    Some((line, column))
}

#[cfg(test)]
mod tests {
    use super::parse_context;

    #[test]
    fn reads_line_and_column_from_copy_context() {
        assert_eq!(
            parse_context("COPY t, line 3, column b: \"x\"", "t"),
            Some((3, Some("b".into())))
        );
        assert_eq!(parse_context("COPY t, line 12", "t"), Some((12, None)));
        assert_eq!(
            parse_context(
                "PL/pgSQL function f() line 3 at RAISE\nCOPY my t, line 7",
                "my t"
            ),
            Some((7, None))
        );
        assert_eq!(parse_context("COPY other, line 1", "t"), None);
    }
}
