//! `--single-transaction` when the answer to its one `COMMIT` is lost
//! with the connection (issue 9 part 3): a proxy between pgtide and the
//! server cuts the connection right after passing the `COMMIT` on (the
//! server commits, the answer never arrives) or instead of passing it on
//! (the server sees the client gone and aborts), or goes silent (the
//! session lingers, idle in its transaction). pgtide must ask the server
//! on a new connection (`txid_status`, ending a lingering session first)
//! and report what happened: success with the counts, or a clear "nothing
//! was loaded"; a per-chunk load sends the chunk again.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pgtide::conn::Target;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::Db;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Where the proxy cuts the connection that sends the first `COMMIT`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// The server gets the `COMMIT` (and commits); its answer is dropped.
    AfterCommit,
    /// The server never gets it: it sees the client gone and aborts.
    BeforeCommit,
    /// The network goes silent: the server never gets the `COMMIT` nor
    /// sees the client leave (its socket stays open), so the session
    /// lingers, idle in its transaction.
    Silent,
}

/// A proxy to the server on 127.0.0.1:`server`; returns its port and
/// whether it has cut. Only the first `COMMIT` is cut; the connections
/// after it (the one that asks what became of the transaction) pass.
async fn proxy(server: u16, cut: Cut) -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let fired = Arc::new(AtomicBool::new(false));
    let state = fired.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(upstream) = TcpStream::connect(("127.0.0.1", server)).await else {
                continue;
            };
            tokio::spawn(pipe(client, upstream, cut, state.clone()));
        }
    });
    (port, fired)
}

/// Passes bytes both ways; cuts both ends at the first simple query
/// that ends with `COMMIT` (its text ends `COMMIT\0` on the wire).
async fn pipe(client: TcpStream, server: TcpStream, cut: Cut, fired: Arc<AtomicBool>) {
    const NEEDLE: &[u8] = b"COMMIT\0";
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let down = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = match from_client.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let data = &buf[..n];
        let mut window = std::mem::take(&mut tail);
        window.extend_from_slice(data);
        let found = window.windows(NEEDLE.len()).position(|w| w == NEEDLE);
        if let Some(at) = found.filter(|_| !fired.swap(true, Ordering::SeqCst)) {
            // The needle ends in this read (it was not in the last one).
            let end = at + NEEDLE.len() + data.len() - window.len();
            if cut == Cut::AfterCommit {
                let _ = to_server.write_all(&data[..end]).await;
                let _ = to_server.flush().await;
            }
            down.abort();
            if cut == Cut::Silent {
                // Dropping the write half would tell the server.
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(120)).await;
                    drop(to_server);
                });
            }
            return;
        }
        if to_server.write_all(data).await.is_err() {
            break;
        }
        tail = window[window.len().saturating_sub(NEEDLE.len() - 1)..].to_vec();
    }
    down.abort();
}

/// The database's target, through a proxy that cuts as `cut` says.
async fn through_proxy(db: &Db, cut: Cut) -> (Target, Arc<AtomicBool>) {
    let (port, fired) = proxy(db.cluster.port(), cut).await;
    let conninfo = db.cluster.conninfo().replace(
        &format!("port={} ", db.cluster.port()),
        &format!("port={port} "),
    );
    (Target::parse(&conninfo).unwrap(), fired)
}

fn rows(n: usize) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("{i},v{i}\n"))
        .collect::<String>()
        .into_bytes()
}

fn options(db: &Db, data: &[u8], t: &str) -> LoadOptions {
    let mut o = db.csv_options(data, t);
    o.single_transaction = true;
    o.truncate = true;
    o.chunk_bytes = 4096;
    o
}

async fn count(db: &Db, t: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {t}");
    db.client.query_one(&sql, &[]).await.unwrap().get(0)
}

/// No transaction may finish after a chunk's (autovacuum's ANALYZE
/// would), so that the chunk's stays the newest.
async fn quiet_autovacuum(db: &Db) {
    for sql in [
        "ALTER SYSTEM SET autovacuum = off",
        "SELECT pg_reload_conf()",
    ] {
        db.client.batch_execute(sql).await.unwrap();
    }
}

/// Sessions idle in a transaction (the proxy holds a silent one open).
async fn lingering(db: &Db) -> i64 {
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'";
    db.client.query_one(sql, &[]).await.unwrap().get(0)
}

async fn setup(db: &Db, t: &str) {
    let sql = format!(
        "CREATE TABLE {t} (id int PRIMARY KEY, s text);
         INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 7) g;"
    );
    db.client.batch_execute(&sql).await.unwrap();
}

