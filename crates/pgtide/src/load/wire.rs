//! `--method pipeline` on the wire: one prepared INSERT, Bind/Execute for
//! many rows and **one Sync per window**.
//!
//! tokio-postgres sends Sync after every statement, so each pipelined row
//! costs the server a ReadyForQuery and a flush (about 21 µs a row on
//! loopback, more than the INSERT itself). Here the rows of a batch go in
//! windows of at most [`WINDOW_ROWS`] rows or [`WINDOW_BYTES`] of
//! parameters (whichever comes first; one row always goes, however
//! wide), written with the `postgres-protocol` codecs in one buffer and
//! one write, closed by a single Sync. The next window is built and
//! written while the server answers the one before (two windows in
//! flight, read and written at once, so neither side waits on the other's
//! socket): the server never idles between windows. Memory is one window
//! of messages.
//!
//! The connection is the loader's own (`conn::Target::connect_wire`):
//! tokio-postgres opened it (TLS, authentication) and runs every other
//! statement (BEGIN, COMMIT, savepoints, COPY); the [`Wire`] lends this
//! module its stream between those statements (see `conn::tap`). This is
//! the one seam: [`rows`] loads a batch as `insert::rows` does, with the
//! same result and the same [`BatchError`].
//!
//! Errors. After an ErrorResponse the server discards every message up to
//! the window's Sync, so the rows after the failing one in that window are
//! not run, and the window written behind it is refused whole (the
//! transaction, opened by `BEGIN`, is aborted; its answers are read and
//! dropped). None of them is re-sent here: the batch fails with `record` = the index of the failing row in
//! the batch (the server answers each row's Bind and Execute in order, so
//! the row is known exactly), and isolation (`reject::isolate`) re-sends
//! the rows after it in a new transaction, as for every method. The
//! server's ErrorResponse is handed to tokio-postgres to parse
//! (`Wire::replay`), so the error is a genuine `tokio_postgres::Error`
//! with its SQLSTATE and context. A broken socket or a message out of
//! place closes the client: the error is then tokio-postgres' "connection
//! closed", which the worker answers with a new connection.
//!
//! A record the splitter refuses goes by its own text COPY (through the
//! client, so the server writes its real error), between two windows.

use bytes::{BufMut, BytesMut};
use copyfmt::fields::{split_record, Fields};
use copyfmt::scan;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_postgres::Client;

use std::collections::VecDeque;

use super::insert::{copy_one, statement_sql};
use super::spec::LoaderSpec;
use super::wire_answers::{Answered, Answering, Failed, Sent};
use crate::batch::{Batch, BatchError};
use crate::conn::Wire;
use crate::copyopts::CopyFormat;

/// Rows per window (per Sync).
pub const WINDOW_ROWS: usize = 256;

/// Parameter bytes per window: keeps 1600-column rows to about a
/// megabyte of messages in memory.
pub const WINDOW_BYTES: usize = 1 << 20;

/// The prepared statement's name on a loader's connection (tokio-postgres
/// names its own `s0`, `s1`, ...).
const STATEMENT: &str = "pgtide_pipeline";

/// Per-connection state: whether [`STATEMENT`] is prepared.
#[derive(Default)]
pub struct Prepared(bool);

