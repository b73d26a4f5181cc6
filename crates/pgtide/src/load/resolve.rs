//! The load, resolved once: what `run` executes and `--explain` prints.
//!
//! From the options and the catalog: the statements (COPY into the table,
//! or into the `--on-conflict` staging table; PostgreSQL 17's `ON_ERROR`
//! form with `--rejects`), the upsert's key and merge, what `--resume`
//! skips, `--create` and `--truncate`. [`explain`] runs the same
//! resolution without writing anything (the ledger is read inside a
//! transaction that is rolled back) and says what the load would do.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use tokio_postgres::Client;

use super::{create, ledger, loader, pool, sharded, upsert, LoadOptions, Method};
use crate::catalog::{self, Column, Table};
use crate::conn::Target;
use crate::copyopts::CopyFormat;
use crate::error::{Error, Result};
use crate::infer::create::CreatePlan;

/// The resolved load.
pub(super) struct Resolved {
    /// What the pool runs.
    pub plan: pool::Plan,
    /// `--on-conflict`, resolved.
    pub upsert: Option<upsert::Upsert>,
    /// `--resume`: what earlier runs committed.
    pub resume: Option<Arc<ledger::Resume>>,
    /// `--resume` found earlier runs' entries: this run continues a load.
    pub resuming: bool,
    /// COPY carries FREEZE (`Ok`), or why not.
    pub freeze: std::result::Result<(), String>,
}

/// The target as the catalog describes it, read once.
pub(super) struct Found {
    /// The connection it was read on.
    pub control: Client,
    /// `server_version`.
    pub server_version: String,
    /// The server's major version.
    pub major: u32,
    /// The table (with `--create`, as it will be created).
    pub table: Table,
    /// Its triggers may drop rows (`catalog::may_skip_rows`).
    pub table_may_skip: bool,
    /// `--create`'s plan.
    pub created: Option<CreatePlan>,
}

impl Found {
    /// The loaded columns, in file order.
    pub fn columns(&self, opts: &LoadOptions) -> Result<Vec<&Column>> {
        self.table.select(opts.columns.as_deref())
    }
}

/// A resumed `--create` loads into the table the first run made.
pub(super) fn resumed_create(opts: &LoadOptions) -> Cow<'_, LoadOptions> {
    match (&opts.resume, &opts.create) {
        (Some(_), Some(c)) if !c.if_not_exists => {
            let mut o = opts.clone();
            o.create.as_mut().expect("matched").if_not_exists = true;
            Cow::Owned(o)
        }
        _ => Cow::Borrowed(opts),
    }
}

/// `--create --resume` found the table but no committed range of this
/// input in the ledger: it is the first run's only if it is empty (made,
/// then stopped before a chunk committed). One with rows is someone
/// else's table, which `--create` must not load into (nor `--truncate`
/// empty).
pub(super) async fn refuse_unrelated(control: &Client, table: &Table) -> Result<()> {
    // Every row counts: a policy that hides them must not make someone
    // else's table look empty (with `row_security = off` it is an error).
    control
        .batch_execute("BEGIN; SET LOCAL row_security = off")
        .await?;
    let empty = control
        .query_one(
            &format!("SELECT NOT EXISTS (SELECT FROM {})", table.name.quoted()),
            &[],
        )
        .await;
    control.batch_execute("ROLLBACK").await?;
    let empty: bool = empty
        .map_err(|e| {
            Error::from(e).with_hint(
                "--create --resume could not see every row of the existing table; to load \
                 into it as it is, use --create=if-not-exists",
            )
        })?
        .get(0);
    if empty {
        return Ok(());
    }
    Err(Error::config(format!(
        "table {} already exists, and no earlier run of this input made it",
        table.name
    ))
    .with_hint(
        "--create --resume loads into the table that its first run created; to load \
         into this one as it is, use --create=if-not-exists (or drop --create)",
    ))
}

