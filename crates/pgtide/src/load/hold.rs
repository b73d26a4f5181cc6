//! The worker's hold on a chunk that committed lazily (`load/lazy.rs`):
//! it is counted loaded only once a later flush proves it on disk, and
//! sent again if a crash took it back.

use super::ctx::Ctx;
use super::lazy::{durable, same_life, Lazy};
use super::loader::{Batch, InDoubt, Loader};
use super::reconnect::{load_reconnecting, settle_in_doubt};
use super::tally::{check_before_reloading, failed_chunk, finished, isolated};
use crate::batch::TxStart;
use crate::chunk::Chunk;
use crate::error::{classify, Class, Error, ErrorKind};
use crate::progress::Progress;
use crate::reject::isolate::Start;

/// A chunk that committed lazily, not counted yet.
pub(super) struct Held {
    chunk: Chunk,
    rows: u64,
    lazy: Lazy,
    /// Its `--resume` mark, should it be sent again.
    mark: Option<super::ledger::Mark>,
}

/// After a chunk committed whole with `rows` rows: the chunk held before
/// it is counted (or settled), and this one is held if it committed
/// lazily, counted otherwise. False when the load must stop.
pub(super) async fn committed(
    loader: &mut Loader,
    ctx: &Ctx,
    id: usize,
    held: &mut Option<Held>,
    (chunk, rows): (&Chunk, u64),
) -> bool {
    // Taken first: settling the held chunk may load it again.
    let lazy = loader.take_lazy();
    let ok = release(loader, ctx, id, held).await;
    match lazy {
        Some(lazy) => {
            *held = Some(Held {
                chunk: chunk.clone(),
                rows,
                lazy,
                mark: loader.mark(),
            })
        }
        None => count(ctx, id, chunk, rows),
    }
    ok
}

/// Counts or settles the chunk held, if any, before anything but a clean
/// chunk load follows (and when the worker stops). False when the load
/// must stop.
pub(super) async fn release(
    loader: &mut Loader,
    ctx: &Ctx,
    id: usize,
    held: &mut Option<Held>,
) -> bool {
    match held.take() {
        Some(h) if proven(loader, &h.lazy.tx) => {
            count(ctx, id, &h.chunk, h.rows);
            true
        }
        Some(h) => settle(loader, ctx, id, h).await,
        None => true,
    }
}

/// Whether a later transaction of this worker, in the same server life as
/// the lazily committed `tx`, proves it on disk: one that a witness covers
/// (a durable commit begun after `tx`'s `COMMIT` returned, whatever became
/// of the transaction itself).
fn proven(loader: &Loader, tx: &TxStart) -> bool {
    loader.last_begin().is_some_and(|b| {
        b.xid > tx.xid && same_life(tx, &b) && crate::witness::covering(&b).is_some()
    })
}

/// A held chunk without a proof from the next one: asked ([`durable`]),
/// on a new connection if this one broke; sent again if a crash took it.
/// What the loader holds for the chunk after it (its counts, its mark) is
/// kept aside meanwhile: a new connection would drop it, a resend mix it
/// with the held chunk's.
async fn settle(loader: &mut Loader, ctx: &Ctx, id: usize, h: Held) -> bool {
    let counts = loader.take_counts();
    let mark = loader.take_mark();
    loader.set_mark(h.mark.clone());
    let ok = settle_held(loader, ctx, id, h).await;
    loader.set_mark(mark);
    loader.carry_counts(counts);
    ok
}

async fn settle_held(loader: &mut Loader, ctx: &Ctx, id: usize, h: Held) -> bool {
    let asked = durable(loader.client(), &h.lazy.tx, h.lazy.ledger.as_ref()).await;
    let verdict = match asked {
        Ok(verdict) => verdict,
        Err(e) if classify(&e) == Class::Connection => {
            let d = InDoubt::from_lazy(h.lazy.clone(), h.rows);
            settle_in_doubt(loader, ctx, Some(d)).await
        }
        Err(_) => None,
    };
    match verdict {
        Some(true) => {
            count(ctx, id, &h.chunk, h.rows);
            true
        }
        Some(false) => {
            let batch = Batch {
                data: h.chunk.data.clone(),
                records: h.chunk.records,
            };
            match load_reconnecting(loader, ctx, &batch).await {
                // Rows the server set aside (`ON_ERROR ignore`) are found
                // and rejected as on the first try.
                Ok(rows) => match loader.take_skipped() {
                    skipped if skipped.is_empty() => {
                        count(ctx, id, &h.chunk, rows);
                        true
                    }
                    skipped => {
                        let start = Start::Skipped { rows, skipped };
                        isolated(loader, ctx, id, &h.chunk, start).await
                    }
                },
                // The table changed since the chunk first went in (another
                // worker's rows now hold one of its keys): with --rejects,
                // its bad rows are set aside as for any failed chunk.
                Err(e) if ctx.isolate && classify(&e.error) == Class::Row => {
                    isolated(loader, ctx, id, &h.chunk, Start::Failed(e)).await
                }
                Err(e) => {
                    if e.commit_unknown {
                        Progress::add(&ctx.progress.rows_in_doubt, h.chunk.records);
                    }
                    let failed = failed_chunk(&h.chunk, loader.spec(), e);
                    ctx.shared.lock().expect("worker state").failed.push(failed);
                    false
                }
            }
        }
        None => {
            let c = &h.chunk;
            Progress::add(&ctx.progress.rows_in_doubt, c.records);
            let error = Error::new(
                ErrorKind::ConnectionLost,
                format!(
                    "{}: lines {}-{} committed, but the server could not confirm that their \
                     commit reached its disk",
                    c.input,
                    c.first_line,
                    c.last_line()
                ),
            )
            .with_hint(check_before_reloading(c));
            let failed = super::outcome::Failed {
                seq: c.seq,
                error,
                row: None,
            };
            ctx.shared.lock().expect("worker state").failed.push(failed);
            false
        }
    }
}

/// Counts a chunk committed whole.
fn count(ctx: &Ctx, id: usize, chunk: &Chunk, rows: u64) {
    let lines = vec![(chunk.first_line, chunk.last_line())];
    finished(
        ctx,
        id,
        chunk,
        rows,
        chunk.data.len() as u64,
        Vec::new(),
        lines,
    );
}
