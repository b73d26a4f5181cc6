//! `pgtide bench methods`: seed 001's experiment ("Faster INSERT with the
//! PostgreSQL 14 client's pipeline mode"), plus the binary COPY it asked
//! for, plus a mixed-type data set where text input functions cost the
//! most (seed 004).
//!
//! Table `insert_performance_test(id serial primary key, title
//! varchar(100), content text, created_at timestamp default
//! current_timestamp)`, a CSV file of `title,content` (`--content-bytes`
//! of text each; 1M rows x ~1.2 KB was the seed's 1.3 GB table). The
//! seed's c5.large figures for 1M rows: synchronous prepared INSERT 282 s,
//! pipelined INSERT 23 s (12x), multi-row VALUES of 10,000 rows 24 s,
//! COPY 25 s. Contenders: `pgtide load --method insert | pipeline | values
//! | copy | binary` (one worker), psql `\copy` and server-side `COPY FROM
//! file` of the same file, and psycopg 3's pipeline mode (`executemany`
//! inside `conn.pipeline()`, the Python driver a user would compare
//! with; skipped with a note when `python3 -c 'import psycopg'` fails). Then a mixed-type CSV (int, numeric,
//! date, timestamp, timestamptz with offsets, text, uuid, jsonb) loaded by
//! copy, binary with 1 and 2 workers, psql and server COPY.
//!
//! Both sets also time server-side `COPY FROM` a binary file of the same
//! rows (written once, untimed, by `COPY TO STDOUT (FORMAT binary)` of a
//! loaded table): the floor that `--method binary` is measured against.
//!
//! Every run starts from an empty table (`TRUNCATE ... RESTART IDENTITY`,
//! `CHECKPOINT`) and its `count(*)` is checked. The contenders of a data
//! set run interleaved (each once, then again), so that drift on a shared
//! machine falls on all of them.

use std::io::Write;
use std::path::{Path, PathBuf};

use pgtide::cluster::find_psql;
use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::load::Method;
use pgtide::{Error, Result};

use crate::baseline::{self, psql_copy, server_copy};
use crate::datasets::{create_table, generate, make_world_readable, mix, mixed_row};
use crate::runner::Runner;
use crate::{blocking, count_rows, expect_rows, load_options, time_load, Measurement, Scenario};

/// Seed 001's table.
pub const IPT: &str = "insert_performance_test";
/// The mixed-type table.
pub const MIXED: &str = "methods_mixed";
/// The psql contender (the reference).
pub const PSQL_COPY: &str = baseline::PSQL_COPY;
/// Server-side COPY FROM file.
pub const SERVER_COPY: &str = baseline::SERVER_COPY;
/// psycopg 3's pipeline mode.
pub const PSYCOPG_PIPELINE: &str = "psycopg pipeline";
/// Server-side COPY FROM a binary file of the same rows: the floor of
/// `--method binary` (issue 12), no client and no text input functions.
pub const SERVER_COPY_BINARY: &str = "server COPY FROM binary file";

/// The psycopg contender: reads the CSV as it goes (as pgtide does) and
/// sends `executemany` in pipeline mode, one transaction; prints the
/// seconds from connecting to the commit. The connection comes from
/// libpq's environment (`Target::libpq_env`), as psql's does.
const PSYCOPG_SCRIPT: &str = r#"
import csv, sys, time
import psycopg
path, table, columns = sys.argv[1], sys.argv[2], sys.argv[3].split(", ")
marks = ", ".join(["%s"] * len(columns))
start = time.perf_counter()
with open(path, newline="") as f, psycopg.connect("") as conn:
    with conn.pipeline(), conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
            csv.reader(f),
        )
    conn.commit()
print(time.perf_counter() - start)
"#;

const IPT_COLUMNS: &str = "id serial primary key, title varchar(100), content text, \
                           created_at timestamp default current_timestamp";
const MIXED_COLUMNS: &str = "id int, amount numeric(12,2), d date, ts timestamp, \
                             tstz timestamptz, note text, u uuid, doc jsonb";

