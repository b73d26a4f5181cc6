//! Transient errors inside a chunk (issue 8 B6): deadlocks between
//! workers and lock timeouts are retried with backoff, never stop a
//! `--rejects` load and never put a good row in the reject file; only
//! row errors reject rows. A COPY refused by a lock timeout before copy
//! mode also leaves the connection out of step (B7), so it must be
//! replaced, not reused.

mod support;

use std::sync::Arc;
use std::time::Duration;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method, Report};
use pgtide::progress::Progress;
use support::Db;

async fn load(db: &Db, table: &str, data: &[u8], workers: usize, chunk: usize) -> Report {
    load_with(db, table, data, chunk, Arc::new(Progress::new(workers))).await
}

async fn load_with(
    db: &Db,
    table: &str,
    data: &[u8],
    chunk: usize,
    progress: Arc<Progress>,
) -> Report {
    let workers = progress.worker_rows.len();
    let input = db.file(data, support::Compress::None);
    let mut o = LoadOptions::new(
        vec![input.to_str().unwrap().into()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.workers = workers;
    o.chunk_bytes = chunk;
    o.method = Method::Copy;
    o.rejects = Some(input.with_extension("rejects"));
    load::run(&db.target, &o, progress)
        .await
        .expect("load starts")
}

async fn deadlocks(db: &Db) -> i64 {
    db.client
        .query_one(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Keys ascending, then the same keys descending, two workers: the two
/// halves insert the same keys in opposite orders at the same time, and
/// the server breaks the deadlock by failing one of them (40P01). That
/// chunk must be retried: its rows then clash with the committed ones
/// (23505) and are rejected, one by one; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlocks_between_workers_are_retried() {
    let db = Db::start().await;
    let n = 3000u32;
    let mut half = String::new();
    for k in 1..=n {
        half.push_str(&format!("{k},{k}\n"));
    }
    let mut data = half.clone().into_bytes();
    for k in (1..=n).rev() {
        data.extend_from_slice(format!("{k},{k}\n").as_bytes());
    }
    let mut seen_deadlock = false;
    // Runs until one deadlocks: on a busy machine the two workers may not
    // overlap in a given run (each run is small).
    for run in 0..16 {
        let table = format!("d{run}");
        db.client
            .batch_execute(&format!("CREATE TABLE {table} (id int PRIMARY KEY, v int)"))
            .await
            .unwrap();
        let before = deadlocks(&db).await;
        let report = load(&db, &table, &data, 2, half.len()).await;
        assert!(report.failure.is_none(), "run {run}: {:?}", report.failure);
        assert_eq!(report.rows_read, 2 * u64::from(n));
        assert_eq!(
            (report.rows_loaded, report.rows_rejected),
            (u64::from(n), u64::from(n)),
            "run {run}"
        );
        let (count, distinct): (i64, i64) = {
            let r = db
                .client
                .query_one(
                    &format!("SELECT count(*), count(DISTINCT id) FROM {table}"),
                    &[],
                )
                .await
                .unwrap();
            (r.get(0), r.get(1))
        };
        assert_eq!((count, distinct), (i64::from(n), i64::from(n)));
        // Statistics reach pg_stat_database with a delay.
        tokio::time::sleep(Duration::from_millis(700)).await;
        if deadlocks(&db).await > before {
            seen_deadlock = true;
            break;
        }
    }
    assert!(seen_deadlock, "no run deadlocked: the test proves nothing");
}

/// Another session holds the table locked for a while; pgtide's sessions
/// run with `lock_timeout`, so COPY fails with 55P03 before copy mode.
/// The chunks must wait and go in whole: nothing rejected, nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeouts_are_retried_and_reject_nothing() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE l (id int PRIMARY KEY, v text);
             ALTER DATABASE postgres SET lock_timeout = '100ms'",
        )
        .await
        .unwrap();
    let mut data = String::new();
    for k in 0..20_000 {
        data.push_str(&format!("{k},value {k}\n"));
    }
    let holder = db.target.connect().await.unwrap();
    holder
        .batch_execute("BEGIN; LOCK TABLE l IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        holder.batch_execute("COMMIT").await.unwrap();
    });
    let report = load(&db, "l", data.as_bytes(), 3, 32 * 1024).await;
    release.await.unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(
        (report.rows_loaded, report.rows_rejected),
        (20_000, 0),
        "lock timeouts are not bad rows"
    );
    let count: i64 = db
        .client
        .query_one("SELECT count(*) FROM l", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 20_000);
}

/// Of two rows with one key in neighbouring chunks, the later one is
/// rejected whatever the worker count, as one COPY would decide: the
/// later chunk, whose worker inserts the key first, waits for its turn to
/// commit, and gives way when it holds up the earlier chunk
/// (`load/turns.rs`). Without turns the earlier row lost most races.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_later_of_two_duplicate_keys_is_rejected_whatever_the_workers() {
    let db = Db::start().await;
    // Fixed-width rows, so that chunk k spans rows [k*per, (k+1)*per).
    let chunk = 16 * 1024;
    let row = |id: u32, tag: &str| format!("{id:08},{tag:<5}\n");
    let per = (chunk / row(0, "x").len()) as u32 + 1;
    let chunks = 12;
    let mut data = String::new();
    for i in 0..per * chunks {
        let (k, at) = (i / per, i % per);
        // The last rows of each chunk but the last repeat keys that the
        // next chunk's first rows hold.
        if k + 1 < chunks && at >= per - 3 {
            data.push_str(&row(1_000_000 + k * 10 + (at + 3 - per), "early"));
        } else if k > 0 && at < 3 {
            data.push_str(&row(1_000_000 + (k - 1) * 10 + at, "late"));
        } else {
            data.push_str(&row(i, "plain"));
        }
    }
    let mut gave_way = false;
    for (run, workers) in [2, 3, 2, 3].into_iter().enumerate() {
        let table = format!("dup{run}");
        db.client
            .batch_execute(&format!(
                "CREATE TABLE {table} (id int PRIMARY KEY, tag text)"
            ))
            .await
            .unwrap();
        let progress = Arc::new(Progress::new(workers));
        let report = load_with(&db, &table, data.as_bytes(), chunk, progress.clone()).await;
        // A chunk that gave way came back on a new connection.
        gave_way |= progress
            .reconnects
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0;
        assert!(report.failure.is_none(), "{:?}", report.failure);
        let pairs = u64::from(3 * (chunks - 1));
        assert_eq!(report.rows_rejected, pairs, "run {run}");
        let early: i64 = db
            .client
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE tag = 'early'"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            early as u64, pairs,
            "run {run}, {workers} workers: every early row loaded"
        );
    }
    assert!(
        gave_way,
        "no chunk gave way: the test proves less than it says"
    );
}
