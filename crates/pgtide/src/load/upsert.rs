//! `--on-conflict update|skip`: merging a file into a table that already
//! has rows.
//!
//! Each batch is COPYed (text, or binary with `--method binary`) into a
//! temporary staging table of the session, [`STAGE`]: the loaded columns
//! with the target's types and collations (`CREATE TEMP TABLE .. AS SELECT
//! .. WITH NO DATA`), plus the row's position in the batch ([`ORD`], an
//! identity). It is then merged into the target with one `INSERT .. SELECT
//! .. ON CONFLICT (key) DO UPDATE | DO NOTHING` in the batch's transaction.
//! The stage has no constraints: a type error is found by the COPY, with
//! its line; NOT NULL, CHECK, foreign keys and other unique indexes by the
//! merge, which names no line, so isolation (`--rejects`) bisects to the row.
//!
//! Duplicate keys in the input: the **last** row wins for `update`, the
//! **first** for `skip`, whatever `--workers` and `--chunk-bytes` are.
//! Inside a batch, `DISTINCT ON (key) .. ORDER BY key, position` keeps that
//! row (one `INSERT .. ON CONFLICT DO UPDATE` may not touch a row twice);
//! across chunks, chunks merge in input order (`load/order.rs`). Rows whose
//! key has a NULL never conflict (unless the index is `NULLS NOT
//! DISTINCT`), so they are never folded together: each is inserted.
//!
//! Counts: every row that reached the merge is loaded; the summary splits
//! them into inserted, updated and unchanged (a row that met an existing
//! key with `skip`, or with `update` a row holding its values already (see
//! [`Unchanged`]), or was superseded by a later row with the same key in
//! the file, or that a BEFORE trigger dropped), from `RETURNING (xmax = 0)`:
//! 0 for a row version that this statement inserted, the updater's id for
//! one it updated. A partitioned target's `RETURNING` cannot read `xmax`:
//! its rows are counted as written (inserted or updated), the rest as
//! unchanged.

pub mod checks;
pub mod rounds;

use tokio_postgres::Client;

use crate::catalog::{Column, Table};
use crate::error::{Error, Result};
use crate::ident::quote;

/// The staging table, in the session's own temporary schema.
pub const STAGE: &str = "pgtide_stage";

/// The target's alias in the merge, which the `DO UPDATE .. WHERE` names.
const TARGET: &str = "pgtide_target";

/// The staging table's column holding each row's position in the batch.
pub const ORD: &str = "pgtide_ord";

/// `work_mem` of a loader session that merges: the `DISTINCT ON` sort
/// holds a chunk's rows (4 MiB of input is 5-6 MB of tuples), which the
/// default 4 MB sends to disk (measured: 50 ms instead of 20 ms per chunk).
const MERGE_WORK_MEM: &str = "64MB";

/// What to do with a row whose key is in the table already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnConflict {
    /// Overwrite the loaded columns of the existing row (last row wins).
    Update,
    /// Keep the existing row (first row wins).
    Skip,
}

impl OnConflict {
    /// The order of a key's rows by position that puts the winner first:
    /// the last row for `update`, the first for `skip`.
    fn winner_first(self) -> &'static str {
        match self {
            OnConflict::Update => "DESC",
            OnConflict::Skip => "ASC",
        }
    }

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            OnConflict::Update => "update",
            OnConflict::Skip => "skip",
        }
    }
}

/// An upsert, resolved against the catalog.
#[derive(Debug, Clone)]
pub struct Upsert {
    /// `update` or `skip`.
    pub mode: OnConflict,
    /// The conflict key, as stored.
    pub key: Vec<String>,
    /// Creates [`STAGE`] and sizes the session's `work_mem` (run once per
    /// connection, outside a transaction).
    pub create_sql: String,
    /// Empties [`STAGE`] before each batch is COPYed into it.
    pub truncate_sql: String,
    /// Merges [`STAGE`] into the target; answers (inserted, merged,
    /// winners): winners is one row per key, less than the rows staged
    /// when a key came more than once.
    pub merge_sql: String,
    /// Run after the merge when a key came more than once: the rows that
    /// lost to another of their key, inserted with `DO NOTHING`, so that
    /// the server judges them too (see `losers_sql`); answers
    /// (inserted, merged) like the merge.
    pub losers_sql: String,
    /// What `update` does with a row whose values are those it has.
    pub unchanged: Unchanged,
    /// With BEFORE row triggers on INSERT or UPDATE, the merge goes in
    /// rounds (`upsert/rounds.rs`); `merge_sql` and `losers_sql` are then
    /// unused.
    pub rounds: Option<rounds::Rounds>,
    /// The staged rows a CHECK constraint refuses (`upsert/checks.rs`).
    pub suspects_sql: Option<String>,
}

