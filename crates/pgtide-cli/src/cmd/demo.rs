//! `pgtide demo`: the README's first command. Generates a data set on the
//! embedded server, loads it with pgtide and with psql `\copy`, prints both
//! timings.

use pgtide_bench::load::{self, LoadBench};

use crate::args::DemoArgs;

/// Runs the demo: the `t` data set of the seeds at `rows` rows.
pub async fn run(a: DemoArgs) -> pgtide::Result<u8> {
    let target = super::target_or_embedded(None).await?;
    let spec = LoadBench {
        scale: a.rows as f64 / 10_000_000.0,
        runs: 1,
        datasets: vec!["t".into()],
        workers: vec![a.workers.max(1)],
        dir: super::bench::bench_dir()?,
    };
    errln!(
        "pgtide demo: loading {} rows of t(id int, col2 varchar(32)) with psql \\copy and with pgtide ({} workers)",
        crate::render::thousands(a.rows),
        a.workers
    );
    let results = load::run(&target, &spec, |_| {}).await?;
    for m in &results {
        match &m.skipped {
            Some(why) => outln!("{:<24} skipped: {why}", m.contender),
            None => outln!("{:<24} {:.2} s", m.contender, m.median()),
        }
    }
    let psql = results.iter().find(|m| m.contender == load::PSQL_COPY);
    let ours = results.iter().find(|m| m.contender.starts_with("pgtide"));
    if let (Some(p), Some(o)) = (psql, ours) {
        if p.skipped.is_none() && o.skipped.is_none() {
            outln!(
                "pgtide / psql \\copy time ratio: {:.2}",
                o.median() / p.median()
            );
        }
    }
    Ok(crate::EXIT_OK)
}
