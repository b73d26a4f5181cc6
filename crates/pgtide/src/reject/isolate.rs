//! Finding the bad rows of a failed chunk, loading all the others.
//!
//! The chunk is retried in contiguous record ranges, each its own
//! transaction through the same loader (so every method gets this):
//!
//! - the server named the failing record (its error context says
//!   `COPY t, line N`, or a statement failed): that record is rejected
//!   (for encoding errors, only once it fails again on its own),
//!   the records before it are loaded as one batch (they passed every
//!   row-level check), and the rest is retried in a window about twice
//!   the distance to that bad row, so a dirty chunk does not resend its
//!   whole tail after every bad row; and no range sent in one
//!   transaction's pass is longer than the gaps between the failures so
//!   far warrant (`reject/sizes.rs`), so a failure undoes a fraction of the
//!   rows since the last one;
//! - rows the screen (`load/screen.rs`) suspected and a probe of each
//!   alone proved bad whatever comes before them (a bad value, a NULL in a
//!   NOT NULL column) are rejected first and left out of the chunk
//!   (`reject/site.rs`), so the rows between them go as one range;
//! - the server did not name one (foreign keys and AFTER triggers fire at
//!   the end of the statement, deferred constraints at COMMIT): the rows
//!   a foreign key refuses are found by one query and tried alone in
//!   their place (`reject/hints.rs`); otherwise the range is bisected
//!   until a single record fails on its own;
//! - every range goes through a [`Resilient`] loader: the worker's, which
//!   survives what the main path survives (a broken connection or server
//!   restart: reconnect, settle an in-doubt `COMMIT` by `txid_status`;
//!   deadlocks, serialization failures, lock timeouts: retry the range), so
//!   only row errors reach this module; anything else that gets through
//!   (see [`classify`]) stops, and never rejects a row;
//! - each reject is claimed against `--max-rejects` through the chunk's
//!   [`Gate`]; the claims of a pass that committed nothing are given
//!   back, since the pass after it claims the same rows again.
//!
//! Ranges are handled in input order, so of two rows that conflict (a
//! duplicate key inside one chunk) the first one is loaded and the later
//! one rejected, as a single COPY would have it.

use std::collections::VecDeque;

use copyfmt::scan::{self, RecordSpan};

use super::gate::reject_limit;
pub use super::gate::Gate;
use super::hints::Hints;
pub use super::resilient::Resilient;
use super::site::Site;
use super::sizes::{range_bytes, AHEAD, AHEAD_BYTES, MIN_WINDOW};
pub(crate) use super::verdict::regardless_of_order;
use super::verdict::{clashes, located_exactly};
use super::Reject;
use crate::batch::{Batch, BatchError};
use crate::chunk::Chunk;
use crate::error::{classify, Class, Error, Result};
use crate::failure::RowFailure;

/// How the ranges of a chunk are sent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// All in one transaction, each under a savepoint: a bad row costs a
    /// savepoint rollback, not a commit. Tried first.
    OneTransaction,
    /// Each range in its own transaction, reconnecting and retrying as the
    /// main path does: the fallback when the one transaction cannot
    /// commit (a deferred constraint, a lost connection, a deadlock).
    PerRange,
}

/// The outcome of isolating one chunk (also when it stopped midway).
#[derive(Debug, Default)]
pub struct Isolated {
    /// Rows loaded (committed).
    pub loaded: u64,
    /// Rows rejected, in input order.
    pub rejects: Vec<Reject>,
    /// Input line ranges `(first, last)` whose rows are now either
    /// committed or rejected, in input order.
    pub done: Vec<(u64, u64)>,
    /// Rows the server itself set aside (`ON_ERROR ignore`).
    pub server_skipped: u64,
    /// Bytes of the chunk whose rows are committed or rejected: all of
    /// it, unless isolation stopped midway (then those of `done`, so that
    /// the load's `bytes_loaded` does not count what was never loaded).
    pub bytes: u64,
    /// Rows whose `COMMIT` got no answer that anyone could settle: all or
    /// none of them committed (isolation then stops).
    pub in_doubt: u64,
}

