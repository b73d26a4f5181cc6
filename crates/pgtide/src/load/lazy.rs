//! Chunk commits that do not wait for their WAL to reach the disk, and
//! the worker's hold on such a chunk until a later flush proves it there.
//!
//! Why: each chunk's `COMMIT` used to wait for its WAL flush. With one
//! worker the backend then sits idle, 2.5-5.5 ms a chunk (docs/benchmarks.md,
//! "where the time goes": 0.3 s of a 1.4 s binary load), while one long
//! COPY (psql, server-side COPY) leaves its WAL to the WAL writer. A chunk
//! that commits with `synchronous_commit = off` does what they do.
//!
//! The promise stays "durable before counted": such a chunk is held, not
//! counted loaded, until a commit that did wait for its flush, later in
//! the same server life, proves its commit record on disk (WAL is flushed
//! in order):
//!
//! - **The next chunk of the same worker** ([`proven`]): its witness
//!   (`crate::witness`: a durable commit of a later id, so begun after the
//!   held chunk's `COMMIT` returned). Same server life ([`same_life`]: no
//!   crash between the two) is all it takes; no round trip. Not the next
//!   chunk's own `COMMIT`: a transaction that wrote no WAL (every row
//!   dropped by a trigger, or routed to an unlogged partition) commits
//!   without a flush whatever `synchronous_commit` says.
//! - **Otherwise** (the last chunk, a chunk that goes to isolation, a
//!   reconnect in between), [`durable`]: a transaction that reads the
//!   chunk's status and commits with a flush.
//!
//! A chunk commits lazily only when its witness vouched for it: then a
//! crash cannot hand its id to a stranger, so after a crash `txid_status`
//! speaks of the chunk alone: "committed" (its record was on disk), or
//! not (lost with the server's buffers): sent again. Only on servers
//! without synchronous standbys ([`allowed`]), whose `COMMIT` would also
//! have waited for them.

use tokio_postgres::Client;

use super::ctx::Ctx;
use super::ledger::Written;
use super::loader::{Batch, InDoubt, Loader};
use super::reconnect::{load_reconnecting, settle_in_doubt};
use super::worker::{failed_chunk, finished};
use crate::batch::TxStart;
use crate::chunk::Chunk;
use crate::error::{classify, Class, Error, ErrorKind};
use crate::progress::Progress;

/// The `COMMIT` of a chunk that commits lazily: `off`, unless synchronous
/// standbys were named since the load began ([`allowed`]), whose
/// confirmation the `COMMIT` then waits for as it would have.
pub(super) const COMMIT_SQL: &str = "SELECT set_config('synchronous_commit', \
     CASE current_setting('synchronous_standby_names') WHEN '' THEN 'off' \
     ELSE current_setting('synchronous_commit') END, true); COMMIT";

/// Whether chunks may commit lazily on this server: not when a
/// synchronous standby should confirm each commit (a lazy `COMMIT` does
/// not wait for it, and the proofs here are of the local disk).
pub(super) async fn allowed(client: &Client) -> bool {
    let sql = "SELECT current_setting('synchronous_standby_names') = ''";
    match client.query_one(sql, &[]).await {
        Ok(row) => row.get(0),
        Err(_) => false,
    }
}

/// A transaction that committed lazily: its id and life, and the ledger
/// row it wrote (`--resume`).
#[derive(Debug, Clone)]
pub struct Lazy {
    pub tx: TxStart,
    pub ledger: Option<Written>,
}

/// Whether two transactions began in the same server life (no crash, no
/// restart between them: [`TxStart`]).
fn same_life(a: &TxStart, b: &TxStart) -> bool {
    a.stats_reset.is_some()
        && (a.server_started, a.stats_reset) == (b.server_started, b.stats_reset)
}

/// Whether the lazily committed `tx` is committed and on disk, asked on
/// `client`: `Some(true)` it is (now), `Some(false)` a crash took it back
/// (send again), `None` nobody can tell. An error when the question
/// itself failed.
pub(super) async fn durable(
    client: &Client,
    tx: &TxStart,
    written: Option<&Written>,
) -> Result<Option<bool>, tokio_postgres::Error> {
    for _ in 0..3 {
        match crate::settle::commit_status(client, tx, written).await? {
            Some(true) => {}
            other => return Ok(other),
        }
        if flushed_committed(client, tx.xid).await? {
            return Ok(Some(true));
        }
        // A crash between the two questions took it back: ask again.
    }
    Ok(None)
}

/// Reads `xid`'s status in a transaction that then commits with a flush
/// of the WAL (it writes some: a logical decoding message, as the
/// witness does). When that `COMMIT` succeeds and the status read was
/// "committed", the commit record read was before it in the WAL, so on
/// disk.
async fn flushed_committed(client: &Client, xid: i64) -> Result<bool, tokio_postgres::Error> {
    let sql = "SELECT CASE WHEN $1::int8 >= txid_snapshot_xmax(txid_current_snapshot()) \
                 THEN 'future' ELSE txid_status($1::int8) END = 'committed', \
               set_config('synchronous_commit', \
                 CASE current_setting('synchronous_commit') WHEN 'off' THEN 'local' \
                 ELSE current_setting('synchronous_commit') END, true), \
               pg_catalog.pg_logical_emit_message(true, 'pgtide.flush', '')::text";
    client.batch_execute("BEGIN").await?;
    let seen = match client.query_one(sql, &[&xid]).await {
        Ok(row) => row.get::<_, Option<bool>>(0) == Some(true),
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(e);
        }
    };
    client.batch_execute("COMMIT").await?;
    Ok(seen)
}

