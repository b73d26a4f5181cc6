//! What the options do to the target and the report: --truncate (one
//! transaction per table, FREEZE), --verify, --schema (largest first) and
//! --target-table, and the errors before any write that name the side.

use std::sync::Arc;

use pgtide::ident::QualifiedName;
use pgtide::progress::Progress;
use pgtide::transfer::{self, TransferOptions};

use super::{both, copy, copy_ok, names, pair, same_rows};

#[tokio::test]
async fn truncate_loads_each_table_in_one_transaction_with_freeze() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         CREATE TABLE p (id int, v text) PARTITION BY RANGE (id);
         CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (1000);
         CREATE TABLE p2 PARTITION OF p FOR VALUES FROM (1000) TO (100000);",
    )
    .await;
    src.client
        .batch_execute(
            "INSERT INTO t SELECT g, repeat('x', 50) FROM generate_series(1, 20000) g;
             INSERT INTO p SELECT g, 'p' FROM generate_series(1, 5000) g;",
        )
        .await
        .unwrap();
    dst.client
        .batch_execute(
            "INSERT INTO t SELECT g, 'old' FROM generate_series(1, 100) g;
             INSERT INTO p VALUES (1, 'old')",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["t", "p"]));
    o.truncate = true;
    o.workers = 2;
    o.verify = true;
    let r = copy_ok(&src, &dst, &o).await;
    let t = r.tables.iter().find(|t| t.source == "public.t").unwrap();
    assert!(
        t.freeze && t.truncated && t.freeze_reason.is_none(),
        "{t:?}"
    );
    assert_eq!(
        (t.ranges, t.committed.as_slice()),
        (1, &["whole table".to_owned()][..])
    );
    let p = r.tables.iter().find(|t| t.source == "public.p").unwrap();
    assert!(!p.freeze, "{p:?}");
    assert!(p.freeze_reason.as_deref().unwrap().contains("partitioned"));
    same_rows(&src, &dst, "t").await;
    same_rows(&src, &dst, "p").await;
    // The rows were written frozen: t's pages are all-frozen.
    if dst
        .client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_visibility")
        .await
        .is_ok()
    {
        let row = dst
            .client
            .query_one(
                "SELECT all_frozen, pg_relation_size('t') / 8192 FROM pg_visibility_map_summary('t')",
                &[],
            )
            .await
            .unwrap();
        let (frozen, pages): (i64, i64) = (row.get(0), row.get(1));
        // Without FREEZE no page is all-frozen before a VACUUM. PG 17
        // leaves a few pages unmarked (a page topped up by a later batch
        // of the same COPY), PG 15 none.
        assert!(
            pages > 10 && frozen * 10 >= pages * 9,
            "{frozen} of {pages} pages frozen"
        );
    } else {
        eprintln!("pg_visibility is not installed: FREEZE taken from the report only");
    }
}

#[tokio::test]
async fn verify_catches_a_target_that_differs() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE TABLE v (id int, s text); CREATE TABLE w (id int)",
    )
    .await;
    src.client
        .batch_execute(
            "INSERT INTO v SELECT g, 's' || g FROM generate_series(1, 1000) g;
             INSERT INTO w SELECT g FROM generate_series(1, 10) g",
        )
        .await
        .unwrap();
    // The target rewrites one value on the way in: same count, other hash.
    dst.client
        .batch_execute(
            "CREATE FUNCTION bump() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN IF NEW.id = 500 THEN NEW.s := 'changed'; END IF; RETURN NEW; END $$;
             CREATE TRIGGER bump BEFORE INSERT ON v FOR EACH ROW EXECUTE FUNCTION bump();",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["v", "w"]));
    o.verify = true;
    o.workers = 2;
    let r = copy(&src, &dst, &o).await;
    let e = r.failure.expect("verify must fail");
    assert!(e.message().contains("public.v"), "{e:?}");
    assert!(!e.message().contains("public.w"), "{e:?}");
    assert!(e.hint().is_some());
    let v = r.tables.iter().find(|t| t.source == "public.v").unwrap();
    let got = v.verify.as_ref().unwrap();
    assert!(
        !got.matched && got.source.rows == got.target.rows,
        "{got:?}"
    );
    assert!(
        r.tables
            .iter()
            .find(|t| t.source == "public.w")
            .unwrap()
            .verify
            .as_ref()
            .unwrap()
            .matched
    );
    // Rows already in the target: the counts differ.
    dst.client
        .batch_execute("DROP TRIGGER bump ON v")
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["w"]));
    o.verify = true;
    let r = copy(&src, &dst, &o).await;
    let w = r.tables[0].verify.clone().unwrap();
    assert_eq!((w.source.rows, w.target.rows), (10, 20));
    assert!(r.failure.unwrap().message().contains("public.w"));
}

