//! Which tables a copy moves, and how each goes: the plan.
//!
//! ```text
//! table_names: --table, then every table of each --schema (plain and
//!   partitioned, not partitions), as named on the source
//! plan: each resolved on both servers (once per table; the same table on
//!   both sides refused); the source's columns (not generated) must exist
//!   on the target by name, and a generated one goes to a plain target
//!   column of its name; binary or text and why (same major version,
//!   same encoding, types::text_reason); FREEZE with --truncate on a
//!   plain target table; ctid ranges for a heap source; may_skip_rows
//! largest_first: the order they are copied in
//! ```
//!
//! Everything here reads catalogs and writes nothing, so a plan that
//! fails leaves both servers as they were (only `--create`, before it,
//! writes).

use std::collections::HashSet;

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use super::options::TransferOptions;
use super::types;
use crate::catalog::{self, Table};
use crate::error::{Error, ErrorKind, Result};
use crate::ident::QualifiedName;

/// One table to copy, as planned.
pub(super) struct Planned {
    pub(super) source: Table,
    pub(super) target: Table,
    /// Quoted column list, in source order.
    pub(super) columns: String,
    pub(super) binary: bool,
    pub(super) format_reason: String,
    pub(super) freeze: bool,
    pub(super) freeze_reason: Option<String>,
    /// Plain heap table on the source: ctid ranges apply.
    pub(super) ranged: bool,
    pub(super) may_skip: bool,
    pub(super) estimate: u64,
    /// A copied column holds object names (a reg* type, or a type made
    /// of one: `sql/names_objects.sql`): the source must print them
    /// qualified.
    pub(super) names_objects: bool,
}

/// A server's facts (`sql/transfer_server.sql`).
pub(super) struct Server {
    pub(super) version: String,
    pub(super) major: i32,
    pub(super) encoding: String,
    pub(super) identity: String,
}

pub(super) async fn server(c: &Client) -> Result<Server> {
    let r = c
        .query_one(include_str!("../../sql/transfer_server.sql"), &[])
        .await?;
    Ok(Server {
        version: r.get(0),
        major: r.get(1),
        encoding: r.get(2),
        identity: r.get(3),
    })
}

/// The tables named by `--table` and `--schema`, in that order (not yet
/// resolved, repeats possible).
pub(super) async fn table_names(
    src: &Client,
    opts: &TransferOptions,
) -> Result<Vec<QualifiedName>> {
    let mut names = opts.tables.clone();
    for schema in &opts.schemas {
        let rows = src
            .query(
                include_str!("../../sql/transfer_schema.sql"),
                &[schema, &opts.schemas],
            )
            .await?;
        if rows.is_empty() && !has_tables(src, schema).await? {
            return Err(
                Error::config(format!("schema {schema:?} has no tables on the source")).with_hint(
                    "check the name (unquoted names fold to lower case: quote to keep case, \
                     --schema '\"MySchema\"') and the database given by --from",
                ),
            );
        }
        names.extend(rows.iter().map(|r| QualifiedName {
            schema: Some(r.get(0)),
            name: r.get(1),
        }));
    }
    Ok(names)
}

/// Whether `schema` holds any table on the source (all of them may be
/// partitions that come with a parent of another schema named too).
async fn has_tables(src: &Client, schema: &str) -> Result<bool> {
    let row = src
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p'))",
            &[&schema],
        )
        .await?;
    Ok(row.get(0))
}

/// Resolves every table on both servers and decides how each is copied.
pub(super) async fn plan(
    src: &Client,
    dst: &Client,
    opts: &TransferOptions,
    names: &[QualifiedName],
    (s, t): (&Server, &Server),
    notes: &mut Vec<String>,
) -> Result<Vec<Planned>> {
    let mut seen = HashSet::new();
    let mut plans = Vec::new();
    for name in names {
        let source = Table::resolve(src, name)
            .await
            .map_err(|e| on_side(e, "on the source", "--from"))?;
        if !seen.insert(source.oid) {
            continue;
        }
        let target_name = opts
            .target_table
            .clone()
            .unwrap_or_else(|| source.name.clone());
        let target = Table::resolve(dst, &target_name)
            .await
            .map_err(|e| on_side(e, "on the target", "--to"))?;
        if s.identity == t.identity && source.oid == target.oid {
            return Err(Error::config(format!(
                "{} is the same table on the source and the target",
                source.name
            ))
            .with_hint(
                "--from and --to reach the same database: give --target-table another table",
            ));
        }
        if opts.truncate && s.identity == t.identity && related(dst, source.oid, target.oid).await?
        {
            return Err(Error::config(format!(
                "{} and {} are in one partition or inheritance tree of the same database: \
                 --truncate would wait forever for the lock that reading the source holds",
                source.name, target.name
            ))
            .with_hint("copy without --truncate (empty the target first), or into a table outside that tree"));
        }
        plans.push(plan_table(src, dst, opts, (s, t), source, target).await?);
    }
    if opts.truncate && plans.iter().any(|p| p.ranged) && opts.workers > 1 && plans.len() == 1 {
        notes.push(
            "--truncate loads each table in one transaction: one table is copied by one \
             worker pair (workers share out tables)"
                .into(),
        );
    }
    Ok(plans)
}

