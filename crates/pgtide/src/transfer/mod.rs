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

pub mod create;
pub mod range;
pub mod types;
pub mod verify;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use crate::catalog::{self, Table};
use crate::conn::Target;
use crate::error::{Error, ErrorKind, Result};
use crate::ident::QualifiedName;
use crate::progress::Progress;
use crate::snapshot;

use range::{side, Done, Job};
use verify::Digest;

/// Settings of every copy connection, so that text COPY reads back what
/// it wrote whatever the servers' defaults: ISO dates, postgres-style
/// intervals, floats printed exactly.
pub const COPY_SESSION: &str =
    "SET DateStyle = ISO, YMD; SET IntervalStyle = postgres; SET extra_float_digits = 3";

/// What to copy, and how.
#[derive(Debug, Clone)]
pub struct TransferOptions {
    /// Tables named with `--table` (SQL name rules).
    pub tables: Vec<QualifiedName>,
    /// Schemas whose every table is copied (`--schema`).
    pub schemas: Vec<String>,
    /// The target table's name when it differs (one table only).
    pub target_table: Option<QualifiedName>,
    /// Worker pairs (a source and a target connection each).
    pub workers: usize,
    /// Empty each target table first, in the transaction that loads it
    /// (then one transaction per table, with FREEZE where possible).
    pub truncate: bool,
    /// Compare row count and row hash on both servers afterwards.
    pub verify: bool,
    /// Text COPY even where binary would pass.
    pub force_text: bool,
    /// Create tables missing on the target from `pg_dump --schema-only`
    /// of the source (see [`create`]).
    pub create: bool,
}

impl TransferOptions {
    /// Copies `tables` with one worker.
    pub fn new(tables: Vec<QualifiedName>) -> Self {
        TransferOptions {
            tables,
            schemas: Vec::new(),
            target_table: None,
            workers: 1,
            truncate: false,
            verify: false,
            force_text: false,
            create: false,
        }
    }

    /// Rejects what cannot work, before connecting.
    pub fn validate(&self) -> Result<()> {
        if self.workers == 0 {
            return Err(Error::config("--workers must be at least 1"));
        }
        if self.tables.is_empty() && self.schemas.is_empty() {
            return Err(Error::config("nothing to copy")
                .with_hint("name tables with --table T (repeatable) or a schema with --schema S"));
        }
        if self.target_table.is_some() && (self.tables.len() != 1 || !self.schemas.is_empty()) {
            return Err(
                Error::config("--target-table needs exactly one --table").with_hint(
                    "without --target-table, each table goes to the same name on the target",
                ),
            );
        }
        if self.create && self.target_table.is_some() {
            return Err(Error::config("--create cannot be combined with --target-table")
                .with_hint("--create makes each table under its source name; create the renamed table first"));
        }
        Ok(())
    }
}

/// One table's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct TableReport {
    /// The source table as resolved.
    pub source: String,
    /// The target table as resolved.
    pub target: String,
    /// `binary` (passed through, nothing decoded) or `text`.
    pub format: &'static str,
    /// Why that format.
    pub format_reason: String,
    /// Whether the target was truncated (in the loading transaction).
    pub truncated: bool,
    /// Whether `COPY ... FREEZE` was used.
    pub freeze: bool,
    /// Why not, when `--truncate` was given and FREEZE was not used.
    pub freeze_reason: Option<String>,
    /// Rows committed on the target.
    pub rows: u64,
    /// Rows sent that the target's triggers dropped.
    pub rows_skipped_by_table: u64,
    /// COPY bytes passed.
    pub bytes: u64,
    /// Jobs (block ranges, or 1 for the whole table).
    pub ranges: usize,
    /// Jobs committed.
    pub ranges_committed: usize,
    /// The committed ranges, merged: `blocks 0-767`, `whole table`.
    pub committed: Vec<String>,
    /// Source and target digests, with `--verify`.
    pub verify: Option<Verified>,
    /// Created on the target by `--create` (pre-data before the rows).
    pub created: bool,
}

/// `--verify`'s finding for one table.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// On the source, in the copied snapshot.
    pub source: Digest,
    /// On the target, after the copy.
    pub target: Digest,
    /// Whether they are equal.
    pub matched: bool,
}