/// Where isolation starts from: what the attempt at the whole chunk did.
#[derive(Debug)]
pub enum Start {
    /// It failed.
    Failed(BatchError),
    /// It committed `rows` rows; the server skipped these records
    /// (`ON_ERROR ignore`), which still need a verdict.
    Skipped {
        /// Rows committed.
        rows: u64,
        /// 0-based records of the chunk the server skipped.
        skipped: Vec<u64>,
    },
    /// Nothing was sent: the chunk holds records whose line break does not
    /// fit the input's style (`Chunk::eol_errors`). They are rejected here
    /// with the server's reason, and the runs between them are loaded.
    Screened,
    /// It failed, and these records (0-based, ascending) look bad to the
    /// client (`load/screen.rs`): each is sent alone, the runs between
    /// them as batches.
    Suspects(Vec<usize>),
    /// Nothing of the chunk is committed and nothing is known about it
    /// (an earlier pass was rolled back): every record needs its verdict.
    Fresh,
}

impl Start {
    /// Where a second pass starts after a first one that committed
    /// nothing: what the chunk's own attempt committed still counts; the
    /// first error was the rolled-back pass's to use.
    fn again(&self) -> Start {
        match self {
            Start::Failed(_) | Start::Fresh => Start::Fresh,
            Start::Skipped { rows, skipped } => Start::Skipped {
                rows: *rows,
                skipped: skipped.clone(),
            },
            Start::Screened => Start::Screened,
            Start::Suspects(s) => Start::Suspects(s.clone()),
        }
    }
}

/// Loads every good row of `chunk` and returns the bad ones. `start` is
/// what the attempt at the whole chunk did. `gate` is claimed before each
/// reject is committed (it enforces `--max-rejects`); when it says no,
/// isolation stops with a `RejectLimit` error. When isolation stops, what
/// it did so far is returned with the error.
pub async fn isolate(
    loader: &mut impl Resilient,
    chunk: &Chunk,
    start: Start,
    gate: &mut Gate,
) -> (Isolated, Option<Error>) {
    let again = start.again();
    match in_one_transaction(loader, chunk, start, gate).await {
        Ok(Some(out)) => return finish(chunk, out, None),
        Ok(None) => {}
        Err(stopped) => {
            // Rows the chunk's own attempt committed (`ON_ERROR ignore`)
            // stay committed whatever happened here: they are reported
            // as loaded and their lines as done.
            let mut out = committed_by_attempt(loader, chunk, &again);
            let e = match stopped {
                Stopped::Limit(e) => e,
                Stopped::InDoubt(e) => {
                    // The transaction held every other row of the chunk.
                    let settled = out.loaded + out.rejects.len() as u64;
                    out.in_doubt = chunk.records.saturating_sub(settled);
                    e
                }
            };
            return finish(chunk, out, Some(e));
        }
    }
    let mut out = Isolated::default();
    let claim = || gate.claim();
    let result = run(loader, chunk, again, claim, &mut out, Mode::PerRange).await;
    finish(chunk, out, result.err())
}

/// What the chunk's own attempt committed, as isolation reports it: with
/// `ON_ERROR ignore`, every record but those the server skipped.
fn committed_by_attempt(loader: &impl Resilient, chunk: &Chunk, start: &Start) -> Isolated {
    let mut out = Isolated::default();
    let Start::Skipped { rows, skipped } = start else {
        return out;
    };
    let dialect = loader.dialect().clone();
    let spans: Vec<RecordSpan> = scan::records_with(&dialect, chunk.eol, &chunk.data).collect();
    let params = loader.parameter_columns();
    let site = Site::new(chunk, &spans, dialect.format, (loader.relname(), &params));
    out.loaded = *rows;
    // The skipped records stay undone: nothing settled them.
    let mut untried = VecDeque::new();
    settled_around(&site, 0, spans.len(), skipped, &mut out, &mut untried);
    out
}

fn finish(chunk: &Chunk, mut out: Isolated, e: Option<Error>) -> (Isolated, Option<Error>) {
    if e.is_none() {
        out.bytes = chunk.data.len() as u64;
    }
    out.rejects.sort_by_key(|r| r.at.record);
    out.done.sort_unstable();
    (out, e)
}

/// Why the one transaction of [`in_one_transaction`] stopped isolation.
enum Stopped {
    /// `--max-rejects` was exceeded: nothing committed.
    Limit(Error),
    /// Its `COMMIT` got no answer that anyone could settle.
    InDoubt(Error),
}

