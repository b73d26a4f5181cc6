//! `pgtide bench export`: seed 004's experiment (pgsql-hackers "COPY
//! speedup": COPY TO is CPU bound).
//!
//! Times the client receiving every byte of `COPY t TO STDOUT` in text and
//! in binary format (tokio-postgres `copy_out`, bytes counted and
//! discarded), next to `SELECT count(*)` (the scan alone, without parallel
//! workers, which the seed's patched binary COPY matched: 2.0 s vs 2.04 s
//! for 10M ints, unpatched 6.3 s) and psql's `\copy t TO '/dev/null'` in
//! both formats. Lower is better; ratios are
//! against `count(*)`, so "1.5x" means COPY costs 50% more than scanning.
//!
//! Two tables, filled server-side and vacuumed (frozen, hint bits set) so
//! every run reads the same pages:
//! - `x_int(i int)`, 10M rows (the seed's table);
//! - `x_mixed(i int, n numeric, d date, ts timestamp, tstz timestamptz,
//!   t text)`, 2M rows: the seed found text mode only 1.06-1.5x faster
//!   after the patch because date/timestamp output functions dominate,
//!   while binary skips those conversions.
//!
//! Row counts scale with `--scale`. Text output is checked to have one
//! line per row; binary output to be more than a header and trailer.

use std::future::Future;
use std::time::Instant;

use futures_util::StreamExt;
use pgtide::cluster::find_psql;
use pgtide::conn::Target;
use pgtide::ident::quote;
use pgtide::{Error, ErrorKind, Result};
use tokio_postgres::Client;

use crate::baseline::psql_meta;
use crate::{server_label, Measurement, Scenario};

/// The reference: a scan without output.
pub const COUNT: &str = "SELECT count(*)";
/// `COPY TO STDOUT` received by pgtide, text format.
pub const COPY_TEXT: &str = "pgtide COPY TO (text)";
/// `COPY TO STDOUT` received by pgtide, binary format.
pub const COPY_BINARY: &str = "pgtide COPY TO (binary)";
/// psql `\copy ... TO '/dev/null'`, text format.
pub const PSQL_TEXT: &str = "psql \\copy TO /dev/null (text)";
/// psql `\copy ... TO '/dev/null'`, binary format.
pub const PSQL_BINARY: &str = "psql \\copy TO /dev/null (binary)";

/// A table to export: name, columns, rows at scale 1, filling SELECT
/// (`$N` = rows).
struct Table {
    name: &'static str,
    columns: &'static str,
    rows: u64,
    select: &'static str,
}

const TABLES: [Table; 2] = [
    Table {
        name: "x_int",
        columns: "i int",
        rows: 10_000_000,
        select: "SELECT g FROM generate_series(1, $N) g",
    },
    Table {
        name: "x_mixed",
        columns: "i int, n numeric, d date, ts timestamp, tstz timestamptz, t text",
        rows: 2_000_000,
        select: "SELECT g, round(g / 7.0, 4), date '2000-01-01' + g % 20000, \
                 timestamp '2000-01-01' + g * interval '1 second', \
                 timestamptz '2000-01-01 00:00:00+00' + g * interval '1 minute', \
                 md5(g::text) FROM generate_series(1, $N) g",
    },
];

/// What to run.
#[derive(Debug, Clone)]
pub struct ExportBench {
    /// Scale of the row counts (1.0 = 10M and 2M rows).
    pub scale: f64,
    /// Runs per contender.
    pub runs: usize,
}

impl Scenario for ExportBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench export: scale {}, {} runs",
            self.scale, self.runs
        )
    }

    fn title(&self) -> String {
        "COPY TO STDOUT text vs binary vs count(*) (seed 004)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![COUNT.into(), COPY_TEXT.into()]
    }

    fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> impl Future<Output = Result<Vec<Measurement>>> {
        run(target, self, on_result)
    }
}