#[tokio::test]
async fn errors_before_any_write_name_the_side() {
    let (src, dst) = pair().await;
    both(&src, &dst, "CREATE TABLE a (id int, x text)").await;
    src.client
        .batch_execute("CREATE TABLE only_src (id int); ALTER TABLE a ADD COLUMN y int")
        .await
        .unwrap();
    let run = |tables: &[&str]| {
        let o = TransferOptions::new(names(tables));
        let (s, d) = (src.target.clone(), dst.target.clone());
        async move {
            transfer::run(&s, &d, &o, Arc::new(Progress::new(1)))
                .await
                .expect_err("must fail")
        }
    };
    let e = run(&["nope"]).await;
    assert!(e.message().contains("on the source"), "{e:?}");
    assert!(e.hint().unwrap().contains("--from"), "{e:?}");
    let e = run(&["only_src"]).await;
    assert!(e.message().contains("on the target"), "{e:?}");
    assert!(e.hint().unwrap().contains("--create"), "{e:?}");
    let e = run(&["a"]).await;
    assert!(e.message().contains("no column \"y\""), "{e:?}");
    // The same table on both sides.
    let o = TransferOptions::new(names(&["a"]));
    let e = transfer::run(&src.target, &src.target, &o, Arc::new(Progress::new(1)))
        .await
        .err()
        .unwrap();
    assert!(e.message().contains("same table"), "{e:?}");
    // The same database with other session settings is still the same
    // database (a start time shown as text follows TimeZone: outside
    // testing, the table was copied onto itself, its rows twice).
    for setting in ["TimeZone=UTC+5", "DateStyle=SQL"] {
        let conninfo = format!("{} options=-c{setting}", src.cluster.conninfo());
        let other =
            pgtide::conn::Target::parse_with(&conninfo, &pgtide::conn::Env::empty()).unwrap();
        let e = transfer::run(&src.target, &other, &o, Arc::new(Progress::new(1)))
            .await
            .err()
            .unwrap();
        assert!(e.message().contains("same table"), "{setting}: {e:?}");
    }
    // A partition and its parent, or an inheritance child and its parent,
    // with --truncate: the TRUNCATE would wait forever on the lock that
    // reading the source holds (outside testing: a hang).
    src.client
        .batch_execute(
            "CREATE TABLE pp (id int) PARTITION BY LIST (id);
             CREATE TABLE pp1 PARTITION OF pp FOR VALUES IN (1);
             CREATE TABLE pp2 PARTITION OF pp DEFAULT;
             CREATE TABLE par (id int); CREATE TABLE chi () INHERITS (par);
             CREATE TABLE chi2 () INHERITS (par);
             INSERT INTO pp VALUES (1), (2); INSERT INTO chi VALUES (3);",
        )
        .await
        .unwrap();
    for (from, to) in [("pp", "pp1"), ("pp1", "pp"), ("par", "chi")] {
        let mut o = TransferOptions::new(names(&[from]));
        o.target_table = Some(QualifiedName::parse(to).unwrap());
        o.truncate = true;
        let run = transfer::run(&src.target, &src.target, &o, Arc::new(Progress::new(1)));
        let e = tokio::time::timeout(std::time::Duration::from_secs(60), run)
            .await
            .expect("no hang")
            .err()
            .unwrap();
        assert!(
            e.message().contains("inheritance tree"),
            "{from} -> {to}: {e:?}"
        );
    }
    // Siblings do not lock each other: that copy runs.
    let mut o = TransferOptions::new(names(&["chi"]));
    o.target_table = Some(QualifiedName::parse("chi2").unwrap());
    o.truncate = true;
    let run = transfer::run(&src.target, &src.target, &o, Arc::new(Progress::new(1)));
    let r = tokio::time::timeout(std::time::Duration::from_secs(60), run).await;
    assert!(r.expect("no hang").is_ok());
}

