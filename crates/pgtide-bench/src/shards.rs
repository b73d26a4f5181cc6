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
//!   postgres_fdw foreign tables on a second throwaway server: `pgtide
//!   load` routing on the client (each partition's rows COPYed on the
//!   shard), `pgtide load --route coordinator` (the parent's COPY, which
//!   postgres_fdw turns into remote INSERTs, batched from PG 16 only), and
//!   psql `\copy` into the parent (the same path as psql users take),
//!   and `INSERT INTO parent SELECT * FROM` the local table with the
//!   foreign server's `batch_size` 1 and 100 (seed 002's two rows).
//!
//! Every run starts from empty tables and is checked (untimed): all rows
//! on the shard, none twice, each on the partition
//! `satisfies_hash_partition()` chooses. The foreign server's `batch_size` is 100, as in the
//! issue's measurement. The foreign server (named `shards`) and its user
//! mapping, which holds the remote's password, are dropped at the end.

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;

use pgtide::cluster::{find_psql, Cluster, PgBin};
use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::ident::{quote, quote_literal, QualifiedName};
use pgtide::load::sharded::Route;
use pgtide::load::LoadOptions;
use pgtide::{Error, Result};
use tokio_postgres::Client;

use crate::baseline::{psql_copy, PSQL_COPY};
use crate::datasets::{generate, mix};
use crate::{count_rows, pgtide_name, second_server, server_label, time_load};
use crate::{Measurement, Scenario};

/// Rows at scale 1 (the size).
pub const ROWS: u64 = 1_000_000;
/// Foreign partitions.
pub const PARTITIONS: usize = 8;
/// The foreign server's name on the main server.
const SERVER: &str = "shards";
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
    bench: &ShardsBench,
    mut on_result: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    let client = target.connect().await?;
    let server = server_label(&client).await?;
    let rows = ((ROWS as f64 * bench.scale).round() as u64).max(1);
    let label = format!("{rows} rows");
    let file = generate(&bench.dir, "shards", rows, row)?;
    let blank = |who: &str| Measurement::new(&label, who, rows, &server);
    let workers: Vec<usize> = bench.workers.iter().map(|w| (*w).max(1)).collect();

    let local = quote(LOCAL_TABLE);
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {local}; CREATE TABLE {local} {COLUMNS}"
        ))
        .await?;
    let mut results = Vec::new();
    for &w in &workers {
        let mut m = blank(&local_name(w));
        for _ in 0..bench.runs {
            client.batch_execute(&format!("TRUNCATE {local}")).await?;
            let (s, _) = time_load(target, &load_opts(&file, LOCAL_TABLE, w, Route::Auto)).await?;
            m.seconds.push(s);
            expect_rows(count_rows(&client, LOCAL_TABLE).await?, rows, &m.contender)?;
        }
        on_result(&m);
        results.push(m);
    }
    for m in local_parts(target, &client, &file, &workers, bench.runs, rows, &blank).await? {
        on_result(&m);
        results.push(m);
    }

    let remote = match setup(&client, bench).await {
        Ok(r) => r,
        Err(e) => {
            let _ = drop_server(&client).await;
            for name in shard_contenders(&workers) {
                let mut m = blank(&name);
                m.skipped = Some(e.message().to_owned());
                on_result(&m);
                results.push(m);
            }
            return Ok(results);
        }
    };
    let measured = shard_runs(
        target,
        &client,
        &remote,
        bench,
        &file,
        &workers,
        rows,
        &mut |m| {
            on_result(&m);
            results.push(m);
        },
    )
    .await;
    // Always drop the foreign server: its user mapping holds a password.
    let dropped = drop_server(&client).await;
    drop(remote.client);
    let cluster = remote.cluster;
    let _ = tokio::task::spawn_blocking(move || drop(cluster)).await;
    measured?;
    dropped?;
    Ok(results)
}

const COLUMNS: &str = "(n int, c1 text, c2 text, c3 text)";

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

fn shard_contenders(workers: &[usize]) -> Vec<String> {
    let mut names: Vec<String> = workers.iter().map(|w| direct_name(*w)).collect();
    names.extend(workers.iter().map(|w| coordinator_name(*w)));
    names.push(psql_name());
    names.extend(BATCH_SIZES.map(insert_select_name));
    names
}

