//! The first things a user meets: a load from stdin with a JSON summary,
//! errors as one `error:` line plus a `hint:` and exit 2 (a missing
//! table, a bad row, a server that is down, an unreadable input, bad
//! flags), and `--help` explaining the commit model and exit codes.

use crate::common::{cluster, pgtide, psql, text};

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