/// What to run.
#[derive(Debug, Clone)]
pub struct MethodsBench {
    /// Rows of insert_performance_test (seed: 1M).
    pub rows: u64,
    /// Bytes of `content` per row.
    pub content_bytes: usize,
    /// Rows of the mixed-type data set (0 = skip it).
    pub mixed_rows: u64,
    /// Runs per contender.
    pub runs: usize,
    /// Where the CSV files are written.
    pub dir: PathBuf,
}

/// `pgtide --method M (N workers)`.
pub fn contender(method: Method, workers: usize) -> String {
    match workers {
        1 => format!("pgtide {}", method.name()),
        n => format!("pgtide {} ({n} workers)", method.name()),
    }
}

/// One table to load and who loads it.
struct Set {
    table: &'static str,
    columns: Option<&'static str>,
    file: PathBuf,
    rows: u64,
    contenders: Vec<(String, Option<(Method, usize)>)>,
}

impl Scenario for MethodsBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench methods: {} rows x {} bytes, {} mixed rows, {} runs, data in {}",
            self.rows,
            self.content_bytes,
            self.mixed_rows,
            self.runs,
            self.dir.display()
        )
    }

    fn title(&self) -> String {
        "load methods: INSERT, pipeline, VALUES, COPY, binary COPY (seed 001)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![PSQL_COPY.into(), contender(Method::Insert, 1)]
    }

    async fn run(
        &self,
        target: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(target, self.runs, on_result).await?;
        let psql = find_psql();
        for set in &self.sets()? {
            let def = if set.table == IPT {
                IPT_COLUMNS
            } else {
                MIXED_COLUMNS
            };
            r.client
                .batch_execute(&create_table(set.table, def))
                .await?;
            let reset = format!("TRUNCATE {} RESTART IDENTITY", set.table);
            // Run by run, every contender once (a floor and the loads
            // measured against it see the same machine).
            let mut ms: Vec<Measurement> = set
                .contenders
                .iter()
                .map(|(who, _)| r.blank(set.table, who, set.rows))
                .collect();
            r.interleaved(&mut ms, &reset, async |client, i| {
                let (who, how) = &set.contenders[i];
                let seconds = match how {
                    Some((method, workers)) => time_pgtide(target, set, *method, *workers).await?,
                    None => time_baseline(target, client, psql.as_deref(), set, who).await?,
                };
                let n = count_rows(client, set.table).await?;
                expect_rows(n, set.rows, &format!("{}: {who}", set.table))?;
                Ok(seconds)
            })
            .await?;
            for m in ms {
                r.push(m);
            }
        }
        Ok(r.finish())
    }
}

impl MethodsBench {
    /// The tables to load, their files (generated here) and contenders.
    fn sets(&self) -> Result<Vec<Set>> {
        let baselines = || {
            vec![
                (SERVER_COPY.to_owned(), None),
                (SERVER_COPY_BINARY.to_owned(), None),
                (PSQL_COPY.to_owned(), None),
            ]
        };
        let mut sets = Vec::new();
        let mut ipt = baselines();
        for m in [
            Method::Insert,
            Method::Pipeline,
            Method::Values,
            Method::Copy,
            Method::Binary,
        ] {
            ipt.push((contender(m, 1), Some((m, 1))));
        }
        ipt.push((PSYCOPG_PIPELINE.to_owned(), None));
        sets.push(Set {
            table: IPT,
            columns: Some("title, content"),
            file: generate(&self.dir, IPT, self.rows, |i, out| {
                ipt_row(i, self.content_bytes, out)
            })?,
            rows: self.rows,
            contenders: ipt,
        });
        if self.mixed_rows > 0 {
            let mut mixed = baselines();
            for (m, w) in [(Method::Copy, 1), (Method::Binary, 1), (Method::Binary, 2)] {
                mixed.push((contender(m, w), Some((m, w))));
            }
            sets.push(Set {
                table: MIXED,
                columns: None,
                file: generate(&self.dir, MIXED, self.mixed_rows, mixed_row)?,
                rows: self.mixed_rows,
                contenders: mixed,
            });
        }
        Ok(sets)
    }
}

async fn time_pgtide(target: &Target, set: &Set, method: Method, workers: usize) -> Result<f64> {
    let mut opts = load_options(&set.file, set.table, CopyFormat::Csv, workers)?;
    opts.columns = set
        .columns
        .map(|c| c.split(", ").map(str::to_owned).collect());
    opts.method = method;
    Ok(time_load(target, &opts).await?.0)
}

