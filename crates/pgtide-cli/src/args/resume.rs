//! `pgtide load --resume` (flattened into `LoadArgs`) and `pgtide ledger`
//! (the resume ledger, and the indexes `--defer-indexes` saved).

use clap::{Args, Subcommand, ValueEnum};

/// `--resume[=HOW]`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ResumeArg {
    /// Recognise the input by path, size and its first and last MiB
    /// (`--resume` alone).
    Fingerprint,
    /// Also hash the whole file (read once more before loading).
    Strict,
}

/// Finishing a load that was killed.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Exactly once across kills and crashes: record each committed chunk
    /// in the ledger (table pgtide.ledger in the target database, written
    /// in the chunk's own transaction) and skip what earlier runs
    /// committed or rejected. Run the same command again after a kill
    /// (any --workers or --chunk-bytes): it loads only the rest, e.g.
    /// `pgtide load big.csv -t t --workers 4 --resume`. See below.
    #[arg(
        long,
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "fingerprint",
        value_name = "HOW",
        help_heading = "Resuming"
    )]
    pub resume: Option<ResumeArg>,
}

/// `--resume` in `pgtide load --help`.
pub const RESUME_HELP: &str = "\
Resume (--resume):
  pgtide load big.csv --table t --workers 4 --resume   # killed (kill -9, OOM, reboot)
  pgtide load big.csv --table t --workers 2 --resume   # loads the rest, every row once
  Each chunk inserts a row into pgtide.ledger (created on first use) in the
  same transaction as its rows: the input's path, size and a SHA-256 of its
  first and last MiB (--resume=strict: of the whole file), the table, the
  format options, and the chunk's byte range. A resumed run reads the input
  again (gzip/zstd are decompressed again), skips the committed ranges and
  cuts the rest at row boundaries, so --workers and --chunk-bytes may
  change. Another file, table or format options: refused, saying what
  differs. A load already complete says so and exits 0. With --rejects the
  reject file is appended to (its .log names the run of each row) and rows
  rejected before are not rejected again. stdin cannot be resumed.
  `pgtide ledger list` shows the ledger, `pgtide ledger forget FILE` clears
  a file's entries (the rows stay in the table).
  A partitioned table routed on the client keeps a ledger on every server
  (each server's part of a chunk records itself there): a resume sends each
  server only the rows it lacks. `pgtide ledger list --db SHARD` shows a
  shard's entries.";

/// `pgtide ledger ...`
#[derive(Debug, Args)]
pub struct LedgerArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: LedgerAction,

    /// Connection, as for `load`.
    #[arg(long, short = 'd', value_name = "CONNINFO", global = true)]
    pub db: Option<String>,
}

/// `pgtide ledger list|forget`.
#[derive(Debug, Subcommand)]
pub enum LedgerAction {
    /// One line per input and table: bytes and rows committed, ranges,
    /// runs, last commit.
    List {
        /// As JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Clear the entries of FILE (or of every file with --all), so that
    /// the next --resume load of it starts from the beginning. The rows
    /// already loaded stay in the table.
    Forget {
        /// The input files, as given to `load`.
        #[arg(value_name = "FILE", required_unless_present = "all")]
        inputs: Vec<String>,
        /// Only the entries of this table (`name` or `schema.name`).
        #[arg(long, short = 't')]
        table: Option<String>,
        /// Every entry (of --table, when given).
        #[arg(long, conflicts_with = "inputs")]
        all: bool,
    },
    /// Build the indexes that `load --defer-indexes` dropped and could not
    /// build again (the load was killed, or a build failed): their
    /// definitions wait in pgtide.deferred_indexes. Constraints dropped by
    /// `--defer-constraints` are added back on their rebuilt index (after
    /// duplicates made that fail: delete them first, the error shows the
    /// query that lists them).
    RestoreIndexes {
        /// Connections building at once.
        #[arg(long, short = 'w', default_value_t = 2)]
        workers: usize,
    },
}
