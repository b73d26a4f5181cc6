//! One `COPY ... TO STDOUT` received into pieces of about
//! [`PIECE_BYTES`].
//!
//! The server sends one CopyData message per row (the binary header rides
//! in front of the first row, the binary trailer is a message of its own),
//! so messages are gathered into larger pieces before they cross a
//! channel: a piece, not a row, is the unit of hand-over.
//!
//! For a range of a parallel binary export, the range's own file header
//! and trailer are stripped here ([`Framing::BinaryBody`]); the output
//! gets one header and one trailer around all ranges.

use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::Client;

use crate::error::{Error, Result};
use crate::progress::Progress;

/// Target size of a piece. Large enough that channel and write overhead
/// vanish next to the bytes (a row is often under 100 bytes), small enough
/// that the pieces in flight stay a few MiB.
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

/// Runs `job.sql` (a `COPY ... TO STDOUT`) on `client` and sends its
/// bytes to `tx` in pieces. Ends with [`Piece::Done`] or
/// [`Piece::Failed`].
pub async fn receive(
    client: &Client,
    job: &Job,
    tx: &mpsc::Sender<Piece>,
    progress: &Progress,
) -> std::result::Result<Received, Abandoned> {
    match stream(client, job, tx, progress).await {
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
    job: &Job,
    tx: &mpsc::Sender<Piece>,
    progress: &Progress,
) -> Result<std::result::Result<Received, Abandoned>> {
    let (framing, extra_messages) = (job.framing, job.extra_messages);
    let copy = client.copy_out(job.sql.as_str()).await?;
    futures_util::pin_mut!(copy);
    let mut buf = BytesMut::with_capacity(PIECE_BYTES);
    let mut got = Received::default();
    let mut messages = 0u64;
    let mut unreported = 0u64;
    let mut header_pending = framing == Framing::BinaryBody;
    while let Some(message) = copy.next().await {
        let message = message?;
        messages += 1;
        unreported += 1;
        if !buf.is_empty() && buf.len() + message.len() > PIECE_BYTES {
            if header_pending {
                strip_header(&mut buf, &mut header_pending)?;
            }
            got.bytes += buf.len() as u64;
            Progress::add(&progress.read_bytes, buf.len() as u64);
            Progress::add(&progress.rows_read, unreported);
            unreported = 0;
            if tx.send(Piece::Data(buf.split().freeze())).await.is_err() {
                return Ok(Err(Abandoned));
            }
        }
        buf.extend_from_slice(&message);
    }
    if header_pending {
        strip_header(&mut buf, &mut header_pending)?;
    }
    if framing == Framing::BinaryBody {
        // The last message is the trailer, a field count of -1.
        let trailer = copyfmt::binary::TRAILER;
        if !buf.ends_with(trailer) {
            return Err(Error::bug("binary COPY data did not end with its trailer"));
        }
        buf.truncate(buf.len() - trailer.len());
    }
    got.rows = messages.saturating_sub(extra_messages);
    got.bytes += buf.len() as u64;
    Progress::add(&progress.read_bytes, buf.len() as u64);
    Progress::add(
        &progress.rows_read,
        unreported.saturating_sub(extra_messages),
    );
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
