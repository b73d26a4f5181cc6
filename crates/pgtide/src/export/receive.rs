//! One `COPY ... TO STDOUT` received into pieces of [`PIECE_BYTES`].
//!
//! The server sends one CopyData message per row (the binary header rides
//! in front of the first row, the binary trailer is a message of its own).
//! [`crate::copyout`] reads them off the socket many per read and puts
//! their bytes straight into a piece; a piece, not a row, is the unit of
//! hand-over to the writer. A piece ends where [`PIECE_BYTES`] ends, even
//! inside a row: the pieces are only ever concatenated.
//!
//! For a range of a parallel binary export, the range's own file header
//! and trailer are stripped here ([`Framing::BinaryBody`]); the output
//! gets one header and one trailer around all ranges.
//!
//! A range is complete only when the server ended its COPY and the rows
//! it counted (`COPY n`) are the rows received: anything else is an
//! error, never a short output.

use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio_postgres::Client;

use crate::conn::Wire;
use crate::copyout::CopyOut;
use crate::error::{Error, Result};
use crate::progress::Progress;

/// Size of a piece. Large enough that channel and write overhead vanish
/// next to the bytes (a row is often under 100 bytes), small enough that
/// the pieces in flight stay a few MiB.
pub const PIECE_BYTES: usize = 256 * 1024;

/// What to do with the stream's framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Pass every byte through (one COPY is the whole output).
    Whole,
    /// Binary format, one range of many: drop the file header and the
    /// trailer.
    BinaryBody,
}

/// One COPY statement of the export and how to treat its stream.
#[derive(Debug, Clone)]
pub struct Job {
    /// `COPY (...) TO STDOUT ...`.
    pub sql: String,
    /// Pass through, or strip the binary framing.
    pub framing: Framing,
    /// Messages that are not rows (a header line, a binary trailer).
    pub extra_messages: u64,
}

/// What a statement sent: messages that were rows, and their bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Received {
    /// Rows (CopyData messages that carry a row).
    pub rows: u64,
    /// Bytes passed on.
    pub bytes: u64,
}

/// A piece of one range, or how the range ended.
#[derive(Debug)]
pub enum Piece {
    /// Bytes, in order.
    Data(Bytes),
    /// The range is complete.
    Done(Received),
    /// The range failed.
    Failed(Error),
}

/// The receiver went away (the export is stopping).
#[derive(Debug)]
pub struct Abandoned;

/// Runs `job.sql` (a `COPY ... TO STDOUT`) on `client`'s connection
/// (through its `wire`) and sends its bytes to `tx` in pieces. Ends with
/// [`Piece::Done`] or [`Piece::Failed`].
pub async fn receive(
    client: &Client,
    wire: &Wire,
    job: &Job,
    tx: &mpsc::Sender<Piece>,
    progress: &Progress,
) -> std::result::Result<Received, Abandoned> {
    match stream(client, wire, job, tx, progress).await {
        Ok(Ok(r)) => {
            tx.send(Piece::Done(r)).await.map_err(|_| Abandoned)?;
            Ok(r)
        }
        Ok(Err(Abandoned)) => Err(Abandoned),
        Err(e) => {
            let _ = tx.send(Piece::Failed(e)).await;
            Err(Abandoned)
        }
    }
}

async fn stream(
    client: &Client,
    wire: &Wire,
    job: &Job,
    tx: &mpsc::Sender<Piece>,
    progress: &Progress,
) -> Result<std::result::Result<Received, Abandoned>> {
    let (framing, extra) = (job.framing, job.extra_messages);
    let mut copy = CopyOut::start(client, wire, &job.sql).await?;
    // A binary range's trailer may be cut by a piece's end: its bytes are
    // held back until the COPY has ended.
    let keep = match framing {
        Framing::BinaryBody => copyfmt::binary::TRAILER.len(),
        Framing::Whole => 0,
    };
    let mut buf = BytesMut::with_capacity(PIECE_BYTES);
    let mut got = Received::default();
    let mut reported = 0u64;
    let mut header_pending = framing == Framing::BinaryBody;
    loop {
        let more = copy.fill(&mut buf, PIECE_BYTES).await?;
        // The first piece is whole (or the whole COPY): the header is in.
        if header_pending {
            strip_header(&mut buf, &mut header_pending)?;
        }
        if !more {
            break;
        }
        let piece = buf.split_to(buf.len().saturating_sub(keep)).freeze();
        buf.reserve(PIECE_BYTES);
        // The rows begun so far; the last may continue in the next piece.
        let rows = copy.messages().saturating_sub(extra);
        got.bytes += piece.len() as u64;
        Progress::add(&progress.read_bytes, piece.len() as u64);
        Progress::add(&progress.rows_read, rows.saturating_sub(reported));
        reported = reported.max(rows);
        if tx.send(Piece::Data(piece)).await.is_err() {
            return Ok(Err(Abandoned));
        }
    }
    if framing == Framing::BinaryBody {
        // The last message is the trailer, a field count of -1.
        let trailer = copyfmt::binary::TRAILER;
        if !buf.ends_with(trailer) {
            return Err(Error::bug("binary COPY data did not end with its trailer"));
        }
        buf.truncate(buf.len() - trailer.len());
    }
    let messages = copy.messages();
    got.rows = messages.saturating_sub(extra);
    if copy.rows() != Some(got.rows) || messages < extra {
        return Err(Error::bug(format!(
            "the server counted {} rows but {messages} COPY messages were received \
             ({extra} of them not rows); the export was stopped",
            copy.rows().map_or("no".to_owned(), |n| n.to_string()),
        )));
    }
    got.bytes += buf.len() as u64;
    Progress::add(&progress.read_bytes, buf.len() as u64);
    Progress::add(&progress.rows_read, got.rows.saturating_sub(reported));
    if !buf.is_empty() && tx.send(Piece::Data(buf.freeze())).await.is_err() {
        return Ok(Err(Abandoned));
    }
    Ok(Ok(got))
}

/// Drops the binary file header (signature, flags, extension) from the
/// front of `buf`.
fn strip_header(buf: &mut BytesMut, pending: &mut bool) -> Result<()> {
    let sig = copyfmt::binary::SIGNATURE;
    let fixed = sig.len() + 8;
    if buf.len() < fixed || &buf[..sig.len()] != sig {
        return Err(Error::bug("binary COPY data did not start with its header"));
    }
    let ext = u32::from_be_bytes([buf[15], buf[16], buf[17], buf[18]]) as usize;
    if buf.len() < fixed + ext {
        return Err(Error::bug("binary COPY header extension is incomplete"));
    }
    buf.advance(fixed + ext);
    *pending = false;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_the_header_and_its_extension() {
        let mut v = Vec::new();
        copyfmt::binary::write_header(&mut v);
        v.extend_from_slice(b"row");
        let mut buf = BytesMut::from(&v[..]);
        let mut pending = true;
        strip_header(&mut buf, &mut pending).unwrap();
        assert_eq!(&buf[..], b"row");
        assert!(!pending);

        let mut v = copyfmt::binary::SIGNATURE.to_vec();
        v.extend_from_slice(&0u32.to_be_bytes());
        v.extend_from_slice(&2u32.to_be_bytes());
        v.extend_from_slice(b"xyrow");
        let mut buf = BytesMut::from(&v[..]);
        strip_header(&mut buf, &mut true.clone()).unwrap();
        assert_eq!(&buf[..], b"row");

        let mut buf = BytesMut::from(&b"not a header at all"[..]);
        assert!(strip_header(&mut buf, &mut true.clone()).is_err());
    }
}
