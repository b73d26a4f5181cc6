//! `pgtide export` flags.

use clap::{Args, ValueEnum};

use pgtide::copyopts::CopyFormat;

use super::{one_of, ProgressArg, FORMATS};

/// Output compression for `export --compress`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CompressArg {
    /// No compression (even for a .gz or .zst name).
    None,
    /// gzip.
    Gzip,
    /// zstd (level 3).
    Zstd,
}

/// `pgtide export ...`
#[derive(Debug, Args)]
#[command(after_long_help = EXPORT_AFTER_HELP)]
pub struct ExportArgs {
    /// Table (or view, materialized view, partitioned or foreign table) to
    /// export: `name` or `schema.name` (SQL case rules; quote to keep
    /// case: '"MyTable"').
    #[arg(
        long,
        short = 't',
        required_unless_present = "query",
        conflicts_with = "query"
    )]
    pub table: Option<String>,

    /// Query to export instead of a table: any statement COPY (...) TO
    /// accepts (SELECT, VALUES, TABLE, or INSERT/UPDATE/DELETE with
    /// RETURNING).
    #[arg(long, value_name = "SQL")]
    pub query: Option<String>,

    /// Output file, or - for stdout. Written as a new FILE.XXXXXX.partial
    /// in the same directory and renamed when complete (a link is
    /// followed; an existing file keeps its mode); a FIFO or a device is
    /// written into as it is. A name ending in .gz or .zst is compressed.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: String,

    /// Connection: a `postgresql://` URI or a libpq `key=value` string.
    /// Without it, PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD,
    /// PGSSLMODE, PGOPTIONS... and ~/.pgpass are used as libpq does; with
    /// none of those set, the embedded server (`pgtide server start`).
    #[arg(long, short = 'd', value_name = "CONNINFO")]
    pub db: Option<String>,

    /// Output format.
    #[arg(long, short = 'f', value_parser = one_of(&FORMATS), default_value = "csv")]
    pub format: CopyFormat,

    /// Write a header line with the column names (csv, text).
    #[arg(long)]
    pub header: bool,

    /// Columns to export, in output order (SQL identifier syntax, like
    /// --table: unquoted names fold to lower case). Default: every column
    /// but generated ones, as COPY t TO does.
    #[arg(long, value_name = "COLUMNS")]
    pub columns: Option<String>,

    /// Field delimiter (COPY DELIMITER); `\t` for tab.
    #[arg(long)]
    pub delimiter: Option<String>,

    /// CSV quote character (COPY QUOTE).
    #[arg(long)]
    pub quote: Option<String>,

    /// CSV escape character (COPY ESCAPE); defaults to the quote.
    #[arg(long)]
    pub escape: Option<String>,

    /// String written for NULL (COPY NULL).
    #[arg(long)]
    pub null: Option<String>,

    /// CSV: quote every non-NULL value of these columns, or of all with
    /// `*` (COPY FORCE_QUOTE).
    #[arg(long, value_name = "COLUMNS|*")]
    pub force_quote: Option<String>,

    /// Output encoding (COPY ENCODING), e.g. LATIN1; the server converts.
    /// Default: UTF8.
    #[arg(long)]
    pub encoding: Option<String>,

    /// Compression, whatever the output's name (needed for stdout).
    #[arg(long, value_enum)]
    pub compress: Option<CompressArg>,

    /// Connections reading the table in parallel, all in one snapshot.
    #[arg(long, short = 'w', default_value_t = 1)]
    pub workers: usize,

    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Progress on stderr: a bar with percent and ETA on a terminal, or
    /// one JSON line per second (`json`) where there is none.
    #[arg(long, value_enum, value_name = "HOW", default_value = "auto")]
    pub progress: ProgressArg,

    /// Print the summary as JSON: on stdout, or on stderr with --output -
    /// (as the human summary).
    #[arg(long)]
    pub json: bool,
}

const EXPORT_AFTER_HELP: &str = "\
What you get:
  With 1 worker the file is exactly what the server sends for
  COPY (SELECT cols FROM t) TO STDOUT (or COPY (query) ...) with your
  options: byte for byte what psql -c \"\\copy (SELECT ...) TO 'FILE' ...\"
  writes. The rows come in the order the server reads them; add ORDER BY
  in a --query for a defined order.

Workers (--workers N, tables only):
  A coordinator connection opens a REPEATABLE READ transaction, locks the
  table against DROP/TRUNCATE/VACUUM FULL (ordinary writes go on) and
  exports its snapshot; N connections import it, so every row of that one
  table state is exported exactly once, whatever others write meanwhile.
  The table is read in ctid block ranges (fast TID range scans from
  PostgreSQL 14), written to the one output in block order: the same rows
  as with 1 worker, in physical order, one header line, one binary header
  and trailer. Memory stays bounded: at most N+1 ranges of 4 MiB each wait
  for the output. Views, partitioned and foreign tables are exported by 1
  connection (the summary says so).

The output appears complete or not at all:
  pgtide writes FILE.XXXXXX.partial (a new name, created exclusively) in
  FILE's directory, fsyncs it and renames it to FILE at the end; if FILE
  is a symbolic link, the file it points to is replaced (not another
  user's link in /tmp), and an existing FILE must be writable and keeps
  its mode (and owner, where allowed). On any error (server, lost connection,
  statement timeout, full disk, permissions) the partial file is removed
  and the exit code is 2. Ctrl-C (or SIGTERM) removes it too, exit 130.
  A FIFO or a device (/dev/null) is written into as it is, as psql would
  (a FIFO once a reader opens it); what reached it before a failure stays.
  stdout (-) cannot be taken back: a failed export may have written part
  of the data there; a reader that stops early (| head) ends the export
  quietly with exit code 141.

Exit codes:
  0  the export is complete
  2  error (bad options, connection, missing table, server error, output)
  130  interrupted by Ctrl-C or SIGTERM (no file left)

Examples:
  pgtide export --table public.events --output events.csv --header
  pgtide export --table t --output t.bin.zst --format binary --workers 4
  pgtide export --query 'SELECT id, name FROM users WHERE active' --output users.tsv --format text
  pgtide export --table t --output - --compress zstd | ssh backup 'cat > t.csv.zst'";
