//! Binary format: one tuple's fields as raw bytes.

use super::{FieldError, Fields};

/// One binary tuple: int16 field count, then int32 length (-1 = NULL) and
/// bytes for each field.
pub(super) fn split_binary(rec: &[u8], out: &mut Fields) -> Result<(), FieldError> {
    let count = rec
        .first_chunk::<2>()
        .map(|b| i16::from_be_bytes(*b))
        .ok_or_else(|| FieldError::new("truncated tuple: missing field count", 0))?;
    if count == -1 {
        return Err(FieldError::new(
            "the end-of-data trailer is not a record",
            0,
        ));
    }
    let count = usize::try_from(count).map_err(|_| FieldError::new("invalid field count", 0))?;
    let mut pos = 2;
    for field in 0..count {
        let len = rec
            .get(pos..)
            .and_then(|r| r.first_chunk::<4>())
            .map(|b| i32::from_be_bytes(*b))
            .ok_or_else(|| FieldError::new("unexpected EOF in COPY data", field))?;
        pos += 4;
        let start = out.buf.len();
        if len == -1 {
            out.push(start, true, false);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| FieldError::new("invalid field size", field))?;
        let value = rec
            .get(pos..pos + len)
            .ok_or_else(|| FieldError::new("unexpected EOF in COPY data", field))?;
        out.buf.extend_from_slice(value);
        out.push(start, false, false);
        pos += len;
    }
    if pos != rec.len() {
        return Err(FieldError::new(
            "extra data after the tuple's last field",
            count,
        ));
    }
    Ok(())
}