/// A chunk that committed lazily, not counted yet.
pub(super) struct Held {
    chunk: Chunk,
    rows: u64,
    lazy: Lazy,
    /// Its `--resume` mark, should it be sent again.
    mark: Option<super::ledger::Mark>,
}

/// After a chunk committed whole with `rows` rows: the chunk held before
/// it is counted (or settled), and this one is held if it committed
/// lazily, counted otherwise. False when the load must stop.
pub(super) async fn committed(
    loader: &mut Loader,
    ctx: &Ctx,
    id: usize,
    held: &mut Option<Held>,
    (chunk, rows): (&Chunk, u64),
) -> bool {
    // Taken first: settling the held chunk may load it again.
    let lazy = loader.take_lazy();
    let ok = release(loader, ctx, id, held).await;
    match lazy {
        Some(lazy) => {
            *held = Some(Held {
                chunk: chunk.clone(),
                rows,
                lazy,
                mark: loader.mark(),
            })
        }
        None => count(ctx, id, chunk, rows),
    }
    ok
}

/// Counts or settles the chunk held, if any, before anything but a clean
/// chunk load follows (and when the worker stops). False when the load
/// must stop.
pub(super) async fn release(
    loader: &mut Loader,
    ctx: &Ctx,
    id: usize,
    held: &mut Option<Held>,
) -> bool {
    match held.take() {
        Some(h) if proven(loader, &h.lazy.tx) => {
            count(ctx, id, &h.chunk, h.rows);
            true
        }
        Some(h) => settle(loader, ctx, id, h).await,
        None => true,
    }
}

/// Whether a later transaction of this worker, in the same server life as
/// the lazily committed `tx`, proves it on disk: one that a witness covers
/// (a durable commit begun after `tx`'s `COMMIT` returned, whatever became
/// of the transaction itself).
fn proven(loader: &Loader, tx: &TxStart) -> bool {
    loader.last_begin().is_some_and(|b| {
        b.xid > tx.xid && same_life(tx, &b) && crate::witness::covering(&b).is_some()
    })
}

/// A held chunk without a proof from the next one: asked ([`durable`]),
/// on a new connection if this one broke; sent again if a crash took it.
/// What the loader holds for the chunk after it (its counts, its mark) is
/// kept aside meanwhile: a new connection would drop it, a resend mix it
/// with the held chunk's.
async fn settle(loader: &mut Loader, ctx: &Ctx, id: usize, h: Held) -> bool {
    let counts = loader.take_counts();
    let mark = loader.take_mark();
    loader.set_mark(h.mark.clone());
    let ok = settle_held(loader, ctx, id, h).await;
    loader.set_mark(mark);
    loader.carry_counts(counts);
    ok
}

async fn settle_held(loader: &mut Loader, ctx: &Ctx, id: usize, h: Held) -> bool {
    let asked = durable(loader.client(), &h.lazy.tx, h.lazy.ledger.as_ref()).await;
    let verdict = match asked {
        Ok(verdict) => verdict,
        Err(e) if classify(&e) == Class::Connection => {
            let d = InDoubt::from_lazy(h.lazy.clone(), h.rows);
            settle_in_doubt(loader, ctx, Some(d)).await
        }
        Err(_) => None,
    };
    match verdict {
        Some(true) => {
            count(ctx, id, &h.chunk, h.rows);
            true
        }
        Some(false) => {
            let batch = Batch {
                data: h.chunk.data.clone(),
                records: h.chunk.records,
            };
            match load_reconnecting(loader, ctx, &batch).await {
                Ok(rows) => {
                    count(ctx, id, &h.chunk, rows);
                    true
                }
                Err(e) => {
                    if e.commit_unknown {
                        Progress::add(&ctx.progress.rows_in_doubt, h.chunk.records);
                    }
                    let failed = failed_chunk(&h.chunk, loader.spec(), e);
                    ctx.shared.lock().expect("worker state").failed.push(failed);
                    false
                }
            }
        }
        None => {
            let c = &h.chunk;
            Progress::add(&ctx.progress.rows_in_doubt, c.records);
            let error = Error::new(
                ErrorKind::ConnectionLost,
                format!(
                    "{}: lines {}-{} committed, but the server could not confirm that their \
                     commit reached its disk",
                    c.input,
                    c.first_line,
                    c.last_line()
                ),
            )
            .with_hint(format!(
                "check whether lines {}-{} of {} are in the table before loading them again \
                 (with --resume, pgtide's ledger settles this itself)",
                c.first_line,
                c.last_line(),
                c.input
            ));
            let failed = super::outcome::Failed {
                seq: c.seq,
                error,
                row: None,
            };
            ctx.shared.lock().expect("worker state").failed.push(failed);
            false
        }
    }
}

/// Counts a chunk committed whole.
fn count(ctx: &Ctx, id: usize, chunk: &Chunk, rows: u64) {
    let lines = vec![(chunk.first_line, chunk.last_line())];
    finished(
        ctx,
        id,
        chunk,
        rows,
        chunk.data.len() as u64,
        Vec::new(),
        lines,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(server_started: i64, stats_reset: Option<i64>) -> TxStart {
        TxStart {
            xid: 7,
            server_started,
            stats_reset,
            backend_pid: None,
        }
    }

    #[test]
    fn a_crash_or_an_unknown_life_is_never_the_same_life() {
        assert!(same_life(&tx(1, Some(2)), &tx(1, Some(2))));
        assert!(!same_life(&tx(1, Some(2)), &tx(1, Some(3))), "a crash");
        assert!(!same_life(&tx(1, Some(2)), &tx(4, Some(2))), "a restart");
        assert!(!same_life(&tx(1, None), &tx(1, None)), "cannot tell");
    }
}
