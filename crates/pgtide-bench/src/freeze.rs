//! `pgtide bench freeze` (issue 9 part 3): what `COPY .. FREEZE` saves.
//! The same file loaded with `--truncate` (one transaction per chunk, no
//! FREEZE) and with `--truncate --single-transaction` (the table emptied
//! in the load's transaction, every COPY with FREEZE), each followed by the
//! `VACUUM (FREEZE)` that anti-wraparound vacuuming would do some day: after
//! a FREEZE load it finds the pages frozen and all-visible already and has
//! little to write; after a plain load it rewrites every page.
//!
//! One worker for both loads, so that FREEZE is the only difference. The
//! table has autovacuum off, so that no vacuum runs between the two
//! timings, and a CHECKPOINT comes before each load.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::{Error, Result};
use tokio_postgres::Client;

use crate::datasets::{create_table, generate};
use crate::runner::Runner;
use crate::{load_options, Measurement, Scenario};

/// The table loaded.
pub const TABLE: &str = "bench_freeze";
/// The reference: a plain `--truncate` load.
pub const PLAIN: &str = "--truncate (no FREEZE)";
/// The `--single-transaction` load, with FREEZE.
pub const FROZEN: &str = "--truncate --single-transaction (FREEZE)";
/// `VACUUM (FREEZE)` after the plain load.
pub const VACUUM_PLAIN: &str = "VACUUM (FREEZE) after no FREEZE";
/// `VACUUM (FREEZE)` after the FREEZE load.
pub const VACUUM_FROZEN: &str = "VACUUM (FREEZE) after FREEZE";
/// Load and vacuum together, without FREEZE.
pub const TOTAL_PLAIN: &str = "load + VACUUM (FREEZE), no FREEZE";
/// Load and vacuum together, with FREEZE.
pub const TOTAL_FROZEN: &str = "load + VACUUM (FREEZE), FREEZE";

const COLUMNS: &str = "id bigint, n int, s text, ts timestamptz";

/// What to run.
#[derive(Debug, Clone)]
pub struct FreezeBench {
    /// Rows in the file.
    pub rows: u64,
    /// Runs per contender.
    pub runs: usize,
    /// Where the file goes.
    pub dir: PathBuf,
}

/// A row: sequential id, a spread int, a random-looking text, a timestamp.
fn row(i: u64, out: &mut Vec<u8>) {
    let r = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let _ = writeln!(
        out,
        "{i},{},k{:016x},2024-01-01 00:00:00+00",
        (r >> 40) % 100_000,
        r
    );
}

impl Scenario for FreezeBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench freeze: {} rows, 1 worker, {} runs",
            self.rows, self.runs
        )
    }

    fn title(&self) -> String {
        "freeze: --truncate vs --truncate --single-transaction (COPY FREEZE), and the \
         VACUUM (FREEZE) after each (issue 9)"
            .into()
    }

    fn references(&self) -> Vec<String> {
        vec![PLAIN.into(), TOTAL_PLAIN.into()]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        let file = generate(&self.dir, "freeze", self.rows, row)?;
        // The table is made again for every run: VACUUM leaves it frozen.
        let create = format!(
            "{} WITH (autovacuum_enabled = false)",
            create_table(TABLE, COLUMNS)
        );
        for (load, vacuum, total, single) in [
            (PLAIN, VACUUM_PLAIN, TOTAL_PLAIN, false),
            (FROZEN, VACUUM_FROZEN, TOTAL_FROZEN, true),
        ] {
            let new = |name: &str| r.blank("1 worker", name, self.rows);
            let (mut l, mut v, mut t) = (new(load), new(vacuum), new(total));
            for _ in 0..r.runs {
                r.client.batch_execute(&create).await?;
                // Needs pg_checkpoint (or superuser): without it, none.
                let _ = r.client.batch_execute("CHECKPOINT").await;
                let loaded = time_load(target, &file, single).await?;
                let vacuumed = time_vacuum(&r.client).await?;
                l.seconds.push(loaded);
                v.seconds.push(vacuumed);
                t.seconds.push(loaded + vacuumed);
            }
            for m in [l, v, t] {
                r.push(m);
            }
        }
        r.client
            .batch_execute(&format!("DROP TABLE IF EXISTS {TABLE}"))
            .await?;
        Ok(r.finish())
    }
}

/// One `--truncate` load, with `--single-transaction` (FREEZE) or not;
/// a load that did not use FREEZE when it should have (or the other way
/// round) is an error, not a measurement of the wrong thing.
async fn time_load(target: &Target, file: &Path, single: bool) -> Result<f64> {
    let mut o = load_options(file, TABLE, CopyFormat::Csv, 1)?;
    o.truncate = true;
    o.single_transaction = single;
    let (seconds, report) = crate::time_load(target, &o).await?;
    if report.freeze.used != single {
        let why = report.freeze.reason.unwrap_or_default();
        return Err(Error::bug(format!(
            "bench freeze: COPY FREEZE used: {}, expected {single} ({why})",
            report.freeze.used
        )));
    }
    Ok(seconds)
}

/// `VACUUM (FREEZE)` of the table, timed.
async fn time_vacuum(client: &Client) -> Result<f64> {
    let start = Instant::now();
    client
        .batch_execute(&format!("VACUUM (FREEZE) {TABLE}"))
        .await?;
    Ok(start.elapsed().as_secs_f64())
}
