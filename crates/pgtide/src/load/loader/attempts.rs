//! Many attempts in one transaction, each under a savepoint: how
//! isolation (`reject::isolate`) finds a chunk's bad rows without a
//! commit (and its WAL flush) per attempt.
//!
//! COPY attempts go on the wire when they can (`load/wire_copy.rs`):
//! many in one round trip ([`Loader::attempts`]), each releasing its own
//! savepoint when it loads. One that fails leaves its savepoint open
//! ([`Open::Failed`]) and the transaction aborted; the next statement of
//! the transaction (the next attempts, another kind of attempt, `COMMIT`)
//! rolls back to it first, in the same round trip. `COMMIT` of an
//! aborted transaction would be answered `ROLLBACK` and lose every row of
//! the transaction, so every way out goes through [`Open::settle`].
//!
//! [`Loader::probe`] tries rows alone and undoes them, all in one round
//! trip: how isolation learns the server's reason for each row the client
//! already suspects (`load/screen.rs`).

use super::super::spec::{copy_error, Method};
use super::super::step::in_step_after;
use super::super::wire_copy::{self, Answer, Step};
use super::{check_count, Loader, Pending};
use crate::batch::{tx_start, Batch, BatchError, TxStart, BEGIN_SQL};
use crate::conn::Wire;

/// One attempt on the wire: its savepoint, released when the COPY loads.
const ATTEMPT: &str = "SAVEPOINT pgtide_attempt; {copy}; RELEASE SAVEPOINT pgtide_attempt";

/// Undoes a failed attempt and ends its savepoint; ends with `; ` so that
/// the next statement can follow in the same round trip.
pub(super) const UNDO_ATTEMPT: &str =
    "ROLLBACK TO SAVEPOINT pgtide_attempt; RELEASE SAVEPOINT pgtide_attempt; ";

/// Undoes a probe, whether it loaded or failed.
const UNDO_PROBE: &str = "ROLLBACK TO SAVEPOINT pgtide_probe; RELEASE SAVEPOINT pgtide_probe";

/// What the last attempt on the wire left open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Open {
    /// Nothing: no attempt, or it was settled.
    #[default]
    Nothing,
    /// Its savepoint, around a COPY that failed: to be rolled back to
    /// (the transaction is aborted until then), then released.
    Failed,
}

impl Open {
    /// The statements that settle it (each ending with `; `), and how many.
    pub(super) fn settle(self) -> (&'static str, usize) {
        match self {
            Open::Nothing => ("", 0),
            Open::Failed => (UNDO_ATTEMPT, 2),
        }
    }
}

impl Loader {
    /// Opens one transaction for many attempts (isolation in one
    /// transaction, see [`Loader::attempt`]); returns its id, which
    /// settles a `COMMIT` that gets no answer.
    pub async fn begin(&mut self) -> Result<Option<TxStart>, BatchError> {
        self.in_doubt = None;
        self.written = None;
        self.pending = Pending::default();
        self.outer = None;
        self.open = Open::Nothing;
        self.ensure_stage().await?;
        let messages = self
            .client
            .simple_query(BEGIN_SQL)
            .await
            .map_err(BatchError::plain)?;
        let xid = tx_start(&messages);
        self.witness_start(xid);
        self.began_turn(xid);
        Ok(xid)
    }

    /// Loads `batch` inside the transaction [`Loader::begin`] opened, under
    /// a savepoint: a batch that fails is rolled back to it and the
    /// transaction goes on, so that isolating bad rows costs a savepoint
    /// per attempt instead of a commit (and its WAL flush). A connection
    /// that cannot be proven in step after the rollback is discarded, and
    /// the error then reads as a broken connection.
    pub async fn attempt(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        if let Some(wire) = self.copy_on_wire() {
            let mut results = self.on_wire(&wire, std::slice::from_ref(batch)).await;
            return results.pop().unwrap_or(Ok(0));
        }
        self.through_client(batch).await
    }

