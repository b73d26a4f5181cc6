//! `--resume` (issue 9 part 1): exactly once across kills.
//!
//! The fault test runs the load in a child process (this test binary
//! again, running [`resume_child`]) and kills it with SIGKILL at random
//! moments, several seeds, into a table without a primary key whose
//! COMMIT is slowed by a deferred constraint trigger (so kills land
//! during COPY and during COMMIT), then resumes with other worker counts,
//! chunk sizes and methods until a run exits 0. The table must equal a
//! clean load (counts and `EXCEPT ALL` both ways). One seed restarts the
//! server (`-m immediate`) mid-load, one reads gzip, one has bad rows
//! and `--rejects` (each exactly once in the reject file).

mod support;

use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::ledger::{self, ResumeMode};
use pgtide::load::{self, LoadOptions, Method};
use pgtide::progress::Progress;
use support::{assert_same_rows, Compress, Db};

const ROWS: u64 = 200_000;
const CHILD: &str = "PGTIDE_RESUME_CHILD";

/// The file: `ROWS` rows; with `bad`, every 40,001st row has a bad int.
fn data(bad: bool) -> (Vec<u8>, Vec<u8>, Vec<String>) {
    let (mut file, mut good, mut rejects) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..ROWS {
        let line = if bad && i % 30_001 == 17 {
            let l = format!("{i},x{i},bad");
            rejects.push(l.clone());
            l
        } else {
            let l = format!("{i},{},\"row {}, \"\"q\"\"\"", i % 997, i % 10_000);
            good.extend_from_slice(l.as_bytes());
            good.push(b'\n');
            l
        };
        file.extend_from_slice(line.as_bytes());
        file.push(b'\n');
    }
    (file, good, rejects)
}

/// A table without a key whose COMMIT takes a while (a deferred
/// constraint trigger sleeping for a few rows of each chunk).
async fn table(db: &Db, name: &str) {
    db.client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id int, n int, s text);
             CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON {name}
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
               WHEN (NEW.id % 5000 = 0) EXECUTE FUNCTION slow_commit();"
        ))
        .await
        .unwrap();
}

async fn setup(db: &Db) {
    db.client
        .batch_execute(
            "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN PERFORM pg_sleep(0.02); RETURN NULL; END $$",
        )
        .await
        .unwrap();
}

/// A tiny deterministic generator (no rand dependency).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

fn spawn_child(
    db: &Db,
    input: &str,
    table: &str,
    workers: usize,
    chunk: usize,
    method: &str,
    rejects: Option<&str>,
) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "resume_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("PGTIDE_RESUME_DB", db.cluster.conninfo())
        .env("PGTIDE_RESUME_INPUT", input)
        .env("PGTIDE_RESUME_TABLE", table)
        .env("PGTIDE_RESUME_WORKERS", workers.to_string())
        .env("PGTIDE_RESUME_CHUNK", chunk.to_string())
        .env("PGTIDE_RESUME_METHOD", method)
        .stdout(std::process::Stdio::null());
    if let Some(r) = rejects {
        c.env("PGTIDE_RESUME_REJECTS", r);
    }
    c.spawn().expect("spawn the child load")
}

/// The load of the fault test, in the child process: exits 0 (done), 1
/// (done, rows rejected) or 2 (stopped).
#[test]
fn resume_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let var = |k: &str| std::env::var(k).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let code = rt.block_on(async {
        let target = pgtide::conn::Target::parse(&var("PGTIDE_RESUME_DB")).unwrap();
        let mut o = LoadOptions::new(
            vec![var("PGTIDE_RESUME_INPUT")],
            QualifiedName::parse(&var("PGTIDE_RESUME_TABLE")).unwrap(),
            CopyFormat::Csv,
        );
        o.workers = var("PGTIDE_RESUME_WORKERS").parse().unwrap();
        o.chunk_bytes = var("PGTIDE_RESUME_CHUNK").parse().unwrap();
        o.method = match var("PGTIDE_RESUME_METHOD").as_str() {
            "binary" => Method::Binary,
            "values" => Method::Values,
            _ => Method::Copy,
        };
        o.rejects = std::env::var("PGTIDE_RESUME_REJECTS").ok().map(Into::into);
        o.resume = Some(ResumeMode::Edges);
        match load::run(&target, &o, Arc::new(Progress::new(o.workers))).await {
            Err(e) => {
                eprintln!("child: load refused: {e:?}");
                2
            }
            Ok(r) if r.failure.is_some() => {
                eprintln!("child: load stopped: {:?}", r.failure);
                2
            }
            Ok(r) => {
                eprintln!(
                    "child: read {} loaded {} rejected {} resumed {}",
                    r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_resumed
                );
                i32::from(r.rows_rejected > 0)
            }
        }
    });
    std::process::exit(code);
}

