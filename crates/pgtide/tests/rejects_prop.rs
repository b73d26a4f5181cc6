//! Property: for random files with random bad rows, at random chunk sizes
//! and worker counts, rows read = loaded + rejected, the rejected lines are
//! exactly the bad ones, and the table holds exactly the good ones.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use proptest::prelude::*;
use support::Db;

#[derive(Debug, Clone)]
enum Row {
    Good,
    BadInt,
    Negative,
    TooLong,
    TooFewColumns,
    Multiline,
    MultilineBad,
}

fn row() -> impl Strategy<Value = Row> {
    prop_oneof![
        8 => Just(Row::Good),
        1 => Just(Row::BadInt),
        1 => Just(Row::Negative),
        1 => Just(Row::TooLong),
        1 => Just(Row::TooFewColumns),
        1 => Just(Row::Multiline),
        1 => Just(Row::MultilineBad),
    ]
}

/// The file, the bad lines and the good ids.
fn render(rows: &[Row]) -> (Vec<u8>, BTreeSet<u64>, BTreeSet<i32>) {
    let (mut data, mut bad, mut good) = (String::new(), BTreeSet::new(), BTreeSet::new());
    let mut line = 1;
    for (i, r) in rows.iter().enumerate() {
        let id = i as i32;
        let text = match r {
            Row::Good => format!("{id},1,ok"),
            Row::BadInt => format!("{id},x1,ok"),
            Row::Negative => format!("{id},-1,ok"),
            Row::TooLong => format!("{id},1,toolong"),
            Row::TooFewColumns => format!("{id},1"),
            Row::Multiline => format!("{id},1,\"a\nb\""),
            Row::MultilineBad => format!("{id},1,\"ab\n\ncd\""),
        };
        if matches!(r, Row::Good | Row::Multiline) {
            good.insert(id);
        } else {
            bad.insert(line);
        }
        line += 1 + text.matches('\n').count() as u64;
        data.push_str(&text);
        data.push('\n');
    }
    (data.into_bytes(), bad, good)
}

#[test]
fn random_bad_rows_are_exactly_the_rejects() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(Db::start());
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicUsize::new(0);
    let config = ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    };
    proptest!(config, |(rows in prop::collection::vec(row(), 1..120),
                        chunk in prop_oneof![Just(1usize), 16usize..400, Just(1 << 20)],
                        workers in 1usize..4)| {
        let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (data, want_bad, want_good) = render(&rows);
        let table = format!("p{n}");
        let rejects = dir.path().join(format!("{table}.rejects"));
        let got = rt.block_on(async {
            db.client
                .batch_execute(&format!(
                    "CREATE TABLE {table} (id int PRIMARY KEY, v int CHECK (v >= 0), s varchar(4))"
                ))
                .await
                .unwrap();
            let file = db.file(&data, support::Compress::None);
            let mut o = LoadOptions::new(
                vec![file.to_str().unwrap().into()],
                QualifiedName::parse(&table).unwrap(),
                CopyFormat::Csv,
            );
            o.workers = workers;
            o.chunk_bytes = chunk;
            o.rejects = Some(rejects.clone());
            let report = load::run(&db.target, &o, Arc::new(Progress::new(workers))).await.unwrap();
            let ids: BTreeSet<i32> = db
                .client
                .query(&format!("SELECT id FROM {table}"), &[])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            (report, ids)
        });
        let (report, ids) = got;
        prop_assert!(report.failure.is_none(), "{:?}", report.failure);
        prop_assert_eq!(report.rows_read, rows.len() as u64);
        prop_assert_eq!(report.rows_read, report.rows_loaded + report.rows_rejected);
        let log = std::fs::read_to_string(pgtide::reject::log_path(&rejects)).unwrap();
        let got_bad: BTreeSet<u64> = log
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["line"].as_u64().unwrap())
            .collect();
        prop_assert_eq!(got_bad, want_bad);
        prop_assert_eq!(ids, want_good);
    });
}
