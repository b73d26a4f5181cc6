//! `pgtide load --resume` into a sharded target routed on the client,
//! from the binary: the summary after a shard failure lists what each
//! server committed (`done on SERVER`), a load killed with SIGKILL is
//! finished by resumed runs with other worker counts, every row exactly
//! once, and `pgtide ledger list` names the server holding entries.
//!
//! Two throwaway servers: the coordinator's `s` is hash-partitioned by
//! `n` (modulus 4), leaves 0 and 1 local, 2 and 3 postgres_fdw tables on
//! the second server (foreign server `shard2`). No key: a row loaded
//! twice shows.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cluster, pgtide, psql, text};
use pgtide::cluster::Cluster;

/// The coordinator and the shard server, the tree set up.
fn servers() -> (Cluster, Cluster) {
    let (c, c2) = (cluster(), cluster());
    psql(
        &c2,
        "CREATE TABLE r2 (n int, v int, t text); CREATE TABLE r3 (n int, v int, t text)",
    );
    psql(
        &c,
        &format!(
            "CREATE EXTENSION postgres_fdw;
             CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw
                 OPTIONS (host '127.0.0.1', port '{}', dbname 'postgres');
             CREATE USER MAPPING FOR CURRENT_USER SERVER shard2
                 OPTIONS (user 'postgres', password '{}');
             CREATE TABLE s (n int, v int, t text) PARTITION BY HASH (n);
             CREATE TABLE s0 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 0);
             CREATE TABLE s1 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 1);
             CREATE FOREIGN TABLE s2 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 2)
                 SERVER shard2 OPTIONS (table_name 'r2');
             CREATE FOREIGN TABLE s3 PARTITION OF s FOR VALUES WITH (modulus 4, remainder 3)
                 SERVER shard2 OPTIONS (table_name 'r3');
             CREATE TABLE clean (n int, v int, t text);",
            c2.port(),
            c2.password()
        ),
    );
    (c, c2)
}

/// `rows` rows `n,v,t`, every seventh `t` on two lines, every hundredth
/// row twice.
fn input(dir: &std::path::Path, rows: i32) -> String {
    let mut csv = String::new();
    for n in 0..rows {
        let row = match n % 7 {
            0 => format!("{n},{n},\"two\nlines {n}\"\n"),
            _ => format!("{n},{n},row {n}\n"),
        };
        csv.push_str(&row);
        if n % 100 == 0 {
            csv.push_str(&row);
        }
    }
    let file = dir.join("in.csv");
    std::fs::write(&file, csv).unwrap();
    file.to_str().unwrap().to_owned()
}

fn load_args<'a>(f: &'a str, db: &'a str, workers: &'a str) -> Vec<&'a str> {
    vec![
        "load",
        f,
        "--table",
        "s",
        "--format",
        "csv",
        "--db",
        db,
        "--workers",
        workers,
        "--chunk-bytes",
        "16384",
        "--resume",
    ]
}

/// `s` holds what a clean load of `f` holds: counts, and EXCEPT ALL
/// both ways.
fn same_as_clean(c: &Cluster, f: &str) {
    psql(c, "TRUNCATE clean");
    let db = c.conninfo();
    let out = pgtide(
        &[
            "load", f, "--table", "clean", "--format", "csv", "--db", &db,
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        psql(c, "SELECT count(*) FROM s"),
        psql(c, "SELECT count(*) FROM clean")
    );
    for (a, b) in [("s", "clean"), ("clean", "s")] {
        let sql = format!(
            "SELECT count(*) FROM (SELECT x::text FROM {a} x EXCEPT ALL SELECT x::text FROM {b} x) d"
        );
        assert_eq!(psql(c, &sql), "0", "{a} has rows {b} lacks");
    }
}

#[test]
fn a_shard_failure_lists_what_each_server_committed_and_resume_finishes() {
    let (c, c2) = servers();
    let dir = tempfile::tempdir().unwrap();
    let f = input(dir.path(), 4000);
    // shard2 stops itself (immediate) when the first of its keys from
    // 2900 on arrives, holding that row until it is gone.
    let stop_at = psql(
        &c,
        "SELECT min(g) FROM generate_series(2900, 3999) g, generate_series(2, 3) r \
         WHERE satisfies_hash_partition('s'::regclass, 4, r, g)",
    );
    for t in ["r2", "r3"] {
        psql(
            &c2,
            &format!(
                "CREATE OR REPLACE FUNCTION stop_here() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                     IF NEW.n = {stop_at} THEN
                         COPY (SELECT 1) TO PROGRAM
                             'cat >/dev/null; sh -c \"{} stop -m immediate -D {}\" </dev/null >/dev/null 2>&1 &';
                         PERFORM pg_sleep(120);
                     END IF;
                     RETURN NEW;
                 END $$;
                 CREATE TRIGGER stop_here BEFORE INSERT ON {t}
                     FOR EACH ROW EXECUTE FUNCTION stop_here();",
                c2.bin().tool("pg_ctl").display(),
                c2.data_dir().display()
            ),
        );
    }
    let db = c.conninfo();
    let out = pgtide(&load_args(&f, &db, "2"), b"");
    let stdout = text(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("shard2"), "{stderr}");
    assert!(stderr.contains("run the same command again"), "{stderr}");
    assert!(stdout.contains("done on coordinator: "), "{stdout}");
    assert!(stdout.contains("done on shard2: "), "{stdout}");

    c2.start().unwrap();
    psql(
        &c2,
        "DROP TRIGGER stop_here ON r2; DROP TRIGGER stop_here ON r3",
    );
    let out = pgtide(&load_args(&f, &db, "3"), b"");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("resumed: "), "{stdout}");
    same_as_clean(&c, &f);

    let out = pgtide(&load_args(&f, &db, "1"), b"");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("already complete"), "{stdout}");

    let out = pgtide(&["ledger", "list", "--db", &db], b"");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("server shard2 keeps its entries"),
        "{stdout}"
    );
    assert!(stdout.contains("(rows on server coordinator)"), "{stdout}");
    let out = pgtide(&["ledger", "list", "--db", &c2.conninfo()], b"");
    assert!(
        text(&out.stdout).contains("(rows on server shard2)"),
        "{}",
        text(&out.stdout)
    );
    let out = pgtide(&["ledger", "forget", &f, "--db", &db], b"");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("server shard2 keeps its own entries"),
        "{stdout}"
    );
}

#[test]
fn a_load_killed_with_sigkill_is_finished_by_resumed_runs_exactly_once() {
    let (c, c2) = servers();
    let dir = tempfile::tempdir().unwrap();
    let f = input(dir.path(), 150_000);
    let db = c.conninfo();
    // Killed twice, once entries are on the shard's ledger (the load is
    // well under way), then finished with another worker count.
    let entries = || {
        let sql = "SELECT count(*) FROM pgtide.ledger WHERE shard = 'shard2'";
        let out = c2
            .psql()
            .args(["-X", "-A", "-t", "-c", sql])
            .output()
            .unwrap();
        text(&out.stdout).trim().parse::<u64>().unwrap_or(0)
    };
    for (workers, after) in [("2", 2), ("3", 5)] {
        let before = entries();
        let mut child = Command::new(env!("CARGO_BIN_EXE_pgtide"))
            .args(load_args(&f, &db, workers))
            .env_remove("PGHOST")
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while entries() < before + after {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(120), "never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
    }
    let out = pgtide(&load_args(&f, &db, "1"), b"");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    // The kills came mid-load: this run had rows left, and skipped some.
    assert!(stdout.contains("resumed: "), "{stdout}");
    same_as_clean(&c, &f);
}
