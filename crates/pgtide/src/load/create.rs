//! `--create` inside a load: the plan from `infer::create`, the table's
//! shape read in a rolled-back transaction, what the summary says.

use tokio_postgres::Client;

use super::{LoadOptions, Report};
use crate::catalog::{self, Table};
use crate::conn::Target;
use crate::copyopts::Header;
use crate::error::{Error, Result};
use crate::infer::create::{self, CreatePlan};
use crate::infer::sample::SampleSpec;

/// How `--create` reads the inputs: as the load will.
fn spec(opts: &LoadOptions, sample_rows: usize, major: u32) -> SampleSpec {
    SampleSpec {
        dialect: opts.copy.dialect(major),
        null: opts.copy.null.clone(),
        force_null: opts.copy.force_null.clone(),
        force_not_null: opts.copy.force_not_null.clone(),
        header: opts.copy.header != Header::None,
        columns: opts.columns.clone(),
        rows: sample_rows,
        max_record_bytes: opts.max_record_bytes,
        utf8: opts
            .copy
            .encoding
            .as_deref()
            .is_none_or(super::setup::is_utf8_name),
    }
}

async fn plan(client: &Client, opts: &LoadOptions, major: u32) -> Result<Option<CreatePlan>> {
    let Some(c) = &opts.create else {
        return Ok(None);
    };
    let spec = spec(opts, c.sample_rows, major);
    let format = opts.copy.format;
    create::plan(client, &opts.table, &opts.inputs, format, spec, c)
        .await
        .map(Some)
}

/// `--create --explain`: the plan, checked on the server (in a
/// transaction rolled back), nothing written.
pub async fn explain(target: &Target, opts: &LoadOptions) -> Result<CreatePlan> {
    opts.copy.validate()?;
    for input in &opts.inputs {
        crate::source::check(input)?;
    }
    let client = target.connect().await?;
    let major = catalog::server_major(&client).await?;
    let plan = plan(&client, opts, major)
        .await?
        .ok_or_else(|| Error::config("--explain goes with --create"))?;
    if !plan.exists {
        create::try_create(&client, &plan, false).await?;
    }
    Ok(plan)
}

/// The table to load into, whether its triggers may drop rows, and, with
/// `--create`, the plan (the statement is run later, right before the
/// first chunk). With a table to create, its shape is read inside a
/// transaction that is rolled back.
pub async fn resolve(
    client: &Client,
    opts: &LoadOptions,
    major: u32,
) -> Result<(Table, bool, Option<CreatePlan>)> {
    let inserts = opts.method.is_insert();
    let plan = plan(client, opts, major).await?;
    let (table, skip) = match &plan {
        Some(p) if !p.exists => create::try_create(client, p, inserts).await?,
        _ => {
            let table = Table::resolve(client, &opts.table).await?;
            let skip = catalog::may_skip_rows(client, table.oid, inserts).await?;
            (table, skip)
        }
    };
    Ok((table, skip, plan))
}

/// What the summary says about `--create`: the table made (or found) and
/// renamed columns; a value the inferred types refused gets a hint that
/// names the column, its type and the ways out (with `resume`, also the
/// ledger's entries to forget: a new table is not the one they name).
pub fn report(plan: &CreatePlan, resume: bool, report: &mut Report) {
    if plan.exists {
        report.notes.push(format!(
            "{} exists: loaded into it as it is (--create=if-not-exists)",
            plan.table
        ));
        return;
    }
    // A single-transaction load that failed took the table away again.
    let rolled_back = report.single_transaction
        && report.failure.is_some()
        && !super::single::in_doubt(report.failure.as_ref());
    report.notes.push(format!(
        "{} table {} ({} columns, types from {} sampled rows; --create --explain shows why)",
        if rolled_back {
            "created, then rolled back with the load,"
        } else {
            "created"
        },
        plan.table,
        plan.columns.len(),
        plan.rows_sampled
    ));
    report.notes.extend(plan.renames());
    // A value that does not fit its column's type (not a row with too
    // many or too few fields, 22P04, which no --type mends).
    let data_error = report.failure.as_ref().is_some_and(|e| {
        e.kind() == crate::ErrorKind::Server
            && e.sqlstate()
                .is_some_and(|s| s.starts_with("22") && s != "22P04")
    });
    let column = report.failed_row.as_ref().and_then(|r| r.column.as_deref());
    if let (true, Some(column)) = (data_error, column) {
        let mut hint = create::failure_hint(plan, Some(column), rolled_back);
        if resume && !rolled_back {
            hint.push_str(
                "; with --resume, clear the ledger's entries of this load first \
                 (`pgtide ledger forget INPUT`), or --resume will refuse the new table",
            );
        }
        report.failure = report.failure.take().map(|e| e.with_hint(hint));
    }
}
