//! The `CREATE TABLE` of `--create`: sampled types, `--type` overrides,
//! checked on the server before anything is written.
//!
//! The table is created right before the first chunk is sent, once every
//! other check has passed (`load::pool`, as `--truncate`), in its own
//! committed statement: the workers' connections load chunks in parallel
//! and each must see the table, which a table created inside the first
//! chunk's transaction would hide from them until it commits. Until then
//! the statement is run only inside a transaction that is rolled back, to
//! check it (type names given with `--type`) and to read the table's shape
//! for the load, so a wrong `--type` fails with nothing created.

use tokio_postgres::Client;

use super::names::{self, ColumnName};
use super::sample::{self, Sample, SampleSpec};
use super::{ColumnStats, SqlType};
use crate::catalog::{self, Table};
use crate::copyopts::CopyFormat;
use crate::error::{Error, Result};
use crate::ident::QualifiedName;

/// `--create` and its options.
#[derive(Debug, Clone)]
pub struct Create {
    /// `--create=if-not-exists`: an existing table is loaded as it is.
    pub if_not_exists: bool,
    /// `--type col=TYPE`: the column's type, instead of the inferred one.
    pub types: Vec<(String, String)>,
    /// `--sample-rows`: records read from the head of each input.
    pub sample_rows: usize,
}

impl Default for Create {
    fn default() -> Self {
        Create {
            if_not_exists: false,
            types: Vec::new(),
            sample_rows: sample::DEFAULT_SAMPLE_ROWS,
        }
    }
}

/// One column of the planned table.
#[derive(Debug, Clone)]
pub struct PlannedColumn {
    /// Its name, and the header field it came from.
    pub name: ColumnName,
    /// The type as written in the statement.
    pub sql_type: String,
    /// What the sample said.
    pub inferred: SqlType,
    /// `--type` gave the type.
    pub overridden: bool,
    /// The sampled values.
    pub stats: ColumnStats,
}

/// The table `--create` makes.
#[derive(Debug, Clone)]
pub struct CreatePlan {
    /// The table as given.
    pub table: QualifiedName,
    /// The statement run (no comments).
    pub sql: String,
    /// The columns, in file order (empty when the table exists).
    pub columns: Vec<PlannedColumn>,
    /// Records sampled.
    pub rows_sampled: u64,
    /// Records ignored because their field count differs.
    pub misfits: u64,
    /// The sample is the whole input.
    pub complete: bool,
    /// `--create=if-not-exists` and the table exists: nothing is created.
    pub exists: bool,
}

impl CreatePlan {
    /// The statement with a comment per column saying where its name and
    /// type came from (for `--explain`).
    pub fn explain(&self) -> String {
        if self.exists {
            return format!(
                "-- {} exists: nothing to create (--create=if-not-exists)\n",
                self.table
            );
        }
        let mut out = format!(
            "-- {} rows sampled{}{}\nCREATE TABLE {}{} (\n",
            self.rows_sampled,
            if self.complete {
                " (the whole input)"
            } else {
                ""
            },
            if self.misfits > 0 {
                format!("; {} rows with another field count ignored", self.misfits)
            } else {
                String::new()
            },
            if_not_exists(self),
            table_sql(&self.table)
        );
        let width = self
            .columns
            .iter()
            .map(|c| names::sql(&c.name.name).chars().count() + c.sql_type.len() + 1)
            .max()
            .unwrap_or(0);
        for (i, c) in self.columns.iter().enumerate() {
            let comma = if i + 1 < self.columns.len() { "," } else { "" };
            let def = format!("{} {}{comma}", names::sql(&c.name.name), c.sql_type);
            let why = column_comment(c, self.complete);
            out.push_str(&format!("    {def:<w$}  -- {why}\n", w = width + 1));
        }
        out.push_str(");\n");
        out
    }

    /// Lines for the summary: columns renamed from the header.
    pub fn renames(&self) -> Vec<String> {
        if !self.columns.is_empty() && self.columns.iter().all(|c| c.name.source.is_none()) {
            return vec![format!(
                "no header: the columns are named c1..c{}",
                self.columns.len()
            )];
        }
        self.columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name.changed())
            .map(|(i, c)| match &c.name.source {
                Some(s) => format!(
                    "column {}: header {s:?} -> {}",
                    i + 1,
                    names::sql(&c.name.name)
                ),
                None => format!("column {}: empty header field -> {}", i + 1, c.name.name),
            })
            .collect()
    }

    /// The type chosen for `column` (as the server names it in errors).
    pub fn type_of(&self, column: &str) -> Option<&str> {
        self.columns
            .iter()
            .find(|c| c.name.name == column)
            .map(|c| c.sql_type.as_str())
    }
}

