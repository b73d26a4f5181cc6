//! `pgtide bench export`: issue 7's export targets, on seed 004's
//! experiment (pgsql-hackers "COPY speedup": COPY TO is CPU bound).
//!
//! Contenders, on the same server in the same run (lower is better):
//! - `SELECT count(*)`: the scan alone, without parallel workers (the
//!   floor the seed's patched binary COPY reached: 2.0 s vs 2.04 s for
//!   10M ints, unpatched 6.3 s);
//! - server-side `COPY t TO '/dev/null'`, text and binary: the server's
//!   own cost of producing COPY output with one backend, no client;
//! - psql `\copy t TO 'FILE'`, text, csv and binary: the client people
//!   use, writing a real file;
//! - `pgtide export --table t --output FILE` with each `--workers` count
//!   and each format (the library's `export::run`, in this process).
//!
//! Two tables (`datasets::SERVER_DATASETS`), filled server-side and
//! vacuumed (frozen, hint bits set) so every run reads the same pages:
//! `x_int(i int)` (10M rows at scale 1) and `x_wide` (int, numeric,
//! date, timestamp, timestamptz, text, uuid, jsonb; 1M rows at scale 1).
//! Runs are interleaved (every contender once, then again) so that drift
//! on a shared machine spreads evenly. pgtide's row count is checked, and
//! its file's size against psql's file of the same format (they are byte
//! for byte the same with 1 worker, and the same size with N).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use pgtide::cluster::find_psql;
use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::export::{ExportOptions, What};
use pgtide::ident::{quote, QualifiedName};
use pgtide::progress::Progress;
use pgtide::{Error, Result};
use tokio_postgres::Client;

use crate::baseline::{psql_file, psql_meta};
use crate::datasets::SERVER_DATASETS;
use crate::runner::Runner;
use crate::{blocking, counted, Measurement, Scenario};

/// The scan alone.
pub const COUNT: &str = "SELECT count(*)";
/// Server-side `COPY t TO '/dev/null'`, text.
pub const SERVER_TEXT: &str = "server COPY TO /dev/null (text)";
/// Server-side `COPY t TO '/dev/null' (FORMAT binary)`.
pub const SERVER_BINARY: &str = "server COPY TO /dev/null (binary)";
/// psql `\copy t TO 'FILE'`, text.
pub const PSQL_TEXT: &str = "psql \\copy TO FILE (text)";
/// psql `\copy t TO 'FILE' (FORMAT csv)`.
pub const PSQL_CSV: &str = "psql \\copy TO FILE (csv)";
/// psql `\copy t TO 'FILE' (FORMAT binary)`.
pub const PSQL_BINARY: &str = "psql \\copy TO FILE (binary)";

/// The formats measured, by COPY's name.
pub const FORMATS: [&str; 3] = ["text", "csv", "binary"];

/// `pgtide export (N workers, FORMAT)`.
pub fn export_name(workers: usize, format: &str) -> String {
    format!("pgtide export ({}, {format})", counted(workers, "worker"))
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ExportBench {
    /// Scale of the row counts (1.0 = 10M ints and 1M wide rows).
    pub scale: f64,
    /// Runs per contender.
    pub runs: usize,
    /// `pgtide export --workers` counts.
    pub workers: Vec<usize>,
    /// Where the exported files go (each is removed after its run).
    pub dir: PathBuf,
}

impl Scenario for ExportBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench export: scale {}, {} runs, workers {:?}, files in {}",
            self.scale,
            self.runs,
            self.workers,
            self.dir.display()
        )
    }

    fn title(&self) -> String {
        "export: pgtide export vs psql \\copy TO FILE vs server COPY TO /dev/null vs count(*) \
         (issue 7, seed 004)"
            .into()
    }

    fn references(&self) -> Vec<String> {
        vec![
            PSQL_TEXT.into(),
            PSQL_BINARY.into(),
            SERVER_TEXT.into(),
            COUNT.into(),
        ]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        // COPY TO runs in one backend; a parallel count(*) would not be the
        // single-process scan the seed compared it with.
        r.client
            .batch_execute("SET max_parallel_workers_per_gather = 0")
            .await?;
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::config(format!("cannot create {}: {e}", self.dir.display())))?;
        let psql = find_psql();
        let mut contenders = vec![Who::Count, Who::Server("text"), Who::Server("binary")];
        contenders.extend(FORMATS.map(Who::Psql));
        for &w in &self.workers {
            contenders.extend(FORMATS.map(|f| Who::Export(w, f)));
        }
        for ds in SERVER_DATASETS {
            let rows = ds.rows_at(self.scale);
            ds.fill(&r.client, rows).await?;
            let label = format!("{} ({rows} rows)", ds.name);
            let mut ms: Vec<Measurement> = contenders
                .iter()
                .map(|w| r.blank(&label, &w.name(), rows))
                .collect();
            // The size of psql's file per format: pgtide's must match.
            let mut sizes: HashMap<&str, u64> = HashMap::new();
            let file = self.dir.join(format!("{}.export", ds.name));
            r.interleaved(&mut ms, "", async |client, i| {
                let who = &contenders[i];
                let timed = time_one(target, client, psql.as_deref(), ds.name, rows, who, &file);
                let timed = timed.await;
                let _ = std::fs::remove_file(&file);
                let (seconds, size) = timed?;
                if let (Some(size), Who::Psql(f) | Who::Export(_, f)) = (size, who) {
                    let want = *sizes.entry(f).or_insert(size);
                    if want != size {
                        return Err(Error::bug(format!(
                            "{}: {}: {size} bytes, psql wrote {want}",
                            ds.name,
                            who.name()
                        )));
                    }
                }
                Ok(seconds)
            })
            .await?;
            for m in ms {
                r.push(m);
            }
        }
        Ok(r.finish())
    }
}

