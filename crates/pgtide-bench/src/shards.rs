//! `pgtide bench shards`: issue 10's scenario (seed 002's sharding by
//! postgres_fdw), loading one CSV file of `(n int, c1 text, c2 text, c3
//! text)` rows:
//!
//! - into one local table with `pgtide load` (the reference: what a
//!   sharded load should cost);
//! - into a table hash-partitioned by `n` in 8 local partitions with
//!   `pgtide load` (by default the parent's COPY, the server routing) and
//!   `--route direct` (routing on the client, COPY per partition);
//! - into a table hash-partitioned by `n` in 8 partitions that are
//!   postgres_fdw foreign tables on a second throwaway server, and again
//!   on two (4 partitions each; those contenders' names end in "2 shard
//!   servers"): `pgtide
//!   load` routing on the client (each partition's rows COPYed on the
//!   shard), `pgtide load --route coordinator` (the parent's COPY, which
//!   postgres_fdw turns into remote INSERTs, batched from PG 16 only), and
//!   psql `\copy` into the parent (the same path as psql users take),
//!   and `INSERT INTO parent SELECT * FROM` the local table with the
//!   foreign server's `batch_size` 1 and 100 (seed 002's two rows).
//!
//! The loads that take a second (into the local table, the local
//! partitions and the foreign partitions on one shard server, routed on
//! the client) are timed interleaved, run by run, so that their ratios,
//! which the targets are, do not depend on when each was timed;
//! `direct_only` leaves out the contenders through the coordinator (a
//! minute per run each).
//!
//! Every run starts from empty tables and is checked (untimed): all rows
//! on the shard, none twice, each on the partition
//! `satisfies_hash_partition()` chooses. The foreign servers' `batch_size`
//! is 100, as in the measurement. The foreign servers (named
//! `shards` and `shards_b`, `servers.rs`) and their user mappings, which
//! hold the remotes' passwords, are dropped at the end.

use std::io::Write;
use std::path::{Path, PathBuf};

use pgtide::cluster::{find_psql, PgBin};
use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::ident::{quote, quote_literal};
use pgtide::load::sharded::Route;
use pgtide::{Error, Result};
use tokio_postgres::Client;

use crate::baseline::{psql_copy, PSQL_COPY};
use crate::datasets::{create_table, generate, mix};
use crate::runner::Runner;
use servers::Shards;

mod servers;
use crate::{blocking, count_rows, expect_rows, load_options, pgtide_name, scaled};
use crate::{time_load, Measurement, Scenario};

/// Rows at scale 1 (the size).
pub const ROWS: u64 = 1_000_000;
/// Foreign partitions.
pub const PARTITIONS: usize = 8;
const LOCAL_TABLE: &str = "shards_local";
const LOCAL_PARTS: &str = "shards_local_parts";
const PARENT: &str = "shards_parent";

/// What to run.
#[derive(Debug, Clone)]
pub struct ShardsBench {
    /// Scale of the row count (1.0 = 1M rows).
    pub scale: f64,
    /// Runs per contender.
    pub runs: usize,
    /// `pgtide load --workers` counts.
    pub workers: Vec<usize>,
    /// Where the CSV file goes.
    pub dir: PathBuf,
    /// Binaries for the shard server; `None` = `PgBin::find()`.
    pub remote_bin: Option<PgBin>,
    /// Skip the contenders that go through the coordinator row by row
    /// (`--route coordinator`, psql, `INSERT .. SELECT`): a minute per run
    /// each, where the loads that route on the client take a second.
    pub direct_only: bool,
}

/// `pgtide (N workers)` into one local table.
pub fn local_name(workers: usize) -> String {
    format!("local table, {}", pgtide_name(workers))
}

/// `pgtide (N workers)` routing on the client.
pub fn direct_name(workers: usize) -> String {
    format!("direct, {}", pgtide_name(workers))
}

/// `pgtide (N workers) --route coordinator`.
pub fn coordinator_name(workers: usize) -> String {
    format!("--route coordinator, {}", pgtide_name(workers))
}

/// psql `\copy` into the partitioned parent.
pub fn psql_name() -> String {
    format!("{PSQL_COPY} into the parent")
}

/// `pgtide (N workers)` into 8 local hash partitions: by default (the
/// server routes: no leaf is foreign) or `--route direct` (the client).
pub fn local_parts_name(workers: usize, route: Route) -> String {
    let how = if route == Route::Direct {
        " --route direct"
    } else {
        ""
    };
    format!(
        "{PARTITIONS} local partitions{how}, {}",
        pgtide_name(workers)
    )
}