/// What `--create` did.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedReport {
    /// Tables created (source names, partitions included).
    pub tables: Vec<String>,
    /// `pg_dump --version` of the pg_dump used.
    pub pg_dump: String,
    /// Whether indexes, constraints and triggers (post-data) were added:
    /// not when the copy stopped before the end.
    pub post_data: bool,
    /// Sequences set to the source's values, `name = value`.
    pub sequences: Vec<String>,
}

/// What a copy did.
#[derive(Debug, Serialize)]
pub struct TransferReport {
    /// Per table, largest first (the order they were copied).
    pub tables: Vec<TableReport>,
    /// Rows committed on the target, over all tables.
    pub rows: u64,
    /// COPY bytes passed.
    pub bytes: u64,
    /// Wall time.
    pub seconds: f64,
    /// Worker pairs.
    pub workers: usize,
    /// `server_version` of the source.
    pub source_version: String,
    /// `server_version` of the target.
    pub target_version: String,
    /// Things the user should know.
    pub notes: Vec<String>,
    /// `--create`: the tables created on the target (partitions
    /// included), the pg_dump used, whether post-data was applied, and
    /// the sequences set (`name = value`).
    pub created: Option<CreatedReport>,
    /// Why the copy stopped early (the tables say what was committed);
    /// `None` when it is complete (and verified, with `--verify`).
    #[serde(skip)]
    pub failure: Option<Error>,
}

impl TransferReport {
    /// Rows per second over the wall time.
    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.seconds.max(1e-9)
    }
    /// MB (10^6) of COPY data per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

/// One table to copy, as planned.
struct Planned {
    source: Table,
    target: Table,
    /// Quoted column list, in source order.
    columns: String,
    binary: bool,
    format_reason: String,
    freeze: bool,
    freeze_reason: Option<String>,
    /// Plain heap table on the source: ctid ranges apply.
    ranged: bool,
    may_skip: bool,
    estimate: u64,
}

/// A server's facts (`sql/transfer_server.sql`).
struct Server {
    version: String,
    major: i32,
    encoding: String,
    identity: String,
}

async fn server(c: &Client) -> Result<Server> {
    let r = c
        .query_one(include_str!("../../sql/transfer_server.sql"), &[])
        .await?;
    Ok(Server {
        version: r.get(0),
        major: r.get(1),
        encoding: r.get(2),
        identity: r.get(3),
    })
}

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
    let (s, t) = (server(&src).await?, server(&dst).await?);
    let mut notes = Vec::new();
    let names = table_names(&src, opts).await?;
    let created = if opts.create {
        create::create_missing(&src, &dst, from, to, &names, s.major as u32).await?
    } else {
        None
    };
    let mut plans = plan(&src, &dst, opts, &names, (&s, &t), &mut notes).await?;
    for p in &plans {
        Progress::add(&progress.total_rows, p.estimate);
    }
    drop(src);
    // Every table locked and in one snapshot; the sizes come with it.
    let tables: Vec<(String, Oid)> = plans
        .iter()
        .map(|p| (p.source.name.quoted(), p.source.oid))
        .collect();
    let mut snap = snapshot::open(from, &tables, opts.workers, COPY_SESSION)
        .await
        .map_err(|e| side("the source", e))?;
    let blocks = snap.blocks.clone();
    // Largest first, as they will be copied.
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((blocks[i], plans[i].estimate)));
    let blocks: Vec<u64> = order.iter().map(|&i| blocks[i]).collect();
    plans = {
        let mut slots: Vec<Option<Planned>> = plans.into_iter().map(Some).collect();
        order.iter().map(|&i| slots[i].take().unwrap()).collect()
    };
    let targets = futures_util::future::try_join_all((0..opts.workers).map(|_| async {
        let c = to.connect().await?;
        c.batch_execute(COPY_SESSION).await?;
        Ok::<_, Error>(c)
    }))
    .await
    .map_err(|e| side("the target", e))?;
    let jobs = jobs(&plans, &blocks, opts);
    let mut ranges = vec![0usize; plans.len()];
    for j in &jobs {
        ranges[j.table] += 1;
    }
    let sources = std::mem::take(&mut snap.workers);
    let (outcomes, failure) = pool(jobs, sources, targets, to, progress.clone()).await;
    let mut reports: Vec<TableReport> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| TableReport {
            source: p.source.name.to_string(),
            target: p.target.name.to_string(),
            format: if p.binary { "binary" } else { "text" },
            format_reason: p.format_reason.clone(),
            truncated: opts.truncate,
            freeze: p.freeze,
            freeze_reason: p.freeze_reason.clone(),
            rows: 0,
            rows_skipped_by_table: 0,
            bytes: 0,
            ranges: ranges[i],
            ranges_committed: 0,
            committed: Vec::new(),
            verify: None,
            created: created
                .as_ref()
                .is_some_and(|c| c.oids.contains(&p.source.oid)),
        })
        .collect();
    let mut done_jobs: Vec<(Job, Done)> = outcomes;
    done_jobs.sort_by_key(|(j, _)| (j.table, j.index));
    for (j, d) in &done_jobs {
        let r = &mut reports[j.table];
        r.rows += d.rows;
        r.rows_skipped_by_table += d.skipped;
        r.bytes += d.bytes;
        r.ranges_committed += 1;
    }
    for (i, r) in reports.iter_mut().enumerate() {
        let mine: Vec<&Job> = done_jobs
            .iter()
            .filter(|(j, _)| j.table == i)
            .map(|(j, _)| j)
            .collect();
        r.committed = merged(&mine);
    }
    let mut failure = failure;
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
        failure = check(&snap, &dst, &plans, &mut reports).await;
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

