//! Issue 8 B10: Ctrl-C (SIGINT) and SIGTERM stop a load cleanly: no new
//! chunk starts, chunks in progress commit or roll back whole, the summary
//! lists the committed line ranges, and the exit code is 130.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cluster, psql, text};

#[test]
fn sigint_and_sigterm_stop_after_whole_chunks_with_exit_130() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.csv");
    let rows = 2_000_000u64;
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for id in 1..=rows {
        writeln!(f, "{id},row number {id} with some padding text").unwrap();
    }
    f.flush().unwrap();
    drop(f);
    for signal in ["-INT", "-TERM"] {
        psql(
            &c,
            "DROP TABLE IF EXISTS t; CREATE TABLE t (id int, v text)",
        );
        let child = Command::new(env!("CARGO_BIN_EXE_pgtide"))
            .args([
                "load",
                input.to_str().unwrap(),
                "--table",
                "t",
                "--format",
                "csv",
            ])
            .args(["--workers", "2", "--chunk-bytes", "65536", "--json"])
            .args(["--db", &c.conninfo()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until some rows are committed, then interrupt.
        let start = Instant::now();
        while psql(&c, "SELECT count(*) FROM t") == "0" {
            assert!(start.elapsed() < Duration::from_secs(60), "nothing loaded");
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success());
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{signal}: {err}");
        assert!(err.contains("error: interrupted"), "{signal}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
        let loaded = v["rows_loaded"].as_u64().unwrap();
        assert!(
            loaded > 0 && loaded < rows,
            "{signal}: stopped early: {loaded}"
        );
        assert_eq!(v["rows_read"].as_u64(), Some(loaded), "{signal}");
        // The table holds exactly the committed ranges (line = id here).
        let count: u64 = psql(&c, "SELECT count(*) FROM t").parse().unwrap();
        assert_eq!(count, loaded, "{signal}");
        let mut in_ranges = 0;
        for r in v["committed"].as_array().unwrap() {
            let (first, last) = (r["first"].as_u64().unwrap(), r["last"].as_u64().unwrap());
            let n: u64 = psql(
                &c,
                &format!("SELECT count(DISTINCT id) FROM t WHERE id BETWEEN {first} AND {last}"),
            )
            .parse()
            .unwrap();
            assert_eq!(n, last - first + 1, "{signal}: range {first}-{last} whole");
            in_ranges += n;
        }
        assert_eq!(in_ranges, count, "{signal}: nothing outside the ranges");
    }
}

/// `--single-transaction`: Ctrl-C rolls the whole load back, its
/// TRUNCATE included; exit 130, nothing counted as loaded.
#[test]
fn sigint_rolls_a_single_transaction_back_whole() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.csv");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for id in 1..=2_000_000u64 {
        writeln!(f, "{id},row number {id} with some padding text").unwrap();
    }
    f.flush().unwrap();
    drop(f);
    psql(
        &c,
        "DROP TABLE IF EXISTS t; CREATE TABLE t (id int, v text); \
         INSERT INTO t VALUES (-1, 'a'), (-2, 'b'), (-3, 'c')",
    );
    let child = Command::new(env!("CARGO_BIN_EXE_pgtide"))
        .args(["load", input.to_str().unwrap(), "--table", "t"])
        .args(["--format", "csv", "--truncate", "--single-transaction"])
        .args(["--chunk-bytes", "65536", "--json", "--db", &c.conninfo()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the load's COPY FREEZE is running, then interrupt.
    let start = Instant::now();
    while psql(
        &c,
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY %FREEZE%'",
    ) == "0"
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no COPY seen");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("error: interrupted"), "{err}");
    assert!(err.contains("nothing was committed"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["rows_loaded"].as_u64(), Some(0), "{v}");
    assert!(v["rows_read"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(
        psql(&c, "SELECT string_agg(id::text, ',' ORDER BY id) FROM t"),
        "-3,-2,-1",
        "the TRUNCATE was rolled back with the rows"
    );
}

/// `--single-transaction --rejects`: Ctrl-C still rolls everything back;
/// the reject file keeps the rows found bad before it, and the error
/// says that nothing was committed.
#[test]
fn sigint_rolls_a_single_transaction_with_rejects_back_and_keeps_the_rejects() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.csv");
    let rejects = dir.path().join("big.rejects");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    writeln!(f, "x,a bad id in the first chunk").unwrap();
    for id in 1..=2_000_000u64 {
        writeln!(f, "{id},row number {id} with some padding text").unwrap();
    }
    f.flush().unwrap();
    drop(f);
    psql(
        &c,
        "DROP TABLE IF EXISTS tr; CREATE TABLE tr (id int, v text); \
         INSERT INTO tr VALUES (-1, 'a')",
    );
    let child = Command::new(env!("CARGO_BIN_EXE_pgtide"))
        .args(["load", input.to_str().unwrap(), "--table", "tr"])
        .args(["--format", "csv", "--truncate", "--single-transaction"])
        .args(["--rejects", rejects.to_str().unwrap()])
        .args(["--chunk-bytes", "65536", "--json", "--db", &c.conninfo()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until chunks are COPYed under their savepoints, then interrupt.
    let start = Instant::now();
    while psql(
        &c,
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SAVEPOINT pgtide_attempt; COPY %'",
    ) == "0"
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no COPY seen");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("nothing was committed"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["rows_loaded"].as_u64(), Some(0), "{v}");
    assert_eq!(v["rows_rejected"].as_u64(), Some(1), "{v}");
    assert_eq!(psql(&c, "SELECT string_agg(id::text, ',') FROM tr"), "-1");
    let kept = std::fs::read_to_string(&rejects).unwrap();
    assert_eq!(kept, "x,a bad id in the first chunk\n");
}
