//! A row routed on the client is stored as a load through the
//! coordinator's parent table would store it (outside testing found two
//! ways it was not, both silent):
//! - the shard's session read dates, times and intervals with the
//!   shard's own settings (of its role or database), not with the
//!   coordinator's;
//! - a remote column of another type than the foreign table's (plain
//!   `numeric` behind `numeric(10,2)`) kept digits the coordinator rounds;
//! - and three ways the shard's table acted otherwise: defaults, triggers
//!   that drop rows, deferred unique keys.

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::LoadOptions;
use pgtide::progress::Progress;
use support::Db;

/// Loads `data` into `table` with one worker, `set` adjusting the
/// options; the load must start.
async fn load(
    db: &Db,
    table: &str,
    data: &[u8],
    format: CopyFormat,
    set: impl FnOnce(&mut LoadOptions),
) -> pgtide::load::Report {
    let path = db.file(data, support::Compress::None);
    let mut opts = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse(table).unwrap(),
        format,
    );
    set(&mut opts);
    pgtide::load::run(&db.target, &opts, Arc::new(Progress::new(1)))
        .await
        .unwrap()
}

const COLUMNS: &str = "n int, d date, tz timestamptz, iv interval, a text[], amt numeric(10,2)";

#[tokio::test]
async fn routed_rows_are_read_as_the_coordinator_reads_them() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    // r0 has the foreign table's types; r1's amount is plain numeric.
    remote
        .batch_execute(&format!(
            "CREATE TABLE r0 ({COLUMNS});
             CREATE TABLE r1 ({});
             ALTER ROLE CURRENT_USER SET IntervalStyle = 'sql_standard';
             ALTER ROLE CURRENT_USER SET TimeZone = 'Pacific/Chatham';
             ALTER ROLE CURRENT_USER SET DateStyle = 'ISO, MDY';",
            COLUMNS.replace("numeric(10,2)", "numeric")
        ))
        .await
        .unwrap();
    db.client
        .batch_execute(&format!(
            "CREATE TABLE s ({COLUMNS}) PARTITION BY HASH (n);
             CREATE FOREIGN TABLE s0 PARTITION OF s FOR VALUES WITH (modulus 2, remainder 0)
                 SERVER shard2 OPTIONS (table_name 'r0');
             CREATE FOREIGN TABLE s1 PARTITION OF s FOR VALUES WITH (modulus 2, remainder 1)
                 SERVER shard2 OPTIONS (table_name 'r1');
             CREATE TABLE want ({COLUMNS});
             ALTER ROLE CURRENT_USER SET DateStyle = 'ISO, DMY';
             ALTER ROLE CURRENT_USER SET TimeZone = 'Asia/Tokyo';"
        ))
        .await
        .unwrap();
    let csv: String = (1..=200)
        .map(|n| {
            format!(
                "{n},{}/2/2024,2024-01-01 00:00:00,-1 2:03:{:02},\"{{a,NULL}}\",1.{n:03}9\n",
                n % 28 + 1,
                n % 60
            )
        })
        .collect();
    let path = db.file(csv.as_bytes(), support::Compress::None);
    // The reference: the coordinator's own COPY, in a session with the
    // role's settings (as pgtide's sessions have them).
    let fresh = db.target.connect().await.unwrap();
    fresh
        .batch_execute(&format!("COPY want FROM '{}' (FORMAT csv)", path.display()))
        .await
        .unwrap();
    let opts = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("s").unwrap(),
        CopyFormat::Csv,
    );
    // --explain names each leaf's way, and why s1's is the coordinator.
    let plan = pgtide::load::explain(&db.target, &opts).await.unwrap();
    let leaves: Vec<&str> = plan
        .lines
        .iter()
        .filter(|(what, _)| what == "leaf")
        .map(|(_, how)| how.as_str())
        .collect();
    assert!(
        leaves
            .iter()
            .any(|l| l.contains("s0 -> ") && l.contains("r0 on shard2")),
        "{leaves:?}"
    );
    assert!(
        leaves
            .iter()
            .any(|l| l.contains("s1 -> through the coordinator") && l.contains("\"amt\"")),
        "{leaves:?}"
    );
    let report = pgtide::load::run(&db.target, &opts, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_loaded, 200);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("routed on the client")),
        "r0's rows go to the shard directly: {:?}",
        report.notes
    );
    support::assert_same_rows(&db.client, "s", "want", "a sharded load").await;
    // Read through the foreign table, r1's amounts would be rounded by
    // the reading: look at what the shard stores.
    let unrounded: i64 = remote
        .query_one("SELECT count(*) FROM r1 WHERE amt <> round(amt, 2)", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        unrounded, 0,
        "r1 holds amounts the coordinator would have rounded"
    );
    let stored: i64 = remote
        .query_one("SELECT count(*) FROM r1", &[])
        .await
        .unwrap()
        .get(0);
    assert!(stored > 0, "some rows hash to r1");
}

