//! The load, resolved: everything the pool, the reader and the workers
//! need, decided once by `load::run` (options checked, table and columns
//! read from the catalog, method and statements chosen).

use copyfmt::scan::Dialect;

use super::loader::Method;
use crate::conn::Target;
use crate::copyopts::{CopyFormat, Header};

/// Everything the pool needs, resolved by `load::run`.
pub(super) struct Plan {
    pub target: Target,
    pub method: Method,
    pub sql: String,
    pub dialect: Dialect,
    pub format: CopyFormat,
    pub header: Header,
    pub column_names: Vec<String>,
    pub relname: String,
    pub inputs: Vec<String>,
    pub workers: usize,
    pub chunk_bytes: usize,
    pub max_record_bytes: usize,
    pub message_bytes: usize,
    /// Reject file path (`--rejects`): bad rows are isolated, not fatal.
    pub rejects: Option<std::path::PathBuf>,
    /// `--force`: the reject file may replace an existing one.
    pub overwrite_rejects: bool,
    /// `CREATE TABLE` (`--create`), run once everything is checked.
    pub create_sql: Option<String>,
    /// The table, quoted, for asking its OID once `create_sql` made it.
    pub table_sql: String,
    /// `TRUNCATE` statement (`--truncate`), run once everything is checked.
    pub truncate_sql: Option<String>,
    /// `--max-rejects`.
    pub max_rejects: Option<u64>,
    /// COPY with `ON_ERROR ignore` (PostgreSQL 17+ with `--rejects`).
    pub on_error_sql: Option<String>,
    /// The target's triggers may drop rows (`catalog::may_skip_rows`).
    pub table_may_skip: bool,
    /// An INSTEAD rule on INSERT counts for the INSERT methods
    /// (`catalog::instead_rule`).
    pub instead_rule: bool,
    /// `--defer-indexes`: the table whose secondary indexes are dropped
    /// right before the first chunk (`load/indexes.rs`).
    pub defer_indexes: Option<crate::catalog::Table>,
    /// `--defer-constraints`: its PRIMARY KEY and UNIQUE constraints too
    /// (`load/constraints.rs`).
    pub defer_constraints: bool,
    /// `--on-conflict`: the staging table and the merge.
    pub upsert: Option<std::sync::Arc<super::upsert::Upsert>>,
    /// `--rejects`: where foreign key violations are (`references.rs`).
    pub references: Option<std::sync::Arc<super::references::References>>,
    /// Columns, NULL spelling, `--sql` and `--batch-rows` for the methods.
    pub method_setup: super::loader::MethodSetup,
    /// `--resume`: what earlier runs did (skipped), and the ledger
    /// identity of each input (recorded with every batch).
    pub resume: Option<std::sync::Arc<super::ledger::Resume>>,
    /// `--resume` with `--rejects`: what earlier runs left in the reject
    /// file (appended to).
    pub earlier_rejects: Option<crate::reject::Earlier>,
    /// `--single-transaction`: one connection, one transaction opened
    /// before the first writes and committed after the last chunk
    /// (`load/single.rs`).
    pub single_transaction: bool,
    /// Each `COMMIT` waits for a witness first ([`crate::witness`]).
    pub witness: bool,
    /// Chunks may commit lazily (`load/lazy.rs`).
    pub lazy_commit: bool,
}