/// What `--on-conflict update` does with an existing row whose loaded
/// columns already hold the file's values, byte for byte.
///
/// Rewriting it costs a new row version and an entry in every index (the
/// most of an upsert's time: 16 us a row, docs/benchmarks.md) and leaves
/// a dead row behind, for nothing a reader of the table can see. So such
/// a row is left alone, unless something could see the rewrite: a row
/// trigger on UPDATE (a BEFORE trigger may change the row, an AFTER one
/// may record it), a statement trigger on UPDATE with a transition table
/// (it reads every updated row), or row-level security (an UPDATE policy
/// may refuse it). What a kept row also does not do: write WAL (logical
/// replication sends no UPDATE for it) or meet a `NOT VALID` CHECK or
/// foreign key again (a rewrite would be checked).
/// "The same" is the server's image equality (`*=`, as `REFRESH
/// MATERIALIZED VIEW CONCURRENTLY` uses), not `=`: `1.0` and `1.00` are
/// equal numerics but not the same value, and are rewritten. (Both rows
/// are cast to `record`: between two row constructors, an operator is
/// applied column by column, and no type has its own `*=`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unchanged {
    /// Left as it is (counted as unchanged).
    Kept,
    /// Rewritten like any other: the table has UPDATE triggers that see
    /// rows, or row-level security (on it or on one of its partitions).
    Rewritten,
}

impl Unchanged {
    async fn resolve(
        client: &Client,
        table: &Table,
        mode: OnConflict,
        major: u32,
    ) -> Result<Unchanged> {
        if mode == OnConflict::Skip {
            return Ok(Unchanged::Kept);
        }
        // An UPDATE trigger that sees rows: a row trigger (tgtype:
        // TRIGGER_TYPE_ROW 1 | TRIGGER_TYPE_UPDATE 16), or a statement one
        // with transition tables (its NEW TABLE holds every row updated).
        let (rels, visible) = (tables_sql(major), triggers_seen_sql(major));
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid IN ({rels}) AND {visible} \
                              AND tgtype & 16 = 16 \
                              AND (tgtype & 1 = 1 OR tgnewtable IS NOT NULL \
                                   OR tgoldtable IS NOT NULL)) \
                 OR EXISTS (SELECT 1 FROM pg_class WHERE oid IN ({rels}) AND relrowsecurity)"
        );
        let seen: bool = client.query_one(&sql, &[&table.oid]).await?.get(0);
        Ok(if seen {
            Unchanged::Rewritten
        } else {
            Unchanged::Kept
        })
    }
}

/// The table `$1` and, when it is partitioned, its partitions: a
/// subquery of OIDs. pg_partition_tree (PostgreSQL 12+) of a partitioned
/// table lists the table itself too, but of a plain table nothing.
pub(super) fn tables_sql(major: u32) -> &'static str {
    if major >= 12 {
        "SELECT $1::oid UNION SELECT relid FROM pg_partition_tree($1::oid::regclass)"
    } else {
        "SELECT $1::oid"
    }
}

/// The condition on a `pg_trigger` row that the trigger is the user's
/// (and sees rows). A row trigger of a partitioned parent is cloned onto
/// each partition (so loading into a partition finds it there): internal
/// before PostgreSQL 15, with `tgparentid` set (13+). Internal ones
/// otherwise, cloned or not, are foreign keys', which see no row's
/// values.
pub(super) fn triggers_seen_sql(major: u32) -> &'static str {
    if major >= 13 {
        "(NOT tgisinternal OR (tgparentid <> 0 AND NOT EXISTS \
           (SELECT 1 FROM pg_constraint c WHERE c.oid = tgconstraint AND c.contype = 'f')))"
    } else {
        "NOT tgisinternal"
    }
}

