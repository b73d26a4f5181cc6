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
//! path bail out for the new case, and run `tests/scan_split.rs`: its
//! reference implementation is a direct transcription of PostgreSQL's loop
//! and the proptests compare the two on inputs full of special bytes.
//!
//! # Semantics that are easy to get wrong
//!
//! * Text: a backslash escapes whatever follows, newline included, so
//!   `\` + newline is data and `\\` + newline ends the record.
//! * CSV: a quote opens a quoted section anywhere in a field, not only at its
//!   start. Inside quotes, a distinct ESCAPE only escapes QUOTE or ESCAPE.
//! * End marker: a record that is exactly `\.` (then `\n` or `\r\n`) ends the
//!   data; [`Scanner::scan`] returns the boundary before it. In text format a
//!   `\.` + newline in the middle of a record also ends the data, as in
//!   PostgreSQL up to 17 (version 18 rejects it); that record is counted and
//!   kept, so the server sees it and decides. PostgreSQL 18 no longer treats
//!   `\.` as special in CSV: set [`Dialect::end_marker`] to false for it.
//! * A lone `\r` does not end a record here. PostgreSQL accepts files whose
//!   lines all end in `\r`; to this scanner such a file is one unterminated
//!   record, so it is sent whole, which is slow but still correct.
//! * `lines` counts `\n` bytes whatever they mean: physical lines, as an
//!   editor shows them. The server's `line N` in errors counts records plus,
//!   in CSV, newlines inside quotes; the two differ only for text-format
//!   rows that contain a backslash-escaped newline.

use std::fmt;

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
    /// `\n` bytes consumed in this call up to `offset` (binary: = records).
    pub lines: u64,
}

/// How far one [`Scanner::scan`] call goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Stop just after the first record end; later bytes are not consumed.
    First,
    /// Consume all the input; report the last record end in it.
    Last,
}

/// The text/CSV machine: what the next byte means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// At the start of a record: no partial record pending.
    RecStart,
    /// Inside a record, outside quotes, not after a backslash.
    Field,
    /// CSV: inside quotes (`in_quote`).
    Quoted,
    /// CSV: inside quotes, just after a distinct ESCAPE (`last_was_esc`).
    QuotedEsc,
    /// Text: the next byte is escaped by a backslash.
    TextEsc,
    /// Record start, end-marker look-ahead: seen `\`.
    StartBs,
    /// Record start, end-marker look-ahead: seen `\.`.
    StartDot,
    /// Record start, end-marker look-ahead: seen `\.\r`.
    StartDotCr,
    /// Text, mid-record: seen an escaping `\` then `.`.
    MidDot,
    /// Text, mid-record: seen `\.\r`.
    MidDotCr,
}

impl St {
    /// States the 64-byte fast path can start from.
    fn is_simple(self, csv: bool) -> bool {
        match self {
            St::RecStart | St::Field => true,
            St::Quoted => csv,
            St::TextEsc => !csv,
            _ => false,
        }
    }
}

/// What one byte did, seen from the record level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Nothing,
    /// A record ended after this byte.
    End,
    /// The end marker ended here; the data ended before its record.
    EodBefore,
    /// Text `\.` mid-record: the record ends after this byte, and the data
    /// ends with it.
    EodAfter,
}

/// The binary machine: which part of the file the next byte belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bin {
    /// Signature bytes matched so far.
    Sig(u8),
    /// Header flags word: bytes read so far and value.
    Flags(u8, u32),
    /// Header extension length word.
    ExtLen(u8, u32),
    /// Header extension bytes left to skip.
    Ext(u32),
    /// Tuple field count (int16); `Count(0, _)` is a record start.
    Count(u8, u16),
    /// Field length word; fields left after this one.
    Len(u16, u8, u32),
    /// Field data bytes left to skip; fields left after this one.
    Data(u16, u32),
}

/// `PGCOPY\n\377\r\n\0`: the first 11 bytes of every binary COPY file.
const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// Signature + flags + extension length.
const FIXED_HEADER_LEN: usize = 19;

/// Bytes per fast-path block: one bit of a `u64` mask per byte.
const BLOCK: usize = 64;

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
    bin: Bin,
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
    last: Option<Boundary>,
}

/// Whether the block loop goes on after a block.
#[derive(PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// The result of the fast path on one block.
struct Fast {
    ends: u64,
    newlines: u64,
    next: St,
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

