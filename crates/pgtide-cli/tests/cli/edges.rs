//! Edges of input and output: numbers too large for a flag, a closed
//! stdout (`pgtide ... | head`), names, columns and encodings as
//! PostgreSQL and psql read them, and a reader error after some chunks.

use std::process::{Command, Output, Stdio};

use crate::common::{cluster, pgtide, psql, text};

/// A pipe nobody reads (`pgtide ... | head` after head exited).
fn closed_pipe() -> Stdio {
    // A socket pair with one end closed fails writes with EPIPE, as a
    // pipe does (std::io::pipe is newer than the workspace's MSRV).
    let (writer, reader) = std::os::unix::net::UnixStream::pair().unwrap();
    drop(reader);
    Stdio::from(std::os::fd::OwnedFd::from(writer))
}

/// Runs pgtide with its stdout a closed pipe.
fn pgtide_closed_stdout(args: &[&str], envs: &[(&str, &std::path::Path)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pgtide"));
    c.args(args).env_remove("PGHOST").stdin(Stdio::null());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn huge_numbers_and_a_closed_stdout_end_cleanly_without_a_server() {
    for (flag, value) in [
        ("--workers", "1000000000000"),
        ("--workers", "0"),
        ("--chunk-bytes", "9223372036854775808"),
        ("--chunk-bytes", "99999999999999999999999"),
    ] {
        let out = pgtide(&["load", "-", "--table", "t", flag, value], b"");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains("from 1 to"), "{flag} {value}: {err}");
        assert!(!err.contains("bug") && !err.contains("panicked"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("none");
    let out = pgtide_closed_stdout(
        &["server", "status"],
        &[("PGTIDE_SERVER_DIR", server.as_path())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "quiet on a closed stdout");
    // A closed stderr (`2>&1 | head -1`): the error cannot be said, and
    // the exit code is still the error's (it was 134, an abort).
    let status = Command::new(env!("CARGO_BIN_EXE_pgtide"))
        .args(["load", "/nonexistent/in.csv", "--table", "t"])
        .env("PGTIDE_SERVER_DIR", server.as_path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2), "closed stderr");
}

#[test]
fn names_columns_encodings_and_reader_errors_as_postgresql_and_psql_would() {
    let c = cluster();
    let db = c.conninfo();
    // PostgreSQL folds ASCII letters only: ÜNÏ means "ÜnÏ", not "ünï".
    psql(
        &c,
        r#"CREATE TABLE "ÜnÏ" (id int, "B c" text, "x,y" text, "q""t" text, low text)"#,
    );
    let cols = r#"(ID, "B c", "x,y", "q""t", LOW)"#;
    let out = pgtide(
        &[
            "load",
            "-",
            "--table",
            "ÜNÏ",
            "--columns",
            cols,
            "--db",
            &db,
        ],
        b"1,a,b,c,d\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        psql(
            &c,
            r#"SELECT concat_ws('|', id, "B c", "x,y", "q""t", low) FROM "ÜnÏ""#
        ),
        "1|a|b|c|d"
    );

    // A closed stdout after a load: the load's own exit code, no panic.
    let input = dir_with("two.csv", b"2,e,f,g,h\n");
    let path = input.path().join("two.csv");
    let out = pgtide_closed_stdout(
        &[
            "load",
            path.to_str().unwrap(),
            "--table",
            "ÜNÏ",
            "--db",
            &db,
        ],
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("bug") && !err.contains("panicked"), "{err}");

    // An export to a closed stdout (`| head` gone): quiet, and the exit
    // code a shell gives a program SIGPIPE stopped (it was an error).
    let out = pgtide_closed_stdout(
        &[
            "export",
            "--query",
            "SELECT g FROM generate_series(1, 100000) g",
            "-o",
            "-",
            "--quiet",
            "--db",
            &db,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(141), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "quiet on a closed stdout");

    // An unknown --encoding is an option error: nothing loaded, nothing
    // truncated, no reject file.
    let rejects = input.path().join("r.csv");
    let out = pgtide(
        &[
            "load",
            "-",
            "--table",
            "ÜNÏ",
            "--encoding",
            "klingon",
            "--truncate",
            "--rejects",
            rejects.to_str().unwrap(),
            "--db",
            &db,
        ],
        b"3,i,j,k,l\n",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: --encoding \"klingon\""), "{err}");
    assert_eq!(psql(&c, r#"SELECT count(*) FROM "ÜnÏ""#), "2");
    assert!(!rejects.exists());

    // A reader error after some chunks: the summary counts what was read.
    psql(&c, "CREATE TABLE big (id int, v text)");
    let mut csv = Vec::new();
    for i in 0..50_000 {
        csv.extend(format!("{i},row number {i}\n").bytes());
    }
    let mut zst = zstd::encode_all(&csv[..], 1).unwrap();
    zst.truncate(zst.len() - 16);
    let out = pgtide(
        &[
            "load",
            "-",
            "--table",
            "big",
            "--chunk-bytes",
            "4096",
            "--json",
            "--db",
            &db,
        ],
        &zst,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let loaded: u64 = psql(&c, "SELECT count(*) FROM big").parse().unwrap();
    assert!(loaded > 0, "{v}");
    assert_eq!(v["rows_read"], loaded, "{v}");
    assert_eq!(v["rows_loaded"], loaded, "{v}");
}

fn dir_with(name: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), bytes).unwrap();
    dir
}

/// A load that stops reads rows it neither commits nor rejects: the
/// summary counts them, so that loaded + rejected + not loaded = read, in
/// the text line and in `--json`.
#[test]
fn a_stopped_load_counts_the_rows_it_did_not_load() {
    let c = cluster();
    let db = c.conninfo();
    psql(&c, "CREATE TABLE stops (id int)");
    let mut data = String::new();
    for i in 0..2000 {
        data.push_str(&format!(
            "{}\n",
            if i == 1500 { "x".into() } else { i.to_string() }
        ));
    }
    let input = dir_with("stops.csv", data.as_bytes());
    let path = input.path().join("stops.csv");
    let path = path.to_str().unwrap();
    let args = [
        "load",
        path,
        "--table",
        "stops",
        "--db",
        &db,
        "--chunk-bytes",
        "1000",
    ];
    let out = pgtide(&args, b"");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = stdout.lines().next().unwrap();
    let numbers: Vec<u64> = line
        .split(|ch: char| !ch.is_ascii_digit() && ch != ',')
        .filter_map(|w| w.replace(',', "").parse().ok())
        .collect();
    let [loaded, rejected, read, not_loaded] = numbers[..] else {
        panic!("{line}");
    };
    assert!(line.contains("not loaded (the load stopped)"), "{line}");
    assert_eq!(loaded + rejected + not_loaded, read, "{line}");
    let loaded_in_table: u64 = psql(&c, "SELECT count(*) FROM stops").parse().unwrap();
    assert_eq!(loaded, loaded_in_table, "{line}");
    psql(&c, "TRUNCATE stops");
    let json = pgtide(&[&args[..], &["--json"]].concat(), b"");
    let v: serde_json::Value = serde_json::from_str(text(&json.stdout).trim()).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap();
    assert_eq!(
        n("rows_loaded") + n("rows_rejected") + n("rows_not_loaded"),
        n("rows_read"),
        "{v}"
    );
}
