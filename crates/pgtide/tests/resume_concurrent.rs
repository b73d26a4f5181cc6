//! Two `--resume` loads of one file into one table at once (a user who
//! thinks the first one died runs the same command again): each read the
//! ledger before the other committed anything, so each would load every
//! range. Outside testing found both exiting 0 with the overlap loaded
//! twice. Now (`load/ledger_claim.rs`) the second run is refused at once,
//! by a session lock the first holds while it runs; and should that lock
//! be gone (a restart ends the session), a range's ledger row is a claim:
//! the second run to commit a range another run committed stops without
//! committing it, and the rows are in the table once.

mod support;

use std::sync::Arc;
use std::time::Duration;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::ledger::ResumeMode;
use pgtide::load::{self, LoadOptions, Report};
use pgtide::progress::Progress;
use support::{Compress, Db};

const ROWS: usize = 3000;

async fn resumed_load(db: &Db, input: String) -> pgtide::Result<Report> {
    let mut o = LoadOptions::new(
        vec![input],
        QualifiedName::parse("twice").unwrap(),
        CopyFormat::Csv,
    );
    o.chunk_bytes = 16 * 1024;
    o.resume = Some(ResumeMode::Edges);
    load::run(&db.target, &o, Arc::new(Progress::new(1))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_resumed_loads_of_one_file_at_once_load_each_row_once() {
    let db = Arc::new(Db::start().await);
    // Each COPY waits a moment before its rows, so that the second run
    // reads the ledger while the first has committed nothing yet.
    db.client
        .batch_execute(
            "CREATE TABLE twice (id int, v text);
             CREATE FUNCTION linger() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$;
             CREATE TRIGGER linger BEFORE INSERT ON twice
               FOR EACH STATEMENT EXECUTE FUNCTION linger();",
        )
        .await
        .unwrap();
    let data: String = (0..ROWS).map(|i| format!("{i},row {i}\n")).collect();
    let input = db.file(data.as_bytes(), Compress::None);
    let input = input.to_str().unwrap().to_owned();
    let first = {
        let (db, input) = (db.clone(), input.clone());
        tokio::spawn(async move { resumed_load(&db, input).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = resumed_load(&db, input.clone()).await.unwrap_err();
    assert!(refused.message().contains("is running"), "{refused:?}");
    // The first run's lock gone (its session ended, as a restart would
    // end it), a third run starts and meets the claims.
    db.client
        .batch_execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_stat_activity a \
             USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND a.state = 'idle'",
        )
        .await
        .unwrap();
    let second = resumed_load(&db, input)
        .await
        .expect("the third run starts");
    let first = first.await.unwrap().expect("the first run starts");
    let (n, distinct): (i64, i64) = {
        let r = db
            .client
            .query_one("SELECT count(*), count(DISTINCT id) FROM twice", &[])
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(n, distinct, "no row twice");
    // What the runs say they loaded is what the table holds.
    assert_eq!(n as u64, first.rows_loaded + second.rows_loaded);
    // The claim stopped one of them (which, is the scheduler's choice).
    let stopped: Vec<&Report> = [&first, &second]
        .into_iter()
        .filter(|r| r.failure.is_some())
        .collect();
    assert_eq!(stopped.len(), 1, "{first:?}\n{second:?}");
    let e = stopped[0].failure.as_ref().unwrap();
    assert_eq!(e.sqlstate(), Some(pgtide::error::LEDGER_CLAIMED), "{e:?}");
    // The run that was not stopped loaded the file whole, with what the
    // other committed before it stopped.
    assert_eq!(n, ROWS as i64);
}

/// `--create --resume`: the ledger rows name the table the load created,
/// not the one made and rolled back to plan it, so the same command again
/// finds the load complete. It used to be refused as "dropped and created
/// again" (and the hint's `ledger forget` would then have loaded every
/// row twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_by_a_resumed_load_is_the_one_resumed() {
    let db = Db::start().await;
    let data: String = std::iter::once("id,v\n".to_owned())
        .chain((0..ROWS).map(|i| format!("{i},row {i}\n")))
        .collect();
    let input = db.file(data.as_bytes(), Compress::None);
    let mut o = LoadOptions::new(
        vec![input.to_str().unwrap().to_owned()],
        QualifiedName::parse("made").unwrap(),
        CopyFormat::Csv,
    );
    o.copy.header = pgtide::copyopts::Header::Skip;
    o.chunk_bytes = 16 * 1024;
    o.resume = Some(ResumeMode::Edges);
    o.create = Some(pgtide::infer::create::Create::default());
    for run in 0..2 {
        let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap_or_else(|e| panic!("run {run}: {e:?}"));
        assert!(r.failure.is_none(), "run {run}: {:?}", r.failure);
        let expected = if run == 0 { ROWS as u64 } else { 0 };
        assert_eq!(r.rows_loaded, expected, "run {run}");
    }
    let n: i64 = db
        .client
        .query_one("SELECT count(*) FROM made", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, ROWS as i64);
}
