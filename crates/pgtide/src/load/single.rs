//! `--single-transaction`: the whole load is one transaction on one
//! connection, committed only when every chunk loaded (or, with
//! `--rejects`, was loaded but for its rejected rows) and the reader
//! reached the end of every input; anything else rolls it all back (the
//! `TRUNCATE` and the `CREATE TABLE` of `--create` with it).
//!
//! Why one connection: a transaction belongs to one session, and the
//! alternatives (two-phase commit across the workers' sessions, or a
//! shadow table swapped in at the end) need server settings or take the
//! table's identity (grants, dependent views, foreign keys) away from the
//! user. `--workers N` above 1 is refused rather than silently ignored;
//! so is `--resume`, which records each chunk's commit, which this mode
//! does not have.
//!
//! A `COMMIT` whose answer is lost with the connection is settled as the
//! per-chunk path settles one (`reconnect::settle_lost_commit`): the
//! transaction id read at `BEGIN`, asked about on a new connection
//! (`txid_status`, guarded against an id reused after a crash). Committed:
//! the load succeeded. Aborted: nothing was loaded, and the error says so.
//! Only when the server cannot tell is the load reported in doubt.
//!
//! `--rejects`: every chunk is attempted under a savepoint, so that a bad
//! row rolls back that attempt and not the transaction; a chunk that failed
//! is isolated by `reject::isolate` as in a per-chunk load, with a savepoint
//! around the chunk ([`Nested`]) standing for the transaction isolation
//! would begin and commit. The rows found bad go to the reject file with
//! their line and the server's reason; everything else commits with the
//! one `COMMIT` at the end. What costs:
//!
//! - no `COPY .. FREEZE`: PostgreSQL refuses it in a subtransaction other
//!   than the one that emptied or created the table ([`freeze`] says so);
//! - each chunk is a subtransaction: past 64 of them the transaction's
//!   subtransaction cache overflows, which slows other sessions' snapshots
//!   a little until the load ends;
//! - a deferred constraint is still checked at the end, for the whole
//!   load: a row that breaks it rolls the load back rather than being
//!   rejected (the server does not say which row it was).
//!
//! When such a load rolls back (a fatal error, Ctrl-C, `--max-rejects`
//! exceeded, a deferred constraint), nothing of the input is in the
//! table, and the reject file keeps the rows found bad up to then: they
//! are bad whatever happens to the rest, so they are kept to be fixed
//! before the load is run again. The summary and the error's hint say
//! that nothing was committed; the file is not a complement of the table.
//!
//! The same transaction lets `COPY .. FREEZE` write the rows frozen when
//! the table was truncated or created in it ([`freeze`]), without
//! `--rejects`: each chunk's `COPY` then runs in the transaction itself,
//! and the first error ends the load.

use std::future::Future;

use super::ctx::Ctx;
use super::loader::{Batch, BatchError, Loader, Method};
use super::outcome::Failed;
use super::reconnect::settle_lost_commit;
use super::tally::gate;
use super::tally::{failed_chunk, finished};
use super::worker::misfit_line_ending;
use super::LoadOptions;
use crate::batch::TxStart;
use crate::catalog::Table;
use crate::chunk::Chunk;
use crate::error::{classify, Class, Error, ErrorKind, Result};
use crate::progress::Progress;
use crate::reject::isolate::{isolate, Resilient, Start};

/// Refuses what cannot be one transaction, before any server is asked.
pub(super) fn check(opts: &LoadOptions) -> Result<()> {
    if !opts.single_transaction {
        return Ok(());
    }
    let refuse = |what: &str, why: &str, hint: &str| {
        Err(Error::config(format!(
            "--single-transaction cannot be combined with {what}: {why}"
        ))
        .with_hint(hint.to_owned()))
    };
    if opts.workers > 1 {
        return refuse(
            &format!("--workers {}", opts.workers),
            "one transaction lives on one connection",
            "drop --workers (the load runs on one connection), or drop --single-transaction \
             to load in parallel with one transaction per chunk",
        );
    }
    if opts.resume.is_some() {
        return refuse(
            "--resume",
            "--resume records each chunk's commit, and here nothing commits before the end",
            "an interrupted --single-transaction load left nothing behind: run it again",
        );
    }
    Ok(())
}

