//! `pgtide copy`: rows from tables of one server into tables of another,
//! streamed with no file in between.
//!
//! ```text
//! plan: resolve every table on both servers (--table, --schema), map
//!   columns by name, binary or text per table (types::text_reason,
//!   same major version and encoding), FREEZE with --truncate
//! snapshot::open on the source: one snapshot, every table locked
//!   against DROP/TRUNCATE, N reader connections; N target connections
//! jobs: each table cut into ctid block ranges (snapshot::block_ranges),
//!   or one job per table with --truncate or when ranges do not apply;
//!   largest table first
//! pool: N workers, each a (source, target) pair taking the next job:
//!   range::run, one target transaction per job
//! first failure or a stop request: no new job; running jobs commit or
//!   roll back whole; the report lists every committed range
//! --verify: verify::digest on the coordinator (the copied state) and on
//!   the target, per table
//! --create: tables missing on the target are created before the plan
//!   (pg_dump pre-data) and finished after the rows (post-data, sequences):
//!   see create.rs
//! ```
//!
//! The files, bottom to top: `options` (what is asked, checked before
//! connecting), `types` (whether a column's binary form passes), `plan`
//! (which tables, and how each goes), `range` (one job: one target
//! transaction), `pool` (the jobs and the worker pairs that run them),
//! `verify` + `check` (`--verify`'s digests), `report` (what was
//! committed), `create` (`--create`); this file only runs them in order.

mod check;
pub mod create;
mod depends;
mod options;
mod plan;
mod pool;
pub mod range;
mod report;
pub mod types;
pub mod verify;

use std::sync::Arc;
use std::time::Instant;

use tokio_postgres::types::Oid;

use crate::conn::Target;
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::snapshot;

pub use options::TransferOptions;
use range::side;
pub use report::{CreatedReport, TableReport, TransferReport, Verified};

/// Settings of every copy connection, so that text COPY reads back what
/// it wrote whatever the servers' or roles' defaults: ISO dates,
/// postgres-style intervals, floats printed exactly, XML read as
/// content (a fragment is valid xml; `xmloption = document` refuses it),
/// as pg_restore sets it; `money` printed and read in the C locale (each
/// side's own `lc_monetary` would read `12,50 €` as 1250), which keeps
/// its stored amount as a binary copy would; `NULL` in an array read as
/// NULL (`array_nulls = off` reads it as the string).
const TARGET_SESSION: &str = "SET DateStyle = ISO, YMD; SET IntervalStyle = postgres; \
     SET extra_float_digits = 3; SET xmloption = content; SET lc_monetary = 'C'; \
     SET array_nulls = on";

/// Added to the source's settings: rows that a row-level security
/// policy hides from the source role make the copy fail, as in pg_dump,
/// instead of leaving them out unsaid.
const WHOLE_TABLES: &str = "SET row_security = off";

/// Added to the source's settings when a copied column is of a reg*
/// type: an empty `search_path`, so that its values (`regclass`,
/// `regproc`, ..) print schema-qualified, as pg_dump prints them, and
/// name the same objects on the target whatever either side's
/// search_path (an unqualified `thing` printed by a source whose
/// search_path starts with `app` is `public.thing` on a target that
/// searches `public`). Only then: a view or a row-level security policy
/// may call functions that find tables by the role's search_path. The
/// source's statements name tables qualified.
const QUALIFIED_NAMES: &str = "SET search_path = ''";

