//! Exporting a table or a query to a file (or stdout) with `COPY ... TO
//! STDOUT`.
//!
//! ```text
//! resolve (table + columns, or the query) -> COPY statement(s)
//!   1 connection:  COPY (SELECT cols FROM t | query) TO STDOUT
//!   N connections: parallel::open (one exported snapshot), block ranges
//!                  parallel::pump: ranges in block order
//!   -> receive: the COPY read off the socket (crate::copyout), many
//!      CopyData messages per read, into 256 KiB pieces
//!   -> output: one writer thread, gzip/zstd, FILE.partial -> fsync -> FILE
//! ```
//!
//! With one connection the bytes are exactly what the server sent, so the
//! file equals `psql -c "\copy (SELECT ...) TO 'FILE' ..."` with the same
//! options. With N, ranges are written in block order: the rows are the
//! same multiset, in physical order; one header line (range 0's) and, for
//! binary, one file header and trailer around all ranges.
//!
//! The output appears complete or not at all: any error removes
//! `FILE.partial` and is returned with a hint.

pub mod output;
pub mod parallel;
pub mod receive;

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::catalog::{self, Table};
use crate::conn::Target;
use crate::copyopts::{CopyFormat, CopyOptions, Header};
use crate::error::{Error, ErrorKind, Result};
use crate::ident::{quote, QualifiedName};
use crate::progress::Progress;
use crate::snapshot;
use crate::source::Compression;

use output::Output;
use parallel::PumpError;
use receive::{Framing, Job};

/// What to export.
#[derive(Debug, Clone)]
pub enum What {
    /// A table, view, materialized view, partitioned or foreign table.
    Table(QualifiedName),
    /// A query (`SELECT`, `VALUES`, `TABLE`, or DML with `RETURNING`).
    Query(String),
}

/// COPY's FORCE_QUOTE (CSV only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ForceQuote {
    /// Only what needs quoting is quoted.
    #[default]
    None,
    /// `FORCE_QUOTE *`: every non-NULL value.
    All,
    /// These columns.
    Columns(Vec<String>),
}

/// What to export, where and how.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The table or query.
    pub what: What,
    /// With a table: the columns, in output order (`None` = every column
    /// except generated ones, as `COPY t TO` does).
    pub columns: Option<Vec<String>>,
    /// Output path, or `-` for stdout.
    pub output: String,
    /// Format and COPY options; `header` other than `None` writes a
    /// header line. FORCE_NULL/FORCE_NOT_NULL must be empty.
    pub copy: CopyOptions,
    /// FORCE_QUOTE.
    pub force_quote: ForceQuote,
    /// Compression; `None` = by the output's name (`.gz`, `.zst`).
    pub compress: Option<Compression>,
    /// Connections reading in parallel (tables only).
    pub workers: usize,
}

impl ExportOptions {
    /// Defaults: the whole table or query, one connection.
    pub fn new(what: What, output: impl Into<String>, format: CopyFormat) -> Self {
        ExportOptions {
            what,
            columns: None,
            output: output.into(),
            copy: CopyOptions::new(format),
            force_quote: ForceQuote::None,
            compress: None,
            workers: 1,
        }
    }

    /// Rejects what COPY TO would reject, before connecting.
    pub fn validate(&self) -> Result<()> {
        self.copy.validate()?;
        if self.workers == 0 {
            return Err(Error::config("--workers must be at least 1"));
        }
        if self.copy.header == Header::Match {
            return Err(Error::config("HEADER match is for loading; use --header"));
        }
        if !self.copy.force_null.is_empty() || !self.copy.force_not_null.is_empty() {
            return Err(Error::config(
                "FORCE_NULL and FORCE_NOT_NULL are for loading, not exporting",
            ));
        }
        if self.force_quote != ForceQuote::None && self.copy.format != CopyFormat::Csv {
            return Err(Error::config("--force-quote needs --format csv"));
        }
        if self.columns.is_some() && matches!(self.what, What::Query(_)) {
            return Err(Error::config("--columns applies to --table")
                .with_hint("with --query, choose the columns in the SELECT list"));
        }
        if self.output.is_empty() {
            return Err(Error::config("--output is empty")
                .with_hint("give a file path for --output, or - for stdout"));
        }
        if let What::Query(q) = &self.what {
            if query_text(q).is_empty() {
                return Err(Error::config("--query is empty"));
            }
        }
        Ok(())
    }
}

