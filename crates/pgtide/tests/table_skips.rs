//! Rows a table drops on purpose (a BEFORE INSERT row trigger returning
//! NULL) are "skipped by the table": counted exactly, by every method, with
//! 1 and 3 workers, on plain and partitioned tables, with and without bad
//! rows (`--rejects`, which on PostgreSQL 17 goes through `ON_ERROR
//! ignore`), and never mistaken for a bug; the table holds what
//! server-side `COPY` of the same file gives.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` (PG 17 in CI) or the default
//! binaries (Debian's PG 15).

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method, Report};
use pgtide::progress::Progress;
use support::{Compress, Db};

/// Drops every row whose `v` starts with `skip`, in the table's own words.
const DROP_SKIPS: &str = "CREATE OR REPLACE FUNCTION drop_skips() RETURNS trigger \
     LANGUAGE plpgsql AS $$ BEGIN \
     IF NEW.v LIKE 'skip%' THEN RETURN NULL; END IF; RETURN NEW; END $$";

/// `n` rows `id,v`; every 7th is dropped by the trigger, and with `bad`
/// every 11th (not also a 7th) has an id that is not an integer.
fn rows(n: u64, bad: bool) -> (Vec<u8>, u64, u64) {
    let (mut out, mut skips, mut bads) = (String::new(), 0, 0);
    for i in 1..=n {
        if i % 7 == 0 {
            skips += 1;
            out.push_str(&format!("{i},skip {i}\n"));
        } else if bad && i % 11 == 0 {
            bads += 1;
            out.push_str(&format!("x{i},bad {i}\n"));
        } else {
            out.push_str(&format!("{i},keep {i}\n"));
        }
    }
    (out.into_bytes(), skips, bads)
}

/// Creates `table` with the trigger (on the table, or for a partitioned
/// table on one partition only: routed rows fire the partition's).
async fn create(db: &Db, table: &str, partitioned: bool) {
    let sql = if partitioned {
        format!(
            "CREATE TABLE {table} (id int, v text) PARTITION BY RANGE (id);
             CREATE TABLE {table}_lo PARTITION OF {table} FOR VALUES FROM (MINVALUE) TO (100);
             CREATE TABLE {table}_hi PARTITION OF {table} FOR VALUES FROM (100) TO (MAXVALUE);
             CREATE TRIGGER drop_skips BEFORE INSERT ON {table}_hi
                 FOR EACH ROW EXECUTE FUNCTION drop_skips()"
        )
    } else {
        format!(
            "CREATE TABLE {table} (id int, v text);
             CREATE TRIGGER drop_skips BEFORE INSERT ON {table}
                 FOR EACH ROW EXECUTE FUNCTION drop_skips()"
        )
    };
    db.client.batch_execute(&sql).await.unwrap();
}

async fn count(db: &Db, sql: &str) -> u64 {
    let n: i64 = db.client.query_one(sql, &[]).await.unwrap().get(0);
    n as u64
}

/// What server-side COPY of `data` leaves in a table like `table`.
async fn server_copy(db: &Db, table: &str, data: &[u8], partitioned: bool) -> String {
    let want = format!("{table}_want");
    create(db, &want, partitioned).await;
    let path = db.file(data, Compress::None);
    db.client
        .batch_execute(&format!(
            "COPY {want} FROM '{}' WITH (FORMAT csv)",
            path.display()
        ))
        .await
        .unwrap();
    want
}

/// Loads `data` (CSV `id,v`) into `table` by `method` with `workers`
/// (3 workers: chunks of about 500 bytes), setting bad rows aside into
/// `rejects` when given, and checks the ledger against the table.
async fn load(
    db: &Db,
    table: &str,
    data: &[u8],
    method: Method,
    workers: usize,
    rejects: Option<PathBuf>,
) -> Report {
    let path = db.file(data, Compress::None);
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.method = method;
    o.workers = workers;
    o.chunk_bytes = if workers == 1 { 1 << 20 } else { 500 };
    o.rejects = rejects;
    let report = load::run(&db.target, &o, Arc::new(Progress::new(workers)))
        .await
        .expect("load starts");
    assert_eq!(
        report.rows_read,
        report.rows_loaded + report.rows_rejected + report.rows_skipped_by_table,
        "{table}: {report:?}"
    );
    assert_eq!(
        count(db, &format!("SELECT count(*) FROM {table}")).await,
        report.rows_loaded,
        "{table}: rows in the table"
    );
    report
}

