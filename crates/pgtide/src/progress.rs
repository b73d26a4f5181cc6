//! Live counters of a running load, shared lock-free with whoever renders
//! them.
//!
//! The library never draws anything: the CLI polls these counters to draw
//! its progress bar, `bench` ignores them. Counters only grow.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters for one load.
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes read from the inputs as stored (compressed bytes for a
    /// compressed input), comparable with `total_bytes`.
    pub read_bytes: AtomicU64,
    /// Sum of the input sizes, 0 when unknown (stdin).
    pub total_bytes: AtomicU64,
    /// Rows the server confirmed as loaded.
    pub rows_loaded: AtomicU64,
    /// Rows rejected so far (may run one ahead when `--max-rejects` stops
    /// the load; the reject file's count is the truth).
    pub rows_rejected: AtomicU64,
    /// Rows the server skipped by itself (`ON_ERROR ignore`, PostgreSQL
    /// 17+) before pgtide rejected them.
    pub server_skipped: AtomicU64,
    /// Times a worker reconnected after a broken connection.
    pub reconnects: AtomicU64,
    /// Rows cut from the input so far.
    pub rows_read: AtomicU64,
    /// Per worker: rows it has loaded.
    pub worker_rows: Vec<AtomicU64>,
}

impl Progress {
    /// Counters for `workers` workers.
    pub fn new(workers: usize) -> Self {
        Progress {
            worker_rows: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            ..Default::default()
        }
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }

    /// Adds to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}
