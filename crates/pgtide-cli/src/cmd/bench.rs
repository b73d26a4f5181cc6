//! `pgtide bench`: runs a scenario and prints a markdown table of medians
//! and ratios (the format docs/benchmarks.md records).

use std::future::Future;
use std::path::{Path, PathBuf};

use pgtide::bench::concurrent::{self, ConcurrentBench};
use pgtide::bench::export::{self, ExportBench};
use pgtide::bench::fdw::{self, FdwBench};
use pgtide::bench::methods::{self, MethodsBench};
use pgtide::bench::parallel::{self, ParallelBench};
use pgtide::bench::{self, chart, load::LoadBench, Measurement};
use pgtide::conn::Target;

use crate::args::{BenchArgs, BenchCommonArgs, BenchScenario};

/// Runs the chosen scenario.
pub async fn run(a: BenchArgs) -> pgtide::Result<u8> {
    match a.scenario {
        BenchScenario::Load(l) => {
            let target = super::target_or_embedded(l.db.as_deref()).await?;
            let dir = match l.dir {
                Some(d) => d,
                None => bench_dir()?,
            };
            let spec = LoadBench {
                scale: l.scale,
                runs: l.runs.max(1),
                datasets: l.datasets,
                workers: l.workers,
                dir,
            };
            eprintln!(
                "pgtide bench load: scale {}, {} runs each, data in {}",
                spec.scale,
                spec.runs,
                spec.dir.display()
            );
            let results = bench::load::run(&target, &spec, |m: &Measurement| {
                eprintln!(
                    "  {:<10} {:<22} median {:.3} s {}",
                    m.dataset,
                    m.contender,
                    m.median(),
                    m.skipped.as_deref().unwrap_or("")
                )
            })
            .await?;
            println!("Reference: {}\n", bench::load::SERVER_COPY);
            println!("{}", bench::table(&results, bench::load::SERVER_COPY));
            println!("Against psql:\n");
            println!("{}", bench::table(&results, bench::load::PSQL_COPY));
            if let Some(path) = l.json {
                let json = serde_json::to_string_pretty(&results).unwrap_or_default();
                std::fs::write(&path, json).map_err(|e| {
                    pgtide::Error::new(
                        pgtide::ErrorKind::Output,
                        format!("cannot write {}: {e}", path.display()),
                    )
                })?;
            }
            Ok(crate::EXIT_OK)
        }
        BenchScenario::Concurrent(c) => {
            let spec = ConcurrentBench {
                clients: c.clients,
                seconds: c.seconds,
                runs: c.common.runs.max(1),
                dir: dir_or_default(c.dir)?,
            };
            eprintln!(
                "pgtide bench concurrent: clients {:?}, {} s per run, {} runs",
                spec.clients, spec.seconds, spec.runs
            );
            let results = each_server(&c.common.db, |t| {
                let spec = spec.clone();
                async move { concurrent::run(&t, &spec, progress).await }
            })
            .await?;
            let title = "concurrent COPY of a 1,000-row file into one table (seed 003)";
            report(&results, title, &[concurrent::PSQL_COPY], &c.common)
        }
        BenchScenario::Parallel(p) => {
            let spec = ParallelBench {
                scale: p.scale,
                runs: p.common.runs.max(1),
                workers: p.workers,
                dir: dir_or_default(p.dir)?,
            };
            eprintln!(
                "pgtide bench parallel: scale {}, {} runs, data in {}",
                spec.scale,
                spec.runs,
                spec.dir.display()
            );
            let results = each_server(&p.common.db, |t| {
                let spec = spec.clone();
                async move { parallel::run(&t, &spec, progress).await }
            })
            .await?;
            let title = "parallel loads into t_copy1 (seed 000)";
            let refs = [parallel::PSQL_COPY, bench::load::SERVER_COPY];
            report(&results, title, &refs, &p.common)
        }
        BenchScenario::Export(e) => {
            let spec = ExportBench {
                scale: e.scale,
                runs: e.common.runs.max(1),
            };
            eprintln!(
                "pgtide bench export: scale {}, {} runs",
                spec.scale, spec.runs
            );
            let results = each_server(&e.common.db, |t| {
                let spec = spec.clone();
                async move { export::run(&t, &spec, progress).await }
            })
            .await?;
            let title = "COPY TO STDOUT text vs binary vs count(*) (seed 004)";
            let refs = [export::COUNT, export::COPY_TEXT];
            report(&results, title, &refs, &e.common)
        }
        BenchScenario::FdwBatch(f) => {
            let spec = FdwBench {
                scale: f.scale,
                runs: f.common.runs.max(1),
                batch_sizes: f.batch_sizes,
                remote_bin: None,
            };
            eprintln!(
                "pgtide bench fdw-batch: scale {}, {} runs",
                spec.scale, spec.runs
            );
            let results = each_server(&f.common.db, |t| {
                let spec = spec.clone();
                async move { fdw::run(&t, &spec, progress).await }
            })
            .await?;
            let title = "INSERT SELECT into a postgres_fdw foreign table (seed 002)";
            let refs = [fdw::LOCAL.to_owned(), fdw::fdw_name(1)];
            let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
            report(&results, title, &refs, &f.common)
        }
        BenchScenario::Methods(m) => {
            let spec = MethodsBench {
                rows: m.rows,
                content_bytes: m.content_bytes,
                mixed_rows: m.mixed_rows,
                runs: m.common.runs.max(1),
                dir: dir_or_default(m.dir)?,
            };
            eprintln!(
                "pgtide bench methods: {} rows x {} bytes, {} mixed rows, {} runs, data in {}",
                spec.rows,
                spec.content_bytes,
                spec.mixed_rows,
                spec.runs,
                spec.dir.display()
            );
            let results = each_server(&m.common.db, |t| {
                let spec = spec.clone();
                async move { methods::run(&t, &spec, progress).await }
            })
            .await?;
            let title = "load methods: INSERT, pipeline, VALUES, COPY, binary COPY (seed 001)";
            let insert = methods::contender(pgtide::load::Method::Insert, 1);
            let refs = [methods::PSQL_COPY, insert.as_str()];
            report(&results, title, &refs, &m.common)
        }
        BenchScenario::Rejects(r) => {
            let spec = pgtide::bench::rejects::RejectsBench {
                rows: r.rows,
                every: r.every,
                runs: r.common.runs.max(1),
                workers: r.workers,
                dir: dir_or_default(r.dir)?,
            };
            eprintln!(
                "pgtide bench rejects: {} rows, 1 bad row in {}, {} runs",
                spec.rows, spec.every, spec.runs
            );
            let results = each_server(&r.common.db, |t| {
                let spec = spec.clone();
                async move { pgtide::bench::rejects::run(&t, &spec, progress).await }
            })
            .await?;
            let title = "lose nothing: clean load vs --rejects vs 1% bad rows (issue 3)";
            report(&results, title, &[pgtide::bench::rejects::CLEAN], &r.common)
        }
    }
}

