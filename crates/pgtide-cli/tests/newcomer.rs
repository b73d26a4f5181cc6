//! Issue 13 part 3: without `--format`, the format comes from the file
//! (binary signature, then the name), and the summary says which.

mod common;

use common::{cluster, pgtide, psql, text};

#[test]
fn format_defaults_from_the_file_and_the_summary_says_so() {
    let c = cluster();
    psql(&c, "CREATE TABLE t (id int, v text)");
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("rows.tsv");
    std::fs::write(&tsv, "1\ta,b\n2\t\\N\n").unwrap();
    let out = pgtide(
        &["load", tsv.to_str().unwrap(), "--table", "t", "--db", &db],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("note: format text (from the file name"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        psql(&c, "SELECT count(*) FROM t WHERE v = 'a,b' OR v IS NULL"),
        "2"
    );
    // A binary COPY file, whatever its name.
    let bin = dir.path().join("rows.dat");
    let out = c
        .psql()
        .args([
            "-X",
            "-c",
            &format!("\\copy t TO '{}' (FORMAT binary)", bin.display()),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = pgtide(
        &[
            "load",
            bin.to_str().unwrap(),
            "--table",
            "t",
            "--db",
            &db,
            "--json",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["notes"].to_string().contains("binary COPY signature"),
        "{v}"
    );
    assert_eq!(psql(&c, "SELECT count(*) FROM t"), "4");
}
