//! A chunk cut per destination: each record split up to its last key
//! column, routed by the plan, its original bytes appended to its
//! destination's buffer (a record the client cannot split or route goes
//! to the coordinator's parent table).

use bytes::Bytes;
use copyfmt::fields::{split_record_prefix, Fields};
use copyfmt::scan::{self, RecordSpan};

use super::resume::Seen;
use super::Shared;
use crate::chunk::Chunk;
use crate::failure::RowFailure;
use crate::load::LineRange;
use crate::reject::Reject;
use crate::shard::Scratch;

/// One chunk cut into per-destination buffers.
pub(super) struct Routed {
    /// Per destination: its records' bytes (shared, not copied, by every
    /// attempt that sends them).
    pub bufs: Vec<Bytes>,
    /// Per destination: the index in the chunk of each record sent.
    pub records: Vec<Vec<u64>>,
    /// Every record of the chunk, in order.
    pub spans: Vec<RecordSpan>,
    /// With `--rejects`: records whose line break does not fit the
    /// input's style, refused here with the server's reason, never sent.
    pub screened: Vec<Reject>,
    /// `--resume`: records committed or rejected by earlier runs, not sent.
    pub skipped: u64,
    /// `--resume`: byte ranges (in the input) of the records rejected
    /// before any server saw them (screened here, or by earlier runs):
    /// no server's ledger range covers them.
    pub excluded: Vec<(u64, u64)>,
}

/// Cuts `chunk` per destination; with `--resume`, records already done
/// (for their server) are left out and counted.
pub(super) fn route_chunk(s: &Shared, chunk: &Chunk) -> crate::error::Result<Routed> {
    let n = s.dests.len();
    // Sized for an even spread plus a margin, so that the buffers do not
    // grow (and copy what they hold) while the chunk is cut.
    let share = chunk.data.len() / n.max(1);
    let mut bufs: Vec<_> = (0..n)
        .map(|_| Vec::with_capacity(share + share / 4))
        .collect();
    let rows = chunk.records as usize / n.max(1);
    let mut records: Vec<_> = (0..n)
        .map(|_| Vec::with_capacity(rows + rows / 4))
        .collect();
    let mut spans = Vec::with_capacity(chunk.records as usize);
    let mut fields = Fields::new();
    let mut scratch = Scratch::default();
    let mut screened = Vec::new();
    let (mut skipped, mut excluded) = (0, Vec::new());
    for span in scan::records_with(&s.dialect, chunk.eol, &chunk.data) {
        let index = spans.len() as u64;
        spans.push(span);
        let (a, b) = (
            chunk.first_byte + span.start as u64,
            chunk.first_byte + span.end as u64,
        );
        if let Some(r) = &s.resume {
            match r.before_routing(&chunk.input, a, b)? {
                Seen::Send => {}
                Seen::Done => {
                    skipped += 1;
                    continue;
                }
                Seen::Rejected => {
                    skipped += 1;
                    excluded.push((a, b));
                    continue;
                }
            }
        }
        if let (Some(e), true) = (span.eol_error, s.isolate) {
            excluded.push((a, b));
            let at = RowFailure::line_ending(chunk, s.dialect.format, index, &span, e);
            screened.push(Reject::of(at, chunk, &span));
            continue;
        }
        let rec = &chunk.data[span.start..span.end];
        let split = split_record_prefix(&s.dialect, &s.nulls, rec, &mut fields, s.plan.fields_read);
        let dest = if split.is_err() {
            s.coordinator_dest
        } else {
            match s.plan.route(&fields, &mut scratch) {
                crate::shard::Dest::Leaf(i) => s.leaf_dest[i],
                crate::shard::Dest::Coordinator => s.coordinator_dest,
            }
        };
        if let Some(r) = &s.resume {
            if !matches!(
                r.on_server(s.dests[dest].server, &chunk.input, a, b)?,
                Seen::Send
            ) {
                skipped += 1;
                continue;
            }
        }
        bufs[dest].extend_from_slice(rec);
        records[dest].push(index);
    }
    Ok(Routed {
        bufs: bufs.into_iter().map(Bytes::from).collect(),
        records,
        spans,
        screened,
        skipped,
        excluded,
    })
}

/// `ranges` (sorted by input and first line) with touching or overlapping
/// ones joined.
pub(super) fn merge(mut ranges: Vec<LineRange>) -> Vec<LineRange> {
    let mut out: Vec<LineRange> = Vec::new();
    for r in ranges.drain(..) {
        match out.last_mut() {
            Some(l) if l.input == r.input && l.last + 1 >= r.first => l.last = l.last.max(r.last),
            _ => out.push(r),
        }
    }
    out
}
