//! `export` against a real throwaway server: byte for byte what psql
//! `\copy (...) TO 'FILE'` writes with 1 worker; the same rows (one
//! consistent snapshot, each row once) with N workers, also while others
//! write; the output complete or absent on every error; every built-in
//! type round-trips through `load`.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` or the default binaries.

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgtide::conn::Target;
use pgtide::copyopts::{CopyFormat, Header};
use pgtide::export::{self, ExportOptions, ExportReport, ForceQuote, What};
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use pgtide::ErrorKind;
use support::Db;

fn table(name: &str) -> What {
    What::Table(QualifiedName::parse(name).unwrap())
}

async fn export_to(target: &Target, opts: &ExportOptions) -> pgtide::Result<ExportReport> {
    export::run(target, opts, Arc::new(Progress::new(opts.workers))).await
}

/// Runs psql's `\copy (query) TO 'path' WITH (options)`.
fn psql_copy(db: &Db, query: &str, path: &Path, options: &str) {
    let cmd = format!("\\copy ({query}) TO '{}' WITH ({options})", path.display());
    let out = db
        .cluster
        .psql()
        .args(["-X", "-q", "-c", &cmd])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The options part of pgtide's COPY statement, for psql.
fn with_options(opts: &ExportOptions) -> String {
    let sql = opts.copy.copy_to_sql("x", &[]);
    let start = sql.find("WITH (").unwrap() + "WITH (".len();
    let mut o = sql[start..sql.len() - 1].to_owned();
    match &opts.force_quote {
        ForceQuote::None => {}
        ForceQuote::All => o.push_str(", FORCE_QUOTE *"),
        ForceQuote::Columns(c) => o.push_str(&format!(", FORCE_QUOTE ({})", c.join(", "))),
    }
    o
}

async fn sample_table(db: &Db, name: &str, rows: u32) {
    db.client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id int, name text, amount numeric, at timestamptz, \
               tags text[], note text);
             INSERT INTO {name} SELECT g, 'name ' || g || CASE WHEN g % 5 = 0 THEN ', comma' \
               WHEN g % 7 = 0 THEN ' \"quoted\"' WHEN g % 11 = 0 THEN E'\\ttab\\\\slash' \
               WHEN g % 13 = 0 THEN 'ünïcødé €' ELSE '' END, \
               CASE WHEN g % 3 = 0 THEN NULL ELSE g / 7.0 END, \
               timestamptz '2024-01-01 00:00:00+00' + g * interval '37 minutes', \
               ARRAY['a' || g, NULL, 'b,c'], CASE WHEN g % 17 = 0 THEN E'two\\nlines' \
               WHEN g % 19 = 0 THEN '' ELSE repeat('x', g % 40) END \
             FROM generate_series(1, {rows}) g"
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn one_worker_is_byte_identical_to_psql_copy_in_every_format() {
    let db = Db::start().await;
    sample_table(&db, "s", 3000).await;
    let dir = tempfile::tempdir().unwrap();
    let select = r#"SELECT "id", "name", "amount", "at", "tags", "note" FROM "public"."s""#;
    let mut cases: Vec<ExportOptions> = Vec::new();
    for format in [CopyFormat::Csv, CopyFormat::Text, CopyFormat::Binary] {
        cases.push(ExportOptions::new(table("s"), "", format));
    }
    let mut c = ExportOptions::new(table("s"), "", CopyFormat::Csv);
    c.copy.header = Header::Skip;
    c.copy.delimiter = Some(b';');
    c.copy.quote = Some(b'\'');
    c.copy.escape = Some(b'\\');
    c.copy.null = Some("NULL".into());
    c.force_quote = ForceQuote::All;
    cases.push(c);
    let mut c = ExportOptions::new(table("s"), "", CopyFormat::Csv);
    c.copy.header = Header::Skip;
    c.force_quote = ForceQuote::Columns(vec!["name".into()]);
    cases.push(c);
    let mut c = ExportOptions::new(table("s"), "", CopyFormat::Text);
    c.copy.header = Header::Skip;
    c.copy.delimiter = Some(b'|');
    c.copy.null = Some("<null>".into());
    c.copy.encoding = Some("LATIN9".into());
    cases.push(c);
    for (i, mut opts) in cases.into_iter().enumerate() {
        let ours = dir.path().join(format!("ours{i}"));
        let theirs = dir.path().join(format!("psql{i}"));
        opts.output = ours.display().to_string();
        let report = export_to(&db.target, &opts).await.unwrap();
        psql_copy(&db, select, &theirs, &with_options(&opts));
        let (a, b) = (
            std::fs::read(&ours).unwrap(),
            std::fs::read(&theirs).unwrap(),
        );
        assert!(
            a == b,
            "case {i} ({opts:?}) differs from psql: {} vs {} bytes",
            a.len(),
            b.len()
        );
        assert_eq!(report.rows, 3000, "case {i}");
        assert_eq!(report.bytes, a.len() as u64);
        assert_eq!(report.workers, 1);
        no_partial_file_beside(&ours);
    }
    // A query, as psql would send it.
    let query = "SELECT id, upper(name) AS n FROM s WHERE id % 2 = 0 ORDER BY id DESC";
    let ours = dir.path().join("query.csv");
    let mut opts = ExportOptions::new(
        What::Query(format!("{query};")),
        ours.display().to_string(),
        CopyFormat::Csv,
    );
    opts.copy.header = Header::Skip;
    let report = export_to(&db.target, &opts).await.unwrap();
    assert_eq!(report.rows, 1500);
    let theirs = dir.path().join("query.psql");
    psql_copy(&db, query, &theirs, "FORMAT csv, HEADER true");
    assert!(std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap());
}

#[tokio::test]
async fn compressed_outputs_hold_the_same_bytes() {
    let db = Db::start().await;
    sample_table(&db, "s", 2000).await;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("s.csv");
    let opts = |out: &Path, workers| {
        let mut o = ExportOptions::new(table("s"), out.display().to_string(), CopyFormat::Csv);
        o.workers = workers;
        o
    };
    export_to(&db.target, &opts(&plain, 1)).await.unwrap();
    let want = std::fs::read(&plain).unwrap();
    for workers in [1, 2] {
        let gz = dir.path().join(format!("s{workers}.csv.gz"));
        let r = export_to(&db.target, &opts(&gz, workers)).await.unwrap();
        assert_eq!(r.compression, "gzip");
        let stored = std::fs::read(&gz).unwrap();
        assert_eq!(r.bytes, stored.len() as u64);
        assert!(stored.len() < want.len());
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&stored[..]), &mut got)
            .unwrap();
        assert!(got == want, "gzip, {workers} workers");
        let zst = dir.path().join(format!("s{workers}.csv.zst"));
        let r = export_to(&db.target, &opts(&zst, workers)).await.unwrap();
        assert_eq!(r.compression, "zstd");
        let got = zstd::decode_all(&std::fs::read(&zst).unwrap()[..]).unwrap();
        assert!(got == want, "zstd, {workers} workers");
    }
}

