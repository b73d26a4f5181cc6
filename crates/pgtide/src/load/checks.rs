//! Checks that run before anything touches the table: options and their
//! limits, inputs that can be opened, a reject path that destroys nothing,
//! FORCE_NULL / FORCE_NOT_NULL columns that are loaded, and (on the
//! server) a row-level security that would refuse every row.

use super::{ledger, upsert, LoadOptions, MAX_CHUNK_BYTES, MAX_WORKERS};
use crate::catalog::{self, Table};
use crate::copyopts::CopyOptions;
use crate::error::{Error, Result};

/// What can be checked without a server: options and their limits (the
/// one place they are enforced: nothing downstream clamps them), that
/// every input can be opened, and that the reject file would destroy
/// nothing.
pub(super) fn local(opts: &LoadOptions) -> Result<()> {
    opts.copy.validate()?;
    opts.method.check_sql(opts.sql.as_deref())?;
    let within = |what: &str, n: usize, max: usize, why: &str| match (1..=max).contains(&n) {
        true => Ok(()),
        false => Err(Error::config(format!(
            "{what} must be from 1 to {max}, not {n} ({why})"
        ))),
    };
    within(
        "--workers",
        opts.workers,
        MAX_WORKERS,
        "each worker is a server connection",
    )?;
    within(
        "--chunk-bytes",
        opts.chunk_bytes,
        MAX_CHUNK_BYTES,
        "a chunk is held in memory whole",
    )?;
    within(
        "--message-bytes",
        opts.message_bytes,
        MAX_CHUNK_BYTES,
        "one CopyData message",
    )?;
    if opts.on_conflict.is_some() {
        upsert::check_method(opts.method)?;
    } else if opts.key.is_some() {
        return Err(Error::config("--key needs --on-conflict")
            .with_hint("e.g. --on-conflict update --key id"));
    }
    if opts.resume.is_some() && opts.inputs.iter().any(|i| crate::source::read_once(i)) {
        return Err(ledger::stdin_refused());
    }
    for input in &opts.inputs {
        crate::source::check(input)?;
    }
    if let Some(path) = &opts.rejects {
        // A resumed load appends to its reject file.
        let keep = opts.overwrite_rejects || opts.resume.is_some();
        crate::reject::paths::check(path, &opts.inputs, keep)?;
    }
    Ok(())
}

/// FORCE_NULL / FORCE_NOT_NULL must name loaded columns (COPY's rule),
/// checked before any data moves; `*` alone is every column
/// (`CopyOptions::with_every_column`).
pub(super) fn forced_columns(
    copy: &CopyOptions,
    columns: &[&catalog::Column],
    table: &Table,
) -> Result<()> {
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    for list in [&copy.force_null, &copy.force_not_null] {
        if crate::copyopts::every_column(list, &names).is_some() {
            continue;
        }
        if let Some(name) = list.iter().find(|n| !names.contains(n)) {
            let star = match name.as_str() {
                "*" => " (`*`, every column, must be alone)",
                _ => "",
            };
            return Err(Error::config(format!(
                "FORCE_NULL/FORCE_NOT_NULL column {name:?} is not loaded into {}{star}",
                table.name
            ))
            .with_hint("name columns that are in --columns (or in the table), or give '*' alone"));
        }
    }
    Ok(())
}

/// Refuses a table whose row-level security applies to this role with no
/// permissive policy for INSERT: the server then refuses every row with
/// the message of a policy violation, which `--rejects` would take for
/// bad rows (each row rejected, the load "done").
pub(super) async fn insert_policy(client: &tokio_postgres::Client, table: &Table) -> Result<()> {
    if table.oid == 0 {
        return Ok(()); // made by --create: no policy yet
    }
    let refused: bool = client
        .query_one(
            include_str!("../../sql/load_no_insert_policy.sql"),
            &[&table.oid],
        )
        .await?
        .get(0);
    match refused {
        false => Ok(()),
        true => Err(Error::config(format!(
            "row-level security on {} lets this role insert no row: no permissive policy FOR \
             INSERT (or ALL) applies to it, so the server would refuse every row",
            table.name
        ))
        .with_hint(
            "create a policy that lets the role insert (CREATE POLICY .. FOR INSERT TO role \
             WITH CHECK (..)), or load as the table's owner",
        )),
    }
}
