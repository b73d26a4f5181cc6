//! One job of a copy: a block range (or a whole table) read from the
//! source with `COPY ... TO STDOUT` and written to the target with `COPY
//! ... FROM STDIN`, in one target transaction.
//!
//! ```text
//! target: BEGIN [; TRUNCATE t]; SELECT txid_current()
//! target: COPY t (cols) FROM STDIN (FORMAT f [, FREEZE])
//! source: COPY (SELECT cols FROM t WHERE ctid in [a,b)) TO STDOUT (FORMAT f)
//!         read off the socket (crate::copyout), many CopyData messages
//!         per read, into MESSAGE_BYTES pieces -> target
//! source: its CommandComplete row count == CopyData messages received?
//! target: server row count == rows received? then COMMIT, else ROLLBACK
//! ```
//!
//! Nothing is decoded: the bytes the source sends are the bytes the
//! target reads (a binary range carries its own header and trailer, as
//! a binary COPY FROM expects). Memory: one piece and one socket read
//! per job, plus what tokio-postgres buffers per connection.
//!
//! A COMMIT without answer (the connection broke) is settled with
//! `txid_status` on a new connection, guarded against a crash that handed
//! the id out again (`crate::settle`), so a range is reported committed
//! only when it is.

use std::sync::Arc;

use bytes::BytesMut;
use futures_util::SinkExt;
use tokio_postgres::Client;

use crate::batch::{tx_start, TxStart, TX_START_SQL};
use crate::conn::{Target, Wire};
use crate::copyout::CopyOut;
use crate::error::{Error, ErrorKind, Result};
use crate::progress::Progress;
use crate::witness::Witness;

/// Bytes gathered from the source's per-row messages before they go to
/// the target as one CopyData message (as `load` sends them).
pub const MESSAGE_BYTES: usize = crate::load::copy::MESSAGE_BYTES;

/// One unit of work, committed on the target on its own.
#[derive(Debug, Clone)]
pub struct Job {
    /// Index of the table in the plan.
    pub table: usize,
    /// Index of the range within its table.
    pub index: usize,
    /// First block, and the end block (exclusive; `None` = to the end);
    /// `(0, None)` is the whole table.
    pub blocks: (u64, Option<u64>),
    /// Run first in the target transaction: `BEGIN` or `BEGIN; TRUNCATE t`.
    pub begin: String,
    /// `COPY (...) TO STDOUT ...` on the source.
    pub source_sql: String,
    /// `COPY t (...) FROM STDIN ...` on the target.
    pub target_sql: String,
    /// Messages that are not rows: the binary trailer.
    pub extra_messages: u64,
    /// The target's triggers may drop rows (fewer rows is then no bug).
    pub may_skip: bool,
}

/// A committed job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Done {
    /// Rows the target stored.
    pub rows: u64,
    /// Rows sent that the target's triggers dropped.
    pub skipped: u64,
    /// COPY bytes passed.
    pub bytes: u64,
}

/// Copies `job` from `source` (inside the snapshot, with its [`Wire`]) to
/// `target` (its client; `target_conn` to settle a lost COMMIT, with the
/// `witness`, if any, that made its id safe from a crash first). On error the
/// target transaction is rolled back (or was never committed).
pub async fn run(
    source: &(Client, Wire),
    target: &Client,
    (target_conn, witness): (&Target, Option<&Arc<Witness>>),
    job: &Job,
    progress: &Progress,
) -> Result<Done> {
    let tx = begin(target, &job.begin).await?;
    if let Some(w) = witness {
        w.start(tx);
    }
    let copied = match copy(source, target, job, progress).await {
        Ok(c) => c,
        Err(e) => {
            let _ = target.batch_execute("ROLLBACK").await;
            return Err(e);
        }
    };
    if let Some(w) = witness {
        w.vouch_for(&tx).await;
    }
    if let Err(e) = target.batch_execute("COMMIT").await {
        let e = Error::from(e);
        if e.kind() != ErrorKind::ConnectionLost {
            return Err(e);
        }
        return match crate::settle::ask(target_conn, &tx).await {
            Some(true) => Ok(copied),
            Some(false) => Err(e),
            None => Err(in_doubt(e, job)),
        };
    }
    Ok(copied)
}