/// A table big enough for many block ranges (about 700 blocks).
async fn wide_table(db: &Db, name: &str, rows: u32) {
    db.client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id int PRIMARY KEY, balance bigint, pad text);
             INSERT INTO {name} SELECT g, 100, repeat(md5(g::text), 6) FROM generate_series(1, {rows}) g;
             ANALYZE {name}"
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn workers_write_the_same_bytes_as_one_worker_on_a_quiet_table() {
    let db = Db::start().await;
    wide_table(&db, "w", 20_000).await;
    let dir = tempfile::tempdir().unwrap();
    for (format, header) in [
        (CopyFormat::Csv, Header::Skip),
        (CopyFormat::Text, Header::None),
        (CopyFormat::Binary, Header::None),
    ] {
        let mut outs = Vec::new();
        for workers in [1, 3, 4] {
            let path = dir.path().join(format!("w{workers}"));
            let mut o = ExportOptions::new(table("w"), path.display().to_string(), format);
            o.copy.header = header;
            o.workers = workers;
            let r = export_to(&db.target, &o).await.unwrap();
            assert_eq!(r.rows, 20_000, "{format:?} {workers}");
            assert_eq!(r.workers, workers);
            outs.push(std::fs::read(&path).unwrap());
        }
        // Physical block order is the 1-worker scan's order on a table
        // nobody writes to: the files are the same, header and binary
        // framing included (once each).
        assert!(outs[0] == outs[1], "{format:?}: 3 workers differ from 1");
        assert!(outs[0] == outs[2], "{format:?}: 4 workers differ from 1");
    }
}

