//! `--rejects`: where a failed range's foreign key violations are.
//!
//! A foreign key is checked at the end of the statement, so its error
//! names no row of a COPY (nor of a multi-row INSERT, nor of an upsert's
//! merge) and isolation would bisect the range: a dozen statements and
//! more per bad row (measured: 1,000 such rows in 100,000 took 11 s,
//! where the clean rows alone load in a fraction of a second). One query
//! of the range's key values against the referenced tables says which
//! rows will fail: those are tried alone, in their place, and the rows
//! between them go in ranges (`reject/isolate.rs`). Only a hint: a row is
//! rejected only when the server refuses it alone, with the server's
//! reason; a row the query got wrong (a policy hid its parent from the
//! query, a trigger supplies it) costs a statement, never a row.
//!
//! Keys that reference the target table itself are left out: a row may
//! reference one later in the same range, which the query cannot see.

use copyfmt::fields::{split_record, Fields};
use copyfmt::scan::{self, Dialect, Eol};
use tokio_postgres::Client;

use super::setup::MethodSetup;
use crate::catalog::Column;
use crate::error::Result;

/// The query that finds a range's rows whose foreign keys have no
/// referenced row, and what it binds.
#[derive(Debug)]
pub struct References {
    /// `$k` is a text array of the `k`-th of `columns`' fields, one
    /// element per row (NULL for a NULL field); answers the 0-based rows.
    pub sql: String,
    /// The loaded columns (0-based, in file order) that are bound.
    pub columns: Vec<usize>,
}

/// The query for the foreign keys of table `oid` whose columns are all
/// in `loaded` (file order); `None` when there is none.
pub async fn resolve(client: &Client, oid: u32, loaded: &[&Column]) -> Result<Option<References>> {
    let rows = client
        .query(include_str!("../../sql/foreign_keys.sql"), &[&oid])
        .await?;
    let mut columns: Vec<usize> = Vec::new();
    let mut refused = Vec::new();
    for row in &rows {
        let (names, referenced, table): (Vec<String>, Vec<String>, String) =
            (row.get(0), row.get(1), row.get(2));
        let Some(at): Option<Vec<usize>> = names
            .iter()
            .map(|n| loaded.iter().position(|c| &c.name == n))
            .collect()
        else {
            continue; // a key column is not loaded: its value is unknown
        };
        let mut present = Vec::new();
        let mut equal = Vec::new();
        for (&c, referenced) in at.iter().zip(&referenced) {
            let k = match columns.iter().position(|&b| b == c) {
                Some(k) => k,
                None => {
                    columns.push(c);
                    columns.len() - 1
                }
            };
            present.push(format!("u.c{k} IS NOT NULL"));
            equal.push(format!("r.{referenced} = u.c{k}::{}", loaded[c].type_name));
        }
        refused.push(format!(
            "({} AND NOT EXISTS (SELECT FROM {table} r WHERE {}))",
            present.join(" AND "),
            equal.join(" AND ")
        ));
    }
    if refused.is_empty() {
        return Ok(None);
    }
    let arrays: Vec<String> = (1..=columns.len())
        .map(|k| format!("${k}::text[]"))
        .collect();
    let names: Vec<String> = (0..columns.len()).map(|k| format!("c{k}")).collect();
    let sql = format!(
        "SELECT u.pgtide_i - 1 FROM unnest({}) WITH ORDINALITY AS u({}, pgtide_i) WHERE {} \
         ORDER BY 1",
        arrays.join(", "),
        names.join(", "),
        refused.join(" OR ")
    );
    Ok(Some(References { sql, columns }))
}

impl References {
    /// The bound arrays for the records of `data` (a batch of records read
    /// in the chunk's `eol` style), read as COPY reads them; `None` when
    /// the fields cannot be told (binary input, input that is not UTF-8).
    /// A field that is not valid text, or a record that does not split,
    /// binds NULL: that row is not found here, only as isolation finds it.
    pub fn params(
        &self,
        (dialect, setup): (&Dialect, &MethodSetup),
        eol: Eol,
        data: &[u8],
    ) -> Option<Vec<Vec<Option<String>>>> {
        if dialect.format == scan::Format::Binary
            || setup
                .encoding
                .as_deref()
                .is_some_and(|e| !super::setup::is_utf8_name(e))
        {
            return None;
        }
        let mut out: Vec<Vec<Option<String>>> = vec![Vec::new(); self.columns.len()];
        let mut fields = Fields::new();
        for span in scan::records_with(dialect, eol, data) {
            let rec = &data[span.start..span.end];
            let split = split_record(dialect, &setup.nulls, rec, &mut fields).is_ok()
                && fields.len() == setup.columns.len();
            for (k, &c) in self.columns.iter().enumerate() {
                let text = split
                    .then(|| fields.get(c))
                    .flatten()
                    .filter(|v| !v.contains(&0))
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .map(str::to_owned);
                out[k].push(text);
            }
        }
        Some(out)
    }
}
