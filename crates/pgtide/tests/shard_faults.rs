//! Sharded targets (issue 10) when something goes wrong: a row a shard
//! refuses, a shard that is down before the load or goes down during it.
//!
//! The tree is mixed: `s` is hash-partitioned by `n` (modulus 4), leaves
//! 0 and 1 local on the coordinator, 2 and 3 postgres_fdw tables on a
//! second server (`shard2`), whose tables alone have a CHECK. Every
//! failed load is checked against what the servers hold: per server, the
//! rows present are exactly the rows routed to it whose lines the report
//! says that server committed (plus, all or none, a part in doubt).
//! With `--rejects`, the rows every server refuses land in the reject
//! file, in input order, and all the others are loaded.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{LineRange, LoadOptions, Report};
use pgtide::progress::Progress;
use support::{rejected_lines, Db};
use tokio_postgres::Client;

const ROWS: i32 = 3000;

/// The coordinator's tree and the shard's tables.
async fn setup(db: &Db, remote: &Client) {
    remote
        .batch_execute(
            "CREATE TABLE r2 (n int, v int CHECK (v >= 0), t text);
             CREATE TABLE r3 (n int, v int CHECK (v >= 0), t text);",
        )
        .await
        .unwrap();
    db.client
        .batch_execute(
            "CREATE TABLE s (n int, v int, t text) PARTITION BY HASH (n);
             CREATE TABLE s0 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 0);
             CREATE TABLE s1 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 1);
             CREATE FOREIGN TABLE s2 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 2)
                 SERVER shard2 OPTIONS (table_name 'r2');
             CREATE FOREIGN TABLE s3 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 3)
                 SERVER shard2 OPTIONS (table_name 'r3');",
        )
        .await
        .unwrap();
}

/// Server of each key `0..ROWS`, by the server's own hash.
async fn routes(db: &Db) -> BTreeMap<i32, &'static str> {
    db.client
        .query(
            "SELECT g, r FROM generate_series(0, $1 - 1) g, generate_series(0, 3) r \
             WHERE satisfies_hash_partition('s'::regclass, 4, r, g)",
            &[&ROWS],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| {
            let r: i32 = row.get(1);
            (row.get(0), if r < 2 { "coordinator" } else { "shard2" })
        })
        .collect()
}

/// The input: `n,v,t` for n in 0..ROWS, every seventh `t` spanning two
/// lines (so input lines are not record numbers), `bad` rows replaced.
/// Returns the CSV and the first line of each n.
fn input(bad: &BTreeMap<i32, String>) -> (String, BTreeMap<i32, u64>) {
    let mut csv = String::new();
    let mut lines = BTreeMap::new();
    let mut line = 1;
    for n in 0..ROWS {
        lines.insert(n, line);
        let row = match bad.get(&n) {
            Some(r) => format!("{r}\n"),
            None if n % 7 == 0 => format!("{n},{n},\"two\nlines {n}\"\n"),
            None => format!("{n},{n},row {n}\n"),
        };
        line += row.matches('\n').count() as u64;
        csv.push_str(&row);
    }
    (csv, lines)
}

async fn load(db: &Db, csv: &str) -> pgtide::error::Result<Report> {
    load_with(db, csv, None).await
}

async fn load_with(
    db: &Db,
    csv: &str,
    rejects: Option<std::path::PathBuf>,
) -> pgtide::error::Result<Report> {
    load_max(db, csv, rejects, None).await
}

async fn load_max(
    db: &Db,
    csv: &str,
    rejects: Option<std::path::PathBuf>,
    max_rejects: Option<u64>,
) -> pgtide::error::Result<Report> {
    let path = db.file(csv.as_bytes(), support::Compress::None);
    let mut opts = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("s").unwrap(),
        CopyFormat::Csv,
    );
    opts.workers = 2;
    opts.chunk_bytes = 4 << 10;
    opts.rejects = rejects;
    opts.max_rejects = max_rejects;
    pgtide::load::run(&db.target, &opts, Arc::new(Progress::new(2))).await
}

fn within(ranges: &[LineRange], line: u64) -> bool {
    ranges.iter().any(|r| (r.first..=r.last).contains(&line))
}

async fn keys(c: &Client, sql: &str) -> Vec<i32> {
    let mut v: Vec<i32> = c
        .query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    v.sort();
    v
}

