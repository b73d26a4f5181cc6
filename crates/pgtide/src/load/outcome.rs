//! What the workers record as chunks finish, under one lock: the line
//! ranges done, the chunks that failed, the reject file. The pool
//! (`pool.rs`) owns the lock and sums it up at the end; each worker
//! (`worker.rs`) adds to it. The counts are not here: they have one
//! ledger, the load's [`crate::progress::Progress`].

use std::sync::Arc;

use crate::error::Error;
use crate::failure::RowFailure;
use crate::reject::RejectFile;

/// Input lines whose rows are all committed or rejected.
pub(super) struct Done {
    pub seq: u64,
    pub input: Arc<str>,
    pub first_line: u64,
    pub last_line: u64,
}

/// A chunk that stopped the load.
pub(super) struct Failed {
    pub seq: u64,
    pub error: Error,
    pub row: Option<RowFailure>,
}

/// What the workers report, under one lock (touched once per chunk).
#[derive(Default)]
pub(super) struct Shared {
    pub done: Vec<Done>,
    pub failed: Vec<Failed>,
    pub rejects: Option<RejectFile>,
    /// `--on-conflict`: rows committed merges inserted and updated.
    pub merged: super::upsert::Merged,
}
