//! `bench` scenarios at tiny sizes against one throwaway cluster: every
//! contender is present, row counts are right, medians are numbers unless
//! the measurement says why it was skipped, and the table, JSON and SVG
//! have one entry per measurement. Never a timing threshold.
//!
//! One test runs every scenario in turn, so that the test binary starts
//! one server (and fdw-batch its remote) instead of one per scenario.

use std::path::Path;

use pgtide::cluster::{find_psql, Cluster, ClusterOptions, PgBin};
use pgtide::conn::Target;
use pgtide_bench::concurrent::{self, ConcurrentBench};
use pgtide_bench::export::{self, ExportBench};
use pgtide_bench::fdw::{self, FdwBench};
use pgtide_bench::markdown::table;
use pgtide_bench::parallel::{self, ParallelBench};
use pgtide_bench::{chart, Measurement, Scenario, Unit};

/// Debian's PostgreSQL 15 ships postgres_fdw, so fdw-batch must run there.
const DEBIAN_PG15: &str = "/usr/lib/postgresql/15/bin";

#[tokio::test]
async fn every_scenario_is_well_formed_at_tiny_sizes() {
    let (bin, cluster) = start_cluster().await;
    let target = cluster.target();
    let dir = server_readable_dir();

    load_scenario(&target, dir.path()).await;
    rejects_scenario(&target, dir.path()).await;
    upsert_scenario(&target, dir.path()).await;
    indexes_scenario(&target, dir.path()).await;
    freeze_scenario(&target, dir.path()).await;
    concurrent_scenario(&target, dir.path()).await;
    parallel_scenario(&target, dir.path()).await;
    export_scenario(&target, dir.path()).await;
    copy_scenario(&target, &bin, dir.path()).await;
    fdw_scenario(&target, &bin).await;

    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .unwrap();
}

async fn load_scenario(target: &Target, dir: &Path) {
    use pgtide_bench::load::{self, LoadBench};
    let spec = LoadBench {
        scale: 0.0002,
        runs: 2,
        datasets: Vec::new(),
        workers: vec![1, 2],
        dir: dir.to_owned(),
    };
    let results = load::run(target, &spec, |_| {})
        .await
        .expect("bench load runs");
    let contenders = [
        load::SERVER_COPY,
        load::PSQL_COPY,
        load::PSQL_HALVES,
        "pgtide (1 worker)",
        "pgtide (2 workers)",
    ];
    assert_contenders(&results, &["t_narrow", "t", "t_copy1"], &contenders);
    let psql = find_psql().is_some();
    for m in &results {
        assert!(m.rows >= 200, "{m:?}");
        if psql || !m.contender.contains("psql") {
            assert_eq!(m.skipped, None, "{m:?}");
            assert_eq!(m.seconds.len(), 2, "{m:?}");
            assert!(m.median().is_finite(), "{m:?}");
        }
    }
    assert!(table(&results, load::SERVER_COPY).contains("| t_copy1 | pgtide (2 workers) |"));
}

async fn rejects_scenario(target: &Target, dir: &Path) {
    use pgtide_bench::rejects::{self, RejectsBench};
    let spec = RejectsBench {
        rows: 3000,
        every: 50,
        runs: 1,
        workers: vec![1, 2],
        dir: dir.to_owned(),
    };
    let results = spec
        .run(target, &mut |_| {})
        .await
        .expect("bench rejects runs");
    let contenders = [rejects::CLEAN, "clean --rejects", "1% bad --rejects"];
    assert_contenders(&results, &["1 worker", "2 workers"], &contenders);
    assert_all_ran(&results);
}

async fn upsert_scenario(target: &Target, dir: &Path) {
    use pgtide_bench::upsert::{self, UpsertBench};
    let spec = UpsertBench {
        rows: 2000,
        runs: 1,
        workers: vec![1, 2],
        pipeline_rows: 500,
        dir: dir.to_owned(),
    };
    let results = spec
        .run(target, &mut |_| {})
        .await
        .expect("bench upsert runs");
    let contenders = [
        upsert::PLAIN,
        "--on-conflict update",
        "--on-conflict skip",
        "pipeline --sql ON CONFLICT (500 rows, scaled)",
    ];
    assert_contenders(&results, &["1 worker", "2 workers"], &contenders);
    assert_all_ran(&results);
}