/// `INSERT INTO parent SELECT * FROM local` with the foreign server's
/// `batch_size`.
pub fn insert_select_name(batch_size: u32) -> String {
    format!("INSERT .. SELECT, batch_size {batch_size}")
}

/// The `batch_size` values of the INSERT .. SELECT contenders.
const BATCH_SIZES: [u32; 2] = [1, 100];

impl ShardsBench {
    /// The worker count the ratios are taken at: 2 (the target)
    /// when measured, else the first.
    fn reference_workers(&self) -> usize {
        if self.workers.contains(&2) {
            2
        } else {
            self.workers.first().copied().unwrap_or(1)
        }
    }
}

impl Scenario for ShardsBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench shards: scale {}, {} runs, workers {:?}, data in {}",
            self.scale,
            self.runs,
            self.workers,
            self.dir.display()
        )
    }

    fn title(&self) -> String {
        format!("Loading {PARTITIONS} postgres_fdw hash partitions on another server (issue 10)")
    }

    fn references(&self) -> Vec<String> {
        vec![local_name(self.reference_workers()), psql_name()]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        let rows = scaled(ROWS, self.scale);
        let file = generate(&self.dir, "shards", rows, row)?;
        let run = Run {
            target,
            file: &file,
            rows,
            label: format!("{rows} rows"),
        };
        let workers: Vec<usize> = self.workers.iter().map(|w| (*w).max(1)).collect();

        r.client
            .batch_execute(&create_table(&quote(LOCAL_TABLE), COLUMNS))
            .await?;
        create_local_parts(&r.client).await?;
        // One shard server first: the direct loads into it are timed
        // interleaved with the local ones, the target's ratio.
        let shards = Shards::start(&r.client, self.remote_bin.clone(), 1).await;
        let fast = fast_runs(&mut r, &run, &workers, shards.as_ref().ok()).await;
        let slow = match (&fast, &shards) {
            (Ok(()), Ok(shards)) if !self.direct_only => {
                slow_runs(&mut r, shards, &run, &workers, 1).await
            }
            _ => Ok(()),
        };
        // Always drop the foreign servers: their user mappings hold
        // passwords.
        let stopped = match shards {
            Ok(shards) => shards.stop(&r.client).await,
            Err(e) => {
                for name in shard_contenders(&workers, 1, self.direct_only) {
                    let mut m = r.blank(&run.label, &name, rows);
                    m.skipped = Some(e.message().to_owned());
                    r.push(m);
                }
                Ok(())
            }
        };
        fast?;
        slow?;
        stopped?;
        r.client
            .batch_execute(&format!("DROP TABLE {}", quote(LOCAL_PARTS)))
            .await?;

        let shards = match Shards::start(&r.client, self.remote_bin.clone(), 2).await {
            Ok(shards) => shards,
            Err(e) => {
                for name in shard_contenders(&workers, 2, self.direct_only) {
                    let mut m = r.blank(&run.label, &name, rows);
                    m.skipped = Some(e.message().to_owned());
                    r.push(m);
                }
                return Ok(r.finish());
            }
        };
        let measured = async {
            parent_runs(&mut r, &shards, &run, &workers, 2, Route::Auto).await?;
            if !self.direct_only {
                slow_runs(&mut r, &shards, &run, &workers, 2).await?;
            }
            Ok::<(), Error>(())
        }
        .await;
        let stopped = shards.stop(&r.client).await;
        measured?;
        stopped?;
        Ok(r.finish())
    }
}

/// The file's and every table's columns.
const COLUMNS: &str = "n int, c1 text, c2 text, c3 text";

/// Row `i` of the file: `n` spread over the key space, three texts.
fn row(i: u64, out: &mut Vec<u8>) {
    let h = mix(i);
    let _ = writeln!(
        out,
        "{},{:016x},row {i} of the sharded load,{:x}",
        (h >> 33) as i32,
        h,
        mix(h)
    );
}

/// The contenders into foreign partitions on `servers` shard servers
/// (`direct_only`: only those routing on the client).
fn shard_contenders(workers: &[usize], servers: usize, direct_only: bool) -> Vec<String> {
    let mut names: Vec<String> = workers.iter().map(|w| direct_name(*w)).collect();
    if !direct_only {
        names.extend(workers.iter().map(|w| coordinator_name(*w)));
        names.push(psql_name());
        names.extend(BATCH_SIZES.map(insert_select_name));
    }
    names.into_iter().map(|n| on_servers(n, servers)).collect()
}

