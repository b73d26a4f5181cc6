//! Loading a batch whatever befalls the session: reconnect with backoff
//! after a broken connection (settling a `COMMIT` whose answer was lost),
//! retry after deadlocks, serialization failures and lock timeouts, and
//! [`Session`], the same for isolation's ranges. Apart from `worker.rs`,
//! which decides a chunk's fate, since this is how any batch survives.

use std::future::Future;
use std::time::Duration;

use super::ctx::Ctx;
use super::loader::new_loader;
use super::loader::{Batch, BatchError, InDoubt, Loader};
use crate::error::{classify, Class};
use crate::progress::Progress;
use crate::reject::isolate::Resilient;

/// Reconnect attempts after a broken connection, with delays doubling
/// from [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`]: about a minute in all.
/// Crash recovery after `kill -9` of a backend or `pg_ctl restart -m
/// immediate` took 4-9 s on a busy 2-CPU machine (outside testing), more
/// than the 8 s this once allowed. A dead server is still reported, a
/// minute later.
const RECONNECTS: u32 = 15;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The pause before reconnect attempt `n` (1-based).
fn backoff(n: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

/// Loads a batch as a chunk must be loaded, whatever befalls the session:
///
/// - a broken connection: reconnect with backoff and retry, never loading
///   a row twice: when the break hid the answer to `COMMIT`, the new
///   connection asks the server what became of that transaction
///   (`txid_status`) and resends only if it did not commit;
/// - a deadlock, serialization failure or lock timeout (`Class::Transient`):
///   the transaction was rolled back and nothing is wrong with the rows,
///   so retry after a growing, jittered pause (two workers that deadlocked
///   must not meet again at the same instant);
/// - a connection the loader discarded after an error (it may be out of
///   step with the server, see `step::rollback_in_step`): replace it at
///   once, so the caller (isolation) gets a clean one with the error.
///
/// Isolation loads its ranges through here too ([`Session`]), so a
/// server restart or a deadlock while bad rows are isolated is survived
/// exactly as on the main path.
pub(super) async fn load_reconnecting(
    loader: &mut Loader,
    ctx: &Ctx,
    batch: &Batch,
) -> Result<u64, BatchError> {
    let (mut reconnects, mut transients, mut give_ways) = (0, 0, 0);
    loop {
        let e = match loader.load(batch).await {
            Ok(rows) => return Ok(rows),
            Err(e) => e,
        };
        match classify(&e.error) {
            Class::Connection => {
                // Given way to an earlier chunk (`load/turns.rs`): the
                // server is fine, so a new connection at once, uncounted.
                if loader.take_gave_way() && give_ways < GIVE_WAYS {
                    give_ways += 1;
                    if let Reconnected::Resend = reconnect(loader, ctx, None).await {
                        continue;
                    }
                }
                let in_doubt = loader.in_doubt();
                if e.commit_unknown && in_doubt.is_none() {
                    return Err(e);
                }
                match reconnect_with_backoff(loader, ctx, in_doubt, &mut reconnects).await {
                    Reconnected::Committed(rows) => return Ok(rows),
                    Reconnected::Resend => {}
                    Reconnected::Unknown | Reconnected::Failed => return Err(e),
                }
            }
            Class::Transient if transients < TRANSIENT_RETRIES => {
                transients += 1;
                tokio::time::sleep(transient_pause(transients)).await;
                replace_discarded(loader, ctx).await;
            }
            _ => {
                replace_discarded(loader, ctx).await;
                return Err(e);
            }
        }
    }
}

/// Times one batch may give way to an earlier chunk at once
/// (`load/turns.rs`) before it waits like after a broken connection.
const GIVE_WAYS: u32 = 100;

/// Retries of one batch after deadlocks, serialization failures and lock
/// timeouts, with pauses from [`transient_pause`]: about 10 s in all.
const TRANSIENT_RETRIES: u32 = 10;

/// The pause before the `n`th retry after a transient error: 50 ms
/// doubling up to 2 s, plus up to half as much again at random.
fn transient_pause(n: u32) -> Duration {
    let base = Duration::from_millis(50 << n.min(6)).min(Duration::from_secs(2));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base + base.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

/// What became of a batch on a new connection.
enum Reconnected {
    /// Its `COMMIT` was in doubt and it did commit, with these rows.
    Committed(u64),
    /// Nothing of it is committed: send it again.
    Resend,
    /// Its `COMMIT` was in doubt and the server cannot say: stop.
    Unknown,
    /// No new connection (yet).
    Failed,
}

/// Reconnects with growing pauses ([`backoff`]), `RECONNECTS` attempts in all for one
/// batch (`attempts` counts them). The batch in doubt is kept across
/// attempts and asked about on every new connection: nothing is sent
/// again before its fate is known.
async fn reconnect_with_backoff(
    loader: &mut Loader,
    ctx: &Ctx,
    in_doubt: Option<InDoubt>,
    attempts: &mut u32,
) -> Reconnected {
    while *attempts < RECONNECTS {
        *attempts += 1;
        tokio::time::sleep(backoff(*attempts)).await;
        match reconnect(loader, ctx, in_doubt.clone()).await {
            Reconnected::Failed => {}
            settled => return settled,
        }
    }
    Reconnected::Failed
}

/// Replaces the loader's connection; settles a `COMMIT` in doubt on the
/// new one before anything else is sent.
async fn reconnect(loader: &mut Loader, ctx: &Ctx, in_doubt: Option<InDoubt>) -> Reconnected {
    let Ok((client, notices, wire)) = ctx.target.connect_wire().await else {
        return Reconnected::Failed;
    };
    Progress::add(&ctx.progress.reconnects, 1);
    let settled = match in_doubt {
        None => Reconnected::Resend,
        Some(ref d) => {
            let status = match d.lazy {
                true => super::lazy::durable(&client, &d.tx, d.ledger.as_ref()).await,
                false => crate::settle::commit_status(&client, &d.tx, d.ledger.as_ref()).await,
            };
            match status {
                Ok(Some(true)) => Reconnected::Committed(d.rows),
                Ok(Some(false)) => Reconnected::Resend,
                Ok(None) => Reconnected::Unknown,
                // The new connection broke too: ask again on the next one.
                Err(_) => return Reconnected::Failed,
            }
        }
    };
    // Rows `ON_ERROR` skipped in a batch that turned out committed still
    // need their verdict.
    let skipped = loader.take_skipped();
    let mark = loader.take_mark();
    let turn = loader.take_turn();
    // The counts of batches committed before the connection broke: they
    // are collected once the chunk is over, and a chunk isolated in many
    // transactions may reconnect midway (outside testing: rows a trigger
    // dropped went uncounted, and the load ended with "this is a bug").
    let counts = loader.take_counts();
    *loader = new_loader(client, notices, wire, &ctx.spec);
    loader.carry_counts(counts);
    loader.set_mark(mark);
    loader.set_turn(turn);
    if let (Reconnected::Committed(_), Some(d)) = (&settled, in_doubt) {
        loader.committed_in_doubt(d);
        loader.carry_skipped(skipped);
    }
    settled
}

/// A loader that closed its connection on purpose after an error gets a
/// new one now; if that fails, its next load fails as a broken connection
/// and goes through the reconnect path with backoff.
async fn replace_discarded(loader: &mut Loader, ctx: &Ctx) {
    if loader.is_closed() {
        reconnect(loader, ctx, None).await;
    }
}

/// After a `COMMIT` of [`Loader::commit_attempts`] whose answer was lost
/// with the connection: a new connection (with backoff) asks the server
/// what became of the transaction (`txid_status`, guarded against an id
/// reused after a crash, `crate::settle`). `Some(true)` committed (the
/// new loader has counted what the table dropped), `Some(false)` certainly
/// not, `None` nobody can tell (or no new connection). The loader gets the
/// new connection whenever one could be made.
pub(super) async fn settle_lost_commit(loader: &mut Loader, ctx: &Ctx) -> Option<bool> {
    let in_doubt = loader.in_doubt();
    settle_in_doubt(loader, ctx, in_doubt).await
}

/// Settles `in_doubt` on a new connection (with backoff), which the loader
/// keeps: `Some(true)` committed, `Some(false)` certainly not, `None`
/// nobody can tell (or no new connection, or nothing was asked).
pub(super) async fn settle_in_doubt(
    loader: &mut Loader,
    ctx: &Ctx,
    in_doubt: Option<InDoubt>,
) -> Option<bool> {
    let mut reconnects = 0;
    let asked = in_doubt.is_some();
    match reconnect_with_backoff(loader, ctx, in_doubt, &mut reconnects).await {
        Reconnected::Committed(_) => Some(true),
        Reconnected::Resend if asked => Some(false),
        _ => None,
    }
}

/// A worker's loader as isolation sees it: each range is loaded as the
/// main path loads a chunk ([`load_reconnecting`]).
pub(super) struct Session<'a> {
    pub loader: &'a mut Loader,
    pub ctx: &'a Ctx,
}

impl Resilient for Session<'_> {
    fn dialect(&self) -> &copyfmt::scan::Dialect {
        &self.loader.spec().dialect
    }

    fn gapped_batches(&self) -> bool {
        !self.loader.has_mark()
    }

    fn before_triggers(&self) -> bool {
        self.loader.spec().table_may_skip
    }

    fn relname(&self) -> &str {
        &self.loader.spec().relname
    }
    fn parameter_columns(&self) -> Vec<String> {
        self.loader.spec().parameter_columns()
    }

    fn take_skipped(&mut self) -> Vec<u64> {
        self.loader.take_skipped()
    }

    fn begin(
        &mut self,
    ) -> impl Future<Output = Result<Option<crate::batch::TxStart>, BatchError>> + Send {
        self.loader.begin()
    }

    fn attempt(&mut self, batch: &Batch) -> impl Future<Output = Result<u64, BatchError>> + Send {
        self.loader.attempt(batch)
    }

    fn attempts(
        &mut self,
        batches: &[Batch],
    ) -> impl Future<Output = Vec<Result<u64, BatchError>>> + Send {
        self.loader.attempts(batches)
    }

    fn probe(
        &mut self,
        batches: &[Batch],
    ) -> impl Future<Output = Option<Result<Vec<Option<BatchError>>, BatchError>>> + Send {
        self.loader.probe(batches)
    }

    fn missing_references(
        &mut self,
        batch: &Batch,
        eol: copyfmt::scan::Eol,
    ) -> impl Future<Output = Option<Vec<u64>>> + Send {
        self.loader.missing_references(batch, eol)
    }

    async fn commit(&mut self, xid: Option<crate::batch::TxStart>) -> Result<bool, BatchError> {
        let e = match self.loader.commit_attempts(xid).await {
            Ok(committed) => return Ok(committed),
            Err(e) => e,
        };
        settle_lost_commit(self.loader, self.ctx).await.ok_or(e)
    }

    fn rollback(&mut self) -> impl Future<Output = ()> + Send {
        self.loader.rollback_attempts()
    }

    fn load(&mut self, batch: &Batch) -> impl Future<Output = Result<u64, BatchError>> + Send {
        load_reconnecting(self.loader, self.ctx, batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnects_wait_about_a_minute_in_all() {
        assert_eq!(backoff(1), FIRST_BACKOFF);
        assert_eq!(backoff(2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(40), MAX_BACKOFF);
        let total: Duration = (1..=RECONNECTS).map(backoff).sum();
        assert!(
            total >= Duration::from_secs(50) && total <= Duration::from_secs(70),
            "{total:?}"
        );
    }
}
