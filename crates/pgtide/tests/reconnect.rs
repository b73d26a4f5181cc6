//! A worker whose connection is killed mid-load reconnects and resends
//! only what cannot have been committed: every row arrives exactly once
//! (the primary key would reject a second copy).

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::Db;

#[tokio::test]
async fn killed_connections_are_reconnected_without_loading_twice() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE k (id int PRIMARY KEY, v text)")
        .await
        .unwrap();
    let rows = 300_000;
    let mut data = String::new();
    for i in 0..rows {
        data.push_str(&format!("{i},row number {i}\n"));
    }
    let file = db.file(data.as_bytes(), support::Compress::None);
    let mut o = LoadOptions::new(
        vec![file.to_str().unwrap().into()],
        QualifiedName::parse("k").unwrap(),
        CopyFormat::Csv,
    );
    o.workers = 2;
    o.chunk_bytes = 64 * 1024;
    let progress = Arc::new(Progress::new(2));
    let load = {
        let (target, progress) = (db.target.clone(), progress.clone());
        tokio::spawn(async move { load::run(&target, &o, progress).await })
    };
    // Once rows flow, kill every pgtide session but ours, twice.
    let mut killed = 0;
    for _ in 0..400 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if progress.rows_loaded.load(Ordering::Relaxed) > 0 {
            let n: i64 = db
                .client
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name = 'pgtide' AND pid <> pg_backend_pid() \
                     AND backend_type = 'client backend'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            killed += n;
            if killed >= 2 {
                break;
            }
        }
    }
    let report = load.await.unwrap().expect("load starts");
    assert!(killed >= 1, "the test must kill a worker's connection");
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert!(progress.reconnects.load(Ordering::Relaxed) >= 1);
    let (n, distinct): (i64, i64) = {
        let r = db
            .client
            .query_one("SELECT count(*), count(DISTINCT id) FROM k", &[])
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((n, distinct), (rows, rows));
    assert_eq!(report.rows_loaded, rows as u64);
}
