//! `--resume` on a sharded target routed on the client (issue 10): each
//! server's ledger records its part of every chunk in the part's
//! transaction, and a resumed run sends each server only what it lacks.
//!
//! The tree is `shard_faults.rs`'s: `s` hash-partitioned by `n` (modulus
//! 4), leaves 0 and 1 local, 2 and 3 postgres_fdw tables on a second
//! server (`shard2`). The table has no key, so a row loaded twice shows.

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::ledger::ResumeMode;
use pgtide::load::sharded::Route;
use pgtide::load::{LoadOptions, Report};
use pgtide::progress::Progress;
use support::Db;
use tokio_postgres::Client;

const ROWS: i32 = 4000;

async fn setup(db: &Db, remote: &Client) {
    remote
        .batch_execute(
            "CREATE TABLE r2 (n int, v int, t text);
             CREATE TABLE r3 (n int, v int, t text);",
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
                 SERVER shard2 OPTIONS (table_name 'r3');
             CREATE TABLE clean (n int, v int, t text);",
        )
        .await
        .unwrap();
}

/// `n,v,t` for n in 0..ROWS, every seventh `t` on two lines, and every
/// hundredth row twice (the same row twice must stay twice).
fn input() -> String {
    input_with(|_| false)
}

/// [`input`] with the rows `bad` picks replaced by a bad value for `v`.
fn input_with(bad: impl Fn(i32) -> bool) -> String {
    let mut csv = String::new();
    for n in 0..ROWS {
        let row = match n % 7 {
            _ if bad(n) => format!("{n},bad{n},x\n"),
            0 => format!("{n},{n},\"two\nlines {n}\"\n"),
            _ => format!("{n},{n},row {n}\n"),
        };
        csv.push_str(&row);
        if n % 100 == 0 {
            csv.push_str(&row);
        }
    }
    csv
}

