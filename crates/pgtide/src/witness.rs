//! Makes a transaction's id safe from being handed out again by a crash,
//! before its `COMMIT` is sent, so that a `COMMIT` whose answer a crash
//! took can still be settled (`crate::settle`) without `--resume`'s
//! ledger.
//!
//! Crash recovery hands out again only ids past every id it found in the
//! WAL on disk: replaying a commit record moves the next id past it. So
//! once any transaction with a larger id has committed *durably* (its
//! commit record flushed, `synchronous_commit` at least `local`), ours can
//! never go to a stranger, whatever a crash does next: `txid_status` then
//! speaks of our transaction only, "committed" included.
//!
//! A [`Witness`] is that larger transaction: on its own connection, one
//! `SELECT txid_current()` beside a logical decoding message (WAL, so
//! that its implicit transaction commits with a flush). A loader asks for one right after `BEGIN` ([`Witness::start`]),
//! so that it runs while the chunk's rows are sent, and waits for it
//! before `COMMIT` ([`Witness::vouch_for`]); one witness serves every
//! transaction begun before it was sent, so workers share them. Its
//! answer counts only within the server life it was read in (the marks of
//! [`TxStart`]): a witness after a crash proves nothing about the ids
//! before it. And it counts only for a server that goes on from the disk
//! it was flushed to: the same cluster (`system_identifier`), writing on
//! the same timeline, and knowing the witness committed. A standby
//! promoted after a failover (which a multi-host connection string may
//! reach) may have missed it, and writes on a new timeline.
//!
//! What witnesses proved is kept per server life for the whole process
//! (`covering`): it is a fact about the server, which whoever settles a
//! `COMMIT` reads, however it reached the transaction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::Client;

use crate::batch::{tx_start, TxStart, TIMELINE_SQL, TX_START_SQL};
use crate::conn::Target;

/// The statement a witness runs: its own transaction takes an id (larger
/// than every id handed out before it) and commits it with a flush of the
/// WAL, whatever the server's default `synchronous_commit`. It must write
/// WAL: a transaction that wrote none commits without a flush even then
/// (`RecordTransactionCommit`: "has not performed any WAL-logged
/// operation"), and a crash loses its commit. A transactional logical
/// decoding message is WAL that any role may write, needs no table, and
/// changes nothing (decoding plugins that pass messages on see one with
/// the prefix `pgtide.witness`).
fn witness_sql() -> String {
    format!(
        "SET synchronous_commit = local; {TX_START_SQL}, {TIMELINE_SQL} \
         FROM pg_catalog.pg_logical_emit_message(true, 'pgtide.witness', '')"
    )
}

/// How long a `COMMIT` waits for its witness: a witness that hangs must
/// not hold the load (without it, a crash during that `COMMIT` leaves the
/// rows in doubt, as before witnesses).
const WAIT: Duration = Duration::from_secs(2);

/// The least time between two connection attempts of one witness.
const RETRY: Duration = Duration::from_secs(1);

/// A server life: `pg_postmaster_start_time()` and the statistics' reset
/// time, which a crash moves (see [`TxStart`]).
type Life = (i64, i64);

/// Per server life, the largest id known to have committed durably in it,
/// and the timeline it was written on ([`TIMELINE_SQL`]).
static DURABLE: Mutex<Option<HashMap<Life, (i64, String)>>> = Mutex::new(None);

/// Per server life, the cluster's `system_identifier`, where the role may
/// read it: a multi-host connection string may list an unrelated cluster,
/// which must not answer for ours.
static SYSTEMS: Mutex<Option<HashMap<Life, i64>>> = Mutex::new(None);

/// The `system_identifier` of the cluster `tx` ran on, when a witness
/// read it in the same server life.
pub(crate) fn system_of(tx: &TxStart) -> Option<i64> {
    let life = life(tx)?;
    let systems = SYSTEMS.lock().expect("witness registry");
    systems.as_ref()?.get(&life).copied()
}

/// The cluster's `system_identifier` (`None` where the role may not read
/// `pg_control_system()`).
pub(crate) async fn system_identifier(client: &Client) -> Option<i64> {
    let sql = "SELECT system_identifier FROM pg_catalog.pg_control_system()";
    client.query_opt(sql, &[]).await.ok()??.get(0)
}

fn life(tx: &TxStart) -> Option<Life> {
    Some((tx.server_started, tx.stats_reset?))
}

