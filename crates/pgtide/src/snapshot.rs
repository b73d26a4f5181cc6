//! Many connections reading one table state: an exported snapshot and the
//! ctid block ranges its readers share out. Used by `export` (ranges
//! written to one file in block order) and `transfer` (ranges copied to
//! another server, each in its own transaction).
//!
//! ```text
//! coordinator: BEGIN REPEATABLE READ READ ONLY; LOCK t1, t2.. IN ACCESS
//!              SHARE MODE (a materialized view: SELECT FROM ONLY v LIMIT
//!              0); pg_export_snapshot(); each table's size in
//!              blocks                      (held open until dropped)
//! N readers:   BEGIN REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT
//!              then COPY (SELECT .. WHERE ctid in [a,b)) TO STDOUT, range
//!              after range
//! ```
//!
//! Every reader sees exactly the table state of the coordinator's
//! snapshot, so each row version visible then is in exactly one block
//! range and is read exactly once, whatever others write meanwhile. The
//! lock keeps TRUNCATE, VACUUM FULL, CLUSTER and DROP (which would move or
//! remove those versions) waiting until the snapshot is dropped; ordinary
//! writes are not blocked. The last range of a table has no upper bound.

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use crate::conn::{Target, Wire};
use crate::error::{Error, Result};
use crate::ident::quote_literal;

/// Largest range, in 8 KiB blocks (2 MiB of heap): small enough to fit in
/// an export range's channel, large enough that a range's COPY statement
/// (and, for a copy, its transaction) costs nothing next to its rows.
pub const RANGE_BLOCKS: u64 = 256;

/// The coordinator's open transaction and the readers that share its
/// snapshot. Dropping it ends every transaction (read-only: nothing to
/// undo) and releases the locks.
pub struct Snapshot {
    coordinator: Client,
    /// Per table given to [`open`], in that order: its blocks when the
    /// snapshot was taken.
    pub blocks: Vec<u64>,
    /// One connection per reader, each inside the snapshot, with its
    /// [`Wire`]: readers run their COPY on the raw stream
    /// ([`crate::copyout`]).
    pub workers: Vec<(Client, Wire)>,
}

impl Snapshot {
    /// The coordinator's connection, inside the snapshot (read only): for
    /// queries that must see the same table state as the readers.
    pub fn coordinator(&self) -> &Client {
        &self.coordinator
    }
}

/// Turns off the session's `idle_in_transaction_session_timeout` and, on
/// PostgreSQL 17+, its `transaction_timeout`: for a transaction that
/// waits on the client (a snapshot held for a run, an export's query
/// held open until its file is in place).
pub const NO_TIMEOUTS: &str = "SET idle_in_transaction_session_timeout = 0; \
     SELECT pg_catalog.set_config('transaction_timeout', '0', false) \
     WHERE pg_catalog.current_setting('server_version_num')::int >= 170000";

