//! Values mean on the target what they meant on the source, whatever the
//! roles' settings: reg* names under a source search_path (also inside a
//! domain or a composite type), a generated
//! source column into a plain target column, xml fragments under a
//! target `xmloption = document`, a snapshot kept through a role's
//! `idle_in_transaction_session_timeout` and `transaction_timeout`; and a partition named beside
//! its parent is refused, not copied twice; a table of no columns copies
//! its rows.

use pgtide::transfer::TransferOptions;

use super::{both, copy, copy_ok, names, pair};

/// Every row of `sql` as text, in order.
async fn texts(c: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    c.query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
async fn reg_values_name_the_same_objects_whatever_the_search_path() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE SCHEMA app; CREATE TABLE app.thing (x int); CREATE TABLE public.thing (x int);
         CREATE TABLE rc (id int, r regclass)",
    )
    .await;
    src.client
        .batch_execute(
            "INSERT INTO rc VALUES (1, 'app.thing'), (2, 'public.thing'), (3, 'pg_class');
             ALTER ROLE CURRENT_USER SET search_path = app, public",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["public.rc"]));
    o.verify = true;
    copy_ok(&src, &dst, &o).await;
    let got = texts(
        &dst.client,
        "SELECT id || ' ' || n.nspname || '.' || c.relname FROM rc \
         JOIN pg_class c ON c.oid = r JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY id",
    )
    .await;
    assert_eq!(
        got,
        ["1 app.thing", "2 public.thing", "3 pg_catalog.pg_class"]
    );
}

#[tokio::test]
async fn reg_values_inside_a_domain_or_a_composite_are_qualified_too() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE SCHEMA app; CREATE TABLE app.thing (x int); CREATE TABLE public.thing (x int);
         CREATE DOMAIN regdom AS regclass; CREATE TYPE regpair AS (n int, r regdom);
         CREATE TABLE rd (id int, r regdom); CREATE TABLE rp (id int, r regpair[])",
    )
    .await;
    src.client
        .batch_execute(
            "INSERT INTO rd VALUES (1, 'app.thing'), (2, 'public.thing');
             INSERT INTO rp VALUES (1, ARRAY[ROW(1, 'app.thing')::regpair]),
                                   (2, ARRAY[ROW(2, 'public.thing')::regpair]);
             ALTER ROLE CURRENT_USER SET search_path = app, public",
        )
        .await
        .unwrap();
    // One table a run: a run that copies any reg* column qualifies all.
    for (table, value) in [("rd", "r"), ("rp", "(r[1]).r")] {
        let mut o = TransferOptions::new(names(&[&format!("public.{table}")]));
        o.verify = true;
        copy_ok(&src, &dst, &o).await;
        let got = texts(
            &dst.client,
            &format!(
                "SELECT id || ' ' || n.nspname || '.' || c.relname FROM {table} \
                 JOIN pg_class c ON c.oid = {value} \
                 JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY id"
            ),
        )
        .await;
        assert_eq!(got, ["1 app.thing", "2 public.thing"], "{table}");
    }
}

#[tokio::test]
async fn a_generated_source_column_fills_a_plain_target_column() {
    let (src, dst) = pair().await;
    src.client
        .batch_execute(
            "CREATE TABLE g (id int, total int GENERATED ALWAYS AS (id * 10) STORED,
                             twice int GENERATED ALWAYS AS (id * 2) STORED);
             INSERT INTO g (id) SELECT generate_series(1, 3)",
        )
        .await
        .unwrap();
    // `total` is plain on the target: it takes the source's values;
    // `twice` is generated on both sides: the target computes it.
    dst.client
        .batch_execute(
            "CREATE TABLE g (id int, total int,
                             twice int GENERATED ALWAYS AS (id * 2) STORED)",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["g"]));
    o.verify = true;
    copy_ok(&src, &dst, &o).await;
    let got = texts(
        &dst.client,
        "SELECT format('%s %s %s', id, total, twice) FROM g ORDER BY id",
    )
    .await;
    assert_eq!(got, ["1 10 2", "2 20 4", "3 30 6"]);
}

#[tokio::test]
async fn xml_fragments_arrive_whatever_the_targets_xmloption() {
    let (src, dst) = pair().await;
    both(&src, &dst, "CREATE TABLE x (id int, v xml)").await;
    src.client
        .batch_execute("INSERT INTO x VALUES (1, 'text<a/>'), (2, '<doc/>')")
        .await
        .unwrap();
    dst.client
        .batch_execute("ALTER ROLE CURRENT_USER SET xmloption = document")
        .await
        .unwrap();
    copy_ok(&src, &dst, &TransferOptions::new(names(&["x"]))).await;
    let got = texts(&dst.client, "SELECT v::text FROM x ORDER BY id").await;
    assert_eq!(got, ["text<a/>", "<doc/>"]);
}

