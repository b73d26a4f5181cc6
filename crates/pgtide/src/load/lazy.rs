//! Chunk commits that do not wait for their WAL to reach the disk, and
//! the questions that prove such a commit on disk later. The worker's
//! hold on such a chunk until then is `load/hold.rs`'s.
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
//! - **The next chunk of the same worker** (`hold.rs`, `proven`): its witness
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

use super::ledger::Written;
use crate::batch::{TxStart, DURABLE_COMMIT_SQL};

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
pub(super) fn same_life(a: &TxStart, b: &TxStart) -> bool {
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
    let sql = format!(
        "SELECT CASE WHEN $1::int8 >= txid_snapshot_xmax(txid_current_snapshot()) \
           THEN 'future' ELSE txid_status($1::int8) END = 'committed', {DURABLE_COMMIT_SQL}, \
         pg_catalog.pg_logical_emit_message(true, 'pgtide.flush', '')::text"
    );
    client.batch_execute("BEGIN").await?;
    let seen = match client.query_one(&sql, &[&xid]).await {
        Ok(row) => row.get::<_, Option<bool>>(0) == Some(true),
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(e);
        }
    };
    client.batch_execute("COMMIT").await?;
    Ok(seen)
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
