//! `--on-conflict` into a table with BEFORE row triggers on INSERT or
//! UPDATE: the merge goes in rounds, so that every row of the file meets
//! the triggers as one `INSERT .. ON CONFLICT` per row would have it.
//!
//! The usual merge keeps one row per key (the last, or the first with
//! `skip`), so a trigger saw one row where the file had several: a
//! counting trigger counted once, and when the kept row was the one a
//! trigger dropped (`RETURN NULL`), the earlier rows' update was lost
//! with it (outside testing). Round `r` merges the `r`th row of every key
//! in the chunk (one statement; within it, keys are distinct, so
//! `ON CONFLICT` may touch each row once), rounds in order, until a round
//! is empty: the rows of one key are applied in the file's order, each
//! through the triggers. Rows whose key has a NULL (which conflict with
//! nothing, unless the key is `NULLS NOT DISTINCT`) all go in round 1.
//! Rows of different keys meet the triggers by round, not in file order.

use tokio_postgres::Client;

use super::upsert::{
    merge_from, tables_sql, triggers_seen_sql, OnConflict, Unchanged, UniqueKey, ORD, STAGE,
};
use crate::catalog::Table;
use crate::error::Result;
use crate::ident::quote;

/// Whether the table (or a partition) has a BEFORE row trigger on INSERT
/// or UPDATE (tgtype: ROW 1 | BEFORE 2, INSERT 4, UPDATE 16).
pub(super) async fn needed(client: &Client, table: &Table, major: u32) -> Result<bool> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid IN ({}) AND {} \
                        AND tgtype & 3 = 3 AND tgtype & 20 <> 0)",
        tables_sql(major),
        triggers_seen_sql(major)
    );
    Ok(client.query_one(&sql, &[&table.oid]).await?.get(0))
}

/// The merge of round `$1` (int8, from 1): the `$1`th row of each key in
/// the stage, in file order; answers (inserted, merged, staged) as the
/// usual merge does, staged 0 once the rounds are over.
pub(super) fn rounds_sql(
    table: &Table,
    loaded: &[String],
    key: &UniqueKey,
    (mode, same): (OnConflict, Unchanged),
) -> String {
    let compared = key.compared_in("s").join(", ");
    let cols = loaded.join(", ");
    let round = match key.nulls_not_distinct {
        true => format!("row_number() OVER (PARTITION BY {compared} ORDER BY s.{ORD})"),
        false => {
            let any_null: Vec<String> = key
                .columns
                .iter()
                .map(|k| format!("s.{} IS NULL", quote(k)))
                .collect();
            format!(
                "CASE WHEN {} THEN 1 ELSE row_number() OVER (PARTITION BY {compared} \
                 ORDER BY s.{ORD}) END",
                any_null.join(" OR ")
            )
        }
    };
    let staged = format!(
        "SELECT {cols} FROM (SELECT s.*, {round} AS pgtide_round FROM pg_temp.{STAGE} AS s) r \
         WHERE pgtide_round = $1 ORDER BY {ORD}"
    );
    merge_from(table, loaded, key, (mode, same), &staged)
}
