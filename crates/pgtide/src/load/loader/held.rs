//! What the worker asks of a loader to hold a lazily committed chunk
//! (`load/lazy.rs`): whether the last batch committed lazily, the
//! transaction that proves it, and the per-chunk state (mark, counts) to
//! keep aside while a held chunk is settled on the same loader.

use super::{ledger, Lazy, Loader, Merged, TxStart};
use crate::error::Error;

impl Loader {
    /// The next [`Loader::load`] may commit lazily (`load/lazy.rs`), if
    /// its witness vouches for it; a retry never does.
    pub(in crate::load) fn commit_lazily_next(&mut self) {
        self.lazy_next = true;
    }

    /// The last batch, if it committed lazily: not yet known on disk.
    pub(in crate::load) fn take_lazy(&mut self) -> Option<Lazy> {
        self.lazy.take()
    }

    /// The transaction the last batch on this connection began.
    pub(in crate::load) fn last_begin(&self) -> Option<TxStart> {
        self.last_begin
    }

    /// The mark of the chunk being loaded (`--resume`).
    pub(in crate::load) fn mark(&self) -> Option<ledger::Mark> {
        self.mark.clone()
    }

    /// The counts that committed batches left for the worker (what the
    /// table dropped, a bug, merges), to be put back with
    /// [`Loader::carry_counts`] after other work on this loader or its
    /// replacement.
    pub(in crate::load) fn take_counts(&mut self) -> (u64, Option<Error>, Merged) {
        (
            self.take_skipped_by_table(),
            self.take_bug(),
            self.take_merged(),
        )
    }

    /// Puts back what [`Loader::take_counts`] took.
    pub(in crate::load) fn carry_counts(
        &mut self,
        (skipped, bug, merged): (u64, Option<Error>, Merged),
    ) {
        self.skipped_by_table += skipped;
        self.bug = self.bug.take().or(bug);
        self.merged.add(merged);
    }
}
