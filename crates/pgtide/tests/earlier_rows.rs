//! A row that needs a row of an earlier chunk (a foreign key into the
//! table itself, a trigger that looks for it) loads whatever the worker
//! count, as it does with one COPY or one worker (outside testing: with
//! 3 workers, most children of a parents-first file were rejected, or the
//! load stopped, because their parents' chunk had not committed yet).

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method, Report};
use pgtide::progress::Progress;
use support::Db;

/// Rows `id,parent`: the first 25 without a parent, each later one the
/// child of the row 25 before it (always in an earlier chunk once chunks
/// are small); row `bad` (if any) has a parent that is nowhere.
fn parents_first(n: u32, bad: Option<u32>) -> String {
    (1..=n)
        .map(|i| match i {
            _ if Some(i) == bad => format!("{i},999999\n"),
            i if i <= 25 => format!("{i},\n"),
            i => format!("{i},{}\n", i - 25),
        })
        .collect()
}

async fn load(db: &Db, table: &str, data: &str, method: Method, rejects: bool) -> Report {
    let input = db.file(data.as_bytes(), support::Compress::None);
    let mut o = LoadOptions::new(
        vec![input.to_str().unwrap().into()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.workers = 3;
    o.chunk_bytes = 300;
    o.method = method;
    o.rejects = rejects.then(|| input.with_extension("rejects"));
    load::run(&db.target, &o, Arc::new(Progress::new(3)))
        .await
        .expect("load starts")
}

async fn count(db: &Db, sql: &str) -> i64 {
    db.client.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn children_of_rows_in_earlier_chunks_load_with_any_worker_count() {
    let db = Db::start().await;
    let data = parents_first(600, None);
    for (run, (method, rejects)) in [
        (Method::Copy, true),
        (Method::Copy, false),
        (Method::Pipeline, true),
        (Method::Binary, false),
    ]
    .into_iter()
    .enumerate()
    {
        let t = format!("fk{run}");
        db.client
            .batch_execute(&format!(
                "CREATE TABLE {t} (id int PRIMARY KEY, parent int REFERENCES {t} (id))"
            ))
            .await
            .unwrap();
        let report = load(&db, &t, &data, method, rejects).await;
        let ctx = format!("{method:?}, rejects {rejects}");
        assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
        assert_eq!(report.rows_rejected, 0, "{ctx}");
        assert_eq!(report.rows_loaded, 600, "{ctx}");
        assert_eq!(count(&db, &format!("SELECT count(*) FROM {t}")).await, 600);
    }
}

#[tokio::test]
async fn a_row_whose_parent_is_nowhere_is_still_rejected_alone() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE fk (id int PRIMARY KEY, parent int REFERENCES fk (id))")
        .await
        .unwrap();
    let report = load(
        &db,
        "fk",
        &parents_first(600, Some(400)),
        Method::Copy,
        true,
    )
    .await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    // Row 400's parent is nowhere; 425 is its child, 450 the child of
    // 425, and so on to 600: each is refused for want of its parent.
    assert_eq!(report.rows_rejected, 9);
    assert_eq!(report.rows_loaded, 591);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM fk WHERE id >= 400 AND id % 25 = 0"
        )
        .await,
        0
    );
}

#[tokio::test]
async fn a_trigger_that_looks_for_an_earlier_row_finds_it() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE tr (id int PRIMARY KEY, parent int);
             CREATE FUNCTION parent_present() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.parent IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM tr WHERE id = NEW.parent) THEN
                     RAISE EXCEPTION 'no parent %', NEW.parent;
                 END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER parent_present BEFORE INSERT ON tr
                 FOR EACH ROW EXECUTE FUNCTION parent_present();",
        )
        .await
        .unwrap();
    let report = load(&db, "tr", &parents_first(600, None), Method::Copy, true).await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_rejected, 0);
    assert_eq!(count(&db, "SELECT count(*) FROM tr").await, 600);
    // A row the trigger lets through for want of an uncommitted earlier
    // row (a duplicate it looks for) cannot be retried: the summary says
    // that such a trigger needs one worker (outside testing).
    let said = |r: &Report| r.notes.iter().any(|n| n.contains("--workers 1"));
    assert!(said(&report), "{:?}", report.notes);
    db.client.batch_execute("TRUNCATE tr").await.unwrap();
    let input = db.file(parents_first(100, None).as_bytes(), support::Compress::None);
    let o = LoadOptions::new(
        vec![input.to_str().unwrap().into()],
        QualifiedName::parse("tr").unwrap(),
        CopyFormat::Csv,
    );
    let one = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(one.failure.is_none() && !said(&one), "{:?}", one.notes);
}

/// A key that clashes with an earlier row of the same statement which is
/// itself refused at the statement's end (its foreign key) loads, as it
/// does row by row: `2,99` is refused (no parent 99), then `2,1` loads.
#[tokio::test]
async fn a_clash_with_a_row_refused_later_is_judged_again() {
    let db = Db::start().await;
    let data = "1,1\n2,99\n2,1\n3,1\n";
    for (run, method) in [Method::Copy, Method::Binary, Method::Pipeline]
        .into_iter()
        .enumerate()
    {
        let (p, t) = (format!("par{run}"), format!("kid{run}"));
        db.client
            .batch_execute(&format!(
                "CREATE TABLE {p} (id int PRIMARY KEY); INSERT INTO {p} VALUES (1);
                 CREATE TABLE {t} (id int PRIMARY KEY, pid int REFERENCES {p});"
            ))
            .await
            .unwrap();
        let input = db.file(data.as_bytes(), support::Compress::None);
        let mut o = LoadOptions::new(
            vec![input.to_str().unwrap().into()],
            QualifiedName::parse(&t).unwrap(),
            CopyFormat::Csv,
        );
        o.method = method;
        o.rejects = Some(input.with_extension("rejects"));
        let report = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .expect("load starts");
        assert!(report.failure.is_none(), "{method:?}: {:?}", report.failure);
        assert_eq!(
            support::rejected_lines(o.rejects.as_ref().unwrap()),
            [2],
            "{method:?}"
        );
        assert_eq!(
            support::texts(
                &db.client,
                &format!("SELECT id || ':' || pid FROM {t} ORDER BY id")
            )
            .await,
            ["1:1", "2:1", "3:1"],
            "{method:?}"
        );
    }
}

/// Into a partition loaded alone, whose foreign key points at its
/// partitioned parent (the constraint's copy on the partition references
/// the parent, not the partition).
#[tokio::test]
async fn a_partition_whose_key_points_at_its_parent_waits_too() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE pf (id int PRIMARY KEY, parent int REFERENCES pf (id))
                 PARTITION BY RANGE (id);
             CREATE TABLE pf0 PARTITION OF pf FOR VALUES FROM (0) TO (100000);",
        )
        .await
        .unwrap();
    let report = load(&db, "pf0", &parents_first(600, None), Method::Copy, true).await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!((report.rows_loaded, report.rows_rejected), (600, 0));
}