/// Loads the batch's records, one INSERT each, windows of
/// [`WINDOW_ROWS`]/[`WINDOW_BYTES`] under one Sync; the rows inserted
/// (with `--sql`, the records run).
pub(super) async fn rows(
    client: &Client,
    wire: &Wire,
    spec: &LoaderSpec,
    prepared: &mut Prepared,
    batch: &Batch,
) -> Result<u64, BatchError> {
    let setup = &spec.setup;
    let user = setup.sql.is_some();
    let format: i16 = if setup.format == CopyFormat::Binary {
        1
    } else {
        0
    };
    let sql = statement_sql(setup, 1);
    let data = &batch.data;
    let mut records = scan::records(&spec.dialect, data).enumerate().peekable();
    let mut fields = Fields::new();
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut total = 0u64;
    while records.peek().is_some() {
        let mut raw = wire.raw();
        let (mut rd, mut wr) = tokio::io::split(&mut raw);
        // Windows until the batch ends or a record needs its own COPY.
        // Each is written while the one before it is answered, so the
        // server always has the next window at hand; and whenever a window
        // is being written its answers are read too, so that neither side
        // can wait on the other's full socket (a `RETURNING` or a NOTICE
        // per row answers a window with as much as it carried).
        let mut bad = None;
        let mut queue: VecDeque<Answering> = VecDeque::new();
        let mut failed: Option<Failed> = None;
        let failure = 'windows: loop {
            out.clear();
            let mut next = None;
            if failed.is_none() && bad.is_none() && queue.len() < 2 && records.peek().is_some() {
                // The Parse goes once, in the first window.
                let parse = !prepared.0 && !queue.iter().any(Answering::parses);
                let first = records.peek().map_or(0, |(i, _)| *i as u64);
                let mut fill = || -> std::io::Result<usize> {
                    if parse {
                        frontend::parse(STATEMENT, &sql, None, &mut out)?;
                    }
                    let (mut n, mut bytes) = (0usize, 0usize);
                    while n < WINDOW_ROWS && bytes < WINDOW_BYTES {
                        let Some((i, span)) = records.peek() else {
                            break;
                        };
                        let record = &data[span.start..span.end];
                        let ok = split_record(&spec.dialect, &setup.nulls, record, &mut fields)
                            .is_ok()
                            && fields.len() == setup.columns.len();
                        if !ok {
                            bad = Some((*i as u64, data.slice(span.start..span.end)));
                            records.next();
                            break;
                        }
                        bytes += fields
                            .iter()
                            .map(|f| 4 + f.map_or(0, <[u8]>::len))
                            .sum::<usize>();
                        bind(&mut out, format, &fields)?;
                        frontend::execute("", 0, &mut out)?;
                        n += 1;
                        records.next();
                    }
                    Ok(n)
                };
                match fill() {
                    Ok(0) => {}
                    Ok(n) => {
                        frontend::sync(&mut out);
                        next = Some(Sent { parse, first, n });
                    }
                    // Unreachable for a table's columns (a value over 2
                    // GiB, more than 65,535 parameters): the server would
                    // refuse it too; the batch fails and the connection
                    // is dropped.
                    Err(_) => break Some(Failed::Broken),
                }
            }
            if next.is_none() && queue.is_empty() {
                break failed;
            }
            // Until the window written now (if any) is the only one left
            // unanswered; with none to write, until every answer is read.
            let keep = usize::from(next.is_some());
            let mut writing = next.is_some();
            if let Some(sent) = next {
                queue.push_back(Answering::new(sent, failed.is_some()));
            }
            let write = async {
                wr.write_all(&out).await?;
                wr.flush().await
            };
            tokio::pin!(write);
            while writing || queue.len() > keep {
                tokio::select! {
                    w = &mut write, if writing => {
                        writing = false;
                        if w.is_err() {
                            break 'windows Some(Failed::Broken);
                        }
                    }
                    m = next_message(&mut rd, &mut input) => {
                        let Some((message, frame)) = m else {
                            break 'windows Some(Failed::Broken);
                        };
                        // An answer with no window to answer is out of place.
                        let Some(front) = queue.front_mut() else {
                            break 'windows Some(Failed::Broken);
                        };
                        let Some(result) = front.feed(message, frame, user) else {
                            continue;
                        };
                        queue.pop_front();
                        match result {
                            Answered::Rows(rows) => {
                                total += rows;
                                prepared.0 = true;
                            }
                            Answered::Failed { parsed, failed: f } => {
                                prepared.0 |= parsed;
                                if matches!(f, Failed::Broken) {
                                    break 'windows Some(f);
                                }
                                // The windows behind it run in the aborted
                                // transaction: their answers are read and
                                // dropped before the connection goes back.
                                queue.iter_mut().for_each(Answering::behind);
                                failed.get_or_insert(f);
                            }
                            // Refused whole, as it must be (the statements
                            // of a window are refused once the one before
                            // failed): nothing to count.
                            Answered::Refused => {}
                        }
                    }
                }
            }
        };
        drop((rd, wr));
        drop(raw);
        if let Some(failed) = failure {
            return Err(deliver(client, wire, failed).await);
        }
        if let Some((i, record)) = bad {
            total += copy_one(client, spec, record)
                .await
                .map_err(|e| BatchError::at(i, e))?;
            // `copy_in` returns at CommandComplete: its ReadyForQuery may
            // still be on the socket, owed to tokio-postgres. A request
            // that completes proves it was read before the stream is taken
            // again (a raw session that ate it would hang the client).
            client.batch_execute("").await.map_err(BatchError::plain)?;
        }
    }
    Ok(total)
}

/// One Bind of the unnamed portal to [`STATEMENT`], every parameter in
/// `format`, straight from the split fields.
fn bind(out: &mut BytesMut, format: i16, fields: &Fields) -> std::io::Result<()> {
    let r = frontend::bind(
        "",
        STATEMENT,
        [format],
        fields.iter(),
        |f, buf| match f {
            None => Ok(IsNull::Yes),
            Some(v) => {
                buf.put_slice(v);
                Ok(IsNull::No)
            }
        },
        None::<i16>,
        out,
    );
    match r {
        Ok(()) => Ok(()),
        Err(frontend::BindError::Serialization(e)) => Err(e),
        Err(frontend::BindError::Conversion(e)) => Err(std::io::Error::other(e)),
    }
}

/// Turns a failed window into the batch's error, through the client: a
/// server error is replayed to tokio-postgres (which parses it into a
/// `DbError`); anything else closes the client, whose next request then
/// fails as a closed connection.
pub(super) async fn deliver(client: &Client, wire: &Wire, failed: Failed) -> BatchError {
    match failed {
        Failed::Server { record, response } => {
            let error = wire.error(client, &response).await;
            BatchError {
                // A replay that did not fail closed the connection: no row
                // is to blame.
                record: record.filter(|_| !error.is_closed()),
                commit_unknown: false,
                error,
            }
        }
        Failed::Broken => closed(client, wire).await,
    }
}

/// Ends the connection (it may be out of step) and returns the error the
/// client's next request gets.
pub(super) async fn closed(client: &Client, wire: &Wire) -> BatchError {
    BatchError::plain(wire.close(client).await)
}

/// The next backend message from `rd`, read into `input` as needed, with
/// its frame kept whole when it is an ErrorResponse (to be replayed, see
/// [`deliver`]). `None`: the socket broke or the message is malformed.
pub(super) async fn next_message<R: AsyncRead + Unpin>(
    rd: &mut R,
    input: &mut BytesMut,
) -> Option<(Message, Option<BytesMut>)> {
    loop {
        if input.len() >= 5 {
            let len = u32::from_be_bytes([input[1], input[2], input[3], input[4]]) as usize;
            if input.len() > len {
                let mut frame = input.split_to(len + 1);
                let whole = (frame[0] == b'E').then(|| frame.clone());
                return match Message::parse(&mut frame) {
                    Ok(Some(m)) => Some((m, whole)),
                    _ => None,
                };
            }
        }
        input.reserve(8192);
        match rd.read_buf(input).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}
