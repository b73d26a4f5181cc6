//! `pgtide bench parallel`: seed 000's concurrent-COPY experiment ("PG 16
//! extends relations by many pages at once").
//!
//! Many independent loads into one table shaped like the seed's `t_copy1(n
//! int, c1 text, c2 text, c3 text)` (md5 values) at the same time,
//! TRUNCATE between runs, wall time of the whole batch (lower is better):
//! - 32 concurrent loads of a 10K-row file (seed: PG15 580 ms, PG16 549 ms);
//! - 8 concurrent loads of a 1M-row file (seed: PG15 5.38 s, PG16 5.04 s).
//!
//! Contenders: `pgtide tasks` (one tokio task and connection per load, each
//! one `COPY ... FROM STDIN` of the whole file, read into memory once
//! before the clock starts) and `psql \copy` processes started in parallel,
//! as the seed's GNU parallel did. Both connect inside the timed window.
//!
//! Then one large file (the 1M-row size ×8, generated rather than
//! concatenated so ids stay unique) is loaded by `pgtide load` with 1, 2
//! and 4 workers, next to one psql `\copy` and server-side `COPY FROM
//! 'file'` of the same file (the floor: no client at all). Row counts
//! scale with `--scale`; every run's `count(*)` is checked.
//!
//! The table is `parallel_t_copy1`, not `t_copy1`, so that this scenario
//! and `bench load` cannot truncate each other's table on a shared server.

use std::path::PathBuf;

use pgtide::cluster::find_psql;
use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::{Error, Result};
use tokio_postgres::Client;

use crate::baseline::{self, server_copy, SERVER_COPY};
use crate::clients::{check_count, pgtide_clients, psql_clients};
use crate::datasets::{load_dataset_as, read};
use crate::runner::Runner;
use crate::{count_rows, load_options, pgtide_name, scaled, time_load, Measurement, Scenario};

/// The pgtide contender of the concurrent batches.
pub const PGTIDE_TASKS: &str = "pgtide tasks";
/// The psql contender (the seed's method, and the reference).
pub const PSQL_COPY: &str = baseline::PSQL_COPY;

/// The seed's batches: (concurrent loads, rows per file at scale 1).
pub const BATCHES: [(usize, u64); 2] = [(32, 10_000), (8, 1_000_000)];

/// The large single file is this many times the largest batch's file.
pub const LARGE_FACTOR: u64 = 8;

/// What to run.
#[derive(Debug, Clone)]
pub struct ParallelBench {
    /// Scale of the seed's row counts (1.0 = 10K and 1M rows per file).
    pub scale: f64,
    /// Runs per contender.
    pub runs: usize,
    /// Worker counts for `pgtide load` on the large file.
    pub workers: Vec<usize>,
    /// Where data files are written.
    pub dir: PathBuf,
}

impl Scenario for ParallelBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench parallel: scale {}, {} runs, data in {}",
            self.scale,
            self.runs,
            self.dir.display()
        )
    }

    fn title(&self) -> String {
        "parallel loads into t_copy1 (seed 000)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![PSQL_COPY.into(), SERVER_COPY.into()]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        let ds = load_dataset_as("t_copy1", "parallel_t_copy1")?;
        let table = ds.name;
        let reset = format!("TRUNCATE {table}");
        let psql = find_psql();
        let sql = format!("COPY {} FROM STDIN", QualifiedName::parse(table)?.quoted());
        ds.create(&r.client).await?;
        for (loads, rows) in BATCHES {
            let rows = scaled(rows, self.scale);
            let file = ds.generate(&r.client, &self.dir, rows).await?;
            let data = read(&file)?;
            let label = format!("{loads} × {rows} rows");
            for who in [PSQL_COPY, PGTIDE_TASKS] {
                let m = r.blank(&label, who, loads as u64 * rows);
                r.contender(m, &reset, async |client| {
                    let (_, seconds) = match (who, &psql) {
                        (PGTIDE_TASKS, _) => {
                            pgtide_clients(target, loads, &sql, &data, None).await?
                        }
                        (_, Some(p)) => psql_clients(target, p, loads, table, &file, None).await?,
                        (_, None) => return Err(Error::config("psql not found")),
                    };
                    check(client, table, who, &label, loads as u64 * rows).await?;
                    Ok(seconds)
                })
                .await?;
            }
        }
        let rows = scaled(BATCHES[1].1, self.scale) * LARGE_FACTOR;
        let file = ds.generate(&r.client, &self.dir, rows).await?;
        let label = format!("1 × {rows} rows");
        let mut contenders = vec![SERVER_COPY.to_owned(), PSQL_COPY.to_owned()];
        contenders.extend(self.workers.iter().map(|&w| pgtide_name(w)));
        for (i, who) in contenders.iter().enumerate() {
            let m = r.blank(&label, who, rows);
            r.contender(m, &reset, async |client| {
                let seconds = match (i, &psql) {
                    (0, _) => server_copy(client, table, &file, "").await?,
                    (1, Some(p)) => psql_clients(target, p, 1, table, &file, None).await?.1,
                    (1, None) => return Err(Error::config("psql not found")),
                    _ => {
                        let opts =
                            load_options(&file, table, CopyFormat::Text, self.workers[i - 2]);
                        time_load(target, &opts?).await?.0
                    }
                };
                check(client, table, who, &label, rows).await?;
                Ok(seconds)
            })
            .await?;
        }
        Ok(r.finish())
    }
}

/// The run left `rows` rows in `table`.
async fn check(client: &Client, table: &str, who: &str, label: &str, rows: u64) -> Result<()> {
    check_count(label, who, count_rows(client, table).await?, rows)
}
