//! Many connections, one snapshot, one ordered output.
//!
//! ```text
//! coordinator: BEGIN REPEATABLE READ; LOCK t IN ACCESS SHARE MODE;
//!              pg_export_snapshot(); size in blocks  (held open to the end)
//! N workers:   BEGIN REPEATABLE READ; SET TRANSACTION SNAPSHOT '..'
//!              take the next range job; COPY (SELECT .. WHERE ctid in
//!              [a,b)) TO STDOUT -> that range's bounded channel
//! pump:        ranges in block order -> Output
//! ```
//!
//! Every worker sees exactly the table state of the coordinator's
//! snapshot, so each row version visible then is in exactly one block
//! range and is exported exactly once, whatever others write meanwhile.
//! The lock keeps TRUNCATE, VACUUM FULL, CLUSTER and DROP (which would
//! move or remove those versions) waiting until the export ends; ordinary
//! writes are not blocked. The last range has no upper bound.
//!
//! # Memory
//! At most [`WINDOW_EXTRA`] + N ranges are started and not yet written,
//! and each range's channel holds at most [`RANGE_QUEUE`] pieces of
//! [`super::receive::PIECE_BYTES`]: (N + 1) x 4 MiB, plus the output queue. A worker whose
//! range is ahead of the output and whose channel is full waits (the
//! server waits with it); it never buffers more.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

use super::output::Output;
use super::receive::{receive, Job, Piece, Received};
use crate::conn::Target;
use crate::error::{Error, Result};
use crate::ident::quote_literal;
use crate::progress::Progress;

/// Pieces a range may hold ahead of the output: 16 x 256 KiB = 4 MiB, about
/// twice the text of a [`RANGE_BLOCKS`] range, so a range usually finishes
/// without waiting and its worker moves on.
pub const RANGE_QUEUE: usize = 16;

/// Largest range, in 8 KiB blocks (2 MiB of heap): small enough to fit in
/// its channel, large enough that a range's COPY statement costs nothing
/// next to its rows.
pub const RANGE_BLOCKS: u64 = 256;

/// Ranges started beyond one per worker: the one being written.
pub const WINDOW_EXTRA: usize = 1;

/// The coordinator's open transaction and the workers that share its
/// snapshot. Dropping it ends every transaction (read-only: nothing to
/// undo).
pub struct Snapshot {
    _coordinator: Client,
    /// Blocks of the table when the snapshot was taken.
    pub blocks: u64,
    /// One connection per worker, each inside the snapshot.
    pub workers: Vec<Client>,
}

/// Opens the coordinator's snapshot on `table` (quoted, with its `oid`)
/// and `workers` connections that import it.
pub async fn open(target: &Target, table: &str, oid: u32, workers: usize) -> Result<Snapshot> {
    let coordinator = target.connect().await?;
    coordinator
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
             LOCK TABLE {table} IN ACCESS SHARE MODE"
        ))
        .await?;
    let id: String = coordinator
        .query_one("SELECT pg_catalog.pg_export_snapshot()", &[])
        .await?
        .get(0);
    // Measured after the snapshot: every row version it sees is in a
    // block that existed then.
    let blocks: i64 = coordinator
        .query_one(include_str!("../../sql/export_blocks.sql"), &[&oid])
        .await?
        .get(0);
    let import = format!(
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT {}",
        quote_literal(&id)
    );
    let connections = (0..workers).map(|_| async {
        let c = target.connect().await?;
        c.batch_execute(&import).await?;
        Ok::<_, Error>(c)
    });
    let workers = futures_util::future::try_join_all(connections).await?;
    Ok(Snapshot {
        _coordinator: coordinator,
        blocks: blocks.max(0) as u64,
        workers,
    })
}

/// `[first, end)` block ranges covering `0..blocks`, at least four per
/// worker when the table is big enough, at most [`RANGE_BLOCKS`] each;
/// the last is open-ended (`None`).
pub fn block_ranges(blocks: u64, workers: usize) -> Vec<(u64, Option<u64>)> {
    let per = blocks
        .div_ceil(4 * workers.max(1) as u64)
        .clamp(1, RANGE_BLOCKS);
    let mut out = Vec::new();
    let mut first = 0;
    while first + per < blocks {
        out.push((first, Some(first + per)));
        first += per;
    }
    out.push((first, None));
    out
}

