//! `pgtide copy --create`: tables missing on the target are created from
//! `pg_dump --schema-only` of the source, as pgcopydb does.
//!
//! ```text
//! missing: every table to copy that does not resolve on the target (a
//!   partitioned table brings all its partitions)
//! pg_dump --schema-only --section=pre-data  --no-owner --no-privileges
//!         --no-tablespaces --strict-names -t "s"."t" ...   (source)
//! pg_dump ... --section=post-data ...      (both taken before any write)
//! target, one fresh connection: CREATE SCHEMA for schemas it lacks, then
//!   the pre-data script (tables, owned sequences, defaults) as one
//!   implicit transaction
//! ... the rows are copied (no index, constraint or trigger yet) ...
//! target: the post-data script (indexes, primary keys, unique and
//!   foreign keys, triggers, rules), then setval of every sequence the
//!   created tables own, to the source's last_value / is_called
//! ```
//!
//! The scripts are plain SQL: pg_dump's psql-only lines (`\restrict`,
//! `\unrestrict`) are dropped, any other backslash line is refused, and
//! its leading `SET name = value;` lines for parameters the target does
//! not have (a newer pg_dump's `transaction_timeout` on an older target)
//! are left out. Each script runs on its own connection, so its
//! `search_path` and timeouts end with it. Ownership and grants are not
//! copied (the target user owns the tables); what the tables depend on
//! beyond their own sequences (types, functions of defaults and triggers,
//! referenced tables) must exist on the target or be copied with them.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use crate::catalog::Table;
use crate::cluster::find_pg_dump;
use crate::conn::Target;
use crate::error::{Error, ErrorKind, Result};
use crate::ident::{quote, QualifiedName};

/// What `--create` prepared: the tables it created (source names) and
/// the post-data script to run once their rows are in.
#[derive(Debug, Clone)]
pub struct Created {
    /// Created on the target, by the source's qualified name.
    pub tables: Vec<QualifiedName>,
    /// Their oids on the source (sequences are looked up by them).
    pub oids: Vec<Oid>,
    /// `pg_dump --section=post-data` of those tables.
    pub post_data: String,
    /// `pg_dump --version` of the pg_dump used.
    pub pg_dump: String,
}

/// Creates the tables of `names` that the target lacks (pre-data), or
/// `None` when it has them all (then no pg_dump is needed). Names that do
/// not resolve on the source are left to the plan, which reports them.
pub async fn create_missing(
    src: &Client,
    dst: &Client,
    from: &Target,
    to: &Target,
    names: &[QualifiedName],
    source_major: u32,
) -> Result<Option<Created>> {
    let mut seen = HashSet::new();
    let mut missing: Vec<(QualifiedName, Oid)> = Vec::new();
    for name in names {
        let Ok(source) = Table::resolve(src, name).await else {
            continue;
        };
        if !seen.insert(source.oid) {
            continue;
        }
        match Table::resolve(dst, &source.name).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Config => {
                // A partitioned table's rows live in its partitions.
                let tree = src
                    .query(
                        "SELECT n.nspname::text, c.relname::text, c.oid
                         FROM pg_catalog.pg_partition_tree($1::oid) p
                         JOIN pg_catalog.pg_class c ON c.oid = p.relid
                         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                         ORDER BY p.level, c.relname",
                        &[&source.oid],
                    )
                    .await?;
                for r in &tree {
                    let oid: Oid = r.get(2);
                    if oid == source.oid || seen.insert(oid) {
                        let name = QualifiedName {
                            schema: Some(r.get(0)),
                            name: r.get(1),
                        };
                        missing.push((name, oid));
                    }
                }
                if tree.is_empty() {
                    missing.push((source.name.clone(), source.oid));
                }
            }
            Err(e) => return Err(e),
        }
    }
    if missing.is_empty() {
        return Ok(None);
    }
    let (pg_dump, version) = tokio::task::spawn_blocking(move || find_pg_dump(source_major))
        .await
        .map_err(|e| Error::bug(format!("pg_dump search failed: {e}")))??;
    let tables: Vec<QualifiedName> = missing.iter().map(|(n, _)| n.clone()).collect();
    let (pre, post) = {
        let (from, tables, pg_dump) = (from.clone(), tables.clone(), pg_dump.clone());
        tokio::task::spawn_blocking(move || {
            let pre = dump(&pg_dump, &from, &tables, "pre-data")?;
            let post = dump(&pg_dump, &from, &tables, "post-data")?;
            Ok::<_, Error>((pre, post))
        })
        .await
        .map_err(|e| Error::bug(format!("pg_dump task failed: {e}")))??
    };
    let mut schemas: Vec<&str> = Vec::new();
    for t in &tables {
        let s = t.schema.as_deref().unwrap_or("public");
        if !schemas.contains(&s) {
            schemas.push(s);
        }
    }
    let mut create_schemas = String::new();
    for s in schemas {
        let exists = dst
            .query_opt(
                "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1",
                &[&s],
            )
            .await?
            .is_some();
        if !exists {
            create_schemas.push_str(&format!("CREATE SCHEMA {};\n", quote(s)));
        }
    }
    let pre = format!("{create_schemas}{}", script(dst, &pre).await?);
    let post_data = script(dst, &post).await?;
    apply(to, &pre).await.map_err(|e| {
        failed(
            e,
            "creating the tables (pg_dump --section=pre-data)",
            &tables,
        )
    })?;
    Ok(Some(Created {
        tables,
        oids: missing.iter().map(|(_, o)| *o).collect(),
        post_data,
        pg_dump: version,
    }))
}

