//! `pgtide copy` (the `transfer` module) between two real throwaway
//! servers: every built-in type arrives equal with 1 and 3 workers, by
//! binary or text as the catalogs allow; --truncate with FREEZE; --verify
//! catches a target that differs; a target backend killed mid-copy leaves
//! exactly the committed ranges; a stop request; --create from pg_dump
//! (indexes, a foreign key, sequences, a trigger, partitions; the same
//! definitions on both sides); PG 15 <-> 17 when a
//! second version is at hand.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` (or the default binaries). The
//! cross-version test takes the other version from
//! `$PGTIDE_TEST_PGBIN_OTHER`, else Debian's PG 15 or
//! `.cache/postgres/17.*/bin` (scripts/fetch-postgres.sh), whichever
//! differs from the main one; it says so and passes when there is none.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pgtide::cluster::{Cluster, ClusterOptions, PgBin};
use pgtide::conn::Target;
use pgtide::ident::QualifiedName;
use pgtide::progress::Progress;
use pgtide::transfer::{self, verify, TransferOptions, TransferReport};
use pgtide::ErrorKind;
use tokio_postgres::Client;

/// A throwaway server and a client on it.
struct Server {
    cluster: Cluster,
    target: Target,
    client: Client,
}

async fn server(bin: Option<PgBin>) -> Server {
    let cluster = tokio::task::spawn_blocking(move || {
        let bin = bin.unwrap_or_else(|| PgBin::for_tests().expect("PostgreSQL binaries"));
        Cluster::temp(&bin, ClusterOptions::default()).expect("start a throwaway cluster")
    })
    .await
    .unwrap();
    let target = cluster.target();
    let client = target.connect().await.expect("connect");
    Server {
        cluster,
        target,
        client,
    }
}

/// Two servers of the main version.
async fn pair() -> (Server, Server) {
    tokio::join!(server(None), server(None))
}

fn names(tables: &[&str]) -> Vec<QualifiedName> {
    tables
        .iter()
        .map(|t| QualifiedName::parse(t).unwrap())
        .collect()
}

async fn copy(from: &Server, to: &Server, opts: &TransferOptions) -> TransferReport {
    transfer::run(
        &from.target,
        &to.target,
        opts,
        Arc::new(Progress::new(opts.workers)),
    )
    .await
    .expect("the copy starts")
}

async fn copy_ok(from: &Server, to: &Server, opts: &TransferOptions) -> TransferReport {
    let r = copy(from, to, opts).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    r
}

