//! `--create --resume` loads into the table its first run made, and into
//! no other: a table that exists with rows while the ledger holds nothing
//! of this input is someone else's, which the load used to take as
//! `--create=if-not-exists` (and `--truncate` emptied).

mod support;

use std::sync::Arc;

use pgtide::copyopts::{CopyFormat, Header};
use pgtide::ident::QualifiedName;
use pgtide::infer::create::Create;
use pgtide::load::ledger::ResumeMode;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::{Compress, Db};

fn options(input: &str, table: &str) -> LoadOptions {
    let mut o = LoadOptions::new(
        vec![input.to_owned()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.copy.header = Header::Skip;
    o.create = Some(Create::default());
    o.resume = Some(ResumeMode::Edges);
    o.truncate = true;
    o
}

async fn count(db: &Db, table: &str) -> i64 {
    db.client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_table_no_earlier_run_made_is_refused() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE theirs (id int, v int, w text);
             INSERT INTO theirs SELECT g, g, 'precious' FROM generate_series(1, 5) g;
             CREATE TABLE made (id int, v int, w text);",
        )
        .await
        .unwrap();
    let path = db.file(b"id,v,w\n1,2,3\n4,5,6\n", Compress::None);
    let input = path.to_str().unwrap();
    let e = load::run(
        &db.target,
        &options(input, "theirs"),
        Arc::new(Progress::new(1)),
    )
    .await
    .expect_err("someone else's table");
    assert!(e.message().contains("already exists"), "{e}");
    assert!(
        e.hint().unwrap().contains("--create=if-not-exists"),
        "{e:?}"
    );
    assert_eq!(count(&db, "theirs").await, 5, "untouched");

    // An empty table is what a first run leaves when it stopped before
    // its first chunk committed: loaded, then complete on the next run.
    let o = options(input, "made");
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(count(&db, "made").await, 2);
    let again = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(again.failure.is_none(), "{:?}", again.failure);
    assert_eq!(count(&db, "made").await, 2);
}
