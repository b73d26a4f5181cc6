//! `pgtide bench` and `pgtide demo` flags.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `pgtide bench ...`
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Scenario.
    #[command(subcommand)]
    pub scenario: BenchScenario,
}

/// Benchmark scenarios.
#[derive(Debug, Subcommand)]
pub enum BenchScenario {
    /// The seeds' load data sets (t_narrow, t, t_copy1): pgtide load with
    /// 1, 2 and 4 workers against psql \copy and server-side COPY FROM file.
    Load(BenchLoadArgs),
    /// Seed 003: N clients each loading the same 1,000-row file into one
    /// table in a loop for --seconds; rows per minute for each N, pgtide
    /// (one connection per client) against psql \copy in a loop.
    Concurrent(BenchConcurrentArgs),
    /// Seed 000: 32 concurrent loads of a 10K-row file and 8 of a 1M-row
    /// file into t_copy1 (pgtide tasks against parallel psql \copy), then
    /// one 8M-row file with pgtide load --workers 1,2,4, psql and server
    /// COPY. --scale 1 is these sizes.
    Parallel(BenchScaleArgs),
    /// Issue 7 / seed 004: pgtide export (workers x text/csv/binary)
    /// against psql \copy TO FILE, server COPY TO /dev/null and SELECT
    /// count(*), on a 10M-int table and a 1M-row wide typed table (--scale
    /// 1). The exported files go to --dir.
    Export(BenchScaleArgs),
    /// Issue 7: pgtide copy (1, 2, 4 workers) against the binary and text
    /// psql pipes and pgcopydb, from --db into a second throwaway server,
    /// of a 10M-int table and a 1M-row wide typed table (--scale 1).
    /// pgcopydb's work directory is in --dir.
    Copy(BenchScaleArgs),
    /// Seed 002: INSERT ... SELECT of 1M rows into a postgres_fdw foreign
    /// table on a second throwaway server with batch_size 1 and 100, next
    /// to a local table.
    #[command(name = "fdw-batch")]
    FdwBatch(BenchFdwArgs),
    /// Seed 001: insert_performance_test loaded by pgtide --method insert,
    /// pipeline, values, copy and binary against psql \copy and server
    /// COPY; then a mixed-type CSV by copy vs binary (1 and 2 workers).
    Methods(BenchMethodsArgs),
    /// Issue 3's targets: a clean mixed-type load with and without
    /// --rejects, and the same file with 1% bad rows of every kind.
    Rejects(BenchRejectsArgs),
    /// Issue 9: --on-conflict update/skip of a mixed-type file into a
    /// table holding half of its rows, against a plain load into the empty
    /// table and pipelined INSERT .. ON CONFLICT.
    Upsert(BenchUpsertArgs),
    /// Issue 10: 1M rows into 8 hash partitions that are postgres_fdw
    /// foreign tables on a second throwaway server: pgtide load routing on
    /// the client, pgtide load --route coordinator, psql \copy into the
    /// parent and INSERT .. SELECT with batch_size 1 and 100, next to
    /// pgtide load into one local table and into 8 local partitions.
    /// --scale 1 is the 1M rows. The loads that route on the
    /// client are timed interleaved with the local ones, run by run.
    Shards(BenchShardsArgs),
    /// Issue 9: a large load into a table with three secondary indexes,
    /// maintained row by row or --defer-indexes, next to no indexes.
    Indexes(BenchIndexesArgs),
    /// Issue 9: a --truncate load against --truncate --single-transaction
    /// (COPY FREEZE), one worker each, and the VACUUM (FREEZE) after each.
    Freeze(BenchFreezeArgs),
}

/// `pgtide bench freeze ...`
#[derive(Debug, Args)]
pub struct BenchFreezeArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,
    /// Rows in the file.
    #[arg(long, default_value_t = 5_000_000)]
    pub rows: u64,
    /// Where the generated file goes (default: a temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `pgtide bench indexes ...`
#[derive(Debug, Args)]
pub struct BenchIndexesArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,
    /// Rows in the file (the issue asks for 10M).
    #[arg(long, default_value_t = 10_000_000)]
    pub rows: u64,
    /// Workers of every load.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Where the generated file goes (default: a temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Flags of the scenarios that load one generated file of --rows rows