/// `WHERE` clause of one block range.
pub fn ctid_condition(first: u64, end: Option<u64>) -> String {
    let lower = (first > 0).then(|| format!("ctid >= '({first},0)'::tid"));
    let upper = end.map(|e| format!("ctid < '({e},0)'::tid"));
    let parts: Vec<String> = lower.into_iter().chain(upper).collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    }
}

/// Why [`pump`] stopped early.
pub enum PumpError {
    /// A COPY failed (server, connection).
    Copy(Error),
    /// The output writer stopped; `Output::failure` says why.
    Output,
}

/// Aborts the worker tasks if the pump returns early.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Runs `jobs` on `clients` (each client takes the next job when free)
/// and writes their bytes to `output` in job order.
pub async fn pump(
    jobs: Vec<Job>,
    clients: Vec<Client>,
    output: &Output,
    progress: Arc<Progress>,
) -> std::result::Result<Received, PumpError> {
    let window = clients.len() + WINDOW_EXTRA;
    let (job_tx, job_rx) = async_channel::unbounded::<(Job, mpsc::Sender<Piece>)>();
    let mut tasks = Tasks(Vec::new());
    for (i, client) in clients.into_iter().enumerate() {
        let jobs = job_rx.clone();
        let progress = progress.clone();
        tasks.0.push(tokio::spawn(async move {
            while let Ok((job, tx)) = jobs.recv().await {
                let got = receive(&client, &job, &tx, &progress).await;
                match got {
                    Ok(r) => {
                        if let Some(w) = progress.worker_rows.get(i) {
                            Progress::add(w, r.rows);
                        }
                    }
                    // Failed (the pump will say why) or abandoned: this
                    // connection is done either way.
                    Err(_) => break,
                }
            }
        }));
    }
    drop(job_rx);
    let mut job_tx = Some(job_tx);
    let mut jobs = jobs.into_iter();
    let mut pending = VecDeque::new();
    let mut total = Received::default();
    loop {
        while pending.len() < window {
            let Some(tx) = &job_tx else { break };
            match jobs.next() {
                Some(job) => {
                    let (piece_tx, piece_rx) = mpsc::channel(RANGE_QUEUE);
                    if tx.send((job, piece_tx)).await.is_err() {
                        return Err(PumpError::Copy(Error::bug("export workers are gone")));
                    }
                    pending.push_back(piece_rx);
                }
                None => {
                    job_tx = None;
                }
            }
        }
        let Some(mut rx) = pending.pop_front() else {
            break;
        };
        loop {
            match rx.recv().await {
                Some(Piece::Data(bytes)) => {
                    if output.send(bytes).await.is_err() {
                        return Err(PumpError::Output);
                    }
                }
                Some(Piece::Done(r)) => {
                    total.rows += r.rows;
                    total.bytes += r.bytes;
                    break;
                }
                Some(Piece::Failed(e)) => return Err(PumpError::Copy(e)),
                None => {
                    return Err(PumpError::Copy(Error::bug(
                        "an export worker stopped before finishing its range",
                    )))
                }
            }
        }
    }
    drop(tasks);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_block_once_and_end_open() {
        for blocks in [0u64, 1, 2, 7, 100, 1023, 1024, 1025, 100_000] {
            for workers in [1, 2, 3, 4, 8] {
                let r = block_ranges(blocks, workers);
                assert_eq!(r[0].0, 0);
                assert_eq!(r.last().unwrap().1, None);
                for w in r.windows(2) {
                    assert_eq!(w[0].1, Some(w[1].0), "{blocks} {workers}");
                    assert!(w[0].1.unwrap() - w[0].0 <= RANGE_BLOCKS);
                }
                if blocks >= 1024 {
                    assert!(r.len() >= 4 * workers, "{blocks} {workers}: {r:?}");
                }
            }
        }
    }

    #[test]
    fn conditions() {
        assert_eq!(ctid_condition(0, None), "");
        assert_eq!(ctid_condition(0, Some(8)), " WHERE ctid < '(8,0)'::tid");
        assert_eq!(
            ctid_condition(8, Some(16)),
            " WHERE ctid >= '(8,0)'::tid AND ctid < '(16,0)'::tid"
        );
        assert_eq!(ctid_condition(16, None), " WHERE ctid >= '(16,0)'::tid");
    }
}
