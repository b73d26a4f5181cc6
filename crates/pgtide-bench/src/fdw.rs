//! `pgtide bench fdw-batch`: seed 002's experiment ("Faster bulk insert
//! into foreign tables", postgres_fdw `batch_size`, PG 14).
//!
//! `INSERT INTO <foreign table> SELECT g, md5(g::text) FROM
//! generate_series(1, N) g` into `(id int primary key, v text)` on a second
//! throwaway server on the same host, with postgres_fdw's `batch_size` 1
//! (one round trip per row, which is what every FDW insert did before PG
//! 14) and 100 (one `INSERT ... VALUES (r1),...,(r100)` per round trip),
//! next to the same INSERT into a local table: the reference. Lower is
//! better; the seed's figures for 1M rows: local 6.1 s, PG13 FDW 125.3 s
//! (20x local), PG14 FDW with batch_size 100 11.1 s (1.8x local).
//!
//! The remote is started with the binaries `PgBin::find()` finds (or the
//! ones given) and the main server's `fsync` setting, and reached at
//! 127.0.0.1, so the main server must run on this host. Without
//! postgres_fdw on the main server, the FDW contenders are reported as
//! skipped with the server's reason. The foreign server (named `fdw`) and
//! its user mapping, which holds the remote's password, are dropped at
//! the end.

use pgtide::cluster::PgBin;
use pgtide::conn::Target;
use pgtide::ident::{quote, quote_literal};
use pgtide::{Error, Result};
use tokio_postgres::Client;

use crate::datasets::create_table;
use crate::remote::{drop_server, Remote};
use crate::runner::Runner;
use crate::{count_rows, expect_rows, scaled, Measurement, Scenario};

/// The reference: the same INSERT into a local table.
pub const LOCAL: &str = "local table";
/// Rows at scale 1 (the seed's size).
pub const ROWS: u64 = 1_000_000;
/// The foreign server's name on the main server.
const SERVER: &str = "fdw";
/// The foreign table (main server), its remote table, and the local table.
const FOREIGN: &str = "fdw_target";
const REMOTE: &str = "fdw_remote";
const LOCAL_TABLE: &str = "fdw_local";
/// The columns of the remote and the local table.
const COLUMNS: &str = "id int primary key, v text";

/// What to run.
#[derive(Debug, Clone)]
pub struct FdwBench {
    /// Scale of the row count (1.0 = 1M rows).
    pub scale: f64,
    /// Runs per contender.
    pub runs: usize,
    /// `batch_size` values to measure (the seed: 1 and 100).
    pub batch_sizes: Vec<u32>,
    /// Binaries for the remote server; `None` = `PgBin::find()`.
    pub remote_bin: Option<PgBin>,
}

/// `postgres_fdw batch_size B`.
pub fn fdw_name(batch_size: u32) -> String {
    format!("postgres_fdw batch_size {batch_size}")
}

impl Scenario for FdwBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench fdw-batch: scale {}, {} runs",
            self.scale, self.runs
        )
    }

    fn title(&self) -> String {
        "INSERT SELECT into a postgres_fdw foreign table (seed 002)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![LOCAL.into(), fdw_name(1)]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        let rows = scaled(ROWS, self.scale);
        let label = format!("INSERT SELECT {rows} rows");

        let local = quote(LOCAL_TABLE);
        r.client
            .batch_execute(&create_table(&local, COLUMNS))
            .await?;
        let m = r.blank(&label, LOCAL, rows);
        r.contender(m, &format!("TRUNCATE {local}"), async |client| {
            let seconds = timed(client, &insert_sql(LOCAL_TABLE, rows)).await?;
            expect_rows(count_rows(client, LOCAL_TABLE).await?, rows, LOCAL)?;
            Ok(seconds)
        })
        .await?;

        let remote = match setup(&r.client, self).await {
            Ok(remote) => remote,
            Err(e) => {
                let _ = drop_server(&r.client, SERVER).await;
                for &b in &self.batch_sizes {
                    let mut m = r.blank(&label, &fdw_name(b), rows);
                    m.skipped = Some(e.message().to_owned());
                    r.push(m);
                }
                return Ok(r.finish());
            }
        };
        let (mut measured, mut option_added) = (Ok(()), false);
        for &b in &self.batch_sizes {
            let m = r.blank(&label, &fdw_name(b), rows);
            measured = batch_runs(&mut r, &remote, b, &mut option_added, m).await;
            if measured.is_err() {
                break;
            }
        }
        // Always drop the foreign server: its user mapping holds a password.
        let dropped = remote.stop(&r.client).await;
        measured?;
        dropped?;
        Ok(r.finish())
    }
}

/// Sets `batch_size` on the foreign table and times the runs of INSERTs into it. A server that
/// refuses the option or the INSERT (no route to the remote) makes the
/// measurement skipped, with the server's reason.
async fn batch_runs(
    r: &mut Runner<'_>,
    remote: &Remote,
    batch_size: u32,
    option_added: &mut bool,
    mut m: Measurement,
) -> Result<()> {
    let verb = if *option_added { "SET" } else { "ADD" };
    let alter = format!(
        "ALTER FOREIGN TABLE {} OPTIONS ({verb} batch_size {})",
        quote(FOREIGN),
        quote_literal(&batch_size.to_string())
    );
    if let Err(e) = r.client.batch_execute(&alter).await {
        m.skipped = Some(format!(
            "batch_size needs PostgreSQL 14+: {}",
            Error::from(e)
        ));
        r.push(m);
        return Ok(());
    }
    *option_added = true;
    let (rows, who) = (m.rows, m.contender.clone());
    let truncate = format!("TRUNCATE {}", quote(REMOTE));
    r.contender(m, "", async |client| {
        remote.client.batch_execute(&truncate).await?;
        let seconds = timed(client, &insert_sql(FOREIGN, rows))
            .await
            .map_err(|e| Error::config(format!("INSERT through postgres_fdw failed: {e}")))?;
        expect_rows(count_rows(&remote.client, REMOTE).await?, rows, &who)?;
        Ok(seconds)
    })
    .await
}

/// The seed's statement: `INSERT INTO t SELECT g, md5(g::text) ...`.
fn insert_sql(table: &str, rows: u64) -> String {
    format!(
        "INSERT INTO {} SELECT g, md5(g::text) FROM generate_series(1, {rows}) g",
        quote(table)
    )
}

/// Wall time of one statement.
async fn timed(client: &Client, sql: &str) -> Result<f64> {
    let start = std::time::Instant::now();
    client.batch_execute(sql).await?;
    Ok(start.elapsed().as_secs_f64())
}

/// Starts the remote, creates its table, and on the main server the
/// foreign server, user mapping and foreign table.
async fn setup(client: &Client, bench: &FdwBench) -> Result<Remote> {
    let remote = Remote::start(client, bench.remote_bin.clone(), SERVER, "").await?;
    remote
        .client
        .batch_execute(&create_table(&quote(REMOTE), COLUMNS))
        .await?;
    client
        .batch_execute(&format!(
            "CREATE FOREIGN TABLE {} (id int, v text) SERVER {} OPTIONS (table_name {})",
            quote(FOREIGN),
            quote(SERVER),
            quote_literal(REMOTE),
        ))
        .await?;
    Ok(remote)
}
