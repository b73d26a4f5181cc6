//! [`records`] and [`records_with`]: a whole buffer split into
//! [`RecordSpan`]s.
//!
//! Text and CSV are scanned a window at a time with `Scanner::scan_ends`,
//! which reports every record end of the window in one pass; the spans are
//! then handed out from that batch. Calling `Scanner::scan` with
//! `Stop::First` once per record gives the same spans, but re-does the
//! 64-byte block that holds each record's end and pays a call per record:
//! profiles of loads that walk records (sharded routing, the rejects
//! screen, isolation) put it at 11-19% of the client's CPU. Binary stays on
//! that per-record path: its scanner skips field data in bulk and has no
//! blocks to re-do.

use super::{Dialect, End, Eol, EolError, Format, Scanner, Stop};

/// Bytes fed to the scanner per `scan_ends` call: big enough that the
/// per-call cost vanishes, small enough that the batch of ends (at most
/// one per byte, usually one per record) stays small. A multiple of the
/// 64-byte block, so that only the last window has a partial block.
const WINDOW: usize = 16 << 10;

/// One record of a buffer split by [`records`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    /// Offset of the record's first byte.
    pub start: usize,
    /// Offset just after the record's terminator (or the end of the buffer
    /// for an unterminated last record).
    pub end: usize,
    /// Line breaks before `start` (see [`super::Boundary::lines`]): the
    /// record's 0-based line (binary: its 0-based tuple).
    pub line: u64,
    /// The record's line-ending error: the server would reject it.
    pub eol_error: Option<EolError>,
}

/// Splits whole records (no header) into spans; the last record may lack its
/// terminator.
///
/// This is the end of the input, so a last record that is exactly `\.`
/// counts as the end marker. Records after the end marker are not
/// returned. Binary data that cannot be parsed ends the iteration with one
/// span covering the rest of the buffer, so that no byte goes unreported.
pub fn records<'a>(d: &Dialect, bytes: &'a [u8]) -> impl Iterator<Item = RecordSpan> + 'a {
    records_with(d, Eol::Unknown, bytes)
}

/// Like [`records`], for bytes from a stream whose style `eol` was settled
/// before them (a chunk of a file): records whose line breaks do not fit
/// it carry an [`RecordSpan::eol_error`].
pub fn records_with<'a>(
    d: &Dialect,
    eol: Eol,
    bytes: &'a [u8],
) -> impl Iterator<Item = RecordSpan> + 'a {
    Records::new(d, eol, bytes, WINDOW)
}

/// The iterator behind [`records`].
pub(super) struct Records<'a> {
    scanner: Scanner,
    bytes: &'a [u8],
    /// Start of the next record.
    pos: usize,
    /// Line breaks before `pos`.
    line: u64,
    /// Text/CSV: the ends of the current window, and where it was.
    batch: Batch,
}

/// The record ends of the window fed last (text and CSV only).
struct Batch {
    /// Window size (a parameter so that tests can cut small windows).
    window: usize,
    /// Bytes fed to the scanner so far; the current window ends here.
    fed: usize,
    /// Line breaks in the first `fed` bytes.
    fed_lines: u64,
    /// Offset and line breaks at the start of the current window.
    base: usize,
    base_lines: u64,
    /// The window's record ends, relative to `base` and `base_lines`.
    ends: Vec<End>,
    /// How many of `ends` were handed out.
    next: usize,
}

impl<'a> Records<'a> {
    pub(super) fn new(d: &Dialect, eol: Eol, bytes: &'a [u8], window: usize) -> Self {
        Records {
            scanner: Scanner::resume_with(d.clone(), eol),
            bytes,
            pos: 0,
            line: 0,
            batch: Batch {
                window: window.max(1),
                fed: 0,
                fed_lines: 0,
                base: 0,
                base_lines: 0,
                ends: Vec::new(),
                next: 0,
            },
        }
    }

    /// Text/CSV: the next end from the batch, feeding windows as needed,
    /// then the rest after the last end.
    fn next_batched(&mut self) -> Option<RecordSpan> {
        loop {
            let b = &mut self.batch;
            if let Some(e) = b.ends.get(b.next) {
                b.next += 1;
                let span = RecordSpan {
                    start: self.pos,
                    end: b.base + e.offset,
                    line: self.line,
                    eol_error: e.error,
                };
                self.pos = span.end;
                self.line = b.base_lines + e.lines;
                return Some(span);
            }
            let s = &self.scanner;
            if b.fed == self.bytes.len() || s.end_of_data() || s.error().is_some() {
                return self.rest();
            }
            let window = &self.bytes[b.fed..self.bytes.len().min(b.fed + b.window)];
            b.ends.clear();
            b.next = 0;
            b.base = b.fed;
            b.base_lines = b.fed_lines;
            b.fed_lines += self.scanner.scan_ends(window, &mut b.ends);
            b.fed += window.len();
        }
    }

    /// Binary: one `Stop::First` call per record.
    fn next_single(&mut self) -> Option<RecordSpan> {
        let rest = self.bytes.get(self.pos..).filter(|r| !r.is_empty())?;
        let Some(b) = self.scanner.scan(rest, Stop::First) else {
            return self.rest();
        };
        let start = self.pos;
        let line = self.line;
        self.pos += b.offset;
        self.line += b.lines;
        Some(RecordSpan {
            start,
            end: self.pos,
            line,
            eol_error: (b.bad > 0).then(|| self.scanner.last_error()).flatten(),
        })
    }

    /// No record ends after `pos`, and the scanner has seen all the bytes
    /// it will: the rest is an unterminated last record, the end marker,
    /// or (binary) bytes that do not parse.
    fn rest(&mut self) -> Option<RecordSpan> {
        let start = self.pos;
        if start >= self.bytes.len() {
            return None;
        }
        self.pos = self.bytes.len();
        let broken = self.scanner.error().is_some();
        let ended = self.scanner.end_of_data() || self.scanner.finish();
        (broken || !ended).then_some(RecordSpan {
            start,
            end: self.bytes.len(),
            line: self.line,
            eol_error: self.scanner.pending_error(),
        })
    }
}

impl Iterator for Records<'_> {
    type Item = RecordSpan;

    fn next(&mut self) -> Option<RecordSpan> {
        if self.scanner.dialect().format == Format::Binary {
            self.next_single()
        } else {
            self.next_batched()
        }
    }
}

#[cfg(test)]
mod tests;