/// What only the coordinator path reads as the parent would store it goes
/// through the coordinator: a domain (the shard's of the same name may
/// check less), and arrays when `array_nulls` differs (postgres_fdw reads
/// a value with the coordinator's, then again with the shard's).
#[tokio::test]
async fn domains_and_differing_array_nulls_go_through_the_coordinator() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    remote
        .batch_execute(
            "CREATE DOMAIN pd AS int;
             CREATE TABLE rd (k int, p pd);
             CREATE TABLE ra (k int, a text[]);",
        )
        .await
        .unwrap();
    db.client
        .batch_execute(
            "CREATE DOMAIN pd AS int CHECK (VALUE > 0);
             CREATE TABLE d (k int, p pd) PARTITION BY LIST (k);
             CREATE FOREIGN TABLE d0 PARTITION OF d FOR VALUES IN (1, 2)
                 SERVER shard2 OPTIONS (table_name 'rd');
             CREATE TABLE a (k int, a text[]) PARTITION BY LIST (k);
             CREATE FOREIGN TABLE a0 PARTITION OF a FOR VALUES IN (1, 2)
                 SERVER shard2 OPTIONS (table_name 'ra');
             ALTER ROLE CURRENT_USER SET array_nulls = off;",
        )
        .await
        .unwrap();
    let load = |table: &str, csv: &str| {
        let path = db.file(csv.as_bytes(), support::Compress::None);
        let opts = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse(table).unwrap(),
            CopyFormat::Csv,
        );
        let target = db.target.clone();
        async move {
            pgtide::load::run(&target, &opts, Arc::new(Progress::new(1)))
                .await
                .unwrap()
        }
    };
    // The coordinator's domain refuses -3, as \copy into d would.
    let r = load("d", "1,5\n2,-3\n").await;
    let e = r.failure.expect("the domain's CHECK refuses -3");
    assert_eq!(e.sqlstate(), Some("23514"), "{e}");
    // Arrays: what \copy into the parent stores, a string "NULL" here.
    let r = load("a", "1,\"{x,NULL}\"\n").await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let stored = support::texts(&remote, "SELECT (a[2] IS NULL)::text FROM ra").await;
    assert_eq!(stored, ["false"]);
}

/// What the shard's table itself does (outside testing found three ways
/// the client's route differed from the coordinator's): a column missing
/// from the input is NULL, not the remote table's default (postgres_fdw
/// sends it NULL); rows a remote trigger drops are skipped by the table,
/// not "a bug"; a deferred unique key on the shard rejects rows with
/// `--rejects`, not the whole part at COMMIT.
#[tokio::test]
async fn a_shards_defaults_triggers_and_deferred_keys_act_as_through_the_coordinator() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    remote
        .batch_execute(
            "CREATE TABLE rdf (n int, c text, v int DEFAULT 42);
             CREATE TABLE rtg (n int, v int);
             CREATE FUNCTION dropsome() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN IF NEW.v % 10 = 0 THEN RETURN NULL; END IF; RETURN NEW; END $$;
             CREATE TRIGGER t BEFORE INSERT ON rtg FOR EACH ROW EXECUTE FUNCTION dropsome();
             CREATE TABLE rdd (id int, u int,
               CONSTRAINT rdd_u UNIQUE (u) DEFERRABLE INITIALLY DEFERRED);",
        )
        .await
        .unwrap();
    db.client
        .batch_execute(
            "CREATE TABLE df (n int, c text, v int) PARTITION BY HASH (n);
             CREATE FOREIGN TABLE df0 PARTITION OF df FOR VALUES WITH (modulus 1, remainder 0)
                 SERVER shard2 OPTIONS (table_name 'rdf');
             CREATE TABLE tg (n int, v int) PARTITION BY HASH (n);
             CREATE FOREIGN TABLE tg0 PARTITION OF tg FOR VALUES WITH (modulus 1, remainder 0)
                 SERVER shard2 OPTIONS (table_name 'rtg');
             CREATE TABLE dd (id int, u int) PARTITION BY HASH (id);
             CREATE FOREIGN TABLE dd0 PARTITION OF dd FOR VALUES WITH (modulus 1, remainder 0)
                 SERVER shard2 OPTIONS (table_name 'rdd');",
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rows = |f: fn(i32) -> String| (1..=200).map(f).collect::<String>();
    let csv = CopyFormat::Csv;

    let data = rows(|n| format!("{n},c\n"));
    let r = load(&db, "df", data.as_bytes(), csv, |o| {
        o.columns = Some(vec!["n".into(), "c".into()]);
    })
    .await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let stored = support::texts(&remote, "SELECT count(*)::text FROM rdf WHERE v IS NULL").await;
    assert_eq!(stored, ["200"], "v is NULL, as through the coordinator");

    let data = rows(|n| format!("{n},{n}\n"));
    let r = load(&db, "tg", data.as_bytes(), csv, |_| {}).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_loaded, r.rows_skipped_by_table), (180, 20));
    let stored = support::texts(&remote, "SELECT count(*)::text FROM rtg").await;
    assert_eq!(stored, ["180"]);
    // Through the coordinator, postgres_fdw counts no row for a dropped one.
    let r = load(&db, "tg", data.as_bytes(), csv, |o| {
        o.route = pgtide::load::sharded::Route::Coordinator;
    })
    .await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_loaded, r.rows_skipped_by_table), (180, 20));

    let data = rows(|n| format!("{n},{}\n", n % 150));
    let r = load(&db, "dd", data.as_bytes(), csv, |o| {
        o.rejects = Some(dir.path().join("dd"));
    })
    .await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_loaded, r.rows_rejected), (150, 50));
    let stored = support::texts(&remote, "SELECT count(DISTINCT u)::text FROM rdd").await;
    assert_eq!(stored, ["150"]);
}

