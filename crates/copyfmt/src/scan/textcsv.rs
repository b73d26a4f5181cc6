//! The text and CSV machine (`St`): the byte-at-a-time slow path that
//! defines the semantics, and the 64-byte bit-mask fast path that must
//! agree with it. See "Advice for hackers" in [`crate::scan`].

use super::{Acc, Boundary, End, Eol, EolError, Ev, Scanner, Stop};

/// The text/CSV machine: what the next byte means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum St {
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
    /// An unquoted `\r` while the style is unknown or `\r\n`: the next
    /// byte decides (PostgreSQL peeks at it too).
    Cr,
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

/// Bytes per fast-path block: one bit of a `u64` mask per byte.
pub(super) const BLOCK: usize = 64;

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
    /// No line break, quote or backslash in the block (see
    /// `Scanner::quiet_blocks`).
    quiet: bool,
}

impl Scanner {
    /// Text/CSV: 64-byte blocks, fast path where possible. Returns true if
    /// it stopped just after a record end (`Stop::First`).
    pub(super) fn scan_rows(&mut self, input: &[u8], stop: Stop, acc: &mut Acc) -> bool {
        let mut tail = [0u8; BLOCK];
        let mut base = 0;
        // The block before held no byte that matters: whole blocks up to
        // the next such byte change nothing (see `quiet_blocks`).
        let mut quiet = false;
        while base < input.len() {
            if quiet {
                base += self.quiet_blocks(&input[base..]);
                quiet = false;
                if base == input.len() {
                    break;
                }
            }
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
            // A character that may hide ASCII bytes is read byte by byte.
            let multibyte = self.dialect.lead_bytes.embeds_ascii()
                && (self.mb_left > 0 || block[..n].iter().any(|&b| b >= 0x80));
            let fast = match (self.st.is_simple(self.csv) && !multibyte, self.csv) {
                (false, _) => None,
                (true, true) => self.fast_csv(block, n),
                (true, false) => self.fast_text(block, n),
            };
            let flow = match fast {
                Some(f) => {
                    quiet = f.quiet && !self.dialect.lead_bytes.embeds_ascii();
                    self.apply_fast(f, base, stop, acc)
                }
                None => self.slow_block(&block[..n], base, stop, acc),
            };
            if flow == Flow::Stop {
                return !self.done;
            }
            base += n;
        }
        false
    }

    /// Bytes of whole blocks at the start of `rest` without a byte that
    /// the machine reacts to in the state a quiet block left it in
    /// (`Field`, or CSV's `Quoted`): no line break, no quote (CSV, whose
    /// ESCAPE is the quote when a block can be quiet), no backslash
    /// (text). Such bytes end no record, count no line and leave the state
    /// as it is, so they are stepped over by one vectorised search instead
    /// of mask by mask: rows with long fields (the seed's 1.2 KB of text)
    /// cost a fraction of the scan. Never used where a multibyte
    /// character may hide ASCII bytes (`embeds_ascii`): a skip could end
    /// inside a character.
    fn quiet_blocks(&self, rest: &[u8]) -> usize {
        let third = if self.csv { self.dialect.quote } else { b'\\' };
        let run = memchr::memchr3(b'\n', b'\r', third, rest).unwrap_or(rest.len());
        run / BLOCK * BLOCK
    }

