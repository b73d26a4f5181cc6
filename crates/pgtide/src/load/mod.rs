//! Loading inputs into a table.
//!
//! ```text
//! source (read + decompress, one thread)
//!   -> chunk::Chunker (cut at record boundaries)
//!   -> bounded channel of Chunks (depth 1)
//!   -> N workers, one connection each -> loader::Loader::load (one
//!      transaction per batch: COPY, binary COPY or INSERTs)
//! ```
//!
//! # Commit model
//! Each chunk is loaded in its own transaction (`BEGIN`, the method's
//! statements, `COMMIT`) and is committed on its own, whatever the number
//! of workers. When a chunk fails, no new chunk is started, chunks already
//! running finish (and commit), and the report lists exactly which input
//! line ranges were committed. A failed load can therefore be resumed by
//! loading the lines that are not listed, or redone with `--truncate`.
//! `--single-transaction` (`load/single.rs`) is the exception: one connection,
//! one transaction for every chunk, committed at the end or not at all.
//! Memory is bounded by `(2 x workers + 2) x chunk size` whatever the input
//! size: each worker also keeps the last chunk it committed until a later
//! flush proves it on disk (`load/hold.rs`). Measured before that: 41 MB
//! peak RSS loading 1.25 GB with 4 workers.

mod binary;
mod checks;
pub mod constraints;
pub mod copy;
pub mod create;
mod ctx;
mod explain;
mod hold;
pub mod indexes;
mod insert;
mod invariants;
mod lazy;
pub mod ledger;
pub mod loader;
mod order;
mod outcome;
mod pipeline;
mod plan;
mod pool;
mod reader;
mod reconnect;
mod references;
mod resolve;
mod row_error;
mod screen;
mod setup;
pub mod sharded;
mod single;
mod spec;
mod step;
mod tally;
mod turns;
pub mod upsert;
mod values;
mod wire;
mod wire_answers;
mod wire_copy;
mod worker;

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::chunk::{DEFAULT_CHUNK_BYTES, DEFAULT_MAX_RECORD_BYTES};
use crate::conn::Target;
use crate::copyopts::{CopyFormat, CopyOptions};
use crate::error::{Error, Result};
use crate::ident::QualifiedName;
use crate::progress::Progress;

pub use crate::failure::RowFailure;
pub use explain::{explain, Explain};
pub use loader::Method;

