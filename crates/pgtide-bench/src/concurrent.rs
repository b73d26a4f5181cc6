//! `pgtide bench concurrent`: seed 003's experiment ("PG16 COPY concurrent
//! bulk-load 300% faster?").
//!
//! N clients each load the same 1,000-row file into one table, over and
//! over, for a fixed time; then `count(*)` says how many rows made it. The
//! table is the seed's `t(id int, col2 varchar(32))`, rows `n, 'test'||n`,
//! named `concurrent_t` so that `bench load`'s `t` is never touched. The number
//! reported is **rows per minute** for each N (higher is better), so the
//! seed's figures compare directly: 1 client PG14 5.5M, PG16 6.2M rows/min;
//! 10 clients 20.8M vs 23.8M; concurrency gave more than 3x over one
//! client, PG16's bulk relation extension about 12% more.
//!
//! Contenders, in the same run and against the same table:
//! - `pgtide`: N tokio tasks, one connection each, each sending the
//!   1,000-row buffer as one `COPY ... FROM STDIN` in a loop;
//! - `psql \copy`: N OS threads each running `psql -c "\copy ... from
//!   'file'"` in a loop, which is what the seed's Python script did (so each
//!   load pays a process start and a connection, as there).
//!
//! The clock starts before any client connects and stops when the last
//! client finishes the load it was running at the deadline; the rate is
//! `count(*)` over that wall time. The table is truncated before each run,
//! and the count must equal the number of completed loads times 1,000.

use std::path::PathBuf;
use std::time::Duration;

use pgtide::cluster::find_psql;
use pgtide::conn::Target;
use pgtide::ident::QualifiedName;
use pgtide::{Error, Result};

use crate::baseline;
use crate::clients::{check_count, pgtide_clients, psql_clients};
use crate::datasets::{load_dataset_as, read};
use crate::runner::Runner;
use crate::{count_rows, counted, Measurement, Scenario, Unit};

/// The pgtide contender.
pub const PGTIDE: &str = "pgtide";
/// The psql contender (the seed's method, and the reference).
pub const PSQL_COPY: &str = baseline::PSQL_COPY;
/// Rows in the file every client loads (the seed's `t1k.dat`).
pub const FILE_ROWS: u64 = 1_000;

/// What to run.
#[derive(Debug, Clone)]
pub struct ConcurrentBench {
    /// Client counts to measure, e.g. 1, 2, 4, 8, 16.
    pub clients: Vec<usize>,
    /// How long each run loads (the seed: 60 s).
    pub seconds: f64,
    /// Runs per contender and client count.
    pub runs: usize,
    /// Where the 1,000-row file is written.
    pub dir: PathBuf,
}

impl Scenario for ConcurrentBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench concurrent: clients {:?}, {} s per run, {} runs",
            self.clients, self.seconds, self.runs
        )
    }

    fn title(&self) -> String {
        "concurrent COPY of a 1,000-row file into one table (seed 003)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![PSQL_COPY.into()]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        let ds = load_dataset_as("t", "concurrent_t")?;
        ds.create(&r.client).await?;
        let file = ds.generate(&r.client, &self.dir, FILE_ROWS).await?;
        let data = read(&file)?;
        let sql = format!(
            "COPY {} FROM STDIN",
            QualifiedName::parse(ds.name)?.quoted()
        );
        let psql = find_psql();
        let duration = Some(Duration::from_secs_f64(self.seconds.max(0.0)));
        let reset = format!("TRUNCATE {}", ds.name);
        for &n in &self.clients {
            let label = counted(n, "client");
            for who in [PSQL_COPY, PGTIDE] {
                let mut m = Measurement {
                    unit: Unit::RowsPerMin,
                    ..r.blank(&label, who, 0)
                };
                // The rows each run left, for its rate.
                let mut counts = Vec::new();
                r.time(&mut m, &reset, async |client| {
                    let (loads, seconds) = match (who, &psql) {
                        (PGTIDE, _) => pgtide_clients(target, n, &sql, &data, duration).await?,
                        (_, Some(p)) => {
                            psql_clients(target, p, n, ds.name, &file, duration).await?
                        }
                        (_, None) => return Err(Error::config("psql not found")),
                    };
                    let rows = count_rows(client, ds.name).await?;
                    check_count(&label, who, rows, loads * FILE_ROWS)?;
                    counts.push(rows);
                    Ok(seconds)
                })
                .await?;
                m.rows = counts.iter().copied().min().unwrap_or(0);
                m.rows_per_min = (counts.iter().zip(&m.seconds))
                    .map(|(&rows, &s)| rows as f64 / s.max(1e-9) * 60.0)
                    .collect();
                r.push(m);
            }
        }
        Ok(r.finish())
    }
}