/// Copies per `opts` from `from` to `to`. `Err` when nothing was written
/// to the target; once writing started, the report's `failure` says why
/// it stopped and its tables what was committed.
pub async fn run(
    from: &Target,
    to: &Target,
    opts: &TransferOptions,
    progress: Arc<Progress>,
) -> Result<TransferReport> {
    opts.validate()?;
    let start = Instant::now();
    let src = from.connect().await.map_err(|e| side("the source", e))?;
    let dst = to.connect().await.map_err(|e| side("the target", e))?;
    let (s, t) = (plan::server(&src).await?, plan::server(&dst).await?);
    let mut notes = Vec::new();
    let names = plan::table_names(&src, opts).await?;
    plan::refuse_sources(&src, &names).await?;
    let created = if opts.create {
        create::create_missing(&src, &dst, from, to, &names, s.major as u32).await?
    } else {
        None
    };
    let plans = plan::plan(&src, &dst, opts, &names, (&s, &t), &mut notes).await?;
    for p in &plans {
        Progress::add(&progress.total_rows, p.estimate);
    }
    drop(src);
    // Every table locked and in one snapshot; the sizes come with it.
    let tables: Vec<(String, Oid)> = plans
        .iter()
        .map(|p| (p.source.name.quoted(), p.source.oid))
        .collect();
    let names_objects = plans.iter().any(|p| p.names_objects);
    let source_session = match names_objects {
        true => format!("{TARGET_SESSION}; {WHOLE_TABLES}; {QUALIFIED_NAMES}"),
        false => format!("{TARGET_SESSION}; {WHOLE_TABLES}"),
    };
    let mut snap = snapshot::open(from, &tables, opts.workers, &source_session)
        .await
        .map_err(|e| side("the source", e))?;
    let (mut plans, blocks) = plan::largest_first(plans, &snap.blocks);
    let deps = depends::references(&dst, &mut plans)
        .await
        .map_err(|e| side("the target", e))?;
    let order = depends::referenced_first(&deps);
    if let (true, Some((a, b))) = (opts.truncate, depends::cycle(&deps, &order)) {
        return Err(Error::config(format!(
            "{} and {} reference each other on the target (through foreign keys): --truncate \
             cannot empty and load one of them before the other",
            plans[a].target.name, plans[b].target.name
        ))
        .with_hint(
            "empty them yourself in one statement (TRUNCATE a, b), then copy without --truncate",
        ));
    }
    let (plans, blocks, deps) = depends::reorder(plans, blocks, deps, &order);
    let targets = futures_util::future::try_join_all((0..opts.workers).map(|_| async {
        let c = to.connect().await?;
        c.batch_execute(TARGET_SESSION).await?;
        Ok::<_, Error>(c)
    }))
    .await
    .map_err(|e| side("the target", e))?;
    let jobs = pool::jobs(&plans, (&blocks, &deps), opts);
    let mut ranges = vec![0usize; plans.len()];
    for j in &jobs {
        ranges[j.table] += 1;
    }
    let sources = std::mem::take(&mut snap.workers);
    let (done, mut failure) =
        pool::pool(jobs, (sources, targets), &deps, to, opts, progress.clone()).await;
    let created_oids = created.as_ref().map_or(&[][..], |c| &c.oids[..]);
    let truncated = match opts.truncate {
        true => depends::emptied(&deps, done.iter().map(|(j, _)| j.table)),
        false => vec![false; plans.len()],
    };
    let mut reports = report::tables(&plans, &ranges, done, &truncated, created_oids);
    let created = match created {
        None => None,
        Some(c) => {
            let mut r = CreatedReport {
                tables: c.tables.iter().map(ToString::to_string).collect(),
                pg_dump: c.pg_dump.clone(),
                post_data: false,
                sequences: Vec::new(),
            };
            if failure.is_none() {
                match create::finish(&c, snap.coordinator(), &dst, to).await {
                    Ok(seqs) => {
                        r.post_data = true;
                        r.sequences = seqs;
                    }
                    Err(e) => failure = Some(e),
                }
            } else {
                notes.push(
                    "--create: the copy stopped, so the created tables have no indexes, \
                     constraints or triggers yet (pg_dump --section=post-data was not applied)"
                        .into(),
                );
            }
            Some(r)
        }
    };
    if failure.is_none() && opts.verify {
        failure = check::check(&snap, &dst, &plans, &mut reports, names_objects).await;
    }
    drop(snap);
    let rows = reports.iter().map(|r| r.rows).sum();
    let bytes = reports.iter().map(|r| r.bytes).sum();
    Ok(TransferReport {
        tables: reports,
        rows,
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        workers: opts.workers,
        source_version: s.version,
        target_version: t.version,
        notes,
        created,
        failure,
    })
}