/// The tables named by `--table` and `--schema`, in that order (not yet
/// resolved, repeats possible).
async fn table_names(src: &Client, opts: &TransferOptions) -> Result<Vec<QualifiedName>> {
    let mut names = opts.tables.clone();
    for schema in &opts.schemas {
        let rows = src
            .query(include_str!("../../sql/transfer_schema.sql"), &[schema])
            .await?;
        if rows.is_empty() {
            return Err(
                Error::config(format!("schema {schema:?} has no tables on the source")).with_hint(
                    "check the name (as stored: case matters) and the database given by --from",
                ),
            );
        }
        names.extend(rows.iter().map(|r| QualifiedName {
            schema: Some(r.get(0)),
            name: r.get(1),
        }));
    }
    Ok(names)
}

/// Resolves every table on both servers and decides how each is copied.
async fn plan(
    src: &Client,
    dst: &Client,
    opts: &TransferOptions,
    names: &[QualifiedName],
    (s, t): (&Server, &Server),
    notes: &mut Vec<String>,
) -> Result<Vec<Planned>> {
    let mut seen = HashSet::new();
    let mut plans = Vec::new();
    for name in names {
        let source = Table::resolve(src, name)
            .await
            .map_err(|e| on_side(e, "on the source", "--from"))?;
        if !seen.insert(source.oid) {
            continue;
        }
        let target_name = opts
            .target_table
            .clone()
            .unwrap_or_else(|| source.name.clone());
        let target = Table::resolve(dst, &target_name)
            .await
            .map_err(|e| on_side(e, "on the target", "--to"))?;
        if s.identity == t.identity && source.oid == target.oid {
            return Err(Error::config(format!(
                "{} is the same table on the source and the target",
                source.name
            ))
            .with_hint(
                "--from and --to reach the same database: give --target-table another table",
            ));
        }
        plans.push(plan_table(src, dst, opts, (s, t), source, target).await?);
    }
    if opts.truncate && plans.iter().any(|p| p.ranged) && opts.workers > 1 && plans.len() == 1 {
        notes.push(
            "--truncate loads each table in one transaction: one table is copied by one \
             worker pair (workers share out tables)"
                .into(),
        );
    }
    Ok(plans)
}

