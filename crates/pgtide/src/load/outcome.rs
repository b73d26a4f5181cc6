//! What the workers record as chunks finish, under one lock: the line
//! ranges done, the chunks that failed, the counts. The pool
//! (`pool.rs`) owns the lock and sums it up at the end; each worker
//! (`worker.rs`) adds to it.

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
    pub loaded: u64,
    pub rejected: u64,
    /// Rows the table dropped on purpose (its triggers).
    pub skipped_by_table: u64,
    pub bytes: u64,
    /// `--on-conflict`: rows committed merges inserted and updated.
    pub merged: super::upsert::Merged,
}
