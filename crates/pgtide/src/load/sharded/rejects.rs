//! A server's part of a chunk ([`load_part`]), and `--rejects` on a
//! sharded load: a part that failed on a row is done again with its bad rows isolated, still in one
//! transaction on that server (the commit model stays one transaction
//! per chunk per server).
//!
//! ```text
//! BEGIN; SELECT txid_current()
//!   per destination with rows: SAVEPOINT pgtide_dest
//!     reject::isolate over the destination's rows (a chunk of its own):
//!     each range under SAVEPOINT pgtide_range, a bad row rolled back to it
//!   RELEASE SAVEPOINT pgtide_dest
//! COMMIT (settled as any part's COMMIT)
//! ```
//!
//! Isolation sees each destination's rows as one chunk; its rejects are
//! then placed back in the input (line, record, byte of the original
//! chunk). A part whose COMMIT a deferred constraint refused is done
//! again so, its deferred constraints checked at each statement's end
//! (`server::begin`); what isolation cannot settle inside a transaction
//! (a lost connection) stops the load.

use tokio_postgres::Client;

use super::server::{commit_part, first_attempt, name_server, Part, PartFailed};
use super::{Routed, Shared};
use crate::batch::{Batch, BatchError, TxStart};
use crate::chunk::Chunk;
use crate::error::Error;
use crate::load::copy::copy_bytes;
use crate::load::spec::record_of_error;
use crate::load::step::in_step_after;
use crate::reject::isolate::{isolate, Gate, Resilient, Start};
use crate::reject::Reject;

/// One destination's rows as isolation sends them: every batch under a
/// savepoint of the server's open transaction, never a COMMIT.
struct DestSession<'a> {
    s: &'a Shared,
    client: &'a Client,
    d: usize,
}

impl DestSession<'_> {
    async fn under_savepoint(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        let dest = &self.s.dests[self.d];
        self.client
            .batch_execute("SAVEPOINT pgtide_range")
            .await
            .map_err(BatchError::plain)?;
        let sent = copy_bytes(
            self.client,
            &dest.sql,
            &self.s.framing,
            &batch.data,
            self.s.message_bytes,
        )
        .await;
        match sent {
            Ok(n) => {
                self.client
                    .batch_execute("RELEASE SAVEPOINT pgtide_range")
                    .await
                    .map_err(BatchError::plain)?;
                Ok(n)
            }
            Err(e) => {
                let record = record_of_error(&self.s.dialect, &dest.relname, &batch.data, &e);
                // Released too: a savepoint left open nests the next one.
                let undo = "ROLLBACK TO SAVEPOINT pgtide_range; RELEASE SAVEPOINT pgtide_range";
                if !in_step_after(self.client, undo).await {
                    return Err(BatchError::plain(e));
                }
                Err(BatchError {
                    record,
                    commit_unknown: false,
                    error: e,
                })
            }
        }
    }
}

impl Resilient for DestSession<'_> {
    fn dialect(&self) -> &copyfmt::scan::Dialect {
        &self.s.dialect
    }

    fn relname(&self) -> &str {
        &self.s.dests[self.d].relname
    }

    fn take_skipped(&mut self) -> Vec<u64> {
        Vec::new()
    }

    async fn load(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        self.under_savepoint(batch).await
    }

    async fn begin(&mut self) -> Result<Option<TxStart>, BatchError> {
        self.client
            .batch_execute("SAVEPOINT pgtide_dest")
            .await
            .map_err(BatchError::plain)?;
        Ok(None)
    }

    async fn attempt(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        self.under_savepoint(batch).await
    }

    async fn commit(&mut self, _xid: Option<TxStart>) -> Result<bool, BatchError> {
        self.client
            .batch_execute("RELEASE SAVEPOINT pgtide_dest")
            .await
            .map_err(BatchError::plain)?;
        Ok(true)
    }

    async fn rollback(&mut self) {
        let undo = "ROLLBACK TO SAVEPOINT pgtide_dest; RELEASE SAVEPOINT pgtide_dest";
        let _ = in_step_after(self.client, undo).await;
    }
}

