//! `--defer-indexes`: drop the target's secondary indexes before the load
//! and build them again after it, in parallel, instead of maintaining
//! them row by row.
//!
//! Which indexes: valid, **non-unique** indexes that back no constraint,
//! on a plain table, whose definition rebuilds all of them (not the
//! replica identity, the CLUSTER index, nor one with a comment or a
//! statistics target: `catalog::INDEX_REBUILT_WHOLE`). A unique index
//! (with or without a constraint) stays: without it duplicates would
//! load and its rebuild would fail, and an `--on-conflict` load needs it
//! as its arbiter.
//!
//! Nothing is lost when the load is killed between the drop and the
//! rebuild: every definition (`pg_get_indexdef`) is saved in
//! [`SAVED_TABLE`] in the same transaction that drops the indexes, and
//! each rebuild deletes its row in the transaction that creates the index.
//! A load with `--defer-indexes` rebuilds every index saved for its table
//! (also those an earlier, interrupted run saved), and
//! `pgtide ledger restore-indexes` rebuilds them all without loading.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_postgres::Client;

use crate::catalog::Table;
use crate::conn::Target;
use crate::error::{Error, Result};

/// Where the definitions of dropped indexes wait for their rebuild.
pub const SAVED_TABLE: &str = "pgtide.deferred_indexes";

const CREATE_SQL: &str = "
CREATE SCHEMA IF NOT EXISTS pgtide;
CREATE TABLE IF NOT EXISTS pgtide.deferred_indexes (
    table_oid   oid         NOT NULL,
    table_name  text        NOT NULL,
    index_name  text        NOT NULL,
    definition  text        NOT NULL,
    deferred_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (table_oid, index_name)
);
COMMENT ON TABLE pgtide.deferred_indexes IS
    'pgtide load --defer-indexes: indexes dropped for a load, until they are built again';
";

/// `--defer-constraints`' columns, added to a ledger an earlier pgtide
/// made (only when missing: the ALTER's lock would otherwise wait for
/// every rebuild that holds a row of the ledger).
const CONSTRAINT_COLUMNS_SQL: &str = "
DO $$ BEGIN
IF NOT EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'pgtide.deferred_indexes'::regclass
                 AND attname = 'add_constraint' AND NOT attisdropped) THEN
    ALTER TABLE pgtide.deferred_indexes
        ADD COLUMN IF NOT EXISTS constraint_name text,
        ADD COLUMN IF NOT EXISTS add_constraint text,
        ADD COLUMN IF NOT EXISTS duplicates text;
END IF;
END $$;
";

/// `maintenance_work_mem` of a rebuilding session: a sort that fits in
/// memory builds an index several times faster than one that spills.
const REBUILD_WORK_MEM: &str = "512MB";

/// An index dropped for a load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The table, as resolved.
    pub table: String,
    /// The index's name (in the table's schema).
    pub name: String,
    /// `CREATE INDEX ...`, as `pg_get_indexdef` wrote it.
    pub definition: String,
    /// `--defer-constraints`: the constraint the index backed, the
    /// `ALTER TABLE .. USING INDEX` that adds it back, and the query that
    /// finds the duplicates that keep it from coming back.
    pub constraint: Option<SavedConstraint>,
}

/// The constraint part of a [`Saved`] index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedConstraint {
    /// Its name.
    pub name: String,
    /// `ALTER TABLE .. ADD CONSTRAINT .. USING INDEX ..`.
    pub add_sql: String,
    /// `SELECT key, count(*) .. HAVING count(*) > 1`.
    pub duplicates_sql: String,
}