async fn indexes_scenario(target: &Target, dir: &Path) {
    use pgtide_bench::indexes::{self, IndexesBench};
    let spec = IndexesBench {
        rows: 3000,
        runs: 1,
        workers: 2,
        dir: dir.to_owned(),
    };
    let results = spec
        .run(target, &mut |_| {})
        .await
        .expect("bench indexes runs");
    let contenders = [
        indexes::BARE,
        "3 indexes, maintained",
        "3 indexes, --defer-indexes",
    ];
    assert_contenders(&results, &["2 workers"], &contenders);
    assert_all_ran(&results);
}

async fn freeze_scenario(target: &Target, dir: &Path) {
    use pgtide_bench::freeze::{self, FreezeBench};
    let spec = FreezeBench {
        rows: 3000,
        runs: 1,
        dir: dir.to_owned(),
    };
    let results = spec
        .run(target, &mut |_| {})
        .await
        .expect("bench freeze runs");
    let contenders = [
        freeze::PLAIN,
        freeze::VACUUM_PLAIN,
        freeze::TOTAL_PLAIN,
        freeze::FROZEN,
        freeze::VACUUM_FROZEN,
        freeze::TOTAL_FROZEN,
    ];
    assert_contenders(&results, &["1 worker"], &contenders);
    for m in &results {
        assert_eq!(m.skipped, None, "{m:?}");
        assert!(m.median().is_finite(), "{m:?}");
    }
}

async fn concurrent_scenario(target: &Target, dir: &Path) {
    let spec = ConcurrentBench {
        clients: vec![1, 2],
        seconds: 1.0,
        runs: 1,
        dir: dir.to_owned(),
    };
    let mut seen = 0;
    let results = spec
        .run(target, &mut |_| seen += 1)
        .await
        .expect("concurrent runs");
    assert_eq!(seen, results.len(), "on_result sees every measurement");
    let contenders = [concurrent::PSQL_COPY, concurrent::PGTIDE];
    assert_contenders(&results, &["1 client", "2 clients"], &contenders);
    for m in &results {
        assert_eq!(m.unit, Unit::RowsPerMin, "{m:?}");
        if m.skipped.is_none() {
            assert_eq!(m.rows % concurrent::FILE_ROWS, 0, "whole files only: {m:?}");
            assert_eq!(m.rows_per_min.len(), 1, "{m:?}");
            assert_eq!(m.seconds.len(), 1, "{m:?}");
            assert!(m.seconds[0] >= 1.0, "a run lasts at least --seconds: {m:?}");
        }
    }
    assert_well_formed(&results, &[concurrent::PSQL_COPY]);
}

async fn parallel_scenario(target: &Target, dir: &Path) {
    let spec = ParallelBench {
        scale: 0.0001,
        runs: 1,
        workers: vec![1, 2],
        dir: dir.to_owned(),
    };
    let results = spec.run(target, &mut |_| {}).await.expect("parallel runs");
    // 32 loads of 1 row, 8 loads of 100 rows, then one 800-row file.
    let batches = ["32 × 1 rows", "8 × 100 rows"];
    assert_contenders(
        &results,
        &batches,
        &[parallel::PSQL_COPY, parallel::PGTIDE_TASKS],
    );
    let large = [
        "server COPY FROM file",
        parallel::PSQL_COPY,
        "pgtide (1 worker)",
        "pgtide (2 workers)",
    ];
    assert_contenders(&results, &["1 × 800 rows"], &large);
    for m in &results {
        let expected = match m.dataset.as_str() {
            "32 × 1 rows" => 32,
            "8 × 100 rows" => 800,
            _ => 800,
        };
        assert_eq!(m.rows, expected, "{m:?}");
    }
    assert_eq!(results.len(), 2 * 2 + large.len());
    assert_well_formed(&results, &[parallel::PSQL_COPY]);
}

async fn export_scenario(target: &Target, dir: &Path) {
    let spec = ExportBench {
        scale: 0.0001,
        runs: 1,
        workers: vec![1, 2],
        dir: dir.join("export"),
    };
    let results = spec.run(target, &mut |_| {}).await.expect("export runs");
    let mut contenders: Vec<String> = [
        export::COUNT,
        export::SERVER_TEXT,
        export::SERVER_BINARY,
        export::PSQL_TEXT,
        export::PSQL_CSV,
        export::PSQL_BINARY,
    ]
    .map(String::from)
    .to_vec();
    for w in [1, 2] {
        contenders.extend(export::FORMATS.map(|f| export::export_name(w, f)));
    }
    let contenders: Vec<&str> = contenders.iter().map(String::as_str).collect();
    assert_contenders(
        &results,
        &["x_int (1000 rows)", "x_wide (100 rows)"],
        &contenders,
    );
    for m in results.iter().filter(|m| !m.contender.starts_with("psql")) {
        // The test cluster's superuser may write /dev/null.
        assert!(
            m.skipped.is_none(),
            "pgtide, count(*) and server COPY run: {m:?}"
        );
    }
    assert_well_formed(&results, &[export::PSQL_TEXT, export::COUNT]);
}