    fn with_state(d: Dialect, bin: Bin) -> Self {
        let csv = d.format == Format::Csv;
        let escape = (csv && d.escape != d.quote).then_some(d.escape);
        Scanner {
            csv,
            escape,
            marker: d.end_marker,
            st: St::RecStart,
            bin,
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
        if self.error.is_some() {
            // Still count the bytes, so that `pending_len` is the same
            // however the input was cut.
            self.pending += input.len() as u64;
            return None;
        }
        if self.done || input.is_empty() {
            return None;
        }
        let (acc, stopped) = if self.dialect.format == Format::Binary {
            self.scan_binary(input, stop)
        } else {
            self.scan_rows(input, stop)
        };
        self.pending = match (stopped, acc.last) {
            (true, _) => 0,
            (false, Some(b)) => (input.len() - b.offset) as u64,
            (false, None) => self.pending + input.len() as u64,
        };
        acc.last
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

    /// Tells the scanner that the input has ended.
    ///
    /// Returns true if the unterminated last record is exactly the end
    /// marker `\.` (possibly followed by `\r`); [`Scanner::end_of_data`]
    /// then becomes true, and the caller should drop the last
    /// [`Scanner::pending_len`] bytes instead of sending them. (The server
    /// itself would reject an unterminated `\.` in text format.)
    pub fn finish(&mut self) -> bool {
        let marker = matches!(self.st, St::StartDot | St::StartDotCr);
        self.done |= marker;
        marker
    }

    /// Text/CSV: 64-byte blocks, fast path where possible.
    fn scan_rows(&mut self, input: &[u8], stop: Stop) -> (Acc, bool) {
        let mut acc = Acc::default();
        let mut tail = [0u8; BLOCK];
        let mut base = 0;
        while base < input.len() {
            let rest = &input[base..];
            let n = rest.len().min(BLOCK);
            let block: &[u8; BLOCK] = match rest.first_chunk::<BLOCK>() {
                Some(block) => block,
                None => {
                    // Zero padding is inert: QUOTE and ESCAPE are never NUL.
                    tail[..n].copy_from_slice(rest);
                    tail[n..].fill(0);
                    &tail
                }
            };
            let fast = match (self.st.is_simple(self.csv), self.csv) {
                (false, _) => None,
                (true, true) => self.fast_csv(block, n),
                (true, false) => self.fast_text(block, n),
            };
            let flow = match fast {
                Some(f) => self.apply_fast(f, base, stop, &mut acc),
                None => self.slow_block(&block[..n], base, stop, &mut acc),
            };
            if flow == Flow::Stop {
                return (acc, !self.done);
            }
            base += n;
        }
        (acc, false)
    }

    /// CSV fast path: `None` means "let the slow path do this block".
    fn fast_csv(&self, block: &[u8; BLOCK], n: usize) -> Option<Fast> {
        let valid = low_bits(n);
        let newlines = eq_mask(block, b'\n') & valid;
        let quotes = eq_mask(block, self.dialect.quote) & valid;
        let quoted_in = if self.st == St::Quoted { !0 } else { 0 };
        let inside = prefix_xor(quotes) ^ quoted_in;
        // `inside` treats every quote as a toggle. A distinct ESCAPE only
        // changes that inside quotes; if no ESCAPE byte is inside by this
        // reckoning, none is in truth either (up to the first one inside,
        // both reckonings agree), and the masks are exact.
        if let Some(escape) = self.escape {
            if eq_mask(block, escape) & inside & valid != 0 {
                return None;
            }
        }
        let ends = newlines & !inside;
        if self.marker && self.marker_candidate(block, n, ends) {
            return None;
        }
        let last = 1u64 << (n - 1);
        let next = if ends & last != 0 {
            St::RecStart
        } else if inside & last != 0 {
            St::Quoted
        } else {
            St::Field
        };
        Some(Fast {
            ends,
            newlines,
            next,
        })
    }

    /// True if a record in the block starts with `\` followed by `.` or by
    /// the end of the block: it might be the end marker.
    fn marker_candidate(&self, block: &[u8; BLOCK], n: usize, ends: u64) -> bool {
        let at_start = u64::from(self.st == St::RecStart);
        let starts = ((ends << 1) | at_start) & low_bits(n);
        let mut cand = starts & eq_mask(block, b'\\');
        while cand != 0 {
            let p = cand.trailing_zeros() as usize;
            if p + 1 >= n || block.get(p + 1) == Some(&b'.') {
                return true;
            }
            cand &= cand - 1;
        }
        false
    }

    /// Text fast path: newlines not escaped by a backslash end records.
    fn fast_text(&self, block: &[u8; BLOCK], n: usize) -> Option<Fast> {
        let valid = low_bits(n);
        let newlines = eq_mask(block, b'\n') & valid;
        let backslashes = eq_mask(block, b'\\') & valid;
        let carry = self.st == St::TextEsc;
        let (escaped, escapers) = if backslashes == 0 && !carry {
            (0, 0)
        } else {
            escapes(backslashes, carry)
        };
        // An escaped `.` may be (part of) the end marker: slow path.
        if self.marker && escaped != 0 && escaped & eq_mask(block, b'.') & valid != 0 {
            return None;
        }
        let ends = newlines & !escaped;
        let last = 1u64 << (n - 1);
        let starts = (ends << 1) | u64::from(self.st == St::RecStart);
        let next = if ends & last != 0 {
            St::RecStart
        } else if escapers & starts & last != 0 && self.marker {
            // A record starting with `\` at the very end: maybe `\.`.
            St::StartBs
        } else if escapers & last != 0 {
            St::TextEsc
        } else {
            St::Field
        };
        Some(Fast {
            ends,
            newlines,
            next,
        })
    }

    fn apply_fast(&mut self, f: Fast, base: usize, stop: Stop, acc: &mut Acc) -> Flow {
        if stop == Stop::First && f.ends != 0 {
            let p = f.ends.trailing_zeros() as usize;
            acc.records += 1;
            acc.last = Some(Boundary {
                offset: base + p + 1,
                records: acc.records,
                lines: acc.lines + count(f.newlines & low_bits(p + 1)),
            });
            self.st = St::RecStart;
            return Flow::Stop;
        }
        self.st = f.next;
        if f.ends != 0 {
            let hi = (63 - f.ends.leading_zeros()) as usize;
            acc.records += count(f.ends);
            acc.last = Some(Boundary {
                offset: base + hi + 1,
                records: acc.records,
                lines: acc.lines + count(f.newlines & low_bits(hi + 1)),
            });
        }
        acc.lines += count(f.newlines);
        Flow::Go
    }

    /// The slow path over one block: `Scanner::step` on every byte.
    fn slow_block(&mut self, bytes: &[u8], base: usize, stop: Stop, acc: &mut Acc) -> Flow {
        for (i, &b) in bytes.iter().enumerate() {
            let ev = self.step(b);
            acc.lines += u64::from(b == b'\n');
            match ev {
                Ev::Nothing => continue,
                Ev::EodBefore => {
                    self.done = true;
                    return Flow::Stop;
                }
                Ev::End | Ev::EodAfter => {
                    acc.records += 1;
                    acc.last = Some(Boundary {
                        offset: base + i + 1,
                        records: acc.records,
                        lines: acc.lines,
                    });
                    if ev == Ev::EodAfter {
                        self.done = true;
                        return Flow::Stop;
                    }
                    if stop == Stop::First {
                        return Flow::Stop;
                    }
                }
            }
        }
        Flow::Go
    }

    /// One byte of the text/CSV machine: the definition of the semantics.
    fn step(&mut self, b: u8) -> Ev {
        match self.st {
            St::RecStart if self.marker && b == b'\\' => self.goto(St::StartBs),
            St::RecStart | St::Field => self.unquoted(b),
            St::Quoted => {
                if Some(b) == self.escape {
                    self.st = St::QuotedEsc;
                } else if b == self.dialect.quote {
                    self.st = St::Field;
                }
                Ev::Nothing
            }
            // Whatever follows a CSV escape inside quotes is plain data (a
            // second escape cancels the first, a quote stays inside).
            St::QuotedEsc => self.goto(St::Quoted),
            St::TextEsc if self.marker && b == b'.' => self.goto(St::MidDot),
            St::TextEsc => self.goto(St::Field),
            St::StartBs if b == b'.' => self.goto(St::StartDot),
            St::StartBs => self.replay(b"\\", b),
            St::StartDot => match b {
                b'\n' => Ev::EodBefore,
                b'\r' => self.goto(St::StartDotCr),
                _ => self.replay(b"\\.", b),
            },
            St::StartDotCr if b == b'\n' => Ev::EodBefore,
            St::StartDotCr => self.replay(b"\\.\r", b),
            St::MidDot if b == b'\n' => Ev::EodAfter,
            St::MidDot if b == b'\r' => self.goto(St::MidDotCr),
            St::MidDotCr if b == b'\n' => Ev::EodAfter,
            St::MidDot | St::MidDotCr => {
                self.st = St::Field;
                self.step(b)
            }
        }
    }

    fn goto(&mut self, st: St) -> Ev {
        self.st = st;
        Ev::Nothing
    }

    /// A byte outside quotes and escapes.
    fn unquoted(&mut self, b: u8) -> Ev {
        if b == b'\n' {
            self.st = St::RecStart;
            return Ev::End;
        }
        let next = match (self.csv, b) {
            (true, q) if q == self.dialect.quote => St::Quoted,
            (false, b'\\') => St::TextEsc,
            _ => St::Field,
        };
        self.goto(next)
    }

    /// An end-marker look-ahead failed: the peeked bytes were data after
    /// all. Run them through the machine as ordinary bytes of the record,
    /// then `b`. (They contain no newline, so they cannot end a record.)
    fn replay(&mut self, peeked: &[u8], b: u8) -> Ev {
        self.st = St::Field;
        for &p in peeked {
            self.step(p);
        }
        self.step(b)
    }

    /// Binary: walks the length words, skipping field data in bulk.
    fn scan_binary(&mut self, input: &[u8], stop: Stop) -> (Acc, bool) {
        let mut acc = Acc::default();
        let mut pos = 0;
        while pos < input.len() {
            match self.bin_step(input, &mut pos) {
                Ok(Ev::Nothing) => {}
                Ok(Ev::End | Ev::EodAfter) => {
                    acc.records += 1;
                    acc.last = Some(Boundary {
                        offset: pos,
                        records: acc.records,
                        lines: acc.records,
                    });
                    if stop == Stop::First {
                        return (acc, true);
                    }
                }
                Ok(Ev::EodBefore) => {
                    self.done = true;
                    break;
                }
                Err(msg) => {
                    self.error = Some(msg);
                    break;
                }
            }
        }
        (acc, false)
    }

    /// Advances the binary machine by at least one byte (`pos` < len).
    fn bin_step(&mut self, input: &[u8], pos: &mut usize) -> Result<Ev, &'static str> {
        let rest = &input[*pos..];
        // Skip data in bulk, and read whole words when they are all here
        // (the common case); otherwise go byte by byte below.
        match self.bin {
            Bin::Data(left, size) => {
                let skip = skip_len(size, rest.len());
                *pos += skip as usize;
                return match size - skip {
                    0 => self.field_done(left),
                    more => self.goto_bin(Bin::Data(left, more)),
                };
            }
            Bin::Ext(size) => {
                let skip = skip_len(size, rest.len());
                *pos += skip as usize;
                return self.goto_bin(match size - skip {
                    0 => Bin::Count(0, 0),
                    more => Bin::Ext(more),
                });
            }
            Bin::Count(0, _) if rest.len() >= 2 => {
                *pos += 2;
                return self.on_count(i16::from_be_bytes([rest[0], rest[1]]));
            }
            Bin::Len(left, 0, _) if rest.len() >= 4 => {
                *pos += 4;
                let word = [rest[0], rest[1], rest[2], rest[3]];
                return self.on_len(left, i32::from_be_bytes(word));
            }
            _ => {}
        }
        let b = rest[0];
        *pos += 1;
        let next = match self.bin {
            Bin::Sig(k) if SIGNATURE.get(usize::from(k)) != Some(&b) => {
                return Err("COPY file signature not recognized");
            }
            Bin::Sig(10) => Bin::Flags(0, 0),
            Bin::Sig(k) => Bin::Sig(k + 1),
            Bin::Flags(3, v) => check_flags((v << 8) | u32::from(b))?,
            Bin::Flags(k, v) => Bin::Flags(k + 1, (v << 8) | u32::from(b)),
            Bin::ExtLen(3, v) => return self.on_ext_len((v << 8) | u32::from(b)),
            Bin::ExtLen(k, v) => Bin::ExtLen(k + 1, (v << 8) | u32::from(b)),
            Bin::Count(0, _) => Bin::Count(1, u16::from(b)),
            Bin::Count(_, v) => return self.on_count(((v << 8) | u16::from(b)) as i16),
            Bin::Len(left, 3, v) => return self.on_len(left, ((v << 8) | u32::from(b)) as i32),
            Bin::Len(left, k, v) => Bin::Len(left, k + 1, (v << 8) | u32::from(b)),
            Bin::Data(..) | Bin::Ext(_) => self.bin, // handled above
        };
        self.goto_bin(next)
    }

    fn goto_bin(&mut self, bin: Bin) -> Result<Ev, &'static str> {
        self.bin = bin;
        Ok(Ev::Nothing)
    }