struct Seed {
    seed: u64,
    compress: Compress,
    bad: bool,
    restart: bool,
}

async fn kill_and_resume(db: &Db, s: Seed) {
    let (file, good, bad_rows) = data(s.bad);
    let got = format!("got_{}", s.seed);
    let want = format!("want_{}", s.seed);
    table(db, &got).await;
    db.client
        .batch_execute(&format!("CREATE TABLE {want} (id int, n int, s text)"))
        .await
        .unwrap();
    let clean = db.file(&good, Compress::None);
    db.client
        .batch_execute(&format!(
            "COPY {want} FROM '{}' (FORMAT csv)",
            clean.display()
        ))
        .await
        .unwrap();
    let input = db.file(&file, s.compress);
    let input = input.to_str().unwrap().to_owned();
    let rejects = s.bad.then(|| format!("{input}.rejects"));
    let mut rng = Lcg(s.seed * 7919 + 1);
    let mut kills = 0;
    let mut attempt = 0u64;
    let code = loop {
        assert!(attempt < 12, "seed {}: no run finished", s.seed);
        let workers = 1 + ((attempt + s.seed) % 3) as usize;
        let chunk = [96 * 1024, 256 * 1024, 160 * 1024][(attempt % 3) as usize];
        let last = attempt >= 4;
        // Every method records its chunks; the last run is a plain COPY
        // (values and binary are slow in a debug build).
        let method = match attempt {
            _ if last => "copy",
            _ => ["copy", "binary", "copy", "values"][((attempt + s.seed) % 4) as usize],
        };
        let mut child = spawn_child(db, &input, &got, workers, chunk, method, rejects.as_deref());
        let at = Duration::from_millis(100 + rng.next(900));
        let started = Instant::now();
        let mut restarted = false;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if s.restart && attempt == 1 && !restarted && started.elapsed() > at / 2 {
                let cluster = &db.cluster;
                tokio::task::block_in_place(|| cluster.restart("immediate")).expect("restart");
                restarted = true;
            }
            if !last && started.elapsed() >= at {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                break None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        attempt += 1;
        eprintln!(
            "seed {} run {attempt}: {workers} workers, {chunk} B chunks, {method}: {:?} after {:?}",
            s.seed,
            status.map_or("killed".into(), |st| format!("{st}")),
            started.elapsed()
        );
        match status.and_then(|st| st.code()) {
            Some(c @ (0 | 1)) => break c,
            Some(c) => panic!("seed {}: run {attempt} exited {c}", s.seed),
            None => {}
        }
    };
    assert!(
        kills >= 1,
        "seed {}: the load must have been killed",
        s.seed
    );
    assert!(code == 0 || s.bad, "seed {}: exit {code}", s.seed);

    let client = db.target.connect().await.unwrap();
    let count = |t: String| {
        let client = &client;
        async move {
            client
                .query_one(&format!("SELECT count(*) FROM {t}"), &[])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    assert_eq!(
        count(got.clone()).await,
        count(want.clone()).await,
        "seed {}: rows after {kills} kills",
        s.seed
    );
    assert_same_rows(&client, &got, &want, &format!("seed {}", s.seed)).await;
    if let Some(path) = &rejects {
        let mut lines: Vec<String> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        let mut expected = bad_rows.clone();
        expected.sort();
        assert_eq!(lines, expected, "seed {}: each bad row once", s.seed);
        let log = std::fs::read_to_string(format!("{path}.log")).unwrap();
        assert_eq!(log.lines().count(), bad_rows.len(), "seed {}: log", s.seed);
        assert!(
            log.lines().all(|l| l.contains("\"run\":")),
            "the log names the run"
        );
    }

    // Once more: nothing left, says so, exits 0.
    let mut o = LoadOptions::new(
        vec![input.clone()],
        QualifiedName::parse(&got).unwrap(),
        CopyFormat::Csv,
    );
    o.resume = Some(ResumeMode::Edges);
    o.rejects = rejects.as_ref().map(Into::into);
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_read, r.rows_loaded), (0, 0), "seed {}", s.seed);
    assert_eq!(r.rows_resumed, ROWS, "seed {}", s.seed);
    assert!(
        r.notes.iter().any(|n| n.contains("already complete")),
        "{:?}",
        r.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_loads_resume_exactly_once() {
    let db = Db::start().await;
    setup(&db).await;
    for s in [
        Seed {
            seed: 1,
            compress: Compress::None,
            bad: false,
            restart: false,
        },
        Seed {
            seed: 2,
            compress: Compress::Gzip,
            bad: false,
            restart: false,
        },
        Seed {
            seed: 3,
            compress: Compress::None,
            bad: true,
            restart: false,
        },
        // Last: its restart ends `db.client`'s session, which the seeds
        // before it use.
        Seed {
            seed: 4,
            compress: Compress::Zstd,
            bad: false,
            restart: true,
        },
    ] {
        kill_and_resume(&db, s).await;
    }
}

/// What `--resume` refuses, and the ledger commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_refuses_what_differs() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE a (id int, n int, s text); CREATE TABLE b (id int, n int, s text)",
        )
        .await
        .unwrap();
    let (file, _, _) = data(false);
    let end = file[..200_000].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let file = &file[..end];
    let path = db.file(file, Compress::None);
    let input = path.to_str().unwrap().to_owned();
    let opts = |table: &str| {
        let mut o = LoadOptions::new(
            vec![input.clone()],
            QualifiedName::parse(table).unwrap(),
            CopyFormat::Csv,
        );
        o.resume = Some(ResumeMode::Edges);
        o.chunk_bytes = 16 * 1024;
        o.workers = 2;
        o
    };
    let run = |o: LoadOptions| {
        let target = db.target.clone();
        async move { load::run(&target, &o, Arc::new(Progress::new(2))).await }
    };
    let r = run(opts("a")).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(r.rows_read > 1000);
    let loaded = r.rows_loaded;

    // Already complete: exit 0, nothing loaded, says so.
    let r = run(opts("a")).await.unwrap();
    assert_eq!((r.rows_read, r.rows_resumed), (0, loaded));
    assert!(r.notes.iter().any(|n| n.contains("already complete")));

    // Another table.
    let e = run(opts("b")).await.unwrap_err();
    assert!(
        e.message().contains("loaded into public.a, not public.b"),
        "{e:?}"
    );
    // Other options.
    let mut o = opts("a");
    o.copy.null = Some("NA".into());
    let e = run(o).await.unwrap_err();
    assert!(e.message().contains("null was null, is \"NA\""), "{e:?}");
    // stdin.
    let mut o = opts("a");
    o.inputs = vec!["-".into()];
    let e = run(o).await.unwrap_err();
    assert!(e.message().contains("stdin"), "{e:?}");
    // Another file at the same path (grown).
    let mut longer = file.to_vec();
    longer.extend_from_slice(b"999999,1,x\n");
    std::fs::write(&path, &longer).unwrap();
    let e = run(opts("a")).await.unwrap_err();
    assert!(e.message().contains("its size was"), "{e:?}");
    assert!(e.hint().unwrap().contains("pgtide ledger forget"), "{e:?}");

    // The ledger: listed, forgotten, then the file loads afresh.
    let entries = ledger::list(&db.client).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].rows as u64, loaded);
    assert_eq!(entries[0].table, "public.a");
    assert!(
        ledger::forget(&db.client, Some(&input), Some("b"))
            .await
            .unwrap()
            == 0
    );
    assert!(
        ledger::forget(&db.client, Some(&input), Some("a"))
            .await
            .unwrap()
            > 0
    );
    let r = run(opts("a")).await.unwrap();
    assert_eq!((r.rows_read, r.rows_resumed), (loaded + 1, 0));
}