/// Binary input goes through the coordinator: the client reads partition
/// keys as text, and an int4 whose four bytes are the digits `1234`
/// (825373492) was stored on the leaf of 1234 (outside testing).
#[tokio::test]
async fn binary_input_is_routed_by_the_coordinator() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    remote
        .batch_execute("CREATE TABLE r1234 (n int); CREATE TABLE rbig (n int);")
        .await
        .unwrap();
    db.client
        .batch_execute(
            "CREATE TABLE hb (n int) PARTITION BY LIST (n);
             CREATE FOREIGN TABLE hb1 PARTITION OF hb FOR VALUES IN (1234)
                 SERVER shard2 OPTIONS (table_name 'r1234');
             CREATE FOREIGN TABLE hb2 PARTITION OF hb FOR VALUES IN (825373492)
                 SERVER shard2 OPTIONS (table_name 'rbig');",
        )
        .await
        .unwrap();
    let data = db
        .server_binary_file("SELECT 825373492 UNION ALL SELECT 1234")
        .await;
    let r = load(&db, "hb", &data, CopyFormat::Binary, |_| {}).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_loaded, 2);
    let stored = support::texts(
        &remote,
        "SELECT 'r1234 ' || n FROM r1234 UNION ALL SELECT 'rbig ' || n FROM rbig ORDER BY 1",
    )
    .await;
    assert_eq!(stored, ["r1234 1234", "rbig 825373492"]);
}

/// A column the input leaves out gets the parent's default (or NULL), as
/// through the parent, whatever the leaf's own: a partition attached
/// without defaults, one with another default, a foreign leaf (outside
/// testing: routed on the client, they stored NULL or their own), and
/// a parent's identity (whose sequence only the parent draws from).
#[tokio::test]
async fn left_out_columns_get_the_parents_defaults() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    remote
        .batch_execute("CREATE TABLE rd (k int, note text, n int); CREATE TABLE ri (id int, k int)")
        .await
        .unwrap();
    db.client
        .batch_execute(
            "CREATE TABLE pd (k int, note text DEFAULT 'n/a', n int) PARTITION BY LIST (k);
             CREATE TABLE pd_bare (k int, note text, n int);
             ALTER TABLE pd ATTACH PARTITION pd_bare FOR VALUES IN (1);
             CREATE TABLE pd_same PARTITION OF pd FOR VALUES IN (2);
             CREATE TABLE pd_other PARTITION OF pd FOR VALUES IN (3);
             ALTER TABLE pd_other ALTER note SET DEFAULT 'other';
             CREATE FOREIGN TABLE pd_far PARTITION OF pd FOR VALUES IN (4)
                 SERVER shard2 OPTIONS (table_name 'rd');
             CREATE TABLE pi (id int GENERATED BY DEFAULT AS IDENTITY, k int)
                 PARTITION BY LIST (k);
             CREATE TABLE pi_bare (id int NOT NULL, k int);
             ALTER TABLE pi ATTACH PARTITION pi_bare FOR VALUES IN (1);
             CREATE FOREIGN TABLE pi_far PARTITION OF pi FOR VALUES IN (2)
                 SERVER shard2 OPTIONS (table_name 'ri');",
        )
        .await
        .unwrap();
    use pgtide::load::sharded::Route;
    for route in [Route::Auto, Route::Direct] {
        db.client.batch_execute("TRUNCATE pd").await.unwrap();
        let r = load(&db, "pd", b"1\n2\n3\n4\n", CopyFormat::Csv, |o| {
            o.columns = Some(vec!["k".into()]);
            o.route = route;
        })
        .await;
        assert!(r.failure.is_none(), "{:?}", r.failure);
        let stored = support::texts(
            &db.client,
            "SELECT k || ' ' || coalesce(note, 'NULL') FROM pd ORDER BY k",
        )
        .await;
        assert_eq!(stored, ["1 n/a", "2 n/a", "3 n/a", "4 n/a"], "{route:?}");
    }
    let r = load(&db, "pi", b"1\n2\n", CopyFormat::Csv, |o| {
        o.columns = Some(vec!["k".into()]);
    })
    .await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let stored = support::texts(&db.client, "SELECT k || ' ' || id FROM pi ORDER BY k").await;
    assert_eq!(stored, ["1 1", "2 2"]);
}
