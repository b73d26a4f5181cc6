//! Walking the backend messages of a `COPY ... TO STDOUT` in place,
//! sans-IO: whatever bytes the socket gave, in whatever pieces.
//!
//! The server sends one CopyData message per row: a 5-byte header (`d`,
//! length) and the row. [`Walker::walk`] copies the payloads of every
//! CopyData message in its input straight into the output buffer and
//! skips the headers, so many rows cost one read and one buffer, not one
//! allocation and one hand-over each. A CopyData message may be cut
//! anywhere by the reads (a row larger than a read, a header split in
//! two): its payload is copied as it comes, so no message is ever held
//! whole, however large. Every other message is handed back whole to the
//! caller (`copyout`), which knows the protocol's states.

use bytes::{Buf, BytesMut};

/// The largest message other than CopyData that is accepted whole (an
/// ErrorResponse, a notice): a length beyond it is a stream out of step,
/// not a message to allocate for.
pub const MAX_MESSAGE: usize = 64 << 20;

/// What [`Walker::walk`] stopped for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The output holds `want` bytes and more rows follow.
    Full,
    /// The input is used up: read more. The input must be able to hold at
    /// least this many bytes for the next message to be whole (0: any
    /// read will do).
    More(usize),
    /// A message that is not CopyData (or CopyData outside the COPY) is
    /// whole at the front of the input: its tag and its length, tag
    /// included. The caller consumes it.
    Message {
        /// The message type byte.
        tag: u8,
        /// Bytes of the whole message.
        len: usize,
    },
}

/// The stream is not the PostgreSQL protocol (or not in step with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfStep(pub String);

/// Where the walk is between calls: inside a CopyData payload or at a
/// message boundary.
#[derive(Debug, Default)]
pub struct Walker {
    /// Payload bytes of the current CopyData message not yet copied.
    remaining: usize,
    /// CopyData messages begun (rows, plus a header line or a binary
    /// trailer).
    pub messages: u64,
    /// Between CopyOutResponse and CopyDone: CopyData messages are walked
    /// through, not handed back.
    pub copying: bool,
}

impl Walker {
    /// Moves CopyData payloads from the front of `input` to the end of
    /// `out` until `out` holds `want` bytes (never more) and another row
    /// waits, the input ends, or another message is whole at the front
    /// of `input` (handed back even when `out` is full, so that the end
    /// of the COPY is seen as soon as its last byte).
    pub fn walk(
        &mut self,
        input: &mut BytesMut,
        out: &mut BytesMut,
        want: usize,
    ) -> Result<Event, OutOfStep> {
        // Walk with an index; the input is advanced once, on the way out.
        let mut pos = 0;
        let event = self.walk_at(&input[..], &mut pos, out, want);
        input.advance(pos);
        event
    }