/// Ledger ranges that do not match this run's chunks: the rest is cut at
/// record boundaries; with `--truncate`, a resumed run does not truncate
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_chunks_and_truncate() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE t (id int, n int, s text); CREATE TABLE w (id int, n int, s text)",
        )
        .await
        .unwrap();
    let (file, _, _) = data(false);
    let end = file[..300_000].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let file = &file[..end];
    let path = db.file(file, Compress::None);
    db.client
        .batch_execute(&format!("COPY w FROM '{}' (FORMAT csv)", path.display()))
        .await
        .unwrap();
    let input = path.to_str().unwrap().to_owned();
    let mut o = LoadOptions::new(
        vec![input.clone()],
        QualifiedName::parse("t").unwrap(),
        CopyFormat::Csv,
    );
    o.resume = Some(ResumeMode::Edges);
    o.chunk_bytes = 37 * 1024;
    o.workers = 3;
    o.truncate = true;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(3)))
        .await
        .unwrap();
    assert!(r.failure.is_none());
    // Undo every other chunk (ledger row and table rows), as if it had
    // never committed.
    let starts: Vec<u64> = std::iter::once(0)
        .chain(
            file.iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| i as u64 + 1),
        )
        .collect();
    let gone = db
        .client
        .query(
            "DELETE FROM pgtide.ledger WHERE (first_byte / 37000) % 2 = 0 RETURNING first_byte, end_byte",
            &[],
        )
        .await
        .unwrap();
    assert!(gone.len() >= 3);
    for row in &gone {
        let (a, b) = (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64);
        let lo = starts.partition_point(|&s| s < a) as i32;
        let hi = starts.partition_point(|&s| s < b) as i32;
        db.client
            .execute("DELETE FROM t WHERE id >= $1 AND id < $2", &[&lo, &hi])
            .await
            .unwrap();
    }
    o.chunk_bytes = 50 * 1024;
    o.workers = 2;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(2)))
        .await
        .unwrap();
    assert!(r.failure.is_none());
    assert!(r.rows_resumed > 0 && r.rows_read > 0);
    assert!(
        r.notes.iter().any(|n| n.contains("not truncated again")),
        "{:?}",
        r.notes
    );
    assert_same_rows(&db.client, "t", "w", "partial resume").await;
    let n: i64 = db
        .client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n as u64, r.rows_read + r.rows_resumed);
}

