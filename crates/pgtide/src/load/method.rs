//! Load methods as interchangeable loaders behind one seam.
//!
//! A [`Loader`] owns one connection and loads a [`Batch`] (whole records,
//! exactly as in the input) in one transaction: `BEGIN`, the method's
//! statements, `COMMIT`. It reports success with the server's row count,
//! or a [`BatchError`] that says which record of the batch failed (when
//! the server said so) and whether the commit's fate is unknown (the
//! connection broke after `COMMIT` was sent). The worker pool and error
//! isolation (`reject`) only ever talk to this seam, so every method gets
//! `--workers` and `--rejects` for free.

use bytes::Bytes;
use copyfmt::scan::{self, Dialect, Format};
use tokio_postgres::Client;

use super::copy::{copy_bytes, Framing};

/// How rows are sent to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// `COPY ... FROM STDIN` with the input bytes passed through.
    Copy,
}

impl Method {
    /// The name users type (`--method`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Copy => "copy",
        }
    }
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

/// What a loader needs to know about the statement it runs.
#[derive(Debug, Clone)]
pub struct LoaderSpec {
    /// The method.
    pub method: Method,
    /// The COPY statement (COPY methods).
    pub copy_sql: String,
    /// Header/trailer around COPY data (binary input).
    pub framing: Framing,
    /// CopyData message size.
    pub message_bytes: usize,
    /// Input dialect, to find records in a batch.
    pub dialect: Dialect,
    /// The relation name as the server prints it in error contexts.
    pub relname: String,
}

/// One connection loading batches with one method.
pub struct Loader {
    client: Client,
    spec: std::sync::Arc<LoaderSpec>,
}

impl Loader {
    /// A loader over an open connection.
    pub fn new(client: Client, spec: std::sync::Arc<LoaderSpec>) -> Loader {
        Loader { client, spec }
    }

    /// The connection (for isolation queries and tests).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// What this loader runs.
    pub fn spec(&self) -> &LoaderSpec {
        &self.spec
    }

    /// Loads `batch` in one transaction; returns the rows inserted.
    pub async fn load(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        let plain = |error| BatchError {
            record: None,
            commit_unknown: false,
            error,
        };
        self.client.batch_execute("BEGIN").await.map_err(plain)?;
        let result = match self.spec.method {
            Method::Copy => {
                let s = &self.spec;
                copy_bytes(
                    &self.client,
                    &s.copy_sql,
                    &s.framing,
                    &batch.data,
                    s.message_bytes,
                )
                .await
                .map_err(|e| self.copy_error(batch, e))
            }
        };
        match result {
            Ok(rows) => match self.client.batch_execute("COMMIT").await {
                Ok(()) => Ok(rows),
                Err(error) => Err(BatchError {
                    record: None,
                    commit_unknown: error.is_closed() || error.code().is_none(),
                    error,
                }),
            },
            Err(e) => {
                // The transaction is aborted; end it (a broken connection
                // ends it anyway).
                let _ = self.client.batch_execute("ROLLBACK").await;
                Err(e)
            }
        }
    }

    fn copy_error(&self, batch: &Batch, error: tokio_postgres::Error) -> BatchError {
        let record = error.as_db_error().and_then(|db| {
            let (line, _) = super::failure::parse_context(db.where_()?, &self.spec.relname)?;
            record_at_line(&self.spec.dialect, &batch.data, line)
        });
        BatchError {
            record,
            commit_unknown: false,
            error,
        }
    }
}

/// The 0-based record that the server's `line N` designates in `data`.
/// CSV counts newlines inside quoted fields into N (copyfromparse.c bumps
/// `cur_lineno` for them); text and binary count records.
pub fn record_at_line(dialect: &Dialect, data: &[u8], line: u64) -> Option<u64> {
    let index = match dialect.format {
        Format::Csv => {
            scan::records(dialect, data)
                .enumerate()
                .take_while(|(_, s)| s.line < line)
                .last()?
                .0
        }
        _ => {
            let i = usize::try_from(line.checked_sub(1)?).ok()?;
            scan::records(dialect, data).nth(i)?;
            i
        }
    };
    Some(index as u64)
}
