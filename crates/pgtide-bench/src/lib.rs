//! `pgtide bench`: the seed documents' experiments as data.
//!
//! Every scenario times pgtide next to its baselines (psql `\copy`,
//! server-side `COPY ... FROM 'file'`) in the same run, on the same server,
//! repeats each measurement, and reports medians and ratios. Nothing here
//! asserts a timing: tests only check the shape of the results.
//!
//! Its own crate, so that the library never carries psql launching,
//! markdown tables or SVG charts. It uses the library only through its
//! public API (`load::run`, `load::copy::copy_bytes`, `cluster`, `conn`).
//!
//! Layout, bottom to top (a module uses only modules below it, and the
//! crate root's items):
//! - this file: [`Measurement`], [`Scenario`], the helpers every scenario
//!   shares (server label, row counts, names, timing a `pgtide load`);
//! - [`runner`] (one scenario's run against one server: reset, time and
//!   check each run of each contender, skip a contender that cannot run);
//! - [`remote`] (a second server reached through postgres_fdw);
//! - [`baseline`] (psql `\copy`, server-side COPY and their names),
//!   [`datasets`] (the data the scenarios load), [`clients`] (N clients
//!   loading in a loop), [`markdown`] and [`chart`] (reports);
//! - the scenarios, one file each, which never import each other:
//!   [`load`], [`concurrent`], [`parallel`], [`export`], [`copy`],
//!   [`fdw`], [`methods`], [`rejects`], [`shards`], [`upsert`],
//!   [`indexes`], [`freeze`].
//!
//! A new scenario is one file here: a struct of what to run (sizes,
//! `runs`, worker counts, `dir`) implementing [`Scenario`], whose `run` is
//! an `async fn` that opens a [`runner::Runner`] and hands each contender
//! to [`runner::Runner::contender`] (or `interleaved`); then `pub mod` it
//! above, give it a variant and an arm in the CLI's `bench` (its flags
//! flatten `BenchCommonArgs`), and a case in `tests/bench.rs`.

#![deny(missing_docs)]

pub mod baseline;
pub mod chart;
pub mod clients;
pub mod concurrent;
pub mod copy;
pub mod datasets;
pub mod export;
pub mod fdw;
pub mod freeze;
pub mod indexes;
pub mod load;
pub mod markdown;
pub mod methods;
pub mod parallel;
pub mod rejects;
pub mod remote;
pub mod runner;
pub mod shards;
pub mod upsert;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use pgtide::cluster::{Cluster, ClusterOptions, PgBin};
use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{LoadOptions, Report};
use pgtide::progress::Progress;
use pgtide::{Error, Result};
use serde::Serialize;
use tokio_postgres::Client;

/// One experiment: what the CLI announces, runs against each server, and
/// reports (one markdown table per reference contender).
///
/// A scenario is a struct of what to run (sizes, runs, worker counts)
/// implementing these four methods; its `run` is usually an `async fn`
/// over a [`runner::Runner`].
pub trait Scenario {
    /// The line printed on stderr before the scenario starts.
    fn announce(&self) -> String;
    /// The report's heading.
    fn title(&self) -> String;
    /// The contenders the ratios are computed against, one table each.
    fn references(&self) -> Vec<String>;
    /// Runs the scenario against `target`; `on_result` sees each
    /// measurement as it completes.
    fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> impl Future<Output = Result<Vec<Measurement>>>;
}

/// What a measurement's samples are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Wall time of one run (lower is better): `seconds` holds the samples.
    #[default]
    Seconds,
    /// Rows loaded per minute of one run (higher is better), for the
    /// fixed-duration scenarios: `rows_per_min` holds the samples.
    RowsPerMin,
}

/// Repeated timings of one contender on one data set.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurement {
    /// Data set name, e.g. `t_narrow`.
    pub dataset: String,
    /// Who was timed, e.g. `pgtide (2 workers)` or `psql \copy`.
    pub contender: String,
    /// Rows loaded per run (for [`Unit::RowsPerMin`]: the fewest rows any
    /// run loaded).
    pub rows: u64,
    /// Wall times in seconds, one per run.
    pub seconds: Vec<f64>,
    /// Why it could not run, when it could not (e.g. no psql binary).
    pub skipped: Option<String>,
    /// The server it ran against (its `server_version`, e.g. `PG 15.13`);
    /// empty when the scenario does not label servers.
    pub server: String,
    /// What `median`, `min` and `max` are in.
    pub unit: Unit,
    /// Rows per minute, one per run ([`Unit::RowsPerMin`] only).
    pub rows_per_min: Vec<f64>,
}

