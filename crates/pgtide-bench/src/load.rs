//! `pgtide bench load`: the seeds' load data sets, pgtide with 1, 2, 4
//! workers against psql `\copy` and server-side COPY, same run, same
//! server.

use std::path::PathBuf;
use std::time::Instant;

use pgtide::cluster::find_psql;
use pgtide::conn::Target;
use pgtide::copyopts::CopyFormat;
use pgtide::{Error, ErrorKind, Result};

use crate::baseline::{self, psql_copy, server_copy};
use crate::datasets::{make_world_readable, Dataset, LOAD_DATASETS};
use crate::runner::Runner;
use crate::{blocking, count_rows, expect_rows, load_options, pgtide_name, time_load, Measurement};

/// Name of the server-side COPY contender (the usual reference).
pub const SERVER_COPY: &str = baseline::SERVER_COPY;
/// Name of the psql contender.
pub const PSQL_COPY: &str = baseline::PSQL_COPY;
/// Two psql processes, each loading one half of the file (split
/// beforehand, not timed): parallel loading with zero splitting cost, the
/// ideal `--workers 2` is measured against.
pub const PSQL_HALVES: &str = "2 psql \\copy on halves";

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadBench {
    /// Scale of the seeds' row counts.
    pub scale: f64,
    /// Runs per contender.
    pub runs: usize,
    /// Data set names; empty = all.
    pub datasets: Vec<String>,
    /// pgtide worker counts.
    pub workers: Vec<usize>,
    /// Where data files are written.
    pub dir: PathBuf,
}

/// Runs the scenario; `on_result` sees each measurement as it completes.
/// Its measurements carry no server label: `bench load` runs against one
/// server, and its tables have no server column.
pub async fn run(
    target: &Target,
    bench: &LoadBench,
    mut on_result: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    let mut r = Runner::connect(target, bench.runs, &mut on_result).await?;
    let psql = find_psql();
    for ds in LOAD_DATASETS {
        if !bench.datasets.is_empty() && !bench.datasets.iter().any(|d| d == ds.name) {
            continue;
        }
        let rows = ds.rows_at(bench.scale);
        ds.create(&r.client).await?;
        let file = ds.generate(&r.client, &bench.dir, rows).await?;
        let mut contenders: Vec<String> =
            vec![SERVER_COPY.into(), PSQL_COPY.into(), PSQL_HALVES.into()];
        contenders.extend(bench.workers.iter().map(|w| pgtide_name(*w)));
        let mut set: Vec<Measurement> = contenders
            .iter()
            .map(|who| Measurement::new(ds.name, who, rows, ""))
            .collect();
        let reset = format!("TRUNCATE {}", ds.name);
        r.interleaved(&mut set, &reset, async |client, i| {
            let who = &contenders[i];
            let seconds = time_one(target, client, psql.as_deref(), ds, &file, who).await?;
            let n = count_rows(client, ds.name).await?;
            expect_rows(n, rows, &format!("{}: {who}", ds.name))?;
            Ok(seconds)
        })
        .await?;
        for m in set {
            r.push(m);
        }
    }
    Ok(r.finish())
}

async fn time_one(
    target: &Target,
    client: &tokio_postgres::Client,
    psql: Option<&std::path::Path>,
    ds: &Dataset,
    file: &std::path::Path,
    who: &str,
) -> Result<f64> {
    if who == SERVER_COPY {
        return server_copy(client, ds.name, file, "").await;
    }
    if who == PSQL_COPY {
        let psql = psql.ok_or_else(|| Error::config("psql not found"))?;
        let (target, psql, file) = (target.clone(), psql.to_owned(), file.to_owned());
        let name = ds.name;
        return blocking(move || psql_copy(&target, &psql, name, &file, "")).await;
    }
    if who == PSQL_HALVES {
        let psql = psql.ok_or_else(|| Error::config("psql not found"))?;
        let halves = split_halves(file)?;
        let start = Instant::now();
        let runs: Vec<_> = halves
            .into_iter()
            .map(|half| {
                let (target, psql) = (target.clone(), psql.to_owned());
                let name = ds.name;
                tokio::task::spawn_blocking(move || psql_copy(&target, &psql, name, &half, ""))
            })
            .collect();
        for run in runs {
            run.await
                .map_err(|e| Error::bug(format!("psql task failed: {e}")))??;
        }
        return Ok(start.elapsed().as_secs_f64());
    }
    let workers: usize = who
        .trim_start_matches("pgtide (")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::bug(format!("unknown contender {who}")))?;
    let opts = load_options(file, ds.name, CopyFormat::Text, workers)?;
    Ok(time_load(target, &opts).await?.0)
}

/// `file.half1` and `file.half2`, cut at the newline nearest the middle
/// (the seed data sets are text format without embedded newlines); reused
/// when present.
fn split_halves(file: &std::path::Path) -> Result<[std::path::PathBuf; 2]> {
    let name = |n: u8| {
        let mut p = file.as_os_str().to_owned();
        p.push(format!(".half{n}"));
        std::path::PathBuf::from(p)
    };
    let (a, b) = (name(1), name(2));
    if a.exists() && b.exists() {
        return Ok([a, b]);
    }
    let io = |e: std::io::Error| {
        Error::new(
            ErrorKind::Output,
            format!("cannot split {}: {e}", file.display()),
        )
    };
    let data = std::fs::read(file).map_err(io)?;
    let mid = memchr::memchr(b'\n', &data[data.len() / 2..])
        .map_or(data.len(), |i| data.len() / 2 + i + 1);
    std::fs::write(&a, &data[..mid]).map_err(io)?;
    std::fs::write(&b, &data[mid..]).map_err(io)?;
    make_world_readable(&a)?;
    make_world_readable(&b)?;
    Ok([a, b])
}
