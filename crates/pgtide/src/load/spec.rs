//! What every method needs to know: the [`Method`] names, the
//! [`LoaderSpec`] a loader runs, and how a server's `line N` becomes a
//! record of the batch. A leaf of `load`: the methods (`binary`, `insert`,
//! `values`) and the dispatcher (`method`) import it, it imports none of
//! them.

use std::sync::Arc;

use copyfmt::scan::{self, Dialect};

use super::copy::Framing;
pub use super::setup::MethodSetup;
use crate::batch::BatchError;

/// How rows are sent to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// `COPY ... FROM STDIN` with the input bytes passed through.
    Copy,
    /// Text/CSV input encoded client-side into binary COPY.
    Binary,
    /// Prepared single-row INSERTs, pipelined on one connection.
    Pipeline,
    /// Multi-row `INSERT ... VALUES` with bound parameters.
    Values,
    /// Prepared single-row INSERTs, one at a time.
    Insert,
}

impl Method {
    /// Every method, in `--help` order.
    pub const ALL: [Method; 5] = [
        Method::Copy,
        Method::Binary,
        Method::Pipeline,
        Method::Values,
        Method::Insert,
    ];

    /// The method when none is asked for: COPY, or pipeline when `--sql`
    /// gives the statement (COPY cannot run one). The one place this rule
    /// lives; [`Method::check_sql`] is its other half.
    pub fn default_for(sql: Option<&str>) -> Method {
        match sql {
            Some(_) => Method::Pipeline,
            None => Method::Copy,
        }
    }

    /// `--sql` runs only with the methods that execute a statement per row.
    pub fn check_sql(self, sql: Option<&str>) -> crate::error::Result<()> {
        if sql.is_none() || matches!(self, Method::Pipeline | Method::Insert) {
            return Ok(());
        }
        Err(crate::error::Error::config(format!(
            "--sql runs with --method pipeline or insert, not {}",
            self.name()
        ))
        .with_hint("COPY and multi-row VALUES cannot run your statement; pipeline is the fast one"))
    }

    /// The name users type (`--method`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Copy => "copy",
            Method::Binary => "binary",
            Method::Pipeline => "pipeline",
            Method::Values => "values",
            Method::Insert => "insert",
        }
    }

    /// The method named `name` (as [`Method::name`] spells it).
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Sends rows as INSERT statements (and so can run `--sql`).
    pub fn is_insert(self) -> bool {
        matches!(self, Method::Pipeline | Method::Values | Method::Insert)
    }
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
    /// Columns, NULL spelling and statements for the non-COPY methods.
    pub setup: Arc<MethodSetup>,
    /// The COPY statement with `ON_ERROR ignore` (PostgreSQL 17+, text or
    /// CSV, with `--rejects`): type errors are skipped in one pass.
    pub on_error_sql: Option<String>,
    /// The target may drop rows on purpose: it (or, when partitioned, a
    /// partition) has a BEFORE or INSTEAD OF row trigger on INSERT, whose
    /// function may return NULL (or, for the INSERT methods, an INSTEAD
    /// rule). Only then may the server count fewer rows than were sent
    /// (`check_count`).
    pub table_may_skip: bool,
    /// The INSERT methods' statements are rewritten by an INSTEAD rule on
    /// INSERT, and the server reports the rule's row counts: a batch
    /// counts at most its records (more is the rule's doing, not a
    /// miscount; fewer is rows the rule dropped, as `table_may_skip`).
    pub instead_rule: bool,
    /// `--on-conflict`: the COPY statements above load the session's
    /// staging table, merged into the target by this (`load/upsert.rs`).
    pub upsert: Option<Arc<super::upsert::Upsert>>,
    /// `--rejects`: the query that finds rows a foreign key will refuse
    /// (`load/references.rs`), when the table has such keys.
    pub references: Option<Arc<super::references::References>>,
    /// Makes each transaction's id safe from a crash before its `COMMIT`
    /// ([`crate::witness`]); `None` when the load asked for none.
    pub witness: Option<Arc<crate::witness::Witness>>,
}

impl LoaderSpec {
    /// The columns bound as `$1..$n` for each row of an INSERT method's
    /// statement, in order (a multi-row VALUES repeats them): a type error
    /// in a parameter names its `$k` in the error context, and this names
    /// the column, as COPY's context does. Empty for COPY, and for `--sql`
    /// (the user's statement uses the parameters as it likes).
    pub fn parameter_columns(&self) -> Vec<String> {
        match self.method {
            Method::Pipeline | Method::Values | Method::Insert if self.setup.sql.is_none() => {
                self.setup.columns.iter().map(|c| c.name.clone()).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// A text COPY's error, with the record its `line N` designates in `data`.
pub(super) fn copy_error(
    spec: &LoaderSpec,
    data: &[u8],
    error: tokio_postgres::Error,
) -> BatchError {
    BatchError {
        record: record_of_error(&spec.dialect, &spec.relname, data, &error),
        commit_unknown: false,
        error,
    }
}

/// The 0-based record of `data` that a text or CSV COPY of `data` into
/// `relname` names in `error`'s context (`COPY t, line N`), as
/// [`record_at_line`] maps it.
pub fn record_of_error(
    dialect: &Dialect,
    relname: &str,
    data: &[u8],
    error: &tokio_postgres::Error,
) -> Option<u64> {
    let context = error.as_db_error()?.where_()?;
    let (line, _) = crate::failure::parse_context(context, relname)?;
    record_at_line(dialect, data, line)
}

/// The 0-based record that the server's `line N` designates in `data`
/// (see [`scan::record_at_server_line`] for how the server counts).
/// `data` must start with a record whose line break fits the input's
/// style, so that the server settles on the same style: chunks with a
/// misfit record are never sent whole (see `Chunk::eol_errors`).
pub fn record_at_line(dialect: &Dialect, data: &[u8], line: u64) -> Option<u64> {
    scan::record_at_server_line(dialect, data, line)
}