impl Measurement {
    /// An empty measurement in seconds, labelled with its server.
    pub fn new(dataset: &str, contender: &str, rows: u64, server: &str) -> Self {
        Measurement {
            dataset: dataset.into(),
            contender: contender.into(),
            rows,
            server: server.into(),
            ..Default::default()
        }
    }

    /// The samples in [`Measurement::unit`].
    pub fn samples(&self) -> &[f64] {
        match self.unit {
            Unit::Seconds => &self.seconds,
            Unit::RowsPerMin => &self.rows_per_min,
        }
    }

    /// Median of the runs (NaN when skipped).
    pub fn median(&self) -> f64 {
        let mut s = self.samples().to_vec();
        s.sort_by(f64::total_cmp);
        match s.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        }
    }
    /// Smallest sample (the fastest run, in seconds).
    pub fn min(&self) -> f64 {
        self.samples().iter().copied().fold(f64::NAN, f64::min)
    }
    /// Largest sample.
    pub fn max(&self) -> f64 {
        self.samples().iter().copied().fold(f64::NAN, f64::max)
    }
}

/// The label of a server in reports: `PG ` and the first word of its
/// `server_version` (`PG 15.13` for "15.13 (Debian 15.13-0+deb12u1)").
pub async fn server_label(client: &Client) -> Result<String> {
    let v: String = client.query_one("SHOW server_version", &[]).await?.get(0);
    Ok(format!("PG {}", v.split_whitespace().next().unwrap_or("?")))
}

/// `SELECT count(*)` of `table` (a name the scenario chose, quoted here).
pub async fn count_rows(client: &Client, table: &str) -> Result<u64> {
    let sql = format!(
        "SELECT count(*) FROM {}",
        QualifiedName::parse(table)?.quoted()
    );
    let n: i64 = client.query_one(&sql, &[]).await?.get(0);
    Ok(n as u64)
}

/// Times one `pgtide load` run in this process. A load that stopped is an
/// error: its time would mean nothing.
pub async fn time_load(target: &Target, opts: &LoadOptions) -> Result<(f64, Report)> {
    let progress = Arc::new(Progress::new(opts.workers));
    let start = Instant::now();
    let mut report = pgtide::load::run(target, opts, progress).await?;
    let seconds = start.elapsed().as_secs_f64();
    match report.failure.take() {
        Some(e) => Err(e),
        None => Ok((seconds, report)),
    }
}

/// A second throwaway server on this host (the fdw-batch remote, the copy
/// target), with the binaries given or `PgBin::find()`'s, and the `fsync`
/// setting of the server `client` is on, so both pay the same for WAL.
pub async fn second_server(client: &Client, bin: Option<PgBin>) -> Result<Cluster> {
    let fsync: String = client.query_one("SHOW fsync", &[]).await?.get(0);
    blocking(move || {
        let bin = match bin {
            Some(bin) => bin,
            None => PgBin::find()?,
        };
        let opts = ClusterOptions {
            settings: vec![("fsync".into(), fsync)],
            ..Default::default()
        };
        Cluster::temp(&bin, opts)
    })
    .await
}

/// `N worker` or `N workers` (for `noun` "worker"): a count and its noun,
/// plural unless the count is 1.
pub fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// The contender name of `pgtide load --workers N`: `pgtide (N workers)`.
pub fn pgtide_name(workers: usize) -> String {
    format!("pgtide ({})", counted(workers, "worker"))
}

/// Runs `f` on tokio's blocking threads (psql and other processes, a
/// server's start and stop) and waits for it.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::bug(format!("blocking task failed: {e}")))?
}

/// Rows at `scale` of `rows`, at least 1.
pub fn scaled(rows: u64, scale: f64) -> u64 {
    ((rows as f64 * scale).round() as u64).max(1)
}

/// The options of `pgtide load FILE --table TABLE --format FORMAT
/// --workers N`, everything else as the CLI's defaults.
pub fn load_options(
    file: &Path,
    table: &str,
    format: CopyFormat,
    workers: usize,
) -> Result<LoadOptions> {
    let mut opts = LoadOptions::new(
        vec![file.to_string_lossy().into_owned()],
        QualifiedName::parse(table)?,
        format,
    );
    opts.workers = workers;
    Ok(opts)
}

/// Every run must leave exactly the rows it was given, or its time means
/// nothing: a difference is a bug.
pub fn expect_rows(counted: u64, rows: u64, who: &str) -> Result<()> {
    if counted != rows {
        return Err(Error::bug(format!(
            "{who}: {counted} rows arrived, expected {rows}"
        )));
    }
    Ok(())
}
