//! Unit tests of the scanner's private pieces; the split-point and
//! reference-implementation tests are in `tests/scan_split.rs` and
//! `tests/scan_props.rs`.

use super::textcsv::{eq_mask, escapes, low_bits, prefix_xor, BLOCK};
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