/// with each --workers count (rejects, upsert).
#[derive(Debug, Args)]
pub struct BenchRowsArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,
    /// Rows in the file.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Worker counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2])]
    pub workers: Vec<usize>,
    /// Where generated files go (default: a temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `pgtide bench upsert ...`
#[derive(Debug, Args)]
pub struct BenchUpsertArgs {
    #[command(flatten)]
    pub file: BenchRowsArgs,
    /// Rows the pipeline contender loads (scaled to --rows; 0 skips it).
    #[arg(long, default_value_t = 100_000)]
    pub pipeline_rows: u64,
}

/// `pgtide bench rejects ...`
#[derive(Debug, Args)]
pub struct BenchRejectsArgs {
    #[command(flatten)]
    pub file: BenchRowsArgs,
    /// One bad row every N rows (100 = 1%).
    #[arg(long, default_value_t = 100)]
    pub every: u64,
}

/// `pgtide bench methods ...`
#[derive(Debug, Args)]
pub struct BenchMethodsArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,
    /// Rows of insert_performance_test (the seed loaded 1,000,000).
    #[arg(long, default_value_t = 200_000)]
    pub rows: u64,
    /// Bytes of text in each row's `content` (the seed's rows were about
    /// 1.3 KB).
    #[arg(long, default_value_t = 1200)]
    pub content_bytes: usize,
    /// Rows of the mixed-type data set (0 skips it).
    #[arg(long, default_value_t = 200_000)]
    pub mixed_rows: u64,
    /// Where generated CSV files go (default: a temp dir the server can
    /// read).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Flags shared by every scenario but `load`.
#[derive(Debug, Args)]
pub struct BenchCommonArgs {
    /// Connection; repeat to run the same scenario against several servers
    /// side by side, labelled by server_version (default: the embedded
    /// server). Scenarios drop and create their own tables there.
    #[arg(long = "db", short = 'd', value_name = "CONNINFO")]
    pub db: Vec<String>,
    /// Runs per measurement (median, min and max are reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Write results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the medians as grouped horizontal bars into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
}

impl BenchCommonArgs {
    /// `--runs`, at least 1.
    pub fn runs(&self) -> usize {
        self.runs.max(1)
    }
}

/// `pgtide bench concurrent ...`
#[derive(Debug, Args)]
pub struct BenchConcurrentArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,
    /// Client counts to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4, 8, 16])]
    pub clients: Vec<usize>,
    /// Seconds each run keeps loading (the seed used 60).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Where the 1,000-row file goes (default: a temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Flags of the scenarios sized by --scale from the sizes their
/// description gives (parallel, export, copy, shards).
#[derive(Debug, Args)]
pub struct BenchScaleArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,
    /// Rows, scaled from the sizes in the scenario's description (1.0 =
    /// those sizes).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// pgtide --workers counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4])]
    pub workers: Vec<usize>,
    /// Where generated data files and the scenario's work files go
    /// (default: a temp dir the server can read).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `pgtide bench shards ...`
#[derive(Debug, Args)]
pub struct BenchShardsArgs {
    #[command(flatten)]
    pub scale: BenchScaleArgs,
    /// Skip the contenders that go through the coordinator row by row
    /// (--route coordinator, psql \copy, INSERT .. SELECT), about a
    /// minute per run each: to time the direct loads against the local
    /// ones with many runs, e.g. --direct-only --runs 7 --workers 2.
    #[arg(long)]
    pub direct_only: bool,
}

/// `pgtide bench fdw-batch ...`
#[derive(Debug, Args)]
pub struct BenchFdwArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,
    /// Rows inserted, scaled from the seed's 1M.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// postgres_fdw batch_size values to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 100])]
    pub batch_sizes: Vec<u32>,
}

/// `pgtide bench load ...`
#[derive(Debug, Args)]
pub struct BenchLoadArgs {
    /// Connection (default: the embedded server, as for `load`).
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    /// Rows per data set, scaled from the seeds' sizes (1.0 = 10M rows for
    /// t_narrow and t, 1M for t_copy1).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Runs per measurement (median, min and max are reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Data sets to run (default: all three).
    #[arg(long, value_delimiter = ',')]
    pub datasets: Vec<String>,
    /// Worker counts for pgtide.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4])]
    pub workers: Vec<usize>,
    /// Where generated data files go (default: a temp dir the server can read).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `pgtide demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Rows to generate.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// pgtide workers.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
}
