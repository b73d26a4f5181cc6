//! The unit of work between the loaders and error isolation: a [`Batch`]
//! of whole records sent in one transaction, and the [`BatchError`] that
//! says which record failed. A leaf: `load` (which sends batches) and
//! `reject` (which retries them in parts) both speak it, and neither
//! imports the other for it.

use bytes::Bytes;

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
