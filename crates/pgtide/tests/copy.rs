//! `pgtide copy` (the `transfer` module) between two real throwaway
//! servers: every built-in type arrives equal with 1 and 3 workers, by
//! binary or text as the catalogs allow; --truncate with FREEZE; --verify
//! catches a target that differs; a target backend killed mid-copy leaves
//! exactly the committed ranges; a stop request; --create from pg_dump
//! (indexes, a foreign key, sequences, a trigger, partitions; the same
//! definitions on both sides); PG 15 <-> 17 when a
//! second version is at hand.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` (or the default binaries). The
//! cross-version test takes the other version from
//! `$PGTIDE_TEST_PGBIN_OTHER`, else Debian's PG 15 or
//! `.cache/postgres/17.*/bin` (scripts/fetch-postgres.sh), whichever
//! differs from the main one; it says so and passes when there is none.
//!
//! One test binary; the tests live by theme under `copy/`, sharing the
//! helpers below.

#[path = "support/crash.rs"]
mod crash;
#[path = "copy/create.rs"]
mod create;
#[path = "copy/formats.rs"]
mod formats;
#[path = "copy/meaning.rs"]
mod meaning;
#[path = "copy/options.rs"]
mod options;
#[path = "copy/references.rs"]
mod references;
#[path = "copy/stopped.rs"]
mod stopped;

use std::sync::Arc;

use pgtide::cluster::{Cluster, ClusterOptions, PgBin};
use pgtide::conn::Target;
use pgtide::ident::QualifiedName;
use pgtide::progress::Progress;
use pgtide::transfer::{self, verify, TransferOptions, TransferReport};
use tokio_postgres::Client;

/// A throwaway server and a client on it.
struct Server {
    cluster: Cluster,
    target: Target,
    client: Client,
}

async fn server(bin: Option<PgBin>) -> Server {
    let cluster = tokio::task::spawn_blocking(move || {
        let bin = bin.unwrap_or_else(|| PgBin::for_tests().expect("PostgreSQL binaries"));
        Cluster::temp(&bin, ClusterOptions::default()).expect("start a throwaway cluster")
    })
    .await
    .unwrap();
    let target = cluster.target();
    let client = target.connect().await.expect("connect");
    Server {
        cluster,
        target,
        client,
    }
}

/// Two servers of the main version.
async fn pair() -> (Server, Server) {
    tokio::join!(server(None), server(None))
}

fn names(tables: &[&str]) -> Vec<QualifiedName> {
    tables
        .iter()
        .map(|t| QualifiedName::parse(t).unwrap())
        .collect()
}

async fn copy(from: &Server, to: &Server, opts: &TransferOptions) -> TransferReport {
    transfer::run(
        &from.target,
        &to.target,
        opts,
        Arc::new(Progress::new(opts.workers)),
    )
    .await
    .expect("the copy starts")
}

async fn copy_ok(from: &Server, to: &Server, opts: &TransferOptions) -> TransferReport {
    let r = copy(from, to, opts).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    r
}

/// Every row's text form, sorted: what must be equal on both sides.
async fn rows(c: &Client, table: &str) -> Vec<String> {
    c.batch_execute(verify::SESSION).await.unwrap();
    let mut v: Vec<String> = c
        .query(&format!("SELECT r::text FROM {table} r"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    v.sort();
    v
}

async fn same_rows(a: &Server, b: &Server, table: &str) {
    let (x, y) = (rows(&a.client, table).await, rows(&b.client, table).await);
    assert!(!x.is_empty(), "{table} is empty on the source");
    assert_eq!(x.len(), y.len(), "{table}: row counts differ");
    for (p, q) in x.iter().zip(&y) {
        assert_eq!(p, q, "{table}: rows differ");
    }
}

async fn both(a: &Server, b: &Server, sql: &str) {
    a.client.batch_execute(sql).await.unwrap();
    b.client.batch_execute(sql).await.unwrap();
}
