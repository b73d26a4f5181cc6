//! End-to-end through the `pgtide` binary: stdin, exit codes, `error:` and
//! `hint:` lines, JSON summary, no panics, no passwords.

mod common;

use std::process::{Command, Output, Stdio};

use common::{cluster, pgtide, psql, text};
use pgtide::cluster::{Cluster, ClusterOptions, PgBin};

#[test]
fn loads_stdin_with_a_column_subset_and_prints_json() {
    let c = cluster();
    psql(
        &c,
        "CREATE TABLE t (id int, name text, extra int DEFAULT 5)",
    );
    let db = c.conninfo();
    let out = pgtide(
        &[
            "load",
            "-",
            "--table",
            "t",
            "--format",
            "csv",
            "--columns",
            "id,name",
            "--db",
            &db,
            "--json",
        ],
        b"1,one\n2,\"two, too\"\n3,three",
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["rows_loaded"], 3);
    assert_eq!(v["rows_read"], 3);
    assert_eq!(v["workers"], 1);
    assert_eq!(v["method"], "copy");
    assert!(v["server_version"].as_str().is_some());
    assert_eq!(
        psql(
            &c,
            "SELECT string_agg(name || extra, '|' ORDER BY id) FROM t"
        ),
        "one5|two, too5|three5"
    );
}