/// One chunk's rows for server `i`: one transaction, one COPY per
/// destination with rows; with `--rejects`, a part refused for a row is
/// done again with its bad rows isolated (`rejects.rs`).
pub(super) async fn load_part(
    s: &Shared,
    client: &Client,
    i: usize,
    routed: &Routed,
    chunk: &Chunk,
) -> std::result::Result<Part, PartFailed> {
    match first_attempt(s, client, i, routed, chunk).await {
        Ok(counts) => Ok(Part {
            counts,
            rejects: Vec::new(),
        }),
        Err(f) if f.row_fault && s.isolate => {
            let (counts, rejects) = isolate_part(s, client, i, routed, chunk).await?;
            Ok(Part { counts, rejects })
        }
        Err(f) => Err(f),
    }
}

/// Server `i`'s part of `chunk` again, its bad rows isolated and returned
/// (placed in the input), in one transaction. The first attempt was
/// rolled back. A part that fails commits nothing (unless its `COMMIT` is
/// in doubt): its rows are not rejected, so its claims on `--max-rejects`
/// are given back (`reject/gate.rs`); kept, they could make another
/// worker stop the load with `RejectLimit` instead of this part's error.
pub(super) async fn isolate_part(
    s: &Shared,
    client: &Client,
    i: usize,
    routed: &Routed,
    chunk: &Chunk,
) -> Result<(super::server::Counts, Vec<Reject>), PartFailed> {
    let mut gate = s.gate();
    let part = isolated_part(s, client, i, routed, chunk, &mut gate).await;
    if part.as_ref().is_err_and(|f| !f.in_doubt) {
        gate.release(gate.held());
    }
    part
}

/// [`isolate_part`], its rejects claimed through `gate`.
async fn isolated_part(
    s: &Shared,
    client: &Client,
    i: usize,
    routed: &Routed,
    chunk: &Chunk,
    gate: &mut Gate,
) -> Result<(super::server::Counts, Vec<Reject>), PartFailed> {
    let label = &s.servers[i].label;
    let tx = super::server::begin(s, client, i, true)
        .await
        .map_err(|e| name_server(e, label, None))?;
    let mut counts = Vec::new();
    let mut rejects = Vec::new();
    // --resume: the records refused, kept out of the ledger's ranges.
    let mut refused = Vec::new();
    for d in (0..s.dests.len()).filter(|&d| s.dests[d].server == i && !routed.bufs[d].is_empty()) {
        let records = &routed.records[d];
        let own = Chunk {
            data: routed.bufs[d].clone(),
            first_line: 1,
            first_record: 0,
            first_byte: 0,
            records: records.len() as u64,
            lines: records.len() as u64,
            eol_errors: 0,
            ..chunk.clone()
        };
        let mut session = DestSession { s, client, d };
        let (iso, err) = isolate(&mut session, &own, Start::Fresh, gate).await;
        if let Some(e) = err {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(name_server(e, &s.dests[d].label, None).into());
        }
        let sent = records.len() as u64 - iso.rejects.len() as u64;
        if iso.loaded > sent || (iso.loaded < sent && !s.dests[d].may_skip) {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(Error::bug(format!(
                "{}: the server counted {} rows of the {sent} sent",
                s.dests[d].label, iso.loaded
            ))
            .into());
        }
        counts.push((d, sent, iso.loaded));
        let base = chunk.first_byte;
        refused.extend(iso.rejects.iter().filter_map(|r| {
            let span = routed.spans[*records.get(r.at.record as usize)? as usize];
            Some((base + span.start as u64, base + span.end as u64))
        }));
        rejects.extend(
            iso.rejects
                .into_iter()
                .map(|r| placed(r, records, routed, chunk, s)),
        );
    }
    let recorded = super::server::record(s, client, i, routed, chunk, &refused, &counts).await;
    if let Err(e) = recorded {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(name_server(e, label, None).into());
    }
    let counts = commit_part(s, client, i, &tx, chunk, counts).await?;
    Ok((counts, rejects))
}

/// A reject of a destination's own chunk, placed back in the input.
fn placed(mut r: Reject, records: &[u64], routed: &Routed, chunk: &Chunk, s: &Shared) -> Reject {
    let own = r.at.record as usize;
    let Some(&index) = records.get(own) else {
        return r;
    };
    let span = routed.spans[index as usize];
    r.at.record = chunk.first_record + index;
    r.at.byte = chunk.first_byte + span.start as u64;
    r.at.line = match s.dialect.format {
        copyfmt::scan::Format::Binary => chunk.first_line + index,
        _ => chunk.first_line + span.line,
    };
    r
}
