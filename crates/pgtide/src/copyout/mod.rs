//! One `COPY ... TO STDOUT` read straight off the connection's socket.
//!
//! tokio-postgres' `copy_out` hands over every CopyData message (one per
//! row) as its own stream item: a `Bytes`, a channel hop from the
//! connection task, a wake-up. On 10M one-int rows that per-row cost made
//! `pgtide export` 1.4-1.8x psql `\copy` (docs/benchmarks.md). Here the
//! COPY is run on the connection's stream lent by its [`Wire`] (see
//! `conn::tap`, the seam `load::wire` uses too): the Query goes out with
//! the `postgres-protocol` codec, then reads of up to [`READ_BYTES`] are
//! walked in place ([`frames`]) and the payloads of all their CopyData
//! messages land in the caller's buffer, one copy per byte and nothing per
//! row. The bytes are exactly the server's COPY data, as psql writes them.
//!
//! ```text
//! Query("COPY ...")  ->  CopyOutResponse, CopyData*, CopyDone,
//!                        CommandComplete("COPY n"), ReadyForQuery
//!                   or  ErrorResponse (before or amid the data), ReadyForQuery
//! ```
//!
//! Never a silently short COPY. The COPY ends well only at CopyDone,
//! CommandComplete and ReadyForQuery, and the caller can check the
//! server's row count ([`CopyOut::rows`]) against what it received. An
//! ErrorResponse becomes the genuine `tokio_postgres::Error` (through
//! [`Wire::error`]: SQLSTATE, message, context); a socket that breaks or
//! ends, or a message out of place, closes the connection and is an
//! error. A [`CopyOut`] dropped before its end (the caller failed, or its
//! task was aborted) closes the connection too, since the server is
//! still sending: the client then reports "connection closed" instead of
//! reading someone else's rows.

pub mod frames;

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::Client;

use crate::conn::{Raw, Wire};
use crate::error::{Error, ErrorKind, Result};
use frames::{Event, Walker};

/// Bytes asked of the socket per read: many rows per read on a fast
/// server, and a fraction of the caller's piece.
pub const READ_BYTES: usize = 128 * 1024;

/// Where the COPY is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Query sent, no answer yet.
    Sent,
    /// CopyOutResponse received: rows are coming.
    Copying,
    /// CopyDone received: CommandComplete and ReadyForQuery to come.
    Closing,
    /// The server refused the COPY; its ReadyForQuery is to come.
    Failing,
    /// ReadyForQuery after CommandComplete: the stream is given back.
    Done,
    /// Failed and reported; the connection was given back or closed.
    Failed,
}

/// A running `COPY ... TO STDOUT` on a connection's raw stream.
pub struct CopyOut<'a> {
    client: &'a Client,
    wire: &'a Wire,
    raw: Option<Raw<'a>>,
    input: BytesMut,
    walker: Walker,
    state: State,
    /// The ErrorResponse, whole, while [`State::Failing`].
    error: Vec<u8>,
    /// The server's row count, from CommandComplete.
    rows: Option<u64>,
}

