//! The worker pool: one reader thread cutting chunks, N async workers each
//! with its own connection running one COPY per chunk.
//!
//! The channel between them holds one chunk, so memory stays
//! at about `(2 x workers + 2) x chunk size` whatever the input size (each
//! worker also keeps its last chunk until it is known on disk). On the
//! first failed chunk the channel is closed: the reader stops, running
//! chunks finish and commit, and nothing new starts (see the commit model
//! in `load`).

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::copy::Framing;
use super::ctx::Ctx;
use super::loader::{new_loader, LoaderSpec, Method};
use super::outcome::{Done, Shared};
pub(super) use super::plan::Plan;
use super::reader::{read_all, ReadStats};
use super::single;
use super::worker::work;
use super::LineRange;
use crate::chunk::Chunk;
use crate::copyopts::CopyFormat;
use crate::error::{Error, ErrorKind, Result};
use crate::failure::RowFailure;
use crate::progress::{Counts, Progress};
use crate::reject::RejectFile;

/// What the pool did.
pub(super) struct Outcome {
    /// The method the loaders ran: the one asked for, unless its checks
    /// chose another (a note then says why).
    pub method: Method,
    /// From the load's one ledger of counts, its `Progress`.
    pub counts: Counts,
    pub chunks: u64,
    pub committed: Vec<LineRange>,
    pub notes: Vec<String>,
    pub failure: Option<Error>,
    pub failed_row: Option<RowFailure>,
    /// `--on-conflict`: rows the committed merges inserted and updated.
    pub merged: super::upsert::Merged,
}

/// Runs the load. Nothing is written (table, reject file) until every
/// worker is connected, the method accepted the options, and the reader
/// has cut the first chunk and checked the headers; only then is the table
/// truncated (`--truncate`) and the first chunk sent.
pub(super) async fn execute(plan: Plan, progress: Arc<Progress>) -> Result<Outcome> {
    for input in &plan.inputs {
        if let Ok(meta) = std::fs::metadata(input) {
            Progress::add(&progress.total_bytes, meta.len());
        }
    }
    // Connect every worker before reading anything: a bad target (or too
    // many workers for the server) fails fast and leaves the table
    // untouched. At once, not one after the other: each connection costs
    // round trips (and a TLS handshake) that a remote server makes long.
    let connecting = (0..plan.workers).map(|_| plan.target.connect_wire());
    let clients = futures_util::future::try_join_all(connecting).await?;
    let mut spec = loader_spec(&plan);
    // Checked on a loader's own connection: its session is the loaders'.
    let method_notes = match clients.first() {
        Some((client, ..)) => spec.prepare(client).await?,
        None => Vec::new(),
    };
    // Asked before `start_writing` opens a transaction on that connection.
    let lazy = match clients.first() {
        Some((client, ..)) if plan.lazy_commit && plan.upsert.is_none() => {
            !plan.single_transaction && super::lazy::allowed(client).await
        }
        _ => false,
    };
    // One chunk waiting is enough: the reader cuts chunks at gigabytes per
    // second, far faster than any server takes them, and every chunk
    // waiting costs its size in memory.
    let (tx, rx) = async_channel::bounded::<Chunk>(1);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Option<Bytes>>();
    let plan = Arc::new(plan);
    let reader = {
        let plan = plan.clone();
        let progress = progress.clone();
        std::thread::spawn(move || read_all(&plan, &tx, ready_tx, &progress))
    };
    let shared = Arc::new(Mutex::new(Shared::default()));
    let Ok(header) = ready_rx.await else {
        // The reader stopped before the first chunk: its error says why.
        return Err(reader_error(reader_join(reader)));
    };
    let (xid, created) = match start_writing(&plan, &mut spec, &shared, header, &clients).await {
        Ok(started) => started,
        Err(e) => {
            rx.close(); // the reader stops at its next chunk
            let _ = reader_join(reader);
            return Err(e);
        }
    };
    let spec = Arc::new(spec);
    let turns = match clients.first() {
        Some((client, ..)) if side_by_side(&plan) => {
            super::turns::Turns::needed(client, &plan.table_sql, plan.rejects.is_some())
                .await?
                .map(Arc::new)
        }
        _ => None,
    };
    let mut method_notes = method_notes;
    method_notes.extend(turns.as_ref().and_then(|t| t.trigger_note(plan.workers)));
    let ctx = Arc::new(Ctx {
        target: plan.target.clone(),
        spec: spec.clone(),
        shared: shared.clone(),
        progress: progress.clone(),
        isolate: plan.rejects.is_some(),
        max_rejects: plan.max_rejects,
        resume: match (&plan.resume, created) {
            (Some(r), Some(oid)) => Some(Arc::new(r.for_created_table(oid))),
            _ => plan.resume.clone(),
        },
        order: plan.upsert.as_ref().map(|_| super::order::Order::new()),
        turns,
        lazy,
        dirty: Default::default(),
    });
    if plan.single_transaction {
        let Some((client, notices, wire)) = clients.into_iter().next() else {
            return Err(Error::bug(
                "a single-transaction load without its connection",
            ));
        };
        let loader = new_loader(client, notices, wire, &spec);
        let (loader, ok) = single::work(loader, rx, &ctx).await;
        let read = reader_join(reader)?;
        let read_ok = read.error.is_none() && !read.interrupted;
        single::finish(loader, xid, &ctx, ok, read_ok).await;
        if read.interrupted && read.error.is_none() {
            let mut s = shared.lock().expect("worker state");
            s.failed.push(super::outcome::Failed {
                seq: 0,
                error: single::interrupted(),
                row: None,
            });
        }
        let mut outcome = summarize(shared, read, spec.method, &progress);
        outcome.notes.splice(0..0, method_notes);
        return Ok(outcome);
    }
    // The timeline at the start, to tell a failover at the end.
    let observed = spec.witness.clone().map(|w| {
        tokio::spawn(async move {
            w.observe().await;
            w
        })
    });
    let mut tasks = Vec::new();
    for (id, (client, notices, wire)) in clients.into_iter().enumerate() {
        let loader = new_loader(client, notices, wire, &spec);
        tasks.push(tokio::spawn(work(id, loader, rx.clone(), ctx.clone())));
    }
    drop(rx);
    for t in tasks {
        if let Err(e) = t.await {
            return Err(Error::bug(format!("a load worker panicked: {e}")));
        }
    }
    let read = reader_join(reader)?;
    let mut outcome = summarize(shared, read, spec.method, &progress);
    outcome.notes.splice(0..0, method_notes);
    if let Some(Ok(w)) = match observed {
        Some(task) => Some(task.await),
        None => None,
    } {
        w.observe().await;
        if let Some(timelines) = w.failover() {
            failed_over(&mut outcome, timelines);
        }
    }
    Ok(outcome)
}

