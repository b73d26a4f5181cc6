//! `pgtide bench upsert` (issue 9 part 2's targets): what `--on-conflict`
//! costs.
//!
//! The mixed-type data set (`datasets::mixed_row`) into a table with a
//! primary key. The reference is a plain load of the file into the empty
//! table; the contenders merge the same file into the table holding every
//! other row already (filled server-side, vacuumed and analyzed before each
//! run): `--on-conflict update`, `--on-conflict skip`, and the row-by-row
//! way, `--method pipeline --sql 'INSERT .. ON CONFLICT (id) DO UPDATE ..'`.
//! Targets: update with 2 workers at most 2x the plain load, and at least
//! 5x faster than the pipeline.

use std::future::Future;
use std::path::{Path, PathBuf};

use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::upsert::OnConflict;
use pgtide::load::{LoadOptions, Method};
use pgtide::Result;

use crate::datasets::{generate, mixed_row};
use crate::{Measurement, Scenario};

/// The table merged into.
pub const TABLE: &str = "bench_upsert";
/// Every row of the file, loaded once: what fills half of [`TABLE`].
const SOURCE: &str = "bench_upsert_source";
/// The reference: a plain load into the empty table.
pub const PLAIN: &str = "plain load, empty table";

const COLUMNS: &str = "id int primary key, amount numeric(12,2), d date, ts timestamp, \
                       tstz timestamptz, note text, u uuid, doc jsonb";
const NAMES: [&str; 8] = ["id", "amount", "d", "ts", "tstz", "note", "u", "doc"];

/// What to run.
#[derive(Debug, Clone)]
pub struct UpsertBench {
    /// Rows in the file.
    pub rows: u64,
    /// Runs per contender.
    pub runs: usize,
    /// Worker counts.
    pub workers: Vec<usize>,
    /// Rows the pipeline contender loads (it is slow; 0 skips it). Its
    /// time is scaled to `rows`, and the contender's name says so.
    pub pipeline_rows: u64,
    /// Where files go.
    pub dir: PathBuf,
}

/// How a contender loads.
#[derive(Clone, Copy)]
enum How {
    Plain,
    Merge(OnConflict),
    Pipeline,
}

impl Scenario for UpsertBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench upsert: {} rows, half of them in the table already, {} runs",
            self.rows, self.runs
        )
    }

    fn title(&self) -> String {
        "upserts: --on-conflict against a plain load and pipelined INSERT .. ON CONFLICT (issue 9)"
            .into()
    }

    fn references(&self) -> Vec<String> {
        vec![PLAIN.into()]
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
    bench: &UpsertBench,
    mut on_result: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    let client = target.connect().await?;
    let version: String = client.query_one("SHOW server_version", &[]).await?.get(0);
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {TABLE}, {SOURCE}; CREATE TABLE {TABLE} ({COLUMNS}); \
             CREATE TABLE {SOURCE} ({COLUMNS})"
        ))
        .await?;
    let file = generate(&bench.dir, "upsert", bench.rows, mixed_row)?;
    let sample_rows = bench.pipeline_rows.min(bench.rows);
    let sample = generate(&bench.dir, "upsert", sample_rows, mixed_row)?;
    crate::time_load(target, &options(&file, SOURCE, 2, How::Plain)).await?;
    let mut results = Vec::new();
    for &workers in &bench.workers {
        let pipeline = format!("pipeline --sql ON CONFLICT ({sample_rows} rows, scaled)");
        let contenders = [
            (PLAIN.to_owned(), How::Plain),
            (
                "--on-conflict update".to_owned(),
                How::Merge(OnConflict::Update),
            ),
            (
                "--on-conflict skip".to_owned(),
                How::Merge(OnConflict::Skip),
            ),
            (pipeline, How::Pipeline),
        ];
        for (name, how) in contenders {
            if matches!(how, How::Pipeline) && sample_rows == 0 {
                continue;
            }
            let dataset = format!("{workers} worker{}", if workers == 1 { "" } else { "s" });
            let mut m = Measurement::new(&dataset, &name, bench.rows, &version);
            for _ in 0..bench.runs {
                let fill = match how {
                    How::Plain => format!("TRUNCATE {TABLE}"),
                    _ => format!(
                        "TRUNCATE {TABLE}; INSERT INTO {TABLE} SELECT * FROM {SOURCE} WHERE id % 2 = 0"
                    ),
                };
                client.batch_execute(&fill).await?;
                client
                    .batch_execute(&format!("VACUUM ANALYZE {TABLE}"))
                    .await?;
                let _ = client.batch_execute("CHECKPOINT").await;
                let (input, scale) = match how {
                    How::Pipeline => (&sample, bench.rows as f64 / sample_rows as f64),
                    _ => (&file, 1.0),
                };
                let o = options(input, TABLE, workers, how);
                m.seconds
                    .push(crate::time_load(target, &o).await?.0 * scale);
            }
            on_result(&m);
            results.push(m);
        }
    }
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {SOURCE}"))
        .await?;
    Ok(results)
}

fn options(file: &Path, table: &str, workers: usize, how: How) -> LoadOptions {
    let mut o = LoadOptions::new(
        vec![file.to_string_lossy().into_owned()],
        QualifiedName::parse(table).expect("a plain name"),
        CopyFormat::Csv,
    );
    o.workers = workers;
    match how {
        How::Plain => {}
        How::Merge(mode) => o.on_conflict = Some(mode),
        How::Pipeline => {
            o.method = Method::Pipeline;
            let params: Vec<String> = (1..=NAMES.len()).map(|i| format!("${i}")).collect();
            let set: Vec<String> = NAMES[1..]
                .iter()
                .map(|c| format!("{c} = EXCLUDED.{c}"))
                .collect();
            o.sql = Some(format!(
                "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}",
                NAMES.join(", "),
                params.join(", "),
                set.join(", ")
            ));
        }
    }
    o
}
