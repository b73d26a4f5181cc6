//! What of a chunk a resumed run still has to load (the ordinary path's
//! reader cuts each chunk with [`unfinished`]).

use crate::error::{Error, Result};

/// What of `chunk` a resumed run still has to load: the runs of records
/// neither inside a `committed` range nor `rejected` (record offsets) by
/// an earlier run, each as its own chunk (sequence numbers are the
/// caller's), and the records skipped. A range that ends inside a record
/// means the ledger does not describe this input: an error.
pub(in crate::load) fn unfinished(
    chunk: crate::chunk::Chunk,
    committed: &[(u64, u64)],
    rejected: Option<&std::collections::BTreeSet<u64>>,
    dialect: &copyfmt::scan::Dialect,
) -> Result<(Vec<crate::chunk::Chunk>, u64)> {
    let start = chunk.first_byte;
    let end = start + chunk.data.len() as u64;
    // The committed range that holds `at`, if any.
    let holding = |at: u64| {
        let i = committed.partition_point(|r| r.1 <= at);
        committed.get(i).filter(|r| r.0 <= at)
    };
    let rejected_here = rejected.is_some_and(|r| r.range(start..end).next().is_some());
    if let Some(r) = holding(start) {
        if r.1 >= end {
            return Ok((Vec::new(), chunk.records));
        }
    }
    let i = committed.partition_point(|r| r.1 <= start);
    let overlaps = committed.get(i).is_some_and(|r| r.0 < end);
    if !overlaps && !rejected_here {
        return Ok((vec![chunk], 0));
    }
    let spans: Vec<_> = copyfmt::scan::records_with(dialect, chunk.eol, &chunk.data).collect();
    let done: Vec<bool> = spans
        .iter()
        .map(|s| {
            let (a, b) = (start + s.start as u64, start + s.end as u64);
            if rejected.is_some_and(|r| r.contains(&a)) {
                return Ok(true);
            }
            match holding(a) {
                Some(r) if r.1 >= b => Ok(true),
                Some(_) => Err(()),
                None => match committed.get(committed.partition_point(|r| r.1 <= a)) {
                    Some(r) if r.0 < b => Err(()),
                    _ => Ok(false),
                },
            }
        })
        .collect::<std::result::Result<_, ()>>()
        .map_err(|()| {
            Error::config(format!(
                "--resume: {}: a range in the ledger ends inside a record near byte {start}",
                chunk.input
            ))
            .with_hint(
                "the ledger does not describe this file as it reads now: `pgtide ledger forget` it",
            )
        })?;
    // Line breaks before record `i` (binary: tuples), or all of them.
    let lines_before = |i: usize| spans.get(i).map_or(chunk.lines, |s| s.line);
    let mut pieces = Vec::new();
    let mut skipped = 0;
    let mut i = 0;
    while i < spans.len() {
        if done[i] {
            skipped += 1;
            i += 1;
            continue;
        }
        let lo = i;
        while i < spans.len() && !done[i] {
            i += 1;
        }
        let (a, b) = (spans[lo].start, spans[i - 1].end);
        pieces.push(crate::chunk::Chunk {
            seq: chunk.seq,
            input: chunk.input.clone(),
            data: chunk.data.slice(a..b),
            first_line: chunk.line_of(&spans[lo]),
            first_record: chunk.first_record + lo as u64,
            first_byte: start + a as u64,
            records: (i - lo) as u64,
            lines: lines_before(i) - lines_before(lo),
            eol: chunk.eol,
            eol_errors: spans[lo..i]
                .iter()
                .filter(|s| s.eol_error.is_some())
                .count() as u64,
        });
    }
    Ok((pieces, skipped))
}