/// The whole chunk's isolation in one transaction (see
/// [`Mode::OneTransaction`]). `Ok(None)`: nothing of it was committed, so
/// the caller may do it again range by range. The rejects are weighed
/// against `--max-rejects` only before the commit, so that a chunk that
/// goes over the limit commits nothing; whenever nothing is committed,
/// their claims are given back (the pass range by range claims the same
/// rows again, and the load would count them twice).
async fn in_one_transaction(
    loader: &mut impl Resilient,
    chunk: &Chunk,
    start: Start,
    gate: &mut Gate,
) -> std::result::Result<Option<Isolated>, Stopped> {
    let Ok(xid) = loader.begin().await else {
        return Ok(None);
    };
    let mut out = Isolated::default();
    let pass = run(
        loader,
        chunk,
        start,
        || true,
        &mut out,
        Mode::OneTransaction,
    )
    .await;
    if pass.is_err() {
        loader.rollback().await;
        return Ok(None);
    }
    if !gate.claim_all(out.rejects.len()) {
        loader.rollback().await;
        return Err(Stopped::Limit(reject_limit()));
    }
    match loader.commit(xid).await {
        Ok(true) => Ok(Some(out)),
        Ok(false) => {
            gate.release(out.rejects.len() as u64);
            Ok(None)
        }
        // Perhaps committed, perhaps not: its rejects are not written,
        // nor counted as rejected; its rows are in doubt, and the load
        // stops.
        Err(e) => {
            gate.release(out.rejects.len() as u64);
            let (first, last) = (chunk.first_line, chunk.last_line());
            Err(Stopped::InDoubt(in_doubt_error(chunk, first, last, e)))
        }
    }
}