#[tokio::test]
async fn the_snapshot_outlives_a_roles_transaction_timeouts() {
    let (src, dst) = pair().await;
    both(&src, &dst, "CREATE TABLE s (id int)").await;
    src.client
        .batch_execute(
            "INSERT INTO s SELECT generate_series(1, 1000);
             ALTER ROLE CURRENT_USER SET idle_in_transaction_session_timeout = '100ms'",
        )
        .await
        .unwrap();
    // And PostgreSQL 17's limit on a transaction's whole length.
    let major = pgtide::catalog::server_major(&src.client).await.unwrap();
    if major >= 17 {
        src.client
            .batch_execute("ALTER ROLE CURRENT_USER SET transaction_timeout = '500ms'")
            .await
            .unwrap();
    }
    // The target takes a second to load: the source's coordinator sits
    // idle in its snapshot meanwhile, then --verify runs on it.
    dst.client
        .batch_execute(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS
               'BEGIN PERFORM pg_sleep(1); RETURN NULL; END';
             CREATE TRIGGER slow BEFORE INSERT ON s FOR EACH STATEMENT EXECUTE FUNCTION slow()",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["s"]));
    o.verify = true;
    let r = copy_ok(&src, &dst, &o).await;
    assert_eq!(r.rows, 1000);
}

#[tokio::test]
async fn a_partition_named_beside_its_parent_is_refused() {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        "CREATE TABLE pp (id int) PARTITION BY RANGE (id);
         CREATE TABLE pp1 PARTITION OF pp FOR VALUES FROM (0) TO (1000) PARTITION BY RANGE (id);
         CREATE TABLE pp11 PARTITION OF pp1 FOR VALUES FROM (0) TO (1000);
         CREATE TABLE pp2 PARTITION OF pp FOR VALUES FROM (1000) TO (2000)",
    )
    .await;
    src.client
        .batch_execute("INSERT INTO pp SELECT generate_series(0, 1999)")
        .await
        .unwrap();
    // At any depth, in either order.
    for tables in [["pp", "pp1"], ["pp11", "pp"]] {
        let e = pgtide::transfer::run(
            &src.target,
            &dst.target,
            &TransferOptions::new(names(&tables)),
            std::sync::Arc::new(pgtide::progress::Progress::new(1)),
        )
        .await
        .err()
        .unwrap_or_else(|| panic!("{tables:?} was copied"));
        assert!(e.to_string().contains("is a partition of public.pp"), "{e}");
    }
    let n: i64 = dst
        .client
        .query_one("SELECT count(*) FROM pp", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    // Refused before --create writes anything on the target.
    let dst2 = super::server(None).await;
    let mut o = TransferOptions::new(names(&["pp", "pp1"]));
    o.create = true;
    let e = pgtide::transfer::run(
        &src.target,
        &dst2.target,
        &o,
        std::sync::Arc::new(pgtide::progress::Progress::new(1)),
    )
    .await
    .expect_err("refused");
    assert!(e.to_string().contains("is a partition of"), "{e}");
    let made = texts(
        &dst2.client,
        "SELECT coalesce(to_regclass('pp')::text, 'none')",
    )
    .await;
    assert_eq!(made, ["none"]);
    // Partitions side by side are fine.
    let r = copy(&src, &dst, &TransferOptions::new(names(&["pp11", "pp2"]))).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows, 2000);
}

/// A source role that a row-level security policy shows only some rows
/// fails the copy (the source reads with `row_security = off`, as
/// pg_dump does): once it copied the subset, and `--verify`, reading
/// under the same policy, agreed.
#[tokio::test]
async fn rows_hidden_by_row_level_security_fail_the_copy() {
    let (src, dst) = pair().await;
    both(&src, &dst, "CREATE TABLE owned (id int, tenant int)").await;
    src.client
        .batch_execute(
            "CREATE ROLE owner1 LOGIN PASSWORD 'owner1-pw';
             ALTER TABLE owned OWNER TO owner1;
             INSERT INTO owned SELECT g, g % 3 FROM generate_series(1, 30) g;
             ALTER TABLE owned ENABLE ROW LEVEL SECURITY;
             ALTER TABLE owned FORCE ROW LEVEL SECURITY;
             CREATE POLICY t ON owned USING (tenant = 0)",
        )
        .await
        .unwrap();
    let owner = pgtide::conn::Target::parse_with(
        &format!(
            "host=127.0.0.1 port={} user=owner1 dbname=postgres password=owner1-pw",
            src.cluster.port()
        ),
        &pgtide::conn::Env::empty(),
    )
    .unwrap();
    let mut o = TransferOptions::new(names(&["public.owned"]));
    o.verify = true;
    let run = pgtide::transfer::run(
        &owner,
        &dst.target,
        &o,
        std::sync::Arc::new(pgtide::progress::Progress::new(1)),
    )
    .await;
    let error = match run {
        Err(e) => e,
        Ok(r) => r.failure.expect("the copy fails"),
    };
    assert!(error.message().contains("row-level security"), "{error}");
    let n: i64 = dst
        .client
        .query_one("SELECT count(*) FROM owned", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "no subset copied");
}

