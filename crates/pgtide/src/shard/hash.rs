//! PostgreSQL's partition hash, bit for bit.
//!
//! A row goes to the hash partition whose `(modulus, remainder)` satisfies
//! `row_hash % modulus == remainder`, where `row_hash` is
//! `compute_partition_hash_value`: for every non-NULL key column, in key
//! order, `row_hash = hash_combine64(row_hash, f(value, HASH_PARTITION_SEED))`
//! with `f` the column's hash opclass support function 2 (the "extended"
//! hash). NULL columns are skipped. The functions here are the ones of the
//! default hash opclasses (`src/common/hashfn.c`, `hashfunc.c`,
//! `numeric.c`): Bob Jenkins' lookup3 with a 64-bit seed, on a
//! little-endian server (`NumericDigit`s are hashed in the server's byte
//! order; big-endian servers are not routed on the client, see
//! `tree.rs`).
//!
//! Every function is checked against the server's own
//! `satisfies_hash_partition()` in `tests/shard.rs`.

/// `HASH_PARTITION_SEED` (`src/include/catalog/partition.h`).
pub const HASH_PARTITION_SEED: u64 = 0x7A5B_2236_7996_DCFD;

#[inline]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

#[inline]
fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

fn seeded(init: u32, seed: u64) -> (u32, u32, u32) {
    let (mut a, mut b, mut c) = (init, init, init);
    if seed != 0 {
        a = a.wrapping_add((seed >> 32) as u32);
        b = b.wrapping_add(seed as u32);
        mix(&mut a, &mut b, &mut c);
    }
    (a, b, c)
}

/// `hash_bytes_extended` (`hash_any_extended`): lookup3 over `k`.
pub fn hash_bytes_extended(k: &[u8], seed: u64) -> u64 {
    let init = 0x9e37_79b9u32
        .wrapping_add(k.len() as u32)
        .wrapping_add(3_923_095);
    let (mut a, mut b, mut c) = seeded(init, seed);
    let word = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let mut k = k;
    while k.len() >= 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    // The last 0..=11 bytes, little-endian into a and b; c's lowest byte
    // is reserved for the length, so its bytes start at bit 8.
    for (i, &byte) in k.iter().enumerate() {
        let v = byte as u32;
        match i {
            0..=3 => a = a.wrapping_add(v << (8 * i)),
            4..=7 => b = b.wrapping_add(v << (8 * (i - 4))),
            _ => c = c.wrapping_add(v << (8 * (i - 7))),
        }
    }
    final_mix(&mut a, &mut b, &mut c);
    ((b as u64) << 32) | c as u64
}

/// `hash_bytes_uint32_extended` (`hash_uint32_extended`).
pub fn hash_uint32_extended(k: u32, seed: u64) -> u64 {
    let init = 0x9e37_79b9u32.wrapping_add(4).wrapping_add(3_923_095);
    let (mut a, mut b, mut c) = seeded(init, seed);
    a = a.wrapping_add(k);
    final_mix(&mut a, &mut b, &mut c);
    ((b as u64) << 32) | c as u64
}

/// `hash_combine64` (`src/include/common/hashfn.h`).
pub fn hash_combine64(a: u64, b: u64) -> u64 {
    a ^ b
        .wrapping_add(0x49a0_f4dd_15e5_a8e3)
        .wrapping_add(a << 54)
        .wrapping_add(a >> 7)
}

/// `hashint2extended`, `hashint4extended`, `hashcharextended` (bool):
/// the value widened to int32.
pub fn hash_int4(v: i32, seed: u64) -> u64 {
    hash_uint32_extended(v as u32, seed)
}

/// `hashint8extended` (also `timestamp`/`timestamptz` as int64
/// microseconds): the high half folded into the low half so that values
/// equal as int4 hash alike.
pub fn hash_int8(v: i64, seed: u64) -> u64 {
    let hi = (v >> 32) as u32;
    let mut lo = v as u32;
    lo ^= if v >= 0 { hi } else { !hi };
    hash_uint32_extended(lo, seed)
}

/// `hash_numeric_extended` on a value in `numeric_send` form (`ndigits`,
/// `weight`, `sign`, `dscale`, base-10000 digits big-endian): leading and
/// trailing zero digits and the sign play no part; NaN and infinities hash
/// to the seed, zero to `seed - 1`. `None` if `bin` is not that form.
pub fn hash_numeric(bin: &[u8], seed: u64) -> Option<u64> {
    if bin.len() < 8 {
        return None;
    }
    let ndigits = u16::from_be_bytes([bin[0], bin[1]]) as usize;
    let mut weight = i16::from_be_bytes([bin[2], bin[3]]) as i64;
    let sign = u16::from_be_bytes([bin[4], bin[5]]);
    if bin.len() != 8 + 2 * ndigits {
        return None;
    }
    if sign == 0xC000 || sign == 0xD000 || sign == 0xF000 {
        return Some(seed);
    }
    let digits: Vec<i16> = bin[8..]
        .chunks_exact(2)
        .map(|d| i16::from_be_bytes([d[0], d[1]]))
        .collect();
    let start = digits.iter().take_while(|&&d| d == 0).count();
    if start == digits.len() {
        return Some(seed.wrapping_sub(1));
    }
    weight -= start as i64;
    let end = digits.iter().rev().take_while(|&&d| d == 0).count();
    // The server hashes its stored int16 digits in memory order
    // (little-endian here).
    let mut bytes = Vec::with_capacity(2 * (digits.len() - start - end));
    for d in &digits[start..digits.len() - end] {
        bytes.extend_from_slice(&d.to_le_bytes());
    }
    Some(hash_bytes_extended(&bytes, seed) ^ weight as u64)
}

/// `hashbpcharextended`: the value without its trailing spaces.
pub fn hash_bpchar(v: &[u8], seed: u64) -> u64 {
    let len = v.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    hash_bytes_extended(&v[..len], seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_of_nothing_is_zero_based() {
        // One column: hash_combine64(0, h).
        let h = hash_int4(1, HASH_PARTITION_SEED);
        assert_eq!(hash_combine64(0, h), h.wrapping_add(0x49a0_f4dd_15e5_a8e3));
    }

    #[test]
    fn int8_folds_like_int4_for_small_values() {
        for v in [-5i64, -1, 0, 1, 42, i32::MAX as i64, i32::MIN as i64] {
            assert_eq!(hash_int8(v, 7), hash_int4(v as i32, 7));
        }
    }

    #[test]
    fn bpchar_ignores_trailing_spaces() {
        assert_eq!(hash_bpchar(b"ab  ", 3), hash_bytes_extended(b"ab", 3));
        assert_eq!(hash_bpchar(b"   ", 3), hash_bytes_extended(b"", 3));
    }
}
