//! `pgtide bench upsert` (issue 9 part 2's targets): what `--on-conflict`
//! costs.
//!
//! The mixed-type data set (`datasets::mixed_row`) into a table with a
//! primary key. The reference is a plain load of the file into the empty
//! table; the contenders merge the same file into the table holding every
//! other row already (filled server-side, vacuumed and analyzed before each
//! run): `--on-conflict update` (once with the rows holding the file's
//! values, once with each of them differing), `--on-conflict skip`, and
//! the row-by-row way, `--method pipeline --sql 'INSERT .. ON CONFLICT (id)
//! DO UPDATE ..'`.
//! Targets: update with 2 workers at most 2x the plain load, and at least
//! 5x faster than the pipeline.

use std::path::{Path, PathBuf};

use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::load::upsert::OnConflict;
use pgtide::load::{LoadOptions, Method};
use pgtide::Result;

use crate::datasets::{generate, mixed_row};
use crate::runner::Runner;
use crate::{counted, load_options, time_load, Measurement, Scenario};

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

/// `--on-conflict update` into rows holding the file's values: left alone
/// (`upsert::Unchanged`), which is what reloading a file that mostly did not
/// change costs.
const UPDATE: &str = "--on-conflict update";
/// `--on-conflict update` where every existing row differs from the file
/// (its amount): each one is rewritten, the upsert's full cost.
const UPDATE_CHANGED: &str = "--on-conflict update, existing rows differ";

/// What [`TABLE`] holds before a contender's run.
#[derive(Clone, Copy)]
enum Fill {
    /// Nothing.
    Empty,
    /// Every other row of the file, with the file's values.
    Same,
    /// Every other row of the file, each with another amount.
    Other,
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

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        r.client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {TABLE}, {SOURCE}; CREATE TABLE {TABLE} ({COLUMNS}); \
                 CREATE TABLE {SOURCE} ({COLUMNS})"
            ))
            .await?;
        let file = generate(&self.dir, "upsert", self.rows, mixed_row)?;
        let sample_rows = self.pipeline_rows.min(self.rows);
        let sample = generate(&self.dir, "upsert", sample_rows, mixed_row)?;
        time_load(target, &options(&file, SOURCE, 2, How::Plain)?).await?;
        let pipeline = format!("pipeline --sql ON CONFLICT ({sample_rows} rows, scaled)");
        let contenders = [
            (PLAIN, How::Plain, Fill::Empty),
            (UPDATE, How::Merge(OnConflict::Update), Fill::Same),
            (UPDATE_CHANGED, How::Merge(OnConflict::Update), Fill::Other),
            (
                "--on-conflict skip",
                How::Merge(OnConflict::Skip),
                Fill::Same,
            ),
            (pipeline.as_str(), How::Pipeline, Fill::Same),
        ];
        for &workers in &self.workers {
            for (name, how, fill) in contenders {
                if matches!(how, How::Pipeline) && sample_rows == 0 {
                    continue;
                }
                let fill = match fill {
                    Fill::Empty => format!("TRUNCATE {TABLE}"),
                    Fill::Same => format!(
                        "TRUNCATE {TABLE}; \
                         INSERT INTO {TABLE} SELECT * FROM {SOURCE} WHERE id % 2 = 0"
                    ),
                    Fill::Other => format!(
                        "TRUNCATE {TABLE}; \
                         INSERT INTO {TABLE} SELECT id, amount + 1, d, ts, tstz, note, u, doc \
                         FROM {SOURCE} WHERE id % 2 = 0"
                    ),
                };
                // VACUUM cannot run in the fill's batch (an implicit
                // transaction): each run starts with it and a CHECKPOINT
                // of its own, before the load's clock.
                let vacuum = format!("VACUUM ANALYZE {TABLE}");
                let (input, scale) = match how {
                    How::Pipeline => (&sample, self.rows as f64 / sample_rows as f64),
                    _ => (&file, 1.0),
                };
                let opts = options(input, TABLE, workers, how)?;
                let m = r.blank(&counted(workers, "worker"), name, self.rows);
                r.contender(m, &fill, async |client| {
                    client.batch_execute(&vacuum).await?;
                    let _ = client.batch_execute("CHECKPOINT").await;
                    Ok(time_load(target, &opts).await?.0 * scale)
                })
                .await?;
            }
        }
        r.client
            .batch_execute(&format!("DROP TABLE IF EXISTS {SOURCE}"))
            .await?;
        Ok(r.finish())
    }
}

fn options(file: &Path, table: &str, workers: usize, how: How) -> Result<LoadOptions> {
    let mut o = load_options(file, table, CopyFormat::Csv, workers)?;
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
    Ok(o)
}