/// Loads `bytes` (a COPY file in `format`) into a new table `name` shaped
/// like `like`.
async fn load_into(db: &Db, like: &str, name: &str, path: &Path, format: CopyFormat) {
    db.client
        .batch_execute(&format!(
            "CREATE TABLE {name} (LIKE {like} INCLUDING GENERATED INCLUDING DEFAULTS)"
        ))
        .await
        .unwrap();
    let mut o = LoadOptions::new(
        vec![path.display().to_string()],
        QualifiedName::parse(name).unwrap(),
        format,
    );
    o.workers = 2;
    o.chunk_bytes = 64 * 1024;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(2)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "load of {path:?}: {:?}", r.failure);
}

/// Rows of `a` that `b` lacks (as text, so types without `=` compare).
async fn except_all(db: &Db, a: &str, b: &str) -> i64 {
    db.client
        .query_one(
            &format!(
                "SELECT count(*) FROM (SELECT x::text FROM {a} x EXCEPT ALL SELECT x::text FROM {b} x) d"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn workers_export_one_snapshot_while_others_write() {
    let db = Db::start().await;
    wide_table(&db, "acct", 40_000).await;
    // Writers move balance between rows (sum constant), and replace rows
    // (delete + insert with a new id: count constant). An export that mixes
    // two table states sees a row twice or not at all, or a wrong sum.
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..2u32 {
        let client = db.target.connect().await.unwrap();
        let (stop, commits) = (stop.clone(), commits.clone());
        writers.push(tokio::spawn(async move {
            let mut i: u32 = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let a = (i * 7919 + w * 13) % 40_000 + 1;
                let b = (i * 104_729 + w * 17) % 40_000 + 1;
                let new_id = 100_000 + w * 1_000_000 + i;
                let sql = format!(
                    "BEGIN;
                     UPDATE acct SET balance = balance - 1 WHERE id = (SELECT id FROM acct ORDER BY id OFFSET {a} % (SELECT count(*) FROM acct) LIMIT 1);
                     UPDATE acct SET balance = balance + 1 WHERE id = (SELECT id FROM acct ORDER BY id DESC OFFSET {b} % (SELECT count(*) FROM acct) LIMIT 1);
                     WITH gone AS (DELETE FROM acct WHERE id = (SELECT min(id) FROM acct) RETURNING balance)
                       INSERT INTO acct SELECT {new_id}, balance, 'moved' FROM gone;
                     COMMIT"
                );
                client.batch_execute(&sql).await.unwrap();
                commits.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    while commits.load(Ordering::Relaxed) < 20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut exports = 0;
    for (i, format) in [CopyFormat::Binary, CopyFormat::Csv, CopyFormat::Text]
        .into_iter()
        .enumerate()
    {
        let path = dir.path().join(format!("acct{i}"));
        let mut o = ExportOptions::new(table("acct"), path.display().to_string(), format);
        o.workers = 4;
        let before = commits.load(Ordering::Relaxed);
        let r = export_to(&db.target, &o).await.unwrap();
        let during = commits.load(Ordering::Relaxed) - before;
        assert_eq!(r.rows, 40_000, "{format:?}: every row once");
        let name = format!("acct_copy{i}");
        load_into(&db, "acct", &name, &path, format).await;
        let row = db
            .client
            .query_one(
                &format!("SELECT count(*), count(DISTINCT id), sum(balance)::int8 FROM {name}"),
                &[],
            )
            .await
            .unwrap();
        let (n, distinct, sum): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!(
            (n, distinct, sum),
            (40_000, 40_000, 4_000_000),
            "{format:?}: not one table state ({during} commits during the export)"
        );
        if during > 0 {
            exports += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    assert!(exports > 0, "no writer committed during any export");
}

#[tokio::test]
async fn views_and_partitioned_tables_fall_back_to_one_worker() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE p (id int, v text) PARTITION BY RANGE (id);
             CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (1000);
             CREATE TABLE p2 PARTITION OF p FOR VALUES FROM (1000) TO (3000);
             INSERT INTO p SELECT g, 'v' || g FROM generate_series(0, 2999) g;
             CREATE VIEW pv AS SELECT * FROM p WHERE id % 2 = 0;",
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, rows) in [("p", 3000), ("pv", 1500)] {
        let path = dir.path().join(name);
        let mut o = ExportOptions::new(table(name), path.display().to_string(), CopyFormat::Text);
        o.workers = 3;
        let r = export_to(&db.target, &o).await.unwrap();
        assert_eq!(r.rows, rows, "{name}");
        assert_eq!(r.workers, 1, "{name}");
        assert!(
            r.notes.iter().any(|n| n.contains("1 connection")),
            "{:?}",
            r.notes
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count() as u64, rows);
    }
}

/// Export that must fail: the error, and nothing at the output.
/// No partial file (`FILE.XXXXXX.partial`) is left beside `out`.
fn no_partial_file_beside(out: &Path) {
    for f in std::fs::read_dir(out.parent().unwrap()).unwrap() {
        let name = f.unwrap().file_name();
        let name = name.to_string_lossy();
        assert!(!name.ends_with(".partial"), "{name} left behind");
    }
}

async fn fails(target: &Target, opts: &ExportOptions) -> pgtide::Error {
    let err = export_to(target, opts)
        .await
        .expect_err("the export must fail");
    let out = PathBuf::from(&opts.output);
    assert!(!out.exists(), "{} exists after an error", out.display());
    no_partial_file_beside(&out);
    assert!(err.hint().is_some(), "no hint: {err:?}");
    err
}

#[tokio::test]
async fn missing_tables_and_queries_on_dropped_tables_leave_no_file() {
    let db = Db::start().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.csv").display().to_string();
    let e = fails(
        &db.target,
        &ExportOptions::new(table("nope"), out.clone(), CopyFormat::Csv),
    )
    .await;
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.message().contains("does not exist"), "{e:?}");
    db.client
        .batch_execute("CREATE TABLE gone (a int); DROP TABLE gone")
        .await
        .unwrap();
    let q = What::Query("SELECT * FROM gone".into());
    let e = fails(
        &db.target,
        &ExportOptions::new(q, out.clone(), CopyFormat::Csv),
    )
    .await;
    assert_eq!(e.sqlstate(), Some("42P01"));
    assert!(e.hint().unwrap().contains("dropped"), "{e:?}");
    let mut o = ExportOptions::new(table("pg_class"), out, CopyFormat::Csv);
    o.columns = Some(vec!["no_such_column".into()]);
    fails(&db.target, &o).await;
}

#[tokio::test]
async fn a_statement_timeout_removes_the_partial_file() {
    let db = Db::start().await;
    let target = Target::parse(&format!(
        "{} options='-c statement_timeout=300'",
        db.cluster.conninfo()
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("slow.csv").display().to_string();
    // 600 KB of rows before the timeout: some pieces reach the partial file.
    let q = What::Query(
        "SELECT g, repeat('x', 100), pg_sleep(CASE WHEN g > 6000 THEN 0.01 ELSE 0 END) \
         FROM generate_series(1, 100000) g"
            .into(),
    );
    let e = fails(&target, &ExportOptions::new(q, out, CopyFormat::Csv)).await;
    assert_eq!(e.sqlstate(), Some("57014"), "{e:?}");
    assert!(e.message().contains("cancelled"), "{e:?}");
    assert!(e.hint().unwrap().contains("statement_timeout"), "{e:?}");
}

/// Terminates the first active `COPY (SELECT ...)` session it sees
/// (polling every 2 ms for up to 2 s); true when it killed one.
fn kill_copy(target: &Target) -> tokio::task::JoinHandle<bool> {
    let target = target.clone();
    tokio::spawn(async move {
        let killer = target.connect().await.unwrap();
        for _ in 0..1000 {
            let n: i64 = killer
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE state = 'active' AND query LIKE 'COPY (SELECT%' \
                     AND pid <> pg_backend_pid()",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if n > 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        false
    })
}

#[tokio::test]
async fn a_terminated_session_removes_the_partial_file() {
    let db = Db::start().await;
    wide_table(&db, "big", 60_000).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.csv").display().to_string();
    // One connection: a query slow enough to be caught.
    let slow = "SELECT *, pg_sleep(CASE WHEN id % 1000 = 0 THEN 0.05 ELSE 0 END) FROM big";
    let o = ExportOptions::new(What::Query(slow.into()), out.clone(), CopyFormat::Csv);
    let kill = kill_copy(&db.target);
    let e = fails(&db.target, &o).await;
    assert!(kill.await.unwrap(), "the COPY was never seen running");
    assert_eq!(e.kind(), ErrorKind::ConnectionLost, "{e:?}");
    assert!(
        e.message().contains("connection to the server was lost"),
        "{e:?}"
    );
    assert!(e.hint().unwrap().contains("run the export again"), "{e:?}");
    // Three workers on the table: one of them is killed. A worker whose
    // ranges were all done may be the one killed; then the export
    // succeeds, so try a few times.
    let mut o = ExportOptions::new(table("big"), out, CopyFormat::Csv);
    o.workers = 3;
    let mut failed = None;
    for _ in 0..5 {
        let kill = kill_copy(&db.target);
        let result = export_to(&db.target, &o).await;
        let killed = kill.await.unwrap();
        match result {
            Err(e) => {
                assert!(killed, "failed without a kill: {e:?}");
                failed = Some(e);
                break;
            }
            Ok(r) => assert_eq!(r.rows, 60_000),
        }
    }
    let e = failed.expect("no parallel export was ever caught by the killer");
    assert!(!PathBuf::from(&o.output).exists());
    no_partial_file_beside(Path::new(&o.output));
    assert_eq!(e.kind(), ErrorKind::ConnectionLost, "{e:?}");
}

#[tokio::test]
async fn every_builtin_type_round_trips_through_load_in_every_format() {
    let db = Db::start().await;
    db.client
        .batch_execute(include_str!("export_types.sql"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    for format in [CopyFormat::Csv, CopyFormat::Text, CopyFormat::Binary] {
        for workers in [1, 2] {
            n += 1;
            let path = dir.path().join(format!("types{n}"));
            let mut o = ExportOptions::new(table("typed"), path.display().to_string(), format);
            o.workers = workers;
            if format == CopyFormat::Csv {
                o.copy.header = Header::Skip;
            }
            let r = export_to(&db.target, &o).await.unwrap();
            assert!(r.rows >= 6, "{format:?}");
            let copy = format!("typed_copy{n}");
            if format == CopyFormat::Csv {
                // load skips the header with --header.
                db.client
                    .batch_execute(&format!(
                        "CREATE TABLE {copy} (LIKE typed INCLUDING GENERATED INCLUDING DEFAULTS)"
                    ))
                    .await
                    .unwrap();
                let mut lo = LoadOptions::new(
                    vec![path.display().to_string()],
                    QualifiedName::parse(&copy).unwrap(),
                    format,
                );
                lo.copy.header = Header::Match;
                let rep = load::run(&db.target, &lo, Arc::new(Progress::new(1)))
                    .await
                    .unwrap();
                assert!(rep.failure.is_none(), "{:?}", rep.failure);
            } else {
                load_into(&db, "typed", &copy, &path, format).await;
            }
            assert_eq!(
                except_all(&db, "typed", &copy).await,
                0,
                "{format:?} {workers}: rows lost"
            );
            assert_eq!(
                except_all(&db, &copy, "typed").await,
                0,
                "{format:?} {workers}: rows added"
            );
        }
    }
}

#[tokio::test]
async fn a_stop_request_removes_the_partial_file() {
    let db = Db::start().await;
    wide_table(&db, "big", 60_000).await;
    let dir = tempfile::tempdir().unwrap();
    for workers in [1, 3] {
        let out = dir.path().join(format!("big{workers}.csv"));
        let mut o = ExportOptions::new(table("big"), out.display().to_string(), CopyFormat::Csv);
        o.workers = workers;
        let progress = Arc::new(Progress::new(workers));
        let p = progress.clone();
        // Stop once some rows went by (the partial file then exists).
        let stopper = tokio::spawn(async move {
            while Progress::get(&p.rows_read) == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            p.request_stop();
        });
        let e = export::run(&db.target, &o, progress).await.unwrap_err();
        stopper.await.unwrap();
        assert_eq!(e.kind(), ErrorKind::Interrupted, "{e:?}");
        assert!(e.hint().unwrap().contains("removed"), "{e:?}");
        assert!(!out.exists());
        no_partial_file_beside(&out);
    }
}