/// Whether chunks may need turns (`turns.rs`): they load side by side,
/// and are not merged in input order already (`--on-conflict`).
fn side_by_side(plan: &Plan) -> bool {
    plan.workers > 1 && plan.upsert.is_none() && !plan.single_transaction
}

/// What every loader of `plan` runs (before [`LoaderSpec::prepare`]).
pub(super) fn loader_spec(plan: &Plan) -> LoaderSpec {
    LoaderSpec {
        method: plan.method,
        copy_sql: plan.sql.clone(),
        framing: Framing::default(),
        message_bytes: plan.message_bytes,
        dialect: plan.dialect.clone(),
        relname: plan.relname.clone(),
        setup: Arc::new(plan.method_setup.clone()),
        on_error_sql: plan.on_error_sql.clone(),
        table_may_skip: plan.table_may_skip,
        instead_rule: plan.instead_rule,
        upsert: plan.upsert.clone(),
        references: plan.references.clone(),
        witness: plan
            .witness
            .then(|| crate::witness::Witness::new(plan.target.clone())),
    }
}

/// Everything is checked and the first chunk is cut (its input's header,
/// if any, is `header`): frames binary COPY, creates the reject file, and
/// creates (`--create`) and truncates the table (`--truncate`), in that
/// order, so that a reject file that cannot be created leaves the table as
/// it was (and uncreated).
///
/// `--single-transaction`: the deferred indexes are dropped first (their
/// definitions committed to the ledger, so that a kill loses none), then
/// the load's one transaction begins (its id returned, for a COMMIT
/// whose answer is lost) and the CREATE and TRUNCATE run in it, where a
/// rollback undoes them and COPY FREEZE may follow them.
///
/// Returns that id, and the OID of the table `--create` made when the
/// load resumes (`--resume`): its ledger rows must name that table.
async fn start_writing(
    plan: &Plan,
    spec: &mut LoaderSpec,
    shared: &Mutex<Shared>,
    header: Option<Bytes>,
    clients: &[(
        tokio_postgres::Client,
        crate::conn::Notices,
        crate::conn::Wire,
    )],
) -> Result<(Option<crate::batch::TxStart>, Option<u32>)> {
    let binary = plan.format == CopyFormat::Binary;
    if binary {
        // Every chunk's COPY needs the file header in front.
        spec.framing = Framing {
            binary_trailer: header.is_some(),
            prefix: header.clone(),
        };
    }
    if let Some(path) = &plan.rejects {
        let mut file = match (&plan.resume, &plan.earlier_rejects) {
            (Some(r), Some(earlier)) => RejectFile::append(path, earlier, r.run.clone())?,
            (Some(r), None) => {
                RejectFile::create(path, plan.overwrite_rejects)?.resumed_by(r.run.clone())
            }
            (None, _) => RejectFile::create(path, plan.overwrite_rejects)?,
        };
        file.set_framing(header, binary);
        shared.lock().expect("worker state").rejects = Some(file);
    }
    let Some((client, ..)) = clients.first() else {
        return Ok((None, None));
    };
    let mut xid = None;
    if plan.single_transaction {
        if let Some(table) = &plan.defer_indexes {
            super::indexes::drop_saved_with(client, table, plan.defer_constraints).await?;
        }
        xid = crate::batch::tx_start(&client.simple_query(crate::batch::BEGIN_SQL).await?);
    }
    // Simple queries: a prepared statement's Close would be answered
    // after the first chunk's COPY on the wire took the stream (the
    // single transaction's loader is this connection).
    let first_writes = [&plan.create_sql, &plan.truncate_sql];
    let mut created = None;
    for sql in first_writes.into_iter().flatten() {
        if let Err(e) = client.batch_execute(sql.as_str()).await {
            // Nothing was loaded: an empty reject file left behind would
            // only make the next run ask for --force.
            if let Some(file) = shared.lock().expect("worker state").rejects.take() {
                file.discard();
            }
            if plan.single_transaction {
                let _ = client.batch_execute("ROLLBACK").await;
            }
            return Err(e.into());
        }
        if Some(sql) == plan.create_sql.as_ref() && plan.resume.is_some() {
            let row = client
                .query_one("SELECT $1::text::regclass::oid", &[&plan.table_sql])
                .await?;
            created = Some(row.get::<_, u32>(0));
        }
    }
    if let (Some(table), false) = (&plan.defer_indexes, plan.single_transaction) {
        super::indexes::drop_saved_with(client, table, plan.defer_constraints).await?;
    }
    Ok((xid, created))
}