/// A target whose `array_nulls` is off would read a NULL element as the
/// string `NULL` (the copy goes by text across major versions and
/// whenever a type forces it; `--text` here).
#[tokio::test]
async fn null_array_elements_stay_null_whatever_the_targets_array_nulls() {
    let (src, dst) = pair().await;
    both(&src, &dst, "CREATE TABLE an (id int, a text[])").await;
    src.client
        .batch_execute("INSERT INTO an VALUES (1, ARRAY['x', NULL, 'NULL'])")
        .await
        .unwrap();
    dst.client
        .batch_execute("ALTER ROLE CURRENT_USER SET array_nulls = off")
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["public.an"]));
    o.force_text = true;
    copy_ok(&src, &dst, &o).await;
    let got = texts(
        &dst.client,
        "SELECT (a[2] IS NULL)::text || ' ' || (a[3] IS NULL)::text FROM an",
    )
    .await;
    assert_eq!(got, ["true false"]);
}

/// `--schema S` copies a partition in S whose parent lives in another
/// schema (it was left out, as if the parent brought its rows).
#[tokio::test]
async fn schema_copies_partitions_whose_parent_is_elsewhere() {
    let (src, dst) = pair().await;
    let ddl = "CREATE SCHEMA ev; CREATE SCHEMA evp;
         CREATE TABLE ev.events (k int, v text) PARTITION BY RANGE (k);
         CREATE TABLE evp.e1 PARTITION OF ev.events FOR VALUES FROM (0) TO (100);
         CREATE TABLE evp.sub PARTITION OF ev.events FOR VALUES FROM (100) TO (200)
             PARTITION BY RANGE (k);
         CREATE TABLE evp.leaf PARTITION OF evp.sub FOR VALUES FROM (100) TO (200);
         CREATE TABLE evp.plain (a int)";
    both(&src, &dst, ddl).await;
    src.client
        .batch_execute(
            "INSERT INTO ev.events SELECT g, 'v' FROM generate_series(0, 199) g;
             INSERT INTO evp.plain VALUES (1)",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(Vec::new());
    o.schemas = vec!["evp".into()];
    o.verify = true;
    copy_ok(&src, &dst, &o).await;
    let got = texts(
        &dst.client,
        "SELECT (SELECT count(*) FROM ev.events)::text || ' ' || (SELECT count(*) FROM evp.plain)::text",
    )
    .await;
    assert_eq!(got, ["200 1"], "e1 and sub (with its leaf) once each");
}

/// A table of no columns copies its rows (one empty line each), binary or
/// text, with any worker count, and `--verify` counts them; a target
/// with columns is refused (a row of no values cannot fill them).
#[tokio::test]
async fn a_table_of_no_columns_copies_its_rows() {
    let (src, dst) = pair().await;
    both(&src, &dst, "CREATE TABLE z0 ()").await;
    src.client
        .batch_execute(
            "INSERT INTO z0 SELECT FROM generate_series(1, 5000);
             CREATE TABLE z1 (); INSERT INTO z1 SELECT FROM generate_series(1, 3)",
        )
        .await
        .unwrap();
    dst.client
        .batch_execute("CREATE TABLE z1 (a int)")
        .await
        .unwrap();
    for (workers, text) in [(1, false), (3, false), (2, true)] {
        dst.client.batch_execute("TRUNCATE z0").await.unwrap();
        let mut o = TransferOptions::new(names(&["z0"]));
        (o.workers, o.force_text, o.verify) = (workers, text, true);
        let r = copy_ok(&src, &dst, &o).await;
        assert_eq!(r.rows, 5000, "{workers} {text}");
        let n: i64 = dst
            .client
            .query_one("SELECT count(*) FROM z0", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 5000, "{workers} {text}");
    }
    let e = pgtide::transfer::run(
        &src.target,
        &dst.target,
        &TransferOptions::new(names(&["z1"])),
        std::sync::Arc::new(pgtide::progress::Progress::new(1)),
    )
    .await
    .expect_err("z1 has columns on the target");
    assert!(e.message().contains("has no columns to copy"), "{e:?}");
}