#[tokio::test]
async fn a_commit_whose_answer_is_lost_but_that_committed_is_a_success() {
    let db = Db::start().await;
    setup(&db, "lc").await;
    let (target, fired) = through_proxy(&db, Cut::AfterCommit).await;
    let o = options(&db, &rows(5000), "lc");
    let progress = Arc::new(Progress::new(1));
    let r = load::run(&target, &o, progress.clone()).await.unwrap();
    assert!(fired.load(Ordering::SeqCst), "the proxy cut the COMMIT");
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(progress.reconnects.load(Ordering::Relaxed), 1);
    assert_eq!((r.rows_read, r.rows_loaded), (5000, 5000));
    assert!(r.freeze.used, "{:?}", r.freeze);
    assert_eq!(count(&db, "lc").await, 5000, "truncated, then every row");
}

#[tokio::test]
async fn a_commit_that_never_reached_the_server_says_nothing_was_loaded() {
    let db = Db::start().await;
    setup(&db, "la").await;
    let (target, fired) = through_proxy(&db, Cut::BeforeCommit).await;
    let o = options(&db, &rows(5000), "la");
    let r = load::run(&target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(fired.load(Ordering::SeqCst), "the proxy cut the COMMIT");
    let e = r.failure.expect("the transaction was aborted");
    assert!(
        e.message().contains("did not commit: nothing was loaded"),
        "{e}"
    );
    assert!(e.hint().unwrap().contains("nothing was committed"), "{e}");
    assert_eq!(r.rows_loaded, 0);
    assert!(r.committed.is_empty(), "{:?}", r.committed);
    assert_eq!(count(&db, "la").await, 7, "the table as it was");
}

#[tokio::test]
async fn with_rejects_a_lost_commit_answer_is_settled_too() {
    let db = Db::start().await;
    setup(&db, "lr").await;
    let (target, fired) = through_proxy(&db, Cut::AfterCommit).await;
    let mut data = rows(3000);
    data.extend_from_slice(b"x,bad\n");
    let mut o = options(&db, &data, "lr");
    let rejects = std::path::Path::new(&o.inputs[0]).with_extension("rejects");
    o.rejects = Some(rejects.clone());
    let r = load::run(&target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(fired.load(Ordering::SeqCst), "the proxy cut the COMMIT");
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_loaded, r.rows_rejected), (3000, 1));
    assert_eq!(std::fs::read_to_string(&rejects).unwrap(), "x,bad\n");
    assert_eq!(count(&db, "lr").await, 3000);
}

#[tokio::test]
async fn a_session_left_behind_by_a_silent_network_is_ended_and_settled() {
    let db = Db::start().await;
    setup(&db, "ls").await;
    let (target, fired) = through_proxy(&db, Cut::Silent).await;
    let o = options(&db, &rows(5000), "ls");
    let r = load::run(&target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(fired.load(Ordering::SeqCst), "the proxy cut the COMMIT");
    assert_eq!(lingering(&db).await, 0, "the old session was ended");
    let e = r.failure.expect("the transaction was aborted");
    assert!(
        e.message().contains("did not commit: nothing was loaded"),
        "{e}"
    );
    assert_eq!(count(&db, "ls").await, 7, "the table as it was");
}

#[tokio::test]
async fn a_chunk_whose_commit_went_silent_is_sent_again() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE lp (id int, s text)")
        .await
        .unwrap();
    quiet_autovacuum(&db).await;
    let (target, fired) = through_proxy(&db, Cut::Silent).await;
    let mut o = options(&db, &rows(5000), "lp");
    o.single_transaction = false;
    o.truncate = false;
    let r = load::run(&target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(fired.load(Ordering::SeqCst), "the proxy cut the COMMIT");
    assert_eq!(lingering(&db).await, 0, "the old session was ended");
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_loaded, 5000);
    assert_eq!(count(&db, "lp").await, 5000, "every row once");
}

/// The connection breaks right after a chunk's `COMMIT` reached the
/// server, which is still doing it (a deferred trigger sleeps): asked at
/// once, the transaction is still running, and it is the newest, so no
/// snapshot's `xmax` is past it yet. Taking that for "never handed out"
/// sent the chunk again while the first `COMMIT` went on to commit: the
/// row twice, exit 0. It must be in the table once (the lingering
/// session is ended, its `COMMIT` aborted, the chunk sent again).
#[tokio::test]
async fn a_commit_still_being_done_is_not_taken_for_one_never_sent() {
    let db = Db::start().await;
    let sql = format!(
        "CREATE TABLE ld (id int, s text); {}",
        support::crash::slow_commit_sql("ld")
    );
    db.client.batch_execute(&sql).await.unwrap();
    quiet_autovacuum(&db).await;
    let (target, fired) = through_proxy(&db, Cut::AfterCommit).await;
    let mut o = db.csv_options(b"1,a\n", "ld");
    o.chunk_bytes = 4096;
    let r = load::run(&target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(fired.load(Ordering::SeqCst), "the proxy cut the COMMIT");
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_loaded, 1);
    assert_eq!(count(&db, "ld").await, 1, "the row once");
}