/// Checks the options, connects, and reads the target table (or plans
/// it, `--create`) and the loaded columns.
pub(super) async fn find(target: &Target, opts: &LoadOptions) -> Result<Found> {
    super::checks::local(opts)?;
    super::single::check(opts)?;
    let control = target.connect().await?;
    let server_version: String = control.query_one("SHOW server_version", &[]).await?.get(0);
    let major = catalog::server_major(&control).await?;
    let (table, table_may_skip, created) = create::resolve(&control, opts, major).await?;
    let found = Found {
        control,
        server_version,
        major,
        table,
        table_may_skip,
        created,
    };
    super::checks::forced_columns(&opts.copy, &found.columns(opts)?, &found.table)?;
    // With --sql the statement is the user's: it may insert elsewhere.
    if opts.sql.is_none() {
        super::checks::insert_policy(&found.control, &found.table).await?;
    }
    if opts.defer_constraints {
        super::constraints::check(&found.control, opts, &found.table).await?;
    }
    if opts.defer_indexes && found.table.kind != 'r' {
        return Err(Error::config(format!(
            "--defer-indexes works on a plain table; {} is not one",
            found.table.name
        ))
        .with_hint("load without --defer-indexes"));
    }
    Ok(found)
}

/// Resolves the load of `found`'s table. With `guard`, a `--resume` load
/// takes its run's lock on `found.control` (`ledger::guard`; not for
/// `--explain`, which loads nothing).
pub(super) async fn resolve(
    target: &Target,
    opts: &LoadOptions,
    found: &Found,
    guard: bool,
) -> Result<Resolved> {
    let (control, table, major) = (&found.control, &found.table, found.major);
    let (created, table_may_skip) = (&found.created, found.table_may_skip);
    let columns = &found.columns(opts)?;
    let column_names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    let upsert = match opts.on_conflict {
        None => None,
        Some(mode) => {
            let key = opts.key.as_deref();
            Some(upsert::resolve(control, table, columns, mode, key, major).await?)
        }
    };
    // --on-conflict: the rows go to the staging table, which needs the
    // column list (it has one more column), and whose name the server
    // prints in error contexts.
    let (copy_table, relname) = match &upsert {
        None => (table.name.quoted(), table.name.name.clone()),
        Some(_) => (
            format!("pg_temp.{}", upsert::STAGE),
            upsert::STAGE.to_owned(),
        ),
    };
    let list = (opts.columns.is_some() || upsert.is_some()).then(|| catalog::column_list(columns));
    // Only a single-transaction load can use FREEZE, and it never
    // resumes: --truncate and --create act in its transaction.
    let created_now = created.as_ref().is_some_and(|c| !c.exists);
    let fresh = created_now || opts.truncate;
    let freeze = super::single::freeze(opts, table, opts.method, fresh);
    let extra: &[&str] = if freeze.is_ok() { &["FREEZE"] } else { &[] };
    let sql = opts
        .copy
        .copy_from_sql_with(&copy_table, list.as_deref(), extra);
    // PostgreSQL 17 skips rows with bad values itself (ON_ERROR): one pass
    // instead of retries for the commonest dirty data. Not for binary input
    // (COPY refuses it) nor other methods (they send no COPY text).
    // Not with --resume: a chunk's ledger row must cover exactly the rows
    // it committed, and ON_ERROR's skipped rows are not decided yet then.
    // Not with --single-transaction: its chunks' attempts go on the wire
    // under savepoints (`loader/nested.rs`), without ON_ERROR.
    // Not with --max-rejects: ON_ERROR commits a chunk's good rows before
    // its skipped rows are judged, so a chunk whose bad rows cross the
    // limit would keep its good rows here and not on PostgreSQL 15 (the
    // limit rolls the chunk back whole).
    let on_error_sql = (opts.rejects.is_some()
        && opts.resume.is_none()
        && opts.max_rejects.is_none()
        && !opts.single_transaction
        && upsert.is_none()
        && major >= 17
        && opts.method == Method::Copy
        && opts.copy.format != CopyFormat::Binary)
        .then(|| {
            opts.copy.copy_from_sql_with(
                &table.name.quoted(),
                list.as_deref(),
                &["ON_ERROR ignore", "LOG_VERBOSITY verbose"],
            )
        });
    let (resume, earlier_rejects) = match opts.resume {
        None => (None, None),
        Some(mode) => {
            let options = ledger::describe_options(&opts.copy, &column_names);
            let name = table.name.to_string();
            if guard {
                ledger::guard(control, &opts.inputs, (&name, table.oid)).await?;
            }
            let mut r =
                ledger::prepare(control, &opts.inputs, mode, (&name, table.oid), &options).await?;
            let earlier = match (&opts.rejects, opts.overwrite_rejects) {
                (Some(path), false) => Some(crate::reject::earlier(path)?),
                _ => None,
            };
            if let Some(e) = &earlier {
                r.rejected = e.rejected.clone();
            }
            (Some(Arc::new(r)), earlier)
        }
    };
    // Resuming: the first run truncated (or created) the table already.
    let resuming = resume.as_ref().is_some_and(|r| r.entries > 0);
    let dialect = opts.copy.dialect(major);
    let mut method_setup = loader::MethodSetup::new(copy_table, columns, &opts.copy, &dialect);
    method_setup.sql = opts.sql.clone();
    method_setup.batch_rows = opts.batch_rows;
    let plan = pool::Plan {
        target: target.clone(),
        method: opts.method,
        sql,
        dialect,
        format: opts.copy.format,
        header: opts.copy.header,
        column_names,
        relname,
        inputs: opts.inputs.clone(),
        workers: opts.workers,
        chunk_bytes: opts.chunk_bytes,
        max_record_bytes: opts.max_record_bytes,
        message_bytes: opts.message_bytes,
        rejects: opts.rejects.clone(),
        overwrite_rejects: opts.overwrite_rejects,
        create_sql: created
            .as_ref()
            .filter(|c| !c.exists)
            .map(|c| c.sql.clone()),
        table_sql: table.name.quoted(),
        truncate_sql: (opts.truncate && !resuming)
            .then(|| format!("TRUNCATE {}", table.name.quoted())),
        max_rejects: opts.max_rejects,
        method_setup,
        on_error_sql,
        // The staging table has no triggers: its COPY counts every row.
        table_may_skip: table_may_skip && upsert.is_none(),
        upsert: upsert.clone().map(Arc::new),
        defer_indexes: opts.defer_indexes.then(|| table.clone()),
        defer_constraints: opts.defer_constraints,
        resume: resume.clone(),
        earlier_rejects,
        single_transaction: opts.single_transaction,
        witness: opts.witness,
        lazy_commit: opts.lazy_commit && opts.witness,
    };
    Ok(Resolved {
        plan,
        upsert,
        resume,
        resuming,
        freeze,
    })
}

