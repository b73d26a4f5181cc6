//! `pgtide copy` through the binary (JSON summary, --verify, exit codes,
//! errors, Ctrl-C), and `pgtide export` stopped by SIGINT/SIGTERM: exit
//! 130 and no FILE nor partial file left.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cluster, pgtide, psql, text};

/// `pgtide copy --from a --to b` + `args`.
fn copy(from: &str, to: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["copy", "--from", from, "--to", to];
    all.extend_from_slice(args);
    pgtide(&all, b"")
}

#[test]
fn copies_with_json_and_verify_and_fails_with_error_and_hint() {
    let (a, b) = (cluster(), cluster());
    for c in [&a, &b] {
        psql(
            c,
            "CREATE TABLE t (id int, v text); CREATE TABLE u (id int)",
        );
    }
    psql(
        &a,
        "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 20000) g; \
         INSERT INTO u VALUES (1), (2)",
    );
    let (from, to) = (a.conninfo(), b.conninfo());
    let out = copy(
        &from,
        &to,
        &[
            "--table",
            "t",
            "--table",
            "u",
            "--workers",
            "2",
            "--verify",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["rows"], 20002);
    assert_eq!(v["ok"], true);
    assert_eq!(v["tables"][0]["source"], "public.t");
    assert_eq!(v["tables"][0]["format"], "binary");
    assert_eq!(v["tables"][0]["verify"]["matched"], true);
    assert_eq!(psql(&b, "SELECT count(*) FROM t"), "20000");
    // Again, without --truncate: the target now has every row twice, and
    // --verify says so (exit 2, the table named).
    let out = copy(&from, &to, &["--table", "u", "--verify"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: verify") && err.contains("public.u"),
        "{err}"
    );
    assert!(err.contains("hint: "), "{err}");
    assert!(
        text(&out.stdout).contains("VERIFY MISMATCH"),
        "{}",
        text(&out.stdout)
    );
    // --truncate: one transaction per table, FREEZE, in the summary.
    let out = copy(&from, &to, &["--table", "u", "--truncate", "--verify"]);
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        so.contains("COPY FREEZE") && so.contains("verified"),
        "{so}"
    );
    assert!(so.contains("binary (same column types"), "{so}");
    // A missing table: error + hint, exit 2.
    let out = copy(&from, &to, &["--table", "nope"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: table nope does not exist on the source"),
        "{err}"
    );
    assert!(err.contains("hint: "), "{err}");
    let out = pgtide(&["copy", "--help"], b"");
    let help = text(&out.stdout);
    assert!(
        help.contains("Binary or text") && help.contains("--create"),
        "{help}"
    );
}

/// Starts `pgtide args`, waits until `ready` is true, sends `signal`,
/// returns the exit code, stdout and stderr.
fn interrupt(
    args: &[&str],
    signal: &str,
    ready: impl Fn() -> bool,
) -> (Option<i32>, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_pgtide"))
        .args(args)
        .env_remove("PGHOST")
        .env_remove("PGPASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(60), "never ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn export_stopped_by_a_signal_leaves_no_file_and_exits_130() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("slow.csv");
    // The partial file: `slow.csv.XXXXXX.partial`.
    let partial = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|f| f.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".partial"))
    };
    let db = c.conninfo();
    // Slow enough to be caught with a partial file on disk.
    let query = "SELECT g, repeat('x', 200), pg_sleep(CASE WHEN g % 100 = 0 THEN 0.01 ELSE 0 END) \
                 FROM generate_series(1, 200000) g";
    for signal in ["-INT", "-TERM"] {
        let (code, _, err) = interrupt(
            &[
                "export",
                "--query",
                query,
                "--output",
                file.to_str().unwrap(),
                "--db",
                &db,
            ],
            signal,
            || partial().is_some_and(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0)),
        );
        assert_eq!(code, Some(130), "{signal}: {err}");
        assert!(err.contains("error: the export was interrupted"), "{err}");
        assert!(err.contains("hint: "), "{err}");
        assert_eq!(partial(), None, "{signal}: partial file left");
        assert!(!file.exists(), "{signal}: FILE written");
    }
}

#[test]
fn copy_stopped_by_a_signal_lists_the_committed_ranges_and_exits_130() {
    let (a, b) = (cluster(), cluster());
    for c in [&a, &b] {
        psql(c, "CREATE TABLE t (id int, pad text)");
    }
    psql(
        &a,
        "INSERT INTO t SELECT g, repeat('p', 100) FROM generate_series(1, 200000) g",
    );
    psql(
        &b,
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ \
           BEGIN IF NEW.id % 1000 = 0 THEN PERFORM pg_sleep(0.01); END IF; RETURN NEW; END $$; \
         CREATE TRIGGER slow BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION slow();",
    );
    let (from, to) = (a.conninfo(), b.conninfo());
    let (code, out, err) = interrupt(
        &[
            "copy",
            "--from",
            &from,
            "--to",
            &to,
            "--table",
            "t",
            "--workers",
            "2",
        ],
        "-INT",
        || psql(&b, "SELECT count(*) > 0 FROM t") == "t",
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("error: the copy was interrupted"), "{err}");
    assert!(
        out.contains("committed") && out.contains("blocks 0-"),
        "{out}"
    );
}
