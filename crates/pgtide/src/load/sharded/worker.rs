//! One worker of a sharded load: per chunk, route it, load each server's
//! part at once (`rejects::load_part`), and record what each server
//! committed, what the servers refused (`--rejects`) and the first
//! failure.

use std::sync::Arc;

use async_channel::Receiver;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

use super::rejects::load_part;
use super::route::{route_chunk, Routed};
use super::Shared;
use crate::chunk::Chunk;
use crate::error::Result;
use crate::load::row_error::line_ending_error;
use crate::load::LineRange;
use crate::progress::Progress;
use crate::reject::gate::reject_limit;

/// Loads chunks from `rx` over `clients` (one per server, connected before
/// the load started) until the channel closes or the load fails.
pub(super) async fn worker(
    s: &Arc<Shared>,
    rx: Receiver<Chunk>,
    w: usize,
    clients: Vec<Client>,
) -> Result<()> {
    let mut ahead = route_next(s, &rx);
    loop {
        let routing = |e| crate::error::Error::bug(format!("routing a chunk: {e}"));
        let Some(next) = (&mut ahead).await.map_err(routing)? else {
            break;
        };
        let (chunk, routed) = next.map_err(routing)?;
        // The next chunk is routed while this one's parts are sent.
        ahead = route_next(s, &rx);
        if s.ledger.lock().unwrap().failure.is_some() {
            break;
        }
        if chunk.eol_errors > 0 && !s.isolate {
            // Never sent whole (a COPY that starts with such a record
            // settles on the wrong line-ending style): stop as the main
            // path does without --rejects.
            if let Some((e, _)) = line_ending_error(&chunk, &s.dialect) {
                s.ledger.lock().unwrap().failure.get_or_insert(e);
            }
            break;
        }
        let mut routed = match routed {
            Ok(r) => r,
            Err(e) => {
                s.ledger.lock().unwrap().failure.get_or_insert(e);
                rx.close();
                break;
            }
        };
        if routed.skipped > 0 {
            // Done by earlier runs: not read by this one.
            s.progress
                .rows_read
                .fetch_sub(routed.skipped, std::sync::atomic::Ordering::Relaxed);
            Progress::add(&s.progress.rows_resumed, routed.skipped);
            if routed.skipped == chunk.records {
                // Nothing to send; the reject file still hears of the
                // chunk (it writes chunks in order).
                if let Some(file) = s.rejects.lock().unwrap().as_mut() {
                    if let Err(e) = file.submit(chunk.seq, Vec::new()) {
                        s.ledger.lock().unwrap().failure.get_or_insert(e);
                        rx.close();
                        break;
                    }
                }
                continue;
            }
        }
        // Rows refused on the client count against --max-rejects as the
        // servers' do; past it, nothing of the chunk is sent.
        if !s.gate().claim_all(routed.screened.len()) {
            s.ledger
                .lock()
                .unwrap()
                .failure
                .get_or_insert(reject_limit());
            rx.close();
            break;
        }
        let per_server = s
            .servers
            .iter()
            .enumerate()
            .map(|(i, _)| load_part(s, &clients[i], i, &routed, &chunk));
        let results = futures_util::future::join_all(per_server).await;
        let mut l = s.ledger.lock().unwrap();
        let range = LineRange {
            input: chunk.input.to_string(),
            first: chunk.first_line,
            last: chunk.first_line + chunk.lines.max(1) - 1,
        };
        let mut ok_servers = Vec::new();
        let mut failed = None;
        // Rows refused on the client (a misfit line ending) and by the
        // servers whose part committed: in input order.
        let mut rejects = std::mem::take(&mut routed.screened);
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Ok(part) => {
                    l.per_server[i].push(range.clone());
                    if !part.counts.is_empty() {
                        ok_servers.push(s.servers[i].label.clone());
                    }
                    rejects.extend(part.rejects);
                    for (d, sent, got) in part.counts {
                        *l.per_dest.entry(d).or_default() += got;
                        Progress::add(&s.progress.rows_loaded, got);
                        Progress::add(&s.progress.rows_skipped_by_table, sent - got);
                        if let Some(c) = s.progress.worker_rows.get(w) {
                            Progress::add(c, got);
                        }
                    }
                }
                Err(f) => {
                    if f.in_doubt {
                        l.in_doubt[i].push(range.clone());
                        // All or none of the server's part committed.
                        let part: usize = (0..s.dests.len())
                            .filter(|&d| s.dests[d].server == i)
                            .map(|d| routed.records[d].len())
                            .sum();
                        Progress::add(&s.progress.rows_in_doubt, part as u64);
                    }
                    if failed.is_none() {
                        failed = Some(f);
                    }
                }
            }
        }
        rejects.sort_by_key(|r| r.at.record);
        Progress::add(&s.progress.rows_rejected, rejects.len() as u64);
        if let Some(file) = s.rejects.lock().unwrap().as_mut() {
            if let Err(e) = file.submit(chunk.seq, rejects) {
                failed.get_or_insert(e.into());
            }
        }
        match failed {
            None => {
                l.chunks += 1;
                Progress::add(&s.progress.bytes_loaded, chunk.data.len() as u64);
                l.committed.push(range);
            }
            Some(f) => {
                if !ok_servers.is_empty() {
                    l.partial.push(format!(
                        "{} lines {}-{}: committed on {} only",
                        range.input,
                        range.first,
                        range.last,
                        ok_servers.join(", ")
                    ));
                }
                if l.failure.is_none() {
                    l.failure = Some(with_resume_hint(s, f.error));
                    l.failed_row = f.row;
                }
                drop(l);
                rx.close();
                break;
            }
        }
    }
    // A chunk taken ahead when the load stopped is not loaded: its lines
    // are not among the committed ones the summary lists.
    ahead.abort();
    Ok(())
}

/// A chunk routed ahead, or why its routing did not finish.
type Ahead = std::result::Result<(Chunk, Result<Routed>), tokio::task::JoinError>;

/// Takes the next chunk and routes it on a blocking thread, so that a
/// worker's routing (the client's CPU) overlaps the sending of the chunk
/// before it (the servers' work) instead of alternating with it; `None`
/// once the channel is closed and empty (a routing that panicked is an
/// error, never the end of the input). Each worker so holds up to two
/// routed chunks.
fn route_next(s: &Arc<Shared>, rx: &Receiver<Chunk>) -> JoinHandle<Option<Ahead>> {
    let (s, rx) = (s.clone(), rx.clone());
    tokio::spawn(async move {
        let chunk = rx.recv().await.ok()?;
        let route = move || {
            let routed = route_chunk(&s, &chunk);
            (chunk, routed)
        };
        Some(tokio::task::spawn_blocking(route).await)
    })
}

/// With `--resume`, a lost server is finished by running the same load
/// again: each server's ledger says what it holds.
fn with_resume_hint(s: &Shared, e: crate::error::Error) -> crate::error::Error {
    if s.resume.is_none() || e.kind() != crate::error::ErrorKind::ConnectionLost {
        return e;
    }
    e.with_hint(
        "once every server is up, run the same command again (with --resume): each server \
         gets only the rows its ledger does not hold, whatever --workers or --chunk-bytes",
    )
}