/// What to load, where and how.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Input paths; `-` is stdin.
    pub inputs: Vec<String>,
    /// Target table.
    pub table: QualifiedName,
    /// Columns in file order; `None` = all non-generated columns.
    pub columns: Option<Vec<String>>,
    /// Format and COPY options.
    pub copy: CopyOptions,
    /// Connections loading in parallel.
    pub workers: usize,
    /// Target chunk size in bytes.
    pub chunk_bytes: usize,
    /// Longest record accepted, in bytes (`--max-record-bytes`): memory
    /// holds at most the chunks in flight plus one such record.
    pub max_record_bytes: usize,
    /// CopyData message size in bytes.
    pub message_bytes: usize,
    /// `TRUNCATE` the table before loading: only once every option, input,
    /// connection and the first chunk (with its header) has been checked,
    /// right before the first chunk is sent.
    pub truncate: bool,
    /// How rows are sent.
    pub method: Method,
    /// `--sql`: the statement run per row by `pipeline`/`insert`, with
    /// the columns (file order) bound as text parameters `$1..$n`.
    pub sql: Option<String>,
    /// `--batch-rows`: rows per `values` statement (default: 1000 within
    /// the 65,535-parameter limit).
    pub batch_rows: Option<usize>,
    /// Write bad rows here (and their reasons to `<path>.log`) instead of
    /// stopping at the first one.
    pub rejects: Option<std::path::PathBuf>,
    /// `--force`: overwrite an existing reject file (and its log).
    pub overwrite_rejects: bool,
    /// Stop once more than this many rows were rejected.
    pub max_rejects: Option<u64>,
    /// `--create`: make the table from the inputs (`infer`), right before
    /// the first chunk, like `truncate`.
    pub create: Option<crate::infer::create::Create>,
    /// `--route`: whether a partitioned target's rows are routed on the
    /// client to their leaves (`crate::shard`, issue 10).
    pub route: sharded::Route,
    /// `--shard-db SERVER=CONNINFO`: the connection for a foreign server.
    pub shard_db: crate::shard::Overrides,
    /// `--resume[=strict]`: record every committed chunk in the ledger
    /// (`pgtide.ledger`, in the chunk's transaction) and skip what earlier
    /// runs committed or rejected (see [`ledger`]).
    pub resume: Option<ledger::ResumeMode>,
    /// `--on-conflict`: merge into existing rows through a staging table
    /// (see [`upsert`]).
    pub on_conflict: Option<upsert::OnConflict>,
    /// `--key`: the columns rows are matched on (default: the primary key).
    pub key: Option<Vec<String>>,
    /// `--defer-indexes`: drop the table's non-unique secondary indexes
    /// right before the first chunk and build them again after the load
    /// (see [`indexes`]).
    pub defer_indexes: bool,
    /// `--defer-constraints` (with `--defer-indexes`): also drop the
    /// table's PRIMARY KEY and UNIQUE constraints and add them back after
    /// the load (see [`constraints`]); duplicates then fail the load at
    /// the end instead of row by row.
    pub defer_constraints: bool,
    /// `--single-transaction`: the whole load is one transaction on one
    /// connection, all or nothing (`load/single.rs`); with `--truncate` or
    /// `--create` it lets COPY write the rows frozen (FREEZE).
    pub single_transaction: bool,
    /// Before each `COMMIT`, make its transaction id safe from a crash on
    /// a connection of its own (see [`crate::witness`]), so that a
    /// `COMMIT` a crash cut off is settled without `--resume`. On by
    /// default; off only for tests of what happens without.
    pub witness: bool,
    /// Chunks whose witness vouched commit without waiting for their WAL
    /// flush, and are counted once a later flush proves them on disk
    /// (`load/lazy.rs`). On by default; off for tests and for measuring
    /// what it saves.
    pub lazy_commit: bool,
}

impl LoadOptions {
    /// Defaults: one worker, 4 MiB chunks, 64 KiB messages.
    pub fn new(inputs: Vec<String>, table: QualifiedName, format: CopyFormat) -> Self {
        LoadOptions {
            inputs,
            table,
            columns: None,
            copy: CopyOptions::new(format),
            workers: 1,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            message_bytes: copy::MESSAGE_BYTES,
            truncate: false,
            method: Method::Copy,
            sql: None,
            batch_rows: None,
            rejects: None,
            overwrite_rejects: false,
            max_rejects: None,
            create: None,
            route: Default::default(),
            shard_db: Default::default(),
            resume: None,
            on_conflict: None,
            key: None,
            defer_indexes: false,
            defer_constraints: false,
            single_transaction: false,
            witness: true,
            lazy_commit: true,
        }
    }
}

/// Input lines `first..=last` of `input` are done: each of their rows is
/// committed or in the reject file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LineRange {
    /// Input name.
    pub input: String,
    /// First physical line (1-based).
    pub first: u64,
    /// Last physical line.
    pub last: u64,
}