/// Opens the transaction and returns its id and the marks of the
/// server's life that tell a crash (see [`TxStart`]).
async fn begin(target: &Client, begin: &str) -> Result<TxStart> {
    let sql = format!("{begin}; {TX_START_SQL}");
    tx_start(&target.simple_query(&sql).await?)
        .ok_or_else(|| Error::bug("txid_current() returned no row"))
}

/// How an error about a range whose `COMMIT` nobody can settle begins
/// (see [`in_doubt`], [`is_in_doubt`]).
const IN_DOUBT: &str = "in doubt: ";

/// The error for `job` when its `COMMIT` got no answer and the server
/// cannot say whether it committed (`crate::settle`).
fn in_doubt(e: Error, job: &Job) -> Error {
    let blocks = match job.blocks {
        (0, None) => "the whole table".to_owned(),
        (a, None) => format!("blocks {a}-end"),
        (a, Some(b)) => format!("blocks {a}-{}", b.saturating_sub(1)),
    };
    Error::new(
        ErrorKind::ConnectionLost,
        format!(
            "{IN_DOUBT}the target's COMMIT of {blocks} (`{}`) got no answer ({}), and the \
             server cannot say whether it committed",
            job.target_sql,
            e.message()
        ),
    )
    .with_hint("count that range's rows on the target before copying it again")
}

/// Whether `e` says a range's `COMMIT` is in doubt (made by `in_doubt`).
pub(super) fn is_in_doubt(e: &Error) -> bool {
    e.message().starts_with(IN_DOUBT)
}

async fn copy(
    (source, wire): &(Client, Wire),
    target: &Client,
    job: &Job,
    progress: &Progress,
) -> Result<Done> {
    let sink = target
        .copy_in::<_, bytes::Bytes>(job.target_sql.as_str())
        .await
        .map_err(|e| side("the target", e))?;
    futures_util::pin_mut!(sink);
    let mut stream = CopyOut::start(source, wire, &job.source_sql)
        .await
        .map_err(|e| side("the source", e))?;
    let mut buf = BytesMut::with_capacity(MESSAGE_BYTES);
    let mut reported = 0u64;
    let mut bytes = 0u64;
    loop {
        let more = stream
            .fill(&mut buf, MESSAGE_BYTES)
            .await
            .map_err(|e| side("the source", e))?;
        if buf.is_empty() {
            break;
        }
        // Rows begun so far (the trailer is not one).
        let rows = stream.messages().saturating_sub(job.extra_messages);
        bytes += buf.len() as u64;
        Progress::add(&progress.read_bytes, buf.len() as u64);
        Progress::add(&progress.rows_read, rows.saturating_sub(reported));
        reported = reported.max(rows);
        sink.feed(buf.split().freeze())
            .await
            .map_err(|e| side("the target", e))?;
        if !more {
            break;
        }
        buf.reserve(MESSAGE_BYTES);
    }
    let messages = stream.messages();
    let sent = messages.saturating_sub(job.extra_messages);
    if stream.rows() != Some(sent) || messages < job.extra_messages {
        return Err(Error::bug(format!(
            "the source counted {} rows but {messages} COPY messages were received; the range \
             was rolled back",
            stream.rows().map_or("no".to_owned(), |n| n.to_string()),
        )));
    }
    let stored = sink.finish().await.map_err(|e| side("the target", e))?;
    if stored == sent || (stored < sent && job.may_skip) {
        return Ok(Done {
            rows: stored,
            skipped: sent - stored,
            bytes,
        });
    }
    Err(Error::bug(format!(
        "the target stored {stored} rows of a range of {sent}; the range was rolled back"
    )))
}

/// A server error, saying which server (`the source`, `the target`)
/// raised it; kind, SQLSTATE and hint kept.
pub fn side(which: &str, e: impl Into<Error>) -> Error {
    let e: Error = e.into();
    let mut out = Error::new(e.kind(), format!("{which}: {}", e.message()));
    if let Some(h) = e.hint() {
        out = out.with_hint(h.to_owned());
    }
    if let Some(c) = e.sqlstate() {
        out = out.with_sqlstate(c.to_owned());
    }
    out.with_source(e)
}
