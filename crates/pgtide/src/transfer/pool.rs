//! The work of a copy: the plan cut into jobs, and the worker pairs that
//! run them.
//!
//! ```text
//! jobs: per table (largest first) ctid block ranges (snapshot::block_ranges),
//!   or the whole table with --truncate or for a non-heap source; each
//!   job's statements: BEGIN [; TRUNCATE], COPY (SELECT ...) TO STDOUT,
//!   COPY t (...) FROM STDIN [FREEZE]
//! pool: N tasks, each a (source, target) pair, take the next job from a
//!   channel and run it (range::run); the first failure, or a stop request,
//!   starts no new job; running jobs commit or roll back whole
//! ```
//!
//! One job, its transaction and its COMMIT are `range`'s; this file only
//! decides what the jobs are and who runs them, and words the failure
//! (what is on the target, what to run next).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio_postgres::Client;

use super::options::TransferOptions;
use super::plan::Planned;
use super::range::{self, Done, Job};
use crate::conn::{Target, Wire};
use crate::error::{Error, ErrorKind};
use crate::progress::Progress;
use crate::snapshot;

/// The jobs, table by table in plan order (largest first).
pub(super) fn jobs(plans: &[Planned], blocks: &[u64], opts: &TransferOptions) -> Vec<Job> {
    let mut out = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        let format = if p.binary { "binary" } else { "text" };
        let select = format!("SELECT {} FROM {}", p.columns, p.source.rows_from());
        let target = p.target.name.quoted();
        let freeze = if p.freeze { ", FREEZE" } else { "" };
        let target_sql = format!(
            "COPY {target} ({}) FROM STDIN (FORMAT {format}{freeze})",
            p.columns
        );
        let begin = if opts.truncate {
            format!("BEGIN; {}", p.target.truncate_sql())
        } else {
            "BEGIN".to_owned()
        };
        let ranges = if p.ranged && !opts.truncate {
            snapshot::block_ranges(blocks[i], opts.workers)
        } else {
            vec![(0, None)]
        };
        for (index, (first, end)) in ranges.into_iter().enumerate() {
            out.push(Job {
                table: i,
                index,
                blocks: (first, end),
                begin: begin.clone(),
                source_sql: format!(
                    "COPY ({select}{}) TO STDOUT (FORMAT {format})",
                    snapshot::ctid_condition(first, end)
                ),
                target_sql: target_sql.clone(),
                extra_messages: u64::from(p.binary),
                may_skip: p.may_skip,
            });
        }
    }
    out
}

/// Runs `jobs` on worker pairs; returns the committed jobs and the first
/// failure (or the stop request).
pub(super) async fn pool(
    jobs: Vec<Job>,
    sources: Vec<(Client, Wire)>,
    targets: Vec<Client>,
    to: &Target,
    opts: &TransferOptions,
    progress: Arc<Progress>,
) -> (Vec<(Job, Done)>, Option<Error>) {
    let (tx, rx) = async_channel::unbounded();
    for j in jobs {
        let _ = tx.try_send(j);
    }
    drop(tx);
    let stop = Arc::new(AtomicBool::new(false));
    // One for all workers: a witness serves every transaction begun
    // before it.
    let witness = opts
        .witness
        .then(|| crate::witness::Witness::new(to.clone()));
    let mut tasks = Vec::new();
    for (i, (source, target)) in sources.into_iter().zip(targets).enumerate() {
        let (rx, stop, progress, to) = (rx.clone(), stop.clone(), progress.clone(), to.clone());
        let witness = witness.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            let mut failure = None;
            loop {
                if stop.load(Ordering::Relaxed) || progress.stop_requested() {
                    break;
                }
                let Ok(job) = rx.try_recv() else { break };
                match range::run(&source, &target, (&to, witness.as_ref()), &job, &progress).await {
                    Ok(d) => {
                        Progress::add(&progress.rows_loaded, d.rows);
                        if let Some(w) = progress.worker_rows.get(i) {
                            Progress::add(w, d.rows);
                        }
                        done.push((job, d));
                    }
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        failure = Some(e);
                        break;
                    }
                }
            }
            (done, failure)
        }));
    }
    let mut done = Vec::new();
    let mut failure = None;
    for t in tasks {
        match t.await {
            Ok((d, f)) => {
                done.extend(d);
                if failure.is_none() {
                    failure = f;
                }
            }
            Err(e) => {
                failure.get_or_insert_with(|| Error::bug(format!("a copy worker failed: {e}")));
            }
        }
    }
    if failure.is_none() && !rx.is_empty() {
        failure = Some(
            Error::new(ErrorKind::Interrupted, "the copy was interrupted").with_hint(format!(
                "stopped by Ctrl-C or SIGTERM: the ranges listed as committed are on the \
                     target; {}",
                again(opts)
            )),
        );
    } else if let Some(e) = failure.take() {
        let others = match super::range::is_in_doubt(&e) {
            true => "nothing of the others but the one in doubt",
            false => "nothing of the others",
        };
        let rest = format!(
            "the ranges listed as committed are on the target, {others}; {}",
            again(opts)
        );
        let hint = match e.hint() {
            Some(h) => format!("{h}; {rest}"),
            None => rest,
        };
        let mut out = Error::new(e.kind(), e.message().to_owned()).with_hint(hint);
        if let Some(c) = e.sqlstate() {
            out = out.with_sqlstate(c.to_owned());
        }
        failure = Some(out.with_source(e));
    }
    (done, failure)
}

/// How to finish a copy that stopped halfway.
fn again(opts: &TransferOptions) -> &'static str {
    match opts.truncate {
        true => "run again (--truncate empties each table and copies it whole)",
        false => "run again with --truncate to copy the tables whole",
    }
}