/// What a load did. Returned even when it failed midway, so the caller can
/// say what was committed.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Rows cut from the inputs (header lines excluded).
    pub rows_read: u64,
    /// Rows the server confirmed as loaded and committed.
    pub rows_loaded: u64,
    /// Rows written to the reject file.
    pub rows_rejected: u64,
    /// Rows sent whose `COMMIT` got no answer that the server could
    /// settle: all of each such chunk are in the table, or none is (the
    /// failure names the lines). Not in `rows_loaded`.
    pub rows_in_doubt: u64,
    /// Rows sent that the table dropped on purpose: a BEFORE row trigger
    /// returned NULL for them (told apart from a miscount by the server's
    /// own row counts and the table's triggers; see `invariants`). Rows
    /// read = loaded + rejected + skipped by the table.
    pub rows_skipped_by_table: u64,
    /// `--resume`: rows that earlier runs committed or rejected, skipped
    /// by this one (not in `rows_read`).
    pub rows_resumed: u64,
    /// The reject file, when `--rejects` was given.
    pub rejects_path: Option<String>,
    /// Decompressed input bytes whose rows are all committed or rejected
    /// (of a chunk whose isolation stopped midway, only those).
    pub bytes: u64,
    /// Wall time of the load.
    pub seconds: f64,
    /// Connections used.
    pub workers: usize,
    /// The load method that ran. It differs from the one asked for only
    /// when that one cannot load this input exactly (`--method binary`
    /// for a column type without a safe binary form, or for binary
    /// input): `method_requested` and a note then say so.
    pub method: &'static str,
    /// The `--method` asked for.
    pub method_requested: &'static str,
    /// `server_version` of the target.
    pub server_version: String,
    /// Chunks committed.
    pub chunks: u64,
    /// The table loaded into, as resolved.
    pub table: String,
    /// Committed input line ranges (merged).
    pub committed: Vec<LineRange>,
    /// Things the user should know (e.g. an end-of-data marker).
    pub notes: Vec<String>,
    /// Why the load stopped, when it did.
    #[serde(skip)]
    pub failure: Option<Error>,
    /// Where in the input the failure is, when it is one row.
    pub failed_row: Option<RowFailure>,
    /// `--on-conflict`: what the loaded rows did to the table.
    pub upsert: Option<UpsertReport>,
    /// Rows routed on the client (a sharded target): per server, what it
    /// committed. Empty otherwise.
    pub shards: Vec<ShardReport>,
    /// `--single-transaction`: the load was one transaction, so either
    /// every row is committed or none is.
    pub single_transaction: bool,
    /// Whether the rows were sent by `COPY .. FREEZE`, and why not.
    pub freeze: Freeze,
}

/// Whether a load used `COPY .. FREEZE` (rows written already frozen and
/// visible to all, so no later VACUUM has to rewrite every page), and
/// when it did not, the one reason that mattered.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Freeze {
    /// COPY ran with FREEZE.
    pub used: bool,
    /// Why not, in one sentence (`None` when used).
    pub reason: Option<String>,
}

/// One server of a load routed on the client ([`sharded`]). Each chunk
/// commits once per server, so a load that stopped may have committed a
/// chunk's rows on some servers and not others: `committed` lists the
/// input lines whose rows routed to this server are on it.
#[derive(Debug, Clone, Serialize)]
pub struct ShardReport {
    /// `coordinator`, or the foreign server's name.
    pub server: String,
    /// Rows committed on this server.
    pub rows: u64,
    /// Input line ranges whose rows for this server it committed (merged).
    pub committed: Vec<LineRange>,
    /// Chunks whose COMMIT on this server got no answer and could not be
    /// settled (the server went away): their rows for it may be there or
    /// not, all or none; not counted as loaded.
    pub in_doubt: Vec<LineRange>,
}

/// What an `--on-conflict` load did: every loaded row was inserted,
/// updated an existing row, or left the table unchanged.
#[derive(Debug, Clone, Serialize)]
pub struct UpsertReport {
    /// `update` or `skip`.
    pub on_conflict: upsert::OnConflict,
    /// The key rows were matched on.
    pub key: Vec<String>,
    /// Rows with a new key.
    pub inserted: u64,
    /// Existing rows overwritten (`update`).
    pub updated: u64,
    /// Rows inserted or updated, where the table cannot tell which (a
    /// partitioned table); 0 otherwise.
    pub written: u64,
    /// Loaded rows that changed nothing: their key existed (`skip`), the
    /// row held their values already (`update`, see
    /// [`upsert::Unchanged`]), a later row of the input had the same key
    /// (`update`) or an earlier one (`skip`), or a trigger dropped them.
    pub unchanged: u64,
}

