//! One worker: takes chunks from the channel and sees each one through.
//!
//! For every chunk: load it in one transaction; when the connection broke
//! before `COMMIT` was sent (nothing committed), reconnect with backoff and
//! send it again; after a deadlock or lock timeout, send it again after a
//! pause; when rows were bad and `--rejects` is on, isolate them
//! (`reject::isolate`) and hand them to the reject file; otherwise stop the
//! pool with an error that places the bad row in the input. Surviving
//! the session (reconnect, retry) is `load/reconnect.rs`'s.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::ctx::Ctx;
use super::hold::{self, Held};
use super::loader::{Batch, Loader, LoaderSpec};
use super::outcome::Failed;
use super::reconnect::load_reconnecting;
use super::row_error::line_ending_error;
use super::tally::{failed_chunk, isolated};
use super::turns::{OnPanic, Turn};
use crate::chunk::Chunk;
use crate::error::{classify, Class, Error};
use crate::progress::Progress;
use crate::reject::isolate::Start;
use tokio_postgres::error::SqlState;

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
    // The last chunk that committed lazily, not yet counted (`load/hold.rs`).
    let mut held: Option<Held> = None;
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
        let _on_panic = ctx.turns.clone().map(|turns| OnPanic {
            turns,
            seq: chunk.seq,
        });
        if let Some(turns) = &ctx.turns {
            loader.set_turn(Some(Turn {
                turns: turns.clone(),
                seq: chunk.seq,
            }));
        }
        if !in_turn(&mut loader, &ctx, &chunk).await {
            // An earlier chunk failed: this one must not take effect.
            rx.close();
            break;
        }
        if chunk.eol_errors > 0 {
            let released = hold::release(&mut loader, &ctx, id, &mut held).await;
            // Never sent whole: a COPY that starts with such a record
            // settles on the wrong line-ending style and misplaces rows.
            let ok = if ctx.isolate {
                after_earlier(&ctx, &chunk).await;
                isolated(&mut loader, &ctx, id, &chunk, Start::Screened).await
            } else {
                misfit_line_ending(&ctx, &chunk, loader.spec())
            };
            let counted = counted_by_server(&mut loader, &ctx, &chunk);
            if !chunk_over(&ctx, &chunk, ok && counted && released) {
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
            _ => {
                if ctx.lazy {
                    loader.commit_lazily_next();
                }
                Some(load_reconnecting(&mut loader, &ctx, &batch).await)
            }
        };
        // A refusal that may need a row of an earlier chunk (a foreign key
        // into the table itself, a trigger) is judged only once every
        // earlier chunk is over: the chunk is loaded again then.
        let attempt = match (attempt, &ctx.turns) {
            (Some(Err(e)), Some(turns)) if turns.earlier_may_matter(&e) => {
                if !turns.after_earlier(chunk.seq).await {
                    // An earlier chunk failed: this one must not take effect.
                    chunk_over(&ctx, &chunk, false);
                    rx.close();
                    break;
                }
                if ctx.lazy {
                    loader.commit_lazily_next();
                }
                Some(load_reconnecting(&mut loader, &ctx, &batch).await)
            }
            (attempt, _) => attempt,
        };
        // Taken before the held chunk is settled, which may load it again.
        let skipped = match attempt {
            Some(Ok(_)) => loader.take_skipped(),
            _ => Vec::new(),
        };
        let clean = matches!(attempt, Some(Ok(_))) && skipped.is_empty();
        let released = clean || hold::release(&mut loader, &ctx, id, &mut held).await;
        let ok = match attempt {
            None => {
                after_earlier(&ctx, &chunk).await;
                let start = Start::Suspects(suspects.unwrap_or_default());
                isolated(&mut loader, &ctx, id, &chunk, start).await
            }
            Some(Ok(rows)) => {
                if skipped.is_empty() {
                    hold::committed(&mut loader, &ctx, id, &mut held, (&chunk, rows)).await
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
                // A CHECK refusal in the merge names no row: ask the
                // staged rows which ones (`upsert/checks.rs`).
                let suspects = match e.error.code() == Some(&SqlState::CHECK_VIOLATION) {
                    true => loader.check_suspects(&chunk, suspects).await,
                    false => suspects,
                };
                let start = match suspects.is_empty() {
                    true => Start::Failed(e),
                    false => Start::Suspects(suspects),
                };
                after_earlier(&ctx, &chunk).await;
                isolated(&mut loader, &ctx, id, &chunk, start).await
            }
            Some(Err(e)) => {
                if e.commit_unknown {
                    // Sent whole and committed whole, or not at all.
                    Progress::add(&ctx.progress.rows_in_doubt, chunk.records);
                }
                let failed = failed_chunk(&chunk, loader.spec(), e);
                ctx.shared.lock().expect("worker state").failed.push(failed);
                false
            }
        };
        let counted = counted_by_server(&mut loader, &ctx, &chunk);
        if !chunk_over(&ctx, &chunk, ok && counted && released) {
            rx.close();
            break;
        }
    }
    hold::release(&mut loader, &ctx, id, &mut held).await;
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

/// Before a chunk's rows are isolated: where a row may need a row of an
/// earlier chunk (`turns.rs`), waits until every earlier chunk is over, so
/// that no row is rejected for want of one that was about to commit.
async fn after_earlier(ctx: &Ctx, chunk: &Chunk) {
    if let Some(turns) = ctx.turns.as_ref().filter(|t| t.earlier_matters()) {
        // Should an earlier chunk have failed, this one is isolated all
        // the same, as a chunk already running finishes.
        let _ = turns.after_earlier(chunk.seq).await;
    }
}

/// A chunk is over (`ok`: every row committed or rejected): later chunks
/// may take their turn (`--on-conflict`, `turns.rs`). Returns `ok`.
fn chunk_over(ctx: &Ctx, chunk: &Chunk, ok: bool) -> bool {
    if let Some(turns) = &ctx.turns {
        turns.over(chunk.seq, ok);
    }
    if let Some(order) = &ctx.order {
        if ok {
            order.finished(chunk.seq);
        } else {
            order.failed(chunk.seq);
        }
    }
    ok
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