/// Waits for the reader thread.
fn reader_join(reader: std::thread::JoinHandle<ReadStats>) -> Result<ReadStats> {
    reader
        .join()
        .map_err(|_| Error::bug("the input reader thread panicked"))
}

/// Why a reader that stopped before its first chunk stopped.
fn reader_error(read: Result<ReadStats>) -> Error {
    match read {
        Ok(ReadStats { error: Some(e), .. }) | Err(e) => e,
        Ok(_) => Error::bug("the input reader ended without saying so"),
    }
}

fn summarize(
    shared: Arc<Mutex<Shared>>,
    read: ReadStats,
    method: Method,
    progress: &Progress,
) -> Outcome {
    let mut s = std::mem::take(&mut *shared.lock().expect("worker state lock"));
    s.done.sort_by_key(|d| (d.seq, d.first_line));
    s.failed.sort_by_key(|f| f.seq);
    let mut failures = s.failed.into_iter();
    let first_failure = failures.next();
    let read_error = match read.error {
        Some(e) => Some(e),
        None if read.interrupted => Some(interrupted()),
        None => None,
    };
    // The first failure is the load's error; the others (another worker's
    // chunk, a held chunk left in doubt) would go unsaid: each names
    // lines the user must look at.
    let mut notes = read.notes;
    notes.extend(failures.map(|f| also(&f.error)));
    let counts = Counts::of(progress);
    let (mut failure, failed_row) = match (first_failure, read_error) {
        (Some(f), _) => (Some(f.error), f.row),
        (None, Some(e)) => (Some(e), None),
        (None, None) => (None, None),
    };
    // The reject file must hold what was counted: a row counted and not
    // written (or the reverse) would make the summary lie.
    if let Some(Err(e)) = s.rejects.take().map(|f| f.finish_counted(counts.rejected)) {
        failure = failure.or(Some(e));
    }
    Outcome {
        method,
        counts,
        chunks: s
            .done
            .iter()
            .map(|d| d.seq)
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64,
        committed: merge_ranges(&s.done),
        notes,
        failure,
        failed_row,
        merged: s.merged,
    }
}