/// Every row is where the report says: per server, present exactly when
/// its line is in that server's committed ranges (a part in doubt: all
/// of its rows or none); loaded = rows present; lines done everywhere
/// are done on each server; the `bad` rows nowhere.
async fn check_accounted(
    db: &Db,
    remote: &Client,
    report: &Report,
    lines: &BTreeMap<i32, u64>,
    bad: &[i32],
) {
    let routes = routes(db).await;
    let present = [
        (
            "coordinator",
            keys(&db.client, "SELECT n FROM s0 UNION ALL SELECT n FROM s1").await,
        ),
        (
            "shard2",
            keys(remote, "SELECT n FROM r2 UNION ALL SELECT n FROM r3").await,
        ),
    ];
    assert_eq!(report.shards.len(), 2, "{:?}", report.shards);
    let mut total = 0;
    let mut in_doubt = 0;
    for (server, got) in &present {
        let shard = report.shards.iter().find(|s| s.server == *server).unwrap();
        for r in &report.committed {
            assert!(
                within(&shard.committed, r.first) && within(&shard.committed, r.last),
                "{r:?} is done but not on {server}: {:?}",
                shard.committed
            );
        }
        let mut want: Vec<i32> = lines
            .iter()
            .filter(|(n, line)| {
                routes[n] == *server && !bad.contains(n) && within(&shard.committed, **line)
            })
            .map(|(n, _)| *n)
            .collect();
        // A part in doubt is all there or not at all.
        for r in &shard.in_doubt {
            let part: Vec<i32> = lines
                .iter()
                .filter(|(n, line)| routes[n] == *server && (r.first..=r.last).contains(*line))
                .map(|(n, _)| *n)
                .collect();
            in_doubt += part.len() as u64;
            let there = part.iter().filter(|n| got.contains(n)).count();
            assert!(there == 0 || there == part.len(), "{r:?} on {server}");
            if there > 0 {
                want.extend(part);
            }
        }
        want.sort();
        assert_eq!(got, &want, "rows on {server} vs its committed ranges");
        let got_rows = got.len() as u64;
        assert!(
            shard.rows <= got_rows,
            "{server}: {} > {got_rows}",
            shard.rows
        );
        total += got_rows;
    }
    let doubted: u64 = present
        .iter()
        .map(|(server, got)| {
            let shard = report.shards.iter().find(|s| s.server == *server).unwrap();
            got.len() as u64 - shard.rows
        })
        .sum();
    assert_eq!(report.rows_loaded + doubted, total);
    // The parts in doubt are counted apart, never as loaded.
    assert_eq!(report.rows_in_doubt, in_doubt, "rows in doubt");
    assert!(report.rows_read >= report.rows_loaded);
    // Without --rejects a bad row's line is never done; with it, it is
    // (done = committed or rejected) unless the load stopped first.
    for n in bad {
        let done = within(&report.committed, lines[n]);
        if report.rows_rejected == 0 || report.failure.is_none() {
            assert_eq!(done, report.rows_rejected > 0, "bad row {n}");
        }
    }
}

/// The first key at or after `from` that routes to `server`.
async fn key_on(db: &Db, server: &str, from: i32) -> i32 {
    let routes = routes(db).await;
    *routes
        .iter()
        .find(|(n, s)| **n >= from && **s == server)
        .unwrap()
        .0
}

#[tokio::test]
async fn a_row_a_shard_refuses_stops_the_load_at_its_line() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    // (server the row routes to, the row, what the message says)
    let on_shard = key_on(&db, "shard2", 2000).await;
    let on_shard_early = key_on(&db, "shard2", 100).await;
    let local = key_on(&db, "coordinator", 1500).await;
    let cases = [
        // A CHECK the remote table alone has.
        (
            on_shard,
            format!("{on_shard},-1,negative"),
            "violates check constraint",
            "23514",
        ),
        // A type error in a row for the shard, early in the file.
        (
            on_shard_early,
            format!("{on_shard_early},x,bad int"),
            "invalid input syntax for type integer",
            "22P02",
        ),
        // A type error in a row for a local leaf.
        (
            local,
            format!("{local},y,bad int"),
            "invalid input syntax for type integer",
            "22P02",
        ),
        // A key the client cannot read: through the coordinator.
        (
            2500,
            "z,1,bad key".to_owned(),
            "invalid input syntax for type integer",
            "22P02",
        ),
    ];
    for (n, row, says, code) in cases {
        db.client.batch_execute("TRUNCATE s0, s1").await.unwrap();
        remote.batch_execute("TRUNCATE r2, r3").await.unwrap();
        let bad = BTreeMap::from([(n, row.clone())]);
        let (csv, lines) = input(&bad);
        let report = load(&db, &csv).await.unwrap();
        let e = report
            .failure
            .as_ref()
            .unwrap_or_else(|| panic!("{row}: the load must fail"));
        let at = format!(":{}: ", lines[&n]);
        assert!(e.message().contains(&at), "{row}: {at} in {}", e.message());
        assert!(e.message().contains(says), "{row}: {}", e.message());
        assert_eq!(e.sqlstate(), Some(code), "{row}");
        if n != 2500 && routes(&db).await[&n] == "shard2" {
            assert!(e.message().contains("shard2"), "{}", e.message());
        }
        let failed = report.failed_row.as_ref().expect("the failed row");
        assert_eq!(failed.line, lines[&n], "{row}");
        assert_eq!(failed.record, n as u64 + 1, "{row}");
        check_accounted(&db, &remote, &report, &lines, &[n]).await;
    }
}