/// What a load would do, as `--explain` prints it: one line per decision.
#[derive(Debug, Serialize)]
pub struct Explain {
    /// `(what, decision)` pairs, in the order a reader needs them.
    pub lines: Vec<(String, String)>,
}

impl Explain {
    fn say(&mut self, what: &str, decision: impl Into<String>) {
        self.lines.push((what.to_owned(), decision.into()));
    }
}

/// `load --explain`: the load resolved as `run` resolves it (the same
/// checks, the method's fallbacks, the ledger read), nothing written.
pub async fn explain(target: &Target, opts: &LoadOptions) -> Result<Explain> {
    let opts = &*resumed_create(opts);
    let found = find(target, opts).await?;
    let (table, columns) = (&found.table, found.columns(opts)?);
    let (control, server_version) = (&found.control, &found.server_version);
    let mut x = Explain { lines: Vec::new() };
    x.say("server", format!("PostgreSQL {server_version}"));
    x.say(
        "table",
        format!(
            "{} ({}), columns {}",
            table.name,
            kind(table.kind),
            columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    if let Some(c) = found.created.as_ref().filter(|c| !c.exists) {
        x.say(
            "create",
            format!("{} (right before the first chunk)", c.sql),
        );
    }
    x.say(
        "inputs",
        format!("{} (format {})", opts.inputs.join(", "), opts.copy.format),
    );
    let mut on_client = false;
    if table.kind == 'p' {
        let mut leaves = Vec::new();
        let routed = match sharded::plan(target, opts, table, &columns).await? {
            _ if opts.on_conflict.is_some() || opts.single_transaction => {
                "through the parent table (--on-conflict and --single-transaction are not \
                 routed on the client)"
                    .to_owned()
            }
            Ok(plan) => {
                on_client = true;
                let (each, nodes) = plan.explain();
                leaves.extend(each.into_iter().map(|l| {
                    match (l.server, l.remote_table, l.reason) {
                        (Some(server), Some(remote), _) => {
                            format!("{} -> {remote} on {server}", l.partition)
                        }
                        (_, _, Some(why)) => {
                            format!("{} -> through the coordinator: {why}", l.partition)
                        }
                        _ => format!("{} -> {}", l.partition, l.route),
                    }
                }));
                leaves.extend(
                    nodes
                        .into_iter()
                        .map(|(node, why)| format!("{node} -> through the coordinator: {why}")),
                );
                format!(
                    "on the client: each row to its leaf ({} leaves), foreign leaves by COPY on \
                     their own servers",
                    plan.tree.leaves.len()
                )
            }
            Err(why) => format!("through the parent table: {why}"),
        };
        x.say("routing", routed);
        for leaf in leaves {
            x.say("leaf", leaf);
        }
    }
    // Explaining creates nothing: without a ledger yet, there is nothing
    // to skip, and the plan is resolved as for a fresh load (which would
    // create pgtide.ledger).
    let ledger_exists: bool = control
        .query_one("SELECT to_regclass('pgtide.ledger') IS NOT NULL", &[])
        .await?
        .get(0);
    let fresh;
    // Routed on the client, each server keeps its own entries: the
    // coordinator's ledger alone cannot say what is left.
    let resolving = match opts.resume {
        Some(_) if !ledger_exists || on_client => {
            let mut o = opts.clone();
            o.resume = None;
            fresh = o;
            &fresh
        }
        _ => opts,
    };
    let r = resolve(target, resolving, &found, false).await?;
    let mut spec = pool::loader_spec(&r.plan);
    let fallbacks = spec.prepare(control).await?;
    x.say("method", describe_method(spec.method, &fallbacks));
    x.say(
        "workers",
        format!(
            "{} connection{}, chunks of about {} bytes cut at row boundaries",
            opts.workers,
            if opts.workers == 1 { "" } else { "s" },
            opts.chunk_bytes
        ),
    );
    x.say(
        "transactions",
        match (opts.single_transaction, opts.rejects.is_some()) {
            (true, false) => {
                "one for the whole load, on one connection (--single-transaction): \
                     committed at the end only if every row loaded; any failure rolls \
                     everything back, the TRUNCATE and CREATE too"
            }
            (true, true) => {
                "one for the whole load, on one connection (--single-transaction): each \
                     chunk under a savepoint, bad rows set aside (--rejects) and the rest \
                     committed once at the end; a fatal error, Ctrl-C or --max-rejects \
                     exceeded rolls everything back, the TRUNCATE and CREATE too"
            }
            (false, _) => {
                "one per chunk (BEGIN, the rows, COMMIT): a failed chunk stops the load, \
                      and the summary lists the committed line ranges"
            }
        },
    );
    x.say(
        "truncate",
        match (&r.plan.truncate_sql, opts.truncate) {
            (Some(sql), _) if opts.single_transaction => {
                format!("{sql}, once every check passed, in the load's transaction")
            }
            (Some(sql), _) => {
                format!("{sql}, once every check passed, right before the first chunk")
            }
            (None, true) => "no: this run resumes a load recorded in the ledger".to_owned(),
            (None, false) => "no".to_owned(),
        },
    );
    x.say(
        "freeze",
        match &r.freeze {
            Ok(()) => "yes: COPY .. FREEZE, the table is emptied or created in the load's \
                       transaction, so the rows are written frozen (no VACUUM rewrite later)"
                .to_owned(),
            Err(why) => format!("no: {why}"),
        },
    );
    let deferrable = super::indexes::deferrable(control, table).await?;
    let saved = super::indexes::saved(control, Some(table.oid)).await?;
    let mut indexes = describe_indexes(opts, &deferrable, &saved);
    if opts.defer_constraints {
        let keys = super::constraints::deferrable(control, table).await?;
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        indexes.push_str(&match names.is_empty() {
            true => "; --defer-constraints: no PRIMARY KEY or UNIQUE constraint".to_owned(),
            false => format!(
                "; --defer-constraints: {} dropped too and added back after the load (index \
                 rebuilt, then ADD CONSTRAINT .. USING INDEX): duplicates are not refused row \
                 by row, they make the re-add fail at the end",
                names.join(", ")
            ),
        });
    }
    x.say("indexes", indexes);
    x.say("rejects", describe_rejects(opts, &r.plan, on_client));
    if let Some(u) = &r.upsert {
        x.say(
            "on conflict",
            format!(
                "({}) {}: each chunk COPYed into pg_temp.{}, merged in input order by: {}",
                u.key.join(", "),
                u.mode.name(),
                upsert::STAGE,
                u.merge_sql
            ),
        );
    }
    match (&r.resume, opts.resume) {
        (_, Some(_)) if on_client => x.say(
            "resume",
            "each server's part of a chunk records its byte range in that server's \
             pgtide.ledger, in the part's transaction; a resumed run sends each server only \
             the rows its ledger (or the coordinator's whole-range entries) does not hold",
        ),
        (Some(resume), _) => x.say("resume", describe_resume(resume)),
        (None, Some(_)) => x.say(
            "resume",
            "no ledger entry yet (pgtide.ledger is created by the first --resume load): \
             everything is loaded, each chunk recorded in the ledger",
        ),
        (None, None) => {}
    }
    Ok(x)
}

fn kind(relkind: char) -> &'static str {
    match relkind {
        'p' => "partitioned",
        'f' => "foreign",
        'v' => "view",
        _ => "table",
    }
}

fn describe_method(method: Method, fallbacks: &[String]) -> String {
    let what = match method {
        Method::Copy => "COPY .. FROM STDIN, the input bytes passed through",
        Method::Binary => "binary COPY, rows encoded on the client",
        Method::Pipeline => "prepared INSERT per row, pipelined",
        Method::Values => "multi-row INSERT .. VALUES",
        Method::Insert => "prepared INSERT per row, each awaited",
    };
    let mut out = format!("{} ({what})", method.name());
    for f in fallbacks {
        out.push_str("; ");
        out.push_str(f);
    }
    out
}

fn describe_indexes(
    opts: &LoadOptions,
    deferrable: &[String],
    saved: &[super::indexes::Saved],
) -> String {
    let saved_names: Vec<&str> = saved.iter().map(|s| s.name.as_str()).collect();
    let mut out = match (opts.defer_indexes, deferrable.is_empty()) {
        (false, true) => "kept: maintained as rows arrive (no non-unique secondary index to defer)"
            .to_owned(),
        (false, false) => format!(
            "kept: maintained as rows arrive (--defer-indexes would drop {} and build them after the load)",
            deferrable.join(", ")
        ),
        (true, true) => "--defer-indexes: no non-unique secondary index to drop".to_owned(),
        (true, false) => format!(
            "deferred: {} dropped right before the first chunk (definitions saved in {}), \
             built again after the load by up to {} connections; unique indexes are kept",
            deferrable.join(", "),
            super::indexes::SAVED_TABLE,
            opts.workers
        ),
    };
    if !saved_names.is_empty() {
        out.push_str(&format!(
            "; saved by an interrupted load, still to build: {} ({})",
            saved_names.join(", "),
            if opts.defer_indexes {
                "built after this load"
            } else {
                "`pgtide ledger restore-indexes`"
            }
        ));
    }
    out
}

fn describe_rejects(opts: &LoadOptions, plan: &pool::Plan, on_client: bool) -> String {
    let Some(path) = &opts.rejects else {
        return "none: the first bad row stops the load (--rejects FILE to set bad rows aside)"
            .to_owned();
    };
    let mut out = format!("to {} (reasons in {}.log)", path.display(), path.display());
    let on_error = plan.on_error_sql.as_ref().filter(|_| opts.resume.is_none());
    out.push_str(match (on_error, plan.format) {
        _ if on_client => {
            "; a server's part of a chunk refused for a row is done again in that \
             server's transaction, its bad rows isolated"
        }
        _ if opts.single_transaction => {
            "; each chunk under a savepoint of the load's one transaction, a failed one \
             isolated under savepoints (no ON_ERROR: its first attempt runs on the wire); \
             kept until the one COMMIT, and a rollback keeps the rows found bad in the file"
        }
        (Some(_), _) => "; bad values skipped by the server in one pass (ON_ERROR ignore)",
        (None, CopyFormat::Binary) => "; a failed chunk is retried in ranges",
        (None, _) => {
            "; a failed chunk is retried in ranges (ON_ERROR needs PostgreSQL 17+, \
                      --method copy, and no --resume or --on-conflict)"
        }
    });
    if let Some(m) = opts.max_rejects {
        out.push_str(&format!("; stops after {m}"));
    }
    out
}

fn describe_resume(r: &ledger::Resume) -> String {
    if r.entries == 0 {
        return "no ledger entry for these inputs: everything is loaded, each chunk recorded \
                in pgtide.ledger"
            .to_owned();
    }
    let mut parts = Vec::new();
    for (input, (_, ranges)) in &r.inputs {
        let bytes: u64 = ranges.iter().map(|(a, b)| b - a).sum();
        parts.push(format!("{input}: {bytes} bytes in {} ranges", ranges.len()));
    }
    format!(
        "skips what earlier runs committed ({} ledger entries): {}",
        r.entries,
        parts.join("; ")
    )
}
