//! `pgtide load --create` flags (flattened into `LoadArgs`).

use clap::{Args, ValueEnum};

/// `--create[=WHEN]`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CreateArg {
    /// The table must not exist (`--create` alone).
    New,
    /// Create it if it does not exist; an existing table is loaded as it is.
    IfNotExists,
}

/// Making the table from the file.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Create the table from the input: column names from the header
    /// (--header; else c1..cn), types inferred from a sample (see below).
    /// The table must not exist, unless --create=if-not-exists. It is
    /// created right before the first chunk, after every other check.
    #[arg(
        long,
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "new",
        value_name = "WHEN",
        help_heading = "Creating the table"
    )]
    pub create: Option<CreateArg>,

    /// Print the plan and load nothing: method (and any fallback),
    /// workers and chunks, transactions, truncate, FREEZE, indexes,
    /// rejects, the upsert's merge, what --resume skips, routing of a
    /// partitioned target; with --create, first the CREATE TABLE with why
    /// each type was chosen.
    #[arg(long)]
    pub explain: bool,

    /// With --create: a column's type instead of the inferred one, e.g.
    /// --type zip=text --type 'price=numeric(12,2)' (repeatable; the
    /// column by its name in the table or in the header).
    #[arg(
        long = "type",
        value_name = "COL=TYPE",
        requires = "create",
        help_heading = "Creating the table"
    )]
    pub types: Vec<String>,

    /// With --create: records read from the head of each input to infer
    /// types (as many again are read evenly spaced over the rest of an
    /// uncompressed file).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        help_heading = "Creating the table"
    )]
    pub sample_rows: usize,
}

/// `pgtide load --help`, after the exit codes: how types are inferred.
pub const CREATE_HELP: &str = "\
Creating the table (--create):
  Types are inferred from a sample: the first --sample-rows records of each
  input, plus as many spread evenly over the rest of an uncompressed file.
  A column gets the narrowest type that holds every sampled value exactly:
  boolean (true/false, t/f), integer/bigint (smallint only when the whole
  input was sampled), numeric (numeric(p,s) only when the whole input was
  sampled), double precision (exponents, NaN, Infinity), date (ISO
  YYYY-MM-DD only), timestamp, timestamptz (ISO 8601 with Z or +HH:MM),
  time (HH:MM:SS), interval, uuid, jsonb (objects, arrays), else text.
  Numbers with leading zeros (007, ZIP codes) and dates in any other style
  (03/04/2024) stay text: use --type col=TYPE to say otherwise. NULL is
  COPY's (--null); a column with NA-like values is text, and --explain
  says what it would be with --null NA. A later value that does not fit
  stops the load at its line and column, or goes to --rejects.

  pgtide load flights.csv --table flights --header --create
  pgtide load flights.csv --table flights --header --create --explain
  pgtide load penguins.csv --table penguins --header --null NA --create --type year=smallint";
