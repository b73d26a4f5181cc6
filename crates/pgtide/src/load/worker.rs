//! One worker: takes chunks from the channel and sees each one through.
//!
//! For every chunk: load it in one transaction; when the connection broke
//! before `COMMIT` was sent (nothing committed), reconnect with backoff and
//! send it again; after a deadlock or lock timeout, send it again after a
//! pause; when rows were bad and `--rejects` is on, isolate them
//! (`reject::isolate`) and hand them to the reject file; otherwise stop the
//! pool with an error that places the bad row in the input.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::loader::new_loader;
use super::loader::{Batch, BatchError, InDoubt, Loader, LoaderSpec};
use super::outcome::{Done, Failed, Shared};
use super::row_error::{chunk_error, line_ending_error};
use super::RowFailure;
use crate::chunk::Chunk;
use crate::conn::Target;
use crate::error::{classify, Class, Error};
use crate::progress::Progress;
use crate::reject::isolate::{isolate, Gate, Resilient, Start};

/// Reconnect attempts after a broken connection, with doubling delays
/// from [`FIRST_BACKOFF`]: about 8 s in all, enough for a server restart
/// or a failover, short enough that a dead server is reported promptly.
const RECONNECTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// What every worker shares.
pub(super) struct Ctx {
    pub target: Target,
    pub spec: Arc<LoaderSpec>,
    pub shared: Arc<Mutex<Shared>>,
    pub progress: Arc<Progress>,
    /// `--rejects` given: bad rows are isolated instead of stopping.
    pub isolate: bool,
    /// `--max-rejects`.
    pub max_rejects: Option<u64>,
    /// `--resume`: each chunk's batches record their bytes in the ledger.
    pub resume: Option<Arc<super::ledger::Resume>>,
    /// `--on-conflict`: chunks take effect in input order.
    pub order: Option<super::order::Order>,
    /// A chunk had bad rows: from then on each worker screens its next
    /// chunk while the current one loads ([`ahead`]).
    pub dirty: AtomicBool,
}

/// A chunk taken from the channel ahead of its turn, with its screen
/// (`load/screen.rs`) running on another thread.
type Ahead = (Chunk, tokio::task::JoinHandle<Vec<usize>>);

/// Once the load has met bad rows (`--rejects`), takes the next chunk
/// waiting in the channel, if any, and screens it on another thread, so
/// that the client's screening overlaps the server's work on this chunk
/// instead of following it. Not with `--on-conflict`, whose chunks are
/// staged in turn.
fn ahead(loader: &Loader, ctx: &Ctx, rx: &async_channel::Receiver<Chunk>) -> Option<Ahead> {
    if !ctx.isolate || ctx.order.is_some() || !ctx.dirty.load(Ordering::Relaxed) {
        return None;
    }
    let screen = loader.screener()?;
    let next = rx.try_recv().ok()?;
    let copy = next.clone();
    Some((next, tokio::task::spawn_blocking(move || screen(&copy))))
}