/// The witness that covers `tx`: a transaction with a larger id that
/// committed durably in the same server life; its id and the timeline it
/// was flushed on. No crash can have given `tx`'s id to another
/// transaction on a server that goes on from that disk: one that writes
/// on the same timeline (a standby promoted since, which may have missed
/// the witness, writes on a new one) and knows the witness committed
/// (`crate::settle` asks both). Never without the statistics' reset
/// time: a crash could not be seen.
pub(crate) fn covering(tx: &TxStart) -> Option<(i64, String)> {
    let life = life(tx)?;
    let durable = DURABLE.lock().expect("witness registry");
    let (xid, timeline) = durable.as_ref()?.get(&life)?;
    (*xid > tx.xid).then(|| (*xid, timeline.clone()))
}

/// Records that `tx` committed durably, written on `timeline`, in the
/// cluster `system`.
fn record(tx: &TxStart, timeline: String, system: Option<i64>) {
    let Some(life) = life(tx) else {
        return;
    };
    if let Some(system) = system {
        let mut systems = SYSTEMS.lock().expect("witness registry");
        systems
            .get_or_insert_with(HashMap::new)
            .insert(life, system);
    }
    let mut durable = DURABLE.lock().expect("witness registry");
    let newest = durable
        .get_or_insert_with(HashMap::new)
        .entry(life)
        .or_insert((tx.xid, timeline.clone()));
    if tx.xid >= newest.0 {
        *newest = (tx.xid, timeline);
    }
}

/// Witness transactions on a connection of their own to one target.
#[derive(Debug)]
pub struct Witness {
    target: Target,
    /// Opened on first use, dropped when it fails (opened again next time),
    /// with the `system_identifier` of the cluster it reached.
    client: tokio::sync::Mutex<Option<(Client, Option<i64>)>>,
    /// The server refused the witness's statement (a role without the
    /// right to `pg_logical_emit_message`, a read-only server): it is not
    /// asked again, and the loads go on without proofs.
    refused: std::sync::atomic::AtomicBool,
    /// After a failed connection attempt (a server at its connection
    /// limit), none before this: every chunk asking again at once would
    /// flood the server with refused connections.
    next_try: Mutex<Option<std::time::Instant>>,
    /// The timelines this witness saw its cluster write on, in order: two
    /// mean a standby was promoted during the load ([`Witness::failover`]).
    /// With the cluster's `system_identifier` where readable: timelines
    /// of two clusters (a multi-host string listing another) are not a
    /// failover.
    timelines: Mutex<Vec<(Option<i64>, String)>>,
}

impl Witness {
    /// A witness for transactions on `target`; connects on first use.
    pub fn new(target: Target) -> Arc<Witness> {
        Arc::new(Witness {
            target,
            client: tokio::sync::Mutex::new(None),
            refused: std::sync::atomic::AtomicBool::new(false),
            next_try: Mutex::new(None),
            timelines: Mutex::new(Vec::new()),
        })
    }

    /// Reads the timeline the target writes on now, on the witness's own
    /// connection (made again if a failover broke it), for
    /// [`Witness::failover`]: at the start of a load and at its end.
    pub async fn observe(&self) {
        // Bounded as a witness is: a server that hangs must not hold the
        // load's end.
        let _ = tokio::time::timeout(WAIT, self.observe_now()).await;
    }

    async fn observe_now(&self) {
        let mut client = self.client.lock().await;
        for _ in 0..2 {
            if client.is_none() {
                if let Ok(c) = self.target.connect().await {
                    let system = system_identifier(&c).await;
                    *client = Some((c, system));
                }
            }
            let Some((c, system)) = client.as_ref() else {
                return;
            };
            match c.query_one(&format!("SELECT {TIMELINE_SQL}"), &[]).await {
                Ok(row) => {
                    if let Some(timeline) = row.get::<_, Option<String>>(0) {
                        self.saw(*system, timeline);
                    }
                    return;
                }
                Err(_) => *client = None,
            }
        }
    }

    /// The first and the last timeline seen, when they differ: a standby
    /// was promoted while the load ran. A commit flushed on the old
    /// primary (counted loaded) may not have reached it, so none is sure.
    pub fn failover(&self) -> Option<(String, String)> {
        let seen = self.timelines.lock().expect("witness state");
        match (seen.first(), seen.last()) {
            (Some((s, a)), Some((t, b))) if a != b && (s.is_none() || t.is_none() || s == t) => {
                Some((a.clone(), b.clone()))
            }
            _ => None,
        }
    }

    fn saw(&self, system: Option<i64>, timeline: String) {
        let mut seen = self.timelines.lock().expect("witness state");
        let now = (system, timeline);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
    }

