//! Client encodings whose multibyte characters may hold ASCII bytes
//! (Shift JIS, Big5, GBK, UHC, GB18030, JOHAB: PostgreSQL's client-only
//! encodings): `表` in Shift JIS is `0x95 0x5C`, and that `0x5C` is not a
//! backslash. PostgreSQL's `CopyReadLineText` skips the rest of each
//! character once it reads a byte with the high bit set
//! (`encoding_embeds_ascii`), judging the length from that first byte
//! alone; the scanner does the same, or a Shift JIS row ending in `表`
//! would swallow the next line as an escaped newline.
//!
//! A byte that no character of the encoding has after its first byte (a
//! line break, a quote, a comma after an invalid lead byte) ends the
//! character early instead ([`LeadBytes::continues`]). The server converts
//! the input before it splits lines, and refuses such a sequence; the row
//! that holds it is refused whole, and the rows after it keep their own
//! line breaks (outside testing: an invalid lead byte before the header's
//! line break made the first data row part of the header, dropped
//! unseen).

/// How a client encoding's characters are measured from their first byte
/// (PostgreSQL's `pg_encoding_mblen` for the encodings that embed ASCII;
/// all others never hide an ASCII byte inside a character).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeadBytes {
    /// UTF-8, single-byte encodings, EUC: nothing to skip.
    #[default]
    Ascii,
    /// `SJIS`, `SHIFT_JIS_2004`: `0xA1..=0xDF` (half-width katakana) is
    /// one byte, any other high byte starts two.
    Sjis,
    /// `JOHAB` (measured as EUC): `0x8F` starts three bytes, any other
    /// high byte two.
    Johab,
    /// `BIG5`, `GBK`, `UHC`, `GB18030`: a high byte starts two (a
    /// four-byte GB18030 character is two such pairs for this purpose,
    /// as the server reads it).
    Double,
}

/// An encoding name as PostgreSQL's `pg_char_to_encoding` compares it:
/// without punctuation, in lower case (`Shift_JIS` and `shiftjis` are one).
pub fn encoding_key(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

impl LeadBytes {
    /// The encoding of a PostgreSQL encoding name (any spelling
    /// `pg_char_to_encoding` takes).
    pub fn of_encoding(name: &str) -> LeadBytes {
        match encoding_key(name).as_str() {
            "sjis" | "shiftjis" | "mskanji" | "win932" | "windows932" | "shiftjis2004" => {
                LeadBytes::Sjis
            }
            "johab" => LeadBytes::Johab,
            "big5" | "win950" | "windows950" | "gbk" | "win936" | "windows936" | "uhc"
            | "win949" | "windows949" | "gb18030" => LeadBytes::Double,
            _ => LeadBytes::Ascii,
        }
    }

    /// Whether characters of this encoding can hide ASCII bytes.
    pub fn embeds_ascii(self) -> bool {
        self != LeadBytes::Ascii
    }

    /// Whether `next` may be a later byte of a character that a high byte
    /// began: any high byte, or an ASCII byte in the range the encoding's
    /// characters take there (Shift JIS, Big5, GBK, UHC: `0x40..=0x7E`,
    /// which holds `\\` and `|`; GB18030's four-byte form: also digits;
    /// JOHAB: none, as PostgreSQL checks it). Never a control byte, a
    /// space, `"` or `,`.
    pub fn continues(self, next: u8) -> bool {
        next >= 0x80
            || match self {
                LeadBytes::Ascii | LeadBytes::Johab => false,
                LeadBytes::Sjis => (0x40..=0x7e).contains(&next),
                LeadBytes::Double => (0x30..=0x39).contains(&next) || (0x40..=0x7e).contains(&next),
            }
    }

    /// Bytes after `first` that belong to its character, when each of
    /// them [`LeadBytes::continues`] it.
    pub(super) fn trailing(self, first: u8) -> u8 {
        if first < 0x80 {
            return 0;
        }
        match self {
            LeadBytes::Ascii => 0,
            LeadBytes::Sjis if (0xa1..=0xdf).contains(&first) => 0,
            LeadBytes::Johab if first == 0x8f => 2,
            LeadBytes::Sjis | LeadBytes::Johab | LeadBytes::Double => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_lengths() {
        assert_eq!(LeadBytes::of_encoding("Shift_JIS"), LeadBytes::Sjis);
        assert_eq!(LeadBytes::of_encoding("WIN936"), LeadBytes::Double);
        assert_eq!(LeadBytes::of_encoding("EUC_JP"), LeadBytes::Ascii);
        assert_eq!(LeadBytes::of_encoding("UTF8"), LeadBytes::Ascii);
        assert_eq!(LeadBytes::Sjis.trailing(0x95), 1);
        assert_eq!(LeadBytes::Sjis.trailing(0xb1), 0);
        assert_eq!(LeadBytes::Sjis.trailing(b'\\'), 0);
        assert_eq!(LeadBytes::Johab.trailing(0x8f), 2);
        assert_eq!(LeadBytes::Double.trailing(0xff), 1);
        assert_eq!(LeadBytes::Ascii.trailing(0x95), 0);
        assert!(LeadBytes::Sjis.continues(b'\\') && LeadBytes::Double.continues(b'|'));
        assert!(!LeadBytes::Sjis.continues(b'\n') && !LeadBytes::Sjis.continues(b'"'));
        assert!(LeadBytes::Double.continues(b'7') && !LeadBytes::Sjis.continues(b'7'));
        assert!(!LeadBytes::Johab.continues(b'A') && LeadBytes::Johab.continues(0xa1));
    }
}