/// Runs until the channel closes or a chunk fails.
pub(super) async fn work(
    id: usize,
    mut loader: Loader,
    rx: async_channel::Receiver<Chunk>,
    ctx: Arc<Ctx>,
) {
    let mut next: Option<Ahead> = None;
    loop {
        let (chunk, screened) = match next.take() {
            Some((chunk, screen)) => (chunk, Some(screen)),
            None => match rx.recv().await {
                Ok(chunk) => (chunk, None),
                Err(_) => break,
            },
        };
        next = ahead(&loader, &ctx, &rx);
        // A screened chunk with suspects is known to fail whole: it goes
        // straight to isolation.
        let suspects = match screened {
            Some(task) => task.await.ok(),
            None => None,
        };
        if let Some(r) = &ctx.resume {
            loader.set_mark(r.mark(&chunk.input, &chunk.data, chunk.first_byte));
        }
        if !in_turn(&mut loader, &ctx, &chunk).await {
            // An earlier chunk failed: this one must not take effect.
            rx.close();
            break;
        }
        if chunk.eol_errors > 0 {
            // Never sent whole: a COPY that starts with such a record
            // settles on the wrong line-ending style and misplaces rows.
            let ok = if ctx.isolate {
                isolated(&mut loader, &ctx, id, &chunk, Start::Screened).await
            } else {
                misfit_line_ending(&ctx, &chunk, loader.spec())
            };
            let counted = counted_by_server(&mut loader, &ctx, &chunk);
            if !chunk_over(&ctx, &chunk, ok && counted) {
                rx.close();
                break;
            }
            continue;
        }
        let batch = Batch {
            data: chunk.data.clone(),
            records: chunk.records,
        };
        let attempt = match &suspects {
            Some(s) if !s.is_empty() => None,
            _ => Some(load_reconnecting(&mut loader, &ctx, &batch).await),
        };
        let ok = match attempt {
            None => {
                let start = Start::Suspects(suspects.unwrap_or_default());
                isolated(&mut loader, &ctx, id, &chunk, start).await
            }
            Some(Ok(rows)) => {
                let skipped = loader.take_skipped();
                if skipped.is_empty() {
                    let lines = vec![(chunk.first_line, chunk.last_line())];
                    let bytes = chunk.data.len() as u64;
                    finished(&ctx, id, &chunk, rows, bytes, Vec::new(), lines);
                    true
                } else {
                    ctx.dirty.store(true, Ordering::Relaxed);
                    let start = Start::Skipped { rows, skipped };
                    isolated(&mut loader, &ctx, id, &chunk, start).await
                }
            }
            Some(Err(e)) if ctx.isolate && classify(&e.error) == Class::Row => {
                // Rows the client can tell are bad go alone, the rest in
                // batches (`load/screen.rs`).
                ctx.dirty.store(true, Ordering::Relaxed);
                let suspects = match suspects {
                    Some(s) => s,
                    None => loader.screen(&chunk).await,
                };
                let start = match suspects.is_empty() {
                    true => Start::Failed(e),
                    false => Start::Suspects(suspects),
                };
                isolated(&mut loader, &ctx, id, &chunk, start).await
            }
            Some(Err(e)) => {
                let failed = failed_chunk(&chunk, loader.spec(), e);
                ctx.shared.lock().expect("worker state").failed.push(failed);
                false
            }
        };
        let counted = counted_by_server(&mut loader, &ctx, &chunk);
        if !chunk_over(&ctx, &chunk, ok && counted) {
            rx.close();
            break;
        }
    }
}

/// `--on-conflict`: stages the chunk's rows (the COPY, while earlier
/// chunks merge), then waits until every earlier chunk is over. False when
/// one of them failed. A staging that failed is left to the chunk's own
/// transaction, which COPYs again and meets the error there.
async fn in_turn(loader: &mut Loader, ctx: &Ctx, chunk: &Chunk) -> bool {
    let Some(order) = &ctx.order else {
        return true;
    };
    if chunk.eol_errors == 0 {
        let batch = Batch {
            data: chunk.data.clone(),
            records: chunk.records,
        };
        let _ = loader.stage(&batch).await;
    }
    order.wait(chunk.seq).await
}

/// A chunk is over (`ok`: every row committed or rejected): later chunks
/// may take their turn (`--on-conflict`). Returns `ok`.
fn chunk_over(ctx: &Ctx, chunk: &Chunk, ok: bool) -> bool {
    if let Some(order) = &ctx.order {
        if ok {
            order.finished(chunk.seq);
        } else {
            order.failed(chunk.seq);
        }
    }
    ok
}

/// Isolates the bad rows of a failed chunk; false when the load must stop.
async fn isolated(loader: &mut Loader, ctx: &Ctx, id: usize, chunk: &Chunk, start: Start) -> bool {
    let mut session = Session { loader, ctx };
    let (iso, err) = isolate(&mut session, chunk, start, &mut gate(ctx)).await;
    Progress::add(&ctx.progress.server_skipped, iso.server_skipped);
    finished(ctx, id, chunk, iso.loaded, iso.bytes, iso.rejects, iso.done);
    match err {
        None => true,
        Some(error) => {
            let mut s = ctx.shared.lock().expect("worker state");
            s.failed.push(Failed {
                seq: chunk.seq,
                error,
                row: None,
            });
            false
        }
    }
}

/// A chunk's claims on `--max-rejects` (counted over the whole load),
/// asked by isolation before each reject: says no once the limit is
/// exceeded.
pub(super) fn gate(ctx: &Ctx) -> Gate {
    Gate::new(ctx.progress.clone(), ctx.max_rejects)
}

