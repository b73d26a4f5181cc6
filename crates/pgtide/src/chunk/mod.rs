//! Cutting an input stream into chunks that end on true record boundaries.
//!
//! A [`Chunk`] is the unit of parallelism, of the commit model and of
//! error isolation: each is loaded in one transaction on one connection.
//! It carries where it came from (first physical line, first record
//! number, byte offset in the decompressed input) so that any error the
//! server reports inside it can be mapped back to the original file.
//!
//! Boundaries come from `copyfmt::scan`, which parses quoting and escapes
//! as the server does; a chunk is cut at the last boundary after the target
//! size (copyfrom.c's byte threshold). The header record, when there is
//! one, is consumed once per file here, never per chunk. This module opens
//! no connection and decodes no field.

use std::io::Read;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use copyfmt::scan::{self, Dialect, Eol, Format, RecordSpan, Scanner, Stop};

use crate::copyopts::Header;
use crate::error::{Error, Result};

/// How much is read from the source per `read` call.
const READ_SIZE: usize = 256 * 1024;

/// Default chunk size. Big enough that the per-COPY cost (a statement, a
/// commit, a fresh bulk-insert state on the server) is negligible, small
/// enough that `workers x chunk x queue depth` stays far below 64 MiB and
/// that a failed chunk is cheap to isolate. See docs/benchmarks.md.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

/// Default cap on one record's size. A chunk must hold whole records, so
/// the longest record is what memory holds beyond the chunks; without a
/// cap an unmatched quote near the start would buffer the whole input.
/// 256 MiB is far above real rows and a quarter of PostgreSQL's own 1 GB
/// limit per field (`--max-record-bytes` raises it).
pub const DEFAULT_MAX_RECORD_BYTES: usize = 256 << 20;

/// A run of whole records from one input.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// Sequence number across the whole load, from 0.
    pub seq: u64,
    /// The input it came from (path or `-`).
    pub input: Arc<str>,
    /// The records' bytes, exactly as in the input. For binary input: the
    /// tuples only, without the file header or trailer.
    pub data: Bytes,
    /// 1-based physical line (binary: tuple) of the first record.
    pub first_line: u64,
    /// 1-based record number of the first record (the header not counted).
    pub first_record: u64,
    /// Offset of `data[0]` in the decompressed input.
    pub first_byte: u64,
    /// Number of records in `data`.
    pub records: u64,
    /// Number of line breaks in `data` (binary: = records).
    pub lines: u64,
    /// The input's line-ending style, settled by its first record: the
    /// records of `data` are read in it, never settled anew by the chunk's
    /// own first record (see [`copyfmt::scan::records_with`]).
    pub eol: Eol,
    /// Records of `data` with a line break that does not fit `eol`: the
    /// server would reject them, and a COPY that starts with one would
    /// settle on the wrong style, so such a chunk is never sent whole.
    pub eol_errors: u64,
}

impl Chunk {
    /// The input line where the record of `span` (a span of `data`, from
    /// [`copyfmt::scan::records_with`]) starts; binary: its tuple, since a
    /// binary span's line is its index.
    pub fn line_of(&self, span: &RecordSpan) -> u64 {
        self.first_line + span.line
    }

    /// The last input line of the chunk (binary: its last tuple). A last
    /// record without a line break (the end of a file) still counts.
    pub fn last_line(&self) -> u64 {
        let lines = self.lines.max(self.records);
        self.first_line + lines.saturating_sub(1)
    }
}

/// The last record boundary found in the buffer, counted from its start.
#[derive(Debug, Clone, Copy)]
struct Cut {
    offset: usize,
    records: u64,
    lines: u64,
    bad: u64,
}

/// Produces [`Chunk`]s from one decompressed input stream.
pub struct Chunker {
    input: Arc<str>,
    reader: Box<dyn Read + Send>,
    scanner: Scanner,
    binary: bool,
    header_mode: Header,
    header: Option<Bytes>,
    header_done: bool,
    target: usize,
    max_record: usize,
    /// How records are read, to measure them one by one when the records
    /// between two cuts are longer together than `max_record`.
    dialect: Dialect,
    /// A whole record found longer than `max_record`: its line and byte.
    too_long: Option<(u64, u64)>,
    buf: BytesMut,
    /// Bytes of `buf` already fed to the scanner.
    scanned: usize,
    cut: Option<Cut>,
    /// Newlines in scanned bytes after `cut` (or after the buffer start).
    tail_lines: u64,
    /// Where `buf[0]` is in the input.
    line: u64,
    record: u64,
    byte: u64,
    eof: bool,
    done: bool,
    /// Binary: the input ended one byte into a field count (`Chunker::finish`).
    lone_byte: bool,
    next_seq: u64,
}

