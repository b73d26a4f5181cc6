//! Isolation attempts by COPY, many in **one round trip** (issue 8 D).
//!
//! Isolating a failed chunk's bad rows (`reject::isolate`) sends many
//! small COPYs in one transaction, each under a savepoint. Through
//! tokio-postgres each costs five round trips: `SAVEPOINT`, the COPY's
//! Parse/Describe, its Bind/Execute up to CopyInResponse, the data up to
//! CommandComplete, then `RELEASE` or `ROLLBACK TO`. At 1% bad rows that
//! was most of a dirty load's time (docs/benchmarks.md, "rejects").
//!
//! Here a [`Step`] is one simple Query (`SAVEPOINT a; COPY ... FROM STDIN;
//! RELEASE SAVEPOINT a`), written together with its CopyData and CopyDone
//! without waiting for CopyInResponse, and a script of steps is written at
//! once while the answers are read (so a server that talks back early
//! never blocks us). The protocol allows it: after an error in a simple
//! Query the server skips the rest of that Query and drops every CopyData,
//! CopyDone and CopyFail it then reads. And the savepoints make a script
//! safe to send blind: after a failed COPY the transaction is aborted, so
//! every later step fails at its first statement and changes nothing,
//! until the caller rolls back to the failed step's savepoint
//! (`loader/attempts.rs` does, in its next round trip).
//!
//! The connection is the loader's own stream, lent by [`Wire`] as for
//! `pipeline` (`load/wire.rs`); each ErrorResponse is replayed to
//! tokio-postgres so that it becomes a genuine `tokio_postgres::Error`
//! with its context (`COPY t, line N`). A broken socket or a message out
//! of place kills the connection: the caller then sees a broken
//! connection, which isolation answers by starting over on a new one.

use bytes::{BufMut, Bytes, BytesMut};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use tokio::io::AsyncWriteExt;
use tokio_postgres::Client;

use super::copy::Framing;
use super::wire::{closed, deliver, next_message};
use super::wire_answers::Failed;
use crate::batch::BatchError;
use crate::conn::Wire;

/// Bytes gathered before a write.
const WRITE_BYTES: usize = 256 * 1024;

/// One simple Query of a script.
pub(super) struct Step<'a> {
    /// Its statements.
    pub sql: String,
    /// Which statement (0-based) is the COPY whose data is `data`.
    pub copy: Option<(usize, &'a Bytes)>,
}

/// The server's answer to one [`Step`].
pub(super) struct Answer {
    /// Statements that completed.
    pub completed: usize,
    /// The COPY's row count, when it completed.
    pub rows: Option<u64>,
    /// The first error (the rest of the Query was skipped), whole.
    pub error: Option<BytesMut>,
}

/// Sends `steps` at once and reads their answers. `Err`: the connection is
/// out of step or broken, and is killed.
pub(super) async fn script(
    client: &Client,
    wire: &Wire,
    framing: &Framing,
    message_bytes: usize,
    steps: &[Step<'_>],
) -> Result<Vec<Answer>, BatchError> {
    let result = {
        let mut raw = wire.raw();
        let (mut rd, mut wr) = tokio::io::split(&mut raw);
        let write = async {
            let mut out = BytesMut::with_capacity(WRITE_BYTES + message_bytes + 64);
            for step in steps {
                frontend::query(&step.sql, &mut out).map_err(|_| Broken)?;
                if let Some((_, data)) = step.copy {
                    let mut pieces: Vec<&[u8]> = Vec::new();
                    if let Some(prefix) = &framing.prefix {
                        pieces.push(prefix);
                    }
                    pieces.extend(data.chunks(message_bytes.max(1)));
                    if framing.binary_trailer {
                        pieces.push(copyfmt::binary::TRAILER);
                    }
                    for piece in pieces {
                        out.put_u8(b'd');
                        out.put_u32(piece.len() as u32 + 4);
                        out.put_slice(piece);
                        if out.len() >= WRITE_BYTES {
                            wr.write_all(&out).await.map_err(|_| Broken)?;
                            out.clear();
                        }
                    }
                    frontend::copy_done(&mut out);
                }
            }
            wr.write_all(&out).await.map_err(|_| Broken)?;
            wr.flush().await.map_err(|_| Broken)
        };
        let read = answers(&mut rd, steps);
        tokio::try_join!(write, read).map(|((), a)| a)
    };
    match result {
        Ok(answers) => Ok(answers),
        Err(Broken) => Err(closed(client, wire).await),
    }
}

/// Turns an ErrorResponse of a script into the `tokio_postgres::Error` it
/// stands for (the transaction is left as the server left it).
pub(super) async fn error(client: &Client, wire: &Wire, response: BytesMut) -> BatchError {
    deliver(
        client,
        wire,
        Failed::Server {
            record: None,
            response,
        },
    )
    .await
}

/// Ends a connection found out of step; the error its client now gets.
pub(super) async fn kill(client: &Client, wire: &Wire) -> BatchError {
    closed(client, wire).await
}

/// The socket broke or the server said something out of place.
struct Broken;

/// Reads one [`Answer`] per step.
async fn answers<R: tokio::io::AsyncRead + Unpin>(
    rd: &mut R,
    steps: &[Step<'_>],
) -> Result<Vec<Answer>, Broken> {
    let mut input = BytesMut::with_capacity(8192);
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        let copy = step.copy.map(|(c, _)| c);
        let mut a = Answer {
            completed: 0,
            rows: None,
            error: None,
        };
        loop {
            let (message, frame) = next_message(rd, &mut input).await.ok_or(Broken)?;
            let fine = a.error.is_none();
            match message {
                // Every step's first answer is a CommandComplete or an
                // error: a ReadyForQuery first would be one a client
                // request left unread (and tokio-postgres still awaits):
                // the connection is out of step, and killed.
                Message::ReadyForQuery(_) if fine && a.completed == 0 => return Err(Broken),
                Message::ReadyForQuery(_) => break,
                Message::CopyInResponse(_) if fine && copy == Some(a.completed) => {}
                Message::CommandComplete(body) if fine => {
                    if copy == Some(a.completed) {
                        let tag = body.tag().map_err(|_| Broken)?;
                        let n = tag.strip_prefix("COPY ").and_then(|n| n.parse().ok());
                        a.rows = Some(n.ok_or(Broken)?);
                    }
                    a.completed += 1;
                }
                Message::ErrorResponse(_) if fine => a.error = frame,
                Message::NoticeResponse(_)
                | Message::ParameterStatus(_)
                | Message::NotificationResponse(_) => {}
                _ => return Err(Broken),
            }
        }
        out.push(a);
    }
    Ok(out)
}
