//! Isolation in one transaction (savepoint per attempt) must not trust a
//! pass whose COMMIT fails: a DEFERRABLE INITIALLY DEFERRED foreign key is
//! only checked at COMMIT. The pass is rolled back and the chunk isolated
//! range by range; every row ends loaded or rejected with its reason.

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
