//! `--defer-constraints` (issue 9 part 3): PRIMARY KEY and UNIQUE
//! constraints dropped with their indexes before the load and added back
//! after it, exactly as they were; duplicates loaded make the re-add fail
//! with an error naming the constraint, the definition kept for
//! `pgtide ledger restore-indexes`; the refusals.

mod support;

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use pgtide::ident::QualifiedName;
use pgtide::load::{self, indexes, LoadOptions};
use pgtide::progress::Progress;
use support::Db;

const TABLE: &str = "CREATE TABLE {t} (id int PRIMARY KEY, n int NOT NULL, s text,
        CONSTRAINT {t}_s_key UNIQUE (s) DEFERRABLE INITIALLY DEFERRED);
     CREATE INDEX {t}_n ON {t} (n);
     CREATE UNIQUE INDEX {t}_lower ON {t} (lower(s));";

async fn table(db: &Db, t: &str) {
    db.client
        .batch_execute(&TABLE.replace("{t}", t))
        .await
        .unwrap();
}

/// Everything that must come back: index definitions, constraint
/// definitions (with their index), NOT NULL columns.
async fn shape(db: &Db, t: &str) -> Vec<String> {
    db.client
        .query(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = $1::text::regclass
             UNION ALL
             SELECT conname || ' ' || pg_get_constraintdef(oid) || ' on ' || conindid::regclass
             FROM pg_constraint WHERE conrelid = $1::text::regclass AND contype IN ('p', 'u')
             UNION ALL
             SELECT attname || ' not null' FROM pg_attribute
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND attnotnull
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
    o.defer_constraints = true;
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

async fn saved(db: &Db) -> Vec<indexes::Saved> {
    indexes::saved(&db.client, None).await.unwrap()
}

async fn constraint_count(db: &Db, t: &str) -> i64 {
    db.client
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = $1::text::regclass \
             AND contype IN ('p', 'u')",
            &[&t],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn constraints_come_back_as_they_were() {
    let db = Db::start().await;
    table(&db, "dc").await;
    let before = shape(&db, "dc").await;
    let r = load::run(
        &db.target,
        &options(&db, &rows(20_000), "dc"),
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
    // dc_n, and the two constraints' indexes; the unique index without
    // a constraint (dc_lower) is kept.
    assert!(note.contains("3 indexes"), "{note}");
    assert_eq!(shape(&db, "dc").await, before);
    assert!(saved(&db).await.is_empty());
    // The constraint works again.
    let dup = db
        .client
        .batch_execute("INSERT INTO dc VALUES (7, 1, 'new')")
        .await
        .unwrap_err();
    assert_eq!(dup.code().unwrap().code(), "23505");

    // Killed between the drop and the re-add: restore-indexes finishes.
    let t = pgtide::catalog::Table::resolve(&db.client, &QualifiedName::parse("dc").unwrap())
        .await
        .unwrap();
    assert_eq!(
        indexes::drop_saved_with(&db.client, &t, true)
            .await
            .unwrap(),
        3
    );
    assert_eq!(constraint_count(&db, "dc").await, 0);
    let rebuilt = indexes::rebuild(&db.target, None, 2).await.unwrap();
    assert!(rebuilt.failure.is_none(), "{:?}", rebuilt.failure);
    assert_eq!(shape(&db, "dc").await, before);
    assert!(saved(&db).await.is_empty());
}

/// What a rebuild from the definition would lose, index by index: the
/// replica identity, the CLUSTER mark, comments, statistics targets.
async fn marks(db: &Db, t: &str) -> Vec<String> {
    db.client
        .query(
            "SELECT format('%s replident=%s clustered=%s comment=%s tablespace=%s stats=%s',
                    c.relname, i.indisreplident, i.indisclustered,
                    obj_description(c.oid, 'pg_class'),
                    (SELECT spcname FROM pg_tablespace WHERE oid = c.reltablespace),
                    (SELECT string_agg(coalesce(a.attstattarget, -1)::text, ',')
                     FROM pg_attribute a WHERE a.attrelid = c.oid))
             FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
             WHERE i.indrelid = $1::text::regclass
             UNION ALL
             SELECT format('%s comment=%s', conname, obj_description(oid, 'pg_constraint'))
             FROM pg_constraint WHERE conrelid = $1::text::regclass
             UNION ALL
             SELECT format('replident=%s', relreplident) FROM pg_class
             WHERE oid = $1::text::regclass
             ORDER BY 1",
            &[&t],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
async fn what_a_rebuild_would_lose_is_kept_as_it_is() {
    let db = Db::start().await;
    let mut sql = "CREATE TABLE km (id int PRIMARY KEY, c int NOT NULL, a int, b int, d int,
             CONSTRAINT km_c UNIQUE (c), CONSTRAINT km_d UNIQUE (d));
         ALTER TABLE km REPLICA IDENTITY USING INDEX km_c;
         COMMENT ON CONSTRAINT km_d ON km IS 'keep me';
         CREATE INDEX km_a ON km (a); COMMENT ON INDEX km_a IS 'keep me too';
         CREATE INDEX km_b ON km (b); ALTER TABLE km CLUSTER ON km_b;
         CREATE INDEX km_e ON km ((a + 1)); ALTER INDEX km_e ALTER COLUMN 1 SET STATISTICS 300;
         CREATE INDEX km_plain ON km (a, b);"
        .to_owned();
    // An index in a tablespace of its own (which `pg_get_indexdef` leaves
    // out) stays there, and the rebuilt one stays in the default even when
    // the role's default_tablespace names another.
    let owner = std::fs::metadata(db.cluster.data_dir()).unwrap();
    for space in ["elsewhere", "role_default"] {
        let place = db.cluster.data_dir().join(format!("test_{space}"));
        std::fs::create_dir(&place).unwrap();
        std::os::unix::fs::chown(&place, Some(owner.uid()), Some(owner.gid())).unwrap();
        let create = format!("CREATE TABLESPACE {space} LOCATION '{}'", place.display());
        db.client.batch_execute(&create).await.unwrap();
    }
    sql += "CREATE INDEX km_ts ON km (b, a) TABLESPACE elsewhere;
            ALTER ROLE CURRENT_USER SET default_tablespace = role_default;";
    // PostgreSQL 18's temporal keys: their GiST index cannot be attached
    // as a unique one.
    let temporal = pgtide::catalog::server_major(&db.client).await.unwrap() >= 18;
    if temporal {
        sql += "CREATE EXTENSION btree_gist;
            CREATE TABLE kt (id int, valid daterange, v int,
                             CONSTRAINT kt_pk PRIMARY KEY (id, valid WITHOUT OVERLAPS));";
    }
    db.client.batch_execute(&sql).await.unwrap();
    let (shape_before, marks_before) = (shape(&db, "km").await, marks(&db, "km").await);
    let data: Vec<u8> = (0..2_000)
        .map(|i| format!("{i},{i},{},{},{i}\n", i % 7, i % 9))
        .collect::<String>()
        .into_bytes();
    let r = load::run(
        &db.target,
        &options(&db, &data, "km"),
        Arc::new(Progress::new(2)),
    )
    .await
    .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("--defer-indexes"))
        .expect("a note");
    // Only km_plain and the primary key go: the others are kept.
    assert!(note.contains("2 indexes"), "{note}");
    assert_eq!(shape(&db, "km").await, shape_before);
    assert_eq!(marks(&db, "km").await, marks_before);
    if temporal {
        let before = shape(&db, "kt").await;
        let data = b"1,\"[2024-01-01,2024-02-01)\",1\n1,\"[2024-02-01,2024-03-01)\",2\n";
        let r = load::run(
            &db.target,
            &options(&db, data, "kt"),
            Arc::new(Progress::new(2)),
        )
        .await
        .unwrap();
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(shape(&db, "kt").await, before);
    }
    assert!(saved(&db).await.is_empty());
}

#[tokio::test]
async fn duplicates_fail_the_load_naming_the_constraint_and_stay_restorable() {
    let db = Db::start().await;
    table(&db, "dd").await;
    let before = shape(&db, "dd").await;
    let mut data = rows(5_000);
    data.extend_from_slice(b"17,3,other\n");
    let r = load::run(
        &db.target,
        &options(&db, &data, "dd"),
        Arc::new(Progress::new(2)),
    )
    .await
    .unwrap();
    assert_eq!(
        r.rows_loaded, 5_001,
        "duplicates are not refused row by row"
    );
    let e = r.failure.expect("the re-add fails");
    assert!(
        e.message().contains("constraint dd_pkey of"),
        "names the constraint: {e}"
    );
    let hint = e.hint().unwrap();
    assert!(hint.contains("restore-indexes"), "{hint}");
    assert!(
        hint.contains(r#"SELECT "id", count(*) FROM "public"."dd""#)
            || hint.contains(r#"SELECT "id", count(*) FROM "dd""#),
        "{hint}"
    );
    let kept = saved(&db).await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    let c = kept[0].constraint.as_ref().unwrap();
    assert_eq!(c.name, "dd_pkey");
    // The other indexes and the unique constraint came back.
    assert_eq!(constraint_count(&db, "dd").await, 1);

    // The query of the hint finds the duplicate; deleted, restore-indexes
    // adds the key back.
    let dups = db.client.query(&c.duplicates_sql, &[]).await.unwrap();
    assert_eq!(dups.len(), 1);
    assert_eq!(dups[0].get::<_, i32>(0), 17);
    db.client
        .batch_execute("DELETE FROM dd WHERE id = 17 AND s = 'other'")
        .await
        .unwrap();
    let rebuilt = indexes::rebuild(&db.target, None, 2).await.unwrap();
    assert!(rebuilt.failure.is_none(), "{:?}", rebuilt.failure);
    assert_eq!(shape(&db, "dd").await, before);
    assert!(saved(&db).await.is_empty());
}

/// One index that cannot be built does not keep the others from being
/// built, even on one session (indexes are built in name order: dd1_pkey
/// fails before dd1_s_key is tried), and the summary names it.
#[tokio::test]
async fn a_failed_rebuild_leaves_the_others_built() {
    let db = Db::start().await;
    table(&db, "dd1").await;
    let mut data = rows(500);
    data.extend_from_slice(b"17,3,other\n");
    let mut o = options(&db, &data, "dd1");
    o.workers = 1;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_some(), "the primary key cannot come back");
    let kept = saved(&db).await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].constraint.as_ref().unwrap().name, "dd1_pkey");
    assert_eq!(constraint_count(&db, "dd1").await, 1, "dd1_s_key is back");
    assert!(
        r.notes.iter().any(|n| n.contains("not built: dd1_pkey")),
        "{:?}",
        r.notes
    );
}

#[tokio::test]
async fn refusals_leave_the_table_as_it_was() {
    let db = Db::start().await;
    table(&db, "rk").await;
    db.client
        .batch_execute(
            "INSERT INTO rk VALUES (1, 1, 'a');
             CREATE TABLE child (id int REFERENCES rk (id));
             CREATE TABLE pk (id int PRIMARY KEY) PARTITION BY RANGE (id);
             CREATE TABLE pk0 PARTITION OF pk FOR VALUES FROM (0) TO (1000000);",
        )
        .await
        .unwrap();
    let before = shape(&db, "rk").await;
    let refused = |o: LoadOptions| {
        let target = db.target.clone();
        async move {
            load::run(&target, &o, Arc::new(Progress::new(2)))
                .await
                .unwrap_err()
        }
    };
    let mut o = options(&db, &rows(10), "rk");
    o.truncate = true;
    let e = refused(o).await;
    assert!(
        e.message()
            .contains("foreign key child_id_fkey of child references rk_pkey"),
        "{e}"
    );
    assert!(e.hint().is_some());

    let mut o = options(&db, &rows(10), "pk");
    o.truncate = true;
    let e = refused(o).await;
    assert!(e.message().contains("partitioned"), "{e}");

    db.client.batch_execute("DROP TABLE child").await.unwrap();
    let mut o = options(&db, &rows(10), "rk");
    o.on_conflict = Some(load::upsert::OnConflict::Update);
    let e = refused(o).await;
    assert!(e.message().contains("--on-conflict"), "{e}");

    let mut o = options(&db, &rows(10), "rk");
    o.defer_indexes = false;
    let e = refused(o).await;
    assert!(e.message().contains("needs --defer-indexes"), "{e}");

    assert_eq!(shape(&db, "rk").await, before);
    let n: i64 = db
        .client
        .query_one("SELECT count(*) FROM rk", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "nothing truncated, nothing loaded");
}

#[tokio::test]
async fn with_a_single_transaction_and_freeze() {
    let db = Db::start().await;
    table(&db, "sf").await;
    db.client
        .batch_execute("INSERT INTO sf VALUES (-1, 0, 'old')")
        .await
        .unwrap();
    let before = shape(&db, "sf").await;
    let mut o = options(&db, &rows(10_000), "sf");
    o.workers = 1;
    o.truncate = true;
    o.single_transaction = true;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(r.freeze.used, "{:?}", r.freeze);
    assert_eq!(r.rows_loaded, 10_000);
    assert_eq!(shape(&db, "sf").await, before);
    assert!(saved(&db).await.is_empty());
}

#[tokio::test]
async fn a_ledger_made_by_an_earlier_pgtide_is_read_and_upgraded() {
    let db = Db::start().await;
    table(&db, "old").await;
    let before = shape(&db, "old").await;
    // The ledger as pgtide made it before --defer-constraints, holding an
    // index dropped by an interrupted load.
    db.client
        .batch_execute(
            "CREATE SCHEMA pgtide;
             CREATE TABLE pgtide.deferred_indexes (
                 table_oid oid NOT NULL, table_name text NOT NULL,
                 index_name text NOT NULL, definition text NOT NULL,
                 deferred_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                 PRIMARY KEY (table_oid, index_name));
             INSERT INTO pgtide.deferred_indexes (table_oid, table_name, index_name, definition)
             SELECT 'old'::regclass, 'public.old', 'old_n', pg_get_indexdef('old_n'::regclass);
             DROP INDEX old_n;",
        )
        .await
        .unwrap();
    let kept = saved(&db).await;
    assert_eq!(kept.len(), 1);
    assert!(kept[0].constraint.is_none());
    let r = load::run(
        &db.target,
        &options(&db, &rows(100), "old"),
        Arc::new(Progress::new(2)),
    )
    .await
    .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(shape(&db, "old").await, before);
    assert!(saved(&db).await.is_empty());
}
