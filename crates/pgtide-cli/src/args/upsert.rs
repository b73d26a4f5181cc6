//! `pgtide load --on-conflict` and `--key` (flattened into `LoadArgs`).

use clap::{Args, ValueEnum};

/// `--on-conflict WHAT`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OnConflictArg {
    /// Insert new keys, overwrite the loaded columns of existing ones
    /// (the last row of a key in the input wins).
    Update,
    /// Insert new keys, keep existing rows (the first row of a key wins).
    Skip,
}

/// Merging into a table that has rows.
#[derive(Debug, Args)]
pub struct UpsertArgs {
    /// Merge into existing rows instead of failing on a duplicate key:
    /// each chunk is COPYed into a temporary staging table, then merged
    /// with INSERT .. ON CONFLICT (KEY) DO UPDATE / DO NOTHING in its
    /// transaction, e.g. `pgtide load changes.csv -t t --on-conflict update`.
    #[arg(long, value_enum, value_name = "WHAT", help_heading = "Upserts")]
    pub on_conflict: Option<OnConflictArg>,

    /// With --on-conflict: the columns rows are matched on (default: the
    /// primary key); they must be a unique index's columns, e.g. `--key
    /// "tenant, id"`.
    #[arg(
        long,
        value_name = "COLUMNS",
        requires = "on_conflict",
        help_heading = "Upserts"
    )]
    pub key: Option<String>,
}

/// `--on-conflict` in `pgtide load --help`.
pub const UPSERT_HELP: &str = "\
Upserts (--on-conflict):
  pgtide load changes.csv --table t --on-conflict update          # key: t's primary key
  pgtide load changes.csv --table t --key email --on-conflict skip
  Each chunk is COPYed (--method copy, or binary) into a temporary staging
  table, then merged with one INSERT .. SELECT .. ON CONFLICT (key) DO UPDATE
  (update) or DO NOTHING (skip), in the chunk's transaction. The key must be
  the columns of a unique index, all loaded. A key that appears more than
  once in the input: the last row wins with update, the first with skip,
  for any --workers and --chunk-bytes (chunks stage their rows in parallel
  and merge in input order; after a failed chunk no later chunk merges, so
  the committed lines are always a prefix of the input). Rows whose key
  has a NULL never conflict and are all inserted. With update, a row that
  already holds the file's values (byte for byte) is not rewritten, unless
  the table has row UPDATE triggers or row-level security. The summary
  splits the loaded rows into inserted, updated and unchanged. --rejects works as for
  plain loads (constraint errors surface at the merge and are bisected).";
