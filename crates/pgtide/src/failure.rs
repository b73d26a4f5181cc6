//! Mapping a server error inside a chunk back to the original input.
//!
//! The server only knows the chunk: its error context says
//! `COPY t, line N[, column c: "v"]` relative to the COPY it ran. This
//! module reads N (and the column) from that context; `method` turns N
//! into a record of the batch, and [`RowFailure`] places that record in
//! the input file: first physical line, record number, byte offset.

use copyfmt::scan::{self, Dialect, EolError, Format, RecordSpan};
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
    /// The server's DETAIL, when given.
    pub detail: Option<String>,
    /// The server's HINT, when given.
    pub hint: Option<String>,
}

impl RowFailure {
    /// The failure of record `index` (0-based, in the chunk) whose bytes
    /// are `span` of `chunk.data`, from the server's error. `params` names
    /// the columns bound as parameters, for the INSERT methods
    /// (`LoaderSpec::parameter_columns`).
    pub fn new(
        chunk: &Chunk,
        index: u64,
        span: &RecordSpan,
        relname: &str,
        params: &[String],
        err: &tokio_postgres::Error,
    ) -> RowFailure {
        let db = err.as_db_error();
        let context = db.and_then(|d| d.where_());
        let column = context
            .and_then(|w| parse_context(w, relname))
            .and_then(|(_, c)| c)
            .or_else(|| context.and_then(|w| parameter_column(w, params)))
            .or_else(|| db.and_then(|d| d.column()).map(str::to_owned));
        RowFailure {
            input: chunk.input.to_string(),
            line: chunk.line_of(span),
            record: chunk.first_record + index,
            byte: chunk.first_byte + span.start as u64,
            column,
            sqlstate: err.code().map(|c| c.code().to_owned()),
            message: db.map_or_else(|| err.to_string(), |d| d.message().to_owned()),
            detail: db.and_then(|d| d.detail()).map(str::to_owned),
            hint: db.and_then(|d| d.hint()).map(str::to_owned),
        }
    }

    /// Record `index` of `chunk`, whose line break does not fit the input's
    /// style: rejected by pgtide itself with the server's own SQLSTATE,
    /// message and hint, without sending it (see `Chunk::eol_errors`).
    pub fn line_ending(
        chunk: &Chunk,
        format: Format,
        index: u64,
        span: &RecordSpan,
        e: EolError,
    ) -> RowFailure {
        RowFailure {
            input: chunk.input.to_string(),
            line: chunk.line_of(span),
            record: chunk.first_record + index,
            byte: chunk.first_byte + span.start as u64,
            column: None,
            sqlstate: Some(EolError::SQLSTATE.to_owned()),
            message: e.message(format).to_owned(),
            detail: None,
            hint: e.hint(format).map(str::to_owned),
        }
    }

    /// The first record of `chunk` whose line break does not fit the
    /// input's style, with its span.
    pub fn first_line_ending(chunk: &Chunk, dialect: &Dialect) -> Option<(RowFailure, RecordSpan)> {
        scan::records_with(dialect, chunk.eol, &chunk.data)
            .enumerate()
            .find_map(|(i, span)| {
                let e = span.eol_error?;
                let f = RowFailure::line_ending(chunk, dialect.format, i as u64, &span, e);
                Some((f, span))
            })
    }

    /// Locates record `index` of `chunk` by scanning it (for one-off
    /// failures; isolation keeps the spans instead).
    pub fn locate(
        chunk: &Chunk,
        dialect: &Dialect,
        index: u64,
        (relname, params): (&str, &[String]),
        err: &tokio_postgres::Error,
    ) -> Option<RowFailure> {
        let span = scan::records_with(dialect, chunk.eol, &chunk.data)
            .nth(usize::try_from(index).ok()?)?;
        Some(RowFailure::new(chunk, index, &span, relname, params, err))
    }
}

/// From `COPY t, line 3, column b: "x"` returns `(3, Some("b"))`. The word
/// "line" may be translated, so the number is taken as the first digits
/// after `COPY <relname>, `; the column is read only from the untranslated
/// English form.
pub(crate) fn parse_context(context: &str, relname: &str) -> Option<(u64, Option<String>)> {
    let head = format!("COPY {relname}, ");
    let rest = context.lines().find_map(|l| l.strip_prefix(&head))?;
    let (line, after) = first_number(rest)?;
    let column = after
        .strip_prefix(", column ")
        .and_then(|c| c.split_once(':').map(|(name, _)| name).or(Some(c)))
        .map(str::to_owned);
    Some((line, column))
}

/// The column of a parameter that failed to convert, from the context of
/// a Bind (`unnamed portal parameter $3`, with ` = '...'` when the server
/// logs values): the `$k` (the words may be translated, the `$` and digits
/// are not) names `params[(k - 1) % params.len()]`, since each row binds
/// the same columns in order. Only a one-line context of that shape: a
/// trigger's context (`SQL statement "... $1"` and the function's line)
/// names no column of the row.
fn parameter_column(context: &str, params: &[String]) -> Option<String> {
    let mut lines = context.lines();
    let line = lines.next()?;
    if params.is_empty() || lines.next().is_some() {
        return None;
    }
    let (_, after) = line.split_once('$')?;
    let digits = after.split(|c: char| !c.is_ascii_digit()).next()?;
    let rest = &after[digits.len()..];
    if !(rest.is_empty() || rest.starts_with(" = ")) {
        return None;
    }
    let k: usize = digits.parse().ok()?;
    params.get(k.checked_sub(1)? % params.len()).cloned()
}

/// The first decimal number in a server's text, and the text after it:
/// the `line N` of an error context or of ON_ERROR's notice ("skipping
/// row due to data type incompatibility at line N for column ..."). The
/// words around it may be translated; the digits are not.
pub(crate) fn first_number(text: &str) -> Option<(u64, &str)> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    Some((rest[..end].parse().ok()?, &rest[end..]))
}

#[cfg(test)]
mod tests {
    use super::{first_number, parse_context};

    #[test]
    fn names_the_column_of_a_bound_parameter() {
        let params = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let col = |ctx: &str| super::parameter_column(ctx, &params);
        assert_eq!(col("unnamed portal parameter $2"), Some("b".into()));
        assert_eq!(col("unnamed portal parameter $3 = '...'"), Some("c".into()));
        // A multi-row VALUES: $5 is the second row's second column.
        assert_eq!(
            col("unbenanntes Portal Parameter $5 = '...'"),
            Some("b".into())
        );
        assert_eq!(col("unnamed portal parameter $0"), None);
        assert_eq!(
            col("SQL statement \"SELECT $1\"\nPL/pgSQL function f() line 3"),
            None
        );
        assert_eq!(col("PL/pgSQL function f() line 3 at RAISE"), None);
        assert_eq!(
            super::parameter_column("unnamed portal parameter $1", &[]),
            None
        );
    }

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

    #[test]
    fn reads_the_first_number_of_a_notice() {
        let notice =
            "skipping row due to data type incompatibility at line 12 for column \"n2\": \"x\"";
        assert_eq!(
            first_number(notice),
            Some((12, " for column \"n2\": \"x\""))
        );
        assert_eq!(first_number("no digits"), None);
        assert_eq!(first_number("line 99999999999999999999999"), None);
    }
}
