//! Rows of a failed range that the loader points at before the range is
//! bisected: those a foreign key will refuse (`load/references.rs`). A
//! foreign key is checked at the end of the statement, so its error names
//! no row; halving the range until one row fails alone costs a dozen
//! statements and more per bad row. Each row pointed at is tried alone in
//! its place (the rows before it go as one range, so what it references
//! may come before it), and rejected only if the server refuses it then.
//!
//! The hints are trusted until they are wrong once in a chunk: a row
//! pointed at that loads, or a range where none is found (a key that
//! references the table itself, which the query leaves out). From then
//! on the chunk is bisected as without them.

use std::collections::VecDeque;

use copyfmt::scan::Eol;

use super::resilient::Resilient;
use super::site::Site;
use crate::batch::BatchError;

/// Fewer kept records than this are bisected without asking: a few
/// halvings cost about what the query does.
const MIN_RECORDS: usize = 8;

/// The hints of one chunk's isolation.
pub(super) struct Hints {
    trusted: bool,
    /// Records pointed at, ascending.
    rows: Vec<usize>,
}

impl Hints {
    pub fn new() -> Hints {
        Hints {
            trusted: true,
            rows: Vec::new(),
        }
    }

    /// Records `lo..hi` loaded: a row pointed at that loads alone was
    /// pointed at wrongly.
    pub fn loaded(&mut self, lo: usize, hi: usize) {
        if hi == lo + 1 && self.rows.binary_search(&lo).is_ok() {
            self.trusted = false;
        }
    }

    /// Whether the failure of `lo..hi` was foreseen: a row pointed at,
    /// tried alone (which says nothing of how dirty the chunk is).
    pub fn foreseen(&self, lo: usize, hi: usize) -> bool {
        hi == lo + 1 && self.rows.binary_search(&lo).is_ok()
    }

    /// For a range `lo..hi` that failed with `e` naming no row: asks the
    /// loader which rows a foreign key refuses, and queues them alone in
    /// their place with the rows between them as ranges. `false` when
    /// nothing was queued (the caller bisects).
    pub async fn point(
        &mut self,
        loader: &mut impl Resilient,
        (site, eol): (&Site<'_>, Eol),
        (lo, hi): (usize, usize),
        e: &BatchError,
        queue: &mut VecDeque<(usize, usize, Option<BatchError>)>,
    ) -> bool {
        let foreign_key = e.error.code().is_some_and(|c| c.code() == "23503");
        if !self.trusted || !foreign_key || site.kept(lo, hi) < MIN_RECORDS {
            return false;
        }
        let found = loader.missing_references(&site.batch(lo, hi), eol).await;
        let rows: Vec<usize> = found
            .unwrap_or_default()
            .into_iter()
            .filter_map(|k| site.record(lo, hi, usize::try_from(k).ok()?))
            .collect();
        if rows.is_empty() {
            self.trusted = false;
            return false;
        }
        let mut from = lo;
        let mut ranges = Vec::with_capacity(2 * rows.len() + 1);
        for &r in &rows {
            ranges.push((from, r));
            ranges.push((r, r + 1));
            from = r + 1;
        }
        ranges.push((from, hi));
        for (l, h) in ranges.into_iter().rev() {
            queue.push_front((l, h, None));
        }
        self.rows.extend(rows);
        self.rows.sort_unstable();
        self.rows.dedup();
        true
    }
}