/// Whether the load's COPY can carry FREEZE: `Err` says why not, in one
/// sentence. `fresh`: the table is created (`--create`) or truncated
/// (`--truncate`) by this load, in its transaction when there is one.
pub(super) fn freeze(
    opts: &LoadOptions,
    table: &Table,
    method: Method,
    fresh: bool,
) -> std::result::Result<(), String> {
    if !opts.single_transaction {
        return Err(
            "COPY FREEZE needs the table created or truncated in the transaction that loads \
             it, and every chunk commits on its own (--single-transaction --truncate allows it)"
                .to_owned(),
        );
    }
    if opts.on_conflict.is_some() {
        return Err("--on-conflict merges rows by INSERT .. ON CONFLICT, not by COPY".to_owned());
    }
    if method != Method::Copy {
        return Err(format!(
            "--method {} does not send the rows by the load's own COPY (FREEZE is used with \
             --method copy)",
            method.name()
        ));
    }
    match table.kind {
        'r' => {}
        'p' => {
            return Err(format!(
                "{} is partitioned; COPY FREEZE works on plain tables only",
                table.name
            ))
        }
        'f' => {
            return Err(format!(
                "{} is a foreign table; COPY FREEZE works on plain tables only",
                table.name
            ))
        }
        _ => return Err(format!("{} is not a plain table", table.name)),
    }
    if !fresh {
        return Err(
            "COPY FREEZE needs a table emptied or made by the load's transaction: add \
             --truncate (or --create a new table)"
                .to_owned(),
        );
    }
    if opts.rejects.is_some() {
        return Err(
            "--rejects: each chunk's COPY runs under a savepoint so that a bad row undoes only \
             that chunk's attempt, and PostgreSQL refuses COPY FREEZE in a subtransaction other \
             than the one that emptied or created the table"
                .to_owned(),
        );
    }
    Ok(())
}

/// Loads every chunk into the open transaction, in input order; stops at
/// the first failure (recorded, the transaction rolled back, the reader
/// told to stop by closing the channel). With `--rejects`, bad rows are
/// set aside instead ([`rejecting`]). Returns the loader, whose
/// transaction [`finish`] ends.
pub(super) async fn work(
    mut loader: Loader,
    rx: async_channel::Receiver<Chunk>,
    ctx: &Ctx,
) -> (Loader, bool) {
    while let Ok(chunk) = rx.recv().await {
        let ok = match ctx.isolate {
            true => rejecting(&mut loader, ctx, &chunk).await,
            false => whole(&mut loader, ctx, &chunk).await,
        };
        if !ok {
            rx.close();
            loader.rollback_attempts().await;
            return (loader, false);
        }
    }
    (loader, true)
}

/// Loads a chunk in the transaction itself (COPY FREEZE allowed): the
/// first bad row stops the load. False when it failed (recorded).
async fn whole(loader: &mut Loader, ctx: &Ctx, chunk: &Chunk) -> bool {
    // The misfit row stops the load as the server would.
    if chunk.eol_errors > 0 && !misfit_line_ending(ctx, chunk, loader.spec()) {
        return false;
    }
    let batch = Batch {
        data: chunk.data.clone(),
        records: chunk.records,
    };
    match loader.within(&batch).await {
        Ok(rows) => {
            let lines = vec![(chunk.first_line, chunk.last_line())];
            let bytes = chunk.data.len() as u64;
            finished(ctx, 0, chunk, rows, bytes, Vec::new(), lines);
            true
        }
        Err(e) => {
            fail_chunk(loader, ctx, chunk, e);
            false
        }
    }
}

/// Records a chunk that stopped the load. The chunk's own hint speaks of
/// committed lines and `--rejects`; here nothing is committed.
fn fail_chunk(loader: &Loader, ctx: &Ctx, chunk: &Chunk, e: BatchError) {
    let row = classify(&e.error) == Class::Row && !ctx.isolate;
    let mut failed = failed_chunk(chunk, loader.spec(), e);
    let hint = if row { ROW_ROLLED_BACK } else { ROLLED_BACK };
    failed.error = failed.error.with_hint(hint);
    ctx.shared.lock().expect("worker state").failed.push(failed);
}

