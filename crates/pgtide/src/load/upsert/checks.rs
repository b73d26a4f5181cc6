//! `--on-conflict --rejects`: where a failed chunk's CHECK violations are.
//!
//! A merge (`INSERT .. SELECT .. ON CONFLICT`) that a CHECK constraint
//! refuses names no row, so isolation bisects the chunk, many statements
//! per bad row. The table's CHECK constraints on loaded columns, asked of
//! the staged rows in one query, say which rows will fail: those go alone
//! and the rest in ranges, as the client's screen has it
//! (`load/screen.rs`). Only a hint: each such row is rejected only if the
//! real merge refuses it alone (a BEFORE trigger may change its values).

use tokio_postgres::Client;

use super::{ORD, STAGE};
use crate::catalog::Table;
use crate::error::Result;

/// The query that answers the 0-based positions (in COPY order) of the
/// staged rows that a CHECK constraint of `table` on `loaded` columns
/// refuses; `None` when there is no such constraint.
pub async fn suspects_sql(
    client: &Client,
    table: &Table,
    loaded: &[String],
) -> Result<Option<String>> {
    let rows = client
        .query(
            include_str!("../../../sql/upsert_checks.sql"),
            &[&table.oid, &loaded],
        )
        .await?;
    let refused: Vec<String> = rows
        .iter()
        .map(|r| format!("({}) IS FALSE", r.get::<_, String>(0)))
        .collect();
    if refused.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "SELECT s.{ORD} - (SELECT min({ORD}) FROM pg_temp.{STAGE}) \
         FROM pg_temp.{STAGE} s WHERE {} ORDER BY 1",
        refused.join(" OR ")
    )))
}