/// Records a chunk's outcome: counters (`rows` loaded, in `bytes` of
/// input whose rows are committed or rejected: the whole chunk's unless
/// its isolation stopped midway), done line ranges, its rejects (in input
/// order, by the reject file).
pub(super) fn finished(
    ctx: &Ctx,
    id: usize,
    chunk: &Chunk,
    rows: u64,
    bytes: u64,
    rejects: Vec<crate::reject::Reject>,
    done: Vec<(u64, u64)>,
) {
    Progress::add(&ctx.progress.rows_loaded, rows);
    Progress::add(&ctx.progress.worker_rows[id], rows);
    Progress::add(&ctx.progress.rows_rejected, rejects.len() as u64);
    Progress::add(&ctx.progress.bytes_loaded, bytes);
    let mut s = ctx.shared.lock().expect("worker state");
    if let Some(file) = s.rejects.as_mut() {
        if let Err(e) = file.submit(chunk.seq, rejects) {
            s.failed.push(Failed {
                seq: chunk.seq,
                error: e,
                row: None,
            });
        }
    }
    for (first, last) in done {
        s.done.push(Done {
            seq: chunk.seq,
            input: chunk.input.clone(),
            first_line: first,
            last_line: last,
        });
    }
}

/// Settles what the server's row counts said about the chunk's committed
/// batches (`invariants::check_count`, run by the loader): rows the table
/// dropped on purpose are counted; a count that no trigger explains stops
/// the load as a bug (false), placed at the chunk's lines.
fn counted_by_server(loader: &mut Loader, ctx: &Ctx, chunk: &Chunk) -> bool {
    let skipped = loader.take_skipped_by_table();
    let bug = loader.take_bug();
    let merged = loader.take_merged();
    Progress::add(&ctx.progress.rows_skipped_by_table, skipped);
    let mut s = ctx.shared.lock().expect("worker state");
    s.merged.add(merged);
    let Some(bug) = bug else { return true };
    let error = Error::bug(format!(
        "{}: lines {}-{}: {}",
        chunk.input,
        chunk.first_line,
        chunk.last_line(),
        bug.message()
    ));
    s.failed.push(Failed {
        seq: chunk.seq,
        error,
        row: None,
    });
    false
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
async fn load_reconnecting(
    loader: &mut Loader,
    ctx: &Ctx,
    batch: &Batch,
) -> Result<u64, BatchError> {
    let mut reconnects = 0;
    let mut transients = 0;
    loop {
        let e = match loader.load(batch).await {
            Ok(rows) => return Ok(rows),
            Err(e) => e,
        };
        match classify(&e.error) {
            Class::Connection => {
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

/// Reconnects with doubling pauses, `RECONNECTS` attempts in all for one
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
        tokio::time::sleep(FIRST_BACKOFF * (1 << (*attempts - 1))).await;
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
        Some(ref d) => match commit_status(&client, d.clone()).await {
            Ok(Some(true)) => Reconnected::Committed(d.rows),
            Ok(Some(false)) => Reconnected::Resend,
            Ok(None) => Reconnected::Unknown,
            // The new connection broke too: ask again on the next one.
            Err(_) => return Reconnected::Failed,
        },
    };
    // Rows `ON_ERROR` skipped in a batch that turned out committed still
    // need their verdict.
    let skipped = loader.take_skipped();
    let mark = loader.take_mark();
    *loader = new_loader(client, notices, wire, &ctx.spec);
    loader.set_mark(mark);
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
/// reused after a crash, [`commit_status`]). `Some(true)` committed (the
/// new loader has counted what the table dropped), `Some(false)` certainly
/// not, `None` nobody can tell (or no new connection). The loader gets the
/// new connection whenever one could be made.
pub(super) async fn settle_lost_commit(loader: &mut Loader, ctx: &Ctx) -> Option<bool> {
    let mut reconnects = 0;
    let in_doubt = loader.in_doubt();
    let asked = in_doubt.is_some();
    match reconnect_with_backoff(loader, ctx, in_doubt, &mut reconnects).await {
        Reconnected::Committed(_) => Some(true),
        Reconnected::Resend if asked => Some(false),
        _ => None,
    }
}

/// A worker's loader as isolation sees it: each range is loaded as the
/// main path loads a chunk ([`load_reconnecting`]).
struct Session<'a> {
    loader: &'a mut Loader,
    ctx: &'a Ctx,
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

/// Whether the transaction in doubt committed: `Some(true)` committed,
/// `Some(false)` aborted (safe to resend), `None` unknown (give up); an
/// error when the question itself failed (ask again elsewhere).
/// A dead session's transaction can still show as in progress for a
/// moment, so that answer is asked again a few times.
async fn commit_status(
    client: &tokio_postgres::Client,
    d: InDoubt,
) -> Result<Option<bool>, tokio_postgres::Error> {
    for _ in 0..20 {
        let row = client
            .query_one(
                "SELECT CASE WHEN $1 < txid_snapshot_xmax(txid_current_snapshot()) \
                 THEN txid_status($1) ELSE 'future' END, \
                 (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::int8",
                &[&d.tx.xid],
            )
            .await?;
        let restarted = row.get::<_, Option<i64>>(1) != Some(d.tx.server_started);
        match (row.get::<_, Option<String>>(0).as_deref(), restarted) {
            (Some("committed"), false) => return Ok(Some(true)),
            (Some("committed"), true) => return committed_before_restart(client, d).await,
            (Some("aborted"), _) => return Ok(Some(false)),
            // Not handed out (again) since a crash took it back: ours
            // never committed.
            (Some("future"), _) => return Ok(Some(false)),
            // Our session died with the old server: after a restart, a
            // transaction in progress under our id is a stranger's (ids
            // that never reached the disk are handed out again), and ours
            // is lost.
            (Some("in progress"), true) => return Ok(Some(false)),
            (Some("in progress"), false) => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// After a crash and restart, `committed` under our id is ours only if
/// the id was handed out before the crash: below the next id of the
/// checkpoint that ended the crash recovery (written before the server
/// took connections). When that checkpoint cannot be read (permissions:
/// `pg_control_checkpoint` is for superusers unless granted) or a later
/// checkpoint replaced it, nobody can tell: `None`, and the load stops
/// saying so rather than guess.
async fn committed_before_restart(
    client: &tokio_postgres::Client,
    d: InDoubt,
) -> Result<Option<bool>, tokio_postgres::Error> {
    let Ok(row) = client
        .query_one(
            "SELECT (pg_control_checkpoint()).next_xid, \
             extract(epoch FROM (pg_control_checkpoint()).checkpoint_time \
                     - pg_postmaster_start_time())::float8",
            &[],
        )
        .await
    else {
        return Ok(None);
    };
    let next: Option<String> = row.get(0);
    let after_start: Option<f64> = row.get(1);
    // The end-of-recovery checkpoint comes within moments of the start; a
    // later one may already hold ids given out after the restart.
    let (Some(next), Some(after)) = (next.as_deref().and_then(full_xid), after_start) else {
        return Ok(None);
    };
    if !(0.0..30.0).contains(&after) {
        return Ok(None);
    }
    Ok(Some(d.tx.xid < next))
}

/// `epoch:xid` (as `pg_control_checkpoint` prints `next_xid`) as the
/// 64-bit id `txid_current()` returns.
fn full_xid(text: &str) -> Option<i64> {
    let (epoch, xid) = text.split_once(':')?;
    Some((epoch.parse::<i64>().ok()? << 32) | xid.parse::<i64>().ok()?)
}

/// Without `--rejects`, a record whose line break does not fit the
/// input's style stops the load as the server would have: same message,
/// placed in the input, nothing of the chunk sent. Returns false.
pub(super) fn misfit_line_ending(ctx: &Ctx, chunk: &Chunk, spec: &LoaderSpec) -> bool {
    let Some((error, row)) = line_ending_error(chunk, &spec.dialect) else {
        return true;
    };
    ctx.shared
        .lock()
        .expect("worker state")
        .failed
        .push(Failed {
            seq: chunk.seq,
            error,
            row: Some(row),
        });
    false
}

pub(super) fn failed_chunk(chunk: &Chunk, spec: &LoaderSpec, e: BatchError) -> Failed {
    let row = e
        .record
        .and_then(|i| RowFailure::locate(chunk, &spec.dialect, i, &spec.relname, &e.error));
    let preview = e.record.and_then(|i| {
        let span =
            copyfmt::scan::records_with(&spec.dialect, chunk.eol, &chunk.data).nth(i as usize)?;
        (spec.dialect.format != copyfmt::scan::Format::Binary)
            .then(|| chunk.data.slice(span.start..span.end))
    });
    let mut error = chunk_error(chunk, row.as_ref(), preview.as_deref(), e.error);
    if e.commit_unknown {
        error = error.with_hint(format!(
            "the connection broke while committing lines {}-{} of {}: check whether they \
             are in the table before loading them again",
            chunk.first_line,
            chunk.last_line(),
            chunk.input
        ));
    }
    Failed {
        seq: chunk.seq,
        error,
        row,
    }
}
