//! Chunks commit without waiting for their WAL flush (`load/lazy.rs`)
//! and are counted only once a later flush proves them on disk. A crash
//! right after such a `COMMIT` returned takes the chunk back (its commit
//! record was still in the server's WAL buffers): the worker, which held
//! the chunk, must learn that from the server and send it again, so that
//! the load ends with every row once.
//!
//! The input is a named pipe, so that the load waits between two chunks
//! for as long as the test likes: the server is restarted (`-m
//! immediate`) while the last chunk sent is held, with the WAL writer
//! asleep for 10 s ([`keep_wal_in_buffers`]).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::crash::keep_wal_in_buffers;
use support::pipe::Pipe;
use support::Db;

const ROWS: usize = 6000;

/// The rows of the input, as CSV: `id,row id`.
fn rows(range: std::ops::Range<usize>) -> Vec<u8> {
    range
        .flat_map(|i| format!("{i},row {i}\n").into_bytes())
        .collect()
}

/// Rows in `table` now, asked on a new connection.
async fn count(db: &Db, table: &str) -> i64 {
    let c = db.target.connect().await.unwrap();
    let sql = format!("SELECT count(*) FROM {table}");
    c.query_one(&sql, &[]).await.unwrap().get(0)
}

/// Waits until `table` holds rows and their number stopped changing: the
/// load committed every whole chunk of what the pipe gave it so far.
async fn settled_count(db: &Db, table: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut last, mut same) = (-1, 0);
    while same < 6 {
        assert!(Instant::now() < deadline, "the load committed nothing");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let n = count(db, table).await;
        same = if n == last && n > 0 { same + 1 } else { 0 };
        last = n;
    }
    last
}

/// One try: the first half of the input through the pipe, a crash once
/// its chunks committed, then the rest. Returns the rows the crash took
/// back (0 when the WAL writer had already written them). With `dup`, the
/// table has a primary key, the load has `--rejects`, and the rest starts
/// with the first half's last key again.
async fn crash_between_chunks(db: &Db, table: &str, lazy_commit: bool, dup: bool) -> i64 {
    let key = if dup { " PRIMARY KEY" } else { "" };
    // The restart of the try before ended `db.client`'s session.
    let admin = db.target.connect().await.unwrap();
    admin
        .batch_execute(&format!("CREATE TABLE {table} (id int{key}, v text)"))
        .await
        .unwrap();
    let pipe = Pipe::new();
    let mut rest = rows(ROWS / 2..ROWS);
    if dup {
        let again = format!("{},again\n", ROWS / 2 - 1);
        rest.splice(0..0, again.into_bytes());
    }
    let (go, writer) = pipe.write(vec![rows(0..ROWS / 2), rest]);
    let mut o = LoadOptions::new(
        vec![pipe.name()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.chunk_bytes = 16 * 1024;
    o.lazy_commit = lazy_commit;
    let rejects = tempfile::tempdir().unwrap();
    if dup {
        o.rejects = Some(rejects.path().join("r.csv"));
    }
    let load = {
        let target = db.target.clone();
        tokio::spawn(async move { load::run(&target, &o, Arc::new(Progress::new(1))).await })
    };
    let before = settled_count(db, table).await;
    let cluster = &db.cluster;
    tokio::task::block_in_place(|| cluster.restart("immediate")).expect("restart");
    let after = count(db, table).await;
    go.send(()).unwrap();
    writer
        .join()
        .unwrap()
        .expect("the load read the whole pipe");
    let report = load.await.unwrap().expect("load starts");
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_loaded, ROWS as u64, "every row counted once");
    assert_eq!(report.rows_rejected, u64::from(dup), "the second of a key");
    let c = db.target.connect().await.unwrap();
    let sql = format!("SELECT count(*), count(DISTINCT id) FROM {table}");
    let row = c.query_one(&sql, &[]).await.unwrap();
    let (n, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!((n, distinct), (ROWS as i64, ROWS as i64), "every row once");
    if dup {
        // Of a key twice in the file the first is kept, as one COPY would.
        let sql = format!("SELECT v FROM {table} WHERE id = {}", ROWS / 2 - 1);
        let v: String = c.query_one(&sql, &[]).await.unwrap().get(0);
        assert_eq!(v, format!("row {}", ROWS / 2 - 1));
    }
    before - after
}

/// The crash takes back the chunk held (its rows are missing right after
/// the restart), and the load still ends with every row once. Tried until
/// the crash did take rows back (the WAL writer may have written them
/// first); before the worker held lazily committed chunks, those rows
/// were counted loaded and missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_a_crash_took_back_after_its_lazy_commit_is_sent_again() {
    let db = Db::start().await;
    keep_wal_in_buffers(&db.client).await;
    for attempt in 0..4 {
        if crash_between_chunks(&db, &format!("lazy{attempt}"), true, false).await > 0 {
            return;
        }
    }
    panic!("no crash took a lazily committed chunk back");
}

/// The chunk a crash took back is sent again before the chunk after it:
/// of a key in both (the file has it twice), the first is kept and the
/// later one rejected (`--rejects`), as one COPY would have it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_sent_again_goes_before_the_chunks_after_it() {
    let db = Db::start().await;
    keep_wal_in_buffers(&db.client).await;
    for attempt in 0..4 {
        if crash_between_chunks(&db, &format!("dup{attempt}"), true, true).await > 0 {
            return;
        }
    }
    panic!("no crash took a lazily committed chunk back");
}

/// Without lazy commits every chunk counted is on disk: the same crash
/// takes nothing back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_lazy_commits_the_crash_takes_nothing_back() {
    let db = Db::start().await;
    keep_wal_in_buffers(&db.client).await;
    assert_eq!(crash_between_chunks(&db, "eager", false, false).await, 0);
}
