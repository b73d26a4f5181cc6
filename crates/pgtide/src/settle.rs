//! What became of a transaction whose `COMMIT` got no answer: asked on a
//! new connection, before anything is sent again. Its own module, used by
//! `load` (a chunk, `--single-transaction`, a shard's part) and `copy` (a
//! range), because a wrong answer here is the one way to lose or double
//! rows without noticing: "committed" counts the rows as there, "not
//! committed" sends them again.
//!
//! `txid_status(xid)` answers, unless the server crashed in between: crash
//! recovery hands out again every id whose transaction left nothing on
//! disk, so after a crash "committed" may be a stranger's transaction that
//! got our id. A crash is seen in the statistics' reset time: PostgreSQL
//! 15+ discards its statistics after crash recovery, whether the whole
//! server restarted or a backend's crash made the same postmaster recover
//! (its start time unchanged), and keeps them across a clean restart,
//! which hands no id out again (see [`crate::batch::TxStart`]). Then
//! "committed" is ours if a larger id committed durably before our
//! `COMMIT` was sent, in the same server life, and the server answering
//! writes on the same timeline (`crate::witness`, which loaders and
//! copies ask for): recovery hands out no id below it. Else
//! only the transaction's ledger row (`--resume`) can witness; without
//! either, nobody can tell and the caller stops saying so rather than
//! guess.
//! (The checkpoint that ended crash recovery was tried as a witness, its
//! next id being the first handed out after the crash; outside testing
//! fooled it with a later shutdown checkpoint, a second crash, and an
//! online checkpoint under `wal_level = minimal`, all of which look the
//! same from a client.)

use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::conn::Target;

use crate::batch::{TxStart, SERVER_LIFE_SQL, TIMELINE_SQL};
use crate::load::ledger::{self, Written};

/// How often, 100 ms apart, a transaction still in progress is asked
/// about again: a dead session's transaction can show as in progress for
/// a moment, and a live one's `COMMIT` may still be on its way.
const ASKS: u32 = 20;

/// Asks after which a transaction still in progress is taken for a
/// session that outlived its connection (a network that went silent: the
/// server never saw the `COMMIT`, nor the client leave), and that session
/// is ended ([`end_lingering`]), so that its fate is known.
const LINGER: u32 = 5;

/// Ends our old session if it still runs our transaction: the same
/// backend pid with our transaction id (32 bits, as `backend_xid` shows
/// it), so that a pid reused by another session is left alone; waits up
/// to 5 s for it to exit (PostgreSQL 14+). Its transaction then aborts,
/// or commits if its `COMMIT` was past the point of no return. The role
/// may end its own sessions; when it may not, nothing happens and the
/// caller waits as before.
async fn end_lingering(client: &Client, tx: &TxStart) -> Result<(), tokio_postgres::Error> {
    let Some(pid) = tx.backend_pid else {
        return Ok(());
    };
    let xid = (tx.xid & 0xffff_ffff).to_string();
    match client
        .query(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_catalog.pg_stat_activity \
             WHERE pid = $1 AND backend_xid::text = $2",
            &[&pid, &xid],
        )
        .await
    {
        Err(e) if e.as_db_error().is_none() => Err(e),
        _ => Ok(()),
    }
}

/// The server's state of the transaction in doubt and of its own life.
struct Seen {
    /// `txid_status`, or `future` for an id not handed out (again) yet.
    status: Option<String>,
    /// The postmaster started again: every old session is gone.
    restarted: bool,
    /// Crash recovery ran since `BEGIN` (or someone reset the archiver's
    /// statistics, which reads the same and is answered as carefully).
    crashed: bool,
    /// A witness makes "committed" ours even after a crash
    /// (`crate::witness`): it covers the transaction, was flushed on the
    /// timeline this server writes on, and this server knows it committed.
    vouched: bool,
}

impl Seen {
    /// An answer from another cluster: no status.
    fn foreign() -> Seen {
        Seen {
            status: None,
            restarted: true,
            crashed: true,
            vouched: false,
        }
    }

    /// An id not handed out (again) yet.
    fn future() -> Seen {
        Seen {
            status: Some("future".into()),
            restarted: false,
            crashed: false,
            vouched: false,
        }
    }
}