/// A contender's name on `servers` shard servers: as it is on one, with
/// the layout added on two.
pub fn on_servers(name: String, servers: usize) -> String {
    match servers {
        1 => name,
        n => format!("{name}, {n} shard servers"),
    }
}

/// What every run loads: the file, its rows, the data set's label.
struct Run<'a> {
    target: &'a Target,
    file: &'a Path,
    rows: u64,
    label: String,
}

impl Run<'_> {
    /// Times `pgtide load --workers <workers> --route <route>` of the file
    /// into `table`; with `routed`, checks (untimed) that the load was
    /// routed on the client or not, as its notes say.
    async fn load(
        &self,
        table: &str,
        workers: usize,
        route: Route,
        routed: Option<bool>,
    ) -> Result<f64> {
        let mut opts = load_options(self.file, table, CopyFormat::Csv, workers)?;
        opts.route = route;
        let (seconds, report) = time_load(self.target, &opts).await?;
        let on_client = report
            .notes
            .iter()
            .any(|n| n.contains("routed on the client"));
        if routed.is_some_and(|want| want != on_client) {
            return Err(Error::bug(format!(
                "{table}, {workers} workers, {route:?}: routed on the client: {on_client}; \
                 notes: {:?}",
                report.notes
            )));
        }
        Ok(seconds)
    }
}

/// The table hash-partitioned by `n` into 8 local partitions.
async fn create_local_parts(client: &Client) -> Result<()> {
    let parent = quote(LOCAL_PARTS);
    let mut sql = format!("{} PARTITION BY HASH (n);", create_table(&parent, COLUMNS));
    for i in 0..PARTITIONS {
        sql.push_str(&format!(
            "CREATE TABLE {} PARTITION OF {parent} \
               FOR VALUES WITH (modulus {PARTITIONS}, remainder {i});",
            quote(&format!("{LOCAL_PARTS}_{i}"))
        ));
    }
    Ok(client.batch_execute(&sql).await?)
}

/// The loads that take about a second, per worker count, interleaved
/// run by run (their ratios are the targets', and drift on a shared
/// machine then spreads over all of them): into the local table, into 8
/// local partitions by default and with `--route direct`, and into the
/// foreign partitions on one shard server (unless it did not start).
/// Each run starts from empty tables and is checked: count, placement by
/// `satisfies_hash_partition`, routed where asked.
async fn fast_runs(
    r: &mut Runner<'_>,
    run: &Run<'_>,
    workers: &[usize],
    shards: Option<&Shards>,
) -> Result<()> {
    let rows = run.rows;
    let misplaced = misplaced_sql(LOCAL_PARTS, |i| format!("{LOCAL_PARTS}_{i}"), "");
    for &w in workers {
        let mut names = vec![
            local_name(w),
            local_parts_name(w, Route::Auto),
            local_parts_name(w, Route::Direct),
        ];
        if shards.is_some() {
            names.push(direct_name(w));
        }
        let mut ms: Vec<Measurement> = names.iter().map(|n| r.blank(&run.label, n, rows)).collect();
        r.interleaved(&mut ms, "", async |client, i| {
            let who = &names[i];
            match (i, shards) {
                (0, _) => {
                    truncate(client, LOCAL_TABLE).await?;
                    let seconds = run.load(LOCAL_TABLE, w, Route::Auto, None).await?;
                    expect_rows(count_rows(client, LOCAL_TABLE).await?, rows, who)?;
                    Ok(seconds)
                }
                (1 | 2, _) => {
                    let route = [Route::Auto, Route::Direct][i - 1];
                    truncate(client, LOCAL_PARTS).await?;
                    let seconds = run
                        .load(LOCAL_PARTS, w, route, Some(route == Route::Direct))
                        .await?;
                    expect_rows(count_rows(client, LOCAL_PARTS).await?, rows, who)?;
                    expect_placed(client, &misplaced, who).await?;
                    Ok(seconds)
                }
                (_, Some(shards)) => parent_run(client, shards, run, w, Route::Auto, who).await,
                (_, None) => Err(Error::bug("bench shards: no shard server to load")),
            }
        })
        .await?;
        for m in ms {
            r.push(m);
        }
    }
    Ok(())
}

async fn truncate(client: &Client, table: &str) -> Result<()> {
    Ok(client
        .batch_execute(&format!("TRUNCATE {}", quote(table)))
        .await?)
}