/// Refuses a source that is no table of rows: a sequence, index or
/// composite type (`COPY t TO` refuses them), or a foreign table, whose
/// rows live on another server, out of the snapshot's reach (and
/// `LOCK TABLE` refuses it).
fn refuse_kind(source: &Table) -> Result<()> {
    let what = match source.kind {
        'f' => "foreign table",
        _ => match source.not_rows() {
            Some(what) => what,
            None => return Ok(()),
        },
    };
    let hint = match source.kind {
        'f' => "copy the table from the server that holds it, or `pgtide export --query` \
                its rows and load the file"
            .to_owned(),
        _ => format!(
            "copy tables only; for its values, `pgtide export --query 'SELECT * FROM {}'`",
            source.name
        ),
    };
    Err(Error::config(format!(
        "cannot copy from {what} {} (on the source)",
        source.name
    ))
    .with_hint(hint))
}

/// Refuses a partition named beside a partitioned table it belongs to (at
/// any depth): the parent's rows are its partitions', so that
/// partition's rows would be copied twice (and with `--truncate`, two
/// workers' TRUNCATEs of one tree deadlock). An inheritance child is
/// not refused: its parent is copied `ONLY`. Nor is a source that is no
/// table ([`refuse_kind`]).
/// Runs before `--create` writes anything on the target.
pub(super) async fn refuse_sources(src: &Client, names: &[QualifiedName]) -> Result<()> {
    let mut tables = Vec::with_capacity(names.len());
    for name in names {
        let t = Table::resolve(src, name)
            .await
            .map_err(|e| on_side(e, "on the source", "--from"))?;
        refuse_kind(&t)?;
        tables.push((t.oid, t.name.to_string()));
    }
    let oids: Vec<Oid> = tables.iter().map(|(o, _)| *o).collect();
    let row = src
        .query_opt(
            "SELECT c, a::oid FROM unnest($1::oid[]) AS c, \
                 pg_catalog.pg_partition_ancestors(c) AS a \
             WHERE a::oid <> c AND a::oid = ANY($1) LIMIT 1",
            &[&oids],
        )
        .await?;
    let Some(row) = row else {
        return Ok(());
    };
    let name = |oid: Oid| {
        tables
            .iter()
            .find(|(o, _)| *o == oid)
            .map_or_else(|| oid.to_string(), |(_, n)| n.clone())
    };
    let (child, parent) = (name(row.get(0)), name(row.get(1)));
    Err(Error::config(format!(
        "{child} is a partition of {parent}, which is copied with its partitions' rows: \
         {child}'s rows would be copied twice"
    ))
    .with_hint(format!(
        "name {parent} or its partitions, not both (leave out --table {child})"
    )))
}

/// Whether one of two tables of one database is the other's ancestor
/// (partition or inheritance child, at any depth): reading the source
/// locks its descendants, and TRUNCATE of the target locks it and its own.
async fn related(client: &Client, a: Oid, b: Oid) -> Result<bool> {
    let row = client
        .query_one(
            "WITH RECURSIVE below(rel, root) AS ( \
                 SELECT c, c FROM unnest(ARRAY[$1::oid, $2::oid]) AS c \
                 UNION SELECT i.inhrelid, below.root FROM pg_catalog.pg_inherits i \
                 JOIN below ON i.inhparent = below.rel) \
             SELECT EXISTS (SELECT FROM below WHERE (root, rel) IN (($1, $2), ($2, $1)))",
            &[&a, &b],
        )
        .await?;
    Ok(row.get(0))
}