    fn walk_at(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        out: &mut BytesMut,
        want: usize,
    ) -> Result<Event, OutOfStep> {
        loop {
            let room = want.saturating_sub(out.len());
            if self.remaining > 0 {
                let n = self.remaining.min(buf.len() - *pos).min(room);
                out.extend_from_slice(&buf[*pos..*pos + n]);
                *pos += n;
                self.remaining -= n;
                if self.remaining > 0 {
                    return Ok(if n == room {
                        Event::Full
                    } else {
                        Event::More(0)
                    });
                }
                continue;
            }
            let rest = &buf[*pos..];
            if rest.len() < 5 {
                return Ok(Event::More(5));
            }
            let tag = rest[0];
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            if len < 4 {
                return Err(OutOfStep(format!(
                    "a message of type {:?} claims a length of {len}",
                    tag as char
                )));
            }
            if tag == b'd' && self.copying {
                if room == 0 {
                    return Ok(Event::Full);
                }
                *pos += 5;
                self.remaining = len - 4;
                self.messages += 1;
                continue;
            }
            if len > MAX_MESSAGE {
                return Err(OutOfStep(format!(
                    "a message of type {:?} claims a length of {len} bytes",
                    tag as char
                )));
            }
            if rest.len() <= len {
                return Ok(Event::More(len + 1));
            }
            return Ok(Event::Message { tag, len: len + 1 });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    /// The payloads and the other messages' tags, the stream fed in
    /// pieces of `step` bytes and drained into outputs of `want` bytes.
    fn run(stream: &[u8], step: usize, want: usize) -> (Vec<u8>, Vec<u8>, u64, usize) {
        let mut w = Walker {
            copying: true,
            ..Walker::default()
        };
        let mut input = BytesMut::new();
        let (mut out, mut tags, mut pieces) = (Vec::new(), Vec::new(), 0);
        let mut piece = BytesMut::new();
        let mut fed = 0;
        loop {
            match w.walk(&mut input, &mut piece, want).unwrap() {
                Event::Full => {
                    assert_eq!(piece.len(), want);
                    out.extend_from_slice(&piece.split());
                    pieces += 1;
                }
                Event::More(_) if fed == stream.len() => break,
                Event::More(_) => {
                    let n = step.min(stream.len() - fed);
                    input.extend_from_slice(&stream[fed..fed + n]);
                    fed += n;
                }
                Event::Message { tag, len } => {
                    assert_eq!(input[0], tag);
                    input.advance(len);
                    tags.push(tag);
                }
            }
        }
        assert!(input.is_empty(), "bytes left: {input:?}");
        out.extend_from_slice(&piece);
        (out, tags, w.messages, pieces)
    }

    #[test]
    fn payloads_are_the_same_however_the_reads_and_pieces_fall() {
        // Rows of 0 to 700 bytes (wider than some reads and pieces), a
        // notice in the middle, CopyDone at the end.
        let mut stream = Vec::new();
        let mut want = Vec::new();
        for i in 0..60u32 {
            let row: Vec<u8> = (0..(i * 37 % 701)).map(|j| (i + j) as u8).collect();
            stream.extend(message(b'd', &row));
            want.extend_from_slice(&row);
            if i == 30 {
                stream.extend(message(b'N', b"SNOTICE\0\0"));
            }
        }
        stream.extend(message(b'c', b""));
        for step in [1, 2, 4, 5, 6, 7, 64, 699, 4096, stream.len()] {
            for piece in [1, 3, 5, 512, 1 << 20] {
                let (out, tags, messages, _) = run(&stream, step, piece);
                assert!(out == want, "step {step}, piece {piece}");
                assert_eq!(tags, b"Nc", "step {step}, piece {piece}");
                assert_eq!(messages, 60);
            }
        }
    }

    #[test]
    fn outputs_are_filled_to_exactly_the_size_asked() {
        let row = vec![7u8; 1000];
        let stream: Vec<u8> = (0..10).flat_map(|_| message(b'd', &row)).collect();
        let (out, _, _, pieces) = run(&stream, 333, 256);
        assert_eq!(out.len(), 10_000);
        assert_eq!(pieces, 10_000 / 256);
    }

    #[test]
    fn copy_data_outside_the_copy_is_handed_back() {
        let mut w = Walker::default();
        let mut input = BytesMut::from(&message(b'd', b"row")[..]);
        let mut out = BytesMut::new();
        let e = w.walk(&mut input, &mut out, 100).unwrap();
        assert_eq!(e, Event::Message { tag: b'd', len: 8 });
        assert!(out.is_empty());
    }

    #[test]
    fn lengths_out_of_step_are_refused() {
        let mut w = Walker {
            copying: true,
            ..Walker::default()
        };
        let mut out = BytesMut::new();
        let mut input = BytesMut::from(&[b'd', 0, 0, 0, 3][..]);
        assert!(w.walk(&mut input, &mut out, 100).is_err());
        let mut input = BytesMut::from(&[b'E', 0x7f, 0xff, 0xff, 0xff][..]);
        assert!(w.walk(&mut input, &mut out, 100).is_err());
        // An incomplete message says how much it needs.
        let mut input = BytesMut::from(&message(b'E', b"xyz")[..7]);
        assert_eq!(w.walk(&mut input, &mut out, 100), Ok(Event::More(8)));
    }
}
