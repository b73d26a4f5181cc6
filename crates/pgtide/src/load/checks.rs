//! Checks that run before anything touches the table: options and their
//! limits, inputs that can be opened, a reject path that destroys nothing,
//! and FORCE_NULL / FORCE_NOT_NULL columns that are loaded.

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
/// checked before any data moves.
pub(super) fn forced_columns(
    copy: &CopyOptions,
    columns: &[&catalog::Column],
    table: &Table,
) -> Result<()> {
    for name in copy.force_null.iter().chain(&copy.force_not_null) {
        if name == "*" && !columns.iter().any(|c| c.name == "*") {
            return Err(Error::config(
                "FORCE_NULL * / FORCE_NOT_NULL * (every column, PostgreSQL 17's form) is not \
                 supported",
            )
            .with_hint(format!(
                "list the columns, e.g. --force-null '{}'",
                columns
                    .iter()
                    .map(|c| crate::ident::quote(&c.name))
                    .collect::<Vec<_>>()
                    .join(",")
            )));
        }
        if !columns.iter().any(|c| &c.name == name) {
            return Err(Error::config(format!(
                "FORCE_NULL/FORCE_NOT_NULL column {name:?} is not loaded into {}",
                table.name
            ))
            .with_hint("name columns that are in --columns (or in the table)"));
        }
    }
    Ok(())
}