/// `--rejects`: loads a chunk under a savepoint; when rows are bad,
/// isolates them inside the transaction ([`Nested`]) as a per-chunk load
/// would, and hands them to the reject file. False when the load must
/// stop (recorded): an error that is not a row's, `--max-rejects`.
async fn rejecting(loader: &mut Loader, ctx: &Ctx, chunk: &Chunk) -> bool {
    let start = if chunk.eol_errors > 0 {
        // Never sent whole (see the worker): its runs go by isolation.
        Start::Screened
    } else {
        let batch = Batch {
            data: chunk.data.clone(),
            records: chunk.records,
        };
        match loader.attempt_chunk(&batch).await {
            Ok(rows) => match loader.take_skipped() {
                skipped if skipped.is_empty() => {
                    let lines = vec![(chunk.first_line, chunk.last_line())];
                    let bytes = chunk.data.len() as u64;
                    finished(ctx, 0, chunk, rows, bytes, Vec::new(), lines);
                    return true;
                }
                skipped => Start::Skipped { rows, skipped },
            },
            Err(e) if classify(&e.error) == Class::Row => {
                let suspects = loader.screen(chunk).await;
                match suspects.is_empty() {
                    true => Start::Failed(e),
                    false => Start::Suspects(suspects),
                }
            }
            Err(e) => {
                fail_chunk(loader, ctx, chunk, e);
                return false;
            }
        }
    };
    let (iso, err) = isolate(&mut Nested { loader }, chunk, start, &mut gate(ctx)).await;
    Progress::add(&ctx.progress.server_skipped, iso.server_skipped);
    finished(ctx, 0, chunk, iso.loaded, iso.bytes, iso.rejects, iso.done);
    let Some(error) = err else { return true };
    let hint = match error.kind() {
        ErrorKind::RejectLimit => REJECT_LIMIT,
        _ => ROLLED_BACK,
    };
    ctx.shared
        .lock()
        .expect("worker state")
        .failed
        .push(Failed {
            seq: chunk.seq,
            error: error.with_hint(hint),
            row: None,
        });
    false
}

/// The load's loader as isolation sees it inside the one transaction:
/// isolation's transaction per chunk is a savepoint of the load's
/// (`loader/nested.rs`), and its attempts nest under it. Nothing is
/// retried on a new connection: a lost connection lost the whole
/// transaction, so its error stops the load.
struct Nested<'a> {
    loader: &'a mut Loader,
}

impl Resilient for Nested<'_> {
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

    /// Isolation range by range (after a pass that could not be kept):
    /// each range under a savepoint of its own, kept when it loads.
    fn load(&mut self, batch: &Batch) -> impl Future<Output = Result<u64, BatchError>> + Send {
        self.loader.attempt(batch)
    }

    async fn begin(&mut self) -> Result<Option<TxStart>, BatchError> {
        self.loader.enter_chunk().await.map(|()| None)
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

    async fn commit(&mut self, _: Option<TxStart>) -> Result<bool, BatchError> {
        self.loader.leave_chunk().await.map(|()| true)
    }

    fn rollback(&mut self) -> impl Future<Output = ()> + Send {
        self.loader.undo_chunk()
    }
}

/// Ends the load's transaction: COMMIT when every chunk loaded (`ok`)
/// and the reader finished cleanly (`read_ok`), else ROLLBACK. After a
/// rollback nothing counts as loaded or done, and the failure says so.
pub(super) async fn finish(
    mut loader: Loader,
    xid: Option<TxStart>,
    ctx: &Ctx,
    ok: bool,
    read_ok: bool,
) {
    let committed = match (ok, read_ok) {
        (true, true) => match commit(&mut loader, xid, ctx).await {
            Some(c) => c,
            // Nobody can tell: what was sent is in doubt (all of it is in
            // the table or none is), no line is listed as committed, and
            // the failure says so.
            None => {
                let sent = Progress::get(&ctx.progress.rows_loaded);
                Progress::add(&ctx.progress.rows_in_doubt, sent);
                ctx.progress.undo_loaded();
                ctx.shared.lock().expect("worker state").done.clear();
                return;
            }
        },
        (true, false) => {
            loader.rollback_attempts().await;
            false
        }
        // Rolled back already, when the chunk failed.
        (false, _) => false,
    };
    let skipped = loader.take_skipped_by_table();
    let mut s = ctx.shared.lock().expect("worker state");
    if committed {
        Progress::add(&ctx.progress.rows_skipped_by_table, skipped);
        s.merged.add(loader.take_merged());
        if let Some(bug) = loader.take_bug() {
            s.failed.push(Failed {
                seq: u64::MAX,
                error: bug,
                row: None,
            });
        }
        return;
    }
    // Counted as they went; rolled back now.
    ctx.progress.undo_loaded();
    s.done.clear();
    s.merged = Default::default();
}

