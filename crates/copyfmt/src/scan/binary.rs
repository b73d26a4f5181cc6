//! The binary machine (`Bin`): walks a binary COPY file's header and
//! length-prefixed tuples, skipping field data in bulk.

use super::{Acc, Boundary, Ev, Scanner, Stop};
use crate::binary::{HEADER_LEN, SIGNATURE};

/// The binary machine: which part of the file the next byte belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bin {
    /// Signature bytes matched so far.
    Sig(u8),
    /// Header flags word: bytes read so far and value.
    Flags(u8, u32),
    /// Header extension length word.
    ExtLen(u8, u32),
    /// Header extension bytes left to skip.
    Ext(u32),
    /// Tuple field count (int16); `Count(0, _)` is a record start.
    Count(u8, u16),
    /// Field length word; fields left after this one.
    Len(u16, u8, u32),
    /// Field data bytes left to skip; fields left after this one.
    Data(u16, u32),
}

impl Scanner {
    /// Binary: walks the length words, skipping field data in bulk.
    /// Returns true if it stopped just after a record end (`Stop::First`).
    pub(super) fn scan_binary(&mut self, input: &[u8], stop: Stop, acc: &mut Acc) -> bool {
        let mut pos = 0;
        while pos < input.len() {
            match self.bin_step(input, &mut pos) {
                Ok(Ev::Nothing | Ev::EndBefore) => {}
                Ok(Ev::End | Ev::EodAfter) => {
                    acc.records += 1;
                    acc.last = Some(Boundary {
                        offset: pos,
                        records: acc.records,
                        lines: acc.records,
                        bad: 0,
                    });
                    if stop == Stop::First {
                        return true;
                    }
                }
                Ok(Ev::EodBefore) => {
                    self.done = true;
                    break;
                }
                Err(msg) => {
                    self.error = Some(msg);
                    break;
                }
            }
        }
        false
    }

    /// Advances the binary machine by at least one byte (`pos` < len).
    fn bin_step(&mut self, input: &[u8], pos: &mut usize) -> Result<Ev, &'static str> {
        let rest = &input[*pos..];
        // Skip data in bulk, and read whole words when they are all here
        // (the common case); otherwise go byte by byte below.
        match self.bin {
            Bin::Data(left, size) => {
                let skip = skip_len(size, rest.len());
                *pos += skip as usize;
                return match size - skip {
                    0 => self.field_done(left),
                    more => self.goto_bin(Bin::Data(left, more)),
                };
            }
            Bin::Ext(size) => {
                let skip = skip_len(size, rest.len());
                *pos += skip as usize;
                return self.goto_bin(match size - skip {
                    0 => Bin::Count(0, 0),
                    more => Bin::Ext(more),
                });
            }
            Bin::Count(0, _) if rest.len() >= 2 => {
                *pos += 2;
                return self.on_count(i16::from_be_bytes([rest[0], rest[1]]));
            }
            Bin::Len(left, 0, _) if rest.len() >= 4 => {
                *pos += 4;
                let word = [rest[0], rest[1], rest[2], rest[3]];
                return self.on_len(left, i32::from_be_bytes(word));
            }
            _ => {}
        }
        let b = rest[0];
        *pos += 1;
        let next = match self.bin {
            Bin::Sig(k) if SIGNATURE.get(usize::from(k)) != Some(&b) => {
                return Err("COPY file signature not recognized");
            }
            Bin::Sig(10) => Bin::Flags(0, 0),
            Bin::Sig(k) => Bin::Sig(k + 1),
            Bin::Flags(3, v) => check_flags((v << 8) | u32::from(b))?,
            Bin::Flags(k, v) => Bin::Flags(k + 1, (v << 8) | u32::from(b)),
            Bin::ExtLen(3, v) => return self.on_ext_len((v << 8) | u32::from(b)),
            Bin::ExtLen(k, v) => Bin::ExtLen(k + 1, (v << 8) | u32::from(b)),
            Bin::Count(0, _) => Bin::Count(1, u16::from(b)),
            Bin::Count(_, v) => return self.on_count(((v << 8) | u16::from(b)) as i16),
            Bin::Len(left, 3, v) => return self.on_len(left, ((v << 8) | u32::from(b)) as i32),
            Bin::Len(left, k, v) => Bin::Len(left, k + 1, (v << 8) | u32::from(b)),
            Bin::Data(..) | Bin::Ext(_) => self.bin, // handled above
        };
        self.goto_bin(next)
    }

    fn goto_bin(&mut self, bin: Bin) -> Result<Ev, &'static str> {
        self.bin = bin;
        Ok(Ev::Nothing)
    }

    fn on_ext_len(&mut self, len: u32) -> Result<Ev, &'static str> {
        if len > i32::MAX as u32 {
            return Err("invalid COPY file header (missing length)");
        }
        self.header_len = Some(HEADER_LEN + len as usize);
        self.goto_bin(if len == 0 {
            Bin::Count(0, 0)
        } else {
            Bin::Ext(len)
        })
    }

    /// A tuple's field count: -1 is the trailer.
    fn on_count(&mut self, count: i16) -> Result<Ev, &'static str> {
        match count {
            -1 => Ok(Ev::EodBefore),
            0 => self.field_done(0),
            n => match u16::try_from(n) {
                Ok(n) => self.goto_bin(Bin::Len(n - 1, 0, 0)),
                Err(_) => Err("invalid field count in tuple"),
            },
        }
    }

    /// A field's length: -1 is NULL.
    fn on_len(&mut self, left: u16, len: i32) -> Result<Ev, &'static str> {
        match len {
            -1 | 0 => self.field_done(left),
            len => match u32::try_from(len) {
                Ok(len) => self.goto_bin(Bin::Data(left, len)),
                Err(_) => Err("invalid field size"),
            },
        }
    }

    /// A field ended; `left` more follow in its tuple.
    fn field_done(&mut self, left: u16) -> Result<Ev, &'static str> {
        match left.checked_sub(1) {
            Some(left) => self.goto_bin(Bin::Len(left, 0, 0)),
            None => {
                self.bin = Bin::Count(0, 0);
                Ok(Ev::End)
            }
        }
    }
}

/// Validates the binary header flags as PostgreSQL does.
fn check_flags(flags: u32) -> Result<Bin, &'static str> {
    if flags & (1 << 16) != 0 {
        return Err("invalid COPY file header (WITH OIDS)");
    }
    if flags >> 17 != 0 {
        return Err("unrecognized critical flags in COPY file header");
    }
    Ok(Bin::ExtLen(0, 0))
}

/// How many of `want` bytes can be skipped when `have` are available.
fn skip_len(want: u32, have: usize) -> u32 {
    u32::try_from(have).map_or(want, |have| want.min(have))
}
