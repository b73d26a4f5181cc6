//! The user-facing error for a chunk the server refused without
//! `--rejects`: the server's words, placed at the file's own line, with
//! the row and a hint.

use copyfmt::scan::{Dialect, EolError};

use crate::chunk::Chunk;
use crate::error::{Error, ErrorKind};
use crate::failure::RowFailure;

/// The error for a failed chunk: the server's words, placed in the input.
pub(super) fn chunk_error(
    chunk: &Chunk,
    row: Option<&RowFailure>,
    preview: Option<&[u8]>,
    e: tokio_postgres::Error,
) -> Error {
    let Some(db) = e.as_db_error() else {
        return Error::from(e);
    };
    if crate::error::classify(&e) == crate::error::Class::Connection {
        return Error::from(e);
    }
    // The server's context counts lines from the chunk's start; the place
    // given here is the line in the input file instead.
    let place = match row {
        Some(r) => match &r.column {
            Some(c) => format!("{}:{}: column {c}: ", r.input, r.line),
            None => format!("{}:{}: ", r.input, r.line),
        },
        None => format!(
            "{}: in lines {}-{}: ",
            chunk.input,
            chunk.first_line,
            chunk.last_line()
        ),
    };
    let mut message = format!("{place}{}", db.message());
    if let Some(detail) = db.detail() {
        message.push_str(&format!(" ({detail})"));
    }
    if let Some(p) = preview {
        message.push_str(&format!("; row: {}", show_row(p)));
    }
    // A row can be set aside only for a row's fault.
    let mut hint = match crate::error::classify(&e) {
        crate::error::Class::Row => String::from(
            "use --rejects FILE to set bad rows aside and load all the others; \
             the summary lists the lines already committed",
        ),
        _ => String::from("the summary lists the lines already committed"),
    };
    if let Some(h) = db.hint() {
        // The server's sentence goes on with ours: no ".;".
        hint = format!("{}; {hint}", h.trim_end_matches('.'));
    }
    Error::new(ErrorKind::Server, message)
        .with_sqlstate(db.code().code())
        .with_hint(hint)
}

/// A row for an error message: its first 100 characters, quoted, without
/// the line end.
pub(super) fn show_row(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches(['\n', '\r']);
    let mut out: String = text.chars().take(100).collect();
    if text.chars().count() > 100 {
        out.push_str("...");
    }
    format!("{out:?}")
}

/// Without `--rejects`, the first record of `chunk` whose line break does
/// not fit the input's style stops the load as the server would have:
/// its message, placed in the input, with the row (see
/// `Chunk::eol_errors`: such a chunk is never sent, by any load path).
pub(super) fn line_ending_error(chunk: &Chunk, dialect: &Dialect) -> Option<(Error, RowFailure)> {
    let (row, span) = RowFailure::first_line_ending(chunk, dialect)?;
    let message = format!(
        "{}:{}: {}; row: {}",
        row.input,
        row.line,
        row.message,
        show_row(&chunk.data[span.start..span.end])
    );
    let hint = match &row.hint {
        // A line break of another style (the server's own hint first).
        Some(server) => format!(
            "{server} Every line must end like the file's first line (\\n, \\r\\n or \\r); \
             use --rejects FILE to set such rows aside and load all the others"
        ),
        // An end marker (`\.`) the server refuses.
        None => "a line holding \\. ends the data only when alone and ended like the \
                 file's first line; use --rejects FILE to set such rows aside and load \
                 all the others"
            .to_owned(),
    };
    let error = Error::new(ErrorKind::Server, message)
        .with_sqlstate(EolError::SQLSTATE)
        .with_hint(hint);
    Some((error, row))
}