/// Runs the scenario; `on_result` sees each measurement as it completes.
pub async fn run(
    target: &Target,
    bench: &ExportBench,
    mut on_result: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    let client = target.connect().await?;
    let server = server_label(&client).await?;
    // COPY TO runs in one backend; a parallel count(*) would not be the
    // single-process scan the seed compared it with.
    client
        .batch_execute("SET max_parallel_workers_per_gather = 0")
        .await?;
    let psql = find_psql();
    let mut results = Vec::new();
    for t in &TABLES {
        let rows = ((t.rows as f64 * bench.scale).round() as u64).max(1);
        fill(&client, t, rows).await?;
        let label = format!("{} ({rows} rows)", t.name);
        for who in [COUNT, COPY_TEXT, COPY_BINARY, PSQL_TEXT, PSQL_BINARY] {
            let mut m = Measurement::new(&label, who, rows, &server);
            for _ in 0..bench.runs {
                match time_one(target, &client, psql.as_deref(), t.name, rows, who).await {
                    Ok(s) => m.seconds.push(s),
                    Err(e) if e.kind() == ErrorKind::Config => {
                        m.skipped = Some(e.message().to_owned());
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            on_result(&m);
            results.push(m);
        }
    }
    Ok(results)
}

/// Creates and fills `t` server-side, freezes it, and reads it once so the
/// first timed run does not pay for hint bits or a cold cache.
async fn fill(client: &Client, t: &Table, rows: u64) -> Result<()> {
    let name = quote(t.name);
    let select = t.select.replace("$N", &rows.to_string());
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {name}; CREATE TABLE {name} ({}); \
             INSERT INTO {name} {select}",
            t.columns
        ))
        .await?;
    // VACUUM cannot share a multi-statement string (an implicit
    // transaction).
    client
        .batch_execute(&format!("VACUUM (FREEZE, ANALYZE) {name}"))
        .await?;
    client
        .batch_execute(&format!("SELECT count(*) FROM {name}"))
        .await?;
    Ok(())
}

async fn time_one(
    target: &Target,
    client: &Client,
    psql: Option<&std::path::Path>,
    table: &str,
    rows: u64,
    who: &str,
) -> Result<f64> {
    let name = quote(table);
    let start = Instant::now();
    match who {
        COUNT => {
            let n: i64 = client
                .query_one(&format!("SELECT count(*) FROM {name}"), &[])
                .await?
                .get(0);
            check(table, who, n as u64 == rows, "count(*) differs")?;
        }
        COPY_TEXT | COPY_BINARY => {
            let binary = who == COPY_BINARY;
            let options = if binary { " (FORMAT binary)" } else { "" };
            let stream = client
                .copy_out(&format!("COPY {name} TO STDOUT{options}"))
                .await?;
            futures_util::pin_mut!(stream);
            let (mut bytes, mut lines) = (0u64, 0u64);
            while let Some(piece) = stream.next().await {
                let piece = piece?;
                bytes += piece.len() as u64;
                if !binary {
                    lines += memchr::memchr_iter(b'\n', &piece).count() as u64;
                }
            }
            // Binary: 19-byte header + 2-byte trailer around the tuples.
            let ok = if binary { bytes > 21 } else { lines == rows };
            check(table, who, ok, "output does not hold every row")?;
        }
        _ => {
            let psql = psql.ok_or_else(|| Error::config("psql not found"))?;
            let options = if who == PSQL_BINARY {
                " (FORMAT binary)"
            } else {
                ""
            };
            let meta = format!("\\copy {name} TO '/dev/null'{options}");
            let (target, psql) = (target.clone(), psql.to_owned());
            tokio::task::spawn_blocking(move || psql_meta(&target, &psql, &meta))
                .await
                .map_err(|e| Error::bug(format!("psql task failed: {e}")))??;
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

fn check(table: &str, who: &str, ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::bug(format!("{table}: {who}: {what}")))
    }
}