async fn plan_table(
    src: &Client,
    dst: &Client,
    opts: &TransferOptions,
    (s, t): (&Server, &Server),
    source: Table,
    target: Table,
) -> Result<Planned> {
    let columns = source.select(None)?;
    if columns.is_empty() {
        return Err(Error::config(format!(
            "{} has no columns to copy",
            source.name
        )));
    }
    let mut pairs = Vec::new();
    for c in &columns {
        let Some(tc) = target.columns.iter().find(|t| t.name == c.name) else {
            return Err(Error::config(format!(
                "{} on the target has no column {:?} (the source {} has it)",
                target.name, c.name, source.name
            ))
            .with_hint(format!(
                "the target's columns are: {}",
                target.column_names()
            )));
        };
        if tc.generated {
            return Err(Error::config(format!(
                "column {:?} of {} is generated on the target but not on the source",
                c.name, target.name
            ))
            .with_hint("COPY cannot write a generated column; make the definitions agree"));
        }
        pairs.push((*c, tc));
    }
    let format_reason = if opts.force_text {
        Some("--text was given".to_owned())
    } else if s.major != t.major {
        Some(format!(
            "PostgreSQL {} -> {}: binary formats are trusted within one major version only",
            s.major, t.major
        ))
    } else if s.encoding != t.encoding {
        Some(format!(
            "server encodings differ ({} -> {})",
            s.encoding, t.encoding
        ))
    } else {
        let s_types: Vec<Oid> = pairs.iter().map(|(c, _)| c.type_oid).collect();
        let t_types: Vec<Oid> = pairs.iter().map(|(_, c)| c.type_oid).collect();
        let sc = types::Catalog::load(src, &s_types).await?;
        let tc = types::Catalog::load(dst, &t_types).await?;
        pairs.iter().find_map(|(a, b)| {
            types::text_reason(
                &a.name,
                (&sc, a.type_oid, &a.type_name),
                (&tc, b.type_oid, &b.type_name),
            )
        })
    };
    let binary = format_reason.is_none();
    let format_reason = format_reason.unwrap_or_else(|| {
        format!(
            "same column types, PostgreSQL {} and encoding {} on both sides",
            s.major, s.encoding
        )
    });
    let info = src
        .query_one(include_str!("../../sql/export_table.sql"), &[&source.oid])
        .await?;
    let (kind, am, estimate): (String, String, f64) = (info.get(0), info.get(1), info.get(2));
    let ranged = matches!(kind.as_str(), "r" | "m") && am == "heap";
    let (freeze, freeze_reason) = match (opts.truncate, target.kind) {
        (false, _) => (false, None),
        (true, 'r') => (true, None),
        (true, 'p') => (
            false,
            Some("COPY FREEZE cannot load a partitioned table".to_owned()),
        ),
        (true, _) => (
            false,
            Some("COPY FREEZE needs a plain table on the target".to_owned()),
        ),
    };
    let may_skip = catalog::may_skip_rows(dst, target.oid, false).await?;
    Ok(Planned {
        columns: catalog::column_list(&columns),
        source,
        target,
        binary,
        format_reason,
        freeze,
        freeze_reason,
        ranged,
        may_skip,
        estimate: estimate.max(0.0) as u64,
    })
}

/// A resolve error with the side named and the right flag in the hint.
fn on_side(e: Error, where_: &str, flag: &str) -> Error {
    if e.kind() != ErrorKind::Config {
        return e;
    }
    let hint = e
        .hint()
        .map(|h| h.replace("--db", flag))
        .unwrap_or_default();
    let hint = if where_ == "on the target" {
        format!("{hint}; or give --create to create it from pg_dump --schema-only of the source")
    } else {
        hint
    };
    Error::new(e.kind(), format!("{} {where_}", e.message())).with_hint(hint)
}

