//! What a chunk's outcome adds to the load's record: the counters, the
//! committed line ranges and the reject file ([`finished`]), or the
//! failure that stops the load, placed in the input ([`failed_chunk`]).
//! Shared by the per-chunk workers (`worker.rs`, `hold.rs`) and
//! `--single-transaction` (`single.rs`).

use super::ctx::Ctx;
use super::loader::Loader;
use super::loader::{BatchError, LoaderSpec};
use super::outcome::{Done, Failed};
use super::reconnect::Session;
use super::row_error::chunk_error;
use super::RowFailure;
use crate::chunk::Chunk;
use crate::progress::Progress;
use crate::reject::isolate::{isolate, Gate, Start};

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

/// What a user does about a chunk whose fate is in doubt: its lines, and
/// what to check.
pub(super) fn check_before_reloading(chunk: &Chunk) -> String {
    format!(
        "lines {}-{} of {}: check whether they are in the table before loading them again \
         (with --resume, pgtide's ledger settles this itself)",
        chunk.first_line,
        chunk.last_line(),
        chunk.input
    )
}

pub(super) fn failed_chunk(chunk: &Chunk, spec: &LoaderSpec, e: BatchError) -> Failed {
    let row = e.record.and_then(|i| {
        let names = (spec.relname.as_str(), spec.parameter_columns());
        RowFailure::locate(chunk, &spec.dialect, i, (names.0, &names.1), &e.error)
    });
    let preview = e.record.and_then(|i| {
        let span =
            copyfmt::scan::records_with(&spec.dialect, chunk.eol, &chunk.data).nth(i as usize)?;
        (spec.dialect.format != copyfmt::scan::Format::Binary)
            .then(|| chunk.data.slice(span.start..span.end))
    });
    let mut error = chunk_error(chunk, row.as_ref(), preview.as_deref(), e.error);
    if e.commit_unknown {
        error = error.with_hint(format!(
            "the connection broke while committing {}",
            check_before_reloading(chunk)
        ));
    }
    Failed {
        seq: chunk.seq,
        error,
        row,
    }
}

/// Isolates the bad rows of a failed chunk; false when the load must stop.
pub(super) async fn isolated(
    loader: &mut Loader,
    ctx: &Ctx,
    id: usize,
    chunk: &Chunk,
    start: Start,
) -> bool {
    let mut session = Session { loader, ctx };
    let (iso, err) = isolate(&mut session, chunk, start, &mut gate(ctx)).await;
    Progress::add(&ctx.progress.server_skipped, iso.server_skipped);
    Progress::add(&ctx.progress.rows_in_doubt, iso.in_doubt);
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
