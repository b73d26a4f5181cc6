//! What a load through the coordinator would do to a value and a load
//! straight into the remote table would not: a row routed on the client
//! must be stored as the parent table would store it.
//!
//! - **Types.** Through the coordinator, each value is read by the
//!   foreign table's column type (a typmod rounds `numeric(10,2)` and
//!   refuses a too long `varchar(3)`; a domain checks its constraints),
//!   then sent on. Straight into the remote table it is read by the remote
//!   column's type. So a leaf is loaded directly only when every loaded
//!   column has the same type on both sides (schema, name, typmod; an
//!   enum's labels), and no loaded column is of a domain, composite or
//!   range type of the user's, whose definitions could differ behind one
//!   name ([`check_types`]).
//! - **Settings.** Through the coordinator, dates, times and intervals
//!   are read with the coordinator session's DateStyle, TimeZone and
//!   IntervalStyle (postgres_fdw then sends them in a form that needs no
//!   setting). A session on a shard would read them with the shard's own
//!   settings (of its role or database), so it takes the coordinator's
//!   ([`SET_ON_SHARDS`], [`apply_settings`]). `array_nulls`, `xmloption`
//!   and `lc_monetary` are not pinned by postgres_fdw: a value is read by
//!   the coordinator's, then read again by the shard's. Where the two
//!   differ and a loaded column reads it, the leaf goes through the
//!   coordinator (`PASSED_ON`).
//! - **Defaults.** Through the coordinator, a column of the foreign table
//!   that the input does not hold is sent as NULL (postgres_fdw sends
//!   every column); a COPY on the server gives it the remote table's
//!   default. Such a leaf goes through the coordinator (`defaulted`).
//! - **Triggers.** A remote table whose trigger drops rows makes its
//!   server count fewer rows than were sent: the load counts them as
//!   skipped by the table rather than calling it a bug
//!   (`remote_may_skip`, `Remote::may_skip`).

use tokio_postgres::Client;

use super::{LeafRoute, Plan};
use crate::catalog::Column;
use crate::error::Result;
use crate::ident::QualifiedName;

/// Settings that shard sessions take from the coordinator's session.
pub const SET_ON_SHARDS: &[&str] = &["DateStyle", "TimeZone", "IntervalStyle"];

/// Settings read on both sides by the coordinator path, and the types
/// (OIDs, with their arrays) that they change the reading of.
const PASSED_ON: &[(&str, &[u32])] = &[
    ("array_nulls", &[]), // every array: see `Detail::array`
    ("xmloption", &[142, 143]),
    ("lc_monetary", &[790, 791]),
];

