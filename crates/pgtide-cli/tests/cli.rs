//! End-to-end through the `pgtide` binary: stdin, exit codes, `error:` and
//! `hint:` lines, JSON summary, no panics, no passwords.
//!
//! One test binary; the tests live by theme under `cli/`, and the
//! helpers two themes share (`--truncate` and reject files both check
//! that a refused load leaves the table alone) are below.

mod common;

#[path = "cli/basics.rs"]
mod basics;
#[path = "cli/edges.rs"]
mod edges;
#[path = "cli/passwords.rs"]
mod passwords;
#[path = "cli/rejects.rs"]
mod rejects;
#[path = "cli/server_dir.rs"]
mod server_dir;
#[path = "cli/truncate.rs"]
mod truncate;

use std::process::Output;

use common::{psql, text};
use pgtide::cluster::Cluster;

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