/// The indexes `--defer-indexes` would drop on `table` (none for a table
/// that is not a plain one), by name.
pub async fn deferrable(client: &Client, table: &Table) -> Result<Vec<String>> {
    if table.kind != 'r' {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            &format!(
                "SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                 WHERE i.indrelid = $1 AND NOT i.indisunique AND i.indisvalid \
                   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid) \
                   AND {} \
                 ORDER BY c.relname",
                crate::catalog::INDEX_REBUILT_WHOLE
            ),
            &[&table.oid],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Saves the definitions of `table`'s deferrable indexes and drops them,
/// in one transaction; returns how many were dropped.
pub async fn drop_saved(client: &Client, table: &Table) -> Result<usize> {
    drop_saved_with(client, table, false).await
}

/// [`drop_saved`], and with `constraints` (`--defer-constraints`) the
/// table's PRIMARY KEY and UNIQUE constraints too (`load/constraints.rs`),
/// each saved before it is dropped, in the same transaction.
pub async fn drop_saved_with(client: &Client, table: &Table, constraints: bool) -> Result<usize> {
    let names = deferrable(client, table).await?;
    let keys = match constraints {
        true => super::constraints::deferrable(client, table).await?,
        false => Vec::new(),
    };
    if names.is_empty() && keys.is_empty() {
        return Ok(0);
    }
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(hashtext('{SAVED_TABLE}')); {CREATE_SQL} \
             {CONSTRAINT_COLUMNS_SQL} COMMIT"
        ))
        .await
        .map_err(|e| {
            Error::from(e).with_hint(
                "--defer-indexes saves index definitions in schema pgtide of the target \
                 database: the user needs CREATE on the database the first time",
            )
        })?;
    let schema = table.name.schema.clone().unwrap_or_default();
    client.batch_execute("BEGIN").await?;
    let result = async {
        for name in &names {
            client
                .execute(
                    "INSERT INTO pgtide.deferred_indexes (table_oid, table_name, index_name, definition) \
                     SELECT $1, $2, c.relname, pg_get_indexdef(c.oid) \
                     FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                     WHERE i.indrelid = $1 AND c.relname = $3",
                    &[&table.oid, &table.name.to_string(), name],
                )
                .await?;
            let index = crate::ident::QualifiedName {
                schema: Some(schema.clone()),
                name: name.clone(),
            };
            client
                .batch_execute(&format!("DROP INDEX {}", index.quoted()))
                .await?;
        }
        for key in &keys {
            client
                .execute(
                    "INSERT INTO pgtide.deferred_indexes (table_oid, table_name, index_name,                      definition, constraint_name, add_constraint, duplicates)                      SELECT $1, $2, c.relname, pg_get_indexdef(c.oid), $4, $5, $6                      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid                      WHERE i.indrelid = $1 AND c.relname = $3",
                    &[
                        &table.oid,
                        &table.name.to_string(),
                        &key.index,
                        &key.name,
                        &key.add_sql,
                        &key.duplicates_sql,
                    ],
                )
                .await?;
            client
                .batch_execute(&super::constraints::drop_sql(table, key))
                .await?;
        }
        client.batch_execute("COMMIT").await
    }
    .await;
    if let Err(e) = result {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(e.into());
    }
    Ok(names.len() + keys.len())
}

/// The saved indexes of the table with `oid` (every table: `None`).
pub async fn saved(client: &Client, oid: Option<u32>) -> Result<Vec<Saved>> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('pgtide.deferred_indexes') IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    if !exists {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            // Through jsonb: a ledger an earlier pgtide made lacks the
            // constraint columns, and reading it must not change it.
            "SELECT table_name, index_name, definition, to_jsonb(d) ->> 'constraint_name', \
                    to_jsonb(d) ->> 'add_constraint', to_jsonb(d) ->> 'duplicates' \
             FROM pgtide.deferred_indexes d \
             WHERE $1::oid IS NULL OR table_oid = $1 ORDER BY table_name, index_name",
            &[&oid],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Saved {
            table: r.get(0),
            name: r.get(1),
            definition: r.get(2),
            constraint: match (r.get(3), r.get(4)) {
                (Some(name), Some(add_sql)) => Some(SavedConstraint {
                    name,
                    add_sql,
                    duplicates_sql: r.get::<_, Option<String>>(5).unwrap_or_default(),
                }),
                _ => None,
            },
        })
        .collect())
}

/// What a rebuild did.
#[derive(Debug, Default)]
pub struct Rebuilt {
    /// Indexes built.
    pub built: Vec<String>,
    /// Wall time of the rebuild, in seconds.
    pub seconds: f64,
    /// Indexes not built (their definitions stay saved): one failure does
    /// not keep the others from being built.
    pub not_built: Vec<String>,
    /// The first index that could not be built, and why.
    pub failure: Option<Error>,
}

impl Rebuilt {
    /// What the summary says of the indexes not built, if any.
    pub fn not_built_note(&self) -> Option<String> {
        (!self.not_built.is_empty()).then(|| {
            format!(
                "not built: {} (kept in {SAVED_TABLE}; fix the cause, then run `pgtide ledger \
                 restore-indexes`)",
                self.not_built.join(", ")
            )
        })
    }
}

