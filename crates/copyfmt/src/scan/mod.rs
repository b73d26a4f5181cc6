//! Row-boundary scanning: where does each record of a COPY stream end?
//!
//! pgtide cuts one input stream into chunks so that several connections can
//! each run `COPY ... FROM STDIN` on one chunk. A chunk boundary is only
//! correct if it falls exactly where PostgreSQL's own line reader
//! (`CopyReadLineText` in `copyfromparse.c`) would end a record. This module
//! finds those places and counts records and physical lines (`\n` bytes,
//! including the ones inside quoted CSV fields) on the way. It never decodes a
//! field: that is [`crate::fields`]' job, and it is much slower.
//!
//! The [`Scanner`] is sans-IO in the manner of `csv-core`: the caller owns the
//! bytes, feeds them in pieces of any size, and gets back offsets into the
//! piece it just passed. Feeding one byte at a time gives the same answers as
//! feeding everything at once; the tests check this at every split point.
//!
//! ```
//! use pgtide_copyfmt::scan::{Dialect, Scanner, Stop};
//!
//! let mut s = Scanner::new(Dialect::csv());
//! let b = s.scan(b"1,\"a\nb\"\n2,c\n3,", Stop::Last).unwrap();
//! assert_eq!((b.offset, b.records, b.lines), (12, 2, 3));
//! assert!(!s.at_record_start()); // "3," waits for its newline
//! ```
//!
//! # Advice for hackers
//!
//! The scanner is one small state machine (`St` for text and CSV, `Bin`
//! for binary) with two ways of driving it:
//!
//! * **The slow path**, `Scanner::step`, moves the machine one byte at a
//!   time and is the definition of correctness. Its states are PostgreSQL's
//!   variables: `Quoted` is `in_quote`, `QuotedEsc` is `last_was_esc`,
//!   `TextEsc` is "the byte after a backslash", and the `Start*`/`Mid*`
//!   states are the look-ahead PostgreSQL does after a backslash to find the
//!   end marker `\.`. Where PostgreSQL peeks ahead, we remember how far the
//!   peek got, so that a peek can straddle two calls. When a peek fails we
//!   *replay* the peeked bytes through the machine instead of writing a
//!   second copy of the rules.
//!
//! * **The fast path** (`Scanner::fast_csv`, `Scanner::fast_text`) takes
//!   64 bytes at once and turns them into bit masks (one bit per byte: is it
//!   a quote? a newline? a backslash?). With quote = escape (the CSV
//!   default), PostgreSQL's quote handling is a pure toggle, so "inside
//!   quotes" is the prefix-XOR of the quote mask, and record ends are the
//!   newlines outside it. In text format, a backslash escapes the next byte;
//!   the escaped bytes of all backslash runs come out of one subtraction
//!   (`escapes`), with a carry into the next block. The fast path only runs
//!   from a state it can carry in a mask (`RecStart`, `Field`, and `Quoted`
//!   or `TextEsc`), and gives up (returns `None`) on any block where the
//!   end marker might start or where a distinct CSV ESCAPE sits inside
//!   quotes; the slow path then does that block. So the fast path never has
//!   to know about markers or escape sequences: it only has to agree with
//!   the slow path on the easy blocks, which the tests check.
//!
//! Why masks and not `memchr`: a quoted CSV row has an interesting byte every
//! five or so bytes, and a `memchr` call per interesting byte tops out below
//! 1 GB/s. The masks are built with plain safe Rust that LLVM vectorises
//! (compare, then a multiply that gathers one bit per byte), which runs at
//! several GB/s on baseline x86-64 without `unsafe` or `std::arch`.
//!
//! If you change a rule, change `Scanner::step` first, then make the fast
//! path bail out for the new case, and run `tests/scan_split.rs` and
//! `tests/scan_props.rs`: the reference implementation (`tests/common`) is
//! a direct transcription of PostgreSQL's loop, and the proptests compare
//! the two on inputs full of special bytes.
//!
//! # Semantics that are easy to get wrong
//!
//! * Text: a backslash escapes whatever follows, newline included, so
//!   `\` + newline is data and `\\` + newline ends the record.
//! * CSV: a quote opens a quoted section anywhere in a field, not only at its
//!   start. Inside quotes, a distinct ESCAPE only escapes QUOTE or ESCAPE.
//! * End marker: a record that is exactly `\.` then a line break of the
//!   stream's style ends the data; [`Scanner::scan`] returns the boundary
//!   before it. A `\.` followed by a line break of another style is an
//!   error in both formats, by anything else an error in text and data in
//!   CSV, and at the end of the input (no line break) the same: such a
//!   record is marked as the server would reject it ([`EolError`]) and
//!   the data goes on, as in `CopyReadLineText`. In text format a
//!   `\.` + newline in the middle of a record also ends the data, as in
//!   PostgreSQL up to 17; that record is counted and kept, so the server
//!   sees it and decides. PostgreSQL 18 rejects that record instead and
//!   reads on ([`Dialect::mid_record_marker`] false: the `\.` is data here,
//!   the server names the row). PostgreSQL 18 no longer treats
//!   `\.` as special in CSV: set [`Dialect::end_marker`] to false for it.
//! * Line endings ([`Eol`]) follow `CopyReadLineText`: `\n`, `\r\n` and a
//!   lone `\r` all end records, and the first record's terminator settles
//!   the style for the rest of the stream. After that, an unquoted
//!   (unescaped) `\r` or `\n` that does not fit the style is an error the
//!   server would raise ("literal carriage return found in data"). The
//!   scanner does not stop there: it ends such a record where the style
//!   says records end and marks it ([`Boundary::bad`], [`RecordSpan::eol_error`]),
//!   so the caller can reject that one row without ever sending it (a COPY
//!   that started with it would settle on the wrong style).
//! * `lines` counts line breaks as an editor shows them: `\n` bytes, or
//!   `\r` bytes once the style is a lone `\r`. The server's `line N` in
//!   errors counts records plus, in CSV, line breaks inside quotes (see
//!   [`server_lines`]); the two differ for text-format rows that contain a
//!   backslash-escaped newline, and for quoted line breaks.

