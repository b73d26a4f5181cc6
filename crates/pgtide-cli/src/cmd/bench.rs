//! `pgtide bench`: runs a scenario of the `pgtide-bench` crate and prints a
//! markdown table of medians and ratios (the format docs/benchmarks.md
//! records).
//!
//! `run` is a table: one arm per scenario, from its flags (which flatten
//! `BenchCommonArgs`, or a shared group of flags that does:
//! `BenchScaleArgs`, `BenchRowsArgs`) to its spec. Every scenario but
//! `load` then goes the same way ([`scenario`]):
//! announce, run against each `--db`, one table per reference, `--json`,
//! `--chart`. `load` keeps its own report (one server, two tables, no
//! chart), which `pgtide demo` shares.

use std::future::Future;
use std::path::{Path, PathBuf};

use pgtide::conn::Target;
use pgtide_bench::concurrent::ConcurrentBench;
use pgtide_bench::copy::CopyBench;
use pgtide_bench::export::ExportBench;
use pgtide_bench::fdw::FdwBench;
use pgtide_bench::freeze::FreezeBench;
use pgtide_bench::indexes::IndexesBench;
use pgtide_bench::load::{self, LoadBench};
use pgtide_bench::markdown::table;
use pgtide_bench::methods::MethodsBench;
use pgtide_bench::parallel::ParallelBench;
use pgtide_bench::rejects::RejectsBench;
use pgtide_bench::shards::ShardsBench;
use pgtide_bench::upsert::UpsertBench;
use pgtide_bench::{chart, Measurement, Scenario, Unit};

use crate::args::{BenchArgs, BenchCommonArgs, BenchLoadArgs, BenchScenario};

/// Runs the chosen scenario: one arm per scenario, from its flags to its
/// spec; `load` has its own report.
pub async fn run(a: BenchArgs) -> pgtide::Result<u8> {
    use BenchScenario as S;
    match a.scenario {
        S::Load(l) => bench_load(l).await,
        S::Concurrent(c) => {
            let spec = ConcurrentBench {
                clients: c.clients,
                seconds: c.seconds,
                runs: c.common.runs(),
                dir: dir_or_default(c.dir)?,
            };
            scenario(spec, &c.common).await
        }
        S::Parallel(s) => {
            let spec = ParallelBench {
                scale: s.scale,
                runs: s.common.runs(),
                workers: s.workers,
                dir: dir_or_default(s.dir)?,
            };
            scenario(spec, &s.common).await
        }
        S::Export(s) => {
            let spec = ExportBench {
                scale: s.scale,
                runs: s.common.runs(),
                workers: s.workers,
                dir: dir_or_default(s.dir)?,
            };
            scenario(spec, &s.common).await
        }
        S::Copy(s) => {
            let spec = CopyBench {
                scale: s.scale,
                runs: s.common.runs(),
                workers: s.workers,
                dir: dir_or_default(s.dir)?,
                target_bin: None,
            };
            scenario(spec, &s.common).await
        }
        S::Shards(a) => {
            let s = a.scale;
            let spec = ShardsBench {
                scale: s.scale,
                runs: s.common.runs(),
                workers: s.workers,
                dir: dir_or_default(s.dir)?,
                remote_bin: None,
                direct_only: a.direct_only,
            };
            scenario(spec, &s.common).await
        }
        S::FdwBatch(f) => {
            let spec = FdwBench {
                scale: f.scale,
                runs: f.common.runs(),
                batch_sizes: f.batch_sizes,
                remote_bin: None,
            };
            scenario(spec, &f.common).await
        }
        S::Methods(m) => {
            let spec = MethodsBench {
                rows: m.rows,
                content_bytes: m.content_bytes,
                mixed_rows: m.mixed_rows,
                runs: m.common.runs(),
                dir: dir_or_default(m.dir)?,
            };
            scenario(spec, &m.common).await
        }
        S::Rejects(r) => {
            let spec = RejectsBench {
                rows: r.file.rows,
                every: r.every,
                runs: r.file.common.runs(),
                workers: r.file.workers,
                dir: dir_or_default(r.file.dir)?,
            };
            scenario(spec, &r.file.common).await
        }
        S::Upsert(u) => {
            let spec = UpsertBench {
                rows: u.file.rows,
                runs: u.file.common.runs(),
                workers: u.file.workers,
                pipeline_rows: u.pipeline_rows,
                dir: dir_or_default(u.file.dir)?,
            };
            scenario(spec, &u.file.common).await
        }
        S::Indexes(i) => {
            let spec = IndexesBench {
                rows: i.rows,
                runs: i.common.runs(),
                workers: i.workers.max(1),
                dir: dir_or_default(i.dir)?,
            };
            scenario(spec, &i.common).await
        }
        S::Freeze(f) => {
            let spec = FreezeBench {
                rows: f.rows,
                runs: f.common.runs(),
                dir: dir_or_default(f.dir)?,
            };
            scenario(spec, &f.common).await
        }
    }
}

/// Announces `spec`, runs it against each `--db`, and reports.
async fn scenario<S: Scenario>(spec: S, common: &BenchCommonArgs) -> pgtide::Result<u8> {
    errln!("{}", spec.announce());
    let spec = &spec;
    let results = each_server(
        &common.db,
        |t| async move { spec.run(&t, &mut progress).await },
    )
    .await?;
    let references = spec.references();
    let references: Vec<&str> = references.iter().map(String::as_str).collect();
    report(&results, &spec.title(), &references, common)
}

/// `pgtide bench load`: one server, its own progress lines, a table
/// against server COPY and one against psql, `--json`.
async fn bench_load(l: BenchLoadArgs) -> pgtide::Result<u8> {
    let target = super::target_or_embedded(l.db.as_deref()).await?;
    let spec = LoadBench {
        scale: l.scale,
        runs: l.runs.max(1),
        datasets: l.datasets,
        workers: l.workers,
        dir: dir_or_default(l.dir)?,
    };
    errln!(
        "pgtide bench load: scale {}, {} runs each, data in {}",
        spec.scale,
        spec.runs,
        spec.dir.display()
    );
    let results = load::run(&target, &spec, |m: &Measurement| {
        errln!(
            "  {:<10} {:<22} median {:.3} s {}",
            m.dataset,
            m.contender,
            m.median(),
            m.skipped.as_deref().unwrap_or("")
        )
    })
    .await?;
    outln!("Reference: {}\n", load::SERVER_COPY);
    outln!("{}", table(&results, load::SERVER_COPY));
    outln!("Against psql:\n");
    outln!("{}", table(&results, load::PSQL_COPY));
    if let Some(path) = l.json {
        let json = serde_json::to_string_pretty(&results).unwrap_or_default();
        write(&path, &json)?;
    }
    Ok(crate::EXIT_OK)
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
        Unit::Seconds => format!("median {:.3} s", m.median()),
        Unit::RowsPerMin => format!("median {:.2}M rows/min", m.median() / 1e6),
    };
    match &m.skipped {
        Some(why) => errln!(
            "  {} | {} | {}: skipped: {why}",
            m.dataset,
            m.server,
            m.contender
        ),
        None => errln!("  {} | {} | {}: {value}", m.dataset, m.server, m.contender),
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
    outln!("## {title}\n");
    for reference in references {
        outln!("Reference: {reference}\n");
        outln!("{}", table(results, reference));
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