#[tokio::test]
async fn schema_copies_every_table_largest_first() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE SCHEMA app;
         CREATE TABLE app.small (id int);
         CREATE TABLE app.large (id int, pad text);
         CREATE TABLE app.mid (id int, pad text);",
    )
    .await;
    src.client
        .batch_execute(
            "INSERT INTO app.small VALUES (1);
             INSERT INTO app.large SELECT g, repeat('l', 100) FROM generate_series(1, 30000) g;
             INSERT INTO app.mid SELECT g, repeat('m', 100) FROM generate_series(1, 3000) g;",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(vec![]);
    o.schemas = vec!["app".into()];
    o.workers = 2;
    o.verify = true;
    let r = copy_ok(&src, &dst, &o).await;
    let order: Vec<&str> = r.tables.iter().map(|t| t.source.as_str()).collect();
    assert_eq!(order, ["app.large", "app.mid", "app.small"]);
    assert_eq!(r.rows, 33001);
    // --target-table into another name on the same server.
    src.client
        .batch_execute("CREATE TABLE app.large_copy (LIKE app.large)")
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["app.large"]));
    o.target_table = Some(QualifiedName::parse("app.large_copy").unwrap());
    o.workers = 2;
    o.verify = true;
    let r = copy_ok(&src, &src, &o).await;
    assert_eq!(r.tables[0].target, "app.large_copy");
    assert_eq!(r.tables[0].format, "binary");
}

/// An inheritance parent's rows are its own, as `COPY parent TO` reads
/// them: its children are tables of their own (copied as such with
/// --schema), so the parent's copy neither brings their rows again nor
/// (with --truncate) empties them on the target.
#[tokio::test]
async fn inheritance_children_are_copied_once_and_never_emptied() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE SCHEMA inh;
         CREATE TABLE inh.parent (id int, v text);
         CREATE TABLE inh.child (extra int) INHERITS (inh.parent);",
    )
    .await;
    src.client
        .batch_execute(
            "INSERT INTO inh.parent SELECT g, 'p' FROM generate_series(1, 5) g;
             INSERT INTO inh.child SELECT g, 'c', g FROM generate_series(101, 103) g;",
        )
        .await
        .unwrap();
    async fn counts(s: &super::Server) -> (i64, i64) {
        {
            let r = s
                .client
                .query_one(
                    "SELECT (SELECT count(*) FROM ONLY inh.parent),
                            (SELECT count(*) FROM inh.child WHERE extra IS NOT NULL)",
                    &[],
                )
                .await
                .unwrap();
            (r.get::<_, i64>(0), r.get::<_, i64>(1))
        }
    }
    for truncate in [false, true] {
        dst.client
            .batch_execute("TRUNCATE inh.parent")
            .await
            .unwrap();
        let mut o = TransferOptions::new(Vec::new());
        o.schemas = vec!["inh".to_owned()];
        o.truncate = truncate;
        o.verify = true;
        o.workers = 2;
        copy_ok(&src, &dst, &o).await;
        assert_eq!(counts(&dst).await, (5, 3), "--schema, truncate {truncate}");
        // The parent alone, again: its own rows replaced or added, the
        // child's untouched.
        let mut o = TransferOptions::new(names(&["inh.parent"]));
        o.truncate = true;
        o.verify = true;
        copy_ok(&src, &dst, &o).await;
        assert_eq!(
            counts(&dst).await,
            (5, 3),
            "the parent, truncate {truncate}"
        );
    }
}