#[tokio::test]
async fn a_shard_that_is_down_before_the_load_is_named_and_nothing_is_loaded() {
    let db = Db::start().await;
    let (shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    drop(remote);
    tokio::task::spawn_blocking(move || {
        shards.stop("fast").unwrap();
        shards
    })
    .await
    .unwrap();
    let (csv, _) = input(&BTreeMap::new());
    let e = load(&db, &csv).await.expect_err("shard2 is down");
    assert!(e.message().contains("shard shard2"), "{}", e.message());
    let hint = e.hint().unwrap_or_default();
    assert!(hint.contains("nothing was loaded"), "{hint}");
    assert_eq!(
        keys(&db.client, "SELECT n FROM s0 UNION ALL SELECT n FROM s1")
            .await
            .len(),
        0
    );
}

#[tokio::test]
async fn a_shard_that_goes_down_mid_load_leaves_every_committed_range_listed() {
    let db = Db::start().await;
    let (shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    // The shard stops itself (immediate: no goodbye to the sessions)
    // when row `stop_at` arrives, and holds that row until it is gone.
    let stop_at = key_on(&db, "shard2", 1800).await;
    let leaf: i32 = db
        .client
        .query_one(
            "SELECT r FROM generate_series(2, 3) r \
             WHERE satisfies_hash_partition('s'::regclass, 4, r, $1::int)",
            &[&stop_at],
        )
        .await
        .unwrap()
        .get(0);
    let table = format!("r{leaf}");
    remote
        .batch_execute(&support::stop_trigger_sql(&shards, &table, stop_at))
        .await
        .unwrap();
    drop(remote);
    let (csv, lines) = input(&BTreeMap::new());
    let report = load(&db, &csv).await.unwrap();
    let e = report.failure.as_ref().expect("shard2 went down");
    assert!(e.message().contains("shard2"), "{}", e.message());
    assert!(
        !within(&report.committed, lines[&stop_at]),
        "{:?}",
        report.committed
    );
    // Lines after the stop were read, and some before it committed.
    assert!(!report.committed.is_empty());
    let shards = tokio::task::spawn_blocking(move || {
        shards.start().unwrap();
        shards
    })
    .await
    .unwrap();
    let remote = shards.target().connect().await.unwrap();
    check_accounted(&db, &remote, &report, &lines, &[]).await;
}

#[tokio::test]
async fn with_rejects_the_rows_each_shard_refuses_are_set_aside() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    let on_shard = key_on(&db, "shard2", 2000).await;
    let on_shard2 = key_on(&db, "shard2", on_shard + 1).await;
    let on_shard_early = key_on(&db, "shard2", 100).await;
    let local = key_on(&db, "coordinator", 1500).await;
    let misfit = key_on(&db, "coordinator", 500).await;
    let (long, short) = (
        key_on(&db, "shard2", 2600).await,
        key_on(&db, "shard2", 2800).await,
    );
    let bad = BTreeMap::from([
        // Too many or too few fields: routed by the key (the client reads
        // only up to it) and refused by the shard.
        (long, format!("{long},{long},row {long},extra")),
        (short, format!("{short},{short}")),
        // A CHECK only the shard's table has, twice in one chunk.
        (on_shard, format!("{on_shard},-1,negative")),
        (on_shard2, format!("{on_shard2},-2,negative")),
        // Type errors: for the shard, for a local leaf.
        (on_shard_early, format!("{on_shard_early},x,bad int")),
        (local, format!("{local},y,bad int")),
        // A key the client cannot read: refused through the coordinator.
        (2500, "z,1,bad key".to_owned()),
        // A line end that does not fit the file's: refused unsent.
        (misfit, format!("{misfit},{misfit},row {misfit}\r")),
    ]);
    let (csv, lines) = input(&bad);
    let dir = tempfile::tempdir().unwrap();
    let rejects = dir.path().join("bad.csv");
    let report = load_with(&db, &csv, Some(rejects.clone())).await.unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_read, ROWS as u64);
    assert_eq!(report.rows_rejected, bad.len() as u64);
    assert_eq!(report.rows_loaded, ROWS as u64 - bad.len() as u64);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("routed on the client")),
        "{:?}",
        report.notes
    );
    // The reject file: the bad rows as in the input, in input order; the
    // log places each at its line.
    let want: String = bad.values().map(|r| format!("{r}\n")).collect();
    assert_eq!(std::fs::read_to_string(&rejects).unwrap(), want);
    let logged = rejected_lines(&rejects);
    let want_lines: Vec<u64> = bad.keys().map(|n| lines[n]).collect();
    assert_eq!(logged, want_lines);
    let bad_keys: Vec<i32> = bad.keys().copied().collect();
    check_accounted(&db, &remote, &report, &lines, &bad_keys).await;
    assert_eq!(
        report.committed,
        vec![LineRange {
            input: report.committed[0].input.clone(),
            first: 1,
            last: csv.matches('\n').count() as u64,
        }]
    );
}

