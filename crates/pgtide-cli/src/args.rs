//! Command-line flags, exactly as typed: clap definitions and nothing else.
//!
//! Turning these into library options (which needs a server, a catalog and
//! files) is the job of `cmd/*`.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use pgtide::copyopts::{CopyFormat, Header};

mod bench;
mod copy;
mod create;
mod export;
mod resume;
mod upsert;
pub use bench::{BenchArgs, BenchCommonArgs, BenchLoadArgs, BenchScenario, DemoArgs};
pub use copy::CopyArgs;
pub use create::{CreateArg, CreateArgs, CREATE_HELP};
pub use export::{CompressArg, ExportArgs};
pub use resume::{LedgerAction, LedgerArgs, ResumeArg, ResumeArgs, RESUME_HELP};
pub use upsert::{OnConflictArg, UpsertArgs, UPSERT_HELP};

/// pgtide: the fastest and safest way to move rows into, out of and
/// between PostgreSQL servers.
#[derive(Debug, Parser)]
#[command(name = "pgtide", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load files (or stdin) into a table with COPY, over one or many
    /// connections.
    Load(LoadArgs),
    /// Export a table or a query to a file (or stdout) with COPY TO, over
    /// one connection or, for a table, many sharing one snapshot.
    Export(ExportArgs),
    /// Copy tables from one server to another, streamed (no file), over
    /// one or many connection pairs sharing one snapshot of the source.
    Copy(CopyArgs),
    /// Manage the local PostgreSQL server that pgtide owns (the embedded
    /// default used when no connection is configured).
    Server {
        /// Action.
        #[command(subcommand)]
        action: ServerAction,
    },
    /// The `load --resume` ledger (pgtide.ledger in the target database):
    /// list what is recorded, forget a file's entries. A load routed on
    /// the client to foreign partitions also keeps entries on each
    /// shard server: `--db` that server to list or forget them.
    Ledger(LedgerArgs),
    /// Benchmarks that reproduce the seed documents' experiments.
    Bench(BenchArgs),
    /// The README's demo: generate a data set, load it with pgtide and with
    /// psql \copy on the embedded server, print both timings.
    Demo(DemoArgs),
    /// Print a shell completion script: `pgtide completions bash >
    /// ~/.local/share/bash-completion/completions/pgtide`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: ShellArg,
    },
    /// Print the man page (roff): `pgtide man > pgtide.1; man ./pgtide.1`.
    Man,
}

/// Shells `pgtide completions` writes for.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ShellArg {
    /// bash (bash-completion).
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

/// `pgtide server ...`
#[derive(Debug, Subcommand)]
pub enum ServerAction {
    /// Create (first time) and start the server.
    Start,
    /// Stop the server.
    Stop,
    /// Say whether it runs, where, and which version.
    Status,
    /// Print its connection URI (without the password).
    Url,
}

/// How progress is shown while the work runs (on stderr).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ProgressArg {
    /// A bar when stderr is a terminal (and no --quiet/--json), else nothing.
    Auto,
    /// Always the bar: percent, bytes, rows, rate, ETA.
    Bar,
    /// One JSON object per second, for wrappers and CI logs.
    Json,
    /// Nothing.
    None,
}

/// `--format`'s values: COPY's names for the library's format enum (the
/// one the scanner uses; no CLI copy of it), with the help each shows.
const FORMATS: [(&str, CopyFormat, &str); 3] = [
    (
        "text",
        CopyFormat::Text,
        "PostgreSQL text format: tab-separated, backslash escapes, \\N = NULL",
    ),
    ("csv", CopyFormat::Csv, "CSV, with COPY's CSV rules"),
    ("binary", CopyFormat::Binary, "PostgreSQL binary COPY file"),
];

/// `--header`'s values, as COPY's HEADER option names them, for the
/// library's header enum.
const HEADERS: [(&str, Header, &str); 3] = [
    ("true", Header::Skip, "Skip the first line of each file"),
    ("false", Header::None, "No header line"),
    (
        "match",
        Header::Match,
        "Skip it, but require it to name the loaded columns in order",
    ),
];

