//! The unit of work between the loaders and error isolation: a [`Batch`]
//! of whole records sent in one transaction, and the [`BatchError`] that
//! says which record failed. A leaf: `load` (which sends batches) and
//! `reject` (which retries them in parts) both speak it, and neither
//! imports the other for it.

use bytes::Bytes;

/// A transaction as the server numbered it: `txid_current()`, and two
/// marks of the server's life that together tell whether it crashed
/// before a new connection asks about the transaction. A COMMIT whose
/// answer was lost is settled by asking `txid_status` on a new connection;
/// after a crash, a transaction id that never reached the disk is handed
/// out again and its status may be a stranger's.
///
/// `pg_postmaster_start_time()` changes only when the whole server
/// restarts; a backend that crashes (`kill -9`, a segfault, the OOM
/// killer) makes the postmaster run crash recovery under the same start
/// time. The statistics' reset time changes then too: PostgreSQL 15+
/// discards all statistics after crash recovery (`pg_stat_archiver`, read
/// by any role). Measured on 15, 17 and 18: a backend's `kill -9` keeps
/// the start time and moves `stats_reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStart {
    /// `txid_current()`.
    pub xid: i64,
    /// `pg_postmaster_start_time()` in microseconds since 1970.
    pub server_started: i64,
    /// `pg_stat_archiver.stats_reset` in microseconds since 1970 (`None`
    /// when the server does not say).
    pub stats_reset: Option<i64>,
    /// `pg_backend_pid()` of the session: when the connection is lost but
    /// the session lives on (a network that went silent), it is ended so
    /// that its transaction's fate is known (`crate::settle`).
    pub backend_pid: Option<i32>,
}

/// What [`TxStart`] holds after the id, as SQL: two columns that a later
/// connection reads again ([`SERVER_LIFE_SQL`]) to tell a crash.
macro_rules! server_life {
    () => {
        "(extract(epoch FROM pg_postmaster_start_time()) * 1000000)::int8, \
         (SELECT (extract(epoch FROM stats_reset) * 1000000)::int8 \
          FROM pg_catalog.pg_stat_archiver)"
    };
}

/// The columns [`TxStart::server_started`] and [`TxStart::stats_reset`]
/// come from, to read again on another connection.
pub const SERVER_LIFE_SQL: &str = server_life!();

/// The timeline the server writes its WAL on (the first 8 hex digits of
/// the current WAL file's name), `NULL` on a standby. A promoted standby
/// writes on a new timeline, a crash recovery of the same server goes on
/// on the old one: what was on the disk of one is not on the other.
pub const TIMELINE_SQL: &str = "CASE WHEN pg_is_in_recovery() THEN NULL \
     ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END";

/// The query that reads a [`TxStart`] in an open transaction (giving it
/// its id). Its last column makes the transaction's `COMMIT` durable when
/// the server's default is `synchronous_commit = off`: a `COMMIT` answered
/// before its WAL is on disk is counted as loaded, and a crash would take
/// it back with no one to notice (outside testing: 9,399 of 500,000 rows
/// gone, exit 0). `local` then, and any stronger setting kept as it is.
macro_rules! tx_start_sql {
    () => {
        concat!(
            "SELECT txid_current(), ",
            server_life!(),
            ", pg_backend_pid(), ",
            durable_commit!()
        )
    };
}

/// The expression that makes the open transaction's `COMMIT` wait for its
/// flush: `local` where the setting is `off`, any stronger one kept.
macro_rules! durable_commit {
    () => {
        "set_config('synchronous_commit', \
             CASE current_setting('synchronous_commit') WHEN 'off' THEN 'local' \
             ELSE current_setting('synchronous_commit') END, true)"
    };
}

/// [`TX_START_SQL`]'s last column alone, for a transaction that must
/// commit durably without reading a [`TxStart`].
pub const DURABLE_COMMIT_SQL: &str = durable_commit!();

/// The query that reads a [`TxStart`], for a transaction opened otherwise
/// than by [`BEGIN_SQL`].
pub const TX_START_SQL: &str = tx_start_sql!();

/// The statement that opens a batch's transaction and reads its
/// [`TxStart`] in the same round trip.
pub const BEGIN_SQL: &str = concat!("BEGIN; ", tx_start_sql!());

/// The [`TxStart`] in the answer to [`BEGIN_SQL`].
pub fn tx_start(messages: &[tokio_postgres::SimpleQueryMessage]) -> Option<TxStart> {
    messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => Some(TxStart {
            xid: r.get(0)?.parse().ok()?,
            server_started: r.get(1)?.parse().ok()?,
            stats_reset: r.get(2).and_then(|v| v.parse().ok()),
            backend_pid: r.get(3).and_then(|v| v.parse().ok()),
        }),
        _ => None,
    })
}

/// Whole records of one chunk, loaded in one transaction.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The records' bytes, as in the input.
    pub data: Bytes,
    /// How many records `data` holds.
    pub records: u64,
}

/// Why a batch failed.
#[derive(Debug)]
pub struct BatchError {
    /// 0-based index in the batch of the record the server refused, when
    /// it named one.
    pub record: Option<u64>,
    /// True when the connection broke after `COMMIT` was sent: the batch
    /// may or may not be committed, so it must not be retried.
    pub commit_unknown: bool,
    /// The server's (or the socket's) error.
    pub error: tokio_postgres::Error,
}

impl BatchError {
    /// An error that names no record.
    pub fn plain(error: tokio_postgres::Error) -> BatchError {
        BatchError {
            record: None,
            commit_unknown: false,
            error,
        }
    }

    /// An error in `record`, when the server sent it (a broken connection
    /// names no record).
    pub fn at(record: u64, error: tokio_postgres::Error) -> BatchError {
        BatchError {
            record: error.as_db_error().map(|_| record),
            commit_unknown: false,
            error,
        }
    }
}
