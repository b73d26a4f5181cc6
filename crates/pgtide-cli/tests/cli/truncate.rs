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