/// `pgtide load` into 8 local hash partitions, by default and with
/// `--route direct`, per worker count; each run checked (count, placement
/// by `satisfies_hash_partition`, routed where asked). The table is
/// dropped at the end.
async fn local_parts(
    target: &Target,
    client: &Client,
    file: &std::path::Path,
    workers: &[usize],
    runs: usize,
    rows: u64,
    blank: &dyn Fn(&str) -> Measurement,
) -> Result<Vec<Measurement>> {
    let parent = quote(LOCAL_PARTS);
    let mut sql = format!(
        "DROP TABLE IF EXISTS {parent}; CREATE TABLE {parent} {COLUMNS} PARTITION BY HASH (n);"
    );
    for i in 0..PARTITIONS {
        sql.push_str(&format!(
            "CREATE TABLE {} PARTITION OF {parent} \
               FOR VALUES WITH (modulus {PARTITIONS}, remainder {i});",
            quote(&format!("{LOCAL_PARTS}_{i}"))
        ));
    }
    client.batch_execute(&sql).await?;
    let misplaced: Vec<String> = (0..PARTITIONS)
        .map(|i| {
            format!(
                "SELECT count(*) FROM {} \
                 WHERE NOT satisfies_hash_partition({}::regclass, {PARTITIONS}, {i}, n)",
                quote(&format!("{LOCAL_PARTS}_{i}")),
                quote_literal(LOCAL_PARTS)
            )
        })
        .collect();
    let misplaced = format!(
        "SELECT sum(c)::int8 FROM ({}) x(c)",
        misplaced.join(" UNION ALL ")
    );
    let mut out = Vec::new();
    for (route, &w) in [Route::Auto, Route::Direct]
        .into_iter()
        .flat_map(|r| workers.iter().map(move |w| (r, w)))
    {
        let mut m = blank(&local_parts_name(w, route));
        for _ in 0..runs {
            client.batch_execute(&format!("TRUNCATE {parent}")).await?;
            let (s, report) = time_load(target, &load_opts(file, LOCAL_PARTS, w, route)).await?;
            let routed = report
                .notes
                .iter()
                .any(|n| n.contains("routed on the client"));
            if routed != (route == Route::Direct) {
                return Err(Error::bug(format!(
                    "{}: routed on the client: {routed}; notes: {:?}",
                    m.contender, report.notes
                )));
            }
            m.seconds.push(s);
            expect_rows(count_rows(client, LOCAL_PARTS).await?, rows, &m.contender)?;
            let wrong: i64 = client.query_one(&misplaced, &[]).await?.get(0);
            if wrong != 0 {
                return Err(Error::bug(format!(
                    "{}: {wrong} rows on a partition their hash does not choose",
                    m.contender
                )));
            }
        }
        out.push(m);
    }
    client
        .batch_execute(&format!("DROP TABLE {parent}"))
        .await?;
    Ok(out)
}

fn load_opts(file: &std::path::Path, table: &str, workers: usize, route: Route) -> LoadOptions {
    let mut opts = LoadOptions::new(
        vec![file.to_string_lossy().into_owned()],
        QualifiedName::parse(table).expect("a scenario's own table name"),
        CopyFormat::Csv,
    );
    opts.workers = workers;
    opts.route = route;
    opts
}

/// Direct, coordinator and psql runs into the partitioned parent.
#[allow(clippy::too_many_arguments)]
async fn shard_runs(
    target: &Target,
    client: &Client,
    remote: &Remote,
    bench: &ShardsBench,
    file: &std::path::Path,
    workers: &[usize],
    rows: u64,
    on_result: &mut dyn FnMut(Measurement),
) -> Result<()> {
    let server = server_label(client).await?;
    let blank = |who: &str| Measurement::new(&format!("{rows} rows"), who, rows, &server);
    for (route, name) in [
        (Route::Auto, direct_name as fn(usize) -> String),
        (Route::Coordinator, coordinator_name),
    ] {
        for &w in workers {
            let mut m = blank(&name(w));
            for _ in 0..bench.runs {
                remote.truncate().await?;
                let (s, report) = time_load(target, &load_opts(file, PARENT, w, route)).await?;
                let routed = report
                    .notes
                    .iter()
                    .any(|n| n.contains("routed on the client"));
                if routed != (route == Route::Auto) {
                    return Err(Error::bug(format!(
                        "{}: routed on the client: {routed}; notes: {:?}",
                        m.contender, report.notes
                    )));
                }
                m.seconds.push(s);
                remote.check(client, rows, &m.contender).await?;
            }
            on_result(m);
        }
    }
    let mut m = blank(&psql_name());
    match find_psql() {
        None => m.skipped = Some("no psql binary found".into()),
        Some(psql) => {
            for _ in 0..bench.runs {
                remote.truncate().await?;
                let t = target.clone();
                let f = file.to_owned();
                let p = psql.clone();
                let s = tokio::task::spawn_blocking(move || {
                    psql_copy(&t, &p, PARENT, &f, "WITH (FORMAT csv)")
                })
                .await
                .map_err(|e| Error::bug(format!("psql task failed: {e}")))??;
                m.seconds.push(s);
                remote.check(client, rows, &m.contender).await?;
            }
        }
    }
    on_result(m);
    // Seed 002's rows: the coordinator's INSERT .. SELECT from the local
    // table (holding the file's rows since its last run), row by row
    // (batch_size 1) and batched.
    expect_rows(count_rows(client, LOCAL_TABLE).await?, rows, LOCAL_TABLE)?;
    for b in BATCH_SIZES {
        let mut m = blank(&insert_select_name(b));
        client
            .batch_execute(&format!(
                "ALTER SERVER {} OPTIONS (SET batch_size {})",
                quote(SERVER),
                quote_literal(&b.to_string())
            ))
            .await?;
        let insert = format!(
            "INSERT INTO {} SELECT * FROM {}",
            quote(PARENT),
            quote(LOCAL_TABLE)
        );
        for _ in 0..bench.runs {
            remote.truncate().await?;
            let start = std::time::Instant::now();
            client.batch_execute(&insert).await?;
            m.seconds.push(start.elapsed().as_secs_f64());
            remote.check(client, rows, &m.contender).await?;
        }
        on_result(m);
    }
    Ok(())
}