impl Chunker {
    /// A chunker over `reader`, cutting chunks of about `target` bytes.
    /// `first_seq` continues the numbering of an earlier input. Unless
    /// `header_mode` is [`Header::None`], the first record of a text/CSV
    /// input is its header: consumed, and kept for checking
    /// ([`Chunker::header`]).
    pub fn new(
        input: &str,
        reader: Box<dyn Read + Send>,
        dialect: Dialect,
        header_mode: Header,
        target: usize,
        first_seq: u64,
    ) -> Chunker {
        let binary = dialect.format == Format::Binary;
        Chunker {
            input: input.into(),
            reader,
            scanner: Scanner::new(dialect.clone()),
            dialect,
            too_long: None,
            binary,
            header_mode,
            header: None,
            header_done: false,
            target: target.max(1),
            max_record: DEFAULT_MAX_RECORD_BYTES,
            buf: BytesMut::new(),
            scanned: 0,
            cut: None,
            tail_lines: 0,
            line: 1,
            record: 1,
            byte: 0,
            eof: false,
            done: false,
            lone_byte: false,
            next_seq: first_seq,
        }
    }

    /// Caps a record's size at `bytes` (see [`DEFAULT_MAX_RECORD_BYTES`]).
    pub fn max_record(mut self, bytes: usize) -> Chunker {
        self.max_record = bytes.max(1);
        self
    }

    /// The header record (text/CSV, with its terminator) or the binary
    /// file header, once the first chunk was requested.
    pub fn header(&self) -> Option<&Bytes> {
        self.header.as_ref()
    }

    /// The sequence number the next chunk (of this or a later input) gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Whether the input stopped at an end-of-data marker (`\.` or the
    /// binary trailer, or a lone byte where the trailer would start)
    /// rather than at end of file.
    pub fn ended_by_marker(&self) -> bool {
        self.scanner.end_of_data() || self.lone_byte
    }

    /// Bytes read but in no chunk and not the header: once the input has
    /// ended, what was read from an end-of-data marker on (the marker
    /// included). Checked against the bytes read (`load::invariants`).
    pub fn unconsumed(&self) -> usize {
        self.buf.len()
    }

