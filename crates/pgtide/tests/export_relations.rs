//! What `pgtide export -t` reads of relations other than a plain table:
//! an inheritance parent's own rows (as `COPY parent TO`, byte for byte),
//! a materialized view with several workers (which `LOCK TABLE`
//! refuses), and a table of no columns.

mod support;

use std::sync::Arc;

use pgtide::copyopts::{CopyFormat, Header};
use pgtide::export::{self, ExportOptions, What};
use pgtide::ident::QualifiedName;
use pgtide::progress::Progress;
use support::Db;

async fn export(
    db: &Db,
    table: &str,
    workers: usize,
    path: &std::path::Path,
) -> export::ExportReport {
    let mut o = ExportOptions::new(
        What::Table(QualifiedName::parse(table).unwrap()),
        path.display().to_string(),
        CopyFormat::Text,
    );
    o.workers = workers;
    export::run(&db.target, &o, Arc::new(Progress::new(workers)))
        .await
        .unwrap()
}

/// The server's own `COPY table TO STDOUT`, as psql's `\copy table TO`.
async fn server_copy(db: &Db, table: &str) -> Vec<u8> {
    copy_out(db, &format!("COPY {table} TO STDOUT")).await
}

/// What the server's `COPY .. TO STDOUT` statement `sql` writes (psql's
/// `\copy` writes those bytes).
async fn copy_out(db: &Db, sql: &str) -> Vec<u8> {
    use futures_util::TryStreamExt;
    let stream = db.client.copy_out(sql).await.unwrap();
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    chunks.concat()
}

#[tokio::test]
async fn an_inheritance_parent_exports_its_own_rows_as_copy_does() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE parent (id int, v text);
             CREATE TABLE child (extra int) INHERITS (parent);
             INSERT INTO parent SELECT g, 'p' || g FROM generate_series(1, 3000) g;
             INSERT INTO child SELECT g, 'c', g FROM generate_series(5001, 6000) g;",
        )
        .await
        .unwrap();
    let expected = server_copy(&db, "parent").await;
    let dir = tempfile::tempdir().unwrap();
    for workers in [1, 3] {
        let path = dir.path().join(format!("p{workers}"));
        assert_eq!(
            export(&db, "parent", workers, &path).await.rows,
            3000,
            "{workers}"
        );
        let mut got: Vec<&[u8]> = Vec::new();
        let bytes = std::fs::read(&path).unwrap();
        got.extend(bytes.split_inclusive(|&b| b == b'\n'));
        let mut want: Vec<&[u8]> = expected.split_inclusive(|&b| b == b'\n').collect();
        if workers == 1 {
            assert_eq!(bytes, expected, "1 worker: byte for byte");
        }
        got.sort();
        want.sort();
        assert_eq!(got, want, "{workers} workers");
    }
}

#[tokio::test]
async fn a_materialized_view_exports_with_several_workers() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE MATERIALIZED VIEW mv AS
               SELECT g AS id, repeat('x', 200) AS v FROM generate_series(1, 20000) g;",
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mv");
    let r = export(&db, "mv", 2, &path).await;
    assert_eq!((r.rows, r.workers), (20000, 2), "{:?}", r.notes);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 20000);
}

/// A table without columns: one empty line per row (a binary tuple of no
/// fields), with any worker count, as psql writes (it was refused).
#[tokio::test]
async fn a_table_of_no_columns_exports_a_line_per_row() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE z0 (); INSERT INTO z0 SELECT FROM generate_series(1, 5000)")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (format, header) in [
        (CopyFormat::Csv, Header::Skip),
        (CopyFormat::Text, Header::None),
        (CopyFormat::Binary, Header::None),
    ] {
        let z0 = What::Table(QualifiedName::parse("z0").unwrap());
        let mut o = ExportOptions::new(z0, "", format);
        o.copy.header = header;
        let want = copy_out(&db, &o.copy.copy_to_sql("SELECT FROM z0", &[])).await;
        for workers in [1, 3] {
            let path = dir.path().join(format!("z{workers}"));
            o.output = path.display().to_string();
            o.workers = workers;
            let r = export::run(&db.target, &o, Arc::new(Progress::new(workers)))
                .await
                .unwrap();
            assert_eq!(r.rows, 5000, "{format:?} {workers}");
            assert!(
                std::fs::read(&path).unwrap() == want,
                "{format:?} {workers}"
            );
        }
    }
}

/// A sequence is refused as `COPY seq TO` (and psql's `\copy`) refuse
/// it, with a hint that names the query that reads it; nothing is written.
#[tokio::test]
async fn a_sequence_is_refused_as_copy_refuses_it() {
    let db = Db::start().await;
    db.client.batch_execute("CREATE SEQUENCE s1").await.unwrap();
    let refused = db
        .client
        .batch_execute("COPY s1 TO STDOUT")
        .await
        .unwrap_err();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s1");
    let o = ExportOptions::new(
        What::Table(QualifiedName::parse("s1").unwrap()),
        path.display().to_string(),
        CopyFormat::Text,
    );
    let e = export::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap_err();
    assert!(
        refused.as_db_error().unwrap().message() == "cannot copy from sequence \"s1\"",
        "{refused:?}"
    );
    assert!(e.to_string().contains("cannot copy from sequence"), "{e}");
    assert!(
        format!("{e:?}").contains("SELECT * FROM public.s1"),
        "{e:?}"
    );
    assert!(!path.exists());
}