/// Reads the server's life marks, then `txid_status`. An id at or past
/// the server's next id is "future": `txid_status` refuses it (22023,
/// "is in the future"), which only a crash that took the id back can
/// cause. The snapshot's `xmax` cannot stand in for the next id: it is
/// one past the newest *finished* transaction, so a transaction still
/// running (a `COMMIT` still being done, a session that outlived its
/// connection) is at or past it whenever nothing later has finished.
///
/// One statement reads it all: between two, a connection pooler could
/// move the question to a server that crashed and recovered meanwhile,
/// and the marks would not tell. The witness that covers `tx`, if any, is
/// asked about in it too: a server that does not know it committed (one
/// promoted on a timeline of the same number after another failover) is
/// not the server it was flushed on. A standby (which a multi-host
/// connection string may reach) knows nothing final about the primary's
/// transactions: no status.
async fn see(client: &Client, tx: &TxStart) -> Result<Seen, tokio_postgres::Error> {
    // Another cluster (a multi-host connection string may list one)
    // knows nothing of ours: its answers settle nothing.
    if let Some(ours) = crate::witness::system_of(tx) {
        let answering = crate::witness::system_identifier(client).await;
        if answering.is_some_and(|a| a != ours) {
            return Ok(Seen::foreign());
        }
    }
    let cover = crate::witness::covering(tx);
    let w = cover.as_ref().map(|c| c.0);
    let sql = format!(
        "SELECT {SERVER_LIFE_SQL}, pg_is_in_recovery(), {TIMELINE_SQL}, \
         CASE WHEN pg_is_in_recovery() THEN NULL ELSE txid_status($1) END, \
         CASE WHEN pg_is_in_recovery() \
              OR $2 >= txid_snapshot_xmax(txid_current_snapshot()) THEN NULL \
              ELSE txid_status($2) END"
    );
    // The witness is asked about only below the snapshot's xmax (one past
    // the newest finished transaction, so never "future"): the covering
    // witness may be newer than `tx` (the next chunk's), and a server
    // promoted before that witness reached it knows `tx` but not the
    // witness, whose refusal would read as "`tx` is not on its disk"
    // and send a chunk it holds once more. Unasked, it vouches for
    // nothing.
    let row = match client.query_one(&sql, &[&tx.xid, &w]).await {
        Ok(row) => row,
        // Not handed out (again) on this server: ours is not on its disk.
        Err(e) if e.code() == Some(&SqlState::INVALID_PARAMETER_VALUE) => return Ok(Seen::future()),
        Err(e) => return Err(e),
    };
    let started: Option<i64> = row.get(0);
    let stats_reset: Option<i64> = row.get(1);
    let timeline: Option<String> = row.get(3);
    let status: Option<String> = row.get(4);
    let witness_committed = row.get::<_, Option<String>>(5).as_deref() == Some("committed");
    let vouched = witness_committed
        && timeline.is_some()
        && cover.as_ref().map(|c| &c.1) == timeline.as_ref();
    let restarted = started != Some(tx.server_started);
    // A clean restart keeps the statistics (and its shutdown checkpoint
    // covers every id handed out); a crash discards them. Measured on 15,
    // 17 and 18: `-m fast` keeps `stats_reset`, `-m immediate` and a
    // backend's `kill -9` move it. Without it, a crash cannot be told
    // from anything: assume one.
    let crashed = stats_reset != tx.stats_reset || stats_reset.is_none();
    Ok(Seen {
        status,
        restarted,
        crashed,
        vouched,
    })
}

/// Connection attempts of [`ask`], [`FIRST_PAUSE`] apart, doubling up to
/// [`MAX_PAUSE`]: about half a minute, time for crash recovery (4-9 s on a
/// busy 2-CPU machine) to end.
const CONNECTS: u32 = 10;
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// [`commit_status`] on a new connection to `target`, made (and made again
/// when the question fails) with growing pauses; `None` when no
/// connection answers. For callers that have no connection of their own
/// to replace (a copy's range, a shard's part).
pub(crate) async fn ask(target: &Target, tx: &TxStart) -> Option<bool> {
    let mut pause = FIRST_PAUSE;
    for _ in 0..CONNECTS {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
        let Ok(client) = target.connect().await else {
            continue;
        };
        if let Ok(answer) = commit_status(&client, tx, None).await {
            return answer;
        }
    }
    None
}

/// Whether transaction `tx` committed, asked on `client` (a new
/// connection): `Some(true)` committed, `Some(false)` certainly not (safe
/// to send again), `None` nobody can tell (stop and say so); an error when
/// the question itself failed (ask again on the next connection).
/// `written` is the ledger row the transaction wrote, if any.
pub(crate) async fn commit_status(
    client: &Client,
    tx: &TxStart,
    written: Option<&Written>,
) -> Result<Option<bool>, tokio_postgres::Error> {
    for asked in 0..ASKS {
        let seen = see(client, tx).await?;
        match seen.status.as_deref() {
            Some("committed") if !seen.crashed => return Ok(Some(true)),
            // After a crash, ours if a witness made the id safe before
            // the `COMMIT` was sent (`crate::witness`).
            Some("committed") if seen.vouched => return Ok(Some(true)),
            // Else only the ledger row can say whose: the id may have gone
            // to a stranger. Without one, nobody can tell.
            Some("committed") => match witness(client, tx, written).await? {
                Some(answer) => return Ok(Some(answer)),
                None if written.is_some() => {}
                None => return Ok(None),
            },
            // Ours committed would read "committed" (its commit record is
            // on disk, so its id was not handed out again): not ours.
            Some("aborted") => return Ok(Some(false)),
            // Not handed out (again) since a crash took it back: ours
            // never committed.
            Some("future") => return Ok(Some(false)),
            // Our session died with the old server: after a restart, a
            // transaction in progress under our id is a stranger's, and
            // ours is lost. Without a restart it may still be ours
            // (statistics reset by hand): wait.
            Some("in progress") if seen.restarted => return Ok(Some(false)),
            // Ours, still running: a session that outlived its connection.
            Some("in progress") if asked == LINGER && !seen.crashed => {
                end_lingering(client, tx).await?;
            }
            Some("in progress") => {}
            _ => return Ok(None),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(None)
}

/// The transaction's ledger row, when it wrote one: `Some(found)` once the
/// statement's snapshot sees the transaction under our id as over, `None`
/// when it wrote none or the snapshot does not see it over yet.
async fn witness(
    client: &Client,
    tx: &TxStart,
    written: Option<&Written>,
) -> Result<Option<bool>, tokio_postgres::Error> {
    let Some(w) = written else {
        return Ok(None);
    };
    match ledger::witnessed(client, w, tx.xid).await {
        Ok((true, found)) => Ok(Some(found)),
        Ok((false, _)) => Ok(None),
        Err(e) if e.as_db_error().is_some() => Ok(None),
        Err(e) => Err(e),
    }
}
