//! N clients loading at once, for the scenarios that measure concurrency
//! (`concurrent`, `parallel`): pgtide as tokio tasks with one connection
//! each, psql as `\copy` processes; and the row count that makes their
//! timings mean something.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pgtide::conn::Target;
use pgtide::ident::quote;
use pgtide::load::copy::{copy_bytes, Framing, MESSAGE_BYTES};
use pgtide::{Error, ErrorKind, Result};
use tokio::task::JoinSet;

use crate::baseline::{psql_file, psql_meta};

/// Every completed load must be in the table, or the rate means nothing.
pub fn check_count(what: &str, who: &str, counted: u64, expected: u64) -> Result<()> {
    if counted != expected {
        let message =
            format!("{what}: {who} completed loads of {expected} rows but the table has {counted}");
        return Err(Error::bug(message).with_hint(
            "if another session wrote to the same table meanwhile, run the benchmark on a \
             server nobody else uses; otherwise this is a bug in pgtide",
        ));
    }
    Ok(())
}

/// `clients` tasks, one connection each, each running `sql` with `data`
/// once, then again until `until` has passed (once only when `None`).
/// Returns the number of completed COPYs and the wall time, clock started
/// before connecting.
pub async fn pgtide_clients(
    target: &Target,
    clients: usize,
    sql: &str,
    data: &Bytes,
    until: Option<Duration>,
) -> Result<(u64, f64)> {
    let start = Instant::now();
    let deadline = until.map(|d| start + d);
    let mut tasks = JoinSet::new();
    for _ in 0..clients {
        let (target, sql, data) = (target.clone(), sql.to_owned(), data.clone());
        tasks.spawn(async move {
            let client = target.connect().await?;
            let framing = Framing::default();
            let mut loads = 0u64;
            loop {
                copy_bytes(&client, &sql, &framing, &data, MESSAGE_BYTES).await?;
                loads += 1;
                if deadline.is_none_or(|d| Instant::now() >= d) {
                    return Ok::<u64, Error>(loads);
                }
            }
        });
    }
    let mut loads = 0;
    while let Some(done) = tasks.join_next().await {
        loads += done.map_err(|e| Error::bug(format!("client task failed: {e}")))??;
    }
    Ok((loads, start.elapsed().as_secs_f64()))
}

/// `clients` OS threads each running `psql -c "\copy <table> FROM <file>"`
/// once, then again until `until` has passed (once only when `None`).
/// Returns the number of completed loads and the wall time.
pub async fn psql_clients(
    target: &Target,
    psql: &Path,
    clients: usize,
    table: &str,
    file: &Path,
    until: Option<Duration>,
) -> Result<(u64, f64)> {
    let (target, psql) = (target.clone(), psql.to_owned());
    let meta = format!("\\copy {} FROM {}", quote(table), psql_file(file)?);
    tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        let deadline = until.map(|d| start + d);
        let loads = std::thread::scope(|s| {
            let threads: Vec<_> = (0..clients)
                .map(|_| {
                    s.spawn(|| {
                        let mut loads = 0u64;
                        loop {
                            psql_meta(&target, &psql, &meta)?;
                            loads += 1;
                            if deadline.is_none_or(|d| Instant::now() >= d) {
                                return Ok::<u64, Error>(loads);
                            }
                        }
                    })
                })
                .collect();
            threads.into_iter().try_fold(0u64, |sum, t| {
                let n = t
                    .join()
                    .map_err(|_| Error::new(ErrorKind::Bug, "psql thread panicked"))??;
                Ok::<u64, Error>(sum + n)
            })
        })?;
        Ok((loads, start.elapsed().as_secs_f64()))
    })
    .await
    .map_err(|e| Error::bug(format!("psql task failed: {e}")))?
}