async fn time_baseline(
    target: &Target,
    client: &tokio_postgres::Client,
    psql: Option<&Path>,
    set: &Set,
    who: &str,
) -> Result<f64> {
    let table = match set.columns {
        Some(c) => format!("{} ({c})", set.table),
        None => set.table.to_owned(),
    };
    let options = "WITH (FORMAT csv)";
    if who == PSYCOPG_PIPELINE {
        let (target, file) = (target.clone(), set.file.clone());
        let (table, columns) = (set.table, set.columns.unwrap_or_default());
        return blocking(move || psycopg(&target, &file, table, columns)).await;
    }
    if who == SERVER_COPY {
        return server_copy(client, &table, &set.file, options).await;
    }
    if who == SERVER_COPY_BINARY {
        let binary = set.file.with_extension("bin");
        if !newer(&binary, &set.file) {
            write_binary(client, &table, &set.file, &binary).await?;
        }
        return server_copy(client, &table, &binary, "WITH (FORMAT binary)").await;
    }
    let psql = psql.ok_or_else(|| Error::config("psql not found"))?;
    let (target, psql, file) = (target.clone(), psql.to_owned(), set.file.clone());
    blocking(move || psql_copy(&target, &psql, &table, &file, options)).await
}

/// Writes `binary`: the rows of the CSV `file`, loaded into `table` by
/// the server and copied out in binary format; the table is emptied again.
async fn write_binary(
    client: &tokio_postgres::Client,
    table: &str,
    file: &Path,
    binary: &Path,
) -> Result<()> {
    use futures_util::StreamExt;
    server_copy(client, table, file, "WITH (FORMAT csv)").await?;
    let partial = binary.with_extension("bin.partial");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&partial)?);
    let rows = client
        .copy_out(&format!("COPY {table} TO STDOUT (FORMAT binary)"))
        .await?;
    futures_util::pin_mut!(rows);
    while let Some(piece) = rows.next().await {
        out.write_all(&piece?)?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&partial, binary)?;
    make_world_readable(binary)?;
    let bare = table.split(' ').next().unwrap_or(table);
    client
        .batch_execute(&format!("TRUNCATE {bare} RESTART IDENTITY"))
        .await?;
    Ok(())
}

/// Whether `file` exists and was written after `than`.
fn newer(file: &Path, than: &Path) -> bool {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((mtime(file), mtime(than)), (Some(a), Some(b)) if a >= b)
}

/// Runs [`PSYCOPG_SCRIPT`]; an error (no python3, no psycopg) skips the
/// contender with its reason.
fn psycopg(target: &Target, file: &Path, table: &str, columns: &str) -> Result<f64> {
    let out = std::process::Command::new("python3")
        .args(["-c", PSYCOPG_SCRIPT])
        .arg(file)
        .args([table, columns])
        .envs(target.libpq_env())
        .output()
        .map_err(|e| Error::config(format!("cannot run python3: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim().parse::<f64>() {
        Ok(s) if out.status.success() => Ok(s),
        _ => {
            let err = String::from_utf8_lossy(&out.stderr);
            let why = err.lines().last().unwrap_or("no output");
            Err(Error::config(format!(
                "psycopg 3 not usable (pip install 'psycopg[binary]'): {why}"
            )))
        }
    }
}

/// `title i,<content_bytes of lowercase words>`.
fn ipt_row(i: u64, content_bytes: usize, out: &mut Vec<u8>) {
    let _ = write!(out, "title {i},");
    let mut state = mix(i);
    while out.len() < content_bytes + 16 {
        state = mix(state);
        let word = 2 + (state % 9) as usize;
        for k in 0..word {
            out.push(b'a' + ((state >> (k * 5)) % 26) as u8);
        }
        out.push(b' ');
    }
    out.truncate(out.len() - 1);
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipt_rows_are_deterministic_csv() {
        let mut a = Vec::new();
        ipt_row(7, 1200, &mut a);
        assert!(a.len() > 1200 && a.len() < 1240, "{}", a.len());
        assert!(a.starts_with(b"title 7,"));
        assert_eq!(a.iter().filter(|&&b| b == b'\n').count(), 1);
    }
}