/// `--resume --force` starts the reject file over, and writes its log as
/// appended runs do (`run`, `end`): the next run reads it, so a row
/// rejected by the forced run is neither tried nor written again.
#[tokio::test]
async fn a_forced_reject_file_is_read_by_the_next_run() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE f (a int, b text)")
        .await
        .unwrap();
    let path = db.file(b"1,a\nx,b\n3,c\n", Compress::None);
    let dir = tempfile::tempdir().unwrap();
    let rejects = dir.path().join("f.rejects");
    std::fs::write(&rejects, "an older load's rejects\n").unwrap();
    let mut o = LoadOptions::new(
        vec![path.to_str().unwrap().into()],
        QualifiedName::parse("f").unwrap(),
        CopyFormat::Csv,
    );
    o.resume = Some(ResumeMode::Edges);
    o.rejects = Some(rejects.clone());
    o.overwrite_rejects = true;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_loaded, r.rows_rejected), (2, 1));
    let log = std::fs::read_to_string(format!("{}.log", rejects.display())).unwrap();
    assert!(
        log.contains("\"run\":") && log.contains("\"end\":4"),
        "{log}"
    );

    o.overwrite_rejects = false;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_read, r.rows_rejected), (0, 0), "{:?}", r.notes);
    assert!(
        r.notes.iter().any(|n| n.contains("already complete")),
        "{:?}",
        r.notes
    );
    assert_eq!(std::fs::read_to_string(&rejects).unwrap(), "x,b\n");
}
