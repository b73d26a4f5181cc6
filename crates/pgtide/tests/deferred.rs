//! Isolation in one transaction (savepoint per attempt) must not trust a
//! pass whose COMMIT fails: a DEFERRABLE INITIALLY DEFERRED foreign key is
//! only checked at COMMIT. The pass is rolled back and the chunk isolated
//! range by range; every row ends loaded or rejected with its reason. Nor
//! may `--max-rejects` count the rejects of that pass, which are found
//! again range by range, and a chunk whose isolation stopped midway
//! counts only the bytes it settled.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::{Compress, Db};

#[tokio::test]
async fn deferred_constraints_fail_at_commit_and_still_lose_nothing() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE parent (id int PRIMARY KEY);
             INSERT INTO parent SELECT generate_series(1, 50);",
        )
        .await
        .unwrap();
    // Rows 1..200: parent id = row id for 1..50, a missing parent every
    // 37th row, a bad integer every 53rd row.
    let mut data = String::new();
    let mut good = BTreeSet::new();
    let mut bad = Vec::new();
    for id in 1..=200 {
        let p = if id % 37 == 0 { 999 } else { 1 + id % 50 };
        if id % 53 == 0 {
            data.push_str(&format!("{id},x{p}\n"));
            bad.push((id as u64, "22P02".to_owned()));
        } else {
            data.push_str(&format!("{id},{p}\n"));
            if p == 999 {
                bad.push((id as u64, "23503".to_owned()));
            } else {
                good.insert(id);
            }
        }
    }
    let file = db.file(data.as_bytes(), Compress::None);
    for (n, (workers, chunk)) in [(1, 1 << 20), (1, 700), (3, 500)].into_iter().enumerate() {
        let table = format!("child{n}");
        db.client
            .batch_execute(&format!(
                "CREATE TABLE {table} (id int, p int REFERENCES parent
                   DEFERRABLE INITIALLY DEFERRED)"
            ))
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let rejects = dir.path().join("r.csv");
        let mut o = LoadOptions::new(
            vec![file.to_string_lossy().into_owned()],
            QualifiedName::parse(&table).unwrap(),
            CopyFormat::Csv,
        );
        o.workers = workers;
        o.chunk_bytes = chunk;
        o.rejects = Some(rejects.clone());
        let report = load::run(&db.target, &o, Arc::new(Progress::new(workers)))
            .await
            .expect("load starts");
        let ctx = format!("workers {workers} chunk {chunk}");
        assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
        assert_eq!(report.rows_read, 200, "{ctx}");
        assert_eq!(report.rows_loaded as usize, good.len(), "{ctx}");
        let log = std::fs::read_to_string(pgtide::reject::log_path(&rejects)).unwrap();
        let got: Vec<(u64, String)> = log
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["record"].as_u64().unwrap(),
                    v["sqlstate"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(got, bad, "{ctx}");
        let ids: BTreeSet<i32> = db
            .client
            .query(&format!("SELECT id FROM {table}"), &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(ids, good, "{ctx}");
    }
}

/// `--max-rejects N` with exactly N bad rows, where the chunk's pass in
/// one transaction is rolled back at COMMIT (a deferred foreign key): the
/// rows that pass rejected are rejected again range by range, and must be
/// counted against the limit once. The claims of the rolled-back pass
/// were kept, so the load stopped with `RejectLimit` within its limit.
#[tokio::test]
async fn max_rejects_counts_a_rolled_back_pass_once() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE parent (id int PRIMARY KEY);
             INSERT INTO parent SELECT generate_series(1, 50);",
        )
        .await
        .unwrap();
    // Rows 1..300: a bad integer every 20th row (rejected by the pass in
    // one transaction before its COMMIT), a missing parent every 45th
    // (found only at COMMIT, which rolls that pass back).
    let mut data = String::new();
    let mut bad = 0u64;
    for id in 1..=300 {
        if id % 20 == 0 {
            data.push_str(&format!("{id},x\n"));
            bad += 1;
        } else if id % 45 == 0 {
            data.push_str(&format!("{id},999\n"));
            bad += 1;
        } else {
            data.push_str(&format!("{id},{}\n", 1 + id % 50));
        }
    }
    let file = db.file(data.as_bytes(), Compress::None);
    for (n, (workers, chunk)) in [(1, 1 << 20), (2, 600)].into_iter().enumerate() {
        let table = format!("limited{n}");
        db.client
            .batch_execute(&format!(
                "CREATE TABLE {table} (id int, p int REFERENCES parent
                   DEFERRABLE INITIALLY DEFERRED)"
            ))
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut o = LoadOptions::new(
            vec![file.to_string_lossy().into_owned()],
            QualifiedName::parse(&table).unwrap(),
            CopyFormat::Csv,
        );
        o.workers = workers;
        o.chunk_bytes = chunk;
        o.rejects = Some(dir.path().join("r.csv"));
        o.max_rejects = Some(bad);
        let report = load::run(&db.target, &o, Arc::new(Progress::new(workers)))
            .await
            .expect("load starts");
        let ctx = format!("workers {workers} chunk {chunk}, {bad} bad rows");
        assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
        assert_eq!(report.rows_read, 300, "{ctx}");
        assert_eq!(report.rows_rejected, bad, "{ctx}");
        assert_eq!(
            report.rows_loaded + report.rows_rejected,
            report.rows_read,
            "{ctx}"
        );
        let in_table: i64 = db
            .client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(in_table as u64, report.rows_loaded, "{ctx}");
    }
}

