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
//! file` of the same file. Then a mixed-type CSV (int, numeric,
//! date, timestamp, timestamptz with offsets, text, uuid, jsonb) loaded by
//! copy, binary with 1 and 2 workers, psql and server COPY.
//!
//! Every run starts from an empty table (`TRUNCATE ... RESTART IDENTITY`,
//! `CHECKPOINT`) and its `count(*)` is checked.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::baseline::{find_psql, psql_copy, server_copy};
use super::datasets::make_world_readable;
use super::{count_rows, server_label, Measurement};
use crate::conn::Target;
use crate::copyopts::CopyFormat;
use crate::error::{Error, ErrorKind, Result};
use crate::ident::QualifiedName;
use crate::load::{LoadOptions, Method};

/// Seed 001's table.
pub const IPT: &str = "insert_performance_test";
/// The mixed-type table.
pub const MIXED: &str = "methods_mixed";
/// The psql contender (the reference).
pub const PSQL_COPY: &str = super::load::PSQL_COPY;
/// Server-side COPY FROM file.
pub const SERVER_COPY: &str = super::load::SERVER_COPY;

const IPT_COLUMNS: &str = "id serial primary key, title varchar(100), content text, \
                           created_at timestamp default current_timestamp";
pub(crate) const MIXED_COLUMNS: &str = "id int, amount numeric(12,2), d date, ts timestamp, \
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

/// Runs the scenario; `on_result` sees each measurement as it completes.
pub async fn run(
    target: &Target,
    bench: &MethodsBench,
    mut on_result: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    let client = target.connect().await?;
    let server = server_label(&client).await?;
    let psql = find_psql();
    let baselines = || vec![(SERVER_COPY.to_owned(), None), (PSQL_COPY.to_owned(), None)];
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
    sets.push(Set {
        table: IPT,
        columns: Some("title, content"),
        file: generate(&bench.dir, IPT, bench.rows, |i, out| {
            ipt_row(i, bench.content_bytes, out)
        })?,
        rows: bench.rows,
        contenders: ipt,
    });
    if bench.mixed_rows > 0 {
        let mut mixed = baselines();
        for (m, w) in [(Method::Copy, 1), (Method::Binary, 1), (Method::Binary, 2)] {
            mixed.push((contender(m, w), Some((m, w))));
        }
        sets.push(Set {
            table: MIXED,
            columns: None,
            file: generate(&bench.dir, MIXED, bench.mixed_rows, mixed_row)?,
            rows: bench.mixed_rows,
            contenders: mixed,
        });
    }
    let mut results = Vec::new();
    for set in &sets {
        let def = if set.table == IPT {
            IPT_COLUMNS
        } else {
            MIXED_COLUMNS
        };
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} ({def})",
                t = set.table
            ))
            .await?;
        for (who, how) in &set.contenders {
            let mut m = Measurement::new(set.table, who, set.rows, &server);
            for _ in 0..bench.runs {
                client
                    .batch_execute(&format!("TRUNCATE {} RESTART IDENTITY", set.table))
                    .await?;
                let _ = client.batch_execute("CHECKPOINT").await;
                let timed = match how {
                    Some((method, workers)) => time_pgtide(target, set, *method, *workers).await,
                    None => time_baseline(target, &client, psql.as_deref(), set, who).await,
                };
                match timed {
                    Ok(s) => m.seconds.push(s),
                    Err(e) => {
                        m.skipped = Some(e.message().to_owned());
                        break;
                    }
                }
                let n = count_rows(&client, set.table).await?;
                if n != set.rows {
                    return Err(Error::bug(format!(
                        "{}: {who} loaded {n} rows, expected {}",
                        set.table, set.rows
                    )));
                }
            }
            on_result(&m);
            results.push(m);
        }
    }
    Ok(results)
}

