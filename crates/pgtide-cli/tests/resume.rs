//! `pgtide load --resume` and `pgtide ledger` from the binary: a complete
//! load says so and exits 0, stdin and a file listed twice are refused,
//! the ledger is listed and forgotten.

mod common;

use common::{cluster, pgtide, psql, text};

#[test]
fn resume_from_the_binary() {
    let c = cluster();
    psql(&c, "CREATE TABLE t (id int, v text)");
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.csv");
    let rows: String = (0..5000).map(|i| format!("{i},v{i}\n")).collect();
    std::fs::write(&file, rows).unwrap();
    let f = file.to_str().unwrap();
    let load = [
        "load",
        f,
        "--table",
        "t",
        "--format",
        "csv",
        "--db",
        &db,
        "--chunk-bytes",
        "8192",
        "--resume",
    ];
    let out = pgtide(&load, b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let again = [&load[..], &["--workers", "3"]].concat();
    let out = pgtide(&again, b"");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("already complete"), "{stdout}");
    assert_eq!(psql(&c, "SELECT count(*) FROM t"), "5000");

    let out = pgtide(
        &[
            "load", "-", "--table", "t", "--format", "csv", "--db", &db, "--resume",
        ],
        b"1,a\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--resume cannot read stdin"),
        "{}",
        text(&out.stderr)
    );

    // One file twice, the second time through another path: the copies
    // would share the ledger's entries, and the second was found
    // "complete" (a silent loss): refused, the table untouched.
    let other = format!("{}/./in.csv", dir.path().display());
    let twice = [&load[..], &[other.as_str(), "--truncate"]].concat();
    let out = pgtide(&twice, b"");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is listed twice"), "{err}");
    assert!(err.contains("without --resume"), "{err}");
    assert_eq!(psql(&c, "SELECT count(*) FROM t"), "5000");

    let out = pgtide(&["ledger", "list", "--json", "--db", &db], b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v[0]["rows"], 5000);
    assert_eq!(v[0]["table"], "public.t");

    let out = pgtide(&["ledger", "forget", f, "--db", &db], b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("forgot "),
        "{}",
        text(&out.stdout)
    );
    let out = pgtide(&["ledger", "list", "--db", &db], b"");
    assert!(
        text(&out.stdout).contains("is empty"),
        "{}",
        text(&out.stdout)
    );
}
