//! `--defer-constraints` (with `--defer-indexes`): the target's PRIMARY
//! KEY and UNIQUE constraints are dropped with their indexes before the
//! load, and added back after it: the index built again from its saved
//! definition, then `ALTER TABLE .. ADD CONSTRAINT .. USING INDEX`, so the
//! constraint gets the index exactly as it was (opclasses, INCLUDE,
//! storage parameters, tablespace).
//!
//! The definitions go to the same ledger as the deferred indexes
//! (`indexes::SAVED_TABLE`), with the `ALTER TABLE` that attaches the
//! index and the query that finds the duplicates, before anything is
//! dropped: `pgtide ledger restore-indexes` finishes a killed load.
//!
//! Kept as they are (not deferred): constraints whose index a rebuild
//! would not give back whole (the replica identity, the CLUSTER index, a
//! comment, a statistics target: `catalog::INDEX_REBUILT_WHOLE`), a
//! constraint with a comment, and PostgreSQL 18's `WITHOUT OVERLAPS`
//! keys.
//!
//! Refused when a foreign key references the constraint (dropping it
//! would need `CASCADE`, losing the foreign key), on a partitioned table
//! (its constraints live on every partition), and with `--on-conflict`
//! (its merge needs the unique index as arbiter). Duplicates are then no
//! longer refused row by row: the re-add fails at the end, names the
//! constraint, and leaves its definition in the ledger.

use tokio_postgres::Client;

use super::LoadOptions;
use crate::catalog::Table;
use crate::error::{Error, Result};
use crate::ident::quote;

/// A PRIMARY KEY or UNIQUE constraint that the load drops and adds back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    /// The constraint's name.
    pub name: String,
    /// Its index's name (usually the same).
    pub index: String,
    /// `ALTER TABLE .. ADD CONSTRAINT .. USING INDEX ..`, run once the
    /// index is built again.
    pub add_sql: String,
    /// The query that lists the key values loaded more than once.
    pub duplicates_sql: String,
}

/// The refusals that need the catalog: anything but a plain table, a
/// foreign key that references one of the constraints, `--on-conflict`,
/// and `--defer-constraints` without `--defer-indexes`.
pub async fn check(client: &Client, opts: &LoadOptions, table: &Table) -> Result<()> {
    if !opts.defer_indexes {
        return Err(
            Error::config("--defer-constraints needs --defer-indexes").with_hint(
                "add --defer-indexes: the constraints' indexes are rebuilt with the others",
            ),
        );
    }
    if opts.on_conflict.is_some() {
        return Err(Error::config(
            "--defer-constraints cannot be combined with --on-conflict: the merge needs the \
             unique index of the key as its arbiter",
        )
        .with_hint("drop --defer-constraints (--defer-indexes alone keeps unique indexes)"));
    }
    if table.kind != 'r' {
        return Err(Error::config(format!(
            "--defer-constraints works on a plain table; {} is {}",
            table.name,
            if table.kind == 'p' {
                "partitioned (its constraints live on every partition)"
            } else {
                "not one"
            }
        ))
        .with_hint("load without --defer-constraints"));
    }
    let rows = client
        .query(
            "SELECT f.conname::text, f.conrelid::regclass::text, k.conname::text \
             FROM pg_constraint f JOIN pg_constraint k \
               ON k.conrelid = f.confrelid AND k.conindid = f.conindid \
             WHERE f.contype = 'f' AND f.confrelid = $1 AND k.contype IN ('p', 'u') \
             ORDER BY 1",
            &[&table.oid],
        )
        .await?;
    if let Some(r) = rows.first() {
        let (fk, from, key): (String, String, String) = (r.get(0), r.get(1), r.get(2));
        return Err(Error::config(format!(
            "--defer-constraints: foreign key {fk} of {from} references {key} of {}; dropping \
             {key} would drop that foreign key",
            table.name
        ))
        .with_hint(
            "load with --defer-indexes alone (constraints kept), or drop the foreign key \
             yourself and add it back after the load",
        ));
    }
    Ok(())
}

/// `table`'s PRIMARY KEY and UNIQUE constraints, as they will be added
/// back.
pub async fn deferrable(client: &Client, table: &Table) -> Result<Vec<Deferred>> {
    if table.kind != 'r' {
        return Ok(Vec::new());
    }
    // Kept: what `ADD CONSTRAINT .. USING INDEX` of a rebuilt index
    // cannot give back (catalog::INDEX_REBUILT_WHOLE; a constraint's
    // comment; PostgreSQL 18's `WITHOUT OVERLAPS`, whose GiST index cannot
    // be a unique index to attach).
    let rows = client
        .query(
            &format!(
                "SELECT k.conname::text, c.relname::text, k.contype::text, k.condeferrable, \
                        k.condeferred, \
                        ARRAY(SELECT a.attname::text \
                              FROM unnest(i.indkey) WITH ORDINALITY AS x(attnum, n) \
                              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = x.attnum \
                              WHERE x.n <= i.indnkeyatts ORDER BY x.n) \
                 FROM pg_constraint k JOIN pg_index i ON i.indexrelid = k.conindid \
                 JOIN pg_class c ON c.oid = k.conindid \
                 WHERE k.conrelid = $1 AND k.contype IN ('p', 'u') AND i.indisvalid \
                   AND i.indisunique AND {} \
                   AND pg_catalog.obj_description(k.oid, 'pg_constraint') IS NULL \
                   AND NOT coalesce((pg_catalog.to_jsonb(k) ->> 'conperiod')::bool, false) \
                 ORDER BY k.conname",
                crate::catalog::INDEX_REBUILT_WHOLE
            ),
            &[&table.oid],
        )
        .await?;
    let quoted = table.name.quoted();
    Ok(rows
        .iter()
        .map(|r| {
            let (name, index, kind): (String, String, String) = (r.get(0), r.get(1), r.get(2));
            let (deferrable, deferred): (bool, bool) = (r.get(3), r.get(4));
            let columns: Vec<String> = r.get(5);
            let cols = columns
                .iter()
                .map(|c| quote(c))
                .collect::<Vec<_>>()
                .join(", ");
            let add_sql = format!(
                "ALTER TABLE {quoted} ADD CONSTRAINT {} {} USING INDEX {}{}{}",
                quote(&name),
                if kind == "p" { "PRIMARY KEY" } else { "UNIQUE" },
                quote(&index),
                if deferrable { " DEFERRABLE" } else { "" },
                if deferred { " INITIALLY DEFERRED" } else { "" },
            );
            let duplicates_sql = format!(
                "SELECT {cols}, count(*) FROM {quoted} GROUP BY {cols} HAVING count(*) > 1"
            );
            Deferred {
                name,
                index,
                add_sql,
                duplicates_sql,
            }
        })
        .collect())
}

/// `ALTER TABLE .. DROP CONSTRAINT ..` (its index goes with it).
pub fn drop_sql(table: &Table, d: &Deferred) -> String {
    format!(
        "ALTER TABLE {} DROP CONSTRAINT {}",
        table.name.quoted(),
        quote(&d.name)
    )
}