/// The coordinator session's values of `names`.
async fn settings(client: &Client, names: &[&str]) -> Result<Vec<(String, String)>> {
    let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    let rows = client
        .query(
            "SELECT n, pg_catalog.current_setting(n) FROM unnest($1::text[]) AS n",
            &[&names],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The coordinator session's values of [`SET_ON_SHARDS`], read on a
/// fresh session of its own before anything changed them.
pub async fn read_settings(client: &Client) -> Result<Vec<(String, String)>> {
    settings(client, SET_ON_SHARDS).await
}

/// Gives a shard's session the coordinator's `settings` (those that
/// differ).
pub async fn apply_settings(client: &Client, settings: &[(String, String)]) -> Result<()> {
    let (names, values): (Vec<String>, Vec<String>) = settings.iter().cloned().unzip();
    client
        .query(
            "SELECT pg_catalog.set_config(n, v, false) \
             FROM unnest($1::text[], $2::text[]) AS s(n, v) \
             WHERE pg_catalog.current_setting(n) IS DISTINCT FROM v",
            &[&names, &values],
        )
        .await?;
    Ok(())
}

/// A column's type, as both servers can compare it.
#[derive(Debug, PartialEq, Eq)]
struct Detail {
    schema: String,
    name: String,
    typmod: i32,
    /// `typtype` of the type, or of its element for an array.
    kind: String,
    /// Schema of the type, or of its element for an array.
    base_schema: String,
    /// An enum's labels in order (or its array's element's).
    labels: Option<Vec<String>>,
    /// An array type.
    array: bool,
}

impl Detail {
    fn from_row(row: &tokio_postgres::Row, at: usize) -> Detail {
        Detail {
            schema: row.get(at),
            name: row.get(at + 1),
            typmod: row.get(at + 2),
            kind: row.get(at + 3),
            base_schema: row.get(at + 4),
            labels: row.get(at + 5),
            array: row.get(at + 6),
        }
    }

    /// A type of the user's whose definition, not its name, says how a
    /// value is read (and that could differ on the shard behind one name).
    fn defined_by_user(&self) -> bool {
        matches!(self.kind.as_str(), "d" | "c" | "r" | "m") && self.base_schema != "pg_catalog"
    }
}

/// A shard's session for the checks, and its values of the settings read.
type Shard = (Client, Vec<(String, String)>);

/// Sends each foreign leaf that would store a value otherwise than the
/// coordinator (another type, setting or default) through the
/// coordinator, with the reason; asks each shard whether its table may
/// drop rows (`Remote::may_skip`). `client` is a
/// coordinator session whose settings are the load's (`settings`: its
/// values of `PASSED_ON`); `columns` the loaded columns. A server that
/// cannot be reached now is left as it is: the load's own connection
/// reports it.
pub async fn check_types(
    client: &Client,
    columns: &[&Column],
    settings: &[(String, String)],
    plan: &mut Plan,
) -> Result<()> {
    let mut ours = Vec::with_capacity(columns.len());
    for c in columns {
        let row = client
            .query_one(
                include_str!("../../sql/shard_type_detail.sql"),
                &[&c.type_oid],
            )
            .await?;
        let mut d = Detail::from_row(&row, 0);
        d.typmod = c.typmod;
        if d.defined_by_user() {
            let why = format!(
                "column {:?} is of type {}, defined on the coordinator: its values are read by \
                 that definition",
                c.name, c.type_name
            );
            for route in plan.routes.iter_mut() {
                if matches!(route, LeafRoute::Remote(_)) {
                    *route = LeafRoute::Coordinator(why.clone());
                }
            }
            return Ok(());
        }
        ours.push(d);
    }
    // The passed-on settings that a loaded column reads.
    let read: Vec<&(String, String)> = settings
        .iter()
        .filter(|(name, _)| {
            PASSED_ON.iter().any(|(n, oids)| {
                n == name
                    && columns
                        .iter()
                        .zip(&ours)
                        .any(|(c, d)| match oids.is_empty() {
                            true => d.array,
                            false => oids.contains(&c.type_oid),
                        })
            })
        })
        .collect();
    let mut sessions: Vec<(String, Option<Shard>)> = Vec::new();
    for route in plan.routes.iter_mut() {
        let LeafRoute::Remote(r) = route else {
            continue;
        };
        let at = match sessions.iter().position(|(s, _)| *s == r.server) {
            Some(i) => i,
            None => {
                let session = match r.target.connect().await {
                    Ok(c) => {
                        let names: Vec<&str> = read.iter().map(|(n, _)| n.as_str()).collect();
                        let theirs = self::settings(&c, &names).await?;
                        Some((c, theirs))
                    }
                    Err(_) => None,
                };
                sessions.push((r.server.clone(), session));
                sessions.len() - 1
            }
        };
        let Some((remote, theirs)) = &sessions[at].1 else {
            // Not reached now: what its table does to rows is unknown
            // (`Remote::may_skip` stays yes).
            continue;
        };
        let mut why =
            read.iter()
                .zip(theirs)
                .find(|((_, a), (_, b))| a != b)
                .map(|((name, a), (_, b))| {
                    format!(
                        "{name} is {a} here and {b} on server {} (postgres_fdw would read values \
                     with both)",
                        r.server
                    )
                });
        let rows = remote
            .query(
                include_str!("../../sql/shard_remote_types.sql"),
                &[&r.table.quoted()],
            )
            .await?;
        for ((c, theirs_name), ours) in columns.iter().zip(&r.columns).zip(&ours) {
            if why.is_some() {
                break;
            }
            let Some(row) = rows
                .iter()
                .find(|row| row.get::<_, String>(0) == *theirs_name)
            else {
                continue; // the remote COPY names the missing column
            };
            if Detail::from_row(row, 1) != *ours {
                why = Some(format!(
                    "column {:?} is {} here and {} in {} on server {} (the coordinator reads \
                     values by its own type)",
                    c.name,
                    c.type_name,
                    row.get::<_, String>(8),
                    r.table,
                    r.server
                ));
            }
        }
        if why.is_none() {
            why = defaulted(r, &rows);
        }
        match why {
            Some(why) => *route = LeafRoute::Coordinator(why),
            None => r.may_skip = remote_may_skip(remote, &r.table).await,
        }
    }
    Ok(())
}

/// Why a leaf cannot be loaded on its server when a column of the foreign
/// table is not in the input and has a default (or is an identity) in
/// the remote table: postgres_fdw stores NULL there (it sends every
/// column of the foreign table), a COPY on the server would store the
/// default. `rows`: `shard_remote_types.sql` of the remote table.
fn defaulted(r: &super::Remote, rows: &[tokio_postgres::Row]) -> Option<String> {
    let row = rows
        .iter()
        .find(|row| r.others.contains(&row.get::<_, String>(0)) && row.get::<_, bool>(9))?;
    Some(format!(
        "column {:?} of {} on server {} is not in the input and has a default there \
         (through the coordinator it is NULL, as postgres_fdw sends it)",
        row.get::<_, String>(0),
        r.table,
        r.server
    ))
}

/// Whether the remote table may drop rows without an error (a BEFORE row
/// trigger on INSERT, on it or its partitions, or a foreign table of its
/// own): then its server's COPY counts fewer rows than were sent, and
/// those are "skipped by the table". A table not found, or a question
/// the shard cannot answer, says yes (the load itself reports what is
/// wrong).
async fn remote_may_skip(remote: &Client, table: &QualifiedName) -> bool {
    let oid = remote
        .query_one("SELECT pg_catalog.to_regclass($1)::oid", &[&table.quoted()])
        .await
        .ok()
        .and_then(|r| r.get::<_, Option<tokio_postgres::types::Oid>>(0));
    match oid {
        Some(oid) => crate::catalog::may_skip_rows(remote, oid, false)
            .await
            .unwrap_or(true),
        None => true,
    }
}

/// The coordinator session's values of `PASSED_ON`.
pub async fn passed_on(client: &Client) -> Result<Vec<(String, String)>> {
    let names: Vec<&str> = PASSED_ON.iter().map(|(n, _)| *n).collect();
    settings(client, &names).await
}
