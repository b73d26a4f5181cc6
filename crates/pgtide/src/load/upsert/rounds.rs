//! `--on-conflict` into a table with BEFORE row triggers on INSERT or
//! UPDATE (or, with `update`, foreign keys): the merge goes in rounds, so
//! that every row of the file meets the triggers (and the foreign key
//! checks) as one `INSERT .. ON CONFLICT` per row would have it.
//!
//! The usual merge keeps one row per key (the last, or the first with
//! `skip`), so a trigger saw one row where the file had several: a
//! counting trigger counted once, and when the kept row was the one a
//! trigger dropped (`RETURN NULL`), the earlier rows' update was lost
//! with it (outside testing). Each staged row's round is numbered once
//! (one sort); round `r` merges the `r`th row of every key in the chunk
//! (one statement over an index; within it, keys are distinct, so
//! `ON CONFLICT` may touch each row once), rounds in order: the rows of
//! one key are applied in the file's order, each through the triggers. Rows whose key has a NULL (which conflict with
//! nothing, unless the key is `NULLS NOT DISTINCT`) all go in round 1.
//! Rows of different keys meet the triggers by round, not in file order.
//! A trigger may change a row's key, and fold two rows of one round into
//! one key, which `ON CONFLICT DO UPDATE` refuses (21000, "cannot affect
//! row a second time"): that round is merged again row by row, in file
//! order ([`Rounds::one_sql`]), as one statement per row would have it
//! (outside testing: such a load stopped unless chunks held one row).

use tokio_postgres::Client;

use super::{
    merge_from, tables_sql, triggers_seen_sql, OnConflict, Unchanged, UniqueKey, ORD, STAGE,
};
use crate::catalog::Table;
use crate::error::Result;
use crate::ident::quote;

/// The staging table's column for a row's round.
const ROUND: &str = "pgtide_round";

/// Whether the table (or a partition) has a BEFORE row trigger on INSERT
/// or UPDATE (tgtype: ROW 1 | BEFORE 2, INSERT 4, UPDATE 16); or, with
/// `update`, a foreign key: a row that loses to a later row of its key
/// is never written by the usual merge, so its foreign key would go
/// unchecked, where one `INSERT .. ON CONFLICT` per row checks it (with
/// `skip`, a losing row conflicts and is written by neither).
/// `Some(folds)` when needed: `folds`, a BEFORE INSERT trigger may
/// change a row's key (and fold two rows of a round into one key).
pub(super) async fn needed(
    client: &Client,
    table: &Table,
    major: u32,
    mode: OnConflict,
) -> Result<Option<bool>> {
    let tables = tables_sql(major);
    let trigger = |kinds: u8| {
        format!(
            "EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid IN ({tables}) AND {} \
             AND tgenabled <> 'D' AND tgtype & 3 = 3 AND tgtype & {kinds} <> 0)",
            triggers_seen_sql(major)
        )
    };
    let sql = format!(
        "SELECT {} OR ($2 AND EXISTS (SELECT 1 FROM pg_constraint \
                   WHERE conrelid IN ({tables}) AND contype = 'f')), {}",
        trigger(20),
        trigger(4)
    );
    let update = mode == OnConflict::Update;
    let row = client.query_one(&sql, &[&table.oid, &update]).await?;
    Ok(row.get::<_, bool>(0).then(|| row.get(1)))
}

/// The statements of a merge in rounds.
#[derive(Debug, Clone)]
pub struct Rounds {
    /// Added to the staging table's creation: the column that holds each
    /// row's round, indexed.
    pub column_sql: String,
    /// Numbers the staged rows' rounds (one sort); answers the last round.
    pub number_sql: String,
    /// Merges round `$1` (int8, from 1), in file order; answers
    /// (inserted, merged, staged) as the usual merge does.
    pub merge_sql: String,
    /// A BEFORE INSERT trigger may fold rows into one key: each round
    /// under a savepoint, to merge it again row by row.
    pub folds: bool,
    /// Indexes the staged rows' positions, for the fallback (made when
    /// first needed: it is rare).
    pub index_sql: String,
    /// The positions of round `$1`'s rows, in file order.
    pub rows_sql: String,
    /// Merges the one staged row at position `$1`, as `merge_sql` does.
    pub one_sql: String,
}

impl Rounds {
    /// The rounds of a merge into `table` on `key`.
    pub(super) fn new(
        table: &Table,
        loaded: &[String],
        key: &UniqueKey,
        (mode, same): (OnConflict, Unchanged),
        folds: bool,
    ) -> Rounds {
        let compared = key.compared_in("s").join(", ");
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
            "SELECT {} FROM pg_temp.{STAGE} WHERE {ROUND} = $1 ORDER BY {ORD}",
            loaded.join(", ")
        );
        let one = format!(
            "SELECT {} FROM pg_temp.{STAGE} WHERE {ORD} = $1",
            loaded.join(", ")
        );
        Rounds {
            column_sql: format!(
                "ALTER TABLE pg_temp.{STAGE} ADD COLUMN {ROUND} int8; \
                 CREATE INDEX ON pg_temp.{STAGE} ({ROUND}); "
            ),
            number_sql: format!(
                "WITH r AS (SELECT s.{ORD} AS o, {round} AS n FROM pg_temp.{STAGE} AS s), \
                 u AS (UPDATE pg_temp.{STAGE} AS s SET {ROUND} = r.n FROM r \
                       WHERE s.{ORD} = r.o RETURNING s.{ROUND}) \
                 SELECT coalesce(max({ROUND}), 0)::int8 FROM u"
            ),
            merge_sql: merge_from(table, loaded, key, (mode, same), &staged),
            folds,
            index_sql: format!(
                "CREATE INDEX IF NOT EXISTS pgtide_stage_ord ON pg_temp.{STAGE} ({ORD})"
            ),
            rows_sql: format!(
                "SELECT {ORD} FROM pg_temp.{STAGE} WHERE {ROUND} = $1 ORDER BY {ORD}"
            ),
            one_sql: merge_from(table, loaded, key, (mode, same), &one),
        }
    }
}