use std::fmt;

mod binary;
mod eol;
mod multibyte;
mod records;
mod server_lines;
mod textcsv;

#[cfg(test)]
mod tests;

use binary::Bin;
pub use eol::{Eol, EolError};
pub use multibyte::{encoding_key, LeadBytes};
pub use records::{records, records_with, RecordSpan};
pub use server_lines::{record_at_server_line, server_lines};
use textcsv::St;

/// The three COPY data formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// PostgreSQL's default text format: backslash escapes, tab delimiter.
    Text,
    /// `FORMAT csv`: quoted fields, which may contain newlines.
    Csv,
    /// `FORMAT binary`: a header, then length-prefixed tuples.
    Binary,
}

/// The COPY options that decide where records end.
///
/// `delimiter` does not matter for record boundaries but is used by
/// [`crate::fields`]. `quote` and `escape` are read in CSV format only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// Which of the three formats.
    pub format: Format,
    /// Field delimiter (`DELIMITER`).
    pub delimiter: u8,
    /// CSV quote character (`QUOTE`).
    pub quote: u8,
    /// CSV escape character (`ESCAPE`); equal to `quote` by default.
    pub escape: u8,
    /// Whether a `\.` line ends the data (text and CSV).
    pub end_marker: bool,
    /// Text: whether `\.` + newline in the middle of a record also ends
    /// the data (PostgreSQL up to 17); from 18 the server rejects such a
    /// record and goes on.
    pub mid_record_marker: bool,
    /// The input's encoding, when its characters can hide ASCII bytes
    /// (`ENCODING 'SJIS'` and the like): the rest of a character is
    /// skipped, as the server does.
    pub lead_bytes: LeadBytes,
    /// Text, with such an encoding: the character after a backslash is
    /// read whole (PostgreSQL 14+, which splits lines after converting
    /// them to its own encoding, where no character hides an ASCII byte).
    /// Up to 13 the server split the raw bytes and skipped one byte after
    /// a backslash, reading the rest of that character as bytes of their
    /// own: Shift JIS `\Ы` (`\ 0x84 0x5C`) ended in a backslash.
    pub escape_whole_char: bool,
}

