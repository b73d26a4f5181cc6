//! `--on-conflict` when the key's unique index compares with another
//! collation than the column's (a case-insensitive ICU collation): rows of
//! the file are folded as the index compares them, so the result is what
//! applying them one by one with `INSERT .. ON CONFLICT` gives (outside
//! testing: the file's rows were folded by the column's collation, and the
//! wrong row won, or the merge failed), in one chunk or a chunk per row
//! (outside testing: a key's spelling was its last row's in one chunk,
//! and its first row's across chunks; now its first row's in both).

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::upsert::OnConflict;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::{Compress, Db};

/// The table's rows as `k=v`, sorted.
async fn rows(db: &Db, table: &str) -> Vec<String> {
    let mut out: Vec<String> = db
        .client
        .query(&format!("SELECT k || '=' || v FROM {table}"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn keys_fold_as_their_index_compares_them() {
    let db = Db::start().await;
    let icu = db
        .client
        .batch_execute(
            "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        )
        .await;
    if let Err(e) = icu {
        eprintln!("skipped: this server has no ICU collations ({e})");
        return;
    }
    // (column definition, index, rows there before, the file's rows)
    let cases = [
        ("k text, v int", "(k COLLATE ci)", "", "bob@x,1\nBob@x,2\n"),
        (
            "k text COLLATE ci, v int",
            "(k COLLATE \"C\")",
            "('a', 0)",
            "a,1\nA,2\n",
        ),
        (
            "k text, v int",
            "(k COLLATE ci)",
            "('X', 0)",
            "x,1\nb,2\nB,3\nX,4\n",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (n, (columns, index, before, file)) in cases.iter().enumerate() {
        for mode in [OnConflict::Update, OnConflict::Skip] {
            let action = match mode {
                OnConflict::Update => "DO UPDATE SET v = EXCLUDED.v",
                OnConflict::Skip => "DO NOTHING",
            };
            let mut setup = format!(
                "DROP TABLE IF EXISTS got, want;
                 CREATE TABLE got ({columns}); CREATE UNIQUE INDEX ON got {index};
                 CREATE TABLE want ({columns}); CREATE UNIQUE INDEX ON want {index};"
            );
            if !before.is_empty() {
                setup +=
                    &format!("INSERT INTO got VALUES {before}; INSERT INTO want VALUES {before};");
            }
            // What one statement per row, in file order, gives.
            for line in file.lines() {
                let (k, v) = line.split_once(',').unwrap();
                setup += &format!("INSERT INTO want VALUES ('{k}', {v}) ON CONFLICT (k) {action};");
            }
            db.client.batch_execute(&setup).await.unwrap();
            let path = db.file(file.as_bytes(), Compress::None);
            // One chunk, then a chunk per row: the same result.
            for chunk_bytes in [4 << 20, 1] {
                let mut refill = "TRUNCATE got;".to_owned();
                if !before.is_empty() {
                    refill += &format!("INSERT INTO got VALUES {before};");
                }
                db.client.batch_execute(&refill).await.unwrap();
                let mut o = LoadOptions::new(
                    vec![path.to_string_lossy().into_owned()],
                    QualifiedName::parse("got").unwrap(),
                    CopyFormat::Csv,
                );
                o.on_conflict = Some(mode);
                o.key = Some(vec!["k".into()]);
                o.rejects = Some(dir.path().join(format!("r{n}{mode:?}{chunk_bytes}.csv")));
                o.chunk_bytes = chunk_bytes;
                let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
                    .await
                    .expect("the load starts");
                assert!(r.failure.is_none(), "case {n} {mode:?}: {:?}", r.failure);
                assert_eq!(r.rows_rejected, 0, "case {n} {mode:?}");
                // A key keeps its first row's spelling, in one chunk or
                // across chunks, as one statement per row keeps it.
                assert_eq!(
                    rows(&db, "got").await,
                    rows(&db, "want").await,
                    "case {n} {mode:?} chunks of {chunk_bytes} bytes"
                );
            }
        }
    }
}

/// Two unique indexes on the key's columns with different collations are
/// both arbiters of `ON CONFLICT (k)`: no one folding of the file matches
/// them, so the load is refused before anything is written.
#[tokio::test]
async fn unique_indexes_that_disagree_on_the_collation_are_refused() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE two (k text, v int);
             CREATE UNIQUE INDEX ON two (k COLLATE \"C\");
             CREATE UNIQUE INDEX ON two (k COLLATE \"POSIX\");",
        )
        .await
        .unwrap();
    let path = db.file(b"a,1\n", Compress::None);
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("two").unwrap(),
        CopyFormat::Csv,
    );
    o.on_conflict = Some(OnConflict::Update);
    o.key = Some(vec!["k".into()]);
    let e = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("different collations"), "{e}");
    let n: i64 = db
        .client
        .query_one("SELECT count(*) FROM two", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}
