//! Fault tests (issue 8 E): the server restarts, fast or immediate, while
//! 4 workers load with `--rejects`. The load must finish with rows read =
//! loaded + rejected, exactly the bad rows in the reject file, and the
//! table equal to a clean load of the good rows (counts and `EXCEPT ALL`
//! both ways).
//!
//! The bad rows sit in the last chunk of the file and the restart comes
//! once a tenth of the rows is loaded, so it hits chunks being loaded
//! normally, and the bad rows are isolated afterwards on new connections.
//! A restart during the isolation of bad rows (issue 8 B9) is tested with
//! the isolation code.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::Db;

const ROWS: u64 = 400_000;
/// Bad rows, all in the last thousand rows.
const BAD: u64 = 6;
const TABLE: &str = "(id int PRIMARY KEY, n int NOT NULL, s varchar(8))";

/// The file, its good lines and its bad lines.
fn data() -> (Vec<u8>, Vec<String>, BTreeSet<String>) {
    let mut good = Vec::new();
    let mut bad = BTreeSet::new();
    let mut file = Vec::new();
    for i in 0..ROWS {
        // In the last chunk only: bad int, NULL in NOT NULL, too long
        // for varchar(8).
        let edge = i >= ROWS - 1000;
        let line = match i % 500 {
            7 if edge => format!("{i},x,bad int"),
            11 if edge => format!("{i},,null n"),
            13 if edge => format!("{i},1,much too long"),
            _ => format!("{i},{},row {}", i % 997, i % 10_000),
        };
        file.extend_from_slice(line.as_bytes());
        file.push(b'\n');
        if line.contains(",x,") || line.contains(",,") || line.contains("too long") {
            bad.insert(line);
        } else {
            good.push(line);
        }
    }
    (file, good, bad)
}

async fn restart_during_load(mode: &'static str) {
    let db = Db::start().await;
    let (file, good, bad) = data();
    assert_eq!(bad.len() as u64, BAD, "the data must hold bad rows");
    db.client
        .batch_execute(&format!(
            "CREATE TABLE got {TABLE}; CREATE TABLE want {TABLE}"
        ))
        .await
        .unwrap();
    // The clean load: the good rows only, by server-side COPY.
    let mut clean = good.join("\n").into_bytes();
    clean.push(b'\n');
    let clean = db.file(&clean, support::Compress::None);
    db.client
        .batch_execute(&format!(
            "COPY want FROM '{}' WITH (FORMAT csv)",
            clean.display()
        ))
        .await
        .unwrap();

    let input = db.file(&file, support::Compress::None);
    let rejects = input.with_extension("rejects");
    let mut o = LoadOptions::new(
        vec![input.to_str().unwrap().into()],
        QualifiedName::parse("got").unwrap(),
        CopyFormat::Csv,
    );
    o.workers = 4;
    o.chunk_bytes = 128 * 1024;
    o.rejects = Some(rejects.clone());
    let progress = Arc::new(Progress::new(4));
    let load = {
        let (target, progress) = (db.target.clone(), progress.clone());
        tokio::spawn(async move { load::run(&target, &o, progress).await })
    };
    // Once a tenth of the rows is in, restart the server under the load.
    let mut restarted = false;
    for _ in 0..5000 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        if load.is_finished() {
            break;
        }
        if progress.rows_loaded.load(Ordering::Relaxed) >= ROWS / 10 {
            let cluster = &db.cluster;
            tokio::task::block_in_place(|| cluster.restart(mode)).expect("restart the server");
            restarted = true;
            break;
        }
    }
    let report = load.await.unwrap().expect("load starts");
    assert!(restarted, "the server must restart while the load runs");
    assert!(report.failure.is_none(), "{mode}: {:?}", report.failure);
    assert!(
        progress.reconnects.load(Ordering::Relaxed) >= 1,
        "{mode}: the restart must have cut connections"
    );

    // Every row once: loaded or rejected, never both, never lost.
    assert_eq!(report.rows_read, ROWS, "{mode}: rows read");
    assert_eq!(
        report.rows_loaded + report.rows_rejected,
        report.rows_read,
        "{mode}: read = loaded + rejected"
    );
    assert_eq!(report.rows_rejected, bad.len() as u64, "{mode}: rejected");
    let rejected: BTreeSet<String> = std::fs::read_to_string(&rejects)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(rejected, bad, "{mode}: the reject file");

    // The table equals the clean load (a fresh session: ours was ended).
    let client = db.target.connect().await.expect("reconnect after restart");
    let count = |t: &'static str| {
        let client = &client;
        async move {
            let row = client
                .query_one(&format!("SELECT count(*) FROM {t}"), &[])
                .await
                .unwrap();
            row.get::<_, i64>(0)
        }
    };
    let (n_got, n_want) = (count("got").await, count("want").await);
    assert_eq!(n_got, n_want, "{mode}: row counts");
    assert_eq!(report.rows_loaded as i64, n_want, "{mode}: rows loaded");
    support::assert_same_rows(&client, "got", "want", mode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_restart_during_load_loses_nothing() {
    restart_during_load("fast").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_restart_during_load_loses_nothing() {
    restart_during_load("immediate").await;
}
