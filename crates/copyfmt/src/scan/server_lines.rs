//! The server's `line N` in a COPY error, mapped back to a record.
//!
//! PostgreSQL names a failing row by its `cur_lineno`, which is not a
//! record number in CSV: it also counts line breaks inside quotes, and
//! which break counts depends on the line-ending style the server has
//! settled on. Getting this wrong rejects the wrong row (or loads a bad
//! one), so the count here is `CopyReadLineText`'s own, checked against
//! real servers in pgtide's tests.

use super::{records, Dialect, Eol, Format, Scanner, Stop};

/// The 0-based record of `bytes` (whole records, as sent in one COPY)
/// that the server's `line N` designates, or `None` if no record has it.
///
/// The server's `cur_lineno` (copyfromparse.c) goes up by one per record
/// and, in CSV only, by one per quoted line break, where a "line break" is
/// `\n` once the style is known to be `\n`, and `\r` otherwise: inside the
/// first record of every COPY, read before the style is settled, a quoted
/// `\r` counts and a quoted `\n` does not. An error inside record `r` names
/// a line from its first to its first plus its quoted breaks.
pub fn record_at_server_line(d: &Dialect, bytes: &[u8], line: u64) -> Option<u64> {
    if d.format != Format::Csv {
        let index = line.checked_sub(1)?;
        records(d, bytes).nth(usize::try_from(index).ok()?)?;
        return Some(index);
    }
    let mut scanner = Scanner::resume(d.clone());
    let mut eol = Eol::Unknown;
    let mut first = 1u64;
    let mut pos = 0;
    let mut index = 0u64;
    while pos < bytes.len() {
        let end = match scanner.scan(&bytes[pos..], Stop::First) {
            Some(b) => pos + b.offset,
            None => bytes.len(),
        };
        let last = first + server_lines(d, eol, &bytes[pos..end]);
        if (first..=last).contains(&line) {
            return Some(index);
        }
        first = last + 1;
        index += 1;
        pos = end;
        eol = scanner.eol();
    }
    None
}

/// The line breaks the server counts inside the quotes of one CSV record
/// read while the line-ending style is `eol` (see
/// [`record_at_server_line`]); the walk is `CopyReadLineText`'s own.
pub fn server_lines(d: &Dialect, eol: Eol, record: &[u8]) -> u64 {
    let counted = if eol == Eol::Nl { b'\n' } else { b'\r' };
    let quote = d.quote;
    // As the server does, an ESCAPE equal to QUOTE is no escape at all.
    let escape = (d.escape != d.quote).then_some(d.escape);
    let (mut in_quote, mut last_was_esc) = (false, false);
    let mut n = 0;
    let mut skip = 0;
    for &c in record {
        if skip > 0 && d.lead_bytes.continues(c) {
            skip -= 1; // the rest of a multibyte character
            continue;
        }
        skip = d.lead_bytes.trailing(c);
        if in_quote && Some(c) == escape {
            last_was_esc = !last_was_esc;
        }
        if c == quote && !last_was_esc {
            in_quote = !in_quote;
        }
        if Some(c) != escape {
            last_was_esc = false;
        }
        n += u64::from(in_quote && c == counted);
    }
    n
}
