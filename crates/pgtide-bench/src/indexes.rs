//! `pgtide bench indexes` (issue 9 part 3): a large load into a table with
//! three secondary indexes, maintained row by row or deferred
//! (`--defer-indexes`: dropped before the load, built again after it in
//! parallel), next to the same load into the table without indexes.

use std::io::Write;
use std::path::PathBuf;

use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::Result;

use crate::datasets::{create_table, generate};
use crate::runner::Runner;
use crate::{counted, load_options, time_load, Measurement, Scenario};

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

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        let file = generate(&self.dir, "indexes", self.rows, row)?;
        let dataset = counted(self.workers, "worker");
        let create = create_table(TABLE, COLUMNS);
        for (name, indexes, defer) in [
            (BARE, false, false),
            ("3 indexes, maintained", true, false),
            ("3 indexes, --defer-indexes", true, true),
        ] {
            let reset = match indexes {
                true => format!("{create}; {INDEXES}"),
                false => create.clone(),
            };
            let mut opts = load_options(&file, TABLE, CopyFormat::Csv, self.workers)?;
            opts.defer_indexes = defer;
            let m = r.blank(&dataset, name, self.rows);
            r.contender(m, &reset, async |_| Ok(time_load(target, &opts).await?.0))
                .await?;
        }
        r.client
            .batch_execute(&format!("DROP TABLE IF EXISTS {TABLE}"))
            .await?;
        Ok(r.finish())
    }
}