fn if_not_exists(plan: &CreatePlan) -> &'static str {
    if plan.sql.starts_with("CREATE TABLE IF NOT EXISTS") {
        "IF NOT EXISTS "
    } else {
        ""
    }
}

fn column_comment(c: &PlannedColumn, complete: bool) -> String {
    let s = &c.stats;
    let mut why = if c.overridden {
        format!("--type (inferred: {})", c.inferred)
    } else {
        format!("{} values, {} NULL", s.values, s.nulls)
    };
    if !c.overridden && c.inferred == SqlType::Text {
        if let Some(v) = &s.first_text {
            why.push_str(&format!("; text because of {v:?}"));
        }
    }
    if let (Some(t), Some(n)) = (s.without_nullish(complete), &s.nullish) {
        why.push_str(&format!("; {t} if {n:?} meant NULL (--null)"));
    }
    if let Some(src) = c.name.source.as_deref().filter(|_| c.name.changed()) {
        why.push_str(&format!("; header {src:?}"));
    }
    why
}

/// `schema.name` with each part quoted where needed.
fn table_sql(t: &QualifiedName) -> String {
    match &t.schema {
        Some(s) => format!("{}.{}", names::sql(s), names::sql(&t.name)),
        None => names::sql(&t.name),
    }
}

/// The plan from a sample (pure): `--type` overrides by column name (or
/// the header field it came from).
pub fn build(
    table: &QualifiedName,
    sample: &Sample,
    create: &Create,
    if_not: bool,
) -> Result<CreatePlan> {
    let mut columns: Vec<PlannedColumn> = sample
        .names
        .iter()
        .zip(&sample.stats)
        .map(|(name, stats)| {
            let inferred = stats.choose(sample.complete);
            PlannedColumn {
                name: name.clone(),
                sql_type: inferred.to_string(),
                inferred,
                overridden: false,
                stats: stats.clone(),
            }
        })
        .collect();
    for (col, ty) in &create.types {
        let found = columns
            .iter()
            .position(|c| &c.name.name == col)
            .or_else(|| {
                columns
                    .iter()
                    .position(|c| c.name.source.as_deref() == Some(col.as_str()))
            });
        let Some(i) = found else {
            return Err(
                Error::config(format!("--type {col}={ty}: no column {col:?}")).with_hint(format!(
                    "the columns are: {}",
                    columns
                        .iter()
                        .map(|c| c.name.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            );
        };
        if ty.trim().is_empty() || ty.contains(';') {
            return Err(Error::config(format!("--type {col}={ty}: not a type name"))
                .with_hint("e.g. --type id=text or --type 'price=numeric(12,2)'"));
        }
        columns[i].sql_type = ty.trim().to_string();
        columns[i].overridden = true;
    }
    let body = columns
        .iter()
        .map(|c| format!("{} {}", names::sql(&c.name.name), c.sql_type))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "CREATE TABLE {}{} ({body})",
        if if_not { "IF NOT EXISTS " } else { "" },
        table_sql(table)
    );
    Ok(CreatePlan {
        table: table.clone(),
        sql,
        columns,
        rows_sampled: sample.rows,
        misfits: sample.misfits,
        complete: sample.complete,
        exists: false,
    })
}

/// Samples the inputs and plans the table, or says that it exists.
pub async fn plan(
    client: &Client,
    table: &QualifiedName,
    inputs: &[String],
    format: CopyFormat,
    spec: SampleSpec,
    create: &Create,
) -> Result<CreatePlan> {
    if format == CopyFormat::Binary {
        return Err(
            Error::config("--create reads CSV or text input, not binary COPY files").with_hint(
                "binary COPY files carry no column names or types: create the table first",
            ),
        );
    }
    if inputs.iter().any(|i| crate::source::read_once(i)) {
        return Err(Error::config(
            "--create samples the input before loading it, and stdin or a pipe cannot be \
             read twice",
        )
        .with_hint(
            "save the data to a file first (gzip/zstd are fine), or create the table yourself",
        ));
    }
    if create.sample_rows == 0 {
        return Err(Error::config("--sample-rows must be at least 1"));
    }
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table.quoted()])
        .await?
        .get(0);
    if exists {
        if !create.if_not_exists {
            return Err(Error::config(format!("--create: table {table} already exists"))
                .with_hint(
                    "use --create=if-not-exists to load into it as it is, drop it first, or leave out --create",
                ));
        }
        return Ok(CreatePlan {
            table: table.clone(),
            sql: String::new(),
            columns: Vec::new(),
            rows_sampled: 0,
            misfits: 0,
            complete: false,
            exists: true,
        });
    }
    let table = &in_current_schema(client, table).await?;
    let inputs = inputs.to_vec();
    let sample = tokio::task::spawn_blocking(move || sample::sample(&inputs, &spec))
        .await
        .map_err(|e| Error::bug(format!("the sampling task failed: {e}")))??;
    if sample.names.is_empty() {
        return Err(Error::input("--create: the input has no columns"));
    }
    build(table, &sample, create, create.if_not_exists)
}

