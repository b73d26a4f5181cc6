//! Text format: `CopyReadAttributesText`, with backslash escapes.

use super::{line_end, next_special, FieldEnd, FieldError, Fields, NullSpec};

pub(super) fn split_text(
    delim: u8,
    nulls: &NullSpec,
    rec: &[u8],
    out: &mut Fields,
    limit: usize,
) -> Result<(), FieldError> {
    let mut i = 0;
    loop {
        let field = out.len();
        let start = out.buf.len();
        let mut saw_nul = false;
        let end = text_field(delim, rec, i, out, &mut saw_nul)?;
        let null = rec[i..end.raw_end] == nulls.null[..];
        // As in PostgreSQL, a bad escape only matters if the field is not
        // NULL: the NULL check comes first.
        if saw_nul && !null {
            return Err(FieldError::new(
                "invalid byte sequence: an escape produced a NUL byte",
                field,
            ));
        }
        out.push(start, null, false);
        match end.next {
            Some(next) if out.len() < limit => i = next,
            _ => return Ok(()),
        }
    }
}

/// Decodes one text field starting at `i` into `out.buf`.
fn text_field(
    delim: u8,
    rec: &[u8],
    mut i: usize,
    out: &mut Fields,
    saw_nul: &mut bool,
) -> Result<FieldEnd, FieldError> {
    loop {
        let run = next_special(rec, i, [delim, b'\\', b'\n', b'\r']);
        out.buf.extend_from_slice(&rec[i..run]);
        i = run;
        match rec.get(i) {
            None => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: None,
                })
            }
            // The server's line reader never lets `\.` through as data:
            // it ends the data there or rejects the line, by rules that
            // depend on the server version, so only the server decides.
            Some(&b'\\') if rec.get(i + 1) == Some(&b'.') => {
                return Err(FieldError::new(
                    "end-of-copy marker (\\.) inside a record",
                    out.len(),
                ))
            }
            // A backslash that ends the data (the last record, without a
            // line break) escapes nothing and is no part of the field,
            // also for the NULL check: `CopyReadAttributesText` stops
            // before it.
            Some(&b'\\') if i + 1 == rec.len() => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: None,
                })
            }
            Some(&b'\\') => i = unescape(rec, i + 1, &mut out.buf, saw_nul),
            Some(&b'\n') => return line_end(rec, i, "literal newline found in data", out.len()),
            Some(&b'\r') => {
                return line_end(rec, i, "literal carriage return found in data", out.len())
            }
            Some(_) => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: Some(i + 1),
                })
            }
        }
    }
}

/// Decodes the escape whose backslash was just before `i`; returns the
/// index after it. A backslash at the very end is dropped, as PostgreSQL
/// does.
fn unescape(rec: &[u8], i: usize, buf: &mut Vec<u8>, saw_nul: &mut bool) -> usize {
    let Some(&c) = rec.get(i) else {
        return i;
    };
    let (value, next) = match c {
        b'0'..=b'7' => {
            let digits = rec[i..]
                .iter()
                .take(3)
                .take_while(|d| matches!(d, b'0'..=b'7'));
            let (value, n) =
                digits.fold((0u32, 0), |(v, n), d| (v * 8 + u32::from(d - b'0'), n + 1));
            ((value & 0xff) as u8, i + n)
        }
        b'x' => match rec.get(i + 1).and_then(|&h| hex(h)) {
            Some(hi) => match rec.get(i + 2).and_then(|&h| hex(h)) {
                Some(lo) => (hi * 16 + lo, i + 3),
                None => (hi, i + 2),
            },
            None => (b'x', i + 1),
        },
        b'b' => (0x08, i + 1),
        b'f' => (0x0c, i + 1),
        b'n' => (b'\n', i + 1),
        b'r' => (b'\r', i + 1),
        b't' => (b'\t', i + 1),
        b'v' => (0x0b, i + 1),
        other => (other, i + 1),
    };
    *saw_nul |= value == 0;
    buf.push(value);
    next
}

fn hex(h: u8) -> Option<u8> {
    char::from(h).to_digit(16).map(|v| v as u8)
}