    fn on_ext_len(&mut self, len: u32) -> Result<Ev, &'static str> {
        if len > i32::MAX as u32 {
            return Err("invalid COPY file header (missing length)");
        }
        self.header_len = Some(FIXED_HEADER_LEN + len as usize);
        self.goto_bin(if len == 0 {
            Bin::Count(0, 0)
        } else {
            Bin::Ext(len)
        })
    }

    /// A tuple's field count: -1 is the trailer.
    fn on_count(&mut self, count: i16) -> Result<Ev, &'static str> {
        match count {
            -1 => Ok(Ev::EodBefore),
            0 => self.field_done(0),
            n => match u16::try_from(n) {
                Ok(n) => self.goto_bin(Bin::Len(n - 1, 0, 0)),
                Err(_) => Err("invalid field count in tuple"),
            },
        }
    }

    /// A field's length: -1 is NULL.
    fn on_len(&mut self, left: u16, len: i32) -> Result<Ev, &'static str> {
        match len {
            -1 | 0 => self.field_done(left),
            len => match u32::try_from(len) {
                Ok(len) => self.goto_bin(Bin::Data(left, len)),
                Err(_) => Err("invalid field size"),
            },
        }
    }

    /// A field ended; `left` more follow in its tuple.
    fn field_done(&mut self, left: u16) -> Result<Ev, &'static str> {
        match left.checked_sub(1) {
            Some(left) => self.goto_bin(Bin::Len(left, 0, 0)),
            None => {
                self.bin = Bin::Count(0, 0);
                Ok(Ev::End)
            }
        }
    }
}

