//! Rows a foreign key refuses, found by one query of the range's key
//! values (`load/references.rs`, `reject/hints.rs`) instead of halving the
//! range until one row fails alone: the same rows loaded and rejected as
//! one COPY per row would give, and each good row inserted about twice
//! (bisection inserted and undid them seven times over).

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method};
use pgtide::progress::Progress;
use support::{Compress, Db};

#[tokio::test]
async fn rows_without_a_referenced_row_are_found_without_bisecting() {
    let db = Db::start().await;
    let rows = 20_000u32;
    let mut file = String::new();
    let mut bad = Vec::new();
    for i in 0..rows {
        // Every 100th row references a parent that does not exist.
        let parent = if i % 100 == 7 { 5_000 + i } else { i % 500 };
        file.push_str(&format!("{i},{parent}\n"));
        if i % 100 == 7 {
            bad.push(format!("{i},{parent}"));
        }
    }
    let path = db.file(file.as_bytes(), Compress::None);
    for (k, method) in [Method::Copy, Method::Values].into_iter().enumerate() {
        let table = format!("child_{k}");
        db.client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS parent (id int PRIMARY KEY);
                 INSERT INTO parent SELECT generate_series(0, 499) ON CONFLICT DO NOTHING;
                 CREATE TABLE {table} (id int PRIMARY KEY, p int REFERENCES parent)"
            ))
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse(&table).unwrap(),
            CopyFormat::Csv,
        );
        o.method = method;
        o.rejects = Some(dir.path().join("r.csv"));
        let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap();
        assert!(r.failure.is_none(), "{method:?}: {:?}", r.failure);
        let rejected = std::fs::read_to_string(dir.path().join("r.csv")).unwrap();
        assert_eq!(rejected.lines().collect::<Vec<_>>(), bad, "{method:?}");
        assert_eq!(r.rows_loaded, u64::from(rows) - bad.len() as u64);
        let loaded =
            support::texts(&db.client, &format!("SELECT count(*)::text FROM {table}")).await;
        assert_eq!(loaded, [r.rows_loaded.to_string()]);
        // The chunk's first attempt, then each range between two bad rows
        // once: about twice the rows loaded (bisection: 7x). `values`
        // finds its rows by sending a failed statement's rows one by one.
        if method != Method::Copy {
            continue;
        }
        let inserted = support::rows_inserted(&db.client, &table, r.rows_loaded).await;
        let waste = inserted as f64 / r.rows_loaded as f64;
        assert!(
            waste < 2.5,
            "{method:?}: the server inserted {waste:.2}x the rows loaded"
        );
    }
}