/// Builds the saved indexes of the table with `oid` (every table: `None`)
/// again, on up to `connections` sessions at once; each one's saved row
/// is deleted in the transaction that creates it.
pub async fn rebuild(target: &Target, oid: Option<u32>, connections: usize) -> Result<Rebuilt> {
    let start = Instant::now();
    let client = target.connect().await?;
    let todo = saved(&client, oid).await?;
    drop(client);
    let queue = Arc::new(Mutex::new(todo.into_iter().collect::<VecDeque<_>>()));
    let done = Arc::new(Mutex::new(Rebuilt::default()));
    let n = connections.max(1).min(queue.lock().expect("queue").len());
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (queue, done, target) = (queue.clone(), done.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let result = build_from(&target, &queue, &done).await;
            if let Err(e) = result {
                let mut d = done.lock().expect("rebuild state");
                d.failure = d.failure.take().or(Some(e));
            }
        }));
    }
    for t in tasks {
        if let Err(e) = t.await {
            return Err(Error::bug(format!("an index rebuild task panicked: {e}")));
        }
    }
    let mut out = std::mem::take(&mut *done.lock().expect("rebuild state"));
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// One rebuilding session: takes indexes from `queue` until it is empty.
async fn build_from(
    target: &Target,
    queue: &Mutex<VecDeque<Saved>>,
    done: &Mutex<Rebuilt>,
) -> Result<()> {
    let client = target.connect().await?;
    client
        // An empty default_tablespace puts each index back in the
        // database's default, where it was (INDEX_REBUILT_WHOLE keeps the
        // others), whatever the role's own setting says.
        .batch_execute(&format!(
            "SET maintenance_work_mem = '{REBUILD_WORK_MEM}'; SET default_tablespace = ''"
        ))
        .await?;
    loop {
        let Some(index) = queue.lock().expect("queue").pop_front() else {
            return Ok(());
        };
        client.batch_execute("BEGIN").await?;
        let built = async {
            if index.constraint.is_some() {
                // Adding a constraint upgrades the build's SHARE lock to
                // ACCESS EXCLUSIVE: two sessions doing so at once would
                // deadlock, so constraints are added one at a time.
                client
                    .batch_execute(&format!(
                        "SELECT pg_advisory_xact_lock(hashtext('{SAVED_TABLE}.constraints'))"
                    ))
                    .await?;
            }
            client.batch_execute(&index.definition).await?;
            if let Some(c) = &index.constraint {
                client.batch_execute(&c.add_sql).await?;
            }
            client
                .execute(
                    "DELETE FROM pgtide.deferred_indexes WHERE table_name = $1 AND index_name = $2",
                    &[&index.table, &index.name],
                )
                .await?;
            client.batch_execute("COMMIT").await
        }
        .await;
        match built {
            Ok(()) => done.lock().expect("rebuild state").built.push(index.name),
            // The next index is tried all the same: each is independent.
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                let error = match &index.constraint {
                    Some(c) => constraint_failed(e, &index, c),
                    None => Error::from(e).with_hint(format!(
                        "index {} of {} is not built; its definition is kept in {SAVED_TABLE}: \
                         fix the cause, then run `pgtide ledger restore-indexes`",
                        index.name, index.table
                    )),
                };
                let mut d = done.lock().expect("rebuild state");
                d.not_built.push(index.name);
                d.failure = d.failure.take().or(Some(error));
            }
        }
    }
}

/// A constraint that could not be added back (duplicates, or NULLs in a
/// primary key, were loaded): the error names it, says how to find the
/// rows that break it and how to finish.
fn constraint_failed(e: tokio_postgres::Error, index: &Saved, c: &SavedConstraint) -> Error {
    let server = Error::from(e);
    let message = format!(
        "constraint {} of {} could not be added back after the load: {}",
        c.name,
        index.table,
        server.message()
    );
    Error::new(server.kind(), message).with_hint(format!(
        "--defer-constraints does not refuse duplicates row by row. Find them with: {}; \
         delete the extra rows (and NULL keys), then run `pgtide ledger restore-indexes`, \
         which adds {} back (its definition is kept in {SAVED_TABLE})",
        c.duplicates_sql, c.name
    ))
}