/// Rows a committed merge inserted and updated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Merged {
    /// New keys.
    pub inserted: u64,
    /// Existing rows overwritten (`update`).
    pub updated: u64,
    /// Rows inserted or updated, where the table cannot say which: a
    /// partitioned table's `RETURNING` cannot read `xmax` ("cannot
    /// retrieve a system column in this context").
    pub written: u64,
}

impl Merged {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: Merged) {
        self.inserted += other.inserted;
        self.updated += other.updated;
        self.written += other.written;
    }

    /// Rows the merges wrote, inserted or updated.
    pub fn total(&self) -> u64 {
        self.inserted + self.updated + self.written
    }
}

/// A unique index of the target that `ON CONFLICT` can use.
pub(super) struct UniqueKey {
    primary: bool,
    pub(super) columns: Vec<String>,
    pub(super) nulls_not_distinct: bool,
    /// Per column, the index's collation as SQL names it (empty for a
    /// type without one): the equality the conflicts follow, which may
    /// not be the column's own (an index on `email COLLATE ci`).
    collations: Vec<String>,
}

impl UniqueKey {
    /// The key columns, quoted, each with the index's collation: how rows
    /// are folded and ordered so that two rows are one key exactly when
    /// the index says they conflict.
    fn compared(&self) -> Vec<String> {
        self.compared_in("")
    }

    /// [`UniqueKey::compared`], each column qualified by `alias.` (none
    /// when empty): in a SELECT whose output names the key's columns, a
    /// bare name in ORDER BY or DISTINCT ON means the output column.
    pub(super) fn compared_in(&self, alias: &str) -> Vec<String> {
        let dot = if alias.is_empty() { "" } else { "." };
        self.columns
            .iter()
            .zip(&self.collations)
            .map(|(c, coll)| match coll.is_empty() {
                true => format!("{alias}{dot}{}", quote(c)),
                false => format!("{alias}{dot}{} COLLATE {coll}", quote(c)),
            })
            .collect()
    }

    /// The index's collation of column `c`.
    fn collation(&self, c: &str) -> Option<&str> {
        let i = self.columns.iter().position(|x| x == c)?;
        self.collations.get(i).map(String::as_str)
    }
}

