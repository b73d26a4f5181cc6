//! One-dimensional arrays of the scalar types.
//!
//! `array_in` reads optional dimension decorations (`[1:3]=`), nested
//! braces for more dimensions, whitespace around elements, quoted elements
//! with backslash escapes, unquoted elements with backslash escapes, and
//! the unquoted word `NULL`; PostgreSQL 17 rewrote that parser and changed
//! some corner cases. Only the plain core is converted here:
//!
//! * `{}` (an empty array, sent with zero dimensions);
//! * `{e1,e2,...}` with no whitespace outside elements, each element
//!   either quoted, `"..."`, where `\x` stands for `x` and everything else
//!   is literal, or unquoted, a non-empty run without whitespace, `{`,
//!   `}`, `"` or `\`;
//! * an unquoted `NULL` (any case) is a NULL element. That is the meaning
//!   under the default `array_nulls = on`; a session with it off gets no
//!   array encoder (`Session::array_nulls`).
//!
//! Each element goes through the element type's encoder with the column's
//! typmod (as `array_in` passes it to the element input function), and
//! the array is deferred if any element is. Deferred too: leading or
//! trailing whitespace, dimension decorations, nested braces, empty
//! unquoted elements (an error).
//!
//! Send format (`array_send`): int32 ndim (1, or 0 when empty), int32
//! has-null flag, uint32 element type OID (checked by `array_recv` against
//! the column's element type), then per dimension int32 length and int32
//! lower bound (1), then per element an int32 length (-1 for NULL) and the
//! element's send format.

use std::borrow::Cow;

use super::{check_text, is_pg_space, len_placeholder, patch_len, Encoder, Uncertain};

pub(super) fn encode(
    v: &[u8],
    inner: &Encoder,
    elem_oid: u32,
    out: &mut Vec<u8>,
) -> Result<(), Uncertain> {
    check_text(v)?;
    let body = v
        .strip_prefix(b"{")
        .and_then(|r| r.strip_suffix(b"}"))
        .ok_or(Uncertain::Unsupported)?;
    let h = out.len();
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&elem_oid.to_be_bytes());
    if body.is_empty() {
        out[h..h + 4].copy_from_slice(&0i32.to_be_bytes());
        return Ok(());
    }
    // Dimension length, patched below, and lower bound 1.
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&1i32.to_be_bytes());

    let mut count: i32 = 0;
    let mut has_null = false;
    let mut i = 0;
    loop {
        if body.get(i) == Some(&b'"') {
            let (value, next) = quoted(body, i)?;
            element(inner, &value, out)?;
            i = next;
        } else {
            let end = memchr::memchr(b',', &body[i..]).map_or(body.len(), |n| i + n);
            let raw = &body[i..end];
            if raw.is_empty() {
                // `{1,,2}` and `{1,}` are syntax errors.
                return Err(Uncertain::Invalid);
            }
            if raw
                .iter()
                .any(|&b| matches!(b, b'{' | b'}' | b'"' | b'\\') || is_pg_space(b))
            {
                return Err(Uncertain::Unsupported);
            }
            if raw.eq_ignore_ascii_case(b"NULL") {
                out.extend_from_slice(&(-1i32).to_be_bytes());
                has_null = true;
            } else {
                element(inner, raw, out)?;
            }
            i = end;
        }
        count = count.checked_add(1).ok_or(Uncertain::Unsupported)?;
        match body.get(i) {
            None => break,
            Some(b',') => i += 1,
            // Whitespace or junk after a quoted element.
            Some(_) => return Err(Uncertain::Unsupported),
        }
    }
    out[h + 4..h + 8].copy_from_slice(&i32::from(has_null).to_be_bytes());
    out[h + 12..h + 16].copy_from_slice(&count.to_be_bytes());
    Ok(())
}

