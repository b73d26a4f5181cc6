//! `pgtide copy` flags.

use clap::Args;

use super::ProgressArg;

/// `pgtide copy ...`
#[derive(Debug, Args)]
#[command(after_long_help = COPY_AFTER_HELP)]
pub struct CopyArgs {
    /// Source server: a `postgresql://` URI or a libpq `key=value` string.
    #[arg(long, value_name = "CONNINFO")]
    pub from: String,

    /// Target server, same syntax. It may be the same server (another
    /// database, or another table with --target-table).
    #[arg(long, value_name = "CONNINFO")]
    pub to: String,

    /// Table to copy: `name` or `schema.name` (SQL case rules; quote to
    /// keep case: '"MyTable"'). Repeat for several tables; they share the
    /// workers, largest first. The table must exist on the target with
    /// (at least) the source's columns, matched by name.
    #[arg(long, short = 't', value_name = "TABLE")]
    pub table: Vec<String>,

    /// Copy every table of this schema (plain and partitioned tables;
    /// partitions come with their parent). SQL case rules, as --table:
    /// quote to keep case or spaces ('"My Schema"'). Repeatable; combines
    /// with --table.
    #[arg(long, value_name = "SCHEMA")]
    pub schema: Vec<String>,

    /// Name of the table on the target, when it differs (one --table
    /// only).
    #[arg(long, value_name = "NAME")]
    pub target_table: Option<String>,

    /// Worker pairs (one source and one target connection each).
    #[arg(long, short = 'w', default_value_t = 1)]
    pub workers: usize,

    /// Empty each target table first, in the same transaction that loads
    /// it, with COPY FREEZE where PostgreSQL allows it: each table is then
    /// complete or untouched, and one worker copies it.
    #[arg(long)]
    pub truncate: bool,

    /// After the copy, compare row count and an order-independent hash of
    /// every row, computed by each server; a difference is exit 2 naming
    /// the table.
    #[arg(long)]
    pub verify: bool,

    /// Create tables missing on the target from `pg_dump --schema-only`
    /// of the source: tables and their sequences before the rows,
    /// indexes, constraints and triggers after; sequences set to the
    /// source's values. Needs pg_dump of the source's major version or
    /// newer.
    #[arg(long)]
    pub create: bool,

    /// Always use text COPY, even where the binary form would pass
    /// unchanged (benchmarks, or to rule binary out).
    #[arg(long)]
    pub text: bool,

    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Progress on stderr: a bar on a terminal, or one JSON line per
    /// second (`json`).
    #[arg(long, value_enum, value_name = "HOW", default_value = "auto")]
    pub progress: ProgressArg,

    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

const COPY_AFTER_HELP: &str = "\
How rows travel:
  Nothing is written to disk: each worker runs COPY (SELECT cols FROM t
  WHERE ctid in a block range) TO STDOUT on the source and feeds the bytes
  into COPY t (cols) FROM STDIN on the target, about 64 KiB at a time.
  Columns are matched by name: the source's columns (but generated ones)
  must exist on the target; the target may have more (they get defaults).

Binary or text (the summary says which, and why, per table):
  binary  the bytes pass untouched, nothing is decoded: only when both
          servers run the same major version with the same encoding, the
          column types have the same names, and every type OID the binary
          form carries (array elements, composite fields) is the same on
          both servers, checked in both catalogs.
  text    otherwise: each server's own text output and input functions.
  reg* columns (regclass...) always go by text: their binary value is an
  OID of the source server. --text forces text.

One snapshot, ranges, commits:
  A coordinator connection on the source takes one snapshot and locks the
  tables against DROP/TRUNCATE/VACUUM FULL (ordinary writes go on); every
  source connection reads in that snapshot, so all tables are copied as
  of one moment, each row exactly once. Each table is cut into ctid block
  ranges (2 MiB of heap at most); each range is loaded on the target in
  its own transaction. If one fails, no new range starts, running ranges
  commit or roll back whole, and the summary lists per table the ranges
  that are committed; nothing is half-written inside a range.
  With --truncate each table is one transaction instead (TRUNCATE, then
  COPY ... FREEZE on a plain table, rows written already frozen; the
  summary says whether FREEZE was used): a table is complete or as it was.
  Ctrl-C (or SIGTERM) stops cleanly: no new range, running ranges commit
  or roll back, committed ranges listed, exit 130.

Verify (--verify):
  SELECT count(*), sum(first 64 bits of md5(row::text)) on each server,
  the source's in the copied snapshot. Text forms are compared, with the
  same DateStyle, IntervalStyle, TimeZone and float settings on both:
  money (lc_monetary), reg* types (search_path) and columns whose types
  differ between the sides may print differently though equal.

Create (--create):
  Tables the target lacks are made from pg_dump --schema-only of the
  source, as pgcopydb does: --section=pre-data (the table, its sequences
  and defaults; a partitioned table with its partitions) before the rows,
  --section=post-data (indexes, primary/unique/foreign keys, triggers)
  after them, so rows go in without index upkeep or trigger calls; then
  each sequence the tables own is set to the source's value (setval).
  Applied with the --to connection, with --no-owner --no-privileges
  --no-tablespaces: the target's user owns the tables, no GRANTs. The
  tables' other dependencies (schemas are created; types, functions used
  by defaults or triggers, tables referenced by foreign keys) must exist
  on the target or be copied in the same run. pg_dump must be of the
  source's major version or newer: found in PGTIDE_PG_DUMP, PGTIDE_PGBIN,
  pg_config --bindir, /usr/lib/postgresql/*/bin or PATH. Tables that
  exist are left as they are. If the copy stops, post-data is not applied.

Exit codes:
  0  every table was copied (and verified, with --verify)
  2  error (options, connection, missing table or column, server error,
     --verify mismatch); committed ranges are listed
  130  interrupted by Ctrl-C or SIGTERM (committed ranges are listed)

Examples:
  pgtide copy --from postgresql://app@old/prod --to postgresql://app@new/prod --table events --workers 4
  pgtide copy --from 'host=a dbname=x' --to 'host=b dbname=x' --schema public --truncate --verify
  pgtide copy --from $SRC --to $SRC --table events --target-table events_backup
  pgtide copy --from $SRC --to $DST --schema app --create --workers 4 --verify";