/// Resolves `--on-conflict` for loading `columns` into `table`: the key
/// (`--key`, else the primary key) must be the columns of a unique index
/// (not partial, not on expressions, not deferrable: what `ON CONFLICT`
/// accepts as an arbiter) and all be loaded.
pub async fn resolve(
    client: &Client,
    table: &Table,
    columns: &[&Column],
    mode: OnConflict,
    key: Option<&[String]>,
    major: u32,
) -> Result<Upsert> {
    let keys = unique_keys(client, table, major).await?;
    let list = |k: &UniqueKey| format!("({})", k.columns.join(", "));
    let known = keys.iter().map(list).collect::<Vec<_>>().join(", ");
    let chosen = match key {
        None => keys.iter().find(|k| k.primary).ok_or_else(|| {
            Error::config(format!(
                "--on-conflict: table {} has no primary key to match rows on",
                table.name
            ))
            .with_hint(if known.is_empty() {
                "add a primary key or unique index, or name its columns with --key".to_owned()
            } else {
                format!("name the key with --key, one of its unique indexes: {known}")
            })
        })?,
        Some(wanted) => {
            let same = |k: &&UniqueKey| {
                k.columns.len() == wanted.len() && wanted.iter().all(|w| k.columns.contains(w))
            };
            keys.iter().find(same).ok_or_else(|| {
                Error::config(format!(
                    "--key {}: table {} has no unique index on exactly these columns \
                     (ON CONFLICT needs one; partial, expression and deferrable ones do not count)",
                    wanted.join(", "),
                    table.name
                ))
                .with_hint(if known.is_empty() {
                    "create a unique index on the key columns first".to_owned()
                } else {
                    format!("its unique keys: {known}")
                })
            })?
        }
    };
    // ON CONFLICT (key) takes every unique index on these columns as an
    // arbiter: if their collations differ, no one folding of the file's
    // rows matches them all.
    let same_columns = |k: &&UniqueKey| {
        k.columns.len() == chosen.columns.len()
            && chosen.columns.iter().all(|c| k.columns.contains(c))
    };
    let differs =
        |k: &UniqueKey| (chosen.columns.iter()).any(|c| k.collation(c) != chosen.collation(c));
    if keys.iter().filter(same_columns).any(differs) {
        return Err(Error::config(format!(
            "--on-conflict: table {} has unique indexes on ({}) with different collations, \
             so rows of the file cannot be matched to one key",
            table.name,
            chosen.columns.join(", ")
        ))
        .with_hint(
            "load with --method pipeline --sql 'INSERT .. ON CONFLICT ..', one row at a time",
        ));
    }
    for k in &chosen.columns {
        if !columns.iter().any(|c| &c.name == k) {
            return Err(Error::config(format!(
                "--on-conflict: key column {k:?} is not loaded from the file"
            ))
            .with_hint("add it to --columns: rows are matched on the key's values"));
        }
    }
    if columns.iter().any(|c| c.name == ORD) {
        return Err(Error::config(format!(
            "--on-conflict cannot load a column named {ORD:?}: the staging table uses that name"
        ))
        .with_hint("load without --on-conflict, or with --method pipeline --sql 'INSERT .. ON CONFLICT ..'"));
    }
    let loaded: Vec<String> = columns.iter().map(|c| quote(&c.name)).collect();
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    let suspects_sql = checks::suspects_sql(client, table, &names).await?;
    let same = Unchanged::resolve(client, table, mode, major).await?;
    let rounds = rounds::needed(client, table, major, mode)
        .await?
        .map(|folds| rounds::Rounds::new(table, &loaded, chosen, (mode, same), folds));
    let round_column = match &rounds {
        Some(r) => r.column_sql.as_str(),
        None => "",
    };
    Ok(Upsert {
        mode,
        key: chosen.columns.clone(),
        create_sql: format!(
            "CREATE TEMP TABLE {STAGE} AS SELECT {} FROM {} WITH NO DATA; \
             ALTER TABLE pg_temp.{STAGE} ADD COLUMN {ORD} int8 GENERATED ALWAYS AS IDENTITY; \
             {round_column}SET work_mem = '{MERGE_WORK_MEM}'",
            loaded.join(", "),
            table.name.quoted()
        ),
        truncate_sql: format!("TRUNCATE pg_temp.{STAGE}"),
        merge_sql: merge_sql(table, &loaded, chosen, mode, same),
        losers_sql: losers_sql(table, &loaded, chosen, mode),
        unchanged: same,
        rounds,
        suspects_sql,
    })
}