#[tokio::test]
async fn trigger_skips_are_counted_by_every_method_and_worker_count() {
    let db = Db::start().await;
    db.client.batch_execute(DROP_SKIPS).await.unwrap();
    let (data, skips, _) = rows(300, false);
    for partitioned in [false, true] {
        // Rows >= 100 go to the partition with the trigger.
        let want_skips = if partitioned {
            (100..=300).filter(|i| i % 7 == 0).count() as u64
        } else {
            skips
        };
        for method in Method::ALL {
            for workers in [1, 3] {
                let table = format!("s_{}_{}_{workers}", u8::from(partitioned), method.name());
                create(&db, &table, partitioned).await;
                let report = load(&db, &table, &data, method, workers, None).await;
                let what = format!("{table}: {report:?}");
                assert!(report.failure.is_none(), "{what}");
                assert_eq!(report.rows_read, 300, "{what}");
                assert_eq!(report.rows_skipped_by_table, want_skips, "{what}");
                assert_eq!(report.rows_loaded, 300 - want_skips, "{what}");
                assert_eq!(report.rows_rejected, 0, "{what}");
                if workers == 3 {
                    assert!(report.chunks > 3, "{what}");
                }
                let want = server_copy(&db, &table, &data, partitioned).await;
                let diff = count(
                    &db,
                    &format!(
                        "SELECT count(*) FROM ((TABLE {table} EXCEPT ALL TABLE {want}) \
                         UNION ALL (TABLE {want} EXCEPT ALL TABLE {table})) d"
                    ),
                )
                .await;
                assert_eq!(diff, 0, "{what}: differs from server COPY");
            }
        }
    }
}

#[tokio::test]
async fn trigger_skips_and_rejects_are_told_apart() {
    let db = Db::start().await;
    db.client.batch_execute(DROP_SKIPS).await.unwrap();
    let (data, skips, bads) = rows(300, true);
    let dir = tempfile::tempdir().unwrap();
    for method in Method::ALL {
        for workers in [1, 3] {
            let table = format!("r_{}_{workers}", method.name());
            create(&db, &table, false).await;
            let rejects = dir.path().join(format!("{table}.rejects"));
            let report = load(&db, &table, &data, method, workers, Some(rejects)).await;
            let what = format!("{table}: {report:?}");
            assert!(report.failure.is_none(), "{what}");
            assert_eq!(report.rows_rejected, bads, "{what}");
            assert_eq!(report.rows_skipped_by_table, skips, "{what}");
            assert_eq!(report.rows_loaded, 300 - skips - bads, "{what}");
        }
    }
}

#[tokio::test]
async fn only_triggers_that_can_drop_inserted_rows_count() {
    let db = Db::start().await;
    db.client.batch_execute(DROP_SKIPS).await.unwrap();
    let on = |t: &str, how: &str| {
        format!("CREATE TRIGGER x {how} ON {t} FOR EACH ROW EXECUTE FUNCTION drop_skips()")
    };
    let cases: Vec<(&str, String, bool, bool)> = vec![
        // (table, set-up, may skip for COPY, for INSERT methods)
        ("plain", String::new(), false, false),
        ("before_ins", on("before_ins", "BEFORE INSERT"), true, true),
        (
            "before_any",
            on("before_any", "BEFORE UPDATE OR INSERT"),
            true,
            true,
        ),
        (
            "before_upd",
            on("before_upd", "BEFORE UPDATE"),
            false,
            false,
        ),
        ("after_ins", on("after_ins", "AFTER INSERT"), false, false),
        (
            "stmt_ins",
            "CREATE TRIGGER x BEFORE INSERT ON stmt_ins FOR EACH STATEMENT \
             EXECUTE FUNCTION drop_skips()"
                .into(),
            false,
            false,
        ),
        (
            "disabled",
            format!(
                "{}; ALTER TABLE disabled DISABLE TRIGGER x",
                on("disabled", "BEFORE INSERT")
            ),
            false,
            false,
        ),
        (
            "ruled",
            "CREATE RULE r AS ON INSERT TO ruled WHERE NEW.v = 'x' DO INSTEAD NOTHING".into(),
            false,
            true,
        ),
    ];
    for (table, setup, copy, inserts) in cases {
        db.client
            .batch_execute(&format!("CREATE TABLE {table} (id int, v text); {setup}"))
            .await
            .unwrap();
        let oid = oid(&db, table).await;
        let got = (
            pgtide::catalog::may_skip_rows(&db.client, oid, false)
                .await
                .unwrap(),
            pgtide::catalog::may_skip_rows(&db.client, oid, true)
                .await
                .unwrap(),
        );
        assert_eq!(got, (copy, inserts), "{table}");
    }
    // Partitioned, two levels down.
    db.client
        .batch_execute(
            "CREATE TABLE p (id int, v text) PARTITION BY RANGE (id);
             CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (10) PARTITION BY RANGE (id);
             CREATE TABLE p11 PARTITION OF p1 FOR VALUES FROM (0) TO (5)",
        )
        .await
        .unwrap();
    let p = oid(&db, "p").await;
    assert!(!pgtide::catalog::may_skip_rows(&db.client, p, false)
        .await
        .unwrap());
    db.client
        .batch_execute(&on("p11", "BEFORE INSERT"))
        .await
        .unwrap();
    assert!(pgtide::catalog::may_skip_rows(&db.client, p, false)
        .await
        .unwrap());
}

