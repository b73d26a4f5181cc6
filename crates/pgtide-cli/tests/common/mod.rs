//! Shared by the binary's end-to-end tests: run `pgtide`, read its output,
//! a throwaway cluster and psql against it.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use pgtide::cluster::{Cluster, ClusterOptions, PgBin};

pub fn pgtide(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgtide"))
        .args(args)
        .env_remove("PGHOST")
        .env_remove("PGPASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pgtide");
    child.stdin.take().unwrap().write_all(stdin).ok();
    child.wait_with_output().unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn cluster() -> Cluster {
    let bin = PgBin::for_tests().expect("PostgreSQL binaries");
    Cluster::temp(&bin, ClusterOptions::default()).expect("throwaway cluster")
}

pub fn psql(c: &Cluster, sql: &str) -> String {
    let out = c
        .psql()
        .args(["-X", "-A", "-t", "-c", sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).trim().to_owned()
}
