//! `--resume` for a load routed on the client: the ledger per server.
//!
//! A chunk commits once per server, so "this byte range is committed" is
//! true per server, not for the load. Each server's part of a chunk
//! inserts, in its own transaction and after its rows, a row of the
//! ordinary ledger (`load/ledger.rs`, `pgtide.ledger` created on first use
//! on that server) with `shard` = the server's label: "every row of
//! `[first_byte, end_byte)` that routes to this server is committed here".
//! The entry and the rows commit together or not at all, on the server
//! that holds the rows, so a kill, a server going down or a COMMIT whose
//! answer was lost leaves each server's ledger exactly as true as its
//! table. Rejected records (this run's, screened or refused by a server,
//! and earlier runs') are cut out of the ranges: a resume that lost the
//! reject file's last writes tries them again.
//!
//! A resumed run cuts the input again (any `--workers`, `--chunk-bytes`),
//! routes every record as before, and drops a record when its server's
//! ranges hold it, when the coordinator's whole-range entries (`shard`
//! NULL: written by `--route coordinator --resume`, every server's rows
//! committed) hold it, or when the reject log lists it. So a chunk
//! committed on server A and not on B sends only B's rows. Routing must
//! be the same as in the run that wrote the entries: the parent table is
//! checked by OID; re-attaching partitions between runs is not detected.
//!
//! On the coordinator, one marker per other server (`shard` = `@SERVER`,
//! an empty range) is committed before any row is sent: `pgtide ledger
//! list` there names the servers whose ledgers hold entries, and the
//! coordinator path refuses to resume such an input (it could not send
//! each server only its missing rows). A marker's `rows` holds the
//! version of the routing rules ([`ROUTING`]) that wrote the entries: a
//! resume under other rules could find a record "done" on the server it
//! routes to now though an earlier run sent it elsewhere, so it is
//! refused.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::{Routed, Server, COORDINATOR};
use crate::chunk::Chunk;
use crate::error::{Error, Result};
use crate::load::ledger::{self, Ranges, Resume};
use crate::load::LoadOptions;

/// What earlier runs did, per server.
pub(super) struct ShardResume {
    /// Identities, the coordinator's whole-range entries, rejected
    /// records, this run's name.
    pub resume: Resume,
    /// Per server (as `Shared::servers`): its committed ranges per input.
    pub per_server: Vec<BTreeMap<String, Ranges>>,
    /// The reject file's earlier rows, when it is appended to.
    pub earlier: Option<crate::reject::Earlier>,
}

/// Where a record stands in a resumed run.
pub(super) enum Seen {
    /// Not committed anywhere it goes: send it.
    Send,
    /// Committed: skip it.
    Done,
    /// Rejected by an earlier run (its reject log says so): skip it, and
    /// keep it out of this run's ranges.
    Rejected,
}

impl ShardResume {
    /// Whether the record `[a, b)` of `input` is rejected by an earlier
    /// run or committed on every server (whole-range entries).
    pub fn before_routing(&self, input: &str, a: u64, b: u64) -> Result<Seen> {
        if self
            .resume
            .rejected
            .get(input)
            .is_some_and(|r| r.contains(&a))
        {
            return Ok(Seen::Rejected);
        }
        covered(self.resume.committed(input), input, a, b)
    }

    /// Whether server `i` committed the record `[a, b)` of `input`.
    pub fn on_server(&self, i: usize, input: &str, a: u64, b: u64) -> Result<Seen> {
        let ranges = self.per_server[i]
            .get(input)
            .map_or(&[][..], |r| r.as_slice());
        covered(ranges, input, a, b)
    }
}

/// The routing rules' version, kept in the coordinator's markers. 1 (a
/// marker's `rows` was 0): records split whole, a record with extra
/// fields sent through the coordinator. 2: records split up to their last
/// key column, a record with extra fields sent to its key's server.
pub const ROUTING: u64 = 2;
const ROUTING_I64: i64 = ROUTING as i64;

/// A resume of an input whose entries another routing wrote.
fn other_routing(input: &str, version: i64) -> Error {
    Error::config(format!(
        "--resume: {input} was begun by a pgtide that routed records to servers by other rules \
         (version {}, this one has {ROUTING}): a record could be taken for done on a server \
         that never received it",
        version.max(1)
    ))
    .with_hint(
        "finish the load with the pgtide version that began it: its ledgers say which rows each \
         server holds (clearing them with `pgtide ledger forget` and loading again would load \
         the committed rows a second time)",
    )
}