async fn copy_scenario(target: &Target, bin: &PgBin, dir: &Path) {
    use pgtide_bench::copy::{self, CopyBench};
    let spec = CopyBench {
        scale: 0.0001,
        runs: 1,
        workers: vec![1, 2],
        dir: dir.join("copy"),
        target_bin: Some(bin.clone()),
    };
    let results = spec.run(target, &mut |_| {}).await.expect("copy runs");
    let contenders = [
        copy::PSQL_BINARY.to_owned(),
        copy::PSQL_TEXT.into(),
        copy::PGCOPYDB.into(),
        copy::copy_name(1),
        copy::copy_name(2),
    ];
    let contenders: Vec<&str> = contenders.iter().map(String::as_str).collect();
    assert_contenders(
        &results,
        &["x_int (1000 rows)", "x_wide (100 rows)"],
        &contenders,
    );
    for m in &results {
        if m.contender.starts_with("pgtide") {
            assert!(m.skipped.is_none(), "pgtide always runs: {m:?}");
        }
        if m.contender == copy::PGCOPYDB {
            eprintln!("pgcopydb: {:?}", m.skipped);
        }
    }
    // pgcopydb may be missing: its skip says why; the well-formed checks
    // do not know it.
    let rest: Vec<Measurement> = results
        .iter()
        .filter(|m| m.contender != copy::PGCOPYDB || m.skipped.is_none())
        .cloned()
        .collect();
    assert_well_formed(&rest, &[copy::PSQL_BINARY]);
}

async fn fdw_scenario(target: &Target, bin: &PgBin) {
    let spec = FdwBench {
        scale: 0.0001,
        runs: 1,
        batch_sizes: vec![1, 100],
        remote_bin: Some(bin.clone()),
    };
    let results = spec.run(target, &mut |_| {}).await.expect("fdw-batch runs");
    let contenders = [fdw::LOCAL.to_owned(), fdw::fdw_name(1), fdw::fdw_name(100)];
    let contenders: Vec<&str> = contenders.iter().map(String::as_str).collect();
    assert_contenders(&results, &["INSERT SELECT 100 rows"], &contenders);
    assert!(results[0].skipped.is_none(), "the local table always runs");
    if bin.dir() == Path::new(DEBIAN_PG15) {
        for m in &results {
            assert!(
                m.skipped.is_none(),
                "postgres_fdw ships with Debian's PG 15: {m:?}"
            );
        }
    }
    assert!(results.iter().all(|m| m.rows == 100));
    assert_well_formed(&results, &[fdw::LOCAL]);
    // The user mapping holds the remote's password: it must be gone.
    let client = target.connect().await.unwrap();
    let left: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_foreign_server WHERE srvname = 'fdw'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the foreign server is dropped at the end");
}

/// `bench shards` on its own cluster (it starts a shard server too), so
/// that it can run alone.
#[tokio::test]
async fn shards_scenario_is_well_formed_at_tiny_sizes() {
    use pgtide::load::sharded::Route;
    use pgtide_bench::shards::{self, ShardsBench};
    let (bin, cluster) = start_cluster().await;
    let target = cluster.target();
    let dir = server_readable_dir();
    let spec = ShardsBench {
        scale: 0.002,
        runs: 1,
        workers: vec![1, 2],
        dir: dir.path().to_owned(),
        remote_bin: Some(bin.clone()),
        direct_only: false,
    };
    // Each run checks its rows itself (count, distinct, placement by
    // satisfies_hash_partition): an error here is a lost or misplaced row.
    let results = spec
        .run(&target, &mut |_| {})
        .await
        .expect("bench shards runs");
    // Per worker count, the fast loads (timed interleaved), then the
    // coordinator's.
    let contenders = [
        shards::local_name(1),
        shards::local_parts_name(1, Route::Auto),
        shards::local_parts_name(1, Route::Direct),
        shards::direct_name(1),
        shards::local_name(2),
        shards::local_parts_name(2, Route::Auto),
        shards::local_parts_name(2, Route::Direct),
        shards::direct_name(2),
        shards::coordinator_name(1),
        shards::coordinator_name(2),
        shards::psql_name(),
        shards::insert_select_name(1),
        shards::insert_select_name(100),
    ];
    let on_two = [
        shards::direct_name(1),
        shards::direct_name(2),
        shards::coordinator_name(1),
        shards::coordinator_name(2),
        shards::psql_name(),
        shards::insert_select_name(1),
        shards::insert_select_name(100),
    ]
    .map(|name| shards::on_servers(name, 2));
    let contenders: Vec<&str> = contenders
        .iter()
        .chain(&on_two)
        .map(String::as_str)
        .collect();
    assert_contenders(&results, &["2000 rows"], &contenders);
    if bin.dir() == Path::new(DEBIAN_PG15) {
        for m in results
            .iter()
            .filter(|m| !m.contender.starts_with(&shards::psql_name()))
        {
            assert!(
                m.skipped.is_none(),
                "postgres_fdw ships with Debian's PG 15: {m:?}"
            );
        }
    }
    assert!(results.iter().all(|m| m.rows == 2000));
    let local = shards::local_name(2);
    assert_well_formed(&results, &[local.as_str()]);
    let client = target.connect().await.unwrap();
    let left: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_foreign_server WHERE srvname IN ('shards', 'shards_b')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the foreign servers are dropped at the end");
    drop(client);
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .unwrap();
}

