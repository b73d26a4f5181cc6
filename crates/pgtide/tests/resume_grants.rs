//! `--resume` by a user who owns nothing of the ledger: a DBA created it
//! (one `--resume` load as its owner) and granted its rows, as the README
//! says. Each run used to run the ledger's DDL (`CREATE INDEX IF NOT
//! EXISTS`), which needs the table's owner even when the index exists:
//! the load failed with "must be owner of table ledger". A ledger of an
//! older version (without the index on `(input, end_byte)`) works for
//! that user as it is, and its owner's next load brings it up to date.

mod support;

use std::sync::Arc;

use pgtide::conn::{Env, Target};
use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
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
    o.chunk_bytes = 4096;
    o.resume = Some(ResumeMode::Edges);
    o
}

#[tokio::test]
async fn a_user_granted_the_ledgers_rows_resumes_without_owning_it() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE owned (id int);
             CREATE TABLE theirs (id int, v text);
             CREATE ROLE app LOGIN PASSWORD 'app-pw';
             GRANT INSERT, SELECT ON theirs TO app;",
        )
        .await
        .unwrap();
    // The owner's first --resume load creates the ledger.
    let first = db.file(b"1\n", Compress::None);
    let r = load::run(
        &db.target,
        &options(first.to_str().unwrap(), "owned"),
        Arc::new(Progress::new(1)),
    )
    .await
    .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    db.client
        .batch_execute(
            "GRANT USAGE ON SCHEMA pgtide TO app;
             GRANT SELECT, INSERT, DELETE ON pgtide.ledger TO app;",
        )
        .await
        .unwrap();

    let app = Target::parse_with(
        &format!(
            "host=127.0.0.1 port={} user=app dbname=postgres password=app-pw",
            db.cluster.port()
        ),
        &Env::empty(),
    )
    .unwrap();
    let data: String = (0..2000).map(|i| format!("{i},row {i}\n")).collect();
    let input = db.file(data.as_bytes(), Compress::None);
    let input = input.to_str().unwrap();
    for round in 0..3 {
        if round == 1 {
            // A ledger as an older pgtide left it: its index on `input`
            // alone. The user cannot add the new one, and need not.
            db.client
                .batch_execute(
                    "DROP INDEX pgtide.ledger_input_end;
                     CREATE INDEX ledger_input ON pgtide.ledger (input);",
                )
                .await
                .unwrap();
        }
        let r = load::run(&app, &options(input, "theirs"), Arc::new(Progress::new(1)))
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e:?}"));
        assert!(r.failure.is_none(), "{:?}", r.failure);
    }
    // The owner's next --resume load brings the ledger up to date.
    load::run(
        &db.target,
        &options(first.to_str().unwrap(), "owned"),
        Arc::new(Progress::new(1)),
    )
    .await
    .unwrap();
    let indexes: String = db
        .client
        .query_one(
            "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes \
             WHERE schemaname = 'pgtide' AND tablename = 'ledger'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexes, "ledger_input_end");
    let (rows, entries): (i64, i64) = {
        let row = db
            .client
            .query_one(
                "SELECT (SELECT count(*) FROM theirs), \
                 (SELECT count(*) FROM pgtide.ledger WHERE table_name LIKE '%theirs')",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(
        rows, 2000,
        "every row once: the second run found it complete"
    );
    assert!(entries > 1, "the chunks are in the ledger: {entries}");
}