/// Runs `scenario` against each `--db` (the embedded server when none),
/// one after the other. Two servers with the same version get their
/// address added to the label, so their rows stay apart.
async fn each_server<F, Fut>(dbs: &[String], mut scenario: F) -> pgtide::Result<Vec<Measurement>>
where
    F: FnMut(Target) -> Fut,
    Fut: Future<Output = pgtide::Result<Vec<Measurement>>>,
{
    let mut targets = Vec::new();
    if dbs.is_empty() {
        targets.push(super::target_or_embedded(None).await?);
    }
    for db in dbs {
        targets.push(super::target_or_embedded(Some(db)).await?);
    }
    let mut all: Vec<Measurement> = Vec::new();
    for target in targets {
        let address = format!("{}:{}", target.host(), target.port());
        let mut results = scenario(target).await?;
        for m in &mut results {
            if all.iter().any(|a| a.server == m.server) {
                m.server = format!("{} @{address}", m.server);
            }
        }
        all.extend(results);
    }
    Ok(all)
}

/// One line on stderr per finished measurement.
fn progress(m: &Measurement) {
    let value = match m.unit {
        bench::Unit::Seconds => format!("median {:.3} s", m.median()),
        bench::Unit::RowsPerMin => format!("median {:.2}M rows/min", m.median() / 1e6),
    };
    match &m.skipped {
        Some(why) => eprintln!(
            "  {} | {} | {}: skipped: {why}",
            m.dataset, m.server, m.contender
        ),
        None => eprintln!("  {} | {} | {}: {value}", m.dataset, m.server, m.contender),
    }
}

/// Prints one table per reference contender, then writes `--json` and
/// `--chart`.
fn report(
    results: &[Measurement],
    title: &str,
    references: &[&str],
    common: &BenchCommonArgs,
) -> pgtide::Result<u8> {
    println!("## {title}\n");
    for reference in references {
        println!("Reference: {reference}\n");
        println!("{}", bench::table(results, reference));
    }
    if let Some(path) = &common.json {
        let json = serde_json::to_string_pretty(results).unwrap_or_default();
        write(path, &json)?;
    }
    if let Some(path) = &common.chart {
        write(path, &chart::svg(results, title))?;
    }
    Ok(crate::EXIT_OK)
}

fn write(path: &Path, contents: &str) -> pgtide::Result<()> {
    std::fs::write(path, contents).map_err(|e| {
        pgtide::Error::new(
            pgtide::ErrorKind::Output,
            format!("cannot write {}: {e}", path.display()),
        )
    })
}

fn dir_or_default(dir: Option<PathBuf>) -> pgtide::Result<PathBuf> {
    match dir {
        Some(d) => Ok(d),
        None => bench_dir(),
    }
}

/// A data directory the server's OS user can read (server-side COPY
/// reads the files itself).
pub fn bench_dir() -> pgtide::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join("pgtide-bench");
    std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)))
        .map_err(|e| {
            pgtide::Error::new(
                pgtide::ErrorKind::Output,
                format!("cannot create {}: {e}", dir.display()),
            )
            .with_hint("pass --dir with a writable directory")
        })?;
    Ok(dir)
}