/// A standby was promoted during the load: what the load committed on
/// the old primary may be missing on the new one (asynchronous
/// replication), so no committed line is sure any more. Outside testing
/// found exit 0, "loaded 1,000,000 rows", and 252,718 of them missing.
fn failed_over(outcome: &mut Outcome, (from, to): (String, String)) {
    let (first, last) = match (outcome.committed.first(), outcome.committed.last()) {
        (Some(a), Some(b)) => (a.first, b.last),
        _ => (0, 0),
    };
    outcome.counts.in_doubt += outcome.counts.loaded;
    outcome.counts.loaded = 0;
    outcome.committed.clear();
    let e = Error::new(
        ErrorKind::ConnectionLost,
        format!(
            "the server failed over during the load (timeline {from} -> {to}): rows committed \
             on the old primary may be missing on the new one"
        ),
    )
    .with_hint(format!(
        "the lines committed (about lines {first}-{last}) are in doubt: with asynchronous \
         replication the last commits before a failover can be lost; compare the table with \
         the input, or run a load begun with --resume again (the new primary's ledger says \
         what it holds)"
    ));
    match outcome.failure {
        None => outcome.failure = Some(e),
        Some(_) => outcome.notes.push(also(&e)),
    }
}

/// A further failure of a load, as a note: its message and its hint
/// (which names the lines in doubt, when that is the failure).
fn also(e: &Error) -> String {
    match e.hint() {
        Some(hint) => format!("also: {} ({hint})", e.message()),
        None => format!("also: {}", e.message()),
    }
}

/// A load stopped on request (Ctrl-C, SIGTERM) before it read every
/// input: what it committed is listed, the rest is not loaded.
pub(super) fn interrupted() -> Error {
    Error::new(
        ErrorKind::Interrupted,
        "interrupted: no new chunk was started; the chunks in progress were \
         committed or rolled back whole",
    )
    .with_hint(
        "the lines listed as committed are in the table and nothing else is; \
         load the remaining lines, or run again with --truncate",
    )
}

/// Merges done line ranges into contiguous ranges per input.
fn merge_ranges(done: &[Done]) -> Vec<LineRange> {
    let mut out: Vec<LineRange> = Vec::new();
    for d in done {
        match out.last_mut() {
            Some(r) if *r.input == *d.input && r.last + 1 >= d.first_line => {
                r.last = r.last.max(d.last_line);
            }
            _ => out.push(LineRange {
                input: d.input.to_string(),
                first: d.first_line,
                last: d.last_line,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two chunks left in doubt: the load's error names one, a note the
    /// other (before, the second was counted in doubt and never named).
    #[test]
    fn every_failure_after_the_first_is_a_note() {
        let shared = Arc::new(Mutex::new(Shared::default()));
        for (seq, lines) in [(3, "9-12"), (1, "1-4")] {
            let error = Error::new(ErrorKind::ConnectionLost, format!("lines {lines} lost"))
                .with_hint(format!("check lines {lines}"));
            let f = super::super::outcome::Failed {
                seq,
                error,
                row: None,
            };
            shared.lock().unwrap().failed.push(f);
        }
        let read = ReadStats::default();
        let out = summarize(shared, read, Method::Copy, &Progress::new(1));
        assert_eq!(out.failure.unwrap().message(), "lines 1-4 lost");
        assert_eq!(out.notes, ["also: lines 9-12 lost (check lines 9-12)"]);
    }
}