    /// CSV fast path: `None` means "let the slow path do this block".
    fn fast_csv(&self, block: &[u8; BLOCK], n: usize) -> Option<Fast> {
        let valid = low_bits(n);
        let newlines = eq_mask(block, b'\n') & valid;
        let crs = eq_mask(block, b'\r') & valid;
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
        let (ends, breaks) = self.line_ends(newlines, crs, !inside, n)?;
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
            newlines: breaks,
            next,
            quiet: self.escape.is_none() && newlines | crs | quotes == 0,
        })
    }

    /// Record ends and counted line breaks of a block under the stream's
    /// style, given which bytes are `outside` quotes or escapes; `None`
    /// when a `\r` or `\n` needs the slow path (a record with a line
    /// break that does not fit the style, a `\r\n` across blocks, or the
    /// first `\r` of a stream, which settles the style).
    fn line_ends(&self, newlines: u64, crs: u64, outside: u64, n: usize) -> Option<(u64, u64)> {
        match self.eol {
            Eol::Unknown | Eol::Nl if crs != 0 => None,
            Eol::Unknown | Eol::Nl => Some((newlines & outside, newlines)),
            Eol::Cr if newlines != 0 => None,
            Eol::Cr => Some((crs & outside, crs)),
            Eol::CrNl => {
                let ends = newlines & outside;
                let cr_out = crs & outside;
                let last = 1u64 << (n - 1);
                let fits = cr_out << 1 == ends && ends & 1 == 0 && cr_out & last == 0;
                fits.then_some((ends, newlines))
            }
        }
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
        let crs = eq_mask(block, b'\r') & valid;
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
        let (ends, breaks) = self.line_ends(newlines, crs, !escaped, n)?;
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
            newlines: breaks,
            next,
            quiet: !carry && newlines | crs | backslashes == 0,
        })
    }

    fn apply_fast(&mut self, f: Fast, base: usize, stop: Stop, acc: &mut Acc) -> Flow {
        if f.ends != 0 && self.eol == Eol::Unknown {
            // The fast path runs before the style is known only on blocks
            // without `\r`: the first record ended with `\n`.
            self.eol = Eol::Nl;
        }
        // The first end in the block closes a record that the slow path
        // may have found bad; the fast path finds no errors itself.
        let first_error = match f.ends {
            0 => None,
            _ => self.bad_rec.take(),
        };
        if let Some(e) = first_error {
            acc.bad += 1;
            self.last_error = Some(e);
        }
        if stop == Stop::First && f.ends != 0 {
            let p = f.ends.trailing_zeros() as usize;
            acc.records += 1;
            acc.last = Some(Boundary {
                offset: base + p + 1,
                records: acc.records,
                lines: acc.lines + count(f.newlines & low_bits(p + 1)),
                bad: acc.bad,
            });
            self.st = St::RecStart;
            return Flow::Stop;
        }
        self.st = f.next;
        if let Some(ends) = &mut acc.ends {
            push_ends(ends, &f, base, acc.lines, first_error);
        }
        if f.ends != 0 {
            let hi = (63 - f.ends.leading_zeros()) as usize;
            acc.records += count(f.ends);
            acc.last = Some(Boundary {
                offset: base + hi + 1,
                records: acc.records,
                lines: acc.lines + count(f.newlines & low_bits(hi + 1)),
                bad: acc.bad,
            });
        }
        acc.lines += count(f.newlines);
        Flow::Go
    }

    /// The slow path over one block: `Scanner::step` on every byte.
    fn slow_block(&mut self, bytes: &[u8], base: usize, stop: Stop, acc: &mut Acc) -> Flow {
        for (i, &b) in bytes.iter().enumerate() {
            if self.mb_left > 0 && self.dialect.lead_bytes.continues(b) {
                // The rest of a multibyte character (never a line break).
                self.mb_left -= 1;
                continue;
            }
            // A byte no character has there ended it early. The server skips
            // the rest of a character it reads as one (up to 13, not one it
            // skips after a text backslash).
            self.mb_left = 0;
            let escaped = self.st == St::TextEsc || (!self.csv && self.st == St::StartBs);
            let escaped = escaped && !self.dialect.escape_whole_char;
            let mut ev = self.step(b);
            if ev == Ev::EndBefore {
                // The lone `\r` before `b` ended the first record.
                acc.lines += 1;
                self.end_record(acc, base + i);
                if stop == Stop::First {
                    return Flow::Stop; // `b` is fed again
                }
                ev = self.step(b);
            }
            if !escaped {
                self.mb_left = self.dialect.lead_bytes.trailing(b);
            }
            acc.lines += u64::from(b == self.line_byte());
            match ev {
                Ev::Nothing | Ev::EndBefore => continue,
                Ev::EodBefore => {
                    self.done = true;
                    return Flow::Stop;
                }
                Ev::End | Ev::EodAfter => {
                    self.end_record(acc, base + i + 1);
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

    /// Counts a record that ended at `offset`, with its line-ending error.
    fn end_record(&mut self, acc: &mut Acc, offset: usize) {
        acc.records += 1;
        let error = self.bad_rec.take();
        if let Some(e) = error {
            acc.bad += 1;
            self.last_error = Some(e);
        }
        if let Some(ends) = &mut acc.ends {
            ends.push(End {
                offset,
                lines: acc.lines,
                error,
            });
        }
        acc.last = Some(Boundary {
            offset,
            records: acc.records,
            lines: acc.lines,
            bad: acc.bad,
        });
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
            St::TextEsc if self.marker && self.dialect.mid_record_marker && b == b'.' => {
                self.goto(St::MidDot)
            }
            St::TextEsc => self.goto(St::Field),
            St::StartBs if b == b'.' => self.goto(St::StartDot),
            St::StartBs => self.replay(b"\\", b),
            St::StartDot => self.after_marker(b, b"\\.", St::StartDotCr, Ev::EodBefore),
            St::MidDot => self.after_marker(b, b"", St::MidDotCr, Ev::EodAfter),
            St::StartDotCr => self.after_marker_cr(b, b"\\.\r", Ev::EodBefore),
            St::MidDotCr => self.after_marker_cr(b, b"\r", Ev::EodAfter),
            St::Cr => self.after_cr(b),
        }
    }

    /// The byte after `\.` (at a record's start, or mid-record in text
    /// up to PostgreSQL 17), by `CopyReadLineText`'s rules: a line break
    /// of the stream's style ends the data (`eod`); in the `\r\n` style a
    /// `\r` waits for its `\n` (`cr`); anything else is data in CSV and an
    /// error in text, and a line break of another style is an error in
    /// both. An erroneous record is marked and read on as data (`peeked`:
    /// the marker's bytes not yet run through the machine).
    fn after_marker(&mut self, b: u8, peeked: &[u8], cr: St, eod: Ev) -> Ev {
        let error = match (b, self.eol) {
            (b'\r', Eol::CrNl) => return self.goto(cr),
            (b'\n', Eol::CrNl) if self.csv => None,
            (b'\n', Eol::Unknown | Eol::Nl) | (b'\r', Eol::Unknown | Eol::Cr) => return eod,
            (b'\n' | b'\r', _) => Some(EolError::MarkerStyle),
            _ if self.csv => None,
            _ => Some(self.marker_corrupt()),
        };
        if let Some(e) = error {
            self.mark(e);
        }
        self.replay(peeked, b)
    }

    /// The byte after `\.\r` in the `\r\n` style (see
    /// [`Scanner::after_marker`]).
    fn after_marker_cr(&mut self, b: u8, peeked: &[u8], eod: Ev) -> Ev {
        match b {
            b'\n' => return eod,
            b'\r' => self.mark(EolError::MarkerStyle),
            _ if self.csv => {}
            _ => self.mark(self.marker_corrupt()),
        }
        self.replay(peeked, b)
    }

    /// Text: the server's error for `\.` not followed by a line break.
    pub(super) fn marker_corrupt(&self) -> EolError {
        match self.dialect.mid_record_marker {
            true => EolError::MarkerCorrupt,
            false => EolError::MarkerNotAlone,
        }
    }

    /// The byte after an unquoted `\r` (style unknown or `\r\n`).
    fn after_cr(&mut self, b: u8) -> Ev {
        if b == b'\n' {
            if self.eol == Eol::Unknown {
                self.eol = Eol::CrNl;
            }
            self.st = St::RecStart;
            return Ev::End;
        }
        if self.eol == Eol::Unknown {
            self.eol = Eol::Cr;
            self.st = St::RecStart;
            return Ev::EndBefore;
        }
        // `\r\n` style, and this `\r` has no `\n`: the record is bad; the
        // byte is data of it.
        self.mark(EolError::CarriageReturn);
        self.st = St::Field;
        self.step(b)
    }

    /// Notes a line-ending error in the current record (the first one
    /// counts, as the server stops there).
    fn mark(&mut self, e: EolError) {
        self.bad_rec.get_or_insert(e);
    }

    fn goto(&mut self, st: St) -> Ev {
        self.st = st;
        Ev::Nothing
    }

    /// A byte outside quotes and escapes.
    fn unquoted(&mut self, b: u8) -> Ev {
        match (b, self.eol) {
            (b'\n', Eol::Cr) => {
                self.mark(EolError::Newline);
                return self.goto(St::Field);
            }
            (b'\n', eol) => {
                match eol {
                    Eol::Unknown => self.eol = Eol::Nl,
                    Eol::CrNl => self.mark(EolError::Newline),
                    _ => {}
                }
                self.st = St::RecStart;
                return Ev::End;
            }
            (b'\r', Eol::Unknown | Eol::CrNl) => return self.goto(St::Cr),
            (b'\r', Eol::Nl) => {
                self.mark(EolError::CarriageReturn);
                return self.goto(St::Field);
            }
            (b'\r', Eol::Cr) => {
                self.st = St::RecStart;
                return Ev::End;
            }
            _ => {}
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
    /// then `b`. (They cannot end a record: no `\n`, and a `\r` here is
    /// only peeked in the `\r\n` style, where it waits for the next byte.)
    fn replay(&mut self, peeked: &[u8], b: u8) -> Ev {
        self.st = St::Field;
        for &p in peeked {
            self.step(p);
        }
        self.step(b)
    }
}

/// Appends every record end of a fast block at `base` to `ends`; `lines`
/// are the line breaks counted before the block, and `first_error` is the
/// line-ending error of the block's first record end.
fn push_ends(
    ends: &mut Vec<End>,
    f: &Fast,
    base: usize,
    lines: u64,
    first_error: Option<EolError>,
) {
    let mut error = first_error;
    let mut left = f.ends;
    while left != 0 {
        let p = left.trailing_zeros() as usize;
        ends.push(End {
            offset: base + p + 1,
            lines: lines + count(f.newlines & low_bits(p + 1)),
            error: error.take(),
        });
        left &= left - 1;
    }
}

/// Bit `i` set iff `block[i] == byte`.
///
/// Written so that LLVM vectorises it on baseline x86-64: the comparison
/// becomes `pcmpeqb`, and each group of eight 0/1 bytes is gathered into
/// eight bits by one multiplication (the multiplier has one bit per byte,
/// placed so that byte `k` lands on bit `56 + k` with no carries).
#[inline(always)]
pub(super) fn eq_mask(block: &[u8; BLOCK], byte: u8) -> u64 {
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
pub(super) fn escapes(backslashes: u64, carry: bool) -> (u64, u64) {
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
pub(super) fn prefix_xor(mut x: u64) -> u64 {
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
pub(super) fn low_bits(n: usize) -> u64 {
    u64::MAX >> (BLOCK - n.clamp(1, BLOCK))
}

#[inline(always)]
fn count(mask: u64) -> u64 {
    u64::from(mask.count_ones())
}
