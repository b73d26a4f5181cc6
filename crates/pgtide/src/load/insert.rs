//! The INSERT methods: `pipeline`, `values` and `insert`.
//!
//! Each record is split into fields exactly as COPY reads them
//! (`copyfmt::fields`), and each field is bound as a parameter in *text*
//! format, so the server runs the column type's input function on the same
//! text COPY would have given it. The statement is
//! `INSERT INTO t (cols) OVERRIDING SYSTEM VALUE VALUES ($1, ..)` without
//! casts: the server types each parameter from its target column, then
//! applies the column's typmod as an assignment, as COPY does. (A cast such
//! as `$1::varchar(5)` would be an explicit one, which truncates silently
//! where COPY fails.) `OVERRIDING SYSTEM VALUE` because COPY writes
//! identity columns too. One type reads its text by the typmod itself:
//! in an `interval minute` column COPY reads `5` as five minutes, where
//! a parameter of plain `interval` is five seconds (truncated to zero
//! minutes by the column). Such a column's parameter goes through
//! `interval_in` with the column's typmod, as COPY calls it
//! (`param`); an array of them cannot, and is refused (`check`).
//!
//! * `insert`: one statement per row, each awaited: a round trip per row.
//! * `pipeline`: the same statements, a [`PIPELINE_WINDOW`] in flight on the
//!   one connection (see [`super::pipeline`]).
//! * `values`: `VALUES (..),(..)` of [`values_rows`] rows per statement,
//!   a few statements in flight.
//!
//! A record the splitter refuses (or with the wrong number of fields) is
//! sent by text COPY of its own bytes, in its place in the pipeline, so the
//! server writes its real error. Binary input is bound in binary format.

use std::collections::HashMap;
use std::fmt::Write;

use bytes::{Bytes, BytesMut};
use copyfmt::fields::{split_record, Fields};
use copyfmt::scan::{self, RecordSpan};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{to_sql_checked, Format, IsNull, ToSql, Type};
use tokio_postgres::{Client, Statement};

use super::copy::copy_bytes;
use super::pipeline::{drive, Cost, Window, PIPELINE_WINDOW};
use super::spec::{LoaderSpec, Method, MethodSetup};
use crate::batch::{Batch, BatchError};
use crate::copyopts::CopyFormat;
use crate::error::{Error, Result};

/// PostgreSQL's limit on parameters per statement (an int16 count).
pub const MAX_PARAMS: usize = 65_535;

/// Rows per `values` statement unless `--batch-rows` says otherwise.
pub const DEFAULT_VALUES_ROWS: usize = 1000;

/// Prepared statement shapes kept per connection.
const MAX_SHAPES: usize = 8;

/// One field bound as a parameter, in text format (or binary, for binary
/// input), whatever type the server gave the parameter.
#[derive(Debug, Clone)]
pub struct TextParam {
    value: Option<Bytes>,
    binary: bool,
}

impl ToSql for TextParam {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match &self.value {
            None => Ok(IsNull::Yes),
            Some(v) => {
                out.extend_from_slice(v);
                Ok(IsNull::No)
            }
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        if self.binary {
            Format::Binary
        } else {
            Format::Text
        }
    }

    to_sql_checked!();
}

/// Prepared statements of one connection, by rows per statement (1 is the
/// single-row statement, or `--sql`).
#[derive(Default)]
pub struct Statements {
    by_rows: HashMap<usize, Statement>,
}

impl Statements {
    pub(super) async fn get(
        &mut self,
        client: &Client,
        setup: &MethodSetup,
        rows: usize,
    ) -> std::result::Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.by_rows.get(&rows) {
            return Ok(s.clone());
        }
        let s = client.prepare(&statement_sql(setup, rows)).await?;
        if self.by_rows.len() >= MAX_SHAPES {
            self.by_rows.clear();
        }
        self.by_rows.insert(rows, s.clone());
        Ok(s)
    }
}

/// The statement for `rows` rows: `--sql` for one row when given, else
/// `INSERT INTO t (cols) OVERRIDING SYSTEM VALUE VALUES ($1,..),(..)`.
pub fn statement_sql(setup: &MethodSetup, rows: usize) -> String {
    if let (Some(sql), 1) = (&setup.sql, rows) {
        return sql.clone();
    }
    let n = setup.columns.len();
    let mut sql = format!(
        "INSERT INTO {} ({}) OVERRIDING SYSTEM VALUE VALUES ",
        setup.table,
        setup.column_list()
    );
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ",(" });
        for (c, column) in setup.columns.iter().enumerate() {
            let sep = if c == 0 { "" } else { "," };
            let _ = write!(sql, "{sep}{}", param(setup, column, r * n + c + 1));
        }
        sql.push(')');
    }
    sql
}

