//! Live counters of a running load, shared lock-free with whoever renders
//! them, and the load's one ledger of counts.
//!
//! The library never draws anything: the CLI polls these counters to draw
//! its progress bar, `bench` ignores them. The load's summary is made
//! from the same counters when the workers are done ([`Counts::of`]), so
//! what the bar showed last and what the summary says cannot disagree,
//! and no second set of counters has to be reconciled with these.
//! Counters only grow, except when a `--single-transaction` load rolls
//! back (`Progress::undo_loaded`) and when a resumed sharded load finds
//! records of a chunk already done (taken back out of `rows_read`, into
//! `rows_resumed`); `--max-rejects`' private tally of claims also gives
//! back those of an isolation pass that committed nothing. One `Progress`
//! per load.

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
    /// Rows set aside for the reject file (counted when their chunk is
    /// done; the file itself is checked against this count at the end).
    pub rows_rejected: AtomicU64,
    /// Rows whose `COMMIT` got no answer that the server could settle
    /// (`crate::settle`): all of a chunk's (or of the one transaction's)
    /// are in the table, or none is.
    pub rows_in_doubt: AtomicU64,
    /// Rows the table dropped on purpose (a BEFORE trigger returning
    /// NULL), as the server's own row counts showed.
    pub rows_skipped_by_table: AtomicU64,
    /// `--resume`: rows that earlier runs committed or rejected, skipped
    /// by this one (not in `rows_read`).
    pub rows_resumed: AtomicU64,
    /// Bytes of input (decompressed) whose rows are all committed or
    /// rejected.
    pub bytes_loaded: AtomicU64,
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
    /// `--max-rejects`' gate: rows that asked to be rejected, including
    /// the one that went over the limit (see [`Progress::claim_reject`]),
    /// less those given back by passes that committed nothing
    /// ([`Progress::release_rejects`]).
    rejects_claimed: AtomicU64,
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

    /// `--max-rejects`' gate: true while one more rejected row is allowed.
    /// Every row refused, on the client or by the server, asks once, from
    /// any worker; the row that finds the limit reached stops the load.
    pub fn claim_reject(&self, max: Option<u64>) -> bool {
        let before = self.rejects_claimed.fetch_add(1, Relaxed);
        max.is_none_or(|m| before < m)
    }

    /// Gives back `n` claims of [`Progress::claim_reject`]: they were made
    /// by an isolation pass that committed nothing, and its rows ask again
    /// when the chunk is done again (`reject/gate.rs` keeps the tally of
    /// each chunk's claims, so no more is given back than was claimed).
    pub(crate) fn release_rejects(&self, n: u64) {
        self.rejects_claimed.fetch_sub(n, Relaxed);
    }

    /// A `--single-transaction` load rolled back: nothing it loaded is in
    /// the table any more.
    pub(crate) fn undo_loaded(&self) {
        for c in [
            &self.rows_loaded,
            &self.bytes_loaded,
            &self.rows_skipped_by_table,
        ] {
            c.store(0, Relaxed);
        }
        for c in &self.worker_rows {
            c.store(0, Relaxed);
        }
    }
}

/// A snapshot of the counts that a load's summary states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Rows cut from the input ([`Progress::rows_read`]).
    pub read: u64,
    /// Rows the server confirmed as loaded.
    pub loaded: u64,
    /// Rows set aside for the reject file.
    pub rejected: u64,
    /// Rows whose commit nobody can settle ([`Progress::rows_in_doubt`]).
    pub in_doubt: u64,
    /// Rows the table dropped on purpose.
    pub skipped_by_table: u64,
    /// `--resume`: rows earlier runs did.
    pub resumed: u64,
    /// Bytes of input whose rows are committed or rejected.
    pub bytes: u64,
}

impl Counts {
    /// The counts as they stand; taken once the workers are done, they
    /// are the load's summary.
    pub fn of(p: &Progress) -> Counts {
        Counts {
            read: Progress::get(&p.rows_read),
            loaded: Progress::get(&p.rows_loaded),
            rejected: Progress::get(&p.rows_rejected),
            in_doubt: Progress::get(&p.rows_in_doubt),
            skipped_by_table: Progress::get(&p.rows_skipped_by_table),
            resumed: Progress::get(&p.rows_resumed),
            bytes: Progress::get(&p.bytes_loaded),
        }
    }
}