impl Dialect {
    /// PostgreSQL's text format defaults: tab delimiter, `\.` end marker.
    pub fn text() -> Self {
        Dialect {
            format: Format::Text,
            delimiter: b'\t',
            quote: b'"',
            escape: b'"',
            end_marker: true,
            mid_record_marker: true,
            lead_bytes: LeadBytes::Ascii,
            escape_whole_char: true,
        }
    }

    /// CSV defaults: comma, `"` as both quote and escape, `\.` end marker.
    pub fn csv() -> Self {
        Dialect {
            format: Format::Csv,
            delimiter: b',',
            quote: b'"',
            escape: b'"',
            end_marker: true,
            mid_record_marker: true,
            lead_bytes: LeadBytes::Ascii,
            escape_whole_char: true,
        }
    }

    /// Binary format; the other fields are ignored (the trailer always ends
    /// the data).
    pub fn binary() -> Self {
        Dialect {
            format: Format::Binary,
            ..Dialect::text()
        }
    }

    /// Checks the options the way PostgreSQL's `ProcessCopyOptions` does,
    /// plus one rule of pgtide's own: QUOTE and ESCAPE may not be `\n`,
    /// `\r` or NUL (PostgreSQL accepts a newline quote; nobody uses one, and
    /// refusing it keeps the scanner simple).
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.format == Format::Binary {
            return Ok(());
        }
        if matches!(self.delimiter, b'\n' | b'\r') {
            return Err("COPY delimiter cannot be newline or carriage return");
        }
        if self.delimiter == 0 {
            return Err("COPY delimiter cannot be a NUL byte");
        }
        if self.format == Format::Text {
            let unsafe_delims = b"\\.abcdefghijklmnopqrstuvwxyz0123456789";
            if unsafe_delims.contains(&self.delimiter) {
                return Err("COPY delimiter cannot be a backslash, a period, \
                            a lower case letter or a digit in text format");
            }
            return Ok(());
        }
        if self.delimiter == self.quote {
            return Err("COPY delimiter and quote must be different");
        }
        for b in [self.quote, self.escape] {
            if matches!(b, b'\n' | b'\r' | 0) {
                return Err("COPY quote and escape cannot be newline, \
                            carriage return or NUL");
            }
        }
        Ok(())
    }
}

/// A record boundary found by [`Scanner::scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Boundary {
    /// Index into the input slice just after a record's terminator.
    pub offset: usize,
    /// Records completed in this call up to `offset`.
    pub records: u64,
    /// Line breaks consumed in this call up to `offset` (binary: =
    /// records): `\n` bytes, or `\r` bytes in a lone-`\r` stream.
    pub lines: u64,
    /// How many of `records` have a line-ending error ([`EolError`]).
    pub bad: u64,
}

/// How far one [`Scanner::scan`] call goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Stop just after the first record end; later bytes are not consumed.
    First,
    /// Consume all the input; report the last record end in it.
    Last,
}

/// What one byte did, seen from the record level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Nothing,
    /// A record ended after this byte.
    End,
    /// A record ended just before this byte (a lone `\r` settled the
    /// style); the byte starts the next record.
    EndBefore,
    /// The end marker ended here; the data ended before its record.
    EodBefore,
    /// Text `\.` mid-record: the record ends after this byte, and the data
    /// ends with it.
    EodAfter,
}

/// Finds record boundaries in a stream of COPY data fed in pieces.
#[derive(Clone, Debug)]
pub struct Scanner {
    dialect: Dialect,
    csv: bool,
    /// CSV ESCAPE when it differs from QUOTE (PostgreSQL ignores it
    /// otherwise).
    escape: Option<u8>,
    marker: bool,
    st: St,
    eol: Eol,
    /// The line-ending error of the record being scanned, if any.
    bad_rec: Option<EolError>,
    /// The line-ending error of the last bad record that ended.
    last_error: Option<EolError>,
    bin: Bin,
    /// Bytes of a multibyte character still to skip ([`LeadBytes`]).
    mb_left: u8,
    done: bool,
    header_len: Option<usize>,
    pending: u64,
    error: Option<&'static str>,
}