/// The merge statement (see the module documentation).
fn merge_sql(
    table: &Table,
    loaded: &[String],
    key: &UniqueKey,
    mode: OnConflict,
    same: Unchanged,
) -> String {
    let keys: Vec<String> = key.columns.iter().map(|k| quote(k)).collect();
    let cols = loaded.join(", ");
    let direction = mode.winner_first();
    // A key is inserted as its first row spells it (`1.0` before `1.00`,
    // `a` before `A` under a case-insensitive collation), with the
    // winning row's other values: what one `INSERT .. ON CONFLICT` per
    // row gives, and what rows of the key in later chunks give (their
    // `DO UPDATE` leaves the key as it is), so the result does not depend
    // on the chunking. (With `skip` the winner is the first row.)
    // The stage's columns qualified (`s.`): the output names the key's
    // columns too, and a bare name in DISTINCT ON and ORDER BY would be
    // the output's.
    let s_compared = key.compared_in("s").join(", ");
    let picked: Vec<String> = loaded
        .iter()
        .map(|c| match keys.contains(c) && mode == OnConflict::Update {
            // The last in the order DISTINCT ON sorts by (position
            // descending) is the first row: one sort serves both.
            true => format!(
                "pg_catalog.last_value(s.{c}) OVER (PARTITION BY {s_compared} \
                 ORDER BY s.{ORD} DESC ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED \
                 FOLLOWING) AS {c}"
            ),
            false => format!("s.{c}"),
        })
        .collect();
    let picked = picked.join(", ");
    let winners = |filter: &str| {
        format!(
            "SELECT DISTINCT ON ({s_compared}) {picked} FROM pg_temp.{STAGE} AS s{filter} \
             ORDER BY {s_compared}, s.{ORD} {direction}"
        )
    };
    let staged = if key.nulls_not_distinct {
        winners("")
    } else {
        let any_null: Vec<String> = keys.iter().map(|k| format!("{k} IS NULL")).collect();
        format!(
            "({}) UNION ALL (SELECT {cols} FROM pg_temp.{STAGE} WHERE {})",
            winners(&no_null_key(key, &keys)),
            any_null.join(" OR ")
        )
    };
    merge_from(table, loaded, key, (mode, same), &staged)
}

/// The merge of the rows `staged` (a query over the stage, at most one
/// row per key) into the target; answers (inserted, merged, staged).
pub(super) fn merge_from(
    table: &Table,
    loaded: &[String],
    key: &UniqueKey,
    (mode, same): (OnConflict, Unchanged),
    staged: &str,
) -> String {
    let keys: Vec<String> = key.columns.iter().map(|k| quote(k)).collect();
    let (cols, keys_list) = (loaded.join(", "), keys.join(", "));
    let updates: Vec<&String> = loaded.iter().filter(|c| !keys.contains(c)).collect();
    let action = match mode {
        OnConflict::Update if !updates.is_empty() => {
            let set: Vec<String> = updates
                .iter()
                .map(|c| format!("{c} = EXCLUDED.{c}"))
                .collect();
            let changed = match same {
                Unchanged::Kept => {
                    let row = |of: &str| {
                        let cols: Vec<String> =
                            updates.iter().map(|c| format!("{of}.{c}")).collect();
                        format!("ROW({})::record", cols.join(", "))
                    };
                    format!(" WHERE NOT ({} *= {})", row(TARGET), row("EXCLUDED"))
                }
                Unchanged::Rewritten => String::new(),
            };
            format!("DO UPDATE SET {}{changed}", set.join(", "))
        }
        _ => "DO NOTHING".to_owned(),
    };
    let (returning, inserted) = counted(table);
    let name = table.name.quoted();
    format!(
        "WITH staged AS ({staged}), \
         merged AS (INSERT INTO {name} AS {TARGET} ({cols}) OVERRIDING SYSTEM VALUE \
         SELECT {cols} FROM staged \
         ON CONFLICT ({keys_list}) {action} RETURNING {returning} AS inserted) \
         SELECT {inserted}, count(*), (SELECT count(*) FROM staged) FROM merged"
    )
}

/// ` WHERE` no key column is NULL: the rows that can conflict (all of
/// them, and so no filter, for a `NULLS NOT DISTINCT` key).
pub(super) fn no_null_key(key: &UniqueKey, quoted: &[String]) -> String {
    if key.nulls_not_distinct {
        return String::new();
    }
    let not_null: Vec<String> = quoted.iter().map(|k| format!("{k} IS NOT NULL")).collect();
    format!(" WHERE {}", not_null.join(" AND "))
}

/// What the merge's `RETURNING` says of each row written, and how the
/// rows inserted are counted from it: a new row version has xmax 0, an
/// updated one the updater's id; a partitioned table cannot return it.
fn counted(table: &Table) -> (&'static str, &'static str) {
    match table.kind {
        'p' => ("NULL::bool", "NULL::int8"),
        _ => ("(xmax = 0)", "count(*) FILTER (WHERE inserted)"),
    }
}