async fn time_pgtide(target: &Target, set: &Set, method: Method, workers: usize) -> Result<f64> {
    let mut opts = LoadOptions::new(
        vec![set.file.to_string_lossy().into_owned()],
        QualifiedName::parse(set.table)?,
        CopyFormat::Csv,
    );
    opts.columns = set
        .columns
        .map(|c| c.split(", ").map(str::to_owned).collect());
    opts.method = method;
    opts.workers = workers;
    Ok(super::time_load(target, &opts).await?.0)
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
    if who == SERVER_COPY {
        return server_copy(client, &table, &set.file, options).await;
    }
    let psql = psql.ok_or_else(|| Error::config("psql not found"))?;
    let (target, psql, file) = (target.clone(), psql.to_owned(), set.file.clone());
    tokio::task::spawn_blocking(move || psql_copy(&target, &psql, &table, &file, options))
        .await
        .map_err(|e| Error::bug(format!("psql task failed: {e}")))?
}

/// Writes `rows` CSV rows made by `row` to `dir/<name>.<rows>.csv`, or
/// reuses the file when it is there.
pub(crate) fn generate(
    dir: &Path,
    name: &str,
    rows: u64,
    mut row: impl FnMut(u64, &mut Vec<u8>),
) -> Result<PathBuf> {
    let path = dir.join(format!("methods-{name}.{rows}.csv"));
    if path.exists() {
        return Ok(path);
    }
    let tmp = path.with_extension("partial");
    let write_error = |p: &Path, e: std::io::Error| {
        Error::new(
            ErrorKind::Output,
            format!("cannot write {}: {e}", p.display()),
        )
        .with_hint("check free space and permissions, or pass --dir")
    };
    std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
    let file = std::fs::File::create(&tmp).map_err(|e| write_error(&tmp, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    for i in 0..rows {
        line.clear();
        row(i, &mut line);
        out.write_all(&line).map_err(|e| write_error(&tmp, e))?;
    }
    out.flush().map_err(|e| write_error(&tmp, e))?;
    drop(out);
    std::fs::rename(&tmp, &path).map_err(|e| write_error(&path, e))?;
    make_world_readable(&path)?;
    Ok(path)
}

/// A small deterministic generator (SplitMix64), so files are the same on
/// every machine.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
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

/// `id,amount,date,timestamp,timestamptz with offset,text,uuid,jsonb`.
pub(crate) fn mixed_row(i: u64, out: &mut Vec<u8>) {
    let r = mix(i);
    let (y, mo, d) = (1990 + r % 40, 1 + (r >> 8) % 12, 1 + (r >> 12) % 28);
    let (h, mi, s, us) = (
        (r >> 16) % 24,
        (r >> 24) % 60,
        (r >> 30) % 60,
        (r >> 36) % 1_000_000,
    );
    let off = ["+00", "+02", "-05", "+05:30", "-03:30", "+09"][((r >> 44) % 6) as usize];
    let _ = write!(
        out,
        "{i},{}.{:02},{y:04}-{mo:02}-{d:02},{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06},\
         {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}{off},note {r:x},",
        (r >> 20) % 10_000_000,
        r % 100,
    );
    let u = mix(r);
    let _ = write!(
        out,
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x},",
        u >> 32,
        (u >> 16) & 0xffff,
        u & 0xffff,
        (r >> 48) & 0xffff,
        mix(u) & 0xffff_ffff_ffff
    );
    let _ = writeln!(
        out,
        "\"{{\"\"id\"\": {i}, \"\"tags\"\": [\"\"a\"\", \"\"b{}\"\"], \"\"ok\"\": true}}\"",
        r % 97
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_deterministic_csv() {
        let mut a = Vec::new();
        ipt_row(7, 1200, &mut a);
        assert!(a.len() > 1200 && a.len() < 1240, "{}", a.len());
        assert!(a.starts_with(b"title 7,"));
        assert_eq!(a.iter().filter(|&&b| b == b'\n').count(), 1);
        let mut b = Vec::new();
        mixed_row(3, &mut b);
        let line = String::from_utf8(b).unwrap();
        assert_eq!(line.matches(',').count(), 7 + 3, "{line}");
        assert!(line.ends_with("true}\"\n"), "{line}");
    }
}