/// `interval` and `interval[]`, whose input function reads a bare number
/// in the unit of the column's typmod.
const INTERVAL: u32 = 1186;
const INTERVAL_ARRAY: u32 = 1187;

/// Parameter `$k` for `column`: as it is, or, for a text field of an
/// interval column with a typmod, read by `interval_in` with that typmod
/// (the typmod is the catalog's integer, not user text).
fn param(setup: &MethodSetup, column: &crate::catalog::Column, k: usize) -> String {
    match column.type_oid == INTERVAL && column.typmod != -1 && setup.format != CopyFormat::Binary {
        true => format!(
            "pg_catalog.interval_in(${k}::pg_catalog.cstring, 0, {})",
            column.typmod
        ),
        false => format!("${k}"),
    }
}

/// Rows per `values` statement: `--batch-rows`, else 1000, within the
/// parameter limit.
pub fn values_rows(setup: &MethodSetup) -> usize {
    let max = (MAX_PARAMS / setup.columns.len().max(1)).max(1);
    setup
        .batch_rows
        .unwrap_or(DEFAULT_VALUES_ROWS)
        .clamp(1, max)
}

/// Checks the options before any row is read: columns to bind, `--sql`'s
/// parameters, `--batch-rows` within the parameter limit.
pub(super) async fn check(client: &Client, method: Method, setup: &MethodSetup) -> Result<()> {
    let n = setup.columns.len();
    if n == 0 {
        return Err(Error::config("no columns to insert"));
    }
    let restricted = setup.columns.iter().find(|c| {
        c.type_oid == INTERVAL_ARRAY && c.typmod != -1 && setup.format != CopyFormat::Binary
    });
    if let (Some(c), None) = (restricted, &setup.sql) {
        return Err(Error::config(format!(
            "column {:?} is {}: its elements are read in the unit of its typmod, which \
             an INSERT parameter cannot be given",
            c.name, c.type_name
        ))
        .with_hint("load this table with --method copy or binary"));
    }
    if let Some(sql) = &setup.sql {
        let stmt = client.prepare(sql).await.map_err(|e| {
            Error::from(e).with_hint(
                "--sql is prepared with the file's columns bound as $1..$n; add a cast \
                 ($1::int) where the server cannot tell a parameter's type",
            )
        })?;
        if stmt.params().len() != n {
            return Err(Error::config(format!(
                "--sql has {} parameters, the input has {n} columns",
                stmt.params().len()
            ))
            .with_hint("use $1..$n for the columns in file order (see --columns)"));
        }
    }
    if method == Method::Values {
        let max = MAX_PARAMS / n;
        match setup.batch_rows {
            Some(0) => {
                return Err(
                    Error::config("--batch-rows must be at least 1").with_hint(format!(
                        "leave it out for {DEFAULT_VALUES_ROWS} rows per statement"
                    )),
                )
            }
            Some(r) if r > max => {
                return Err(Error::config(format!(
                    "--batch-rows {r} x {n} columns is over PostgreSQL's {MAX_PARAMS} parameters \
                     per statement"
                ))
                .with_hint(format!("use at most {max}")))
            }
            _ => {}
        }
    }
    Ok(())
}

/// `--method insert`: each statement awaited before the next.
const ONE_AT_A_TIME: Window = Window {
    requests: 1,
    bytes: usize::MAX,
};

/// Loads a batch with `spec.method` (one of the INSERT methods).
pub(super) async fn load(
    client: &Client,
    spec: &LoaderSpec,
    statements: &mut Statements,
    batch: &Batch,
) -> std::result::Result<u64, BatchError> {
    match spec.method {
        Method::Insert => rows(client, spec, statements, batch, ONE_AT_A_TIME, usize::MAX).await,
        _ => rows(client, spec, statements, batch, PIPELINE_WINDOW, usize::MAX).await,
    }
}

/// A record, ready to send.
pub(super) enum Row {
    /// Its fields, one parameter each.
    Params(Vec<TextParam>),
    /// A record the splitter refused: its bytes, for text COPY.
    Bad(Bytes),
}