/// A chunk whose isolation stops midway (`--max-rejects` exceeded while
/// its ranges are committed one by one) counts in the load's bytes only
/// the lines it settled (committed or rejected), not the whole chunk.
#[tokio::test]
async fn bytes_of_a_chunk_stopped_midway_are_those_it_settled() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE parent (id int PRIMARY KEY);
             INSERT INTO parent SELECT generate_series(1, 50);
             CREATE TABLE halfway (id int, p int REFERENCES parent
               DEFERRABLE INITIALLY DEFERRED);",
        )
        .await
        .unwrap();
    // A missing parent every 30th row: the pass in one transaction fails
    // at COMMIT, and the one range by range stops at the 5th.
    let lines: Vec<String> = (1..=300)
        .map(|id| match id % 30 {
            0 => format!("{id},999\n"),
            _ => format!("{id},{}\n", 1 + id % 50),
        })
        .collect();
    let data = lines.concat();
    let file = db.file(data.as_bytes(), Compress::None);
    let dir = tempfile::tempdir().unwrap();
    let report = load_max_rejects(&db, &file, "halfway", dir.path(), 4).await;
    let err = report.failure.as_ref().expect("must stop");
    assert_eq!(err.kind(), pgtide::ErrorKind::RejectLimit);
    let settled: u64 = report
        .committed
        .iter()
        .flat_map(|r| r.first..=r.last)
        .map(|line| lines[line as usize - 1].len() as u64)
        .sum();
    assert!(report.rows_loaded > 0 && settled < data.len() as u64);
    assert_eq!(report.bytes, settled, "{:?}", report.committed);
}

/// A chunk whose bad rows go over `--max-rejects` is rolled back whole,
/// on every server version (`ON_ERROR ignore`, which would commit its
/// good rows first, is not used with `--max-rejects`): nothing of it is
/// loaded, and what is reported matches the table.
#[tokio::test]
async fn rows_committed_before_a_reject_limit_are_reported_with_their_lines() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE soft_stop (id int, n int)")
        .await
        .unwrap();
    let lines: Vec<String> = (1..=300)
        .map(|id| match id % 30 {
            0 => format!("{id},x\n"),
            _ => format!("{id},{id}\n"),
        })
        .collect();
    let file = db.file(lines.concat().as_bytes(), Compress::None);
    let dir = tempfile::tempdir().unwrap();
    let report = load_max_rejects(&db, &file, "soft_stop", dir.path(), 4).await;
    let err = report.failure.as_ref().expect("must stop");
    assert_eq!(err.kind(), pgtide::ErrorKind::RejectLimit);
    let in_table: i64 = db
        .client
        .query_one("SELECT count(*) FROM soft_stop", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(report.rows_loaded, in_table as u64);
    assert_eq!(report.rows_loaded, 0);
    let settled: Vec<u64> = report
        .committed
        .iter()
        .flat_map(|r| r.first..=r.last)
        .collect();
    assert_eq!(
        settled.len() as u64,
        report.rows_loaded + report.rows_rejected
    );
    assert!(
        settled.iter().all(|&l| l % 30 != 0),
        "{:?}",
        report.committed
    );
    let bytes: u64 = settled
        .iter()
        .map(|&l| lines[l as usize - 1].len() as u64)
        .sum();
    assert_eq!(report.bytes, bytes);
}

/// Loads CSV `file` into `table` with `--rejects` (in `dir`) and
/// `--max-rejects max`.
async fn load_max_rejects(
    db: &Db,
    file: &std::path::Path,
    table: &str,
    dir: &std::path::Path,
    max: u64,
) -> load::Report {
    let mut o = LoadOptions::new(
        vec![file.to_string_lossy().into_owned()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.rejects = Some(dir.join("r.csv"));
    o.max_rejects = Some(max);
    load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .expect("load starts")
}
