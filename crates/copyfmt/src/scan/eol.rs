//! Line-ending styles (`\n`, `\r\n`, a lone `\r`) and the errors the
//! server raises for a line break that does not fit the style.

use super::Format;

/// The line-ending style of a stream, settled by its first record as in
/// PostgreSQL's `CopyReadLineText` (`eol_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Eol {
    /// No record has ended yet.
    #[default]
    Unknown,
    /// `\n`.
    Nl,
    /// `\r\n`.
    CrNl,
    /// A lone `\r`.
    Cr,
}

/// A line break that does not fit the stream's [`Eol`] style, or an end
/// marker (`\.`) the server refuses: the server rejects the record that
/// holds it (SQLSTATE 22P04).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EolError {
    /// An unquoted `\r` where the style has none there.
    CarriageReturn,
    /// An unquoted `\n` where the style has none there.
    Newline,
    /// `\.` followed by a line break of another style than the stream's.
    MarkerStyle,
    /// Text: `\.` followed by something else than a line break
    /// (PostgreSQL up to 17).
    MarkerCorrupt,
    /// Text: `\.` not alone on its line (PostgreSQL 18's word for what
    /// 17 calls [`EolError::MarkerCorrupt`], also said of a mid-line `\.`).
    MarkerNotAlone,
}

impl EolError {
    /// The SQLSTATE the server raises (`bad_copy_file_format`).
    pub const SQLSTATE: &'static str = "22P04";

    /// The server's own message for this error in `format`.
    pub fn message(self, format: Format) -> &'static str {
        match (self, format) {
            (EolError::CarriageReturn, Format::Csv) => "unquoted carriage return found in data",
            (EolError::CarriageReturn, _) => "literal carriage return found in data",
            (EolError::Newline, Format::Csv) => "unquoted newline found in data",
            (EolError::Newline, _) => "literal newline found in data",
            (EolError::MarkerStyle, _) => {
                "end-of-copy marker does not match previous newline style"
            }
            (EolError::MarkerCorrupt, _) => "end-of-copy marker corrupt",
            (EolError::MarkerNotAlone, _) => "end-of-copy marker is not alone on its line",
        }
    }

    /// The server's own hint for this error in `format`, if it gives one.
    pub fn hint(self, format: Format) -> Option<&'static str> {
        Some(match (self, format) {
            (EolError::CarriageReturn, Format::Csv) => {
                "Use quoted CSV field to represent carriage return."
            }
            (EolError::CarriageReturn, _) => "Use \"\\r\" to represent carriage return.",
            (EolError::Newline, Format::Csv) => "Use quoted CSV field to represent newline.",
            (EolError::Newline, _) => "Use \"\\n\" to represent newline.",
            _ => return None,
        })
    }
}
