//! What the workers of one load share (`worker.rs`, `reconnect.rs`,
//! `single.rs`): the target, the loader spec, the counters and outcome,
//! and the options that decide a chunk's fate.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use super::loader::LoaderSpec;
use super::outcome::Shared;
use crate::conn::Target;
use crate::progress::Progress;

/// What every worker shares.
pub(super) struct Ctx {
    pub target: Target,
    pub spec: Arc<LoaderSpec>,
    pub shared: Arc<Mutex<Shared>>,
    pub progress: Arc<Progress>,
    /// `--rejects` given: bad rows are isolated instead of stopping.
    pub isolate: bool,
    /// `--max-rejects`.
    pub max_rejects: Option<u64>,
    /// `--resume`: each chunk's batches record their bytes in the ledger.
    pub resume: Option<Arc<crate::load::ledger::Resume>>,
    /// `--on-conflict`: chunks take effect in input order.
    pub order: Option<crate::load::order::Order>,
    /// `--rejects` with several workers into a table with a unique index:
    /// chunks commit in input order (`turns.rs`).
    pub turns: Option<Arc<crate::load::turns::Turns>>,
    /// Chunks commit lazily (`load/lazy.rs`): the worker holds each one (`load/hold.rs`)
    /// until a later flush proves it on disk.
    pub lazy: bool,
    /// A chunk had bad rows: from then on each worker screens its next
    /// chunk while the current one loads (`worker::ahead`).
    pub dirty: AtomicBool,
}
