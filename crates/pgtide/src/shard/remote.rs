//! Foreign leaves: where a postgres_fdw foreign table's rows really live.
//!
//! The connection is the one postgres_fdw itself would open, rebuilt on
//! the client: the libpq options of the foreign server (`host`, `port`,
//! `dbname`, `sslmode`, ...) and of the user mapping that applies to the
//! current user (its own, else PUBLIC: `user`, `password`, `sslcert`,
//! `sslkey`), read from `pg_foreign_server` and `pg_user_mappings`.
//! postgres_fdw's own options (`batch_size`, `fetch_size`, ...) are not
//! libpq's and are left out. What the catalog leaves unsaid is filled the
//! way pgtide fills any connection: a missing `host` (postgres_fdw would use
//! the coordinator server's own socket) means the coordinator's host, and
//! its port when `port` is missing too; a missing `user` is the
//! coordinator's user; a password the mapping does not show (it is shown
//! only to the mapped user and the server's owner) comes from `PGPASSWORD`
//! or `~/.pgpass`, as libpq would find it. `--shard-db 'server=conninfo'`
//! replaces all of this for one foreign server.
//!
//! The remote table is the foreign table's `schema_name` and `table_name`
//! options (postgres_fdw's defaults: the foreign table's own schema and
//! name), and each column its `column_name` option (default: its name).

use std::collections::BTreeMap;

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use crate::conn::{Env, Target};
use crate::error::{Error, Result};
use crate::ident::{self, QualifiedName};

/// libpq options postgres_fdw passes through that pgtide honours; any
/// other server or user mapping option is postgres_fdw's own.
const LIBPQ_OPTIONS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "connect_timeout",
    "options",
    "application_name",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "channel_binding",
    "target_session_attrs",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
];

/// `--shard-db` values: foreign server name -> conninfo.
pub type Overrides = BTreeMap<String, String>;

/// Parses one `--shard-db 'server_name=conninfo'`.
pub fn parse_override(s: &str) -> Result<(String, String)> {
    let (name, conninfo) = s.split_once('=').ok_or_else(|| {
        Error::config("--shard-db takes SERVER=CONNINFO").with_hint(
            "e.g. --shard-db 'shard1=host=10.0.0.2 dbname=app' (SERVER is the \
             foreign server's name, as in \\des)",
        )
    })?;
    if name.trim().is_empty() {
        return Err(Error::config(
            "--shard-db: the foreign server name is empty",
        ));
    }
    Ok((name.trim().to_owned(), conninfo.to_owned()))
}

/// A foreign leaf loaded on its own server.
#[derive(Clone, Debug)]
pub struct Remote {
    /// The foreign server's name on the coordinator.
    pub server: String,
    /// Where to connect (password redacted in `Debug`).
    pub target: Target,
    /// The remote table.
    pub table: QualifiedName,
    /// The remote name of each input column, in input order.
    pub columns: Vec<String>,
    /// The remote names of the foreign table's columns the input does
    /// not hold: postgres_fdw sends them NULL, a COPY on the server would
    /// give them its defaults (`remote_check::check_server`).
    pub others: Vec<String>,
    /// Whether the connection came from `--shard-db`.
    pub overridden: bool,
    /// The remote table may drop rows without an error (a trigger), so
    /// its server may count fewer rows than were sent; asked of the shard
    /// by `remote_check` (yes until then).
    pub may_skip: bool,
}

/// What a foreign leaf is: loadable directly, or not (and why).
#[derive(Clone, Debug)]
pub enum ForeignLeaf {
    /// A postgres_fdw table loaded on its server.
    Direct(Box<Remote>),
    /// Rows go through the coordinator.
    Coordinator(String),
}