/// Every row's text form, sorted: what must be equal on both sides.
async fn rows(c: &Client, table: &str) -> Vec<String> {
    c.batch_execute(verify::SESSION).await.unwrap();
    let mut v: Vec<String> = c
        .query(&format!("SELECT r::text FROM {table} r"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    v.sort();
    v
}

async fn same_rows(a: &Server, b: &Server, table: &str) {
    let (x, y) = (rows(&a.client, table).await, rows(&b.client, table).await);
    assert!(!x.is_empty(), "{table} is empty on the source");
    assert_eq!(x.len(), y.len(), "{table}: row counts differ");
    for (p, q) in x.iter().zip(&y) {
        assert_eq!(p, q, "{table}: rows differ");
    }
}

async fn both(a: &Server, b: &Server, sql: &str) {
    a.client.batch_execute(sql).await.unwrap();
    b.client.batch_execute(sql).await.unwrap();
}

#[tokio::test]
async fn every_builtin_type_arrives_equal_with_1_and_3_workers() {
    let (src, dst) = pair().await;
    both(&src, &dst, include_str!("export_types.sql")).await;
    let n: i64 = src
        .client
        .query_one("SELECT count(*) FROM typed", &[])
        .await
        .unwrap()
        .get(0);
    dst.client.batch_execute("DELETE FROM typed").await.unwrap();
    for workers in [1, 3] {
        let mut o = TransferOptions::new(names(&["typed"]));
        o.workers = workers;
        o.truncate = workers == 1;
        o.verify = true;
        if workers == 3 {
            dst.client.batch_execute("TRUNCATE typed").await.unwrap();
        }
        let r = copy_ok(&src, &dst, &o).await;
        let t = &r.tables[0];
        assert_eq!(t.rows, n as u64, "{workers}");
        // regclass values are OIDs: the table goes by text.
        assert_eq!(t.format, "text", "{t:?}");
        assert!(t.format_reason.contains("regclass"), "{t:?}");
        assert!(t.verify.as_ref().unwrap().matched);
        if workers == 3 {
            assert!(t.ranges > 3, "{t:?}");
            assert_eq!(t.ranges, t.ranges_committed);
        }
        same_rows(&src, &dst, "typed").await;
    }
    // Without the regclass column every type passes in binary: the same
    // DDL on two fresh clusters gives the same OIDs to mood, pair, ...
    both(&src, &dst, "ALTER TABLE typed DROP COLUMN rc").await;
    for workers in [1, 3] {
        let mut o = TransferOptions::new(names(&["typed"]));
        o.workers = workers;
        o.truncate = true;
        o.verify = true;
        let r = copy_ok(&src, &dst, &o).await;
        let t = &r.tables[0];
        assert_eq!(t.format, "binary", "{t:?}");
        assert_eq!(t.rows, n as u64);
        same_rows(&src, &dst, "typed").await;
    }
}

#[tokio::test]
async fn binary_only_where_the_catalogs_say_the_bytes_mean_the_same() {
    let (src, dst) = pair().await;
    // Shift the target's OIDs: its enum gets another OID than the source's.
    dst.client
        .batch_execute("CREATE TYPE shift AS ENUM ('x')")
        .await
        .unwrap();
    both(
        &src,
        &dst,
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
         CREATE TABLE plain (id int, t text, e mood);
         CREATE TABLE arr (id int, es mood[]);
         CREATE TABLE wide (id int, v text);
         CREATE TABLE forced (id int, v text);",
    )
    .await;
    src.client
        .batch_execute(
            "INSERT INTO plain SELECT g, 'r' || g, 'ok' FROM generate_series(1, 500) g;
             INSERT INTO arr SELECT g, ARRAY['sad', 'happy']::mood[] FROM generate_series(1, 500) g;
             INSERT INTO wide SELECT g, 'v' || g FROM generate_series(1, 500) g;
             INSERT INTO forced SELECT g, 'v' || g FROM generate_series(1, 500) g;",
        )
        .await
        .unwrap();
    // The target's `wide.id` is bigint: text.
    dst.client
        .batch_execute("ALTER TABLE wide ALTER COLUMN id TYPE bigint")
        .await
        .unwrap();
    let mut o = TransferOptions::new(names(&["plain", "arr", "wide"]));
    o.workers = 2;
    o.verify = true;
    let r = copy_ok(&src, &dst, &o).await;
    let by = |n: &str| r.tables.iter().find(|t| t.source == n).unwrap().clone();
    // An enum column is sent as its label: its OID does not travel.
    assert_eq!(
        by("public.plain").format,
        "binary",
        "{:?}",
        by("public.plain")
    );
    let arr = by("public.arr");
    assert_eq!(arr.format, "text", "{arr:?}");
    assert!(arr.format_reason.contains("type OIDs"), "{arr:?}");
    let wide = by("public.wide");
    assert_eq!(wide.format, "text");
    assert!(wide.format_reason.contains("bigint"), "{wide:?}");
    for t in ["plain", "arr"] {
        same_rows(&src, &dst, t).await;
    }
    let mut o = TransferOptions::new(names(&["forced"]));
    o.force_text = true;
    let r = copy_ok(&src, &dst, &o).await;
    assert_eq!(r.tables[0].format, "text");
    same_rows(&src, &dst, "forced").await;
}

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

/// Block ranges as the report prints them -> a ctid condition.
fn ranges_sql(committed: &[String]) -> String {
    let parts: Vec<String> = committed
        .iter()
        .map(|c| {
            if c == "whole table" {
                return "true".into();
            }
            let span = c.strip_prefix("blocks ").unwrap();
            let (a, b) = span.split_once('-').unwrap();
            if b == "end" {
                format!("ctid >= '({a},0)'::tid")
            } else {
                let end: u64 = b.parse::<u64>().unwrap() + 1;
                format!("(ctid >= '({a},0)'::tid AND ctid < '({end},0)'::tid)")
            }
        })
        .collect();
    if parts.is_empty() {
        "false".into()
    } else {
        parts.join(" OR ")
    }
}

async fn ids(c: &Client, sql: &str) -> Vec<i32> {
    let mut v: Vec<i32> = c
        .query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    v.sort_unstable();
    v
}

/// Terminates target backends running `COPY ... FROM STDIN` once `after`
/// rows are committed; true when it killed one.
fn kill_target_copy(
    target: &Target,
    progress: Arc<Progress>,
    after: u64,
) -> tokio::task::JoinHandle<bool> {
    let target = target.clone();
    tokio::spawn(async move {
        let killer = target.connect().await.unwrap();
        for _ in 0..5000 {
            if Progress::get(&progress.rows_loaded) >= after {
                let n: i64 = killer
                    .query_one(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE state = 'active' AND query LIKE 'COPY %FROM STDIN%' \
                         AND pid <> pg_backend_pid()",
                        &[],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if n > 0 {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        false
    })
}

/// Two servers with `table` (id, pad): `rows` rows on the source, and on
/// the target a trigger that sleeps 10 ms every 1,000 rows, so that a
/// copy can be caught mid-way.
async fn slow_pair(table: &str, rows: u32) -> (Server, Server) {
    let (src, dst) = pair().await;
    both(
        &src,
        &dst,
        &format!("CREATE TABLE {table} (id int, pad text)"),
    )
    .await;
    src.client
        .batch_execute(&format!(
            "INSERT INTO {table} SELECT g, repeat('p', 80) FROM generate_series(1, {rows}) g"
        ))
        .await
        .unwrap();
    dst.client
        .batch_execute(&format!(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN IF NEW.id % 1000 = 0 THEN PERFORM pg_sleep(0.01); END IF; RETURN NEW; END $$;
             CREATE TRIGGER slow BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION slow();"
        ))
        .await
        .unwrap();
    (src, dst)
}

#[tokio::test]
async fn a_killed_target_backend_leaves_exactly_the_committed_ranges() {
    let (src, dst) = slow_pair("big", 120_000).await;
    let mut o = TransferOptions::new(names(&["big"]));
    o.workers = 3;
    let progress = Arc::new(Progress::new(3));
    let kill = kill_target_copy(&dst.target, progress.clone(), 10_000);
    let r = transfer::run(&src.target, &dst.target, &o, progress)
        .await
        .unwrap();
    assert!(kill.await.unwrap(), "no target COPY was caught");
    let e = r.failure.as_ref().expect("the copy must fail");
    assert_eq!(e.kind(), ErrorKind::ConnectionLost, "{e:?}");
    assert!(e.message().starts_with("the target"), "{e:?}");
    assert!(e.hint().unwrap().contains("committed"), "{e:?}");
    let t = &r.tables[0];
    assert!(
        t.ranges_committed > 0 && t.ranges_committed < t.ranges,
        "{t:?}"
    );
    // The target holds exactly the rows of the committed block ranges.
    let want = ids(
        &src.client,
        &format!("SELECT id FROM big WHERE {}", ranges_sql(&t.committed)),
    )
    .await;
    let got = ids(&dst.client, "SELECT id FROM big").await;
    assert_eq!(got.len() as u64, t.rows);
    assert!(
        want == got,
        "{} rows wanted, {} found",
        want.len(),
        got.len()
    );
}

#[tokio::test]
async fn a_stop_request_lets_running_ranges_commit_and_lists_them() {
    let (src, dst) = slow_pair("s", 100_000).await;
    let mut o = TransferOptions::new(names(&["s"]));
    o.workers = 2;
    let progress = Arc::new(Progress::new(2));
    let p = progress.clone();
    let stopper = tokio::spawn(async move {
        while Progress::get(&p.rows_loaded) == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        p.request_stop();
    });
    let r = transfer::run(&src.target, &dst.target, &o, progress)
        .await
        .unwrap();
    stopper.await.unwrap();
    let e = r.failure.as_ref().expect("stopped");
    assert_eq!(e.kind(), ErrorKind::Interrupted, "{e:?}");
    let t = &r.tables[0];
    assert!(t.ranges_committed < t.ranges, "{t:?}");
    let want = ids(
        &src.client,
        &format!("SELECT id FROM s WHERE {}", ranges_sql(&t.committed)),
    )
    .await;
    assert_eq!(ids(&dst.client, "SELECT id FROM s").await, want);
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

/// Another PostgreSQL version than the main one, when one is at hand.
fn other_bin(main: &PgBin) -> Option<PgBin> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("PGTIDE_TEST_PGBIN_OTHER").filter(|d| !d.is_empty()) {
        candidates.push(d.into());
    }
    candidates.push("/usr/lib/postgresql/15/bin".into());
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/postgres");
    if let Ok(dirs) = std::fs::read_dir(&cache) {
        let mut v: Vec<PathBuf> = dirs.flatten().map(|d| d.path().join("bin")).collect();
        v.sort();
        candidates.extend(
            v.into_iter()
                .filter(|p| p.to_string_lossy().contains("/17.")),
        );
    }
    candidates
        .into_iter()
        .filter(|d| d.join("postgres").exists())
        .filter_map(|d| PgBin::at(d).ok())
        .find(|b| b.version() != main.version())
}

#[tokio::test]
async fn across_major_versions_by_text_both_ways() {
    let main = PgBin::for_tests().unwrap();
    let Some(other) = other_bin(&main) else {
        eprintln!("no second PostgreSQL version found: cross-version copy not tested");
        return;
    };
    let (a, b) = tokio::join!(server(Some(main)), server(Some(other)));
    both(&a, &b, include_str!("export_types.sql")).await;
    b.client.batch_execute("DELETE FROM typed").await.unwrap();
    for (from, to) in [(&a, &b), (&b, &a)] {
        let mut o = TransferOptions::new(names(&["typed"]));
        o.workers = 2;
        o.truncate = true;
        o.verify = true;
        let r = copy_ok(from, to, &o).await;
        let t = &r.tables[0];
        assert_eq!(t.format, "text", "{t:?}");
        assert!(t.format_reason.contains("major version"), "{t:?}");
        assert_ne!(r.source_version, r.target_version);
        same_rows(from, to, "typed").await;
    }
    // --create across versions: from the older server (pg_dump of its
    // version or newer dumps it; the newer target reads that dump).
    let (old, new) = if a.cluster.bin().version() < b.cluster.bin().version() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    if pgtide::cluster::find_pg_dump(old.cluster.bin().version()).is_ok() {
        old.client
            .batch_execute(
                "CREATE TABLE made (id serial PRIMARY KEY, v text UNIQUE);
                 INSERT INTO made (v) SELECT 'v' || g FROM generate_series(1, 500) g",
            )
            .await
            .unwrap();
        let mut o = TransferOptions::new(names(&["made"]));
        o.create = true;
        o.verify = true;
        let r = copy_ok(old, new, &o).await;
        let c = r.created.as_ref().unwrap();
        assert_eq!(c.sequences, ["public.made_id_seq = 500"]);
        same_rows(old, new, "made").await;
    }
    let _ = (a.cluster.port(), b.cluster.port());
}

/// `pg_dump --schema-only --no-owner --no-privileges -n SCHEMA` of a
/// server, without psql's per-run `\restrict` key lines.
fn schema_dump(s: &Server, pg_dump: &std::path::Path, schema: &str) -> String {
    let mut cmd = std::process::Command::new(pg_dump);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .envs(s.target.libpq_env())
        .args([
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            "-n",
            schema,
        ])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn create_makes_missing_tables_from_pg_dump_and_sets_sequences() {
    // A pg_dump that cannot exist: the error says what to install.
    let e = pgtide::cluster::find_pg_dump(99).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
    assert!(e.message().contains("pg_dump 99 or newer"), "{e:?}");
    assert!(e.hint().unwrap().contains("PGTIDE_PG_DUMP"), "{e:?}");

    let (src, dst) = pair().await;
    // Trigger functions are not part of a table's dump: both sides have it.
    both(
        &src,
        &dst,
        "CREATE FUNCTION public.touch() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN NEW.touched := '2001-02-03 04:05:06+00'; RETURN NEW; END $$",
    )
    .await;
    src.client
        .batch_execute(
            "CREATE SCHEMA app;
             CREATE TABLE app.customers (id serial PRIMARY KEY, email text NOT NULL UNIQUE,
               since date DEFAULT DATE '2020-01-01');
             CREATE TABLE app.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
               customer int NOT NULL REFERENCES app.customers (id) ON DELETE CASCADE,
               amount numeric(10,2) CHECK (amount >= 0), note text, touched timestamptz);
             CREATE INDEX orders_customer ON app.orders (customer);
             CREATE INDEX orders_note ON app.orders (lower(note)) WHERE note IS NOT NULL;
             CREATE TRIGGER orders_touch BEFORE UPDATE ON app.orders
               FOR EACH ROW EXECUTE FUNCTION public.touch();
             CREATE TABLE app.events (id int, at date NOT NULL) PARTITION BY RANGE (at);
             CREATE TABLE app.events_2020 PARTITION OF app.events
               FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');
             CREATE TABLE app.events_2021 PARTITION OF app.events
               FOR VALUES FROM ('2021-01-01') TO ('2022-01-01');
             CREATE INDEX events_at ON app.events (at);
             INSERT INTO app.customers (email) SELECT 'c' || g || '@x' FROM generate_series(1, 2000) g;
             SELECT setval('app.customers_id_seq', 5000);
             INSERT INTO app.orders (customer, amount, note)
               SELECT 1 + g % 2000, g / 100.0, CASE WHEN g % 3 = 0 THEN 'n' || g END
               FROM generate_series(1, 20000) g;
             INSERT INTO app.events SELECT g, DATE '2020-01-01' + g % 700
               FROM generate_series(1, 3000) g;",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(vec![]);
    o.schemas = vec!["app".into()];
    o.workers = 2;
    o.verify = true;
    o.create = true;
    let main = PgBin::for_tests().unwrap();
    let pg_dump = match pgtide::cluster::find_pg_dump(main.version()) {
        Ok((p, _)) => p,
        Err(_) => {
            // No pg_dump for this version here: the copy says so, before
            // writing anything.
            let e = transfer::run(&src.target, &dst.target, &o, Arc::new(Progress::new(2)))
                .await
                .expect_err("no pg_dump");
            assert!(e.hint().unwrap().contains("PGTIDE_PG_DUMP"), "{e:?}");
            eprintln!("no pg_dump {} found: --create not tested", main.version());
            return;
        }
    };
    let r = copy_ok(&src, &dst, &o).await;
    let c = r.created.as_ref().expect("tables were created");
    assert!(c.post_data, "{c:?}");
    let mut tables = c.tables.clone();
    tables.sort();
    assert_eq!(
        tables,
        [
            "app.customers",
            "app.events",
            "app.events_2020",
            "app.events_2021",
            "app.orders"
        ]
    );
    assert_eq!(
        c.sequences,
        ["app.customers_id_seq = 5000", "app.orders_id_seq = 20000"]
    );
    assert!(r.tables.iter().all(|t| t.created), "{:?}", r.tables);
    for t in ["app.customers", "app.orders", "app.events"] {
        same_rows(&src, &dst, t).await;
    }
    // The same definitions: indexes, keys, the trigger, defaults,
    // partitions, identity and serial sequences.
    let (a, b) = (
        schema_dump(&src, &pg_dump, "app"),
        schema_dump(&dst, &pg_dump, "app"),
    );
    assert!(a.contains("CREATE TRIGGER orders_touch"), "{a}");
    assert!(a.contains("FOREIGN KEY (customer)"), "{a}");
    assert_eq!(a, b);
    // Sequences continue where the source's are; keys and triggers work.
    let next: i32 = dst
        .client
        .query_one(
            "INSERT INTO app.customers (email) VALUES ('new') RETURNING id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(next, 5001);
    let e = dst
        .client
        .batch_execute("INSERT INTO app.orders (customer) VALUES (999999)")
        .await
        .unwrap_err();
    assert_eq!(e.code().unwrap().code(), "23503", "{e:?}");
    let touched: String = dst
        .client
        .query_one(
            "UPDATE app.orders SET note = 'x' WHERE id = 1 RETURNING touched::date::text",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(touched, "2001-02-03");
    // A second run finds the table: nothing created, no pg_dump run.
    let mut again = TransferOptions::new(names(&["app.events"]));
    again.create = true;
    again.truncate = true;
    let r = copy_ok(&src, &dst, &again).await;
    assert!(r.created.is_none());
    same_rows(&src, &dst, "app.events").await;
}