/// The quoted element starting at `body[start]`, de-escaped, and the index
/// after its closing quote.
fn quoted(body: &[u8], start: usize) -> Result<(Cow<'_, [u8]>, usize), Uncertain> {
    let mut i = start + 1;
    let mut escapes = false;
    loop {
        match body.get(i) {
            None => return Err(Uncertain::Invalid),
            Some(b'"') => break,
            Some(b'\\') => {
                escapes = true;
                i += 2;
            }
            Some(_) => i += 1,
        }
    }
    let raw = &body[start + 1..i];
    if !escapes {
        return Ok((Cow::Borrowed(raw), i + 1));
    }
    let mut value = Vec::with_capacity(raw.len());
    let mut bytes = raw.iter();
    while let Some(&b) = bytes.next() {
        if b == b'\\' {
            // The scan above guarantees a byte follows.
            value.extend(bytes.next());
        } else {
            value.push(b);
        }
    }
    Ok((Cow::Owned(value), i + 1))
}

fn element(inner: &Encoder, value: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let at = len_placeholder(out);
    inner.encode(value, out)?;
    patch_len(out, at)
}

#[cfg(test)]
mod tests {
    use super::super::{Encoder, Session, Uncertain};

    fn hex(oid: u32, typmod: i32, v: &str) -> Result<String, Uncertain> {
        let e = Encoder::for_type(oid, typmod, &Session::default()).unwrap();
        let mut out = Vec::new();
        e.encode(v.as_bytes(), &mut out)?;
        Ok(out.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Expected bytes from `array_send` on PostgreSQL 15.
    #[test]
    fn send_layout() {
        assert_eq!(
            hex(1007, -1, "{}").as_deref(),
            Ok("000000000000000000000017")
        );
        assert_eq!(
            hex(1007, -1, "{1,NULL}").as_deref(),
            Ok("00000001000000010000001700000002000000010000000400000001ffffffff")
        );
        assert_eq!(
            hex(1009, -1, r#"{a,"b c","NULL",null,"x\"y\\z",""}"#).as_deref(),
            Ok(concat!(
                "0000000100000001000000190000000600000001",
                "0000000161",
                "00000003622063",
                "000000044e554c4c",
                "ffffffff",
                "00000005782279",
                "5c7a",
                "00000000",
            ))
        );
    }

    #[test]
    fn elements_use_the_element_encoder_and_typmod() {
        // bpchar(3)[]: each element padded.
        assert_eq!(
            hex(1014, 7, "{a,bc}").as_deref(),
            Ok(concat!(
                "0000000100000000000004120000000200000001",
                "00000003612020",
                "00000003626320",
            ))
        );
        assert_eq!(hex(1015, 7, "{abcd}"), Err(Uncertain::Unsupported));
        assert_eq!(
            hex(1007, -1, r#"{" 7 "}"#)
                .map(|h| h[40..].to_string())
                .as_deref(),
            Ok("0000000400000007")
        );
        assert_eq!(hex(1007, -1, "{1,x}"), Err(Uncertain::Invalid));
        assert!(hex(1231, -1, "{1.5,NaN}").is_ok());
        assert!(hex(3807, -1, r#"{"{\"a\": 1}"}"#).is_ok());
    }

    #[test]
    fn deferred_forms() {
        use Uncertain::*;
        for (v, why) in [
            ("", Unsupported),
            ("1,2", Unsupported),
            (" {1}", Unsupported),
            ("{1} ", Unsupported),
            ("[1:2]={1,2}", Unsupported),
            ("{{1,2},{3,4}}", Unsupported),
            ("{1, 2}", Unsupported),
            ("{ 1}", Unsupported),
            (r#"{"a" ,b}"#, Unsupported),
            (r#"{a\,b}"#, Unsupported),
            (r#"{a"b"}"#, Unsupported),
            ("{1,,2}", Invalid),
            ("{1,}", Invalid),
            ("{,}", Invalid),
            (r#"{"abc}"#, Invalid),
            (r#"{"a\"}"#, Invalid),
        ] {
            assert_eq!(hex(1009, -1, v), Err(why), "{v}");
        }
    }
}