/// Reads foreign table `oid` (named `name` on the coordinator) and says
/// how its rows are loaded. `input_columns` are the input's columns by
/// (coordinator) name.
pub async fn resolve(
    client: &Client,
    oid: Oid,
    name: &QualifiedName,
    input_columns: &[String],
    coordinator: &Target,
    overrides: &Overrides,
    env: &Env,
) -> Result<ForeignLeaf> {
    let row = client
        .query_one(include_str!("../../sql/shard_foreign.sql"), &[&oid])
        .await?;
    let wrapper: String = row.get(0);
    let server: String = row.get(1);
    let srv_options = options(&row.get::<_, Vec<String>>(2));
    let ft_options = options(&row.get::<_, Vec<String>>(3));
    let um_options: Option<Vec<String>> = row.get(4);
    let has_mapping: bool = row.get(5);
    let has_triggers: bool = row.get(6);
    if wrapper != "postgres_fdw" {
        return Ok(ForeignLeaf::Coordinator(format!(
            "foreign data wrapper {wrapper} (only postgres_fdw tables are loaded directly)"
        )));
    }
    if has_triggers {
        return Ok(ForeignLeaf::Coordinator(
            "the foreign table has INSERT triggers on the coordinator".into(),
        ));
    }
    let cols = client
        .query(include_str!("../../sql/shard_foreign_columns.sql"), &[&oid])
        .await?;
    let mut columns = Vec::with_capacity(input_columns.len());
    for c in input_columns {
        let Some(r) = cols.iter().find(|r| r.get::<_, String>(0) == *c) else {
            return Ok(ForeignLeaf::Coordinator(format!(
                "the foreign table has no column {c:?}"
            )));
        };
        columns.push(r.get::<_, String>(1));
    }
    // A default of the foreign table's own would be applied by the
    // coordinator, not by the remote table.
    if let Some(r) = cols
        .iter()
        .find(|r| !input_columns.contains(&r.get::<_, String>(0)) && r.get::<_, bool>(2))
    {
        return Ok(ForeignLeaf::Coordinator(format!(
            "column {:?} is not in the input and has a default on the coordinator",
            r.get::<_, String>(0)
        )));
    }
    let others = cols
        .iter()
        .filter(|r| !input_columns.contains(&r.get::<_, String>(0)))
        .map(|r| r.get::<_, String>(1))
        .collect();
    let table = QualifiedName {
        schema: Some(
            lookup(&ft_options, "schema_name")
                .unwrap_or_else(|| name.schema.clone().unwrap_or_default()),
        ),
        name: lookup(&ft_options, "table_name").unwrap_or_else(|| name.name.clone()),
    };
    let (target, overridden) = match overrides.get(&server) {
        Some(conninfo) => (Target::parse_with(conninfo, env)?, true),
        None => {
            if !has_mapping {
                return Ok(ForeignLeaf::Coordinator(format!(
                    "no user mapping for the current user on server {server}"
                )));
            }
            let user = um_options.as_deref().map(options).unwrap_or_default();
            let conninfo = conninfo(&srv_options, &user, coordinator);
            let target = Target::parse_with(&conninfo, env).map_err(|e| {
                Error::config(format!(
                    "cannot build a connection for foreign server {server}: {}",
                    e.message()
                ))
                .with_hint(format!(
                    "give it with --shard-db '{server}=CONNINFO', or load through the \
                     coordinator with --route coordinator"
                ))
            })?;
            (target, false)
        }
    };
    Ok(ForeignLeaf::Direct(Box::new(Remote {
        server,
        target,
        table,
        columns,
        others,
        overridden,
        may_skip: true,
    })))
}

/// `{key=value, ...}` option arrays as pairs (split at the first `=`).
fn options(raw: &[String]) -> Vec<(String, String)> {
    raw.iter()
        .filter_map(|o| o.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn lookup(opts: &[(String, String)], key: &str) -> Option<String> {
    opts.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

/// A libpq `key=value` string from server and user mapping options, the
/// gaps filled from the coordinator's target.
fn conninfo(
    server: &[(String, String)],
    user: &[(String, String)],
    coordinator: &Target,
) -> String {
    let mut pairs: Vec<(String, String)> = server
        .iter()
        .chain(user)
        .filter(|(k, _)| LIBPQ_OPTIONS.contains(&k.as_str()))
        .cloned()
        .collect();
    let has = |pairs: &[(String, String)], k: &str| pairs.iter().any(|(p, _)| p == k);
    if !has(&pairs, "host") && !has(&pairs, "hostaddr") {
        if !has(&pairs, "port") {
            pairs.push(("port".into(), coordinator.port().to_string()));
        }
        pairs.push(("host".into(), coordinator.host().to_owned()));
    }
    if !has(&pairs, "user") {
        pairs.push(("user".into(), coordinator.user().to_owned()));
    }
    if !has(&pairs, "application_name") {
        pairs.push((
            "application_name".into(),
            coordinator.application_name().to_owned(),
        ));
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", quote_value(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A libpq keyword value in single quotes, `\` and `'` escaped.
fn quote_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('\'');
    for c in v.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// `COPY schema.table ("a", "b") FROM STDIN ...` for the remote table.
pub fn remote_copy_target(remote: &Remote) -> (String, String) {
    (
        remote.table.quoted(),
        remote
            .columns
            .iter()
            .map(|c| ident::quote(c))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote_value("a b'c\\"), "'a b\\'c\\\\'");
    }

    #[test]
    fn overrides() {
        let (s, c) = parse_override("shard1=host=h dbname=x").unwrap();
        assert_eq!(s, "shard1");
        assert_eq!(c, "host=h dbname=x");
        assert!(parse_override("nothing").is_err());
    }
}
