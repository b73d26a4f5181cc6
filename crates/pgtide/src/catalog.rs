//! What pgtide learns from `pg_catalog`: the shape of the target table.
//!
//! Every query lives in `sql/*.sql` and takes bound parameters; names reach
//! SQL only through [`crate::ident`]. Nothing here writes to the database.

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use crate::error::{Error, ErrorKind, Result};
use crate::ident::{self, QualifiedName};

/// One column of the target table.
#[derive(Debug, Clone)]
pub struct Column {
    /// Column name as stored (case preserved).
    pub name: String,
    /// Type OID (`pg_attribute.atttypid`).
    pub type_oid: Oid,
    /// Type modifier (`atttypmod`), -1 when none.
    pub typmod: i32,
    /// Declared NOT NULL.
    pub not_null: bool,
    /// Has a default expression.
    pub has_default: bool,
    /// A generated column (COPY cannot write it).
    pub generated: bool,
    /// The type as SQL spells it, e.g. `character varying(32)`.
    pub type_name: String,
}

/// The resolved target table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Its OID.
    pub oid: Oid,
    /// Schema-qualified name as resolved by the server.
    pub name: QualifiedName,
    /// `pg_class.relkind`: `r` table, `p` partitioned, `f` foreign, ...
    pub kind: char,
    /// All user columns in table order.
    pub columns: Vec<Column>,
}

impl Table {
    /// Looks up `name` on the server. A missing table is a `Config` error
    /// whose hint says how to check.
    pub async fn resolve(client: &Client, name: &QualifiedName) -> Result<Table> {
        let row = client
            .query_opt(include_str!("../sql/table.sql"), &[&name.quoted()])
            .await?
            .ok_or_else(|| missing_table(name))?;
        let kind: String = row.get(3);
        let oid: Oid = row.get(0);
        let resolved = QualifiedName {
            schema: Some(row.get(1)),
            name: row.get(2),
        };
        let columns = client
            .query(include_str!("../sql/columns.sql"), &[&oid])
            .await?
            .iter()
            .map(|r| Column {
                name: r.get(0),
                type_oid: r.get(1),
                typmod: r.get(2),
                not_null: r.get(3),
                has_default: r.get(4),
                generated: r.get(5),
                type_name: r.get(6),
            })
            .collect();
        Ok(Table {
            oid,
            name: resolved,
            kind: kind.chars().next().unwrap_or('r'),
            columns,
        })
    }

