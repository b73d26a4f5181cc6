//! `--max-rejects` as a chunk's isolation asks it: claims that a pass
//! gives back when its transaction committed nothing.
//!
//! The load keeps one count of rejects for all workers
//! ([`Progress::claim_reject`]). Isolation claims a reject before it
//! commits the row's verdict, but its first pass, the whole chunk in one
//! transaction, can end committing nothing (a deferred constraint failing
//! at `COMMIT`, a `COMMIT` found aborted after its answer was lost); the
//! chunk is then done again range by range, which claims the same rows
//! again. A claim kept for the pass that was rolled back counted those
//! rows twice, so a load near its limit stopped with `RejectLimit` though
//! its rejects were within it. Each chunk (on a sharded load, each
//! server's part of one) claims through a [`Gate`] of its own, which knows
//! how many claims it holds, and gives back those of a pass that committed
//! nothing ([`Gate::release`]).

use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::progress::Progress;

/// One chunk's claims on the load's `--max-rejects`.
pub struct Gate {
    progress: Arc<Progress>,
    max: Option<u64>,
    /// Claims made through this gate and not given back, the refused one
    /// included.
    held: u64,
}

impl Gate {
    /// A gate on `progress`' count of rejects, `max` allowed in all
    /// (`None`: no limit).
    pub fn new(progress: Arc<Progress>, max: Option<u64>) -> Gate {
        Gate {
            progress,
            max,
            held: 0,
        }
    }

    /// True while one more rejected row is allowed. The claim is held
    /// either way (the refused one too, as [`Progress::claim_reject`]
    /// counts it) until it is given back.
    pub fn claim(&mut self) -> bool {
        self.held += 1;
        self.progress.claim_reject(self.max)
    }

    /// Claims `n` rows at once, for a pass that weighs its rejects just
    /// before it commits. When one is refused, nothing will be committed:
    /// the claims made here are given back, and false returned.
    pub fn claim_all(&mut self, n: usize) -> bool {
        for i in 1..=n as u64 {
            if !self.claim() {
                self.release(i);
                return false;
            }
        }
        true
    }

    /// Claims held by this gate.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Gives back `n` of the claims held: those of a pass whose
    /// transaction committed nothing, whose rows are not rejected (yet).
    pub fn release(&mut self, n: u64) {
        let n = n.min(self.held);
        self.held -= n;
        self.progress.release_rejects(n);
    }
}

/// The error that stops a load past `--max-rejects`.
pub(crate) fn reject_limit() -> Error {
    Error::new(
        ErrorKind::RejectLimit,
        "stopped: more rows were rejected than --max-rejects allows; the transaction in \
         progress when they crossed the limit was rolled back, so its rows, bad ones \
         included, are counted as not loaded rather than rejected",
    )
    .with_hint("see the reject file; raise --max-rejects to let the load go on")
}