    /// Loads `batch` inside a transaction the caller opened and ends
    /// (`--single-transaction`, `load/single.rs`), without a savepoint:
    /// `COPY .. FREEZE` must run in the very (sub)transaction that
    /// truncated or created the table. Its counts wait for
    /// [`Loader::commit_attempts`]; after an error the caller rolls back.
    pub async fn within(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        self.skipped.clear();
        self.ensure_stage().await?;
        let rows = self.run(batch).await?;
        self.count_attempt(batch, rows, 0);
        Ok(rows)
    }

    /// [`Loader::attempt`] through tokio-postgres, for every method.
    async fn through_client(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        self.skipped.clear();
        self.settle().await?;
        // `--on-conflict`: the staging table is emptied before the
        // savepoint, not inside it (see `stage_emptied`); a rollback to the
        // savepoint leaves it empty, as the next attempt needs it.
        let sql = match &self.spec.upsert {
            Some(u) if self.staged.is_none() => {
                format!("{}; SAVEPOINT pgtide_attempt", u.truncate_sql)
            }
            _ => "SAVEPOINT pgtide_attempt".to_owned(),
        };
        self.client
            .batch_execute(&sql)
            .await
            .map_err(BatchError::plain)?;
        self.stage_emptied = self.spec.upsert.is_some() && self.staged.is_none();
        self.state.savepoint = Some("pgtide_attempt");
        let result = self.run(batch).await;
        self.stage_emptied = false;
        self.state.savepoint = None;
        match result {
            Ok(rows) => {
                let on_error = self.skipped.len() as u64;
                self.count_attempt(batch, rows, on_error);
                self.client
                    .batch_execute("RELEASE SAVEPOINT pgtide_attempt")
                    .await
                    .map_err(BatchError::plain)?;
                Ok(rows)
            }
            Err(e) => {
                // Rolled back and released: a savepoint left open would nest
                // the next attempt's inside it, and every statement of the
                // transaction costs more with each level (outside testing:
                // an upsert isolating 200 bad rows took minutes).
                if !in_step_after(&self.client, UNDO_ATTEMPT.trim_end_matches("; ")).await {
                    self.discard();
                    if let Err(closed) = self.client.batch_execute("SELECT 1").await {
                        return Err(BatchError::plain(closed));
                    }
                }
                Err(e)
            }
        }
    }

    /// The connection's stream, when attempts are plain COPYs that
    /// [`wire_copy::script`] can send: not staged for `--on-conflict`, no
    /// ledger row to add (`--resume`). Not `ON_ERROR ignore` either, even
    /// on PostgreSQL 17+: isolation's ranges come after the chunk's own
    /// attempt (which used it) and after screening, so they are expected
    /// to load, and a row that still fails is located by the server.
    fn copy_on_wire(&self) -> Option<Wire> {
        let s = &self.spec;
        let plain = s.method == Method::Copy && s.upsert.is_none() && self.mark.is_none();
        self.wire.clone().filter(|_| plain)
    }

    /// Attempts `batches` in order, each as [`Loader::attempt`] does: the
    /// results of the first ones (at least one; a failure is always the
    /// last result), the batches after them were not run. Plain COPYs go
    /// all in one round trip; other methods one batch per call.
    pub async fn attempts(&mut self, batches: &[Batch]) -> Vec<Result<u64, BatchError>> {
        if let Some(wire) = self.copy_on_wire() {
            return self.on_wire(&wire, batches).await;
        }
        // One at a time: what `ON_ERROR` skipped is only known for the
        // last batch run (`take_skipped`).
        match batches.first() {
            Some(b) => vec![self.through_client(b).await],
            None => Vec::new(),
        }
    }

