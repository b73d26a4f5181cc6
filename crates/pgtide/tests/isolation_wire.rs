//! Isolation on the wire (`load/wire_copy.rs`, `load/loader/attempts.rs`):
//! many COPY attempts in one round trip, suspects probed alone and undone.
//! A failure in the middle of a round trip must leave every attempt after
//! it unrun (they are sent again), so the result is exactly what one COPY
//! per row in input order gives: the first of two duplicate keys loads,
//! the later one is rejected, every other row loads once. Checked against
//! a model of the file, for `--method copy` (the wire) and `values` (the
//! client path), with 1 worker and small chunks; with 3 workers, two
//! duplicates in different chunks load in commit order, so only the
//! counts and keys are checked.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method};
use pgtide::progress::Progress;
use support::{Compress, Db};

/// The file, the rows the table must hold (id -> v) and the rejected lines.
fn dirty_file(rows: u32) -> (String, BTreeMap<i64, i64>, Vec<String>) {
    let mut file = String::new();
    let mut table = BTreeMap::new();
    let mut rejected = Vec::new();
    for i in 0..rows {
        let (line, fate) = match i % 97 {
            // Screened: bad int, NULL in NOT NULL (suspects).
            13 => (format!("{i},x{i}"), None),
            29 => (format!("{i},"), None),
            // Not screened: CHECK (v >= 0), and a duplicate of an earlier
            // key, far enough back to be in another range (the earlier
            // row keeps its value).
            41 => (format!("{i},-{i}"), None),
            53 | 71 if i > 300 => (format!("{},{}", i - 300, 1_000_000 + i), None),
            _ => (format!("{i},{i}"), Some((i64::from(i), i64::from(i)))),
        };
        match fate {
            Some((id, v)) => {
                table.insert(id, v);
            }
            None => rejected.push(line.clone()),
        }
        file.push_str(&line);
        file.push('\n');
    }
    (file, table, rejected)
}

#[tokio::test]
async fn attempts_in_one_round_trip_load_exactly_what_row_by_row_would() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE iw (id int PRIMARY KEY, v int NOT NULL CHECK (v >= 0))")
        .await
        .unwrap();
    let (file, want, want_rejected) = dirty_file(6000);
    let path = db.file(file.as_bytes(), Compress::None);
    let dir = tempfile::tempdir().unwrap();
    for method in [Method::Copy, Method::Values] {
        for workers in [1, 3] {
            let what = format!("{method:?}, {workers} workers");
            db.client.batch_execute("TRUNCATE iw").await.unwrap();
            let mut o = LoadOptions::new(
                vec![path.to_string_lossy().into_owned()],
                QualifiedName::parse("iw").unwrap(),
                CopyFormat::Csv,
            );
            o.method = method;
            o.workers = workers;
            o.chunk_bytes = 16 * 1024;
            o.rejects = Some(dir.path().join(format!("{method:?}{workers}.csv")));
            let r = load::run(&db.target, &o, Arc::new(Progress::new(workers)))
                .await
                .unwrap();
            assert!(r.failure.is_none(), "{what}: {:?}", r.failure);
            assert_eq!(r.rows_loaded, want.len() as u64, "{what}");
            assert_eq!(r.rows_rejected, want_rejected.len() as u64, "{what}");
            let got: BTreeMap<i64, i64> = db
                .client
                .query("SELECT id, v FROM iw", &[])
                .await
                .unwrap()
                .iter()
                .map(|row| {
                    (
                        i64::from(row.get::<_, i32>(0)),
                        i64::from(row.get::<_, i32>(1)),
                    )
                })
                .collect();
            // Within a chunk, input order decides which duplicate loads;
            // across chunks loaded by different workers, commit order
            // does (as for plain COPY): then only the keys are known.
            let same = |k: &i64, v: &i64| match got.get(k) {
                Some(g) => g == v || (workers > 1 && *g >= 1_000_000),
                None => false,
            };
            let diff: Vec<_> = want
                .iter()
                .filter(|(k, v)| !same(k, v))
                .map(|(k, v)| (*k, *v, got.get(k).copied()))
                .chain(
                    got.iter()
                        .filter(|(k, _)| !want.contains_key(k))
                        .map(|(k, v)| (*k, -1, Some(*v))),
                )
                .take(10)
                .collect();
            assert!(diff.is_empty(), "{what}: (id, want, got) {diff:?}");
            let rejected = std::fs::read_to_string(o.rejects.as_ref().unwrap()).unwrap();
            let mut rejected: Vec<&str> = rejected.lines().collect();
            rejected.sort_unstable();
            let mut expected: Vec<&str> = want_rejected.iter().map(String::as_str).collect();
            expected.sort_unstable();
            if workers == 1 {
                assert_eq!(rejected, expected, "{what}");
            }
        }
    }
}

/// Rows the server inserts and then undoes are work thrown away. Bad rows
/// the client cannot judge (a CHECK, a duplicate key) are found by failed
/// ranges; a range is bounded by how dirty the chunk looks, so a failure
/// undoes a fraction of the rows between two bad ones. Unbounded, the
/// range after a bad row was the rest of the chunk and every bad row undid
/// all the rows since the previous one: the server inserted twice the file.
#[tokio::test]
async fn a_failed_range_undoes_a_fraction_of_the_rows_between_bad_ones() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE iw_waste (id int PRIMARY KEY, v int CHECK (v >= 0))")
        .await
        .unwrap();
    let (rows, every) = (200_000u32, 5_000u32);
    let mut file = String::new();
    for i in 0..rows {
        match i % every {
            2_500 => file.push_str(&format!("{i},-1\n")),
            4_000 => file.push_str(&format!("{},{i}\n", i - 1)),
            _ => file.push_str(&format!("{i},{i}\n")),
        }
    }
    let path = db.file(file.as_bytes(), Compress::None);
    let dir = tempfile::tempdir().unwrap();
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("iw_waste").unwrap(),
        CopyFormat::Csv,
    );
    o.rejects = Some(dir.path().join("r.csv"));
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_rejected, u64::from(2 * rows / every));
    let inserted = support::rows_inserted(&db.client, "iw_waste", r.rows_loaded).await;
    let waste = inserted as f64 / r.rows_loaded as f64;
    assert!(
        waste < 1.5,
        "the server inserted {waste:.2}x the rows loaded"
    );
}