#[test]
fn errors_are_one_line_with_a_hint_and_exit_2() {
    let c = cluster();
    let db = c.conninfo();
    let out = pgtide(&["load", "-", "--table", "missing", "--db", &db], b"1\n");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("error: table missing does not exist"),
        "{err}"
    );
    assert!(err.contains("\nhint: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    psql(&c, "CREATE TABLE t (a int, b int)");
    let out = pgtide(&["load", "-", "--table", "t", "--db", &db], b"1,2\n3,4,5\n");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("error: -:2: "), "{err}");
    assert!(err.contains("22P04"), "{err}");
    assert!(
        text(&out.stdout).contains("committed: nothing"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_server_that_is_down_is_an_error_not_a_panic_and_hides_the_password() {
    let out = pgtide(
        &[
            "load",
            "-",
            "--table",
            "t",
            "--db",
            "postgresql://app:s3cretpw@127.0.0.1:1/db",
        ],
        b"1\n",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("hint: "), "{err}");
    assert!(!err.contains("s3cretpw"), "password printed: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unreadable_input_and_bad_flags_fail_cleanly() {
    let out = pgtide(
        &[
            "load",
            "/nonexistent.csv",
            "--table",
            "t",
            "--db",
            "host=127.0.0.1 port=1",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("error: "),
        "{}",
        text(&out.stderr)
    );
    let out = pgtide(
        &[
            "load", "x.csv", "--table", "t", "--format", "text", "--quote", "'",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("need --format csv"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn help_explains_the_commit_model_and_exit_codes() {
    let out = pgtide(&["load", "--help"], b"");
    let help = text(&out.stdout);
    assert!(help.contains("Commit model"), "{help}");
    assert!(help.contains("Exit codes"), "{help}");
}

/// A table `t (id int primary key, v text)` holding rows 1, 2 and 3.
fn table_with_three_rows(c: &Cluster) {
    psql(
        c,
        "DROP TABLE IF EXISTS t; CREATE TABLE t (id int primary key, v text); \
         INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    );
}

/// The load failed cleanly (exit 2, `error:` and `hint:`) and `t` still
/// holds its three rows.
fn assert_refused_and_untouched(c: &Cluster, out: &Output, case: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{case}: {err}");
    assert!(err.starts_with("error: "), "{case}: {err}");
    assert!(err.contains("\nhint: "), "{case}: {err}");
    assert_eq!(
        psql(c, "SELECT string_agg(id::text, ',' ORDER BY id) FROM t"),
        "1,2,3",
        "{case}: the table was emptied: {err}"
    );
}

#[test]
fn truncate_happens_only_after_everything_was_checked() {
    let bin = PgBin::for_tests().expect("PostgreSQL binaries");
    let opts = ClusterOptions {
        settings: vec![("max_connections".into(), "10".into())],
        ..ClusterOptions::default()
    };
    let c = Cluster::temp(&bin, opts).expect("throwaway cluster");
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.csv");
    std::fs::write(&good, "id,v\n7,x\n8,y\n").unwrap();
    let bad_header = dir.path().join("bad_header.csv");
    std::fs::write(&bad_header, "id,wrong\n9,z\n").unwrap();
    let missing = dir.path().join("missing.csv");
    let (good, bad_header, missing) = (
        good.to_str().unwrap(),
        bad_header.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    let dirname = dir.path().to_str().unwrap();
    let base = ["load", "--table", "t", "--db", &db, "--truncate", "-q"];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("missing input", vec![missing, "--header"]),
        ("missing second input", vec![good, missing, "--header"]),
        ("directory as input", vec![dirname, "--header"]),
        (
            "--batch-rows 0",
            vec![good, "--header", "--method", "values", "--batch-rows", "0"],
        ),
        (
            "--sql with --method copy",
            vec![
                good,
                "--header",
                "--method",
                "copy",
                "--sql",
                "INSERT INTO t VALUES ($1::int, $2)",
            ],
        ),
        (
            "HEADER MATCH mismatch",
            vec![bad_header, "--header", "match"],
        ),
        (
            "HEADER MATCH mismatch in the second input",
            vec![good, bad_header, "--header", "match"],
        ),
        (
            "more workers than max_connections",
            vec![good, "--header", "--workers", "20"],
        ),
    ];
    for (case, extra) in cases {
        table_with_three_rows(&c);
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        let out = pgtide(&args, b"");
        assert_refused_and_untouched(&c, &out, case);
    }

    // Once everything checks out, --truncate does replace the rows...
    table_with_three_rows(&c);
    let args: Vec<&str> = base.iter().copied().chain([good, "--header"]).collect();
    let out = pgtide(&args, b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        psql(&c, "SELECT string_agg(id::text, ',' ORDER BY id) FROM t"),
        "7,8"
    );
    // ...and an empty input empties the table, as loading nothing should.
    let out = pgtide(
        &["load", "-", "--table", "t", "--db", &db, "--truncate"],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(psql(&c, "SELECT count(*) FROM t"), "0");
}

/// Runs `pgtide load INPUT --rejects REJECTS --truncate` (plus `extra`)
/// into `t`.
fn load_with_rejects(db: &str, input: &str, rejects: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "load",
        input,
        "--table",
        "t",
        "--db",
        db,
        "--truncate",
        "-q",
        "--rejects",
        rejects,
    ];
    args.extend_from_slice(extra);
    pgtide(&args, b"")
}

#[test]
fn a_reject_file_never_overwrites_an_input_or_follows_a_link() {
    use std::os::unix::fs::symlink;
    let c = cluster();
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let data = "10,x\n11,y\n";
    let input = p("in.csv");
    std::fs::write(&input, data).unwrap();
    std::fs::hard_link(&input, p("hard.csv")).unwrap();
    symlink(&input, p("sym_to_input.csv")).unwrap();
    std::fs::write(p("other.txt"), "keep me\n").unwrap();
    symlink(p("other.txt"), p("sym_to_other.rejects")).unwrap();
    std::fs::write(p("old.rejects"), "old rejects\n").unwrap();
    let log_input = p("x.rejects.log");
    std::fs::write(&log_input, data).unwrap();

    let cases: [(&str, &str, &str, &[&str]); 8] = [
        ("the input itself", &input, &input, &[]),
        ("the input, with --force", &input, &input, &["--force"]),
        (
            "a hard link to the input",
            &input,
            &p("hard.csv"),
            &["--force"],
        ),
        (
            "a symlink to the input",
            &input,
            &p("sym_to_input.csv"),
            &["--force"],
        ),
        (
            "the input by another spelling",
            &input,
            &format!("{}/./in.csv", p("")),
            &[],
        ),
        (
            "its .log is the input",
            &log_input,
            &p("x.rejects"),
            &["--force"],
        ),
        (
            "a symlink at the reject path",
            &input,
            &p("sym_to_other.rejects"),
            &["--force"],
        ),
        (
            "an existing reject file without --force",
            &input,
            &p("old.rejects"),
            &[],
        ),
    ];
    for (case, input, rejects, extra) in cases {
        table_with_three_rows(&c);
        let out = load_with_rejects(&db, input, rejects, extra);
        assert_refused_and_untouched(&c, &out, case);
        assert_eq!(std::fs::read_to_string(input).unwrap(), data, "{case}");
    }
    assert_eq!(
        std::fs::read_to_string(p("other.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(
        std::fs::read_to_string(p("old.rejects")).unwrap(),
        "old rejects\n"
    );
    let out = load_with_rejects(&db, &input, &p("old.rejects"), &[]);
    let err = text(&out.stderr);
    assert!(err.contains("--force"), "{err}");
    let out = load_with_rejects(&db, &input, &input, &[]);
    let err = text(&out.stderr);
    assert!(err.contains("is an input"), "{err}");
}

#[test]
fn force_overwrites_a_reject_file_and_reject_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let c = cluster();
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let input = p("in.csv");
    std::fs::write(&input, "10,x\nbad,y\n12,z\n").unwrap();
    let mode = |path: &str| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;

    table_with_three_rows(&c);
    let fresh = p("fresh.rejects");
    let out = load_with_rejects(&db, &input, &fresh, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "bad,y\n");
    assert_eq!(mode(&fresh), 0o600);
    assert_eq!(mode(&format!("{fresh}.log")), 0o600);

    let old = p("old.rejects");
    std::fs::write(&old, "old rejects, much longer than the new ones\n").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = load_with_rejects(&db, &input, &old, &["--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "bad,y\n");
    assert_eq!(mode(&old), 0o600);
    assert_eq!(
        psql(&c, "SELECT string_agg(id::text, ',' ORDER BY id) FROM t"),
        "10,12"
    );
}

/// Every piece of two or more characters of `password`: none may appear
/// in anything pgtide prints.
fn assert_no_piece_of(password: &str, out: &Output, db: &str) {
    let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let chars: Vec<char> = password.chars().collect();
    for len in 2..=chars.len() {
        for w in chars.windows(len) {
            let piece: String = w.iter().collect();
            assert!(
                !printed.contains(&piece),
                "{piece:?} of the password printed for --db {db:?}:\n{printed}"
            );
        }
    }
}

#[test]
fn no_piece_of_a_password_is_ever_printed_and_the_hint_keeps_it_out_of_db() {
    let c = cluster();
    let port = c.port();
    // Letters chosen so that no pair of them occurs in pgtide's or the
    // server's own wording; each has the characters that break a
    // connection string when typed raw.
    let passwords = [
        r#"Qz:Xj@Vk/Wq=Jx'Zk"Yq Kv"#,
        "Zq@Jv/Xk?Yw",
        "Vx?Jq=Zk@Qj",
        "Wz Jq=Xv",
        "Kq'Zx Vj",
        "Jz%Qx:Wv",
        "Xq:Zj:Vw@Kx",
    ];
    for pw in passwords {
        let encoded: String = pw
            .bytes()
            .map(|b| match b {
                b if b.is_ascii_alphanumeric() => (b as char).to_string(),
                b => format!("%{b:02X}"),
            })
            .collect();
        let quoted = pw.replace('\\', "\\\\").replace('\'', "\\'");
        let dbs = [
            format!("postgresql://postgres:{pw}@127.0.0.1:{port}/postgres"),
            format!("postgresql://postgres:{pw}@127.0.0.1:{port}/postgres?sslmode=disable"),
            format!("host=127.0.0.1 port={port} user=postgres password={pw} dbname=postgres"),
            format!("password={pw} host=127.0.0.1 port={port} user=postgres"),
            format!("host=127.0.0.1 password='{pw}' port={port}"),
            // Written correctly: the server refuses the wrong password.
            format!("postgresql://postgres:{encoded}@127.0.0.1:{port}/postgres"),
            format!("host=127.0.0.1 port={port} user=postgres password='{quoted}'"),
        ];
        for (i, db) in dbs.iter().enumerate() {
            let out = pgtide(&["load", "-", "--table", "t", "--db", db], b"1\n");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{db}: {err}");
            assert!(
                err.starts_with("error: ") && err.contains("\nhint: "),
                "{err}"
            );
            assert!(!err.contains("panicked"), "{err}");
            assert_no_piece_of(pw, &out, db);
            if i >= 5 {
                assert!(err.contains("authentication failed"), "{db}: {err}");
                assert!(
                    err.contains("PGPASSWORD") && err.contains(".pgpass"),
                    "{err}"
                );
                assert!(err.contains("not in --db"), "{err}");
            }
        }
    }
}

#[test]
fn server_start_refuses_a_directory_it_did_not_create_and_touches_nothing() {
    use std::os::unix::fs::MetadataExt;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("theirs");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/file.txt"), "someone else's").unwrap();
    // As root (CI, containers), give the files a foreign owner, as a
    // user's own directory would have: they must keep it.
    let foreign = 4242;
    let root = running_as_root();
    if root {
        for p in [dir.clone(), dir.join("sub"), dir.join("sub/file.txt")] {
            std::os::unix::fs::chown(&p, Some(foreign), Some(foreign)).unwrap();
        }
    }
    let owners = || {
        ["", "sub", "sub/file.txt"].map(|p| {
            let m = std::fs::metadata(dir.join(p)).unwrap();
            (m.uid(), m.gid(), m.mode())
        })
    };
    let before = owners();
    let out = Command::new(env!("CARGO_BIN_EXE_pgtide"))
        .args(["server", "start"])
        .env("PGTIDE_SERVER_DIR", &dir)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: refusing to set up the embedded server in"),
        "{err}"
    );
    assert!(err.contains("not created by pgtide"), "{err}");
    assert!(
        err.contains("\nhint: ") && err.contains("PGTIDE_SERVER_DIR"),
        "{err}"
    );
    assert_eq!(owners(), before, "owners or modes changed");
    if root {
        assert_eq!(before[2].0, foreign);
    }
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["sub"], "nothing written into the directory");
}

/// Whether this test runs as root (the case where pgtide chowns).
fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    text(&out.stdout).trim() == "0"
}

/// Runs pgtide with its stdout a pipe nobody reads (`pgtide ... | head`
/// after head exited).
fn pgtide_closed_stdout(args: &[&str], envs: &[(&str, &std::path::Path)]) -> Output {
    // A socket pair with one end closed fails writes with EPIPE, as a
    // pipe does (std::io::pipe is newer than the workspace's MSRV).
    let (writer, reader) = std::os::unix::net::UnixStream::pair().unwrap();
    drop(reader);
    let writer = Stdio::from(std::os::fd::OwnedFd::from(writer));
    let mut c = Command::new(env!("CARGO_BIN_EXE_pgtide"));
    c.args(args).env_remove("PGHOST").stdin(Stdio::null());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.stdout(writer).stderr(Stdio::piped()).output().unwrap()
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