pub(super) fn parse(
    spec: &LoaderSpec,
    data: &Bytes,
    span: &RecordSpan,
    fields: &mut Fields,
) -> Row {
    let setup = &spec.setup;
    let ok = split_record(
        &spec.dialect,
        &setup.nulls,
        &data[span.start..span.end],
        fields,
    )
    .is_ok();
    if !ok || fields.len() != setup.columns.len() {
        return Row::Bad(data.slice(span.start..span.end));
    }
    let binary = setup.format == CopyFormat::Binary;
    let mut buf = BytesMut::with_capacity(fields.iter().map(|f| f.map_or(0, <[u8]>::len)).sum());
    let mut ranges = Vec::with_capacity(fields.len());
    for f in fields.iter() {
        ranges.push(f.map(|v| {
            let start = buf.len();
            buf.extend_from_slice(v);
            start..buf.len()
        }));
    }
    let buf = buf.freeze();
    Row::Params(
        ranges
            .into_iter()
            .map(|r| TextParam {
                value: r.map(|r| buf.slice(r)),
                binary,
            })
            .collect(),
    )
}

/// A refused record by text COPY: the server says what is wrong with it.
pub(super) async fn copy_one(
    client: &Client,
    spec: &LoaderSpec,
    record: Bytes,
) -> std::result::Result<u64, tokio_postgres::Error> {
    copy_bytes(
        client,
        &spec.copy_sql,
        &spec.framing,
        &record,
        spec.message_bytes,
    )
    .await
}

/// What a row weighs in the pipeline: its parameters' bytes (and their
/// length words). A refused record goes by its own COPY, alone (see
/// [`super::pipeline`]).
pub(super) fn row_cost(row: &Row) -> Cost {
    match row {
        Row::Params(p) => Cost {
            bytes: params_bytes(p),
            alone: false,
        },
        Row::Bad(record) => Cost {
            bytes: record.len(),
            alone: true,
        },
    }
}

/// Bytes of bound parameters as sent: each value and its length word.
pub(super) fn params_bytes(params: &[TextParam]) -> usize {
    params
        .iter()
        .map(|p| 4 + p.value.as_ref().map_or(0, Bytes::len))
        .sum()
}

fn aborted(e: &BatchError) -> bool {
    e.error.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION)
}

/// One statement per record, `window` in flight, over the first `take`
/// records of the batch.
pub(super) async fn rows(
    client: &Client,
    spec: &LoaderSpec,
    statements: &mut Statements,
    batch: &Batch,
    window: Window,
    take: usize,
) -> std::result::Result<u64, BatchError> {
    let stmt = statements
        .get(client, &spec.setup, 1)
        .await
        .map_err(BatchError::plain)?;
    let stmt = &stmt;
    // `--sql` may affect no row (ON CONFLICT DO NOTHING) or several: a
    // record run is a record loaded.
    let user = spec.setup.sql.is_some();
    let data = &batch.data;
    let mut fields = Fields::new();
    let jobs = scan::records(&spec.dialect, data)
        .take(take)
        .enumerate()
        .map(|(i, span)| (i as u64, parse(spec, data, &span, &mut fields)));
    let run = |(i, row): (u64, Row)| async move {
        let result = match row {
            Row::Params(p) => client
                .execute_raw(stmt, p)
                .await
                .map(|n| if user { 1 } else { n }),
            Row::Bad(record) => copy_one(client, spec, record).await,
        };
        result.map_err(|e| BatchError::at(i, e))
    };
    drive(jobs, window, |(_, row)| row_cost(row), run, aborted).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Column;

    fn setup(cols: usize) -> MethodSetup {
        let col = |i: usize| Column {
            name: format!("c{i}"),
            type_oid: 23,
            typmod: -1,
            not_null: false,
            has_default: false,
            generated: false,
            type_name: "integer".into(),
        };
        MethodSetup {
            table: "\"public\".\"t\"".into(),
            columns: (0..cols).map(col).collect(),
            ..MethodSetup::default()
        }
    }

    #[test]
    fn statements_number_parameters_row_by_row() {
        assert_eq!(
            statement_sql(&setup(2), 2),
            "INSERT INTO \"public\".\"t\" (\"c0\", \"c1\") OVERRIDING SYSTEM VALUE \
             VALUES ($1,$2),($3,$4)"
        );
        let mut s = setup(1);
        s.sql = Some("INSERT INTO t VALUES ($1) ON CONFLICT DO NOTHING".into());
        assert_eq!(statement_sql(&s, 1), s.sql.clone().unwrap());
    }

    #[test]
    fn values_rows_stay_within_the_parameter_limit() {
        assert_eq!(values_rows(&setup(3)), 1000);
        assert_eq!(values_rows(&setup(100)), 655);
        assert_eq!(values_rows(&setup(1600)), 40);
        let mut s = setup(10);
        s.batch_rows = Some(1_000_000);
        assert_eq!(values_rows(&s), 6553);
        s.batch_rows = Some(7);
        assert_eq!(values_rows(&s), 7);
    }
}