/// The jobs, table by table in plan order (largest first).
fn jobs(plans: &[Planned], blocks: &[u64], opts: &TransferOptions) -> Vec<Job> {
    let mut out = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        let format = if p.binary { "binary" } else { "text" };
        let select = format!("SELECT {} FROM {}", p.columns, p.source.name.quoted());
        let target = p.target.name.quoted();
        let freeze = if p.freeze { ", FREEZE" } else { "" };
        let target_sql = format!(
            "COPY {target} ({}) FROM STDIN (FORMAT {format}{freeze})",
            p.columns
        );
        let begin = if opts.truncate {
            format!("BEGIN; TRUNCATE {target}")
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
async fn pool(
    jobs: Vec<Job>,
    sources: Vec<Client>,
    targets: Vec<Client>,
    to: &Target,
    progress: Arc<Progress>,
) -> (Vec<(Job, Done)>, Option<Error>) {
    let (tx, rx) = async_channel::unbounded();
    for j in jobs {
        let _ = tx.try_send(j);
    }
    drop(tx);
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (i, (source, target)) in sources.into_iter().zip(targets).enumerate() {
        let (rx, stop, progress, to) = (rx.clone(), stop.clone(), progress.clone(), to.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            let mut failure = None;
            loop {
                if stop.load(Ordering::Relaxed) || progress.stop_requested() {
                    break;
                }
                let Ok(job) = rx.try_recv() else { break };
                match range::run(&source, &target, &to, &job, &progress).await {
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
            Error::new(ErrorKind::Interrupted, "the copy was interrupted").with_hint(
                "stopped by Ctrl-C or SIGTERM: the ranges listed as committed are on the \
                 target; run again with --truncate to copy the tables whole",
            ),
        );
    } else if let Some(e) = failure.take() {
        let hint = match e.hint() {
            Some(h) => format!(
                "{h}; the ranges listed as committed are on the target, nothing of the others; \
                 run again with --truncate to copy the tables whole"
            ),
            None => "the ranges listed as committed are on the target, nothing of the others; \
                     run again with --truncate to copy the tables whole"
                .to_owned(),
        };
        let mut out = Error::new(e.kind(), e.message().to_owned()).with_hint(hint);
        if let Some(c) = e.sqlstate() {
            out = out.with_sqlstate(c.to_owned());
        }
        failure = Some(out.with_source(e));
    }
    (done, failure)
}

/// `--verify`: digests on the snapshot's coordinator and on the target;
/// the first mismatch (naming every table that differs) as the failure.
async fn check(
    snap: &snapshot::Snapshot,
    dst: &Client,
    plans: &[Planned],
    reports: &mut [TableReport],
) -> Option<Error> {
    let run = async {
        snap.coordinator().batch_execute(verify::SESSION).await?;
        dst.batch_execute(verify::SESSION).await?;
        let mut differ = Vec::new();
        for (p, r) in plans.iter().zip(reports.iter_mut()) {
            let s = verify::digest(
                snap.coordinator(),
                &format!("SELECT {} FROM {}", p.columns, p.source.name.quoted()),
            )
            .await
            .map_err(|e| side("the source", e))?;
            let t = verify::digest(
                dst,
                &format!("SELECT {} FROM {}", p.columns, p.target.name.quoted()),
            )
            .await
            .map_err(|e| side("the target", e))?;
            let matched = s == t;
            if !matched {
                differ.push(format!(
                    "{} ({} rows) -> {} ({} rows)",
                    p.source.name, s.rows, p.target.name, t.rows
                ));
            }
            r.verify = Some(Verified {
                source: s,
                target: t,
                matched,
            });
        }
        Ok::<_, Error>(differ)
    };
    match run.await {
        Err(e) => Some(e),
        Ok(d) if d.is_empty() => None,
        Ok(d) => Some(
            Error::new(
                ErrorKind::Output,
                format!(
                    "verify: the target differs from the source: {}",
                    d.join(", ")
                ),
            )
            .with_hint(
                "row count or row hash differ: rows already in the target (use --truncate), \
                 triggers or defaults on the target, or writes to it during the copy; values \
                 whose text differs between the servers (money, reg* types, different column \
                 types) also count as different",
            ),
        ),
    }
}

/// Committed jobs of one table (sorted) as merged block ranges.
fn merged(jobs: &[&Job]) -> Vec<String> {
    let mut spans: Vec<(u64, Option<u64>)> = Vec::new();
    for j in jobs {
        match spans.last_mut() {
            Some(last) if last.1 == Some(j.blocks.0) => last.1 = j.blocks.1,
            _ => spans.push(j.blocks),
        }
    }
    spans
        .into_iter()
        .map(|(a, b)| match (a, b) {
            (0, None) => "whole table".to_owned(),
            (a, None) => format!("blocks {a}-end"),
            (a, Some(b)) => format!("blocks {a}-{}", b - 1),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(index: usize, blocks: (u64, Option<u64>)) -> Job {
        Job {
            table: 0,
            index,
            blocks,
            begin: String::new(),
            source_sql: String::new(),
            target_sql: String::new(),
            extra_messages: 0,
            may_skip: false,
        }
    }

    #[test]
    fn committed_ranges_merge() {
        let a = job(0, (0, Some(8)));
        let b = job(1, (8, Some(16)));
        let d = job(3, (24, None));
        assert_eq!(merged(&[&a, &b, &d]), ["blocks 0-15", "blocks 24-end"]);
        assert_eq!(merged(&[&job(0, (0, None))]), ["whole table"]);
        assert!(merged(&[]).is_empty());
    }

    #[test]
    fn options() {
        let t = |n: &str| QualifiedName::parse(n).unwrap();
        assert!(TransferOptions::new(vec![]).validate().is_err());
        let mut o = TransferOptions::new(vec![t("a"), t("b")]);
        o.target_table = Some(t("c"));
        assert!(o.validate().is_err());
        o.tables.pop();
        assert!(o.validate().is_ok());
    }
}