/// A flag's parser for one of `values` (name, value, help): the library's
/// enums parsed here, in one place, as `ValueEnum` would parse a CLI copy
/// of them (same names, order, help and errors).
fn one_of<T>(values: &'static [(&'static str, T, &'static str)]) -> impl TypedValueParser<Value = T>
where
    T: Copy + Send + Sync + 'static,
{
    let names = values
        .iter()
        .map(|&(name, _, help)| PossibleValue::new(name).help(help));
    PossibleValuesParser::new(names).map(move |typed| {
        values
            .iter()
            .find(|v| v.0 == typed)
            .map(|v| v.1)
            .expect("clap accepts only the names listed")
    })
}

/// How `load` sends rows (`--method`).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum MethodArg {
    /// COPY FROM STDIN with the input bytes passed through: the default,
    /// fast and exact for plain loads.
    Copy,
    /// Text/CSV encoded client-side into binary COPY (the server skips its
    /// text input functions): the fastest when the server's CPU is the
    /// limit. Values the encoder cannot prove exact go by text COPY in the
    /// same transaction; tables with a type it cannot encode (or arrays,
    /// when the session's array_nulls is off) are loaded by text COPY (the
    /// summary says so).
    Binary,
    /// Prepared INSERT per row, many in flight on each connection: the
    /// way to run --sql (upserts) or to fire INSERT rules. The INSERT
    /// methods read each field as COPY does (an `interval minute` column
    /// reads `5` as minutes); an array of such restricted intervals is
    /// refused.
    Pipeline,
    /// Multi-row INSERT ... VALUES with bound parameters (--batch-rows per
    /// statement): INSERT semantics without pipelining.
    Values,
    /// One prepared INSERT per row, each awaited: the slow baseline.
    Insert,
}

/// `pgtide load ...`
#[derive(Debug, Args)]
#[command(after_long_help = format!("{LOAD_AFTER_HELP}\n\n{CREATE_HELP}\n\n{RESUME_HELP}\n\n{UPSERT_HELP}"))]
pub struct LoadArgs {
    /// Input files; `-` reads stdin. gzip and zstd are detected by their
    /// magic bytes.
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<String>,

    /// Target table, `name` or `schema.name` (SQL case rules; quote to keep
    /// case: '"MyTable"').
    #[arg(long, short = 't')]
    pub table: String,

    /// Connection: a `postgresql://` URI or a libpq `key=value` string.
    /// Without it, PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD,
    /// PGSSLMODE... and ~/.pgpass are used as libpq does; with none of
    /// those set, the embedded server (`pgtide server start`).
    #[arg(long, short = 'd', value_name = "CONNINFO")]
    pub db: Option<String>,

    /// Input format. Without it: binary when the file starts with the
    /// binary COPY signature, else from the name (`.csv` csv; `.tsv`,
    /// `.txt`, `.tab` text; after any `.gz`/`.zst`), else csv (also for
    /// stdin). The summary says which was chosen.
    #[arg(long, short = 'f', value_parser = one_of(&FORMATS))]
    pub format: Option<CopyFormat>,

    /// The first line of each file is a header (`--header` alone = true).
    #[arg(long, value_parser = one_of(&HEADERS), num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub header: Header,

    /// Columns present in the file, in file order: names separated by
    /// commas, in SQL syntax as in psql's `\copy t (a, "B c")` (unquoted
    /// names fold to lower case; quote to keep case, spaces or commas).
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

    /// String that means NULL (COPY NULL).
    #[arg(long)]
    pub null: Option<String>,

    /// CSV: columns whose quoted value equal to the NULL string is NULL
    /// (COPY FORCE_NULL); names as in --columns, or '*' for every
    /// column (on every server version).
    #[arg(long, value_name = "COLUMNS")]
    pub force_null: Vec<String>,

    /// CSV: columns never NULL (COPY FORCE_NOT_NULL); names as in
    /// --columns, or '*' for every column.
    #[arg(long, value_name = "COLUMNS")]
    pub force_not_null: Vec<String>,

    /// Input encoding (COPY ENCODING), e.g. LATIN1; the server converts.
    #[arg(long)]
    pub encoding: Option<String>,

    /// Connections loading in parallel into the same table.
    #[arg(long, short = 'w', default_value_t = 1, value_parser = workers)]
    pub workers: usize,

    /// Empty the table (TRUNCATE) before loading: only once the options,
    /// every input, every connection and the first chunk (with its header)
    /// have been checked, so a load that cannot start leaves the table as
    /// it was.
    #[arg(long)]
    pub truncate: bool,

