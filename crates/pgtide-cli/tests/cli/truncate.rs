//! `--truncate` empties the table only once everything was checked: a
//! missing input, a bad flag, a HEADER MATCH mismatch or too many workers
//! leave the table's rows in place.

use pgtide::cluster::{Cluster, ClusterOptions, PgBin};

use crate::common::{pgtide, psql, text};
use crate::{assert_refused_and_untouched, table_with_three_rows};

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

/// `--single-transaction --truncate`: a bad row anywhere leaves the
/// table as it was (not emptied), a good file replaces it by COPY FREEZE
/// and the summary says so; the refused combinations exit 2 untouched.
#[test]
fn single_transaction_is_all_or_nothing_and_says_whether_it_froze() {
    let c = crate::common::cluster();
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.csv");
    let rows: String = (10..5000).map(|i| format!("{i},v{i}\n")).collect();
    std::fs::write(&good, &rows).unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, format!("{rows}oops,x\n")).unwrap();
    let (good, bad) = (good.to_str().unwrap(), bad.to_str().unwrap());
    let base = [
        "load",
        "--table",
        "t",
        "--db",
        &db,
        "--truncate",
        "--single-transaction",
        "--chunk-bytes",
        "4096",
    ];
    let refused: Vec<(&str, Vec<&str>)> = vec![
        ("a bad last row", vec![bad]),
        ("--workers 2", vec![good, "--workers", "2"]),
        ("--resume", vec![good, "--resume"]),
    ];
    for (case, extra) in refused {
        table_with_three_rows(&c);
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        let out = pgtide(&args, b"");
        assert_refused_and_untouched(&c, &out, case);
    }
    table_with_three_rows(&c);
    let args: Vec<&str> = base.iter().copied().chain([bad]).collect();
    let out = pgtide(&args, b"");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("committed: nothing"), "{stdout}");
    assert!(stdout.contains("rolled back whole"), "{stdout}");

    let args: Vec<&str> = base.iter().copied().chain([good]).collect();
    let out = pgtide(&args, b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("note: COPY FREEZE"), "{stdout}");
    assert_eq!(psql(&c, "SELECT count(*) FROM t"), "4990");
    let args: Vec<&str> = base.iter().copied().chain([good, "--json"]).collect();
    let out = pgtide(&args, b"");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["freeze"]["used"], true, "{v}");
    assert_eq!(v["single_transaction"], true, "{v}");
    // Without --single-transaction the summary says why not.
    let out = pgtide(
        &["load", good, "--table", "t", "--db", &db, "--truncate"],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("note: no COPY FREEZE: "), "{stdout}");
    // --explain, and --defer-constraints needs --defer-indexes (clap).
    let args: Vec<&str> = base.iter().copied().chain([good, "--explain"]).collect();
    let out = pgtide(&args, b"");
    assert!(
        text(&out.stdout).contains("yes: COPY .. FREEZE"),
        "{}",
        text(&out.stdout)
    );
    let out = pgtide(
        &[
            "load",
            good,
            "--table",
            "t",
            "--db",
            &db,
            "--defer-constraints",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--defer-indexes"),
        "{}",
        text(&out.stderr)
    );
}