async fn plan_table(
    src: &Client,
    dst: &Client,
    opts: &TransferOptions,
    (s, t): (&Server, &Server),
    source: Table,
    target: Table,
) -> Result<Planned> {
    // A column generated on the source goes too when the target's column
    // is a plain one: its values are data there (left out, they would be
    // NULL or the default, and --verify, hashing the columns copied, would
    // not see it). Generated on both sides, the target computes it.
    let columns: Vec<&catalog::Column> = source
        .columns
        .iter()
        .filter(|c| {
            !c.generated
                || target
                    .columns
                    .iter()
                    .any(|t| t.name == c.name && !t.generated)
        })
        .collect();
    // A table of no columns has rows all the same (`SELECT FROM t`), one
    // empty line each, which a target of no columns takes as they are.
    if columns.is_empty() && target.columns.iter().any(|c| !c.generated) {
        return Err(Error::config(format!(
            "{} has no columns to copy, and {} on the target has columns",
            source.name, target.name
        ))
        .with_hint("a row of no values cannot fill them: copy into a table of no columns"));
    }
    let mut pairs = Vec::new();
    for c in &columns {
        let Some(tc) = target.columns.iter().find(|t| t.name == c.name) else {
            return Err(Error::config(format!(
                "{} on the target has no column {:?} (the source {} has it)",
                target.name, c.name, source.name
            ))
            .with_hint(format!(
                "the target's columns are: {}",
                target.column_names()
            )));
        };
        if tc.generated {
            return Err(Error::config(format!(
                "column {:?} of {} is generated on the target but not on the source",
                c.name, target.name
            ))
            .with_hint("COPY cannot write a generated column; make the definitions agree"));
        }
        pairs.push((*c, tc));
    }
    let format_reason = if opts.force_text {
        Some("--text was given".to_owned())
    } else if s.major != t.major {
        Some(format!(
            "PostgreSQL {} -> {}: binary formats are trusted within one major version only",
            s.major, t.major
        ))
    } else if s.encoding != t.encoding {
        Some(format!(
            "server encodings differ ({} -> {})",
            s.encoding, t.encoding
        ))
    } else {
        let s_types: Vec<Oid> = pairs.iter().map(|(c, _)| c.type_oid).collect();
        let t_types: Vec<Oid> = pairs.iter().map(|(_, c)| c.type_oid).collect();
        let sc = types::Catalog::load(src, &s_types).await?;
        let tc = types::Catalog::load(dst, &t_types).await?;
        pairs.iter().find_map(|(a, b)| {
            types::text_reason(
                &a.name,
                (&sc, a.type_oid, &a.type_name),
                (&tc, b.type_oid, &b.type_name),
            )
        })
    };
    let binary = format_reason.is_none();
    let format_reason = format_reason.unwrap_or_else(|| {
        format!(
            "same column types, PostgreSQL {} and encoding {} on both sides",
            s.major, s.encoding
        )
    });
    let info = src
        .query_one(include_str!("../../sql/export_table.sql"), &[&source.oid])
        .await?;
    let (kind, am, estimate): (String, String, f64) = (info.get(0), info.get(1), info.get(2));
    let ranged = matches!(kind.as_str(), "r" | "m") && am == "heap";
    let (freeze, freeze_reason) = match (opts.truncate, target.kind) {
        (false, _) => (false, None),
        (true, 'r') => (true, None),
        (true, 'p') => (
            false,
            Some("COPY FREEZE cannot load a partitioned table".to_owned()),
        ),
        (true, _) => (
            false,
            Some("COPY FREEZE needs a plain table on the target".to_owned()),
        ),
    };
    let may_skip = catalog::may_skip_rows(dst, target.oid, false).await?;
    let types: Vec<Oid> = columns.iter().map(|c| c.type_oid).collect();
    let names_objects: bool = src
        .query_one(include_str!("../../sql/names_objects.sql"), &[&types])
        .await?
        .get(0);
    Ok(Planned {
        names_objects,
        columns: catalog::column_list(&columns),
        source,
        target,
        binary,
        format_reason,
        freeze,
        freeze_reason,
        ranged,
        may_skip,
        estimate: estimate.max(0.0) as u64,
    })
}

/// A resolve error with the side named and the right flag in the hint.
fn on_side(e: Error, where_: &str, flag: &str) -> Error {
    if e.kind() != ErrorKind::Config {
        return e;
    }
    let hint = e
        .hint()
        .map(|h| h.replace(catalog::CREATE_HINT, "").replace("--db", flag))
        .unwrap_or_default();
    let hint = if where_ == "on the target" {
        format!("{hint}; or give --create to create it from pg_dump --schema-only of the source")
    } else {
        hint
    };
    Error::new(e.kind(), format!("{} {where_}", e.message())).with_hint(hint)
}

/// The plans and their sizes in blocks (`blocks`, in plan order), both
/// largest first: the order the tables are copied in, so that the longest
/// table does not start last.
pub(super) fn largest_first(plans: Vec<Planned>, blocks: &[u64]) -> (Vec<Planned>, Vec<u64>) {
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((blocks[i], plans[i].estimate)));
    let blocks = order.iter().map(|&i| blocks[i]).collect();
    let mut slots: Vec<Option<Planned>> = plans.into_iter().map(Some).collect();
    let plans = order.iter().map(|&i| slots[i].take().unwrap()).collect();
    (plans, blocks)
}
