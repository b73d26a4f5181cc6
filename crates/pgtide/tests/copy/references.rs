//! Tables tied by the target's foreign keys: a referenced table is copied
//! before the tables that reference it (the larger referencing table
//! went first and failed), `--truncate` empties a referenced table with
//! those that reference it (PostgreSQL refuses it alone), and a table
//! that references itself is copied by one COPY, whose checks run at its
//! end, rather than in ranges committed one by one.

use pgtide::transfer::TransferOptions;

use super::{both, copy_ok, names, pair, same_rows};

const SCHEMA: &str = "
    CREATE TABLE par (id int PRIMARY KEY, v text);
    CREATE TABLE kid (id int PRIMARY KEY, pid int REFERENCES par, pad text);
    CREATE TABLE grandkid (id int PRIMARY KEY, kid int REFERENCES kid);
    CREATE TABLE boss (id int PRIMARY KEY, boss int REFERENCES boss, pad text);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referenced_tables_go_first_and_a_self_reference_goes_whole() {
    let (src, dst) = pair().await;
    both(&src, &dst, SCHEMA).await;
    // kid and boss are far larger than par (largest first would start
    // them first); each boss row references one in a far block.
    src.client
        .batch_execute(
            "INSERT INTO par SELECT g, 'p' FROM generate_series(1, 100) g;
             INSERT INTO kid SELECT g, 1 + g % 100, repeat('k', 200) FROM generate_series(1, 20000) g;
             INSERT INTO grandkid SELECT g, g FROM generate_series(1, 20000) g;
             INSERT INTO boss SELECT g, NULL, repeat('b', 200) FROM generate_series(1, 20000) g;
             UPDATE boss SET boss = 1 + (id + 10000) % 20000;",
        )
        .await
        .unwrap();
    let tables = ["public.grandkid", "public.kid", "public.par", "public.boss"];
    for truncate in [false, true] {
        if !truncate {
            dst.client
                .batch_execute("TRUNCATE par, kid, grandkid, boss")
                .await
                .unwrap();
        }
        let mut o = TransferOptions::new(names(&tables));
        o.workers = 3;
        o.truncate = truncate;
        o.verify = true;
        copy_ok(&src, &dst, &o).await;
        for t in ["par", "kid", "grandkid", "boss"] {
            same_rows(&src, &dst, t).await;
        }
    }
}

/// Partitions copied as tables of their own (`--schema` of the schema
/// that holds them) are tied through their parents' foreign key, which no
/// catalog row names for the partitions themselves; and tables that
/// reference each other are refused with `--truncate` before anything is
/// written (one of them would be emptied with the other and left so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_tied_through_their_parents_and_cycles_refuse_truncate() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE SCHEMA x; CREATE SCHEMA s;
         CREATE TABLE x.cust (id int PRIMARY KEY) PARTITION BY RANGE (id);
         CREATE TABLE s.cust1 PARTITION OF x.cust FOR VALUES FROM (0) TO (100000);
         CREATE TABLE x.ord (id int, cid int, r int, pad text, PRIMARY KEY (id, r))
             PARTITION BY LIST (r);
         CREATE TABLE s.ord1 PARTITION OF x.ord FOR VALUES IN (1);
         CREATE TABLE a (id int PRIMARY KEY, b_id int);
         CREATE TABLE b (id int PRIMARY KEY, a_id int);",
    )
    .await;
    dst.client
        .batch_execute(
            "ALTER TABLE x.ord ADD FOREIGN KEY (cid) REFERENCES x.cust;
             ALTER TABLE a ADD FOREIGN KEY (b_id) REFERENCES b;
             ALTER TABLE b ADD FOREIGN KEY (a_id) REFERENCES a;",
        )
        .await
        .unwrap();
    src.client
        .batch_execute(
            "INSERT INTO x.cust SELECT generate_series(1, 1000);
             INSERT INTO x.ord SELECT g, g % 1000 + 1, 1, repeat('y', 100)
               FROM generate_series(1, 20000) g;
             INSERT INTO a SELECT g, NULL FROM generate_series(1, 100) g;
             INSERT INTO b SELECT g, NULL FROM generate_series(1, 10) g;",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(Vec::new());
    o.schemas = vec!["s".into()];
    o.workers = 2;
    copy_ok(&src, &dst, &o).await;
    same_rows(&src, &dst, "s.ord1").await;

    dst.client
        .batch_execute("INSERT INTO b VALUES (99, NULL)")
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["public.a", "public.b"]));
    o.truncate = true;
    let e = pgtide::transfer::run(
        &src.target,
        &dst.target,
        &o,
        std::sync::Arc::new(pgtide::progress::Progress::new(1)),
    )
    .await
    .expect_err("refused");
    assert!(e.message().contains("reference each other"), "{e}");
    let n: i64 = dst
        .client
        .query_one("SELECT count(*) FROM b", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "nothing emptied");
}

/// A `TRUNCATE` the target refuses (a table that is not copied references
/// it) empties nothing, and the summary does not say it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_truncate_is_not_reported_as_done() {
    let (src, dst) = pair().await;
    both(&src, &dst, "CREATE TABLE fa (id int PRIMARY KEY)").await;
    dst.client
        .batch_execute(
            "CREATE TABLE fb (a int REFERENCES fa);
             INSERT INTO fa VALUES (1), (2); INSERT INTO fb VALUES (1);",
        )
        .await
        .unwrap();
    src.client
        .batch_execute("INSERT INTO fa VALUES (7)")
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["public.fa"]));
    o.truncate = true;
    let report = super::copy(&src, &dst, &o).await;
    assert!(report.failure.is_some(), "the TRUNCATE is refused");
    assert!(!report.tables[0].truncated, "{:?}", report.tables[0]);
    let n: i64 = dst
        .client
        .query_one("SELECT count(*) FROM fa", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "fa as it was");
}
