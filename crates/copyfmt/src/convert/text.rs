//! Character types, `bytea` and `uuid`.
//!
//! Character types: text COPY checks that the line is valid in the client
//! encoding (UTF-8 here) and PostgreSQL text cannot hold NUL, so both are
//! required; the send format is then the bytes themselves.
//! * `text`, unbounded `varchar`/`bpchar`: any such value.
//! * `varchar(n)`: at most `n` characters. Longer input is an error unless
//!   the excess is spaces, which `varchar_input` cuts off; deferred.
//! * `bpchar(n)`: at most `n` characters, padded with spaces to `n`
//!   (as `bpchar_input` stores it); longer input deferred as above.
//! * `name`: at most 63 bytes; longer input is silently truncated by
//!   `namein`, so deferred.
//!
//! `bytea`, as `byteain`: `\x` then hex digit pairs (either case; spaces,
//! tabs and newlines allowed between pairs), or the escape format, where
//! `\\` is a backslash, `\ooo` (first digit 0-3) an octal byte and any
//! other byte itself. Anything else is an error there, so deferred here.
//!
//! `uuid`, as `string_to_uuid`: an optional `{`, 32 hex digits with an
//! optional `-` after any group of four (but not at the end), the matching
//! `}`, nothing else (no whitespace). Send format: the 16 bytes.

use super::{check_text, Uncertain};

pub(super) fn encode_text(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    check_text(v)?;
    out.extend_from_slice(v);
    Ok(())
}

/// `NAMEDATALEN - 1`.
const NAME_MAX_BYTES: usize = 63;

pub(super) fn encode_name(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    check_text(v)?;
    if v.len() > NAME_MAX_BYTES {
        return Err(Uncertain::Unsupported);
    }
    out.extend_from_slice(v);
    Ok(())
}

/// Characters in valid UTF-8: bytes that do not continue a sequence.
fn char_count(s: &str) -> usize {
    s.bytes().filter(|&b| (b as i8) >= -0x40).count()
}

pub(super) fn encode_varchar(v: &[u8], max: u32, out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let s = check_text(v)?;
    // Fast path: no more bytes than allowed characters.
    if v.len() > max as usize && char_count(s) > max as usize {
        return Err(Uncertain::Unsupported);
    }
    out.extend_from_slice(v);
    Ok(())
}