    /// Drop the table's non-unique secondary indexes right before the
    /// first chunk and build them again after the load, in parallel (one
    /// connection per index, up to --workers, maintenance_work_mem 512MB):
    /// faster than maintaining them row by row on large loads. Unique and
    /// constraint indexes are kept. The definitions are saved in
    /// pgtide.deferred_indexes first, so after a kill `pgtide ledger
    /// restore-indexes` (or the next load with --defer-indexes) builds
    /// them. Other sessions see the table without those indexes meanwhile.
    #[arg(long)]
    pub defer_indexes: bool,

    /// With --defer-indexes: also drop the table's PRIMARY KEY and UNIQUE
    /// constraints (and their indexes) before the load and add them back
    /// after it (index rebuilt, then ADD CONSTRAINT .. USING INDEX).
    /// Duplicates are then NOT refused row by row: they make the re-add
    /// fail at the end (exit 2, the error names the constraint and the
    /// query that finds them; delete them, then `pgtide ledger
    /// restore-indexes`). Refused when a foreign key references the
    /// constraint, on partitioned tables and with --on-conflict.
    /// Example: pgtide load big.csv --table t --truncate --defer-indexes
    /// --defer-constraints
    #[arg(long, requires = "defer_indexes")]
    pub defer_constraints: bool,

    /// The whole load is one transaction on one connection: all or
    /// nothing. Any failure (a bad row, a lost connection, Ctrl-C) rolls
    /// everything back, a --truncate included; a COMMIT whose answer is
    /// lost is settled by asking the server. With --truncate (or
    /// --create) the rows are sent by COPY .. FREEZE: written frozen, so no
    /// VACUUM rewrites them later. With --rejects, bad rows are set aside
    /// under savepoints and the rest commits once at the end (no FREEZE
    /// then; --max-rejects exceeded rolls everything back). Not with
    /// --workers above 1 or --resume (refused with a hint).
    /// Example: pgtide load day.csv --table t --truncate --single-transaction
    /// Example: pgtide load day.csv --table t --single-transaction --rejects
    /// day.rejects
    #[arg(long)]
    pub single_transaction: bool,

    /// How rows are sent (default: copy, or pipeline with --sql). Every
    /// method loads the same rows; see "Methods" below.
    #[arg(long, short = 'm', value_enum)]
    pub method: Option<MethodArg>,

    /// Run this statement per row instead of a plain INSERT, with the
    /// file's columns (in file order) bound as $1..$n, e.g.
    /// "INSERT INTO t VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v =
    /// excluded.v". Needs --method pipeline (the default with --sql) or
    /// insert.
    #[arg(long, value_name = "STATEMENT")]
    pub sql: Option<String>,

    /// Rows per statement for --method values (default 1000, at most
    /// 65535 / columns).
    #[arg(long, value_name = "N")]
    pub batch_rows: Option<usize>,

    /// Chunk size in bytes (e.g. 4194304, 16MB, 64MiB): the unit of
    /// parallelism and of commit.
    #[arg(long, value_name = "BYTES", default_value_t = pgtide::chunk::DEFAULT_CHUNK_BYTES, value_parser = chunk_bytes, hide_short_help = true)]
    pub chunk_bytes: usize,

    /// Longest record accepted, in bytes (its line break included). A
    /// chunk holds whole records, so this bounds memory beyond the
    /// chunks; an unmatched quote would otherwise make the rest of the
    /// file one record. The error names the line where the record starts.
    #[arg(long, value_name = "BYTES", default_value_t = pgtide::chunk::DEFAULT_MAX_RECORD_BYTES, value_parser = record_bytes, hide_short_help = true)]
    pub max_record_bytes: usize,

    /// CopyData message size in bytes (benchmarking knob).
    #[arg(long, value_name = "BYTES", default_value_t = pgtide::load::copy::MESSAGE_BYTES, hide = true)]
    pub message_bytes: usize,

    /// Write rows the server refuses to this file (same format as the
    /// input, header included, so it can be fixed and loaded again with the
    /// same command) and their reasons to FILE.log (one JSON object per
    /// row: line, record, byte offset, column, SQLSTATE, message), instead
    /// of stopping at the first bad row.
    ///
    /// The reject file and its log are created readable by you only
    /// (0600); they may not be an input (nor a link to one) nor a symbolic
    /// link, and an existing one is kept unless --force.
    #[arg(long, value_name = "FILE")]
    pub rejects: Option<std::path::PathBuf>,

    /// With --rejects: overwrite an existing reject file and its .log.
    #[arg(long, requires = "rejects")]
    pub force: bool,