impl<'a> CopyOut<'a> {
    /// Sends `sql` (one `COPY ... TO STDOUT` statement) on `client`'s
    /// connection, through its `wire`, and waits for the server to start
    /// the COPY. The stream is the COPY's until it ends (or the connection
    /// is closed): `client` must not be used meanwhile.
    pub async fn start(client: &'a Client, wire: &'a Wire, sql: &str) -> Result<CopyOut<'a>> {
        let mut query = BytesMut::new();
        frontend::query(sql, &mut query).map_err(|e| {
            Error::config(format!("the COPY statement cannot be sent: {e}"))
                .with_hint("a query must not contain a NUL character")
        })?;
        // A sync point: every earlier request of the client is answered
        // once this one is, so the stream carries nothing but the COPY's
        // answer. Without it, a request the client's connection task sends
        // on its own (the Close of a dropped `Statement`) or an answer it
        // has not read yet (`prepare` returns before its ReadyForQuery)
        // would reach the raw session, and the client would then wait for
        // an answer that was read here. One round trip per COPY.
        client.batch_execute("").await?;
        let mut copy = CopyOut {
            client,
            wire,
            raw: Some(wire.raw()),
            input: BytesMut::with_capacity(READ_BYTES),
            walker: Walker::default(),
            state: State::Sent,
            error: Vec::new(),
            rows: None,
        };
        let sent = match copy.raw.as_mut() {
            Some(raw) => match raw.write_all(&query).await {
                Ok(()) => raw.flush().await,
                Err(e) => Err(e),
            },
            None => Ok(()),
        };
        if let Err(e) = sent {
            return Err(copy.ended(&format!("sending the COPY failed: {e}")).await);
        }
        // Up to CopyOutResponse (or the error): no data asked for yet.
        let mut none = BytesMut::new();
        while matches!(copy.state, State::Sent | State::Failing) {
            copy.fill(&mut none, 0).await?;
        }
        Ok(copy)
    }

    /// Appends COPY data to `out` until it holds `want` bytes (never
    /// more) or the COPY ends. `Ok(true)`: there may be more;
    /// `Ok(false)`: the COPY ended well and every byte is in `out`.
    pub async fn fill(&mut self, out: &mut BytesMut, want: usize) -> Result<bool> {
        loop {
            if matches!(self.state, State::Done) {
                return Ok(false);
            }
            if matches!(self.state, State::Failed) {
                return Err(Error::bug("COPY data asked for after the COPY failed"));
            }
            if self.state == State::Copying && out.len() >= want {
                return Ok(true);
            }
            let event = match self.walker.walk(&mut self.input, out, want) {
                Ok(e) => e,
                Err(e) => return Err(self.broken(e.0).await),
            };
            match event {
                Event::Full => return Ok(true),
                Event::More(need) => self.read(need).await?,
                Event::Message { tag, len } => {
                    let frame = self.input.split_to(len);
                    self.message(tag, &frame).await?;
                }
            }
        }
    }

    /// CopyData messages received so far: rows, plus a CSV/text header
    /// line and the binary trailer, each a message of its own.
    pub fn messages(&self) -> u64 {
        self.walker.messages
    }

    /// The rows the server says it sent (CommandComplete's `COPY n`),
    /// once the COPY has ended.
    pub fn rows(&self) -> Option<u64> {
        self.rows
    }

    /// Reads once; `need`: the input must then hold a message that long.
    async fn read(&mut self, need: usize) -> Result<()> {
        self.input.reserve(READ_BYTES.max(need));
        let Some(raw) = self.raw.as_mut() else {
            return Err(Error::bug("COPY read without its stream"));
        };
        match raw.read_buf(&mut self.input).await {
            Ok(0) => Err(self.ended("the server closed the connection").await),
            Ok(_) => Ok(()),
            Err(e) => Err(self.ended(&e.to_string()).await),
        }
    }

    /// One whole message other than a row's CopyData.
    async fn message(&mut self, tag: u8, frame: &[u8]) -> Result<()> {
        match (tag, self.state) {
            // Asynchronous messages may come at any time.
            (b'N' | b'S' | b'A', _) => Ok(()),
            (b'H', State::Sent) => {
                self.state = State::Copying;
                self.walker.copying = true;
                Ok(())
            }
            (b'E', State::Sent | State::Copying | State::Closing) => {
                self.walker.copying = false;
                self.error = frame.to_vec();
                self.state = State::Failing;
                Ok(())
            }
            // A second error (a FATAL after it): the first says why.
            (b'E', State::Failing) => Ok(()),
            (b'Z', State::Failing) => Err(self.refused(false).await),
            (b'c', State::Copying) => {
                self.walker.copying = false;
                self.state = State::Closing;
                Ok(())
            }
            (b'C', State::Closing) if self.rows.is_none() => {
                self.rows = Some(copy_count(frame).ok_or_else(|| {
                    Error::bug(format!(
                        "the server ended the COPY with an unexpected tag: {:?}",
                        String::from_utf8_lossy(frame.get(5..).unwrap_or_default())
                    ))
                })?);
                Ok(())
            }
            (b'Z', State::Closing) if self.rows.is_some() => {
                // The stream goes back to tokio-postgres, in step.
                self.raw = None;
                self.state = State::Done;
                Ok(())
            }
            _ => Err(self
                .broken(format!(
                    "the server sent a message of type {:?} where the COPY protocol does not \
                     allow one",
                    tag as char
                ))
                .await),
        }
    }

    /// The socket ended or failed (`why`): the server's own error if it
    /// sent one first (a terminated session: 57P01), else a lost
    /// connection. Either way the connection is closed.
    async fn ended(&mut self, why: &str) -> Error {
        if !self.error.is_empty() {
            return self.refused(true).await;
        }
        self.raw = None;
        self.state = State::Failed;
        self.wire.kill();
        Error::new(
            ErrorKind::ConnectionLost,
            format!("connection to the server was lost during COPY TO STDOUT: {why}"),
        )
        .with_hint("check that the server is up and reachable, then retry")
    }

    /// The server's ErrorResponse as the client's error; `dead`: the
    /// socket has ended, so the connection is closed after.
    async fn refused(&mut self, dead: bool) -> Error {
        let response = std::mem::take(&mut self.error);
        // Replayed while the stream is still ours: tokio-postgres reads
        // the error before anything the socket holds (its end, when the
        // session was terminated).
        let e = self.wire.error(self.client, &response).await;
        self.raw = None;
        self.state = State::Failed;
        if dead {
            self.wire.kill();
        }
        e.into()
    }

    /// The stream is out of step (`why`): the connection is closed, and
    /// the error says so.
    async fn broken(&mut self, why: String) -> Error {
        self.raw = None;
        self.state = State::Failed;
        self.wire.kill();
        Error::bug(format!(
            "COPY TO STDOUT went out of step with the server ({why}); the connection was closed"
        ))
    }
}

impl Drop for CopyOut<'_> {
    /// A COPY left before its end: the server is still sending rows, so
    /// the connection cannot be given back; close it.
    fn drop(&mut self) {
        if !matches!(self.state, State::Done | State::Failed) {
            self.wire.kill();
        }
    }
}

/// `n` of a CommandComplete whose tag is `COPY n`.
fn copy_count(frame: &[u8]) -> Option<u64> {
    let body = frame.get(5..)?;
    let tag = std::str::from_utf8(body.strip_suffix(b"\0")?).ok()?;
    tag.strip_prefix("COPY ")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_count_is_read_from_copy_tags_only() {
        let frame = |tag: &str| {
            let mut f = vec![b'C'];
            f.extend_from_slice(&(tag.len() as u32 + 5).to_be_bytes());
            f.extend_from_slice(tag.as_bytes());
            f.push(0);
            f
        };
        assert_eq!(copy_count(&frame("COPY 100000")), Some(100_000));
        assert_eq!(copy_count(&frame("COPY 0")), Some(0));
        assert_eq!(copy_count(&frame("SELECT 3")), None);
        assert_eq!(copy_count(&frame("COPY x")), None);
        assert_eq!(copy_count(&frame("COPY 1")[..8]), None);
    }
}