async fn oid(db: &Db, table: &str) -> u32 {
    db.client
        .query_one("SELECT $1::text::regclass::oid", &[&table])
        .await
        .unwrap()
        .get(0)
}

/// Into a view whose INSTEAD OF trigger drops rows: the INSERT methods
/// count the dropped rows as skipped; COPY counts every row it gave the
/// trigger (as psql's `\copy` does), so the summary says that its
/// "loaded" includes them.
#[tokio::test]
async fn copy_into_a_view_says_its_count_includes_dropped_rows() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE base (id int, v text);
             CREATE VIEW vw AS SELECT * FROM base;
             CREATE FUNCTION into_base() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.v LIKE 'skip%' THEN RETURN NULL; END IF;
                 INSERT INTO base VALUES (NEW.*);
                 RETURN NEW;
             END $$;
             CREATE TRIGGER into_base INSTEAD OF INSERT ON vw
                 FOR EACH ROW EXECUTE FUNCTION into_base();",
        )
        .await
        .unwrap();
    let (data, skips, _) = rows(70, false);
    let path = db.file(&data, Compress::None);
    for method in [Method::Values, Method::Copy] {
        db.client.batch_execute("TRUNCATE base").await.unwrap();
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse("vw").unwrap(),
            CopyFormat::Csv,
        );
        o.method = method;
        let report = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .expect("load starts");
        assert!(report.failure.is_none(), "{method:?}: {:?}", report.failure);
        assert_eq!(count(&db, "SELECT count(*) FROM base").await, 70 - skips);
        let said = report.notes.iter().any(|n| n.contains("INSTEAD OF"));
        match method {
            Method::Copy => {
                assert_eq!(report.rows_loaded, 70);
                assert!(said, "{:?}", report.notes);
            }
            _ => {
                assert_eq!(report.rows_skipped_by_table, skips);
                assert!(!said, "{:?}", report.notes);
            }
        }
    }
}

/// A table whose INSTEAD rule on INSERT writes two rows elsewhere for each
/// row given: the server reports the rule's count (twice the rows sent),
/// which is not a miscount of pgtide's (outside testing: "this is a bug",
/// exit 2, everything committed). The INSERT methods count the rows sent
/// and say why; COPY ignores rules.
#[tokio::test]
async fn an_instead_rule_that_writes_more_rows_is_not_a_bug() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE ruled2 (id int, v text);
             CREATE TABLE ruled2_log (id int, g int);
             CREATE RULE r AS ON INSERT TO ruled2 DO INSTEAD
                 INSERT INTO ruled2_log SELECT NEW.id, g FROM generate_series(1, 2) g",
        )
        .await
        .unwrap();
    let data: String = (1..=40).map(|i| format!("{i},v{i}\n")).collect();
    let path = db.file(data.as_bytes(), Compress::None);
    for method in [Method::Insert, Method::Pipeline, Method::Values] {
        db.client
            .batch_execute("TRUNCATE ruled2_log")
            .await
            .unwrap();
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse("ruled2").unwrap(),
            CopyFormat::Csv,
        );
        o.method = method;
        o.batch_rows = Some(7);
        let report = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .expect("load starts");
        assert!(report.failure.is_none(), "{method:?}: {:?}", report.failure);
        assert_eq!(
            (report.rows_read, report.rows_loaded),
            (40, 40),
            "{method:?}"
        );
        assert_eq!(count(&db, "SELECT count(*) FROM ruled2_log").await, 80);
        let said = report.notes.iter().any(|n| n.contains("INSTEAD rule"));
        assert!(said, "{method:?}: {:?}", report.notes);
    }
}
