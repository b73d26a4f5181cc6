//! The COPY OUT path on the raw socket (`pgtide::copyout`) against a real
//! throwaway server: byte for byte what psql `\copy` writes on a narrow
//! table of many rows and on rows larger than a socket read and than an
//! export piece, whatever the buffer sizes; an error in the middle of the
//! COPY is the server's error and no output; the connection is given back
//! in step after a COPY (even after a request that left its ReadyForQuery
//! unread), and closed when a COPY is left half read.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` or the default binaries.

mod support;

use std::path::Path;
use std::sync::Arc;

use bytes::BytesMut;
use pgtide::copyopts::CopyFormat;
use pgtide::copyout::{CopyOut, READ_BYTES};
use pgtide::export::receive::PIECE_BYTES;
use pgtide::export::{self, ExportOptions, What};
use pgtide::progress::Progress;
use pgtide::ErrorKind;
use support::Db;

/// psql `\copy (query) TO 'path' WITH (options)`'s bytes.
fn psql_copy(db: &Db, query: &str, dir: &Path, options: &str) -> Vec<u8> {
    let path = dir.join("psql.out");
    let cmd = format!("\\copy ({query}) TO '{}' WITH ({options})", path.display());
    let out = db
        .cluster
        .psql()
        .args(["-X", "-q", "-c", &cmd])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&path).unwrap()
}

/// `pgtide export --query` with `workers` (1 for a query) to a file: its
/// bytes, or the error.
async fn export_query(
    db: &Db,
    query: &str,
    format: CopyFormat,
    dir: &Path,
    progress: Arc<Progress>,
) -> pgtide::Result<Vec<u8>> {
    let path = dir.join("ours.out");
    let opts = ExportOptions::new(
        What::Query(query.into()),
        path.display().to_string(),
        format,
    );
    let report = export::run(&db.target, &opts, progress).await?;
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(report.bytes, bytes.len() as u64);
    Ok(bytes)
}

/// Rows of 2 to 8 bytes and a few of 300 KB to 700 KB: wider than one
/// socket read and than one export piece, between narrow ones.
const MIXED: &str = "SELECT g, CASE WHEN g % 25000 = 7 THEN repeat(chr(65 + g % 26), \
                     300000 + g % 400000) ELSE '' END AS pad FROM generate_series(1, 200000) g";

#[tokio::test]
async fn narrow_and_huge_rows_are_byte_identical_to_psql_copy() {
    const { assert!(READ_BYTES < 300_000 && PIECE_BYTES < 300_000) };
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE narrow (i int); \
             INSERT INTO narrow SELECT g FROM generate_series(1, 300000) g",
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for query in ["SELECT i FROM narrow", MIXED] {
        for (format, options) in [
            (CopyFormat::Text, "FORMAT text"),
            (CopyFormat::Csv, "FORMAT csv, HEADER true"),
            (CopyFormat::Binary, "FORMAT binary"),
        ] {
            let theirs = psql_copy(&db, query, dir.path(), options);
            let mut opts = ExportOptions::new(What::Query(query.into()), "", format);
            if format == CopyFormat::Csv {
                opts.copy.header = pgtide::copyopts::Header::Skip;
            }
            let path = dir.path().join("ours");
            opts.output = path.display().to_string();
            let report = export::run(&db.target, &opts, Arc::new(Progress::new(1)))
                .await
                .unwrap();
            let ours = std::fs::read(&path).unwrap();
            assert!(
                ours == theirs,
                "{query} {options}: {} bytes vs psql's {}",
                ours.len(),
                theirs.len()
            );
            let rows = if query == MIXED { 200_000 } else { 300_000 };
            assert_eq!(report.rows, rows, "{query} {options}");
        }
    }
    // The table in ranges on 3 connections: the same bytes too.
    let theirs = psql_copy(&db, "SELECT i FROM narrow", dir.path(), "FORMAT text");
    let path = dir.path().join("ranges");
    let mut opts = ExportOptions::new(
        What::Table(pgtide::ident::QualifiedName::parse("narrow").unwrap()),
        path.display().to_string(),
        CopyFormat::Text,
    );
    opts.workers = 3;
    let report = export::run(&db.target, &opts, Arc::new(Progress::new(3)))
        .await
        .unwrap();
    assert_eq!(report.workers, 3);
    assert!(std::fs::read(&path).unwrap() == theirs, "3 workers");
}

#[tokio::test]
async fn copy_out_gives_the_same_bytes_whatever_the_piece_size() {
    let db = Db::start().await;
    let dir = tempfile::tempdir().unwrap();
    let query = MIXED.replace("200000", "60000");
    let theirs = psql_copy(&db, &query, dir.path(), "FORMAT text");
    let (client, _notices, wire) = db.target.connect_wire().await.unwrap();
    for want in [1, 7, 4096, 100_000, 1 << 20] {
        let sql = format!("COPY ({query}) TO STDOUT");
        let mut copy = CopyOut::start(&client, &wire, &sql).await.unwrap();
        let (mut piece, mut ours) = (BytesMut::new(), Vec::new());
        while copy.fill(&mut piece, want).await.unwrap() {
            assert_eq!(piece.len(), want, "a piece of {want} bytes");
            ours.extend_from_slice(&piece.split());
        }
        ours.extend_from_slice(&piece);
        assert!(ours == theirs, "pieces of {want}: {} bytes", ours.len());
        assert_eq!(copy.rows(), Some(60_000));
        assert_eq!(copy.messages(), 60_000);
        // Given back in step: the client works, and another COPY too.
        drop(copy);
        let row = client.query_one("SELECT 41 + 1", &[]).await.unwrap();
        assert_eq!(row.get::<_, i32>(0), 42);
    }
}