/// Exactly one measurement per data set and contender, in this order of
/// contenders within each data set.
fn assert_contenders(results: &[Measurement], datasets: &[&str], contenders: &[&str]) {
    for ds in datasets {
        let got: Vec<&str> = results
            .iter()
            .filter(|m| m.dataset == *ds)
            .map(|m| m.contender.as_str())
            .filter(|c| contenders.contains(c))
            .collect();
        assert_eq!(got, contenders, "contenders of {ds}: {results:#?}");
    }
}

/// Every contender ran (none skipped) and has a median.
fn assert_all_ran(results: &[Measurement]) {
    for m in results {
        assert_eq!(m.skipped, None, "{m:?}");
        assert!(m.median().is_finite(), "{m:?}");
    }
}

/// The checks every scenario's results pass: labelled, counted, a number
/// or a reason, one table row, one JSON entry and one SVG bar each.
fn assert_well_formed(results: &[Measurement], references: &[&str]) {
    assert!(!results.is_empty());
    let psql = find_psql().is_some();
    for m in results {
        assert!(m.server.starts_with("PG "), "server label: {m:?}");
        assert!(m.rows > 0, "{m:?}");
        match &m.skipped {
            Some(why) => {
                assert!(!why.is_empty(), "a skip says why: {m:?}");
                assert!(
                    !(psql && m.contender.starts_with("psql")),
                    "psql is installed, so its contender must run: {m:?}"
                );
            }
            None => {
                assert!(!m.samples().is_empty(), "{m:?}");
                assert!(m.median().is_finite() && m.median() > 0.0, "{m:?}");
                assert!(m.min() <= m.median() && m.median() <= m.max(), "{m:?}");
            }
        }
    }
    for reference in references {
        let t = table(results, reference);
        assert_eq!(t.lines().count(), 2 + results.len(), "{t}");
        assert!(!t.contains("NaN"), "{t}");
        for m in results {
            assert!(t.contains(&format!("| {} |", m.contender)), "{t}");
        }
    }
    let json = serde_json::to_value(results).unwrap();
    assert_eq!(json.as_array().unwrap().len(), results.len());
    assert!(json[0].get("server").is_some() && json[0].get("unit").is_some());
    let svg = chart::svg(results, "test <chart>");
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
    let bars = results.iter().filter(|m| m.skipped.is_none()).count();
    assert_eq!(svg.matches("<rect class=\"bar\"").count(), bars, "{svg}");
    assert_eq!(
        svg.matches("<text").count(),
        svg.matches("</text>").count(),
        "{svg}"
    );
    assert_eq!(
        svg.matches("<rect class=\"bar\"").count(),
        svg.matches("</rect>").count()
    );
}

/// The test binaries and a throwaway cluster started with them.
async fn start_cluster() -> (PgBin, Cluster) {
    let bin = PgBin::for_tests().expect("PostgreSQL binaries");
    let cluster = {
        let bin = bin.clone();
        tokio::task::spawn_blocking(move || Cluster::temp(&bin, ClusterOptions::default()))
            .await
            .unwrap()
            .expect("start a throwaway cluster")
    };
    (bin, cluster)
}

/// A directory the server's OS user can read (server-side COPY in the
/// parallel scenario's large-file group reads it).
fn server_readable_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("pgtide-bench-test")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}
