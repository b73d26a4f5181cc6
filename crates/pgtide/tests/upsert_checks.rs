//! `--on-conflict --rejects` into a table whose CHECK constraints refuse
//! rows: the merge names no row, so the rows are found by a query over the
//! staged chunk (`load/upsert/checks.rs`), not by halving the chunk.

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::upsert::OnConflict;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::{rejected_lines, Compress, Db};

/// Rows a CHECK constraint refuses in the merge, which names no row: they
/// are found by asking the staged rows (`upsert/checks.rs`) and each is
/// tried alone, rather than found by halving the chunk, where every failed
/// half inserted (and undid) the rows before the bad one (outside testing:
/// minutes for 20,000 rows). So the server inserts each loaded row about
/// once; the rejects are the rows the constraint refuses, with the
/// target's own message.
#[tokio::test]
async fn check_violations_are_found_without_halving_the_chunk() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE chk (k int PRIMARY KEY, v text, seq int CHECK (seq % 97 <> 0));
             INSERT INTO chk SELECT g, 'old', 1 FROM generate_series(0, 999) g;",
        )
        .await
        .unwrap();
    let data: String = (0..4000).map(|i| format!("{i},v{i},{i}\n")).collect();
    let path = db.file(data.as_bytes(), Compress::None);
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("chk").unwrap(),
        CopyFormat::Csv,
    );
    o.on_conflict = Some(OnConflict::Update);
    let rejects = path.with_extension("rejects");
    o.rejects = Some(rejects.clone());
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .expect("the load starts");
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let bad: Vec<u64> = (0..4000u64)
        .filter(|i| i % 97 == 0)
        .map(|i| i + 1)
        .collect();
    assert_eq!(rejected_lines(&rejects), bad);
    assert_eq!(r.rows_loaded, 4000 - bad.len() as u64);
    let log = std::fs::read_to_string(pgtide::reject::log_path(&rejects)).unwrap();
    assert!(
        log.contains(r#"relation \"chk\" violates check constraint"#),
        "{log}"
    );
    // Rows written, once the load's sessions (gone or going) have flushed
    // their counts to the statistics: at least the rows loaded, and with
    // the table's first 1,000.
    let first = 1000;
    let mut inserted = 0i64;
    for _ in 0..100 {
        let sql = "SELECT pg_stat_force_next_flush(); \
                   SELECT n_tup_ins + n_tup_upd FROM pg_stat_user_tables WHERE relname = 'chk'";
        let answer = db.client.simple_query(sql).await.unwrap();
        inserted = answer
            .iter()
            .rev()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|v| v.parse().unwrap()),
                _ => None,
            })
            .unwrap_or(0);
        if inserted >= first + r.rows_loaded as i64 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        ((inserted - first) as f64) < 1.2 * r.rows_loaded as f64,
        "{inserted} rows written for {} loaded",
        r.rows_loaded
    );
}
