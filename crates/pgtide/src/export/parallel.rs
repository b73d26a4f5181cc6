//! Many connections, one snapshot, one ordered output.
//!
//! ```text
//! crate::snapshot::open: coordinator + N workers in one snapshot
//! N workers: take the next range job; COPY (SELECT .. WHERE ctid in
//!            [a,b)) TO STDOUT -> that range's bounded channel
//! pump:      ranges in block order -> Output
//! ```
//!
//! Why each row is exported exactly once: see [`crate::snapshot`].
//!
//! # Memory
//! At most [`WINDOW_EXTRA`] + N ranges are started and not yet written,
//! and each range's channel holds at most [`RANGE_QUEUE`] pieces of
//! [`super::receive::PIECE_BYTES`]: (N + 1) x 4 MiB, plus the output queue. A worker whose
//! range is ahead of the output and whose channel is full waits (the
//! server waits with it); it never buffers more.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

use super::output::Output;
use super::receive::{receive, Job, Piece, Received};
use crate::conn::Wire;
use crate::error::Error;
use crate::progress::Progress;

/// Pieces a range may hold ahead of the output: 16 x 256 KiB = 4 MiB, about
/// twice the text of a [`crate::snapshot::RANGE_BLOCKS`] range, so a range usually finishes
/// without waiting and its worker moves on.
pub const RANGE_QUEUE: usize = 16;

/// Ranges started beyond one per worker: the one being written.
pub const WINDOW_EXTRA: usize = 1;

/// Why [`pump`] stopped early.
pub enum PumpError {
    /// A COPY failed (server, connection).
    Copy(Error),
    /// The output writer stopped; `Output::failure` says why.
    Output,
    /// [`Progress::request_stop`] was called (Ctrl-C, SIGTERM).
    Interrupted,
}

/// How often a pump waiting for data looks at the stop flag.
const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Aborts the worker tasks if the pump returns early.
struct Tasks(Vec<JoinHandle<(Client, Wire)>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Runs `jobs` on `clients` (each client, with its [`Wire`], takes the
/// next job when free) and writes their bytes to `output` in job order;
/// gives the clients back when every job is done (a query's transaction
/// commits on its client once the output is in place).
pub async fn pump(
    jobs: Vec<Job>,
    clients: Vec<(Client, Wire)>,
    output: &Output,
    progress: Arc<Progress>,
) -> std::result::Result<(Received, Vec<(Client, Wire)>), PumpError> {
    let window = clients.len() + WINDOW_EXTRA;
    let (job_tx, job_rx) = async_channel::unbounded::<(Job, mpsc::Sender<Piece>)>();
    let mut tasks = Tasks(Vec::new());
    for (i, (client, wire)) in clients.into_iter().enumerate() {
        let jobs = job_rx.clone();
        let progress = progress.clone();
        tasks.0.push(tokio::spawn(async move {
            while let Ok((job, tx)) = jobs.recv().await {
                let got = receive(&client, &wire, &job, &tx, &progress).await;
                match got {
                    Ok(r) => {
                        if let Some(w) = progress.worker_rows.get(i) {
                            Progress::add(w, r.rows);
                        }
                    }
                    // Failed (the pump will say why) or abandoned: this
                    // connection is done either way.
                    Err(_) => break,
                }
            }
            (client, wire)
        }));
    }
    drop(job_rx);
    let mut job_tx = Some(job_tx);
    let mut jobs = jobs.into_iter();
    let mut pending = VecDeque::new();
    let mut total = Received::default();
    loop {
        while pending.len() < window {
            let Some(tx) = &job_tx else { break };
            match jobs.next() {
                Some(job) => {
                    let (piece_tx, piece_rx) = mpsc::channel(RANGE_QUEUE);
                    if tx.send((job, piece_tx)).await.is_err() {
                        return Err(PumpError::Copy(Error::bug("export workers are gone")));
                    }
                    pending.push_back(piece_rx);
                }
                None => {
                    job_tx = None;
                }
            }
        }
        let Some(mut rx) = pending.pop_front() else {
            break;
        };
        loop {
            let next = loop {
                tokio::select! {
                    m = rx.recv() => break m,
                    _ = tokio::time::sleep(STOP_POLL) => {}
                }
                if progress.stop_requested() {
                    return Err(PumpError::Interrupted);
                }
            };
            if progress.stop_requested() {
                return Err(PumpError::Interrupted);
            }
            match next {
                Some(Piece::Data(bytes)) => {
                    if output.send(bytes).await.is_err() {
                        return Err(PumpError::Output);
                    }
                }
                Some(Piece::Done(r)) => {
                    total.rows += r.rows;
                    total.bytes += r.bytes;
                    break;
                }
                Some(Piece::Failed(e)) => return Err(PumpError::Copy(e)),
                None => {
                    return Err(PumpError::Copy(Error::bug(
                        "an export worker stopped before finishing its range",
                    )))
                }
            }
        }
    }
    drop(job_tx);
    let mut clients = Vec::new();
    for task in std::mem::take(&mut tasks.0) {
        if let Ok(client) = task.await {
            clients.push(client);
        }
    }
    Ok((total, clients))
}