/// `table` in the schema an unqualified CREATE TABLE would use now
/// (`current_schema()`), named so: the load creates it later, after
/// `--resume`'s ledger may have created schema `pgtide`, which a role
/// named pgtide finds first on its search_path (`"$user"`; outside
/// testing, the table went there, beside the ledger).
async fn in_current_schema(client: &Client, table: &QualifiedName) -> Result<QualifiedName> {
    if table.schema.is_some() {
        return Ok(table.clone());
    }
    let schema: Option<String> = client
        .query_one("SELECT pg_catalog.current_schema()::text", &[])
        .await?
        .get(0);
    let schema = schema.ok_or_else(|| {
        Error::config(format!(
            "--create: no schema to create {table} in (the search_path names none that exists)"
        ))
        .with_hint("qualify the table (--table schema.name), or set search_path")
    })?;
    Ok(QualifiedName {
        schema: Some(schema),
        name: table.name.clone(),
    })
}

/// Runs the plan's statement in a transaction that is rolled back: the
/// server checks it, and says what the table will look like.
pub async fn try_create(
    client: &Client,
    plan: &CreatePlan,
    inserts: bool,
) -> Result<(Table, bool)> {
    client.batch_execute("BEGIN").await?;
    let result = async {
        client.execute(plan.sql.as_str(), &[]).await.map_err(|e| {
            Error::from(e).with_hint(format!(
                "the server refused the table --create planned: {}; check the --type names",
                plan.sql
            ))
        })?;
        let table = Table::resolve(client, &plan.table).await?;
        let skip = catalog::may_skip_rows(client, table.oid, inserts).await?;
        Ok::<_, Error>((table, skip))
    }
    .await;
    client.batch_execute("ROLLBACK").await?;
    result
}

/// The hint for a row the created table refused: which column, its
/// inferred type, and the ways out.
///
/// `rolled_back`: the table was created in the load's one transaction
/// (`--single-transaction`), which took it away again: nothing to drop.
pub fn failure_hint(plan: &CreatePlan, column: Option<&str>, rolled_back: bool) -> String {
    let table = table_sql(&plan.table);
    let planned = column.and_then(|c| plan.columns.iter().find(|p| p.name.name == c));
    let (col, ty, given) = match planned {
        Some(p) => (names::sql(&p.name.name), p.sql_type.clone(), p.overridden),
        None => ("COLUMN".to_string(), "its type".to_string(), false),
    };
    let first = match rolled_back {
        true => "the load was rolled back, and the table with it; run again".to_owned(),
        false => format!("DROP TABLE {table}, then run again"),
    };
    let why = match given {
        true => format!("this value does not fit {col} ({ty}, given by --type)"),
        false => format!(
            "{table} was created by --create from {} sampled rows, and this value does not \
             fit {col} ({ty})",
            plan.rows_sampled
        ),
    };
    let fix = match given {
        true => format!("with another --type {col}=TYPE (e.g. text)"),
        false => format!("with --type {col}=TYPE (e.g. text) or a larger --sample-rows"),
    };
    format!("{why}: {first} {fix}; or add --rejects FILE to set such rows aside")
}
