//! `--method values`: `INSERT ... VALUES (..),(..)` of [`values_rows`]
//! rows per statement, every value a bound text parameter (never pasted
//! into SQL), a few statements in flight. Each statement shape (rows per
//! statement) is prepared once per connection; a batch uses the full shape
//! and its last, partial one.
//!
//! When a multi-row statement fails, the server does not say which row:
//! the batch is redone row by row up to that statement ([`locate`]) to
//! name it, as the error isolation contract requires.

use std::collections::HashMap;

use bytes::Bytes;
use copyfmt::fields::Fields;
use copyfmt::scan;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

use super::insert::{
    copy_one, params_bytes, parse, rows, statement_sql, values_rows, Row, Statements, TextParam,
};
use super::pipeline::{drive, Cost, Window, PIPELINE_WINDOW};
use super::spec::LoaderSpec;
use super::step::{in_step_after, rollback_in_step};
use crate::batch::{Batch, BatchError};

/// `values` statements in flight: enough to overlap the client's
/// splitting with the server's inserting; bytes as for `pipeline` (a
/// statement of 40 rows of 1600 columns is a megabyte).
const VALUES_WINDOW: Window = Window {
    requests: 2,
    bytes: PIPELINE_WINDOW.bytes,
};

/// What a `values` job is.
enum Job {
    /// Rows `first..first + rows`, all good, as one statement.
    Group {
        first: u64,
        rows: usize,
        params: Vec<TextParam>,
    },
    /// A refused record.
    Bad(u64, Bytes),
}

/// A failed `values` job: its rows and the error.
struct Failed {
    first: u64,
    rows: usize,
    error: tokio_postgres::Error,
}

/// `savepoint`: the one the batch runs under (an isolation attempt),
/// which [`locate`] rolls back to instead of the whole transaction.
pub(super) async fn load(
    client: &Client,
    spec: &LoaderSpec,
    statements: &mut Statements,
    batch: &Batch,
    savepoint: Option<&str>,
) -> std::result::Result<u64, BatchError> {
    let per = values_rows(&spec.setup);
    let records = usize::try_from(batch.records).unwrap_or(usize::MAX);
    // The shapes this batch uses unless a record is refused: full
    // statements and the last, partial one.
    let mut shapes: HashMap<usize, Statement> = HashMap::new();
    for rows in [per.min(records), records % per] {
        if rows > 0 && !shapes.contains_key(&rows) {
            let s = statements
                .get(client, &spec.setup, rows)
                .await
                .map_err(BatchError::plain)?;
            shapes.insert(rows, s);
        }
    }
    let shapes = &shapes;
    let data = &batch.data;
    let mut fields = Fields::new();
    let mut spans = scan::records(&spec.dialect, data).enumerate();
    let mut pending: Option<Job> = None;
    let jobs = std::iter::from_fn(move || {
        if let Some(job) = pending.take() {
            return Some(job);
        }
        let (mut first, mut rows, mut params) = (0, 0, Vec::new());
        while rows < per {
            let Some((i, span)) = spans.next() else { break };
            match parse(spec, data, &span, &mut fields) {
                Row::Params(p) => {
                    if rows == 0 {
                        first = i as u64;
                    }
                    params.extend(p);
                    rows += 1;
                }
                Row::Bad(record) if rows == 0 => return Some(Job::Bad(i as u64, record)),
                Row::Bad(record) => {
                    pending = Some(Job::Bad(i as u64, record));
                    break;
                }
            }
        }
        (rows > 0).then_some(Job::Group {
            first,
            rows,
            params,
        })
    });
    let run = |job: Job| async move {
        match job {
            Job::Group {
                first,
                rows,
                params,
            } => {
                let result = match shapes.get(&rows) {
                    Some(s) => client.execute_raw(s, params).await,
                    // A group cut short by a refused record.
                    None => match client.prepare(&statement_sql(&spec.setup, rows)).await {
                        Ok(s) => client.execute_raw(&s, params).await,
                        Err(e) => Err(e),
                    },
                };
                result.map_err(|error| Failed { first, rows, error })
            }
            Job::Bad(i, record) => copy_one(client, spec, record)
                .await
                .map_err(|error| Failed {
                    first: i,
                    rows: 1,
                    error,
                }),
        }
    };
    let aborted = |f: &Failed| f.error.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION);
    match drive(jobs, VALUES_WINDOW, job_cost, run, aborted).await {
        Ok(n) => Ok(n),
        // One row (or a refused record sent alone): that is the record.
        Err(f) if f.rows == 1 => Err(BatchError::at(f.first, f.error)),
        Err(f) if f.error.as_db_error().is_none() => Err(BatchError::plain(f.error)),
        Err(f) => Err(locate(client, spec, statements, batch, f, savepoint).await),
    }
}

/// What a job weighs in the window; a refused record goes by its own COPY,
/// alone (see [`super::pipeline`]).
fn job_cost(job: &Job) -> Cost {
    match job {
        Job::Group { params, .. } => Cost {
            bytes: params_bytes(params),
            alone: false,
        },
        Job::Bad(_, record) => Cost {
            bytes: record.len(),
            alone: true,
        },
    }
}

/// Finds the record of a failed multi-row statement: the batch is redone
/// row by row (pipelined) up to the end of that statement, in a fresh
/// transaction (or, under `savepoint`, after rolling back to it: the
/// transaction around it holds other attempts' rows, or a whole
/// `--single-transaction` load), so rows before it are there as they
/// were; the first row that fails is the one. If none does (a concurrent
/// change), the statement's error is returned without a record.
async fn locate(
    client: &Client,
    spec: &LoaderSpec,
    statements: &mut Statements,
    batch: &Batch,
    f: Failed,
    savepoint: Option<&str>,
) -> BatchError {
    // Out of step (see `rollback_in_step`): nothing more on this
    // connection; the loader's own check then discards it.
    let again = match savepoint {
        Some(name) => in_step_after(client, &format!("ROLLBACK TO SAVEPOINT {name}")).await,
        None => rollback_in_step(client).await && client.batch_execute("BEGIN").await.is_ok(),
    };
    if !again {
        return BatchError::plain(f.error);
    }
    let end = usize::try_from(f.first).unwrap_or(usize::MAX) + f.rows;
    match rows(client, spec, statements, batch, PIPELINE_WINDOW, end).await {
        Err(e) if e.record.is_some() => e,
        _ => BatchError::plain(f.error),
    }
}