    /// The next chunk, or `None` at the end of the input.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        if self.done {
            return Ok(None);
        }
        if !self.header_done {
            self.read_header()?;
        }
        loop {
            self.scan_new();
            if let Some(e) = self.scanner.error() {
                return Err(Error::input(format!(
                    "{}: malformed input near byte {}: {e}",
                    self.input,
                    self.byte + self.scanned as u64
                ))
                .with_hint("check --format; this file is not valid for it"));
            }
            self.check_record_size()?;
            if let Some(cut) = self.cut {
                if cut.offset >= self.target || self.scanner.end_of_data() {
                    return Ok(Some(self.take(cut)));
                }
            }
            if self.scanner.end_of_data() && self.binary {
                self.nothing_after_trailer()?;
            }
            if self.binary && self.eof && self.byte == 0 && self.buf.is_empty() {
                // As the server: no signature is no binary COPY file.
                return Err(Error::input(format!(
                    "{}: COPY file signature not recognized: the input is empty",
                    self.input
                ))
                .with_hint(
                    "a binary COPY file starts with PGCOPY\\n\\377\\r\\n\\0; check --format",
                ));
            }
            if self.scanner.end_of_data() || self.eof {
                return Ok(self.finish());
            }
            self.fill()?;
        }
    }

    /// Binary: the trailer must end the input, as the server requires of
    /// COPY FROM STDIN ("received copy data after EOF marker"); bytes
    /// after it (two binary files concatenated) would otherwise be
    /// dropped without a word.
    fn nothing_after_trailer(&mut self) -> Result<()> {
        const TRAILER: usize = copyfmt::binary::TRAILER.len();
        let start = self.cut.map_or(0, |c| c.offset);
        loop {
            if self.buf.len() > start + TRAILER {
                return Err(Error::input(format!(
                    "{}: received copy data after EOF marker: {} byte(s) follow the binary \
                     trailer at byte {}",
                    self.input,
                    self.buf.len() - start - TRAILER,
                    self.byte + start as u64
                ))
                .with_hint(
                    "a binary COPY file ends at its trailer; to load two files, \
                     give them as two inputs",
                ));
            }
            if self.eof || self.fill()? == 0 {
                return Ok(());
            }
        }
    }

    /// The whole records of `buf[from..to]` (`lines`: the line breaks
    /// before `from`, counted from the buffer's start) must each stay
    /// within `max_record` bytes, their line break included. Measured one
    /// by one only when they are longer together: the record being read
    /// is measured as it grows ([`Chunker::check_record_size`]), but one
    /// that ends within the read that brought its start would not be.
    fn measure(&mut self, from: usize, to: usize, lines: u64) {
        if self.binary || to - from <= self.max_record || self.too_long.is_some() {
            return;
        }
        let eol = self.scanner.eol();
        let long = scan::records_with(&self.dialect, eol, &self.buf[from..to])
            .find(|s| s.end - s.start > self.max_record);
        if let Some(s) = long {
            let line = self.line + lines + s.line;
            self.too_long = Some((line, self.byte + (from + s.start) as u64));
        }
    }

    /// The record being read (after the last boundary) must stay within
    /// `max_record` bytes: fails with the line and byte where it started.
    /// So must every whole record ([`Chunker::measure`]).
    fn check_record_size(&self) -> Result<()> {
        if let Some((line, byte)) = self.too_long {
            return Err(record_too_long(&self.input, line, byte, self.max_record));
        }
        let start = self.cut.map_or(0, |c| c.offset);
        let pending = self.scanned.saturating_sub(start);
        if pending <= self.max_record {
            return Ok(());
        }
        let line = self.line + self.cut.map_or(0, |c| c.lines);
        Err(record_too_long(
            &self.input,
            line,
            self.byte + start as u64,
            self.max_record,
        ))
    }

    /// Reads once into the buffer; sets `eof` when the source is drained.
    fn fill(&mut self) -> Result<usize> {
        let start = self.buf.len();
        if self.buf.capacity() < start + READ_SIZE {
            // Size each chunk's allocation once: letting the buffer double
            // as it fills would leave every chunk in an allocation up to
            // twice its size (a 4 MiB chunk holding 8 MiB until it is sent).
            let want = self
                .target
                .saturating_add(2 * READ_SIZE)
                .max(start + READ_SIZE);
            self.buf.reserve(want - start);
        }
        self.buf.resize(start + READ_SIZE, 0);
        let n = loop {
            match self.reader.read(&mut self.buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(Error::read(&self.input, e));
                }
            }
        };
        self.buf.truncate(start + n);
        self.eof = n == 0;
        Ok(n)
    }

    /// Feeds unscanned bytes to the scanner and moves the cut forward:
    /// every boundary up to the target size, then only the first boundary
    /// after it, so a chunk ends at the first record end past the target.
    fn scan_new(&mut self) {
        while self.scanned < self.buf.len() && !self.scanner.end_of_data() {
            let before_target = self.scanned < self.target;
            let (end, stop) = if before_target {
                (self.buf.len().min(self.target), Stop::Last)
            } else {
                (self.buf.len(), Stop::First)
            };
            let from = self.scanned;
            let found = self.scanner.scan(&self.buf[from..end], stop);
            let consumed = match (stop, found) {
                (Stop::First, Some(b)) => from + b.offset,
                _ => end,
            };
            self.scanned = consumed;
            // Offsets shift left when the binary header is taken out of
            // `buf`; a tuple always ends after the header.
            let shift = if self.binary {
                self.strip_binary_header()
            } else {
                0
            };
            let consumed = consumed - shift;
            match found {
                Some(b) => {
                    let base = self.cut.map_or((0, 0, 0), |c| (c.records, c.lines, c.bad));
                    let offset = from + b.offset - shift;
                    self.measure(self.cut.map_or(0, |c| c.offset), offset, base.1);
                    let lines = if self.binary {
                        b.records
                    } else {
                        self.tail_lines + b.lines
                    };
                    self.cut = Some(Cut {
                        offset,
                        records: base.0 + b.records,
                        lines: base.1 + lines,
                        bad: base.2 + b.bad,
                    });
                    self.tail_lines = self.count_lines(offset, consumed);
                }
                None => {
                    let from = from.saturating_sub(shift);
                    self.tail_lines += self.count_lines(from, consumed);
                }
            }
            if self.scanner.error().is_some() || (!before_target && found.is_some()) {
                return;
            }
        }
    }

    /// Binary input: the file header is not data; keep it aside so each
    /// chunk's COPY can send it first.
    /// Returns how many bytes were taken from the front of `buf`.
    fn strip_binary_header(&mut self) -> usize {
        if self.header.is_some() {
            return 0;
        }
        match self.scanner.binary_header_len() {
            Some(h) if h <= self.buf.len() => {
                self.header = Some(self.buf.split_to(h).freeze());
                self.scanned -= h;
                self.byte += h as u64;
                h
            }
            _ => 0,
        }
    }

    fn count_lines(&self, from: usize, to: usize) -> u64 {
        if self.binary {
            0
        } else {
            let byte = self.scanner.line_byte();
            memchr::memchr_iter(byte, &self.buf[from..to]).count() as u64
        }
    }

    /// Consumes the header record of a text/CSV file.
    fn read_header(&mut self) -> Result<()> {
        self.header_done = true;
        if self.header_mode == Header::None || self.binary {
            return Ok(());
        }
        let mut lines = 0;
        loop {
            let from = self.scanned;
            if let Some(b) = self.scanner.scan(&self.buf[from..], Stop::First) {
                let end = from + b.offset;
                if end > self.max_record {
                    return Err(record_too_long(&self.input, 1, 0, self.max_record));
                }
                self.header = Some(self.buf.split_to(end).freeze());
                self.line += lines + b.lines;
                self.byte += end as u64;
                self.scanned = 0;
                return Ok(());
            }
            lines += self.count_lines(from, self.buf.len());
            self.scanned = self.buf.len();
            if self.scanned > self.max_record {
                return Err(record_too_long(&self.input, 1, 0, self.max_record));
            }
            if self.eof || self.fill()? == 0 {
                // A file that is nothing but a header (or empty).
                self.header = Some(self.buf.split().freeze());
                self.scanned = 0;
                self.done = true;
                return Ok(());
            }
        }
    }

    fn take(&mut self, cut: Cut) -> Chunk {
        let data = self.buf.split_to(cut.offset).freeze();
        self.scanned -= cut.offset;
        self.cut = None;
        self.make(data, cut.records, cut.lines, cut.bad)
    }

    /// The last chunk: whatever whole records remain, plus a final record
    /// without a terminating newline (which COPY accepts).
    fn finish(&mut self) -> Option<Chunk> {
        self.done = true;
        // A lone byte after the last tuple (a trailer cut short) ends the
        // data, as the server reads it: left unconsumed, not a row.
        self.lone_byte = self.binary && self.scanner.binary_lone_byte();
        if self.scanner.end_of_data() || self.lone_byte {
            let cut = self.cut?;
            return (cut.offset > 0).then(|| self.take(cut));
        }
        self.scanner.finish();
        let (records, lines, bad) = self.cut.map_or((0, 0, 0), |c| (c.records, c.lines, c.bad));
        let tail_len = self.buf.len() - self.cut.map_or(0, |c| c.offset);
        if self.buf.is_empty() {
            return None;
        }
        let extra = u64::from(tail_len > 0);
        let tail_bad = u64::from(tail_len > 0 && self.scanner.pending_error().is_some());
        let data = self.buf.split().freeze();
        self.cut = None;
        Some(self.make(
            data,
            records + extra,
            lines + self.tail_lines,
            bad + tail_bad,
        ))
    }

    fn make(&mut self, data: Bytes, records: u64, lines: u64, eol_errors: u64) -> Chunk {
        let chunk = Chunk {
            seq: self.next_seq,
            input: self.input.clone(),
            first_line: self.line,
            first_record: self.record,
            first_byte: self.byte,
            records,
            lines,
            eol: self.scanner.eol(),
            eol_errors,
            data,
        };
        self.next_seq += 1;
        self.line += if self.binary { records } else { lines };
        self.record += records;
        self.byte += chunk.data.len() as u64;
        chunk
    }
}

fn record_too_long(input: &str, line: u64, byte: u64, max: usize) -> Error {
    Error::input(format!(
        "{input}:{line}: the record starting here (byte {byte}) is longer than \
         --max-record-bytes ({max} bytes)"
    ))
    .with_hint(
        "an unmatched quote makes the rest of a file one record: check that line and \
         --quote/--escape/--format; a record that really is this long loads with a \
         larger --max-record-bytes",
    )
}

#[cfg(test)]
mod tests;