/// The shard server and a connection to it.
struct Remote {
    cluster: Cluster,
    client: Client,
}

impl Remote {
    async fn truncate(&self) -> Result<()> {
        let tables: Vec<String> = (0..PARTITIONS).map(remote_table).collect();
        self.client
            .batch_execute(&format!("TRUNCATE {}", tables.join(", ")))
            .await?;
        Ok(())
    }

    /// Every row arrived once (the count, and the first text column,
    /// unique in the file, distinct), each on the partition the server's
    /// own hash says (`satisfies_hash_partition` on the coordinator,
    /// which reads each partition back through postgres_fdw; untimed).
    async fn check(&self, coordinator: &Client, rows: u64, who: &str) -> Result<()> {
        let parts: Vec<String> = (0..PARTITIONS)
            .map(|i| format!("SELECT c1 FROM {}", remote_table(i)))
            .collect();
        let row = self
            .client
            .query_one(
                &format!(
                    "SELECT count(*), count(DISTINCT c1) FROM ({}) x",
                    parts.join(" UNION ALL ")
                ),
                &[],
            )
            .await?;
        let (n, distinct): (i64, i64) = (row.get(0), row.get(1));
        expect_rows(n as u64, rows, who)?;
        expect_rows(distinct as u64, rows, who)?;
        // OFFSET 0: evaluated here, not pushed to the shard.
        let misplaced: Vec<String> = (0..PARTITIONS)
            .map(|i| {
                format!(
                    "SELECT count(*) FROM (SELECT n FROM {} OFFSET 0) x \
                     WHERE NOT satisfies_hash_partition({}::regclass, {PARTITIONS}, {i}, n)",
                    quote(&format!("shards_p{i}")),
                    quote_literal(PARENT)
                )
            })
            .collect();
        let wrong: i64 = coordinator
            .query_one(
                &format!(
                    "SELECT sum(c)::int8 FROM ({}) x(c)",
                    misplaced.join(" UNION ALL ")
                ),
                &[],
            )
            .await?
            .get(0);
        if wrong != 0 {
            return Err(Error::bug(format!(
                "{who}: {wrong} rows on a partition their hash does not choose"
            )));
        }
        Ok(())
    }
}

fn remote_table(i: usize) -> String {
    quote(&format!("shards_r{i}"))
}

/// Starts the shard server, creates its tables, and on the main server
/// the extension, foreign server, user mapping and partitioned parent.
async fn setup(client: &Client, bench: &ShardsBench) -> Result<Remote> {
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
        .await
        .map_err(|e| Error::config(format!("postgres_fdw is not available: {e}")))?;
    let cluster = second_server(client, bench.remote_bin.clone()).await?;
    let remote_target = cluster.target();
    let remote = remote_target.connect().await?;
    let mut remote_sql = String::new();
    let server = quote(SERVER);
    let parent = quote(PARENT);
    let lit = |s: &str| quote_literal(s);
    let mut sql = format!(
        "DROP TABLE IF EXISTS {parent}; DROP SERVER IF EXISTS {server} CASCADE; \
         CREATE SERVER {server} FOREIGN DATA WRAPPER postgres_fdw \
           OPTIONS (host {}, port {}, dbname {}, batch_size '100'); \
         CREATE USER MAPPING FOR CURRENT_USER SERVER {server} \
           OPTIONS (user {}, password {}); \
         CREATE TABLE {parent} {COLUMNS} PARTITION BY HASH (n);",
        lit(remote_target.host()),
        lit(&remote_target.port().to_string()),
        lit(remote_target.dbname()),
        lit(remote_target.user()),
        lit(cluster.password()),
    );
    for i in 0..PARTITIONS {
        let table = remote_table(i);
        remote_sql.push_str(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} {COLUMNS};"
        ));
        sql.push_str(&format!(
            "CREATE FOREIGN TABLE {} PARTITION OF {parent} \
               FOR VALUES WITH (modulus {PARTITIONS}, remainder {i}) \
               SERVER {server} OPTIONS (table_name {});",
            quote(&format!("shards_p{i}")),
            lit(&format!("shards_r{i}")),
        ));
    }
    remote.batch_execute(&remote_sql).await?;
    client.batch_execute(&sql).await?;
    Ok(Remote {
        cluster,
        client: remote,
    })
}

async fn drop_server(client: &Client) -> Result<()> {
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {}; DROP SERVER IF EXISTS {} CASCADE",
            quote(PARENT),
            quote(SERVER)
        ))
        .await?;
    Ok(())
}

fn expect_rows(counted: u64, rows: u64, who: &str) -> Result<()> {
    if counted != rows {
        return Err(Error::bug(format!(
            "{who}: {counted} rows arrived, expected {rows}"
        )));
    }
    Ok(())
}