/// What the caller of [`Scanner::scan`] gets back, built up during a call.
#[derive(Default)]
struct Acc {
    records: u64,
    lines: u64,
    bad: u64,
    last: Option<Boundary>,
    /// Text/CSV, for [`Scanner::scan_ends`]: every record end of the call,
    /// not only the last, each with its own line-ending error (`bad` and
    /// `last_error` only describe the call as a whole).
    ends: Option<Vec<End>>,
}

/// One record end found by [`Scanner::scan_ends`], relative to its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct End {
    /// Just after the record's terminator.
    offset: usize,
    /// Line breaks from the start of the input up to `offset`.
    lines: u64,
    /// This record's line-ending error.
    error: Option<EolError>,
}

impl Scanner {
    /// A scanner at the start of a file (binary: the header comes first).
    ///
    /// An invalid dialect (see [`Dialect::validate`]) is reported by
    /// [`Scanner::error`], and the scanner then finds nothing.
    pub fn new(d: Dialect) -> Self {
        let bin = Bin::Sig(0);
        Scanner::with_state(d, bin)
    }

    /// A scanner at a record start in the middle of the data (binary: the
    /// header was already consumed).
    pub fn resume(d: Dialect) -> Self {
        Scanner::with_state(d, Bin::Count(0, 0))
    }

    /// Like [`Scanner::resume`], in a stream whose line-ending style was
    /// already settled (`Eol::Unknown` settles it on the first record).
    pub fn resume_with(d: Dialect, eol: Eol) -> Self {
        let mut s = Scanner::resume(d);
        s.eol = eol;
        s
    }

    fn with_state(d: Dialect, bin: Bin) -> Self {
        let csv = d.format == Format::Csv;
        let escape = (csv && d.escape != d.quote).then_some(d.escape);
        Scanner {
            csv,
            escape,
            marker: d.end_marker,
            st: St::RecStart,
            eol: Eol::Unknown,
            bad_rec: None,
            last_error: None,
            bin,
            mb_left: 0,
            done: false,
            header_len: None,
            pending: 0,
            error: d.validate().err(),
            dialect: d,
        }
    }

    /// The dialect this scanner was built with.
    pub fn dialect(&self) -> &Dialect {
        &self.dialect
    }

    /// The line-ending style, once the first record has ended.
    pub fn eol(&self) -> Eol {
        self.eol
    }

    /// The byte that [`Boundary::lines`] counts: `\r` in a lone-`\r`
    /// stream, `\n` otherwise.
    pub fn line_byte(&self) -> u8 {
        if self.eol == Eol::Cr {
            b'\r'
        } else {
            b'\n'
        }
    }

    /// The line-ending error of the last bad record that ended (see
    /// [`Boundary::bad`]).
    pub fn last_error(&self) -> Option<EolError> {
        self.last_error
    }

    /// After [`Scanner::finish`]: the line-ending error of the unterminated
    /// last record, if it has one.
    pub fn pending_error(&self) -> Option<EolError> {
        if self.st == St::Cr && self.eol == Eol::CrNl {
            return Some(EolError::CarriageReturn);
        }
        // A `\.` the data ended in (see `finish`): an error in text; in
        // CSV, data, but a `\r` after it is one that has no `\n`.
        let marker = match self.st {
            St::StartDot | St::StartDotCr | St::MidDot | St::MidDotCr if !self.csv => {
                Some(self.marker_corrupt())
            }
            St::StartDotCr => Some(EolError::CarriageReturn),
            _ => None,
        };
        self.bad_rec.or(marker)
    }

    /// Continues from the state left by earlier calls.
    ///
    /// `Stop::Last` consumes all of `input` and returns the last record
    /// boundary inside it (`None` if no record ended in it). `Stop::First`
    /// stops just after the first record end and returns it; the bytes after
    /// it are not consumed, and the caller feeds them again.
    ///
    /// When the end of the data is found (end marker or binary trailer), the
    /// result is the last boundary before it in this call, and
    /// [`Scanner::end_of_data`] becomes true. Likewise, the call that meets
    /// malformed binary data returns the last boundary before the bad tuple
    /// and sets [`Scanner::error`]. After either, every call returns `None`.
    pub fn scan(&mut self, input: &[u8], stop: Stop) -> Option<Boundary> {
        let mut acc = Acc::default();
        self.scan_into(input, stop, &mut acc);
        acc.last
    }

