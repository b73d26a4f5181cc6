//! Live counters of a running load, shared lock-free with whoever renders
//! them.
//!
//! The library never draws anything: the CLI polls these counters to draw
//! its progress bar, `bench` ignores them. Counters only grow.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

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
    /// Export: rows expected (the planner's estimate), 0 when unknown.
    /// An export counts rows and bytes received in `rows_read` and
    /// `read_bytes`.
    pub total_rows: AtomicU64,
    /// Per worker: rows it has loaded (exported).
    pub worker_rows: Vec<AtomicU64>,
    /// Not a counter but the one control: set by whoever runs the load
    /// (the CLI, on SIGINT/SIGTERM) to stop it cleanly. The reader stops
    /// cutting chunks; chunks already handed out commit or roll back.
    stop: AtomicBool,
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

    /// Asks the load to stop after the chunks already handed out.
    pub fn request_stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// Whether [`Progress::request_stop`] was called.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Relaxed)
    }

    /// Adds to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}