    /// With --rejects: stop once more than N rows were rejected.
    #[arg(long, value_name = "N", requires = "rejects")]
    pub max_rejects: Option<u64>,

    /// For a partitioned target: `auto` routes each row on the client to
    /// its leaf when a leaf is a postgres_fdw foreign table (loaded by COPY
    /// on its own server), `direct` always (local partitions too),
    /// `coordinator` never (the parent table's COPY routes).
    #[arg(long, value_name = "HOW", default_value = "auto")]
    pub route: String,

    /// SERVER=CONNINFO: how to reach foreign server SERVER (as in \des)
    /// directly, instead of its options and user mapping. Repeatable.
    #[arg(long, value_name = "SERVER=CONNINFO")]
    pub shard_db: Vec<String>,

    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Progress on stderr: a bar with percent and ETA on a terminal, or
    /// one JSON line per second (`json`) where there is none.
    #[arg(long, value_enum, value_name = "HOW", default_value = "auto")]
    pub progress: ProgressArg,

    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// --create and its options.
    #[command(flatten)]
    pub create: CreateArgs,

    /// --resume.
    #[command(flatten)]
    pub resume: ResumeArgs,

    /// --on-conflict, --key.
    #[command(flatten)]
    pub upsert: UpsertArgs,
}

// The limits are the library's (`load::checks::local` enforces them for every
// caller); parsing checks them too so that the error names the flag.
use pgtide::load::{MAX_CHUNK_BYTES, MAX_WORKERS};

fn workers(s: &str) -> Result<usize, String> {
    bounded(s, 1, MAX_WORKERS, "each worker is a server connection")
}

fn chunk_bytes(s: &str) -> Result<usize, String> {
    size(
        s,
        1,
        MAX_CHUNK_BYTES,
        "a chunk is held in memory whole, PostgreSQL's own limit for one allocation is 1 GiB",
    )
}

fn record_bytes(s: &str) -> Result<usize, String> {
    size(s, 1, usize::MAX, "")
}

/// A size in bytes in `min..=max`: a number, or one with a unit as
/// PostgreSQL's settings take them (`64kB`, `4MB`, `1GB`: powers of 1024,
/// as are `KiB`, `MiB`, `GiB`); the error says why there is a limit.
fn size(s: &str, min: usize, max: usize, why: &str) -> Result<usize, String> {
    // parse-size takes any case (`16mb`, `16Mb`); PostgreSQL takes its
    // units as spelled, and so do we.
    let unit = s
        .trim()
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let known = ["", "B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"];
    let parsed = match known.contains(&unit.trim_start()) {
        true => parse_size::Config::new().with_binary().parse_size(s.trim()),
        false => Err(parse_size::Error::InvalidDigit),
    };
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" ({why})")
    };
    match parsed {
        Ok(n) if n >= min as u64 && n <= max as u64 => Ok(n as usize),
        Ok(_) => Err(format!("must be from {min} to {max} bytes{why}")),
        Err(_) => Err(format!(
            "must be a size in bytes, e.g. 4194304, 4MB or 4MiB (units B, kB, MB, GB, TB spelled as in PostgreSQL's settings, or KiB, MiB, GiB, TiB; all powers of 1024), from {min} to {max}"
        )),
    }
}

/// A number in `min..=max`; the error says why there is a limit.
fn bounded(s: &str, min: usize, max: usize, why: &str) -> Result<usize, String> {
    match s.trim().parse::<u128>() {
        Ok(n) if n >= min as u128 && n <= max as u128 => Ok(n as usize),
        Ok(_) => Err(format!("must be from {min} to {max} ({why})")),
        Err(_) => Err(format!("must be a whole number from {min} to {max}")),
    }
}

const LOAD_AFTER_HELP: &str = "\
Commit model:
  The input is cut into chunks of about --chunk-bytes at true row boundaries.
  Each chunk is loaded in its own transaction and committed on its own,
  whatever the number of workers. If a chunk fails, no new chunk starts,
  chunks already running finish, and the summary lists exactly which input
  line ranges are done. Reload the rest, or start over with --truncate.
  --single-transaction instead makes the whole load one transaction on one
  connection: all rows or none (see Fast paths below).
  With --rejects, a chunk with bad rows is retried in parts until every
  good row is committed and every bad row is in the reject file: rows read
  = rows loaded + rows rejected, checked and printed at the end.
  A broken connection is retried (reconnecting with backoff) only when
  nothing of the chunk can have been committed. Ctrl-C (or SIGTERM) stops
  cleanly: no new chunk, running chunks commit or roll back whole, the
  committed ranges are listed, exit 130 (a second Ctrl-C exits at once).