#[tokio::test]
async fn requests_the_client_made_before_the_copy_are_answered_to_the_client() {
    let db = Db::start().await;
    let (client, _notices, wire) = db.target.connect_wire().await.unwrap();
    let round = async {
        for i in 0..100 {
            // `prepare` returns before its ReadyForQuery is read, and the
            // statement dropped here sends Close + Sync on its own: their
            // answers must not reach the COPY (nor the COPY's the client).
            client.prepare("SELECT 1").await.unwrap();
            // The connection task gets to send the Close (and may or may
            // not read its answer) before the COPY takes the stream.
            match i % 3 {
                0 => {}
                1 => tokio::task::yield_now().await,
                _ => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
            }
            let mut copy = CopyOut::start(&client, &wire, "COPY (SELECT 1, 2) TO STDOUT")
                .await
                .unwrap();
            let mut out = BytesMut::new();
            while copy.fill(&mut out, 1 << 16).await.unwrap() {}
            assert_eq!(&out[..], b"1\t2\n", "round {i}");
            drop(copy);
            let row = client.query_one("SELECT $1::int", &[&i]).await.unwrap();
            assert_eq!(row.get::<_, i32>(0), i, "round {i}");
        }
    };
    // Out of step, the client would wait for an answer read by the COPY.
    tokio::time::timeout(std::time::Duration::from_secs(60), round)
        .await
        .expect("the client hung: a request's answer was read by the COPY");
}

/// Fails at row 50,000, after the server sent the rows before it (`1/0`
/// would fail at planning, before the COPY starts).
const DIVIDES_BY_ZERO: &str =
    "SELECT CASE WHEN g = 50000 THEN 1/(g-g) ELSE g END FROM generate_series(1,100000) g";

#[tokio::test]
async fn an_error_in_the_middle_of_copy_out_is_the_servers_and_leaves_no_file() {
    let db = Db::start().await;
    let dir = tempfile::tempdir().unwrap();
    for format in [CopyFormat::Text, CopyFormat::Csv, CopyFormat::Binary] {
        let progress = Arc::new(Progress::new(1));
        let e = export_query(&db, DIVIDES_BY_ZERO, format, dir.path(), progress.clone())
            .await
            .expect_err("division by zero at row 50000 must fail the export");
        let before = Progress::get(&progress.rows_read);
        assert!(
            before >= 10_000,
            "{format:?}: {before} rows before the error"
        );
        assert_eq!(e.sqlstate(), Some("22012"), "{format:?}: {e:?}");
        assert_eq!(e.kind(), ErrorKind::Server, "{e:?}");
        assert!(e.message().contains("division by zero"), "{e:?}");
        assert!(e.hint().unwrap().contains("nothing was written"), "{e:?}");
        let out = dir.path().join("ours.out");
        assert!(!out.exists(), "{format:?}: a partial export was kept");
        let left = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .find(|name| name.ends_with(".partial"));
        assert_eq!(left, None, "{format:?}: a partial file was left");
    }
    // On the raw path itself: rows before the error came, then the error;
    // the connection stays in step for the next statement.
    let (client, _notices, wire) = db.target.connect_wire().await.unwrap();
    let sql = format!("COPY ({DIVIDES_BY_ZERO}) TO STDOUT");
    let mut copy = CopyOut::start(&client, &wire, &sql).await.unwrap();
    let mut out = BytesMut::new();
    let e = loop {
        out.clear();
        match copy.fill(&mut out, 8192).await {
            Ok(true) => continue,
            Ok(false) => panic!("the COPY ended well after {} rows", copy.messages()),
            Err(e) => break e,
        }
    };
    assert_eq!(e.sqlstate(), Some("22012"), "{e:?}");
    let rows = copy.messages();
    assert!(
        (10_000..50_000).contains(&rows),
        "{rows} rows before the error"
    );
    assert!(copy.rows().is_none());
    drop(copy);
    let row = client
        .query_one("SELECT 'still in step'", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, &str>(0), "still in step");
    // An error before any row (a missing table): the same.
    let e = CopyOut::start(&client, &wire, "COPY (SELECT * FROM nope) TO STDOUT")
        .await
        .err()
        .expect("a missing table fails the COPY");
    assert_eq!(e.sqlstate(), Some("42P01"), "{e:?}");
    client.simple_query("SELECT 1").await.unwrap();
}

#[tokio::test]
async fn a_copy_left_half_read_closes_its_connection() {
    let db = Db::start().await;
    let (client, _notices, wire) = db.target.connect_wire().await.unwrap();
    let sql = "COPY (SELECT g FROM generate_series(1, 1000000) g) TO STDOUT";
    let mut copy = CopyOut::start(&client, &wire, sql).await.unwrap();
    let mut out = BytesMut::new();
    assert!(copy.fill(&mut out, 1000).await.unwrap());
    drop(copy);
    // The rest of the rows must never be read as another answer.
    let e = client
        .simple_query("SELECT 1")
        .await
        .expect_err("the connection was closed");
    assert!(e.is_closed(), "{e:?}");
    // A terminated session: the server's FATAL, a lost connection.
    let (client, _notices, wire) = db.target.connect_wire().await.unwrap();
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let mut copy = CopyOut::start(&client, &wire, sql).await.unwrap();
    assert!(copy.fill(&mut out, 1000).await.unwrap());
    db.client
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let e = loop {
        out.clear();
        match copy.fill(&mut out, 1 << 16).await {
            Ok(true) => continue,
            Ok(false) => panic!("a terminated COPY ended well"),
            Err(e) => break e,
        }
    };
    assert_eq!(e.kind(), ErrorKind::ConnectionLost, "{e:?}");
}
