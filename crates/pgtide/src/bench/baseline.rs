//! The baselines every scenario is measured against: psql's `\copy` (the
//! client tool people use) and server-side `COPY ... FROM 'file'` (no
//! client at all: the floor for a single COPY).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::{Error, ErrorKind, Result};
use crate::ident::quote_literal;

/// Finds a `psql` binary: PATH first, then Debian's versioned directories
/// (highest version first).
pub fn find_psql() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("psql"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin/psql")))
            .filter(|p| p.is_file())
            .collect();
        dirs.sort_by_key(|p| {
            p.components()
                .nth(4)
                .and_then(|c| c.as_os_str().to_str()?.parse::<u32>().ok())
                .unwrap_or(0)
        });
        dirs.pop()
    })
}

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