    /// Text/CSV: consumes all of `input` like `Stop::Last`, and appends
    /// every record end in it to `ends` (offsets and line counts relative
    /// to `input`). Returns the line breaks counted in `input`.
    ///
    /// This is what [`records`] runs on: one pass per window of bytes
    /// instead of one `Stop::First` call per record, which re-did the
    /// 64-byte block holding each record's end.
    fn scan_ends(&mut self, input: &[u8], ends: &mut Vec<End>) -> u64 {
        debug_assert_ne!(self.dialect.format, Format::Binary);
        let mut acc = Acc {
            ends: Some(std::mem::take(ends)),
            ..Acc::default()
        };
        self.scan_into(input, Stop::Last, &mut acc);
        *ends = acc.ends.take().unwrap_or_default();
        acc.lines
    }

    fn scan_into(&mut self, input: &[u8], stop: Stop, acc: &mut Acc) {
        if self.error.is_some() {
            // Still count the bytes, so that `pending_len` is the same
            // however the input was cut.
            self.pending += input.len() as u64;
            return;
        }
        if self.done || input.is_empty() {
            return;
        }
        let stopped = if self.dialect.format == Format::Binary {
            self.scan_binary(input, stop, acc)
        } else {
            self.scan_rows(input, stop, acc)
        };
        self.pending = match (stopped, acc.last) {
            (true, _) => 0,
            (false, Some(b)) => (input.len() - b.offset) as u64,
            (false, None) => self.pending + input.len() as u64,
        };
    }

    /// True when no partial record is pending (false after an error, and
    /// for binary until the header has been read).
    pub fn at_record_start(&self) -> bool {
        if self.error.is_some() {
            return false;
        }
        if self.done {
            return true;
        }
        match self.dialect.format {
            Format::Binary => self.bin == Bin::Count(0, 0),
            _ => self.st == St::RecStart,
        }
    }

    /// Binary: the input so far ends one byte into a tuple's field count.
    /// At the end of the input the server takes that for the end of the
    /// data (it finds no int16 there: end of file), not for a tuple.
    pub fn binary_lone_byte(&self) -> bool {
        self.error.is_none() && !self.done && matches!(self.bin, Bin::Count(1, _))
    }

    /// True once the end marker (or binary trailer) was seen; all later input
    /// is ignored.
    pub fn end_of_data(&self) -> bool {
        self.done
    }

    /// Binary format: the total header length, once the header was parsed
    /// by a scanner made with [`Scanner::new`].
    pub fn binary_header_len(&self) -> Option<usize> {
        self.header_len
    }

    /// What is wrong with the input or the dialect, if anything.
    ///
    /// Text and CSV data never cause errors here (the server judges them);
    /// malformed binary data does, since its lengths are needed to find the
    /// next tuple.
    pub fn error(&self) -> Option<&str> {
        self.error
    }

    /// Bytes fed since the last record boundary: the partial record at the
    /// end of the input so far (0 once the end of data was seen).
    pub fn pending_len(&self) -> u64 {
        if self.done {
            0
        } else {
            self.pending
        }
    }

    /// Tells the scanner that the input has ended; returns
    /// [`Scanner::end_of_data`]. Unterminated bytes pending are a last
    /// record, even a lone `\.`, which the server does not take for the
    /// end marker without a line break after it (text: an error, see
    /// [`Scanner::pending_error`]; CSV: data).
    pub fn finish(&mut self) -> bool {
        if self.st == St::Cr && self.eol == Eol::Unknown {
            // `\r` at the very end of the first record: the server settles
            // on a lone `\r`, and the record is complete.
            self.eol = Eol::Cr;
        }
        // A `\.` (or `\.\r` in the `\r\n` style) with nothing after it is
        // not the end marker: the server reads on past the end of the
        // data, finds no line break, and calls it corrupt (text) or data
        // (CSV). So the data never ends here: the rest is a last record.
        self.done
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Text => "text",
            Format::Csv => "csv",
            Format::Binary => "binary",
        })
    }
}