/// Reads every server's ledger (creating it where missing) and commits
/// the coordinator's markers. `clients` are connected to `servers`, in
/// order; `clients[0]` is the coordinator.
pub(super) async fn prepare(
    opts: &LoadOptions,
    table: &crate::catalog::Table,
    columns: &[&crate::catalog::Column],
    servers: &[Server],
    clients: &[Client],
) -> Result<Option<ShardResume>> {
    let Some(mode) = opts.resume else {
        return Ok(None);
    };
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    let options = ledger::describe_options(&opts.copy, &names);
    let name = table.name.to_string();
    // Each server's ledger made first, so that a refusal names the server.
    for (s, c) in servers.iter().zip(clients) {
        ledger::ensure(c)
            .await
            .map_err(|e| super::name_server(e, &s.label, None))?;
    }
    let mut ledgers = vec![(&clients[0], None)];
    for (s, c) in servers.iter().zip(clients) {
        ledgers.push((c, Some(s.label.as_str())));
    }
    let (mut resume, mut each) =
        ledger::prepare_on(&ledgers, &opts.inputs, mode, (&name, table.oid), &options).await?;
    for (id, _) in resume.inputs.values() {
        for s in servers.iter().filter(|s| s.label != COORDINATOR) {
            let marker = format!("@{}", s.label);
            let there = clients[0]
                .query_opt(
                    "SELECT rows FROM pgtide.ledger WHERE input = $1 AND shard = $2 LIMIT 1",
                    &[&id.path, &marker],
                )
                .await?;
            match there.map(|r| r.get::<_, i64>(0)) {
                None => {
                    let empty = (0, 0);
                    ledger::insert(&clients[0], id, &resume.run, empty, ROUTING, Some(&marker))
                        .await?;
                }
                Some(ROUTING_I64) => {}
                Some(other) => return Err(other_routing(&id.path, other)),
            }
        }
    }
    let earlier = match (&opts.rejects, opts.overwrite_rejects) {
        (Some(path), false) => Some(crate::reject::earlier(path)?),
        _ => None,
    };
    if let Some(e) = &earlier {
        resume.rejected = e.rejected.clone();
    }
    each.remove(0);
    Ok(Some(ShardResume {
        resume,
        per_server: each,
        earlier,
    }))
}

/// Inserts server `i`'s ledger rows for its part of `chunk` in the open
/// transaction: the chunk's bytes minus every record rejected (`excluded`
/// of the routing, plus `rejected` by the server in this part).
pub(super) async fn record_part(
    r: &ShardResume,
    label: &str,
    client: &Client,
    chunk: &Chunk,
    routed: &Routed,
    rejected: &[(u64, u64)],
    rows: u64,
) -> Result<()> {
    let Some((id, _)) = r.resume.inputs.get(&*chunk.input) else {
        return Err(Error::bug(format!(
            "{}: no ledger identity for this input",
            chunk.input
        )));
    };
    let cut: Vec<(u64, u64)> = routed.excluded.iter().chain(rejected).copied().collect();
    let end = chunk.first_byte + chunk.data.len() as u64;
    let mut rows = Some(rows);
    for range in without(chunk.first_byte, end, cut) {
        let n = rows.take().unwrap_or(0);
        ledger::insert(client, id, &r.resume.run, range, n, Some(label)).await?;
    }
    Ok(())
}

/// `[start, end)` minus the `cut` ranges (any order, may touch).
fn without(start: u64, end: u64, mut cut: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    cut.sort_unstable();
    let mut at = start;
    let mut out = Vec::new();
    for (a, b) in cut.into_iter().chain([(end, end)]) {
        if a > at {
            out.push((at, a.min(end)));
        }
        at = at.max(b);
    }
    out
}

/// Whether `[a, b)` lies in `ranges` (sorted, merged); a range ending
/// inside the record means the ledger does not describe this input.
fn covered(ranges: &[(u64, u64)], input: &str, a: u64, b: u64) -> Result<Seen> {
    let i = ranges.partition_point(|r| r.1 <= a);
    match ranges.get(i) {
        Some(r) if r.0 <= a && r.1 >= b => Ok(Seen::Done),
        Some(r) if r.0 < b => Err(Error::config(format!(
            "--resume: {input}: a range in the ledger ends inside a record near byte {a}"
        ))
        .with_hint(
            "the ledger does not describe this file as it reads now: `pgtide ledger forget` \
             it on the coordinator and on every server its markers name",
        )),
        _ => Ok(Seen::Send),
    }
}

#[cfg(test)]
mod tests {
    use super::{covered, without, Seen};

    #[test]
    fn a_part_s_ranges_leave_out_rejected_records() {
        assert_eq!(without(10, 50, vec![]), [(10, 50)]);
        assert_eq!(
            without(10, 50, vec![(30, 35), (10, 12)]),
            [(12, 30), (35, 50)]
        );
        assert_eq!(
            without(10, 50, vec![(12, 20), (20, 30)]),
            [(10, 12), (30, 50)]
        );
        assert_eq!(without(10, 50, vec![(40, 50)]), [(10, 40)]);
        assert!(without(10, 50, vec![(10, 50)]).is_empty());
    }

    #[test]
    fn a_record_is_inside_a_range_outside_or_an_error() {
        let r = [(0, 10), (20, 30)];
        assert!(matches!(covered(&r, "f", 2, 10), Ok(Seen::Done)));
        assert!(matches!(covered(&r, "f", 10, 20), Ok(Seen::Send)));
        assert!(matches!(covered(&r, "f", 30, 31), Ok(Seen::Send)));
        assert!(covered(&r, "f", 15, 25).is_err());
        assert!(covered(&r, "f", 5, 12).is_err());
    }
}
