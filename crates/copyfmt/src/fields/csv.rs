//! CSV format: `CopyReadAttributesCSV`, then FORCE_NULL / FORCE_NOT_NULL.

use super::{line_end, next_special, FieldEnd, FieldError, Fields, NullSpec};
use crate::scan::Dialect;

pub(super) fn split_csv(
    d: &Dialect,
    nulls: &NullSpec,
    rec: &[u8],
    out: &mut Fields,
    limit: usize,
) -> Result<(), FieldError> {
    let mut i = 0;
    loop {
        let field = out.len();
        let start = out.buf.len();
        let mut quoted = false;
        let end = csv_field(d, rec, i, out, &mut quoted)?;
        let mut null = !quoted && rec[i..end.raw_end] == nulls.null[..];
        if null && NullSpec::flag(&nulls.force_not_null, field) {
            null = false; // the value is the NULL string itself
        } else if !null
            && NullSpec::flag(&nulls.force_null, field)
            && out.buf[start..] == nulls.null[..]
        {
            null = true;
        }
        out.push(start, null, quoted);
        match end.next {
            Some(next) if out.len() < limit => i = next,
            _ => return Ok(()),
        }
    }
}

/// Decodes one CSV field starting at `i`: it alternates between unquoted
/// and quoted stretches until a delimiter or the end of the line.
fn csv_field(
    d: &Dialect,
    rec: &[u8],
    mut i: usize,
    out: &mut Fields,
    quoted: &mut bool,
) -> Result<FieldEnd, FieldError> {
    let field = out.len();
    loop {
        let run = next_special(rec, i, [d.delimiter, d.quote, b'\n', b'\r']);
        out.buf.extend_from_slice(&rec[i..run]);
        i = run;
        match rec.get(i) {
            None => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: None,
                })
            }
            Some(&b'\n') => return line_end(rec, i, "unquoted newline found in data", field),
            Some(&b'\r') => {
                return line_end(rec, i, "unquoted carriage return found in data", field)
            }
            Some(&c) if c == d.delimiter => {
                return Ok(FieldEnd {
                    raw_end: i,
                    next: Some(i + 1),
                })
            }
            Some(_) => {
                *quoted = true;
                i = csv_quoted(d, rec, i + 1, &mut out.buf)
                    .ok_or_else(|| FieldError::new("unterminated CSV quoted field", field))?;
            }
        }
    }
}

/// Decodes a quoted stretch starting after its opening quote; returns the
/// index after the closing quote, or `None` if there is none.
fn csv_quoted(d: &Dialect, rec: &[u8], mut i: usize, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        let run = next_special(rec, i, [d.quote, d.escape, d.quote, d.escape]);
        buf.extend_from_slice(&rec[i..run]);
        i = run;
        let c = *rec.get(i)?;
        // Test the escape first: when QUOTE = ESCAPE, a doubled quote is an
        // escaped quote and a single one ends the stretch.
        if c == d.escape {
            if let Some(&next) = rec.get(i + 1).filter(|&&n| n == d.escape || n == d.quote) {
                buf.push(next);
                i += 2;
                continue;
            }
        }
        if c == d.quote {
            return Some(i + 1);
        }
        buf.push(c); // an escape before an ordinary byte is itself data
        i += 1;
    }
}