/// Once the rows are in: indexes, constraints and triggers, then the
/// sequences at the source's values. Returns the sequences set.
pub async fn finish(
    created: &Created,
    src: &Client,
    dst: &Client,
    to: &Target,
) -> Result<Vec<String>> {
    apply(to, &created.post_data).await.map_err(|e| {
        let e = failed(
            e,
            "adding indexes, constraints and triggers (pg_dump --section=post-data)",
            &created.tables,
        );
        // The rows are in and the tables exist: a new run with --create
        // would leave them as they are, without these.
        let hint = format!(
            "{}; the rows are copied: once that is fixed, add the rest with \
             pg_dump --schema-only --section=post-data -t TABLE SOURCE | psql TARGET \
             (a new run with --create leaves existing tables as they are)",
            e.hint().unwrap_or_default()
        );
        e.with_hint(hint)
    })?;
    let rows = src
        .query(
            include_str!("../../sql/transfer_sequences.sql"),
            &[&created.oids],
        )
        .await?;
    let mut set = Vec::new();
    for r in &rows {
        let seq: String = r.get(0);
        let state = src
            .query_one(&format!("SELECT last_value, is_called FROM {seq}"), &[])
            .await?;
        let (last, called): (i64, bool) = (state.get(0), state.get(1));
        dst.execute(
            "SELECT pg_catalog.setval($1::text::regclass, $2, $3)",
            &[&seq, &last, &called],
        )
        .await
        .map_err(|e| Error::from(e).with_hint(format!("setting sequence {seq} on the target")))?;
        set.push(format!(
            "{seq} = {last}{}",
            if called { "" } else { " (not called)" }
        ));
    }
    Ok(set)
}

/// Runs pg_dump for one section of `tables` against `from` (connection
/// through libpq's environment, the caller's other PG* variables
/// removed: the password never on a command line).
fn dump(pg_dump: &Path, from: &Target, tables: &[QualifiedName], section: &str) -> Result<String> {
    let mut cmd = Command::new(pg_dump);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(from.libpq_env());
    cmd.args([
        "--schema-only",
        &format!("--section={section}"),
        "--no-owner",
        "--no-privileges",
        "--no-tablespaces",
        "--no-security-labels",
        "--strict-names",
        // The script goes to the target through a UTF-8 session, whatever
        // the source database's encoding (non-ASCII names, defaults).
        "--encoding=UTF8",
    ]);
    for t in tables {
        // A pattern in double quotes matches exactly (no case folding,
        // no wildcards); `""` is a quote, as in SQL.
        cmd.arg("-t").arg(t.quoted());
    }
    let out = cmd.output().map_err(|e| {
        Error::config(format!("cannot run {}: {e}", pg_dump.display()))
            .with_hint("set PGTIDE_PG_DUMP to a working pg_dump")
    })?;
    if !out.status.success() {
        return Err(Error::new(
            ErrorKind::Server,
            format!(
                "pg_dump --section={section} of the source failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        )
        .with_hint(
            "pg_dump runs with the --from connection; it needs to read the tables' definitions",
        ));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Error::bug("pg_dump printed something that is not UTF-8"))
}

/// pg_dump's script as plain SQL for `target`: psql's `\restrict` lines
/// dropped, other backslash lines refused, `SET` lines for parameters the
/// target does not know left out.
async fn script(target: &Client, dump: &str) -> Result<String> {
    let known: HashSet<String> = target
        .query("SELECT name FROM pg_catalog.pg_settings", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut out = String::with_capacity(dump.len());
    for line in dump.lines() {
        if line.starts_with("\\restrict") || line.starts_with("\\unrestrict") {
            continue;
        }
        if line.starts_with('\\') {
            return Err(Error::bug(format!(
                "pg_dump printed a psql command pgtide does not know: {line:?}"
            )));
        }
        if let Some(name) = set_parameter(line) {
            if !known.contains(name) {
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// `SET name = value;` (a whole line, as pg_dump writes its header) ->
/// `name`.
fn set_parameter(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("SET ")?;
    let (name, value) = rest.split_once(" = ")?;
    (value.ends_with(';') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(name)
}

/// Runs `sql` on a new connection to `to`: its settings end with it.
async fn apply(to: &Target, sql: &str) -> Result<()> {
    let c = to.connect().await?;
    c.batch_execute(sql).await?;
    Ok(())
}

fn failed(e: Error, what: &str, tables: &[QualifiedName]) -> Error {
    let names: Vec<String> = tables.iter().map(ToString::to_string).collect();
    let mut out = Error::new(
        e.kind(),
        format!(
            "the target: {what} of {}: {}",
            names.join(", "),
            e.message()
        ),
    )
    .with_hint(
        "pg_dump --table dumps the tables and their own sequences only: the types, functions \
         (of defaults and triggers) and referenced tables they use must exist on the target, \
         or be copied in the same run",
    );
    if let Some(c) = e.sqlstate() {
        out = out.with_sqlstate(c.to_owned());
    }
    out.with_source(e)
}

#[cfg(test)]
mod tests {
    use super::set_parameter;

    #[test]
    fn set_lines() {
        assert_eq!(
            set_parameter("SET statement_timeout = 0;"),
            Some("statement_timeout")
        );
        assert_eq!(
            set_parameter("SET transaction_timeout = 0;"),
            Some("transaction_timeout")
        );
        assert_eq!(
            set_parameter("SET default_tablespace = '';"),
            Some("default_tablespace")
        );
        assert_eq!(
            set_parameter("SELECT pg_catalog.set_config('search_path', '', false);"),
            None
        );
        assert_eq!(set_parameter("SET x = 1"), None);
    }
}
