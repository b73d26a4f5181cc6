//! The baselines every scenario is measured against: psql's `\copy` (the
//! client tool people use) and server-side `COPY ... FROM 'file'` (no
//! client at all: the floor for a single COPY).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tokio_postgres::Client;

use pgtide::conn::Target;
use pgtide::ident::quote_literal;
use pgtide::{Error, ErrorKind, Result};

/// Name of the server-side COPY contender (the usual reference).
pub const SERVER_COPY: &str = "server COPY FROM file";
/// Name of the psql `\copy` contender.
pub const PSQL_COPY: &str = "psql \\copy";

/// Times `psql -c "\copy <table> FROM '<file>' <options>"`, with the
/// connection passed through libpq's environment variables (the password
/// never appears on a command line).
pub fn psql_copy(
    target: &Target,
    psql: &Path,
    table: &str,
    file: &Path,
    options: &str,
) -> Result<f64> {
    let meta = format!("\\copy {table} FROM {} {options}", psql_file(file)?);
    let start = Instant::now();
    psql_meta(target, psql, &meta)?;
    Ok(start.elapsed().as_secs_f64())
}

/// Runs `psql -X -q -v ON_ERROR_STOP=1 -c <meta>` against `target`, the
/// connection (password included) passed through libpq's environment,
/// never the command line.
pub fn psql_meta(target: &Target, psql: &Path, meta: &str) -> Result<()> {
    let out = Command::new(psql)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", meta])
        .envs(target.libpq_env())
        .output()
        .map_err(|e| Error::config(format!("cannot run {}: {e}", psql.display())))?;
    if !out.status.success() {
        return Err(Error::new(
            ErrorKind::Server,
            format!(
                "psql {meta} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(())
}

/// Times server-side `COPY <table> FROM '<file>' <options>`. Needs
/// superuser or pg_read_server_files, and the file on the server's host.
pub async fn server_copy(client: &Client, table: &str, file: &Path, options: &str) -> Result<f64> {
    let sql = format!("COPY {table} FROM {} {options}", quote_file(file));
    let start = Instant::now();
    client.batch_execute(&sql).await?;
    Ok(start.elapsed().as_secs_f64())
}

/// A file name for a psql `\copy` meta-command: `'...'` with `''` for a
/// quote. psql parses it itself, with no backslash escapes, and does not
/// accept SQL's `E'...'` form (it would read a file named `E`); a name psql
/// could misread is refused rather than mangled.
pub fn psql_file(file: &Path) -> Result<String> {
    let name = file.to_string_lossy();
    if name.contains(['\\', '\n', '\r']) {
        return Err(Error::config(format!(
            "cannot pass {name:?} to psql \\copy"
        )));
    }
    Ok(format!("'{}'", name.replace('\'', "''")))
}

fn quote_file(file: &Path) -> String {
    quote_literal(&file.to_string_lossy())
}