async fn run(
    loader: &mut impl Resilient,
    chunk: &Chunk,
    start: Start,
    mut may_reject: impl FnMut() -> bool,
    out: &mut Isolated,
    mode: Mode,
) -> Result<()> {
    let dialect = loader.dialect().clone();
    let relname = loader.relname().to_owned();
    let params = loader.parameter_columns();
    let spans: Vec<RecordSpan> = scan::records_with(&dialect, chunk.eol, &chunk.data).collect();
    let n = spans.len();
    let mut site = Site::new(chunk, &spans, dialect.format, (&relname, &params));
    let mut queue: VecDeque<(usize, usize, Option<BatchError>)> = VecDeque::new();
    // How dirty the chunk looks so far: failed ranges, and how far into
    // the chunk the ranges tried reached (`range_bytes`).
    let (mut failures, mut reached) = (0usize, 0usize);
    let mut hints = Hints::new();
    match start {
        Start::Failed(first) => queue.push_back((0, n, Some(first))),
        Start::Fresh => queue.push_back((0, n, None)),
        Start::Skipped { rows, skipped } => {
            out.loaded += rows;
            settled_around(&site, 0, n, &skipped, out, &mut queue);
        }
        Start::Screened => {
            // Every range sent from here on starts with a record that fits
            // the style, so the server settles on the input's own.
            let mut from = 0;
            for (i, span) in spans.iter().enumerate() {
                let Some(e) = span.eol_error else { continue };
                queue.push_back((from, i, None));
                let at = RowFailure::line_ending(chunk, site.format, i as u64, span, e);
                reject(out, &site, i, at, &mut may_reject)?;
                from = i + 1;
            }
            queue.push_back((from, n, None));
        }
        Start::Suspects(suspects) => {
            let suspects: Vec<usize> = suspects.into_iter().filter(|&i| i < n).collect();
            // With BEFORE row triggers, no refusal of a row tried out of
            // its place is its verdict (a trigger may fill a NULL from the
            // rows before it): each suspect is tried alone in its place.
            let probed = match mode {
                Mode::OneTransaction if !loader.before_triggers() => {
                    let singles: Vec<Batch> =
                        suspects.iter().map(|&i| site.batch(i, i + 1)).collect();
                    loader.probe(&singles).await
                }
                _ => None,
            };
            match probed {
                // Each suspect was tried alone (and undone), before the rows
                // ahead of it were loaded. A bad value or a NULL in a NOT
                // NULL column fails the same wherever the row goes: those
                // are rejected with the server's reason, and left out of
                // the chunk, whose other rows then go as one range. Any
                // other refusal may depend on rows before it (a foreign
                // key to one, a trigger reading the table): that suspect
                // stays in its place, where it is found again if it fails.
                // (Where batches must be slices of the chunk, the runs
                // between rejected suspects go as ranges of their own.)
                Some(Ok(verdicts)) => {
                    let gapped = loader.gapped_batches();
                    let mut from = 0;
                    for (&i, verdict) in suspects.iter().zip(verdicts) {
                        let Some(e) = verdict else { continue };
                        if classify(&e.error) != Class::Row {
                            return Err(stop_error(&site, i, e));
                        }
                        if regardless_of_order(&e) {
                            reject(out, &site, i, site.failure(i, &e), &mut may_reject)?;
                            if gapped {
                                site.leave_out(i);
                            } else {
                                queue.push_back((from, i, None));
                                from = i + 1;
                            }
                        }
                    }
                    queue.push_back((from, n, None));
                }
                Some(Err(e)) => return Err(stop_error(&site, 0, e)),
                None => {
                    let mut from = 0;
                    for i in suspects {
                        queue.push_back((from, i, None));
                        queue.push_back((i, i + 1, None));
                        from = i + 1;
                    }
                    queue.push_back((from, n, None));
                }
            }
        }
    }
    while let Some((lo, hi, known)) = queue.pop_front() {
        if site.kept(lo, hi) == 0 {
            continue;
        }
        let (lo, hi, e) = match (known, mode) {
            (Some(e), _) => (lo, hi, e),
            (None, Mode::PerRange) => match loader.load(&site.batch(lo, hi)).await {
                Ok(rows) => {
                    out.loaded += rows;
                    let skipped = loader.take_skipped();
                    settled_around(&site, lo, hi, &skipped, out, &mut queue);
                    continue;
                }
                Err(e) => (lo, hi, e),
            },
            // This range and the ones queued right after it, in one round
            // trip where the loader can.
            (None, Mode::OneTransaction) => {
                queue.push_front((lo, hi, None));
                let longest = range_bytes(reached, failures);
                let mut ranges: Vec<(usize, usize)> = Vec::new();
                let mut ahead = 0;
                while ranges.len() < AHEAD {
                    let Some(&(l, h, None)) = queue.front() else {
                        break;
                    };
                    if site.kept(l, h) == 0 {
                        queue.pop_front();
                        continue;
                    }
                    let end = site.end_within(l, h, longest);
                    let size = site.bytes(l, end);
                    if !ranges.is_empty() && ahead + size > AHEAD_BYTES {
                        break;
                    }
                    queue.pop_front();
                    if end < h {
                        queue.push_front((end, h, None));
                    }
                    if !ranges.is_empty() {
                        ahead += size;
                    }
                    ranges.push((l, end));
                }
                let batches: Vec<Batch> = ranges.iter().map(|&(l, h)| site.batch(l, h)).collect();
                let results = loader.attempts(&batches).await;
                if results.is_empty() || results.len() > ranges.len() {
                    return Err(Error::bug("isolation: attempts answered no range"));
                }
                // What was not run goes back first: what the ranges that
                // ran queue (their skipped rows, a failure's pieces) comes
                // before it, in input order.
                for &(l, h) in ranges[results.len()..].iter().rev() {
                    queue.push_front((l, h, None));
                }
                let mut failed = None;
                for (&(l, h), result) in ranges.iter().zip(results) {
                    reached = reached.max(spans[h - 1].end);
                    match result {
                        Ok(rows) => {
                            out.loaded += rows;
                            hints.loaded(l, h);
                            let skipped = loader.take_skipped();
                            settled_around(&site, l, h, &skipped, out, &mut queue);
                        }
                        Err(e) => {
                            failed = Some((l, h, e));
                            break;
                        }
                    }
                }
                match failed {
                    Some(f) => f,
                    None => continue,
                }
            }
        };
        if e.commit_unknown {
            out.in_doubt += site.kept(lo, hi) as u64;
            let line = |i: usize| spans.get(i).map_or(chunk.first_line, |s| chunk.line_of(s));
            return Err(in_doubt_error(chunk, line(lo), line(hi - 1), e));
        }
        if classify(&e.error) != Class::Row {
            return Err(stop_error(&site, lo, e));
        }
        let located = e.record.and_then(|k| site.record(lo, hi, k as usize));
        let pointed = located.is_none() && mode == Mode::OneTransaction;
        if pointed
            && hints
                .point(loader, (&site, chunk.eol), (lo, hi), &e, &mut queue)
                .await
        {
            continue;
        }
        if !hints.foreseen(lo, hi) {
            failures += 1;
        }
        reached = reached.max(spans[located.unwrap_or(hi - 1)].end);
        match located {
            // The server may name a row near the bad one: make that row
            // prove it fails on its own before it is rejected.
            Some(bad) if hi - lo > 1 && !located_exactly(&e) => {
                let piece = (bad + 1 + MIN_WINDOW).min(hi);
                queue.push_front((piece, hi, None));
                queue.push_front((bad + 1, piece, None));
                queue.push_front((bad, bad + 1, None));
                queue.push_front((lo, bad, None));
            }
            // A key that clashes with a row before it in this range: that
            // row may yet be refused (a foreign key or an AFTER trigger
            // checks at the end of the statement), which would leave no
            // clash. Judged again at the head of a range, once the rows
            // before it are settled (outside testing: `2,99` `2,1` with
            // 99 missing rejected both).
            Some(bad) if bad > lo && clashes(&e) => {
                let window = (2 * (bad + 1 - lo)).max(MIN_WINDOW);
                let piece = (bad + 1 + window).min(hi);
                queue.push_front((piece, hi, None));
                queue.push_front((bad, piece, None));
                queue.push_front((lo, bad, None));
            }
            Some(bad) => {
                let window = (2 * (bad + 1 - lo)).max(MIN_WINDOW);
                let piece = (bad + 1 + window).min(hi);
                queue.push_front((piece, hi, None));
                queue.push_front((bad + 1, piece, None));
                queue.push_front((lo, bad, None));
                reject(out, &site, bad, site.failure(bad, &e), &mut may_reject)?;
            }
            None if hi - lo == 1 => {
                reject(out, &site, lo, site.failure(lo, &e), &mut may_reject)?;
            }
            None => {
                let mid = lo + (hi - lo) / 2;
                queue.push_front((mid, hi, None));
                queue.push_front((lo, mid, None));
            }
        }
    }
    Ok(())
}

