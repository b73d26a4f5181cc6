//! The load, resolved once: what `run` executes and `--explain` prints.
//!
//! From the options and the catalog: the statements (COPY into the table,
//! or into the `--on-conflict` staging table; PostgreSQL 17's `ON_ERROR`
//! form with `--rejects`), the upsert's key and merge, what `--resume`
//! skips, `--create` and `--truncate`. `explain.rs` runs the same
//! resolution without writing anything (the ledger is read inside a
//! transaction that is rolled back) and says what the load would do.

use std::borrow::Cow;
use std::sync::Arc;

use tokio_postgres::Client;

use super::{create, ledger, loader, pool, upsert, LoadOptions, Method};
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
    /// An INSTEAD rule on INSERT rewrites the INSERT methods' statements,
    /// whose counts are then the rule's (`catalog::instead_rule`).
    pub instead_rule: bool,
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

/// The load's options with `--force-null '*'` (and `--force-not-null`)
/// spelled out as the loaded columns, as every server version takes them.
pub(super) fn every_column<'a>(
    opts: &'a LoadOptions,
    found: &Found,
) -> Result<Cow<'a, LoadOptions>> {
    let names: Vec<String> = found
        .columns(opts)?
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let copy = opts.copy.with_every_column(&names);
    if copy.force_null == opts.copy.force_null && copy.force_not_null == opts.copy.force_not_null {
        return Ok(Cow::Borrowed(opts));
    }
    let mut o = opts.clone();
    o.copy = copy;
    Ok(Cow::Owned(o))
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
    let exists = created.as_ref().is_none_or(|c| c.exists);
    let instead_rule =
        opts.method.is_insert() && exists && catalog::instead_rule(&control, table.oid).await?;
    let found = Found {
        control,
        server_version,
        major,
        table,
        table_may_skip,
        instead_rule,
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
    // Always the columns as the load found them, as pg_dump does: a column
    // added or dropped while the load runs then stops it with the server's
    // error, instead of every later row being rejected for its shape.
    let list = (!columns.is_empty()).then(|| catalog::column_list(columns));
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
        instead_rule: found.instead_rule && upsert.is_none(),
        upsert: upsert.clone().map(Arc::new),
        // Only a hint: a catalog it cannot read leaves isolation as it was.
        references: match opts.rejects {
            Some(_) => super::references::resolve(control, table.oid, columns)
                .await
                .ok()
                .flatten()
                .map(Arc::new),
            None => None,
        },
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
