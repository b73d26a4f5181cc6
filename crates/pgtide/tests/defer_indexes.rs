//! `--defer-indexes` (issue 9 part 3): secondary indexes dropped before
//! the load and built again after it (also after a failed load), unique
//! ones kept, definitions saved so that an interrupted load loses none.

mod support;

use std::sync::Arc;

use pgtide::catalog::Table;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, indexes, LoadOptions};
use pgtide::progress::Progress;
use support::Db;

const INDEXES: &str = "CREATE INDEX ON {t} (n);
     CREATE INDEX {t}_lower ON {t} (lower(s)) WHERE n > 10;
     CREATE UNIQUE INDEX ON {t} (s);";

async fn table(db: &Db, t: &str) {
    db.client
        .batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, n int, s text); {}",
            INDEXES.replace("{t}", t)
        ))
        .await
        .unwrap();
}

/// The table's index definitions, sorted.
async fn index_defs(db: &Db, t: &str) -> Vec<String> {
    db.client
        .query(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = $1::text::regclass \
             ORDER BY 1",
            &[&t],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn options(db: &Db, data: &[u8], t: &str) -> LoadOptions {
    let mut o = db.csv_options(data, t);
    o.defer_indexes = true;
    o.workers = 2;
    o.chunk_bytes = 4096;
    o
}

fn rows(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("{i},{},s{i}\n", i % 50))
        .collect::<String>()
        .into_bytes()
}

async fn saved_count(db: &Db) -> usize {
    indexes::saved(&db.client, None).await.unwrap().len()
}

#[tokio::test]
async fn indexes_come_back_identical_after_a_load_and_after_a_failed_one() {
    let db = Db::start().await;
    table(&db, "di").await;
    let before = index_defs(&db, "di").await;
    let r = load::run(
        &db.target,
        &options(&db, &rows(20_000), "di"),
        Arc::new(Progress::new(2)),
    )
    .await
    .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_loaded, 20_000);
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("--defer-indexes"))
        .expect("a note");
    assert!(note.contains("2 indexes"), "{note}");
    assert_eq!(index_defs(&db, "di").await, before);
    assert_eq!(saved_count(&db).await, 0);
    let hits: i64 = db
        .client
        .query_one("SELECT count(*) FROM di WHERE n = 7", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(hits, 400, "the rebuilt index holds the loaded rows");

    // A duplicate for the kept unique index stops the load: the dropped
    // indexes are built again all the same.
    table(&db, "dup").await;
    let before = index_defs(&db, "dup").await;
    let mut data = rows(5_000);
    data.extend_from_slice(b"99999,1,s17\n");
    let r = load::run(
        &db.target,
        &options(&db, &data, "dup"),
        Arc::new(Progress::new(2)),
    )
    .await
    .unwrap();
    let e = r.failure.expect("the duplicate stops the load");
    assert_eq!(e.sqlstate(), Some("23505"), "{e}");
    assert_eq!(index_defs(&db, "dup").await, before);
    assert_eq!(saved_count(&db).await, 0);
}

#[tokio::test]
async fn an_interrupted_load_loses_no_index() {
    let db = Db::start().await;
    table(&db, "ki").await;
    let before = index_defs(&db, "ki").await;
    // What a load killed between the drop and the rebuild leaves behind.
    let t = Table::resolve(&db.client, &QualifiedName::parse("ki").unwrap())
        .await
        .unwrap();
    assert_eq!(indexes::drop_saved(&db.client, &t).await.unwrap(), 2);
    assert_eq!(
        index_defs(&db, "ki").await.len(),
        2,
        "pkey and the unique index"
    );
    assert_eq!(saved_count(&db).await, 2);
    // The next load with --defer-indexes builds them after its rows.
    let r = load::run(
        &db.target,
        &options(&db, &rows(100), "ki"),
        Arc::new(Progress::new(2)),
    )
    .await
    .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(index_defs(&db, "ki").await, before);
    // And `ledger restore-indexes` does without a load.
    assert_eq!(indexes::drop_saved(&db.client, &t).await.unwrap(), 2);
    let rebuilt = indexes::rebuild(&db.target, None, 2).await.unwrap();
    assert!(rebuilt.failure.is_none());
    assert_eq!(rebuilt.built.len(), 2);
    assert_eq!(index_defs(&db, "ki").await, before);
    assert_eq!(saved_count(&db).await, 0);
}

#[tokio::test]
async fn a_partitioned_table_is_refused_before_anything_is_written() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE pt (id int, n int) PARTITION BY RANGE (id);
             CREATE TABLE pt0 PARTITION OF pt FOR VALUES FROM (0) TO (1000000);
             CREATE INDEX ON pt (n);",
        )
        .await
        .unwrap();
    let mut o = options(&db, b"1,2\n", "pt");
    o.truncate = true;
    let e = load::run(&db.target, &o, Arc::new(Progress::new(2)))
        .await
        .unwrap_err();
    assert!(
        e.message()
            .contains("--defer-indexes works on a plain table"),
        "{e}"
    );
    // A partition loads, keeping the index attached to its parent's (the
    // server refuses to drop it alone) and deferring its own.
    db.client
        .batch_execute("CREATE INDEX pt0_own ON pt0 (id)")
        .await
        .unwrap();
    let r = load::run(
        &db.target,
        &options(&db, b"1,2\n", "pt0"),
        Arc::new(Progress::new(2)),
    )
    .await
    .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("1 index dropped") && n.contains("pt0_own")),
        "{:?}",
        r.notes
    );
}