/// What an export did.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// Rows written.
    pub rows: u64,
    /// Bytes stored in the output (after compression).
    pub bytes: u64,
    /// COPY bytes received from the server (before compression).
    pub data_bytes: u64,
    /// Wall time.
    pub seconds: f64,
    /// Connections that read rows.
    pub workers: usize,
    /// `text`, `csv` or `binary`.
    pub format: &'static str,
    /// `none`, `gzip` or `zstd`.
    pub compression: &'static str,
    /// `server_version` of the source.
    pub server_version: String,
    /// The table as resolved, or `query`.
    pub source: String,
    /// The output (`-` = stdout).
    pub output: String,
    /// Things the user should know (e.g. why fewer workers were used).
    pub notes: Vec<String>,
}

impl ExportReport {
    /// Rows per second over the wall time.
    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.seconds.max(1e-9)
    }
    /// Megabytes (10^6) of COPY data per second over the wall time.
    pub fn mb_per_sec(&self) -> f64 {
        self.data_bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

/// The resolved statement source: `SELECT .. FROM t` or the query.
struct Plan {
    select: String,
    table: Option<Table>,
    source: String,
}

/// Exports per `opts` from `target`. On error nothing is left at
/// `opts.output` (stdout may have received part of the data).
pub async fn run(
    target: &Target,
    opts: &ExportOptions,
    progress: Arc<Progress>,
) -> Result<ExportReport> {
    opts.validate()?;
    let start = Instant::now();
    // Its wire: with one connection, the COPY runs on it (`copyout`).
    let (control, _notices, wire) = target.connect_wire().await?;
    let server_version: String = control.query_one("SHOW server_version", &[]).await?.get(0);
    let plan = plan(&control, opts).await?;
    let mut notes = Vec::new();
    let mut parallel_table = None;
    if let Some(t) = &plan.table {
        let row = control
            .query_one(include_str!("../../sql/export_table.sql"), &[&t.oid])
            .await?;
        let kind: String = row.get(0);
        let am: String = row.get(1);
        let estimate: f64 = row.get(2);
        Progress::add(&progress.total_rows, estimate.max(0.0) as u64);
        if opts.workers > 1 {
            match (kind.as_str(), am.as_str()) {
                ("r" | "m", "heap") => parallel_table = Some(t),
                _ => notes.push(format!(
                    "{} is {}: exported by 1 connection (--workers reads ctid block \
                     ranges of a plain heap table)",
                    t.name,
                    kind_name(&kind, &am)
                )),
            }
        }
    } else if opts.workers > 1 {
        notes.push("--workers applies to --table; a --query is exported by 1 connection".into());
    }
    let compression = output::compression_for(&opts.output, opts.compress);
    let stop = || progress.stop_requested();
    let output = Output::create(&opts.output, compression, &stop)?;
    let copy_sql = |where_: &str, header: bool| {
        let mut copy = opts.copy.clone();
        if !header {
            copy.header = Header::None;
        }
        copy.copy_to_sql(
            &format!("{}{where_}", plan.select),
            &force_quote_sql(&opts.force_quote),
        )
    };
    let header_messages = u64::from(opts.copy.header != Header::None);
    let binary = opts.copy.format == CopyFormat::Binary;
    let (jobs, clients, snapshot, workers) = match parallel_table {
        None => {
            let job = Job {
                sql: copy_sql("", true),
                framing: Framing::Whole,
                extra_messages: header_messages + u64::from(binary),
            };
            (vec![job], vec![(control, wire)], None, 1)
        }
        Some(t) => {
            drop((control, wire));
            let mut snap = snapshot::open(target, &[(t.name.quoted(), t.oid)], opts.workers, "")
                .await
                .map_err(|e| explain(e, &opts.output))?;
            let ranges = snapshot::block_ranges(snap.blocks[0], opts.workers);
            let jobs = ranges
                .iter()
                .enumerate()
                .map(|(i, &(first, end))| Job {
                    sql: copy_sql(&snapshot::ctid_condition(first, end), i == 0),
                    framing: if binary {
                        Framing::BinaryBody
                    } else {
                        Framing::Whole
                    },
                    extra_messages: if i == 0 { header_messages } else { 0 } + u64::from(binary),
                })
                .collect();
            let clients = std::mem::take(&mut snap.workers);
            (jobs, clients, Some(snap), opts.workers)
        }
    };
    // A query may write (`DELETE .. RETURNING`): it runs in a transaction
    // that commits only once its rows are in place, so an export that
    // fails (a full disk, Ctrl-C) changes nothing.
    let in_transaction = plan.table.is_none();
    if in_transaction {
        if let Some((client, _)) = clients.first() {
            // The transaction waits on the writer at its end: no role's
            // timeout may end it then.
            let begin = format!("BEGIN; {}", snapshot::NO_TIMEOUTS);
            client.batch_execute(&begin).await?;
        }
    }
    let framed = snapshot.is_some() && binary;
    if framed {
        let mut header = Vec::new();
        copyfmt::binary::write_header(&mut header);
        if output.send(header.into()).await.is_err() {
            return Err(output.failure().await);
        }
    }
    let (received, clients) = match parallel::pump(jobs, clients, &output, progress.clone()).await {
        Ok(r) => r,
        Err(PumpError::Output) => return Err(output.failure().await),
        Err(PumpError::Interrupted) => {
            drop(output);
            return Err(interrupted(&opts.output));
        }
        Err(PumpError::Copy(e)) => {
            drop(output);
            return Err(explain(e, &opts.output));
        }
    };
    if framed {
        let mut trailer = Vec::new();
        copyfmt::binary::write_trailer(&mut trailer);
        if output.send(trailer.into()).await.is_err() {
            return Err(output.failure().await);
        }
    }
    let written = match in_transaction {
        true => {
            let renamed = output.renamed();
            let commit = commit_query(&clients, &opts.output, renamed);
            output.finish_after(commit, true).await?
        }
        false => output.finish().await?,
    };
    drop(snapshot);
    Ok(ExportReport {
        rows: received.rows,
        bytes: written.stored_bytes,
        data_bytes: written.data_bytes,
        seconds: start.elapsed().as_secs_f64(),
        workers,
        format: format_name(opts.copy.format),
        compression: match compression {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        },
        server_version,
        source: plan.source,
        output: opts.output.clone(),
        notes,
    })
}

/// The SELECT to export and, for a table, the table.
async fn plan(client: &tokio_postgres::Client, opts: &ExportOptions) -> Result<Plan> {
    match &opts.what {
        What::Query(q) => {
            // The query goes inside `COPY (...) TO STDOUT`: it is prepared
            // alone first, so that it is one statement, and no text that
            // closes the parenthesis can run statements of its own.
            let select = query_text(q).to_owned();
            if let Err(e) = client.prepare(&select).await {
                let e = Error::from(e);
                return Err(match e.sqlstate() {
                    // A syntax error, or more than one statement.
                    Some("42601") => e.with_hint(
                        "--query takes one query (SELECT, VALUES, TABLE, or \
                         INSERT/UPDATE/DELETE .. RETURNING), as COPY (query) TO does",
                    ),
                    _ => explain(e, &opts.output),
                });
            }
            Ok(Plan {
                select,
                table: None,
                source: "query".into(),
            })
        }
        What::Table(name) => {
            let table = Table::resolve(client, name).await?;
            if let Some(what) = table.not_rows() {
                // As `COPY t TO` (and psql's `\copy`) refuses it.
                return Err(
                    Error::config(format!("cannot copy from {what} {}", table.name)).with_hint(
                        format!(
                            "export a query of it instead: --query 'SELECT * FROM {}'",
                            table.name
                        ),
                    ),
                );
            }
            // A table of no columns exports a line per row (a CSV header
            // line is empty), as `COPY (SELECT FROM t) TO` writes.
            let columns = table.select(opts.columns.as_deref())?;
            if let ForceQuote::Columns(forced) = &opts.force_quote {
                for f in forced {
                    if !columns.iter().any(|c| &c.name == f) {
                        return Err(Error::config(format!(
                            "--force-quote column {f:?} is not exported"
                        ))
                        .with_hint(format!(
                            "exported columns: {}",
                            columns
                                .iter()
                                .map(|c| c.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                }
            }
            let select = format!(
                "SELECT {} FROM {}",
                catalog::column_list(&columns),
                table.rows_from()
            );
            let source = table.name.to_string();
            Ok(Plan {
                select,
                table: Some(table),
                source,
            })
        }
    }
}

/// Commits the transaction a query ran in, once its output is written
/// (and before a file takes its name: `Output::finish_after`, which
/// removes the partial file when the commit certainly failed, and keeps
/// it when the answer was lost). `renamed`: the output is such a file;
/// otherwise its reader has the rows already.
async fn commit_query(
    clients: &[(tokio_postgres::Client, crate::conn::Wire)],
    output: &str,
    renamed: bool,
) -> std::result::Result<(), output::NotCommitted> {
    use crate::error::{classify, Class};
    let done = match clients.first() {
        Some((client, _)) => client
            .batch_execute("COMMIT")
            .await
            .map_err(|e| (classify(&e) == Class::Connection, Error::from(e))),
        None => Err((false, Error::bug("the query's connection is gone"))),
    };
    done.map_err(|(maybe, e)| {
        let shown = if output == "-" { "stdout" } else { output };
        let what = match maybe {
            true => "the answer to the query's COMMIT was lost: what it changed may or may not be committed",
            false => "the query's transaction did not commit, so what it changed is undone",
        };
        let hint = match (renamed, maybe) {
            (true, false) => format!("{what}, and {shown} was left as it was"),
            (true, true) => format!("{what}; {shown} was left as it was"),
            (false, _) => format!("{what} (its rows went to {shown} all the same)"),
        };
        output::NotCommitted {
            error: e.with_hint(hint),
            maybe,
        }
    })
}

/// The query without surrounding blanks and trailing semicolons (COPY
/// takes one statement in parentheses).
fn query_text(q: &str) -> &str {
    q.trim()
        .trim_end_matches(|c: char| c == ';' || c.is_whitespace())
}

fn force_quote_sql(f: &ForceQuote) -> Vec<String> {
    match f {
        ForceQuote::None => Vec::new(),
        ForceQuote::All => vec!["FORCE_QUOTE *".into()],
        ForceQuote::Columns(c) => vec![format!(
            "FORCE_QUOTE ({})",
            c.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ")
        )],
    }
}

fn format_name(f: CopyFormat) -> &'static str {
    match f {
        CopyFormat::Text => "text",
        CopyFormat::Csv => "csv",
        CopyFormat::Binary => "binary",
    }
}

fn kind_name(kind: &str, am: &str) -> String {
    match kind {
        "v" => "a view".into(),
        "p" => "a partitioned table (all partitions are exported)".into(),
        "f" => "a foreign table".into(),
        _ => format!("a table with access method {am:?}"),
    }
}

/// The export was stopped by [`Progress::request_stop`]: the partial
/// file is gone.
fn interrupted(output: &str) -> Error {
    let kept = if output == "-" {
        "stdout received part of the data".to_owned()
    } else {
        format!("nothing was written to {output} (the partial file was removed)")
    };
    Error::new(ErrorKind::Interrupted, "the export was interrupted").with_hint(format!(
        "stopped by Ctrl-C or SIGTERM; {kept}; run the export again"
    ))
}

/// A failed export's error, saying what happened to the output and what
/// to do. Classified by SQLSTATE and error kind, never by message text.
fn explain(e: Error, output: &str) -> Error {
    let kept = if output == "-" {
        "stdout may have received part of the data".to_owned()
    } else {
        format!("nothing was written to {output}")
    };
    let code = e.sqlstate().map(str::to_owned);
    // A terminated session (57P01-57P03) is ConnectionLost too: one
    // classifier, `error::classify`, decides both.
    let lost = e.kind() == ErrorKind::ConnectionLost;
    let (kind, message, hint) = if lost {
        (
            ErrorKind::ConnectionLost,
            format!(
                "the connection to the server was lost during the export: {}",
                e.message()
            ),
            format!(
                "the session was ended (server restart, pg_terminate_backend, network); {kept}; \
                 run the export again"
            ),
        )
    } else if code.as_deref() == Some("57014") {
        (
            e.kind(),
            format!("the server cancelled the export: {}", e.message()),
            format!(
                "statement_timeout (or pg_cancel_backend) stopped the COPY; {kept}; raise it for \
                 this export, e.g. PGOPTIONS='-c statement_timeout=0' or --db '... \
                 options=-c\\ statement_timeout=0'"
            ),
        )
    } else if matches!(code.as_deref(), Some("42P01")) {
        (
            e.kind(),
            e.message().to_owned(),
            format!(
                "the table was dropped or renamed, or --query names one that does not exist; \
                 check the name and the database given by --db; {kept}"
            ),
        )
    } else {
        let hint = match e.hint() {
            Some(h) => format!("{h}; {kept}"),
            None => kept,
        };
        (e.kind(), e.message().to_owned(), hint)
    };
    let mut out = Error::new(kind, message).with_hint(hint);
    if let Some(c) = code {
        out = out.with_sqlstate(c);
    }
    out.with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_ending_in_a_comment_keeps_its_parenthesis() {
        let c = CopyOptions::new(CopyFormat::Text);
        let sql = c.copy_to_sql("SELECT 1 -- the answer", &[]);
        assert_eq!(
            sql,
            "COPY (SELECT 1 -- the answer\n) TO STDOUT WITH (FORMAT text)"
        );
    }

    #[test]
    fn queries_lose_trailing_semicolons() {
        assert_eq!(query_text("  SELECT 1 ;; \n"), "SELECT 1");
    }

    #[test]
    fn copy_to_statement() {
        let mut c = CopyOptions::new(CopyFormat::Csv);
        c.header = Header::Skip;
        c.null = Some("NULL".into());
        let sql = c.copy_to_sql(
            "SELECT 1",
            &force_quote_sql(&ForceQuote::Columns(vec!["A".into()])),
        );
        assert_eq!(
            sql,
            "COPY (SELECT 1) TO STDOUT WITH (FORMAT csv, HEADER true, NULL E'NULL', \
             FORCE_QUOTE (\"A\"))"
        );
    }

    #[test]
    fn options_that_copy_to_refuses() {
        let q = || What::Query("SELECT 1".into());
        let mut o = ExportOptions::new(q(), "x", CopyFormat::Text);
        o.force_quote = ForceQuote::All;
        assert!(o.validate().is_err());
        let mut o = ExportOptions::new(q(), "x", CopyFormat::Csv);
        o.columns = Some(vec!["a".into()]);
        assert!(o.validate().is_err());
        let mut o = ExportOptions::new(q(), "x", CopyFormat::Binary);
        o.copy.header = Header::Skip;
        assert!(o.validate().is_err());
        assert!(
            ExportOptions::new(What::Query(" ; ".into()), "x", CopyFormat::Csv)
                .validate()
                .is_err()
        );
    }
}