/// Records `lo..hi` were loaded except `skipped` (0-based in what was
/// sent for them), which the server set aside (`ON_ERROR ignore`): the
/// others are done; each skipped one is tried alone, to be rejected with
/// the server's own reason (or loaded, should it pass on its own).
fn settled_around(
    site: &Site<'_>,
    lo: usize,
    hi: usize,
    skipped: &[u64],
    out: &mut Isolated,
    queue: &mut VecDeque<(usize, usize, Option<BatchError>)>,
) {
    out.server_skipped += skipped.len() as u64;
    let bad: Vec<usize> = skipped
        .iter()
        .filter_map(|&k| site.record(lo, hi, k as usize))
        .collect();
    let mut from = lo;
    for &b in &bad {
        site.settled(from, b, &mut out.done, &mut out.bytes);
        from = b + 1;
    }
    site.settled(from, hi, &mut out.done, &mut out.bytes);
    for &b in bad.iter().rev() {
        queue.push_front((b, b + 1, None));
    }
}

fn reject(
    out: &mut Isolated,
    site: &Site<'_>,
    index: usize,
    at: RowFailure,
    may_reject: &mut impl FnMut() -> bool,
) -> Result<()> {
    if !may_reject() {
        return Err(reject_limit());
    }
    let span = &site.spans[index];
    out.done.push(site.lines(index, index + 1));
    out.bytes += site.bytes(index, index + 1) as u64;
    out.rejects.push(Reject::of(at, site.chunk, span));
    Ok(())
}

/// An error that ends isolation, placed at the range it happened in.
/// The error for rows of `chunk` on lines `first..=last` (as far as
/// their records start) whose `COMMIT` nobody could settle.
fn in_doubt_error(chunk: &Chunk, first: u64, last: u64, e: BatchError) -> Error {
    let err = Error::from(e.error);
    Error::new(
        err.kind(),
        format!(
            "{}: while isolating bad rows: {}",
            chunk.input,
            err.message()
        ),
    )
    .with_hint(format!(
        "the connection broke while committing the rows of lines {first}-{} of {} \
         (their bad rows not written to the reject file), and the server cannot say \
         whether that committed: check whether they are in the table before loading them \
         again (with --resume, pgtide's ledger settles this itself)",
        last.max(first),
        chunk.input
    ))
}

fn stop_error(site: &Site<'_>, lo: usize, e: BatchError) -> Error {
    let line = (site.spans.get(lo)).map_or(site.chunk.first_line, |s| site.chunk.line_of(s));
    let err = Error::from(e.error);
    let message = format!(
        "{}: while isolating bad rows near line {line}: {}",
        site.chunk.input,
        err.message()
    );
    let mut out = Error::new(err.kind(), message);
    if let Some(code) = err.sqlstate() {
        out = out.with_sqlstate(code);
    }
    match err.hint() {
        Some(h) => out.with_hint(h.to_owned()),
        None => out,
    }
}