#[tokio::test]
async fn max_rejects_counts_every_row_refused_on_the_client_or_a_shard() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    let on_shard = key_on(&db, "shard2", 1000).await;
    let local = key_on(&db, "coordinator", 2000).await;
    let misfit = key_on(&db, "coordinator", 300).await;
    let bad = BTreeMap::from([
        (on_shard, format!("{on_shard},-1,negative")),
        (local, format!("{local},y,bad int")),
        // Refused on the client, never sent: it counts too.
        (misfit, format!("{misfit},{misfit},row {misfit}\r")),
    ]);
    let (csv, lines) = input(&bad);
    let bad_keys: Vec<i32> = bad.keys().copied().collect();
    let dir = tempfile::tempdir().unwrap();
    let rejects = dir.path().join("bad.csv");
    let max = bad.len() as u64 - 1;
    // --explain says how rejects go on this path (no ON_ERROR pass).
    let mut opts = LoadOptions::new(vec![], QualifiedName::parse("s").unwrap(), CopyFormat::Csv);
    opts.rejects = Some(rejects.clone());
    let x = pgtide::load::explain(&db.target, &opts).await.unwrap();
    let said = |what: &str| x.lines.iter().find(|(w, _)| w == what).unwrap().1.clone();
    assert!(said("routing").starts_with("on the client"), "{x:?}");
    assert!(said("rejects").contains("server's transaction"), "{x:?}");
    let report = load_max(&db, &csv, Some(rejects.clone()), Some(max))
        .await
        .unwrap();
    let failure = report
        .failure
        .as_ref()
        .expect("three bad rows, two allowed");
    assert_eq!(
        failure.kind(),
        pgtide::error::ErrorKind::RejectLimit,
        "{failure:?}"
    );
    assert!(report.rows_rejected <= max, "{}", report.rows_rejected);
    // What the reject file holds is counted, and only bad rows.
    let written = std::fs::read_to_string(&rejects).unwrap();
    // (split on \n alone: the misfit row keeps its \r)
    let rows: Vec<&str> = written.split_terminator('\n').collect();
    assert_eq!(rows.len() as u64, report.rows_rejected);
    for row in rows {
        assert!(bad.values().any(|b| b == row), "{row:?}");
    }
    check_accounted(&db, &remote, &report, &lines, &bad_keys).await;

    // As many as allowed: the load goes through.
    db.client.batch_execute("TRUNCATE s0, s1").await.unwrap();
    remote.batch_execute("TRUNCATE r2, r3").await.unwrap();
    let again = dir.path().join("bad2.csv");
    let report = load_max(&db, &csv, Some(again), Some(max + 1))
        .await
        .unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_rejected, bad.len() as u64);
    assert_eq!(report.rows_loaded, ROWS as u64 - bad.len() as u64);
    check_accounted(&db, &remote, &report, &lines, &bad_keys).await;
}

/// A stop request (Ctrl-C) ends a routed load as interrupted, as it does
/// the main path: the lines not read are in neither the table nor the
/// reject file, so the load must never look like a success.
#[tokio::test]
async fn a_stop_request_ends_a_routed_load_as_interrupted() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    let (csv, _) = input(&BTreeMap::new());
    let path = db.file(csv.as_bytes(), support::Compress::None);
    let mut opts = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("s").unwrap(),
        CopyFormat::Csv,
    );
    opts.chunk_bytes = 4 << 10;
    let progress = Arc::new(Progress::new(1));
    progress.request_stop();
    let report = pgtide::load::run(&db.target, &opts, progress)
        .await
        .unwrap();
    let failure = report
        .failure
        .expect("an interrupted load is not a success");
    assert_eq!(
        failure.kind(),
        pgtide::ErrorKind::Interrupted,
        "{failure:?}"
    );
    let loaded: i64 = db
        .client
        .query_one("SELECT count(*) FROM s", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(loaded as u64, report.rows_loaded);
}