/// Validates the binary header flags as PostgreSQL does.
fn check_flags(flags: u32) -> Result<Bin, &'static str> {
    if flags & (1 << 16) != 0 {
        return Err("invalid COPY file header (WITH OIDS)");
    }
    if flags >> 17 != 0 {
        return Err("unrecognized critical flags in COPY file header");
    }
    Ok(Bin::ExtLen(0, 0))
}

/// How many of `want` bytes can be skipped when `have` are available.
fn skip_len(want: u32, have: usize) -> u32 {
    u32::try_from(have).map_or(want, |have| want.min(have))
}

/// Bit `i` set iff `block[i] == byte`.
///
/// Written so that LLVM vectorises it on baseline x86-64: the comparison
/// becomes `pcmpeqb`, and each group of eight 0/1 bytes is gathered into
/// eight bits by one multiplication (the multiplier has one bit per byte,
/// placed so that byte `k` lands on bit `56 + k` with no carries).
#[inline(always)]
fn eq_mask(block: &[u8; BLOCK], byte: u8) -> u64 {
    let mut eq = [0u8; BLOCK];
    for (e, &b) in eq.iter_mut().zip(block) {
        *e = u8::from(b == byte);
    }
    let mut mask = 0u64;
    for (k, group) in eq.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(group.try_into().unwrap_or([0; 8]));
        mask |= (word.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    mask
}

/// Text format: which bytes of a block a backslash escapes.
///
/// `backslashes` has a bit per `\\`; `carry` says that byte 0 is escaped by
/// a backslash at the end of the previous block. Returns `(escaped,
/// escapers)`: the bytes that are data whatever they are, and the
/// backslashes that escape the byte after them. In a run of backslashes
/// they alternate, starting with an escaper, so the parity of the run's
/// start decides. The subtraction below propagates a borrow through each
/// run (the trick simdjson uses for JSON strings), which computes all the
/// runs' parities at once without a loop over backslashes.
#[inline(always)]
fn escapes(backslashes: u64, carry: bool) -> (u64, u64) {
    const ODD_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;
    let carry = u64::from(carry);
    let potential = backslashes & !carry;
    let code = (((potential << 1) | ODD_BITS).wrapping_sub(potential)) ^ ODD_BITS;
    let escaped = code ^ (backslashes | carry);
    (escaped, code & backslashes)
}

/// Bit `i` of the result is the XOR of bits `0..=i`: with one bit per
/// quote, it says whether byte `i` is inside quotes.
#[inline(always)]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// The lowest `n` bits set, for `n` in `1..=64`.
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    u64::MAX >> (BLOCK - n.clamp(1, BLOCK))
}