/// The rows of a batch that lost to a later (update) or earlier (skip)
/// row of their key, inserted after the merge with `ON CONFLICT DO
/// NOTHING`. Their key is in the table by then, so nothing is written,
/// but the server checks each row as it would one by one: NOT NULL and
/// CHECK are checked before the conflict is (outside testing: a row that
/// broke a CHECK was counted as unchanged when its winner was in the same
/// chunk, and rejected when it was in another). A loser is written only
/// if its winner was not (a BEFORE trigger dropped it), which is what
/// applying the rows one by one in input order gives too.
fn losers_sql(table: &Table, loaded: &[String], key: &UniqueKey, mode: OnConflict) -> String {
    let keys: Vec<String> = key.columns.iter().map(|k| quote(k)).collect();
    let keys_list = keys.join(", ");
    let compared = key.compared().join(", ");
    let cols = loaded.join(", ");
    let direction = mode.winner_first();
    let filter = no_null_key(key, &keys);
    let (returning, inserted) = counted(table);
    let name = table.name.quoted();
    format!(
        "WITH losers AS (INSERT INTO {name} ({cols}) OVERRIDING SYSTEM VALUE SELECT {cols} FROM \
         (SELECT {cols}, row_number() OVER (PARTITION BY {compared} ORDER BY {ORD} {direction}) \
         AS pgtide_rank FROM pg_temp.{STAGE}{filter}) ranked WHERE pgtide_rank > 1 \
         ON CONFLICT ({keys_list}) DO NOTHING RETURNING {returning} AS inserted) \
         SELECT {inserted}, count(*) FROM losers"
    )
}

/// The target's unique indexes that `ON CONFLICT` can infer.
async fn unique_keys(client: &Client, table: &Table, major: u32) -> Result<Vec<UniqueKey>> {
    // indnullsnotdistinct exists from PostgreSQL 15 on.
    let nulls = if major >= 15 {
        "i.indnullsnotdistinct"
    } else {
        "false"
    };
    let sql = format!(
        "SELECT i.indisprimary, \
                array(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o) \
                      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n \
                      WHERE k.o <= i.indnkeyatts ORDER BY k.o), \
                {nulls}, \
                array(SELECT coalesce(quote_ident(n.nspname) || '.' || quote_ident(c.collname), '') \
                      FROM unnest(i.indcollation::oid[]) WITH ORDINALITY k(coll, o) \
                      LEFT JOIN pg_collation c ON c.oid = k.coll \
                      LEFT JOIN pg_namespace n ON n.oid = c.collnamespace \
                      WHERE k.o <= i.indnkeyatts ORDER BY k.o) \
         FROM pg_index i \
         WHERE i.indrelid = $1 AND i.indisunique AND i.indimmediate AND i.indisvalid \
           AND i.indexprs IS NULL AND i.indpred IS NULL \
         ORDER BY NOT i.indisprimary, i.indexrelid"
    );
    let rows = client.query(&sql, &[&table.oid]).await?;
    Ok(rows
        .iter()
        .map(|r| UniqueKey {
            primary: r.get(0),
            columns: r.get(1),
            nulls_not_distinct: r.get(2),
            collations: r.get(3),
        })
        .collect())
}

/// The (inserted, merged) answer of [`Upsert::merge_sql`]; inserted is
/// NULL when the target cannot tell (a partitioned table).
pub(super) fn merged(row: &tokio_postgres::Row) -> Merged {
    let inserted: Option<i64> = row.get(0);
    let merged = row.get::<_, i64>(1) as u64;
    match inserted {
        Some(i) => Merged {
            inserted: i as u64,
            updated: merged - i as u64,
            written: 0,
        },
        None => Merged {
            written: merged,
            ..Merged::default()
        },
    }
}

/// `--on-conflict` runs over COPY (text or binary) only.
pub(super) fn check_method(method: super::Method) -> Result<()> {
    use super::Method;
    match method {
        Method::Copy | Method::Binary => Ok(()),
        other => Err(Error::config(format!(
            "--on-conflict runs with --method copy or binary, not {}",
            other.name()
        ))
        .with_hint("for row-by-row upserts: --method pipeline --sql 'INSERT .. ON CONFLICT ..'")),
    }
}