    /// Starts making `tx` safe in the background (see [`Witness::vouch_for`]).
    pub fn start(self: &Arc<Self>, tx: TxStart) {
        let witness = self.clone();
        tokio::spawn(async move { witness.vouch_for(&tx).await });
    }

    /// Returns once a transaction begun after `tx` committed durably in
    /// the same server life, or after 2 s, or when no witness could
    /// run (no connection): the caller's `COMMIT` goes on either way, and
    /// only a crash during it tells the difference.
    pub async fn vouch_for(&self, tx: &TxStart) -> bool {
        tokio::time::timeout(WAIT, self.run(tx))
            .await
            .unwrap_or(false)
    }

    /// Whether a connection may be tried now ([`RETRY`] since the last).
    fn may_try(&self) -> bool {
        let now = std::time::Instant::now();
        let mut next_try = self.next_try.lock().expect("witness state");
        if next_try.is_some_and(|t| now < t) {
            return false;
        }
        *next_try = Some(now + RETRY);
        true
    }

    async fn run(&self, tx: &TxStart) -> bool {
        if life(tx).is_none() {
            return false; // a crash could not be seen: nothing to prove
        }
        if covering(tx).is_some() {
            return true;
        }
        // One witness at a time: whoever waited for the last one finds
        // itself covered, unless that one began before its transaction.
        let mut client = self.client.lock().await;
        if covering(tx).is_some() {
            return true;
        }
        if self.refused.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        // Twice: a connection a restart broke fails once, then a new one
        // is made.
        for _ in 0..2 {
            if client.is_none() {
                if !self.may_try() {
                    return false;
                }
                if let Ok(c) = self.target.connect().await {
                    let system = system_identifier(&c).await;
                    *client = Some((c, system));
                }
            }
            let Some((c, system)) = client.as_ref() else {
                return false;
            };
            match c.simple_query(&witness_sql()).await {
                Ok(messages) => {
                    if let Some((w, timeline)) = witnessed(&messages) {
                        self.saw(*system, timeline.clone());
                        record(&w, timeline, *system);
                    }
                    break;
                }
                Err(e) if refusal(&e) => {
                    self.refused
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    break;
                }
                Err(_) => *client = None,
            }
        }
        covering(tx).is_some()
    }
}

/// Whether the server refused the witness's statement for good: no right
/// to run it, no such function, a read-only server (not a session ended
/// by a restart, which the next connection gets past).
fn refusal(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        let code = c.code();
        code.starts_with("42") || code == "25006" || code.starts_with("0A")
    })
}

/// The witness's id, life and timeline in the answer to [`witness_sql`].
fn witnessed(messages: &[tokio_postgres::SimpleQueryMessage]) -> Option<(TxStart, String)> {
    let tx = tx_start(messages)?;
    let timeline = messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(5).map(str::to_owned),
        _ => None,
    })?;
    Some((tx, timeline))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(xid: i64, reset: Option<i64>) -> TxStart {
        TxStart {
            xid,
            server_started: 1,
            stats_reset: reset,
            backend_pid: None,
        }
    }

    #[test]
    fn only_a_larger_id_of_the_same_life_covers() {
        let tl = || "00000001".to_owned();
        record(&tx(100, Some(7_000_001)), tl(), Some(42));
        assert_eq!(covering(&tx(99, Some(7_000_001))), Some((100, tl())));
        assert_eq!(covering(&tx(100, Some(7_000_001))), None, "not itself");
        assert_eq!(covering(&tx(101, Some(7_000_001))), None);
        assert_eq!(covering(&tx(99, Some(7_000_002))), None, "another life");
        record(&tx(120, Some(7_000_001)), "00000002".into(), None);
        let newest = Some((120, "00000002".to_owned()));
        assert_eq!(covering(&tx(99, Some(7_000_001))), newest);
        record(&tx(200, None), tl(), Some(43));
        assert_eq!(covering(&tx(99, None)), None, "a crash could not be seen");
        assert_eq!(system_of(&tx(1, Some(7_000_001))), Some(42));
        assert_eq!(system_of(&tx(1, Some(7_000_002))), None);
    }

    #[test]
    fn the_witness_statement_reads_a_tx_start() {
        let sql = witness_sql();
        assert!(sql.starts_with("SET synchronous_commit = local; SELECT txid_current()"));
        assert!(sql.contains(TX_START_SQL));
        assert!(sql.contains(TIMELINE_SQL));
        assert!(sql.ends_with("pg_logical_emit_message(true, 'pgtide.witness', '')"));
    }
}