/// Opens the coordinator's snapshot on `tables` (each quoted, with its
/// `oid`) and `workers` connections that import it. `session` (may be
/// empty) runs on every connection first, e.g. `SET DateStyle = ISO`.
///
/// Each connection also turns off `idle_in_transaction_session_timeout`
/// and, on PostgreSQL 17+, `transaction_timeout` (as pg_dump does): the
/// coordinator sits idle in its transaction for the whole run, holding
/// the snapshot and the locks, and a role's or database's timeout would
/// end it halfway (the readers would lose their locks' protection;
/// `--verify`'s digest, run on it at the end, its connection).
pub async fn open(
    target: &Target,
    tables: &[(String, Oid)],
    workers: usize,
    session: &str,
) -> Result<Snapshot> {
    let session = format!("{NO_TIMEOUTS}; {session}");
    let session = session.as_str();
    let coordinator = target.connect().await?;
    coordinator.batch_execute(session).await?;
    // LOCK TABLE refuses materialized views: they are locked by reading
    // nothing from them, once the snapshot is taken (as a lone `COPY
    // (SELECT ..) TO` would lock them), the others before it.
    let oids: Vec<Oid> = tables.iter().map(|(_, o)| *o).collect();
    let views: Vec<Oid> = coordinator
        .query(
            "SELECT oid FROM pg_catalog.pg_class WHERE oid = ANY($1) AND relkind = 'm'",
            &[&oids],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let (mut locked, mut selected) = (Vec::new(), Vec::new());
    for (q, o) in tables {
        match views.contains(o) {
            true => selected.push(q.as_str()),
            false => locked.push(q.as_str()),
        }
    }
    let mut begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_owned();
    if !locked.is_empty() {
        begin += &format!("; LOCK TABLE {} IN ACCESS SHARE MODE", locked.join(", "));
    }
    for v in selected {
        begin += &format!("; SELECT FROM ONLY {v} LIMIT 0");
    }
    coordinator.batch_execute(&begin).await?;
    let id: String = coordinator
        .query_one("SELECT pg_catalog.pg_export_snapshot()", &[])
        .await?
        .get(0);
    // Measured after the snapshot: every row version it sees is in a
    // block that existed then.
    let mut blocks = Vec::with_capacity(tables.len());
    for (_, oid) in tables {
        let n: i64 = coordinator
            .query_one(include_str!("../sql/export_blocks.sql"), &[oid])
            .await?
            .get(0);
        blocks.push(n.max(0) as u64);
    }
    let import = format!(
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT {}",
        quote_literal(&id)
    );
    let connections = (0..workers).map(|_| async {
        let (c, _notices, wire) = target.connect_wire().await?;
        c.batch_execute(session).await?;
        c.batch_execute(&import).await?;
        Ok::<_, Error>((c, wire))
    });
    let workers = futures_util::future::try_join_all(connections).await?;
    Ok(Snapshot {
        coordinator,
        blocks,
        workers,
    })
}

/// `[first, end)` block ranges covering `0..blocks`, at least four per
/// worker when the table is big enough, at most [`RANGE_BLOCKS`] each;
/// the last is open-ended (`None`).
pub fn block_ranges(blocks: u64, workers: usize) -> Vec<(u64, Option<u64>)> {
    let per = blocks
        .div_ceil(4 * workers.max(1) as u64)
        .clamp(1, RANGE_BLOCKS);
    let mut out = Vec::new();
    let mut first = 0;
    while first + per < blocks {
        out.push((first, Some(first + per)));
        first += per;
    }
    out.push((first, None));
    out
}

/// `WHERE` clause of one block range (empty for the whole table).
pub fn ctid_condition(first: u64, end: Option<u64>) -> String {
    let lower = (first > 0).then(|| format!("ctid >= '({first},0)'::tid"));
    let upper = end.map(|e| format!("ctid < '({e},0)'::tid"));
    let parts: Vec<String> = lower.into_iter().chain(upper).collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_block_once_and_end_open() {
        for blocks in [0u64, 1, 2, 7, 100, 1023, 1024, 1025, 100_000] {
            for workers in [1, 2, 3, 4, 8] {
                let r = block_ranges(blocks, workers);
                assert_eq!(r[0].0, 0);
                assert_eq!(r.last().unwrap().1, None);
                for w in r.windows(2) {
                    assert_eq!(w[0].1, Some(w[1].0), "{blocks} {workers}");
                    assert!(w[0].1.unwrap() - w[0].0 <= RANGE_BLOCKS);
                }
                if blocks >= 1024 {
                    assert!(r.len() >= 4 * workers, "{blocks} {workers}: {r:?}");
                }
            }
        }
    }

    #[test]
    fn conditions() {
        assert_eq!(ctid_condition(0, None), "");
        assert_eq!(ctid_condition(0, Some(8)), " WHERE ctid < '(8,0)'::tid");
        assert_eq!(
            ctid_condition(8, Some(16)),
            " WHERE ctid >= '(8,0)'::tid AND ctid < '(16,0)'::tid"
        );
        assert_eq!(ctid_condition(16, None), " WHERE ctid >= '(16,0)'::tid");
    }
}
