//! Issue 13 part 2: progress that answers "how long?" — percent, rate and
//! ETA for inputs of known size; `--progress json` lines where there is no
//! terminal; nothing by default when stderr is not a terminal.

mod common;

use common::{cluster, pgtide, psql, text};

fn progress_lines(stderr: &str) -> Vec<serde_json::Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["progress"] == true)
        .collect()
}

#[test]
fn json_progress_reports_percent_rows_and_eta_and_auto_is_silent_off_a_terminal() {
    let c = cluster();
    psql(&c, "CREATE TABLE t (id int, v text)");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.csv");
    let data: String = (1..=5000).map(|i| format!("{i},value {i}\n")).collect();
    std::fs::write(&input, &data).unwrap();
    let db = c.conninfo();
    let path = input.to_str().unwrap();
    let out = pgtide(
        &[
            "load",
            path,
            "--table",
            "t",
            "--format",
            "csv",
            "--db",
            &db,
            "--progress",
            "json",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = progress_lines(&text(&out.stderr));
    let last = lines.last().expect("at least the final progress line");
    assert_eq!(last["rows"], 5000);
    assert_eq!(last["total"], data.len() as u64);
    assert_eq!(last["percent"], 100.0);
    assert_eq!(last["eta_seconds"], 0.0);
    // Stdin: no total, so no percent or ETA, but rows and bytes.
    let out = pgtide(
        &[
            "load",
            "-",
            "--table",
            "t",
            "--format",
            "csv",
            "--db",
            &db,
            "--progress",
            "json",
        ],
        data.as_bytes(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = progress_lines(&text(&out.stderr));
    let last = lines.last().expect("final progress line");
    assert_eq!(last["rows"], 5000);
    assert!(
        last["percent"].is_null() && last["eta_seconds"].is_null(),
        "{last}"
    );
    // The default, off a terminal: no progress output at all.
    let out = pgtide(
        &["load", path, "--table", "t", "--format", "csv", "--db", &db],
        b"",
    );
    assert!(out.status.success());
    assert!(progress_lines(&text(&out.stderr)).is_empty());
    assert!(!text(&out.stderr).contains("ETA"));
}