/// One contender.
#[derive(Debug, Clone)]
enum Who {
    Count,
    Server(&'static str),
    Psql(&'static str),
    Export(usize, &'static str),
}

impl Who {
    fn name(&self) -> String {
        match self {
            Who::Count => COUNT.into(),
            Who::Server("binary") => SERVER_BINARY.into(),
            Who::Server(_) => SERVER_TEXT.into(),
            Who::Psql("binary") => PSQL_BINARY.into(),
            Who::Psql("csv") => PSQL_CSV.into(),
            Who::Psql(_) => PSQL_TEXT.into(),
            Who::Export(w, f) => export_name(*w, f),
        }
    }
}

/// Times one run; returns the seconds and, for a file, its size. A
/// contender that cannot run here (no psql, no right to write a
/// server-side file) is a configuration error; a wrong result is a bug.
async fn time_one(
    target: &Target,
    client: &Client,
    psql: Option<&Path>,
    table: &str,
    rows: u64,
    who: &Who,
    file: &Path,
) -> Result<(f64, Option<u64>)> {
    let name = quote(table);
    let start = Instant::now();
    let mut size = None;
    match who {
        Who::Count => {
            let n: i64 = client
                .query_one(&format!("SELECT count(*) FROM {name}"), &[])
                .await?
                .get(0);
            check(table, who, n as u64 == rows, "count(*) differs")?;
        }
        Who::Server(format) => {
            let sql = format!("COPY {name} TO '/dev/null' (FORMAT {format})");
            if let Err(e) = client.batch_execute(&sql).await {
                return Err(Error::config(format!("{sql}: {}", Error::from(e))));
            }
        }
        Who::Psql(format) => {
            let psql = psql.ok_or_else(|| Error::config("psql not found"))?;
            let meta = format!("\\copy {name} TO {} (FORMAT {format})", psql_file(file)?);
            let (target, psql) = (target.clone(), psql.to_owned());
            blocking(move || psql_meta(&target, &psql, &meta)).await?;
            let elapsed = start.elapsed().as_secs_f64();
            let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
            return Ok((elapsed, Some(len)));
        }
        Who::Export(workers, format) => {
            let format = match *format {
                "csv" => CopyFormat::Csv,
                "binary" => CopyFormat::Binary,
                _ => CopyFormat::Text,
            };
            let mut opts = ExportOptions::new(
                What::Table(QualifiedName::parse(table)?),
                file.to_string_lossy(),
                format,
            );
            opts.workers = *workers;
            let r = pgtide::export::run(target, &opts, Arc::new(Progress::new(*workers))).await?;
            check(table, who, r.rows == rows, "row count differs")?;
            size = Some(r.bytes);
        }
    }
    Ok((start.elapsed().as_secs_f64(), size))
}

fn check(table: &str, who: &Who, ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::bug(format!("{table}: {}: {what}", who.name())))
    }
}
