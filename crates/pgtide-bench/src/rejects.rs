//! `pgtide bench rejects` (issue 3's targets): what losing nothing costs.
//!
//! On the mixed-type data set of `bench methods` (ints, numeric, dates,
//! timestamps, text, uuid, jsonb) loaded into a table with a primary key,
//! NOT NULL and CHECK constraints, three contenders in the same run:
//! a clean load, the same clean load with `--rejects` (target: ratio
//! <= 1.02) and a load where 1% of the rows are bad, spread through the
//! file and of every kind (type errors, NOT NULL, CHECK, duplicate keys),
//! with `--rejects` (target: <= 2x the clean load, on PG 15 and PG 17;
//! issue 8 D lowered it to 1.5x). Their runs are interleaved.

use std::io::Write;
use std::path::PathBuf;

use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::Result;

use crate::datasets::{create_table, generate, mixed_row};
use crate::runner::Runner;
use crate::{counted, load_options, time_load, Measurement, Scenario};

/// Table of this scenario.
pub const TABLE: &str = "bench_rejects";
/// The clean load, the reference.
pub const CLEAN: &str = "clean";

const COLUMNS: &str = "id int primary key, amount numeric(12,2) not null check (amount >= 0), \
                       d date, ts timestamp, tstz timestamptz, note text, u uuid, doc jsonb";

/// What to run.
#[derive(Debug, Clone)]
pub struct RejectsBench {
    /// Rows in the file.
    pub rows: u64,
    /// One bad row every `every` rows (100 = 1%).
    pub every: u64,
    /// Runs per contender.
    pub runs: usize,
    /// Worker counts.
    pub workers: Vec<usize>,
    /// Where files go.
    pub dir: PathBuf,
}

/// The kinds of bad rows, in turn.
fn bad_row(i: u64, kind: u64, out: &mut Vec<u8>) {
    let good = {
        let mut g = Vec::new();
        mixed_row(i, &mut g);
        g
    };
    let text = String::from_utf8_lossy(&good).into_owned();
    let mut fields: Vec<&str> = text.trim_end_matches('\n').splitn(8, ',').collect();
    let dup = (i.saturating_sub(1)).to_string();
    match kind % 7 {
        0 => fields[0] = "x12",        // bad int
        1 => fields[1] = "12.3.4",     // bad numeric
        2 => fields[2] = "2024-02-30", // bad date
        3 => fields[6] = "not-a-uuid", // bad uuid
        4 => fields[1] = "",           // NOT NULL
        5 => fields[1] = "-5.00",      // CHECK
        _ => fields[0] = &dup,         // duplicate key
    }
    let _ = writeln!(out, "{}", fields.join(","));
}

impl Scenario for RejectsBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench rejects: {} rows, 1 bad row in {}, {} runs",
            self.rows, self.every, self.runs
        )
    }

    fn title(&self) -> String {
        "lose nothing: clean load vs --rejects vs 1% bad rows (issue 3)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![CLEAN.into()]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        r.client
            .batch_execute(&create_table(TABLE, COLUMNS))
            .await?;
        let clean = generate(&self.dir, "rejects-clean", self.rows, mixed_row)?;
        let every = self.every.max(2);
        let dirty = generate(
            &self.dir,
            &format!("rejects-dirty-{every}"),
            self.rows,
            |i, out| {
                if i % every == every / 2 {
                    bad_row(i, i / every, out)
                } else {
                    mixed_row(i, out)
                }
            },
        )?;
        for &workers in &self.workers {
            let contenders = [
                (CLEAN, &clean, false),
                ("clean --rejects", &clean, true),
                ("1% bad --rejects", &dirty, true),
            ];
            let mut opts = Vec::new();
            for (_, file, rejects) in contenders {
                let mut o = load_options(file, TABLE, CopyFormat::Csv, workers)?;
                o.rejects = rejects.then(|| self.dir.join("bench.rejects"));
                // Every run writes the same reject file.
                o.overwrite_rejects = true;
                opts.push(o);
            }
            // Interleaved, run by run: the ratios to the clean load are
            // the targets, and drift on a shared machine then spreads over
            // all three. load::run itself fails a load whose rows read !=
            // loaded + rejected.
            let label = counted(workers, "worker");
            let mut ms: Vec<Measurement> = contenders
                .iter()
                .map(|(name, _, _)| r.blank(&label, name, self.rows))
                .collect();
            let reset = format!("TRUNCATE {TABLE}");
            r.interleaved(&mut ms, &reset, async |_, i| {
                Ok(time_load(target, &opts[i]).await?.0)
            })
            .await?;
            for m in ms {
                r.push(m);
            }
        }
        Ok(r.finish())
    }
}