impl Report {
    /// Rows per second over the wall time.
    pub fn rows_per_sec(&self) -> f64 {
        self.rows_loaded as f64 / self.seconds.max(1e-9)
    }
    /// Megabytes (10^6) per second over the wall time.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

/// Loads `opts.inputs` into `opts.table` on `target`.
///
/// Errors that happen before any row is sent (connection, missing table,
/// an input that cannot be opened, a bad header, a reject path that would
/// destroy a file, bad options) are returned as `Err`, and the table is
/// untouched: `--truncate` runs only after all of these were checked. Once
/// rows flow, the result is a [`Report`] whose `failure` says why it
/// stopped.
pub async fn run(target: &Target, opts: &LoadOptions, progress: Arc<Progress>) -> Result<Report> {
    // `--create --resume` takes an existing table only as the one the
    // first run made (checked below), not as `--create=if-not-exists`.
    let must_be_ours =
        opts.resume.is_some() && opts.create.as_ref().is_some_and(|c| !c.if_not_exists);
    let opts = &*resolve::resumed_create(opts);
    let start = Instant::now();
    let found = resolve::find(target, opts).await?;
    let opts = &*resolve::every_column(opts, &found)?;
    let table = &found.table;
    let columns = table.select(opts.columns.as_deref())?;
    // Sharded targets (issue 10): the client routes a partitioned table's
    // rows to its leaves (crate::shard) when it can; else on below.
    // Not with --single-transaction: routing commits per server. With
    // --resume each server keeps its own ledger (sharded/resume.rs).
    let routable = opts.on_conflict.is_none() && !opts.single_transaction;
    if table.kind == 'p' && routable {
        if let Ok(plan) = sharded::plan(target, opts, table, &columns).await? {
            let v = found.server_version.clone();
            let run = sharded::run(target, opts, table, &columns, plan, v, progress);
            return run.await;
        }
    }
    let resolve::Resolved {
        plan,
        upsert,
        resume,
        resuming,
        freeze,
    } = resolve::resolve(target, opts, &found, true).await?;
    let existed = found.created.as_ref().is_some_and(|c| c.exists);
    if must_be_ours && existed && !resuming {
        resolve::refuse_unrelated(&found.control, table).await?;
    }
    // With --resume its session holds the run's lock (`ledger::guard`)
    // until the load is over.
    let guard = opts.resume.is_some().then_some(found.control);
    // COPY counts every row an INSTEAD OF trigger was given, whatever the
    // trigger did with it: rows it dropped cannot be told apart.
    let view_counts_all = table.kind == 'v' && found.table_may_skip;
    let rule_counts = found.instead_rule && opts.on_conflict.is_none();
    let (server_version, created) = (found.server_version, found.created);
    let workers = plan.workers;
    let outcome = pool::execute(plan, progress).await;
    drop(guard);
    // Whatever became of the load, indexes dropped for it are built again.
    let rebuilt = match opts.defer_indexes {
        true => Some(indexes::rebuild(target, Some(table.oid), workers).await?),
        false => None,
    };
    let mut outcome = outcome?;
    if let Some(u) = upsert
        .as_ref()
        .filter(|u| u.unchanged == upsert::Unchanged::Rewritten)
    {
        outcome.notes.push(format!(
            "on conflict {}: rows that hold the file's values are rewritten too (the table has \
             UPDATE triggers or row-level security that would see the rewrite)",
            u.mode.name()
        ));
    }
    let mut report = Report {
        rows_read: outcome.counts.read,
        rows_loaded: outcome.counts.loaded,
        rows_in_doubt: outcome.counts.in_doubt,
        rows_rejected: outcome.counts.rejected,
        rows_skipped_by_table: outcome.counts.skipped_by_table,
        rows_resumed: outcome.counts.resumed,
        rejects_path: opts.rejects.as_ref().map(|p| p.display().to_string()),
        bytes: outcome.counts.bytes,
        seconds: start.elapsed().as_secs_f64(),
        workers: opts.workers,
        method: outcome.method.name(),
        method_requested: opts.method.name(),
        server_version,
        chunks: outcome.chunks,
        table: table.name.to_string(),
        committed: outcome.committed,
        notes: outcome.notes,
        failure: outcome.failure,
        failed_row: outcome.failed_row,
        upsert: upsert.map(|u| UpsertReport {
            on_conflict: u.mode,
            key: u.key,
            inserted: outcome.merged.inserted,
            updated: outcome.merged.updated,
            written: outcome.merged.written,
            unchanged: outcome.counts.loaded.saturating_sub(outcome.merged.total()),
        }),
        shards: Vec::new(),
        single_transaction: opts.single_transaction,
        freeze: Freeze {
            used: freeze.is_ok(),
            reason: freeze.err(),
        },
    };
    if view_counts_all && matches!(outcome.method, Method::Copy | Method::Binary) {
        report.notes.push(
            "the view's INSTEAD OF trigger may drop rows, and COPY counts each row it was \
             given as loaded: rows the trigger dropped are among those counted loaded \
             (--method values counts them as skipped by the table)"
                .to_owned(),
        );
    }
    if rule_counts {
        report.notes.push(
            "the table has an INSTEAD rule on INSERT, which rewrites each INSERT: the server \
             reports the rule's row counts, so a batch counts as loaded at most the rows sent \
             (and rows it reports fewer as skipped by the table)"
                .to_owned(),
        );
    }
    let fresh = opts.truncate || created.as_ref().is_some_and(|c| !c.exists);
    if opts.single_transaction || fresh {
        report.notes.push(match &report.freeze.reason {
            None if report.failure.is_some() => {
                "COPY FREEZE: used, but nothing of it was kept (rolled back)".to_owned()
            }
            None => "COPY FREEZE: the rows were written frozen (the table was emptied or \
                     created in the load's transaction)"
                .to_owned(),
            Some(why) => format!("no COPY FREEZE: {why}"),
        });
    }
    if opts.single_transaction {
        report
            .notes
            .push(single::note(report.failure.as_ref(), report.rows_rejected));
    } else if opts.truncate && !resuming && report.failure.is_some() {
        // Rows flowed, so the TRUNCATE ran and was committed first: say
        // so, since the failure did not undo it.
        report.notes.push(
            "--truncate: the table was emptied and that was committed before the first chunk; \
             it now holds only the lines committed above (--single-transaction makes the \
             emptying and the load one all-or-nothing transaction)"
                .to_owned(),
        );
    }
    if let Some(plan) = &created {
        create::report(plan, opts.resume.is_some(), &mut report);
    }
    if let Some(r) = &resume {
        resume_notes(r, opts, resuming, &mut report);
    }
    if let Some(r) = rebuilt {
        report.notes.push(format!(
            "--defer-indexes: {} index{} dropped before the load and built again after it in \
             {:.2} s ({})",
            r.built.len(),
            if r.built.len() == 1 { "" } else { "es" },
            r.seconds,
            r.built.join(", ")
        ));
        report.notes.extend(r.not_built_note());
        if let Some(e) = r.failure {
            report.failure = report.failure.or(Some(e));
        }
    }
    if report.failure.is_none() {
        report.failure = invariants::check_rows(
            report.rows_read,
            report.rows_loaded,
            report.rows_rejected,
            report.rows_skipped_by_table,
        )
        .err();
    }
    Ok(report)
}

/// Most `--workers`: each worker is one server connection (PostgreSQL
/// allows 100 by default) holding one chunk in memory, and past a few
/// dozen, connections loading one table only wait on each other's locks
/// and WAL. Huge values would otherwise exhaust memory before any check.
pub const MAX_WORKERS: usize = 1024;

/// Largest `--chunk-bytes`: 1 GiB, PostgreSQL's own limit for one
/// allocation (MaxAllocSize). A chunk is held in memory whole, up to
/// `2 x workers + 2` of them, and is one transaction; larger ones only make
/// failures costlier.
pub const MAX_CHUNK_BYTES: usize = 1 << 30;

/// What the summary says about `--resume`.
fn resume_notes(r: &ledger::Resume, opts: &LoadOptions, resuming: bool, report: &mut Report) {
    report.notes.extend(r.notes.iter().cloned());
    if resuming && opts.truncate {
        report.notes.push(
            "--truncate: not truncated again, this run resumes a load recorded in the ledger"
                .to_owned(),
        );
    }
    if report.rows_resumed == 0 {
        return;
    }
    if report.rows_read == 0 && report.failure.is_none() {
        report.notes.push(format!(
            "already complete: every row of {} was committed (or rejected) by earlier runs, \
             as the ledger ({}) says; nothing was loaded",
            opts.inputs.join(", "),
            ledger::LEDGER_TABLE
        ));
    } else {
        report.notes.push(format!(
            "resumed: {} rows committed (or rejected) by earlier runs were skipped",
            report.rows_resumed
        ));
    }
}