    /// [`Loader::attempts`] of plain COPYs, in one round trip.
    async fn on_wire(&mut self, wire: &Wire, batches: &[Batch]) -> Vec<Result<u64, BatchError>> {
        self.skipped.clear();
        let mut out = Vec::with_capacity(batches.len());
        let s = self.spec.clone();
        let (settle, n) = std::mem::take(&mut self.open).settle();
        let attempt = ATTEMPT.replace("{copy}", &s.copy_sql);
        let steps: Vec<Step> = batches
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let first = i == 0;
                Step {
                    sql: format!("{}{attempt}", if first { settle } else { "" }),
                    copy: Some((if first { n + 1 } else { 1 }, &b.data)),
                }
            })
            .collect();
        let answers = match self.script(wire, &steps).await {
            Ok(a) => a,
            Err(e) => return vec![Err(e)],
        };
        let mut answers = answers.into_iter().zip(&steps).zip(batches);
        for ((a, step), b) in answers.by_ref() {
            let copy = step.copy.map_or(0, |(c, _)| c);
            match a {
                Answer {
                    error: None,
                    completed,
                    rows: Some(rows),
                } if completed == copy + 2 => {
                    self.count_attempt(b, rows, 0);
                    out.push(Ok(rows));
                }
                Answer {
                    error: Some(e),
                    completed,
                    ..
                } if completed == copy => {
                    self.open = Open::Failed;
                    let e = wire_copy::error(&self.client, wire, e).await;
                    out.push(Err(copy_error(&s, &b.data, e.error)));
                    break;
                }
                _ => {
                    out.push(Err(wire_copy::kill(&self.client, wire).await));
                    return out;
                }
            }
        }
        // After a failure, every later step must have failed at its first
        // statement (the transaction was aborted): nothing else ran.
        let untouched =
            |((a, _), _): ((Answer, &Step), &Batch)| a.error.is_some() && a.completed == 0;
        if !answers.all(untouched) {
            // Out of step: the connection is gone, and that (not the row
            // error) is the last result, so that isolation stops.
            out.pop();
            out.push(Err(wire_copy::kill(&self.client, wire).await));
        }
        out
    }

    /// Tries each of `batches` alone and undoes it, in one round trip:
    /// for each, the server's error, or `None` when it loads on its own.
    /// `None` when this loader cannot (not a plain COPY on the wire). A
    /// batch that loads is inserted and undone: its sequence values are
    /// spent, and its triggers ran (inside the transaction) once more.
    pub async fn probe(
        &mut self,
        batches: &[Batch],
    ) -> Option<Result<Vec<Option<BatchError>>, BatchError>> {
        let s = self.spec.clone();
        let plain = s.method == Method::Copy && s.upsert.is_none();
        let wire = &self.wire.clone().filter(|_| plain && !batches.is_empty())?;
        let (settle, n) = std::mem::take(&mut self.open).settle();
        let mut steps = Vec::with_capacity(2 * batches.len());
        for (i, b) in batches.iter().enumerate() {
            let first = i == 0;
            steps.push(Step {
                sql: format!(
                    "{}SAVEPOINT pgtide_probe; {}",
                    if first { settle } else { "" },
                    s.copy_sql
                ),
                copy: Some((if first { n + 1 } else { 1 }, &b.data)),
            });
            steps.push(Step {
                sql: UNDO_PROBE.to_owned(),
                copy: None,
            });
        }
        let answers = match self.script(wire, &steps).await {
            Ok(a) => a,
            Err(e) => return Some(Err(e)),
        };
        let mut out = Vec::with_capacity(batches.len());
        let mut answers = answers.into_iter();
        for (i, b) in batches.iter().enumerate() {
            let copy = steps[2 * i].copy.map_or(0, |(c, _)| c);
            let (Some(tried), Some(undone)) = (answers.next(), answers.next()) else {
                return Some(Err(wire_copy::kill(&self.client, wire).await));
            };
            let undone = undone.error.is_none() && undone.completed == 2;
            match tried {
                Answer {
                    error: Some(e),
                    completed,
                    ..
                } if undone && completed == copy => {
                    let e = wire_copy::error(&self.client, wire, e).await;
                    out.push(Some(copy_error(&s, &b.data, e.error)));
                }
                Answer {
                    error: None,
                    completed,
                    rows: Some(_),
                } if undone && completed == copy + 1 => out.push(None),
                _ => return Some(Err(wire_copy::kill(&self.client, wire).await)),
            }
        }
        Some(Ok(out))
    }

    async fn script(&mut self, wire: &Wire, steps: &[Step<'_>]) -> Result<Vec<Answer>, BatchError> {
        let s = &self.spec;
        wire_copy::script(&self.client, wire, &s.framing, s.message_bytes, steps).await
    }

    /// Counts a loaded attempt's rows against its records, for the commit.
    fn count_attempt(&mut self, batch: &Batch, rows: u64, on_error: u64) {
        match check_count(batch.records, rows, on_error, self.spec.table_may_skip) {
            Ok(n) => self.pending.skipped_by_table += n,
            Err(bug) => self.pending.bug = self.pending.bug.take().or(Some(bug)),
        }
        self.pending
            .merged
            .add(std::mem::take(&mut self.merged_now));
    }

    /// Settles what the last attempt on the wire left open, before any
    /// other statement of the transaction.
    pub(super) async fn settle(&mut self) -> Result<(), BatchError> {
        let (sql, _) = std::mem::take(&mut self.open).settle();
        if sql.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.client.batch_execute(sql).await {
            self.discard();
            return Err(BatchError::plain(e));
        }
        Ok(())
    }

    /// Commits the transaction of [`Loader::begin`]: `Ok(true)` committed,
    /// `Ok(false)` certainly not (the server refused it, e.g. a deferred
    /// constraint), `Err` when the answer was lost with the connection
    /// (see [`Loader::in_doubt`]: its `xid` settles it).
    pub async fn commit_attempts(&mut self, xid: Option<TxStart>) -> Result<bool, BatchError> {
        let pending = std::mem::take(&mut self.pending);
        if self.turn.is_some() {
            // The wait for its turn asks the server in this transaction,
            // which must be out of any failed savepoint first. If that
            // fails, COMMIT was never sent: certainly not committed.
            if self.settle().await.is_err() {
                return Ok(false);
            }
            self.witness_wait(xid).await;
            if self.wait_turn(xid).await.is_err() {
                // Given way: certainly not committed.
                return Ok(false);
            }
        } else {
            self.witness_wait(xid).await;
        }
        // The last attempt's savepoint is settled in the same round trip;
        // if that fails, COMMIT does not run.
        let (settle, _) = std::mem::take(&mut self.open).settle();
        match self.client.batch_execute(&format!("{settle}COMMIT")).await {
            Ok(()) => {
                self.skipped_by_table += pending.skipped_by_table;
                self.bug = self.bug.take().or(pending.bug);
                self.merged.add(pending.merged);
                Ok(true)
            }
            Err(error) if crate::error::classify(&error) == crate::error::Class::Connection => {
                let ledger = self.written.take();
                self.in_doubt = xid.map(|tx| super::InDoubt {
                    tx,
                    ledger,
                    rows: 0,
                    skipped_by_table: pending.skipped_by_table,
                    merged: pending.merged,
                    bug: pending.bug.map(|b| b.message().to_owned()),
                    lazy: false,
                });
                Err(BatchError {
                    record: None,
                    commit_unknown: true,
                    error,
                })
            }
            Err(_) => {
                if !super::rollback_in_step(&self.client).await {
                    self.discard();
                }
                Ok(false)
            }
        }
    }

    /// Ends the transaction of [`Loader::begin`] without keeping anything.
    pub async fn rollback_attempts(&mut self) {
        self.pending = Pending::default();
        self.outer = None;
        self.open = Open::Nothing;
        if !super::rollback_in_step(&self.client).await {
            self.discard();
        }
    }
}