pub(super) fn encode_bpchar(v: &[u8], len: u32, out: &mut Vec<u8>) -> Result<(), Uncertain> {
    let s = check_text(v)?;
    let chars = char_count(s);
    let len = len as usize;
    if chars > len {
        return Err(Uncertain::Unsupported);
    }
    out.extend_from_slice(v);
    out.resize(out.len() + (len - chars), b' ');
    Ok(())
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

pub(super) fn encode_bytea(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    // The text line had to be valid in the client encoding.
    check_text(v)?;
    if let Some(hex) = v.strip_prefix(b"\\x") {
        out.reserve(hex.len() / 2);
        let mut i = 0;
        while i < hex.len() {
            if matches!(hex[i], b' ' | b'\n' | b'\t' | b'\r') {
                i += 1;
                continue;
            }
            let hi = hex_value(hex[i]).ok_or(Uncertain::Invalid)?;
            let lo = hex.get(i + 1).and_then(|&b| hex_value(b));
            let lo = lo.ok_or(Uncertain::Invalid)?;
            out.push(hi << 4 | lo);
            i += 2;
        }
        return Ok(());
    }
    let mut rest = v;
    while let Some(at) = memchr::memchr(b'\\', rest) {
        out.extend_from_slice(&rest[..at]);
        let esc = &rest[at..];
        match esc {
            [_, b'\\', ..] => {
                out.push(b'\\');
                rest = &esc[2..];
            }
            [_, a @ b'0'..=b'3', b @ b'0'..=b'7', c @ b'0'..=b'7', ..] => {
                out.push((a - b'0') << 6 | (b - b'0') << 3 | (c - b'0'));
                rest = &esc[4..];
            }
            _ => return Err(Uncertain::Invalid),
        }
    }
    out.extend_from_slice(rest);
    Ok(())
}

/// Each byte's value as a hex digit, or 0xFF.
static HEX: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// The canonical form `8-4-4-4-12` (what PostgreSQL prints, so nearly
/// every file's), decoded without branching per digit; `None` for any
/// other spelling, which [`encode_uuid`] then reads digit by digit.
fn canonical_uuid(v: &[u8]) -> Option<[u8; 16]> {
    if v.len() != 36 || v[8] != b'-' || v[13] != b'-' || v[18] != b'-' || v[23] != b'-' {
        return None;
    }
    const AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    let mut bytes = [0u8; 16];
    let mut bad = 0u8;
    for (byte, &at) in bytes.iter_mut().zip(AT.iter()) {
        let (hi, lo) = (HEX[v[at] as usize], HEX[v[at + 1] as usize]);
        bad |= (hi | lo) & 0xF0;
        *byte = hi << 4 | (lo & 0x0F);
    }
    (bad == 0).then_some(bytes)
}

pub(super) fn encode_uuid(v: &[u8], out: &mut Vec<u8>) -> Result<(), Uncertain> {
    if let Some(bytes) = canonical_uuid(v) {
        out.extend_from_slice(&bytes);
        return Ok(());
    }
    let mut s = v;
    let braces = s.first() == Some(&b'{');
    if braces {
        s = &s[1..];
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let (Some(hi), Some(lo)) = (
            s.first().and_then(|&b| hex_value(b)),
            s.get(1).and_then(|&b| hex_value(b)),
        ) else {
            return Err(Uncertain::Invalid);
        };
        *byte = hi << 4 | lo;
        s = &s[2..];
        if i % 2 == 1 && i < 15 && s.first() == Some(&b'-') {
            s = &s[1..];
        }
    }
    if braces {
        s = s.strip_prefix(b"}").ok_or(Uncertain::Invalid)?;
    }
    if !s.is_empty() {
        return Err(Uncertain::Invalid);
    }
    out.extend_from_slice(&bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Encoder, Uncertain};

    fn enc(e: Encoder, v: &[u8]) -> Result<Vec<u8>, Uncertain> {
        let mut out = Vec::new();
        e.encode(v, &mut out).map(|()| out)
    }

    #[test]
    fn text_is_sent_as_is_when_valid_utf8() {
        assert_eq!(enc(Encoder::Text, b" a\tb "), Ok(b" a\tb ".to_vec()));
        assert_eq!(enc(Encoder::Text, b""), Ok(vec![]));
        assert_eq!(enc(Encoder::Text, "é€😀".as_bytes()), Ok("é€😀".into()));
        assert_eq!(enc(Encoder::Text, b"a\xffb"), Err(Uncertain::Invalid));
        assert_eq!(enc(Encoder::Text, b"a\0b"), Err(Uncertain::Invalid));
    }

    #[test]
    fn varchar_counts_characters() {
        let e = || Encoder::VarChar(3);
        assert_eq!(enc(e(), "abc".as_bytes()), Ok(b"abc".to_vec()));
        assert_eq!(enc(e(), "ééé".as_bytes()), Ok("ééé".into()));
        assert_eq!(enc(e(), b"abcd"), Err(Uncertain::Unsupported));
        // PostgreSQL would cut the trailing spaces; the server decides.
        assert_eq!(enc(e(), b"abc  "), Err(Uncertain::Unsupported));
    }

    #[test]
    fn bpchar_pads_to_length() {
        let e = || Encoder::BpChar(4);
        assert_eq!(enc(e(), b"ab"), Ok(b"ab  ".to_vec()));
        assert_eq!(enc(e(), b""), Ok(b"    ".to_vec()));
        assert_eq!(enc(e(), "éé".as_bytes()), Ok("éé  ".into()));
        assert_eq!(enc(e(), b"abcd"), Ok(b"abcd".to_vec()));
        assert_eq!(enc(e(), b"abcde"), Err(Uncertain::Unsupported));
        assert_eq!(enc(Encoder::Text, b"ab "), Ok(b"ab ".to_vec()));
    }

    #[test]
    fn name_limit_is_63_bytes() {
        let ok = "n".repeat(63);
        assert_eq!(enc(Encoder::Name, ok.as_bytes()), Ok(ok.clone().into()));
        let long = "n".repeat(64);
        assert_eq!(
            enc(Encoder::Name, long.as_bytes()),
            Err(Uncertain::Unsupported)
        );
    }

    #[test]
    fn bytea_hex_and_escape() {
        assert_eq!(enc(Encoder::Bytea, b"\\x"), Ok(vec![]));
        assert_eq!(
            enc(Encoder::Bytea, b"\\xDEadBe ef\n00"),
            Ok(vec![0xde, 0xad, 0xbe, 0xef, 0])
        );
        assert_eq!(enc(Encoder::Bytea, b"\\xabc"), Err(Uncertain::Invalid));
        assert_eq!(enc(Encoder::Bytea, b"\\xa bc"), Err(Uncertain::Invalid));
        assert_eq!(enc(Encoder::Bytea, b"\\xzz"), Err(Uncertain::Invalid));
        assert_eq!(enc(Encoder::Bytea, b"abc"), Ok(b"abc".to_vec()));
        assert_eq!(
            enc(Encoder::Bytea, b"a\\\\b\\000\\377"),
            Ok(b"a\\b\0\xff".to_vec())
        );
        assert_eq!(enc(Encoder::Bytea, b"\\X41"), Err(Uncertain::Invalid));
        assert_eq!(enc(Encoder::Bytea, b"\\400"), Err(Uncertain::Invalid));
        assert_eq!(enc(Encoder::Bytea, b"\\12"), Err(Uncertain::Invalid));
        assert_eq!(enc(Encoder::Bytea, b"x\\"), Err(Uncertain::Invalid));
    }

    #[test]
    fn uuid_forms_of_uuid_in() {
        let want: Vec<u8> = vec![
            0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38,
            0x0a, 0x11,
        ];
        for v in [
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
        ] {
            assert_eq!(enc(Encoder::Uuid, v.as_bytes()), Ok(want.clone()), "{v}");
        }
        for v in [
            "",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            "a0eebc9-99c0b-4ef8-bb6d-6bb9bd380a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            // The canonical length and hyphens, a bad digit anywhere.
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd38-a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a\u{0}1",
            "a0eebc99-9c0b-4ef8-bb6d-\u{7f}bb9bd380a11",
        ] {
            assert_eq!(
                enc(Encoder::Uuid, v.as_bytes()),
                Err(Uncertain::Invalid),
                "{v}"
            );
        }
    }
}