    /// What the relation is when it holds no rows to copy (`COPY t TO`
    /// refuses it), as the server's error names it: a sequence, an index,
    /// a composite type.
    pub fn not_rows(&self) -> Option<&'static str> {
        match self.kind {
            'S' => Some("sequence"),
            'i' | 'I' => Some("index"),
            'c' => Some("composite type"),
            _ => None,
        }
    }

    /// The table as a FROM item that reads its own rows, as `COPY t TO`
    /// does: `ONLY t` for a table (an inheritance parent's children are
    /// tables of their own, copied or exported as such), the whole tree of
    /// a partitioned table (its rows are its partitions'), a view as it is.
    pub fn rows_from(&self) -> String {
        match self.kind {
            'r' | 'f' | 'm' => format!("ONLY {}", self.name.quoted()),
            _ => self.name.quoted(),
        }
    }

    /// `TRUNCATE` of the rows [`Table::rows_from`] reads: `ONLY`, unless
    /// the table is partitioned.
    pub fn truncate_sql(&self) -> String {
        format!("TRUNCATE {}", self.truncated())
    }

    /// The table as `TRUNCATE` names it: with `ONLY` but for a
    /// partitioned table (whose rows are its partitions').
    pub fn truncated(&self) -> String {
        match self.kind {
            'p' => self.name.quoted(),
            _ => format!("ONLY {}", self.name.quoted()),
        }
    }

    /// The columns a load writes: the user's list (validated, in file
    /// order) or every non-generated column in table order.
    pub fn select(&self, wanted: Option<&[String]>) -> Result<Vec<&Column>> {
        let Some(wanted) = wanted else {
            return Ok(self.columns.iter().filter(|c| !c.generated).collect());
        };
        let mut out = Vec::with_capacity(wanted.len());
        for w in wanted {
            let col = self.columns.iter().find(|c| &c.name == w).ok_or_else(|| {
                Error::config(format!("table {} has no column {w:?}", self.name))
                    .with_hint(format!("its columns are: {}", self.column_names()))
            })?;
            if out.iter().any(|c: &&Column| c.name == col.name) {
                return Err(Error::config(format!("column {w:?} is listed twice")));
            }
            out.push(col);
        }
        Ok(out)
    }

    /// `a, b, c` for hints.
    pub fn column_names(&self) -> String {
        self.columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `"a", "b"` for a COPY or INSERT column list.
pub fn column_list(columns: &[&Column]) -> String {
    columns
        .iter()
        .map(|c| ident::quote(&c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The condition on an index `i` (`pg_index`) that its definition
/// rebuilds all of it. What `pg_get_indexdef` does not hold is lost by a
/// drop and rebuild, so such an index stays: the replica identity (a
/// publication's updates would fail without it), the CLUSTER mark, a
/// comment, a column's statistics target, a tablespace other than the
/// database's default (`pg_get_indexdef` leaves it out, as pg_dump does);
/// and a partition's index attached to its parent's, which the server
/// refuses to drop alone.
pub const INDEX_REBUILT_WHOLE: &str = "NOT i.indisreplident AND NOT i.indisclustered \
     AND pg_catalog.obj_description(i.indexrelid, 'pg_class') IS NULL \
     AND (SELECT x.reltablespace FROM pg_catalog.pg_class x WHERE x.oid = i.indexrelid) = 0 \
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = i.indexrelid \
                     AND coalesce(a.attstattarget, -1) <> -1) \
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits h WHERE h.inhrelid = i.indexrelid)";

/// The part of a missing table's hint that only a load can act on
/// (`pgtide copy` replaces it by its own).
pub const CREATE_HINT: &str = "create it first (or let --create make it from the file), ";

fn missing_table(name: &QualifiedName) -> Error {
    Error::new(ErrorKind::Config, format!("table {name} does not exist")).with_hint(format!(
        "{CREATE_HINT}check the spelling and schema (names are \
         case-folded unless quoted, e.g. --table '\"MyTable\"'), and the \
         database given by --db"
    ))
}

/// Whether the relation `oid` has an INSTEAD rule on INSERT: its INSERTs
/// report the rule's row counts, which may exceed the rows given (see
/// `sql/instead_rule.sql`). Only the INSERT methods are affected.
pub async fn instead_rule(client: &Client, oid: Oid) -> Result<bool> {
    let row = client
        .query_one(include_str!("../sql/instead_rule.sql"), &[&oid])
        .await?;
    Ok(row.get(0))
}

/// The server's major version, e.g. 15 or 17, from `server_version_num`.
pub async fn server_major(client: &Client) -> Result<u32> {
    let row = client.query_one("SHOW server_version_num", &[]).await?;
    let num: String = row.get(0);
    num.parse::<u32>()
        .map(|n| n / 10000)
        .map_err(|_| Error::bug(format!("unexpected server_version_num {num:?}")))
}

/// Whether inserting into the relation `oid` can drop rows on purpose (a
/// BEFORE or INSTEAD OF row trigger on INSERT, on it or on a partition;
/// with `inserts`, an INSTEAD rule too): only then may the server count
/// fewer rows than were sent without it being a bug. A foreign table
/// (the relation or a partition) counts too: its server's table may have
/// such a trigger. See `sql/skips_rows.sql`.
pub async fn may_skip_rows(client: &Client, oid: Oid, inserts: bool) -> Result<bool> {
    skip_query(client, oid, inserts, true).await
}

/// [`may_skip_rows`] of COPY into the relation on this server alone, its
/// foreign tables not counted (a sharded load asks their servers).
pub async fn may_skip_rows_here(client: &Client, oid: Oid) -> Result<bool> {
    skip_query(client, oid, false, false).await
}

async fn skip_query(client: &Client, oid: Oid, inserts: bool, foreign: bool) -> Result<bool> {
    let row = client
        .query_one(
            include_str!("../sql/skips_rows.sql"),
            &[&oid, &inserts, &foreign],
        )
        .await?;
    Ok(row.get(0))
}