Fast paths:
  --single-transaction  one transaction for the whole load (one connection):
            committed at the end or not at all; with --truncate or --create
            the rows go by COPY .. FREEZE. The summary and --explain say
            whether FREEZE was used, and why not when it was not. With
            --rejects, bad rows are set aside under savepoints (no FREEZE)
            and the rest still commits once; a rollback keeps the reject
            file, but nothing of the input is in the table.
  --defer-indexes       secondary indexes dropped before, rebuilt after.
  --defer-constraints   PRIMARY KEY/UNIQUE too (duplicates fail at the end).

Line endings: as COPY, \\n, \\r\\n or a lone \\r; the file's first line
  settles which. A row whose line break does not fit (a stray \\r) is
  refused as the server would refuse it: rejected with --rejects,
  otherwise the load stops at that line.

Methods (--method):
  copy      the input bytes into COPY FROM STDIN. The default.
  binary    CSV/text parsed and encoded client-side, sent as binary COPY:
            the server skips text parsing, so it is the fastest when the
            server's CPU is the limit. Exact: anything the encoder is not
            sure of goes by text COPY in the same transaction.
  pipeline  one prepared INSERT per row, 256 in flight per connection;
            runs --sql (ON CONFLICT upserts), fires INSERT rules. Hides
            insert's round trip per row: the farther the server, the more
            it gains (2.4x on loopback, see docs/benchmarks.md).
  values    INSERT ... VALUES (..),(..) with --batch-rows rows per
            statement, parameters bound; for poolers that do not pipeline.
  insert    one INSERT per row, each awaited: a baseline, not a choice.
  All methods give the same table as copy, work with --workers and
  --rejects, and report the failing row. pipeline, values and insert need
  UTF-8 input and, for --format text, a UTF-8 database (text escapes such
  as \\351 are bytes of the database encoding); otherwise they refuse and
  --method copy does it (the server converts). binary falls back to copy
  in those cases, with a note.

Exit codes:
  0  every row was loaded
  1  the load finished, but some rows were rejected (see --rejects)
  2  error (bad options, connection, missing table, a row the server
     refused without --rejects)
  3  stopped because more than --max-rejects rows were rejected
  130  interrupted by Ctrl-C or SIGTERM (committed ranges are listed)

Examples:
  pgtide load data.csv --table public.events --format csv --header
  pgtide load big.tsv.zst --table t --format text --workers 4 --db postgresql://app@db/prod
  cat data.csv | pgtide load - --table t --columns id,name
  pgtide load big.csv --table t --method binary --workers 2
  pgtide load up.csv --table t --sql 'INSERT INTO t VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v'";

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn format_names_are_copys_own() {
        for (name, format, _) in FORMATS {
            assert_eq!(format.to_string(), name);
        }
        Cli::command().debug_assert();
    }

    #[test]
    fn header_values_parse_into_the_librarys_enum() {
        let header = |args: &[&str]| match Cli::parse_from(args).command {
            Command::Load(a) => a.header,
            _ => unreachable!(),
        };
        let load = ["pgtide", "load", "--table", "t", "f.csv"];
        assert_eq!(header(&load), Header::None);
        assert_eq!(header(&[&load[..], &["--header"]].concat()), Header::Skip);
        assert_eq!(
            header(&[&load[..], &["--header", "match"]].concat()),
            Header::Match
        );
        assert_eq!(
            header(&[&load[..], &["--header=false"]].concat()),
            Header::None
        );
    }

    #[test]
    fn sizes_take_postgresqls_units() {
        for (text, bytes) in [
            ("4096", 4096),
            ("64kB", 64 << 10),
            ("16MB", 16 << 20),
            ("16MiB", 16 << 20),
            (" 1GB ", 1 << 30),
            ("16 MB", 16 << 20),
            ("1.5kB", 1536),
        ] {
            assert_eq!(chunk_bytes(text), Ok(bytes), "{text}");
        }
        for text in [
            "0",
            "2GB",
            "16 apples",
            "",
            "-1",
            "16mb",
            "16Mb",
            "4k",
            "4 kb",
        ] {
            assert!(chunk_bytes(text).is_err(), "{text}");
        }
        assert_eq!(record_bytes("1TB"), Ok(1 << 40));
    }
}