fn options(path: &str, table: &str, workers: usize, chunk: usize) -> LoadOptions {
    let mut opts = LoadOptions::new(
        vec![path.to_owned()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    opts.workers = workers;
    opts.chunk_bytes = chunk;
    opts.resume = Some(ResumeMode::Edges);
    opts
}

async fn load(db: &Db, opts: &LoadOptions) -> pgtide::error::Result<Report> {
    let progress = Arc::new(Progress::new(opts.workers));
    pgtide::load::run(&db.target, opts, progress).await
}

/// `s` holds exactly what a clean load of the file holds.
async fn same_as_clean(db: &Db, path: &str) {
    db.client.batch_execute("TRUNCATE clean").await.unwrap();
    let mut opts = options(path, "clean", 1, 1 << 20);
    opts.resume = None;
    let r = load(db, &opts).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    support::assert_same_rows(&db.client, "s", "clean", "the resumed load").await;
}

/// Makes `shards` stop itself (immediate: no goodbye to its sessions)
/// when the first key from 2900 on that routes to it arrives, holding
/// that row until it is gone.
async fn arm_stop(db: &Db, remote: &Client, shards: &pgtide::cluster::Cluster) {
    let stop_at: i32 = db
        .client
        .query_one(
            "SELECT min(g) FROM generate_series(2900, 3999) g, generate_series(2, 3) r \
             WHERE satisfies_hash_partition('s'::regclass, 4, r, g)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    for t in ["r2", "r3"] {
        remote
            .batch_execute(&support::stop_trigger_sql(shards, t, stop_at))
            .await
            .unwrap();
    }
}

/// Starts `shards` again, its stop trigger gone.
async fn restart(shards: pgtide::cluster::Cluster) -> (pgtide::cluster::Cluster, Client) {
    let shards = tokio::task::spawn_blocking(move || {
        shards.start().unwrap();
        shards
    })
    .await
    .unwrap();
    let remote = shards.target().connect().await.unwrap();
    remote
        .batch_execute("DROP TRIGGER stop_here ON r2; DROP TRIGGER stop_here ON r3")
        .await
        .unwrap();
    (shards, remote)
}

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_shard_down_mid_load_then_resumed_with_other_workers_loads_every_row_once() {
    let db = Db::start().await;
    let (shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    arm_stop(&db, &remote, &shards).await;
    drop(remote);
    let path = db.file(input().as_bytes(), support::Compress::None);
    let path = path.to_str().unwrap();
    let first = load(&db, &options(path, "s", 2, 4 << 10)).await.unwrap();
    let e = first.failure.as_ref().expect("shard2 went down");
    assert!(e.message().contains("shard2"), "{}", e.message());
    let coordinator = first
        .shards
        .iter()
        .find(|s| s.server == "coordinator")
        .unwrap();
    // The chunk shard2 stopped in committed on the coordinator: a chunk
    // done on one server and not the other.
    let lines = |r: &[pgtide::load::LineRange]| r.iter().map(|l| l.last + 1 - l.first).sum::<u64>();
    assert!(
        lines(&coordinator.committed) > lines(&first.committed),
        "{:?} vs {:?}",
        first.shards,
        first.committed
    );

    let (_shards, remote) = restart(shards).await;
    // Each server's ledger holds its own entries; the coordinator a
    // marker naming shard2.
    let on_shard = "SELECT count(*) FROM pgtide.ledger WHERE shard = 'shard2'";
    assert!(count(&remote, on_shard).await > 0);
    let marker = "SELECT count(*) FROM pgtide.ledger WHERE shard = '@shard2'";
    assert_eq!(count(&db.client, marker).await, 1);

    // The coordinator's path cannot send each server only its rows.
    let mut through = options(path, "s", 2, 4 << 10);
    through.route = Route::Coordinator;
    let e = load(&db, &through).await.expect_err("refused");
    assert!(
        e.message().contains("routed on the client"),
        "{}",
        e.message()
    );

    // Other workers and chunk size.
    let second = load(&db, &options(path, "s", 3, 3000)).await.unwrap();
    assert!(second.failure.is_none(), "{:?}", second.failure);
    assert!(second.rows_resumed > 0);
    let total = ROWS as u64 + (ROWS as u64).div_ceil(100);
    assert_eq!(
        second.rows_read + second.rows_resumed,
        total,
        "{second:?} vs {first:?}"
    );
    same_as_clean(&db, path).await;
    assert_eq!(
        count(&db.client, "SELECT count(*) FROM s").await as u64,
        total
    );

    let third = load(&db, &options(path, "s", 1, 1 << 20)).await.unwrap();
    assert!(third.failure.is_none(), "{:?}", third.failure);
    assert_eq!(third.rows_read, 0);
    assert!(
        third.notes.iter().any(|n| n.contains("already complete")),
        "{:?}",
        third.notes
    );
    same_as_clean(&db, path).await;

    let entries = pgtide::load::ledger::list(&db.client).await.unwrap();
    assert!(entries
        .iter()
        .any(|e| e.shard.as_deref() == Some("@shard2")));
    assert!(entries
        .iter()
        .any(|e| e.shard.as_deref() == Some("coordinator")));
}

#[tokio::test]
async fn through_the_coordinator_resume_works_and_its_entries_count_for_every_server() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    let path = db.file(input().as_bytes(), support::Compress::None);
    let path = path.to_str().unwrap();
    // --explain says how a routed load resumes, and writes no ledger.
    let x = pgtide::load::explain(&db.target, &options(path, "s", 2, 8 << 10))
        .await
        .unwrap();
    let said = |what: &str| x.lines.iter().find(|(w, _)| w == what).unwrap().1.clone();
    assert!(said("routing").starts_with("on the client"), "{x:?}");
    assert!(said("resume").contains("each server's part"), "{x:?}");
    let ledger = "SELECT count(*) FROM pg_namespace WHERE nspname = 'pgtide'";
    assert_eq!(count(&remote, ledger).await, 0, "explain wrote nothing");
    let mut through = options(path, "s", 2, 8 << 10);
    through.route = Route::Coordinator;
    let r = load(&db, &through).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(r.shards.is_empty());
    let r = load(&db, &through).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(
        r.notes.iter().any(|n| n.contains("already complete")),
        "{:?}",
        r.notes
    );
    // Routed on the client, the coordinator's whole-range entries hold
    // every server's rows: nothing is sent again.
    let r = load(&db, &options(path, "s", 2, 5000)).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(!r.shards.is_empty(), "routed on the client");
    assert_eq!(r.rows_read, 0);
    assert!(
        r.notes.iter().any(|n| n.contains("already complete")),
        "{:?}",
        r.notes
    );
    same_as_clean(&db, path).await;
}

#[tokio::test]
async fn with_rejects_a_resumed_load_rejects_each_bad_row_once() {
    let db = Db::start().await;
    let (shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    // The shard has a ledger from before the `shard` column: it gets it.
    remote
        .batch_execute(
            "CREATE SCHEMA pgtide;
             CREATE TABLE pgtide.ledger (
                 input text NOT NULL, size bigint NOT NULL, fingerprint text NOT NULL,
                 table_name text NOT NULL, table_oid oid NOT NULL, options text NOT NULL,
                 first_byte bigint NOT NULL, end_byte bigint NOT NULL, rows bigint NOT NULL,
                 run text NOT NULL, committed_at timestamptz NOT NULL DEFAULT clock_timestamp());
             INSERT INTO pgtide.ledger VALUES ('/elsewhere', 1, 'edges:x', 't', 1, '{}', 0, 1, 1, 'r');",
        )
        .await
        .unwrap();
    arm_stop(&db, &remote, &shards).await;
    drop(remote);
    // Bad values for every server, before and after the stop.
    let csv = input_with(|n| n % 531 == 17);
    let path = db.file(csv.as_bytes(), support::Compress::None);
    let path = path.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rejects = dir.path().join("bad.csv");
    let mut opts = options(path, "s", 2, 4 << 10);
    opts.rejects = Some(rejects.clone());
    let first = load(&db, &opts).await.unwrap();
    assert!(first.failure.is_some(), "shard2 went down");
    assert!(first.rows_rejected > 0);
    let (_shards, _remote) = restart(shards).await;
    opts.workers = 3;
    opts.chunk_bytes = 2500;
    let second = load(&db, &opts).await.unwrap();
    assert!(second.failure.is_none(), "{:?}", second.failure);

    // The clean load of the same file, its rejects apart.
    let clean_rejects = dir.path().join("clean-bad.csv");
    let mut clean = options(path, "clean", 1, 1 << 20);
    clean.resume = None;
    clean.rejects = Some(clean_rejects.clone());
    let r = load(&db, &clean).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    support::assert_same_rows(&db.client, "s", "clean", "resumed with --rejects").await;
    let sorted = |p: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    };
    let got = sorted(&rejects);
    assert_eq!(got, sorted(&clean_rejects), "each bad row once");
    assert_eq!(got.len() as u64, r.rows_rejected);
    assert_eq!(
        first.rows_rejected + second.rows_rejected,
        r.rows_rejected,
        "{first:?} {second:?}"
    );
}

#[tokio::test]
async fn a_load_begun_under_other_routing_rules_is_not_resumed() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    setup(&db, &remote).await;
    let path = db.file(input().as_bytes(), support::Compress::None);
    let path = path.to_str().unwrap();
    let r = load(&db, &options(path, "s", 2, 8 << 10)).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    // What a pgtide before routing version 2 left: markers with 0 rows.
    db.client
        .batch_execute("UPDATE pgtide.ledger SET rows = 0 WHERE shard LIKE '@%'")
        .await
        .unwrap();
    let again = load(&db, &options(path, "s", 2, 8 << 10)).await;
    let e = match again {
        Err(e) => e.to_string(),
        Ok(r) => format!("{:?}", r.failure),
    };
    assert!(e.contains("other rules"), "{e}");
    // Under the same rules it resumes (nothing left to load).
    db.client
        .batch_execute("UPDATE pgtide.ledger SET rows = 2 WHERE shard LIKE '@%'")
        .await
        .unwrap();
    let r = load(&db, &options(path, "s", 2, 8 << 10)).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_read, 0);
}