/// One run of `pgtide load --route <route>` into the partitioned parent
/// whose partitions are foreign (`Auto`: routed on the client;
/// `Coordinator`: the parent's COPY), from empty shard tables, checked.
async fn parent_run(
    client: &Client,
    shards: &Shards,
    run: &Run<'_>,
    workers: usize,
    route: Route,
    who: &str,
) -> Result<f64> {
    shards.truncate().await?;
    let on_client = route != Route::Coordinator;
    let seconds = run.load(PARENT, workers, route, Some(on_client)).await?;
    shards.check(client, run.rows, who).await?;
    Ok(seconds)
}

/// `SELECT` of the number of rows of `parent`'s partitions (named by
/// `partition(i)`) that are not on the partition their hash chooses;
/// `offset` is put after each partition's scan (`OFFSET 0` keeps the
/// check on this server, not pushed to a foreign one).
fn misplaced_sql(parent: &str, partition: impl Fn(usize) -> String, offset: &str) -> String {
    let parts: Vec<String> = (0..PARTITIONS)
        .map(|i| {
            format!(
                "SELECT count(*) FROM (SELECT n FROM {}{offset}) x \
                 WHERE NOT satisfies_hash_partition({}::regclass, {PARTITIONS}, {i}, n)",
                quote(&partition(i)),
                quote_literal(parent)
            )
        })
        .collect();
    format!(
        "SELECT sum(c)::int8 FROM ({}) x(c)",
        parts.join(" UNION ALL ")
    )
}

/// No row where its hash does not put it (`misplaced` from
/// [`misplaced_sql`]).
async fn expect_placed(client: &Client, misplaced: &str, who: &str) -> Result<()> {
    let wrong: i64 = client.query_one(misplaced, &[]).await?.get(0);
    if wrong != 0 {
        return Err(Error::bug(format!(
            "{who}: {wrong} rows on a partition their hash does not choose"
        )));
    }
    Ok(())
}

/// `pgtide load --route <route>` into the foreign partitions on
/// `servers` shard servers, per worker count (named [`direct_name`] or
/// [`coordinator_name`]).
async fn parent_runs(
    r: &mut Runner<'_>,
    shards: &Shards,
    run: &Run<'_>,
    workers: &[usize],
    servers: usize,
    route: Route,
) -> Result<()> {
    let name = match route {
        Route::Coordinator => coordinator_name,
        _ => direct_name,
    };
    for &w in workers {
        let who = on_servers(name(w), servers);
        let m = r.blank(&run.label, &who, run.rows);
        r.contender(m, "", async |client| {
            parent_run(client, shards, run, w, route, &who).await
        })
        .await?;
    }
    Ok(())
}

/// The runs through the coordinator into the partitioned parent whose
/// partitions are on `servers` shard servers: `--route coordinator`,
/// psql, then INSERT .. SELECT with each `batch_size`.
async fn slow_runs(
    r: &mut Runner<'_>,
    shards: &Shards,
    run: &Run<'_>,
    workers: &[usize],
    servers: usize,
) -> Result<()> {
    parent_runs(r, shards, run, workers, servers, Route::Coordinator).await?;
    let rows = run.rows;
    let named = |name: String| on_servers(name, servers);
    let psql = find_psql();
    let who = named(psql_name());
    let m = r.blank(&run.label, &who, rows);
    r.contender(m, "", async |client| {
        let psql = psql
            .clone()
            .ok_or_else(|| Error::config("no psql binary found"))?;
        shards.truncate().await?;
        let (t, f) = (run.target.clone(), run.file.to_owned());
        let seconds =
            blocking(move || psql_copy(&t, &psql, PARENT, &f, "WITH (FORMAT csv)")).await?;
        shards.check(client, rows, &who).await?;
        Ok(seconds)
    })
    .await?;
    // Seed 002's rows: the coordinator's INSERT .. SELECT from the local
    // table (holding the file's rows since its last run), row by row
    // (batch_size 1) and batched.
    expect_rows(count_rows(&r.client, LOCAL_TABLE).await?, rows, LOCAL_TABLE)?;
    let insert = format!(
        "INSERT INTO {} SELECT * FROM {}",
        quote(PARENT),
        quote(LOCAL_TABLE)
    );
    for b in BATCH_SIZES {
        shards.set_batch_size(&r.client, b).await?;
        let who = named(insert_select_name(b));
        let m = r.blank(&run.label, &who, rows);
        r.contender(m, "", async |client| {
            shards.truncate().await?;
            let start = std::time::Instant::now();
            client.batch_execute(&insert).await?;
            let seconds = start.elapsed().as_secs_f64();
            shards.check(client, rows, &who).await?;
            Ok(seconds)
        })
        .await?;
    }
    Ok(())
}
