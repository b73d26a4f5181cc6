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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio_postgres::Client;

use super::options::TransferOptions;
use super::plan::Planned;
use super::range::{self, Done, Job};
use crate::conn::{Target, Wire};
use crate::error::{Error, ErrorKind};
use crate::progress::Progress;
use crate::snapshot;

/// The jobs, table by table in plan order (referenced tables first, then
/// largest first).
pub(super) fn jobs(
    plans: &[Planned],
    (blocks, deps): (&[u64], &[Vec<usize>]),
    opts: &TransferOptions,
) -> Vec<Job> {
    let mut out = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        let format = if p.binary { "binary" } else { "text" };
        let select = format!("SELECT {} FROM {}", p.columns, p.source.rows_from());
        let target = p.target.name.quoted();
        let freeze = if p.freeze { ", FREEZE" } else { "" };
        // `COPY t ()` is a syntax error: no list for a table of no columns.
        let list = match p.columns.is_empty() {
            true => String::new(),
            false => format!(" ({})", p.columns),
        };
        let target_sql = format!("COPY {target}{list} FROM STDIN (FORMAT {format}{freeze})");
        let begin = if opts.truncate {
            format!("BEGIN; {}", super::depends::truncate_sql(plans, deps, i))
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
/// failure (or the stop request). A job of table `t` starts once every
/// job of the tables `deps[t]` committed (`depends.rs`: the rows its
/// foreign keys reference are there); those come earlier in `jobs`, so
/// they are running or done when it waits.
pub(super) async fn pool(
    jobs: Vec<Job>,
    (sources, targets): (Vec<(Client, Wire)>, Vec<Client>),
    deps: &[Vec<usize>],
    to: &Target,
    opts: &TransferOptions,
    progress: Arc<Progress>,
) -> (Vec<(Job, Done)>, Option<Error>) {
    let mut left = vec![0usize; deps.len()];
    for j in &jobs {
        left[j.table] += 1;
    }
    let left: Arc<Vec<AtomicUsize>> = Arc::new(left.into_iter().map(AtomicUsize::new).collect());
    let deps: Arc<Vec<Vec<usize>>> = Arc::new(deps.to_vec());
    let (tx, rx) = async_channel::unbounded();
    for j in jobs {
        let _ = tx.try_send(j);
    }
    drop(tx);
    let stop = Arc::new(AtomicBool::new(false));
    // A job taken from the channel and dropped unrun (the copy stopped
    // while it waited for the tables it references).
    let dropped = Arc::new(AtomicBool::new(false));
    // One for all workers: a witness serves every transaction begun
    // before it.
    let witness = opts
        .witness
        .then(|| crate::witness::Witness::new(to.clone()));
    let mut tasks = Vec::new();
    for (i, (source, target)) in sources.into_iter().zip(targets).enumerate() {
        let (rx, stop, progress, to) = (rx.clone(), stop.clone(), progress.clone(), to.clone());
        let witness = witness.clone();
        let (left, deps, dropped) = (left.clone(), deps.clone(), dropped.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            let mut failure = None;
            loop {
                if stop.load(Ordering::Relaxed) || progress.stop_requested() {
                    break;
                }
                let Ok(job) = rx.try_recv() else { break };
                let stopped = || stop.load(Ordering::Relaxed) || progress.stop_requested();
                if !referenced_in(&deps[job.table], &left, stopped).await {
                    dropped.store(true, Ordering::Relaxed);
                    break;
                }
                match range::run(&source, &target, (&to, witness.as_ref()), &job, &progress).await {
                    Ok(d) => {
                        left[job.table].fetch_sub(1, Ordering::Relaxed);
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
    if failure.is_none() && (!rx.is_empty() || dropped.load(Ordering::Relaxed)) {
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
        // A value the target refuses, a missing referenced row, a feature
        // it lacks: running again meets the same error.
        let same_again = e
            .sqlstate()
            .is_some_and(|s| s.starts_with("22") || s == "23503" || s == "0A000");
        let first = match same_again {
            true => {
                "the error comes with the rows or the target's definitions, so mend that, then "
            }
            false => "",
        };
        let rest = format!(
            "the ranges listed as committed are on the target, {others}; {first}{}",
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

/// Waits until every job of the tables `deps` committed: true; false when
/// the copy stopped meanwhile.
async fn referenced_in(deps: &[usize], left: &[AtomicUsize], stopped: impl Fn() -> bool) -> bool {
    while !deps.iter().all(|&d| left[d].load(Ordering::Relaxed) == 0) {
        if stopped() {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    true
}

/// How to finish a copy that stopped halfway.
fn again(opts: &TransferOptions) -> &'static str {
    match opts.truncate {
        true => "run again (--truncate empties each table and copies it whole)",
        false => "run again with --truncate to copy the tables whole",
    }
}
