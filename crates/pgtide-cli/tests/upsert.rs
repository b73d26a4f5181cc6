//! `pgtide load --on-conflict`: flags, `--help`, and the summary line.

mod common;

use common::{cluster, pgtide, psql, text};

#[test]
fn on_conflict_update_merges_and_the_summary_splits_the_rows() {
    let c = cluster();
    psql(
        &c,
        "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'old'), (2, 'old')",
    );
    let db = c.conninfo();
    let load = |extra: &[&str], input: &[u8]| {
        let mut args = vec!["load", "-", "-t", "t", "--format", "csv", "--db", &db];
        args.extend_from_slice(extra);
        pgtide(&args, input)
    };
    let out = load(&["--on-conflict", "update"], b"2,new\n3,x\n3,y\n");
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let summary = text(&out.stdout);
    assert!(
        summary.contains("on conflict (id) update: inserted 1, updated 1, unchanged 1"),
        "{summary}"
    );
    assert_eq!(
        psql(&c, "SELECT string_agg(id || v, '|' ORDER BY id) FROM t"),
        "1old|2new|3y"
    );
    let out = load(&["--on-conflict", "skip", "--json"], b"1,zzz\n4,four\n");
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["upsert"]["inserted"], 1);
    assert_eq!(v["upsert"]["unchanged"], 1);
    assert_eq!(v["upsert"]["on_conflict"], "skip");
    let out = load(&["--key", "id"], b"1,a\n");
    assert_eq!(out.status.code(), Some(2), "--key alone is refused");
    let out = load(&["--on-conflict", "update", "--key", "v"], b"1,a\n");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("no unique index") && err.contains("hint: its unique keys: (id)"),
        "{err}"
    );
    let help = pgtide(&["load", "--help"], b"");
    assert!(text(&help.stdout).contains("Upserts (--on-conflict):"));
}

#[test]
fn explain_prints_the_plan_and_writes_nothing() {
    let c = cluster();
    psql(&c, "CREATE TABLE e (id int PRIMARY KEY, v text)");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.csv");
    std::fs::write(&input, "1,a\n2,b\n").unwrap();
    let db = c.conninfo();
    let args = [
        "load",
        input.to_str().unwrap(),
        "-t",
        "e",
        "--db",
        &db,
        "--workers",
        "2",
        "--method",
        "binary",
        "--on-conflict",
        "update",
        "--resume",
        "--truncate",
        "--explain",
    ];
    let out = pgtide(&args, b"");
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let plan = text(&out.stdout);
    for line in [
        "method: binary",
        "workers: 2 connections",
        "truncate: TRUNCATE \"public\".\"e\"",
        "freeze: no",
        "indexes: kept",
        "on conflict: (id) update",
        "resume: no ledger entry",
        "rejects: none",
    ] {
        assert!(plan.contains(line), "{line:?} in:\n{plan}");
    }
    // Nothing loaded, and the ledger was only read: no pgtide schema.
    assert_eq!(psql(&c, "SELECT count(*) FROM e"), "0");
    assert_eq!(
        psql(
            &c,
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'pgtide'"
        ),
        "0"
    );
    let mut json = args.to_vec();
    json.push("--json");
    let out = pgtide(&json, b"");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON plan");
    assert!(v["method"].as_str().unwrap().starts_with("binary"), "{v}");
}
