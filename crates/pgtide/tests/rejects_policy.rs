//! A row that a row-level security policy refuses (its WITH CHECK) is a
//! bad row like any other: with `--rejects` it goes to the reject file
//! and the load goes on (outside testing: its SQLSTATE, 42501, is the one
//! of a missing privilege, and the load stopped at the first such row).
//! COPY FROM refuses such a table, so the INSERT methods are the way in.

mod support;

use std::sync::Arc;

use pgtide::conn::{Env, Target};
use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method};
use pgtide::progress::Progress;
use support::Db;

#[tokio::test]
async fn rows_a_policy_refuses_are_rejected_and_the_rest_load() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE ROLE tenant LOGIN PASSWORD 'tenant-pw';
             CREATE TABLE p (a int PRIMARY KEY, b text);
             ALTER TABLE p ENABLE ROW LEVEL SECURITY;
             CREATE POLICY ins ON p FOR INSERT TO tenant WITH CHECK (a % 4 <> 0);
             CREATE POLICY sel ON p FOR SELECT TO tenant USING (true);
             GRANT SELECT, INSERT ON p TO tenant;
             CREATE TABLE closed (a int PRIMARY KEY, b text);
             ALTER TABLE closed ENABLE ROW LEVEL SECURITY;
             CREATE POLICY sel ON closed FOR SELECT TO tenant USING (true);
             GRANT SELECT, INSERT ON closed TO tenant;",
        )
        .await
        .unwrap();
    let tenant = Target::parse_with(
        &format!(
            "host=127.0.0.1 port={} user=tenant dbname=postgres password=tenant-pw",
            db.cluster.port()
        ),
        &Env::empty(),
    )
    .unwrap();
    let data: String = (1..=200).map(|a| format!("{a},x\n")).collect();
    let input = db.file(data.as_bytes(), support::Compress::None);
    // No policy lets the role insert: every row would be refused, which
    // is the table's setting, not 200 bad rows.
    let mut o = LoadOptions::new(
        vec![input.to_str().unwrap().into()],
        QualifiedName::parse("closed").unwrap(),
        CopyFormat::Csv,
    );
    o.method = Method::Pipeline;
    o.rejects = Some(input.with_extension("closed"));
    let e = load::run(&tenant, &o, Arc::new(Progress::new(1)))
        .await
        .expect_err("refused before loading");
    assert!(e.message().contains("lets this role insert no row"), "{e}");
    for method in [Method::Pipeline, Method::Values, Method::Insert] {
        for workers in [1, 3] {
            db.client.batch_execute("TRUNCATE p").await.unwrap();
            let rejects = input.with_extension(format!("{method:?}{workers}"));
            let mut o = LoadOptions::new(
                vec![input.to_str().unwrap().into()],
                QualifiedName::parse("p").unwrap(),
                CopyFormat::Csv,
            );
            o.method = method;
            o.workers = workers;
            o.chunk_bytes = 400;
            o.rejects = Some(rejects.clone());
            let report = load::run(&tenant, &o, Arc::new(Progress::new(workers)))
                .await
                .expect("load starts");
            let ctx = format!("{method:?}, {workers} workers");
            assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
            assert_eq!(report.rows_loaded, 150, "{ctx}");
            assert_eq!(report.rows_rejected, 50, "{ctx}");
            let mut lines = support::rejected_lines(&rejects);
            lines.sort_unstable();
            let want: Vec<u64> = (1..=50).map(|k| k * 4).collect();
            assert_eq!(lines, want, "{ctx}");
            let n: i64 = db
                .client
                .query_one("SELECT count(*) FROM p WHERE a % 4 <> 0", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(n, 150, "{ctx}");
        }
    }
}
