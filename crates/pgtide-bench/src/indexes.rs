//! `pgtide bench indexes` (issue 9 part 3): a large load into a table with
//! three secondary indexes, maintained row by row or deferred
//! (`--defer-indexes`: dropped before the load, built again after it in
//! parallel), next to the same load into the table without indexes.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};

use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::LoadOptions;
use pgtide::Result;

use crate::datasets::generate;
use crate::{Measurement, Scenario};

/// The table loaded.
pub const TABLE: &str = "bench_indexes";
/// The reference: the table without its indexes.
pub const BARE: &str = "no indexes";

const COLUMNS: &str = "id bigint, n int, s text, ts timestamptz";
const INDEXES: &str = "CREATE INDEX ON bench_indexes (n); CREATE INDEX ON bench_indexes (s); \
                       CREATE INDEX ON bench_indexes (ts)";

/// What to run.
#[derive(Debug, Clone)]
pub struct IndexesBench {
    /// Rows in the file (the issue asks for 10M).
    pub rows: u64,
    /// Runs per contender.
    pub runs: usize,
    /// Workers of every load (and index builds with --defer-indexes).
    pub workers: usize,
    /// Where files go.
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

impl Scenario for IndexesBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench indexes: {} rows, {} workers, {} runs",
            self.rows, self.workers, self.runs
        )
    }

    fn title(&self) -> String {
        "indexes: maintained row by row vs --defer-indexes (issue 9)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![BARE.into()]
    }

    fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> impl Future<Output = Result<Vec<Measurement>>> {
        run(target, self, on_result)
    }
}

/// Runs the scenario.
pub async fn run(
    target: &Target,
    bench: &IndexesBench,
    mut on_result: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    let client = target.connect().await?;
    let version: String = client.query_one("SHOW server_version", &[]).await?.get(0);
    let file = generate(&bench.dir, "indexes", bench.rows, row)?;
    let dataset = format!("{} workers", bench.workers);
    let mut results = Vec::new();
    for (name, indexes, defer) in [
        (BARE, false, false),
        ("3 indexes, maintained", true, false),
        ("3 indexes, --defer-indexes", true, true),
    ] {
        let mut m = Measurement::new(&dataset, name, bench.rows, &version);
        for _ in 0..bench.runs {
            let create = format!("DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} ({COLUMNS})");
            client.batch_execute(&create).await?;
            if indexes {
                client.batch_execute(INDEXES).await?;
            }
            let _ = client.batch_execute("CHECKPOINT").await;
            m.seconds
                .push(time_load(target, &file, bench.workers, defer).await?);
        }
        on_result(&m);
        results.push(m);
    }
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {TABLE}"))
        .await?;
    Ok(results)
}

async fn time_load(target: &Target, file: &Path, workers: usize, defer: bool) -> Result<f64> {
    let mut o = LoadOptions::new(
        vec![file.to_string_lossy().into_owned()],
        QualifiedName::parse(TABLE)?,
        CopyFormat::Csv,
    );
    o.workers = workers;
    o.defer_indexes = defer;
    Ok(crate::time_load(target, &o).await?.0)
}
