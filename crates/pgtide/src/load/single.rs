//! `--single-transaction`: the whole load is one transaction on one
//! connection, committed only when every chunk loaded and the reader
//! reached the end of every input; anything else rolls it all back
//! (the `TRUNCATE` and the `CREATE TABLE` of `--create` with it).
//!
//! Why one connection: a transaction belongs to one session, and the
//! alternatives (two-phase commit across the workers' sessions, or a
//! shadow table swapped in at the end) need server settings or take the
//! table's identity (grants, dependent views, foreign keys) away from the
//! user. `--workers N` above 1 is refused rather than silently ignored.
//!
//! Why no `--rejects`: isolating bad rows inside one transaction needs a
//! savepoint per attempt, and `COPY .. FREEZE` must run in the very
//! subtransaction that truncated or created the table; and `--resume`
//! records each chunk's commit, which this mode does not have.
//!
//! The same transaction lets `COPY .. FREEZE` write the rows frozen when
//! the table was truncated or created in it ([`freeze`]).

use super::loader::{Batch, Loader, Method};
use super::outcome::Failed;
use super::worker::{failed_chunk, finished, misfit_line_ending, Ctx};
use super::LoadOptions;
use crate::batch::TxStart;
use crate::catalog::Table;
use crate::chunk::Chunk;
use crate::error::{classify, Class, Error, ErrorKind, Result};
use crate::progress::Progress;

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
    if opts.rejects.is_some() || opts.max_rejects.is_some() {
        return refuse(
            "--rejects",
            "setting bad rows aside needs a savepoint per attempt, which COPY FREEZE forbids",
            "load without --single-transaction to reject rows one by one, or fix the rows \
             the error names and run again",
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
    Ok(())
}

/// Loads every chunk into the open transaction, in input order; stops at
/// the first failure (recorded, the transaction rolled back, the reader
/// told to stop by closing the channel). Returns the loader, whose
/// transaction [`finish`] ends.
pub(super) async fn work(
    mut loader: Loader,
    rx: async_channel::Receiver<Chunk>,
    ctx: &Ctx,
) -> (Loader, bool) {
    while let Ok(chunk) = rx.recv().await {
        if chunk.eol_errors > 0 {
            // Without --rejects, the misfit row stops the load as the
            // server would.
            if !misfit_line_ending(ctx, &chunk, loader.spec()) {
                rx.close();
                loader.rollback_attempts().await;
                return (loader, false);
            }
        }
        let batch = Batch {
            data: chunk.data.clone(),
            records: chunk.records,
        };
        match loader.within(&batch).await {
            Ok(rows) => {
                let lines = vec![(chunk.first_line, chunk.last_line())];
                finished(ctx, 0, &chunk, rows, Vec::new(), lines);
            }
            Err(e) => {
                let row = classify(&e.error) == Class::Row;
                let mut failed = failed_chunk(&chunk, loader.spec(), e);
                // The chunk's own hint speaks of committed lines and
                // --rejects; here nothing is committed.
                let hint = if row { ROW_ROLLED_BACK } else { ROLLED_BACK };
                failed.error = failed.error.with_hint(hint);
                ctx.shared.lock().expect("worker state").failed.push(failed);
                rx.close();
                loader.rollback_attempts().await;
                return (loader, false);
            }
        }
    }
    (loader, true)
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
        (true, true) => commit(&mut loader, xid, ctx).await,
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
async fn commit(loader: &mut Loader, xid: Option<TxStart>, ctx: &Ctx) -> bool {
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
        false
    };
    if let Err(e) = loader
        .client()
        .batch_execute("SET CONSTRAINTS ALL IMMEDIATE")
        .await
    {
        loader.rollback_attempts().await;
        return fail(Error::from(e).with_hint(ROLLED_BACK));
    }
    match loader.commit_attempts(xid).await {
        Ok(true) => true,
        Ok(false) => fail(
            Error::new(
                ErrorKind::Server,
                "the server refused to COMMIT the load's transaction",
            )
            .with_hint(ROLLED_BACK),
        ),
        Err(e) => fail(Error::from(e.error).with_hint(
            "the connection broke while committing the load's one transaction: the rows are \
             all in the table or none is; count them before loading again",
        )),
    }
}

/// The hint of a load whose transaction was rolled back.
const ROLLED_BACK: &str = "--single-transaction: nothing was committed, the table is as it was \
                           before the load (not truncated); fix the cause and run it again";

/// The hint of a row that stopped a single-transaction load (the
/// chunk's own hint speaks of committed lines and `--rejects`).
const ROW_ROLLED_BACK: &str = "--single-transaction: nothing was committed, the table is as it \
                               was before the load (not truncated); fix this row and run the \
                               load again, or load without --single-transaction and with \
                               --rejects FILE to set bad rows aside";

/// What the summary adds about the one transaction.
pub(super) fn note(failed: bool) -> String {
    match failed {
        false => {
            "--single-transaction: every row was committed by one COMMIT at the end".to_owned()
        }
        true => "--single-transaction: the load was rolled back whole; nothing was committed \
                 and the table is as it was before (a --truncate did not empty it)"
            .to_owned(),
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