/// `SET CONSTRAINTS ALL IMMEDIATE` first, so that a deferred constraint
/// fails with its own words rather than as a refused COMMIT; then COMMIT.
/// A COMMIT whose answer was lost is settled on a new connection; `None`
/// when it cannot be (the failure, recorded, says so).
async fn commit(loader: &mut Loader, xid: Option<TxStart>, ctx: &Ctx) -> Option<bool> {
    let fail = |error: Error| {
        ctx.shared
            .lock()
            .expect("worker state")
            .failed
            .push(Failed {
                seq: u64::MAX,
                error,
                row: None,
            });
        Some(false)
    };
    if let Err(e) = loader.constraints_now().await {
        loader.rollback_attempts().await;
        return fail(Error::from(e).with_hint(ROLLED_BACK));
    }
    let e = match loader.commit_attempts(xid).await {
        Ok(true) => return Some(true),
        Ok(false) => {
            return fail(
                Error::new(
                    ErrorKind::Server,
                    "the server refused to COMMIT the load's transaction",
                )
                .with_hint(ROLLED_BACK),
            )
        }
        Err(e) => e,
    };
    match settle_lost_commit(loader, ctx).await {
        Some(true) => Some(true),
        Some(false) => fail(
            Error::new(
                ErrorKind::ConnectionLost,
                format!(
                    "the connection broke while committing the load's one transaction, and \
                     the server says it did not commit: nothing was loaded ({})",
                    Error::from(e.error).message()
                ),
            )
            .with_hint(ROLLED_BACK),
        ),
        None => {
            fail(Error::from(e.error).with_hint(IN_DOUBT));
            None
        }
    }
}

/// The hint of a load whose one COMMIT nobody can place.
const IN_DOUBT: &str = "the connection broke while committing the load's one transaction and \
                        the server cannot say whether it committed: the rows are all in the \
                        table or none is; count them before loading again";

/// The hint of a load whose transaction was rolled back.
const ROLLED_BACK: &str = "--single-transaction: nothing was committed, the table is as it was \
                           before the load (not truncated); fix the cause and run it again";

/// The hint of a row that stopped a single-transaction load (the
/// chunk's own hint speaks of committed lines and `--rejects`).
const ROW_ROLLED_BACK: &str = "--single-transaction: nothing was committed, the table is as it \
                               was before the load (not truncated); fix this row and run the \
                               load again, or add --rejects FILE to set bad rows aside (the \
                               rest still commits as one transaction, without COPY FREEZE)";

/// The hint of a load rolled back because `--max-rejects` was exceeded.
const REJECT_LIMIT: &str = "--single-transaction: nothing was committed, the table is as it was \
                            before the load (not truncated); the reject file holds the rows \
                            found bad so far: fix them, or raise --max-rejects, and run the \
                            load again";

/// Whether `failure` says the one COMMIT may or may not have taken effect.
pub(super) fn in_doubt(failure: Option<&Error>) -> bool {
    failure.is_some_and(|e| e.hint() == Some(IN_DOUBT))
}

/// What the summary adds about the one transaction, given its failure.
pub(super) fn note(failure: Option<&Error>, rejected: u64) -> String {
    if in_doubt(failure) {
        return "--single-transaction: whether the one COMMIT took effect is unknown: every \
                row counted as loaded is in the table, or none is"
            .to_owned();
    }
    match (failure.is_some(), rejected) {
        (false, 0) => {
            "--single-transaction: every row was committed by one COMMIT at the end".to_owned()
        }
        (false, n) => format!(
            "--single-transaction: every row but the {n} rejected was committed by one COMMIT \
             at the end"
        ),
        (true, 0) => "--single-transaction: the load was rolled back whole; nothing was \
                      committed and the table is as it was before (a --truncate did not empty \
                      it)"
        .to_owned(),
        (true, n) => format!(
            "--single-transaction: the load was rolled back whole; nothing was committed and \
             the table is as it was before (a --truncate did not empty it); the reject file \
             keeps the {n} rows found bad before that, to be fixed (the other rows are not \
             in the table either)"
        ),
    }
}

/// Shared with the pool: a stop request ends a single-transaction load
/// with nothing committed.
pub(super) fn interrupted() -> Error {
    Error::new(
        ErrorKind::Interrupted,
        "interrupted: the load's one transaction was rolled back",
    )
    .with_hint(ROLLED_BACK)
}
