//! Binary or text, as the catalogs allow: every built-in type arrives
//! equal with 1 and 3 workers; binary only where both catalogs say the
//! bytes mean the same; text across major versions (and `--create` from
//! the older to the newer server).

use std::path::PathBuf;

use pgtide::cluster::PgBin;
use pgtide::transfer::TransferOptions;

use super::{both, copy_ok, names, pair, same_rows, server};

#[tokio::test]
async fn every_builtin_type_arrives_equal_with_1_and_3_workers() {
    let (src, dst) = pair().await;
    both(&src, &dst, include_str!("../export_types.sql")).await;
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
    both(&a, &b, include_str!("../export_types.sql")).await;
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
