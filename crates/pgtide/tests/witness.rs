//! The witness (`pgtide::witness`) is a help, never a condition: a role
//! that may not run it (here `pg_logical_emit_message` revoked from
//! PUBLIC) still loads every row, with every chunk committed. Its proof
//! itself is tested in `crash_commit.rs` and `copy/stopped.rs`.

mod support;

use std::sync::Arc;

use pgtide::conn::{Env, Target};
use pgtide::progress::Progress;
use support::Db;

#[tokio::test]
async fn a_role_that_may_not_run_the_witness_still_loads() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE ROLE plain LOGIN PASSWORD 'plain-pw';
             DO $$ DECLARE f regprocedure; BEGIN
                 -- Every version's signatures (17 added a fourth argument).
                 FOR f IN SELECT oid::regprocedure FROM pg_proc
                          WHERE proname = 'pg_logical_emit_message' LOOP
                     EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
                 END LOOP;
             END $$;
             CREATE TABLE w (id int PRIMARY KEY, v text);
             GRANT SELECT, INSERT ON w TO plain",
        )
        .await
        .unwrap();
    let plain = Target::parse_with(
        &format!(
            "host=127.0.0.1 port={} user=plain password=plain-pw dbname=postgres",
            db.cluster.port()
        ),
        &Env::empty(),
    )
    .unwrap();
    // The role really is refused.
    let c = plain.connect().await.unwrap();
    let e = c
        .simple_query("SELECT pg_logical_emit_message(true, 'x', '')")
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("42501"), "{e}");

    let rows = 20_000;
    let data: String = (0..rows).map(|i| format!("{i},row {i}\n")).collect();
    let mut o = db.csv_options(data.as_bytes(), "w");
    o.chunk_bytes = 32 * 1024;
    o.workers = 2;
    let report = pgtide::load::run(&plain, &o, Arc::new(Progress::new(2)))
        .await
        .unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_loaded, rows);
    let n: i64 = db
        .client
        .query_one("SELECT count(*) FROM w", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n as u64, rows);
}