#[inline(always)]
fn count(mask: u64) -> u64 {
    u64::from(mask.count_ones())
}

/// One record of a buffer split by [`records`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    /// Offset of the record's first byte.
    pub start: usize,
    /// Offset just after the record's terminator (or the end of the buffer
    /// for an unterminated last record).
    pub end: usize,
    /// Number of `\n` bytes before `start`: the record's 0-based line.
    pub line: u64,
}

/// Splits whole records (no header) into spans; the last record may lack its
/// terminator.
///
/// This is the end of the input, so a last record that is exactly `\.`
/// counts as the end marker. Records after the end marker are not
/// returned. Binary data that cannot be parsed ends the iteration with one
/// span covering the rest of the buffer, so that no byte goes unreported.
pub fn records<'a>(d: &Dialect, bytes: &'a [u8]) -> impl Iterator<Item = RecordSpan> + 'a {
    Records {
        scanner: Scanner::resume(d.clone()),
        bytes,
        pos: 0,
        line: 0,
    }
}

/// The iterator behind [`records`].
struct Records<'a> {
    scanner: Scanner,
    bytes: &'a [u8],
    pos: usize,
    line: u64,
}

impl Iterator for Records<'_> {
    type Item = RecordSpan;

    fn next(&mut self) -> Option<RecordSpan> {
        let rest = self.bytes.get(self.pos..).filter(|r| !r.is_empty())?;
        let start = self.pos;
        let line = self.line;
        match self.scanner.scan(rest, Stop::First) {
            Some(b) => {
                self.pos += b.offset;
                self.line += b.lines;
                Some(RecordSpan {
                    start,
                    end: self.pos,
                    line,
                })
            }
            None => {
                // The rest is an unterminated last record, the end marker,
                // or (binary) bytes that do not parse.
                self.pos = self.bytes.len();
                let broken = self.scanner.error().is_some();
                let ended = self.scanner.end_of_data() || self.scanner.finish();
                (broken || !ended).then_some(RecordSpan {
                    start,
                    end: self.bytes.len(),
                    line,
                })
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq_mask_matches_naive() {
        let mut block = [0u8; BLOCK];
        for (i, b) in block.iter_mut().enumerate() {
            *b = [b'"', b'\n', b'a', b'\\'][(i * 7 + i / 3) % 4];
        }
        for byte in [b'"', b'\n', b'a', b'\\', b'z'] {
            let naive = (0..BLOCK).fold(0u64, |m, i| m | (u64::from(block[i] == byte) << i));
            assert_eq!(eq_mask(&block, byte), naive, "byte {byte}");
        }
    }

    /// The obvious loop that `escapes` replaces.
    fn escapes_naive(backslashes: u64, carry: bool) -> (u64, u64) {
        let (mut escaped, mut escapers) = (u64::from(carry), 0u64);
        for i in 0..BLOCK {
            let bit = 1u64 << i;
            if backslashes & bit != 0 && escaped & bit == 0 {
                escapers |= bit;
                escaped |= bit << 1;
            }
        }
        (escaped, escapers)
    }

    #[test]
    fn escapes_matches_naive() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut masks = vec![0, u64::MAX, 1, 1 << 63, 0b0111_0110, u64::MAX >> 1];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Dense, sparse and run-heavy masks.
            masks.extend([x, x & (x >> 3), x | (x << 1) | (x << 2)]);
        }
        for m in masks {
            for carry in [false, true] {
                assert_eq!(escapes(m, carry), escapes_naive(m, carry), "{m:#x} {carry}");
            }
        }
    }

    #[test]
    fn prefix_xor_marks_inside_quotes() {
        // quotes at 1 and 4: bytes 1..=3 are inside.
        assert_eq!(prefix_xor(0b1_0010), 0b0_1110);
        assert_eq!(prefix_xor(1 << 63), 1 << 63);
        assert_eq!(prefix_xor(1), u64::MAX);
    }

    #[test]
    fn low_bits_edges() {
        assert_eq!(low_bits(1), 1);
        assert_eq!(low_bits(63), u64::MAX >> 1);
        assert_eq!(low_bits(64), u64::MAX);
    }

    #[test]
    fn invalid_dialect_is_an_error_not_a_panic() {
        let mut d = Dialect::csv();
        d.quote = b',';
        let mut s = Scanner::new(d);
        assert!(s.error().is_some());
        assert_eq!(s.scan(b"a\n", Stop::Last), None);
    }
}
