//! What a load through the coordinator would do to a value and a load
//! straight into the remote table would not: a row routed on the client
//! must be stored as the parent table would store it.
//!
//! - **Types.** Through the coordinator, each value is read by the
//!   foreign table's column type (a typmod rounds `numeric(10,2)` and
//!   refuses a too long `varchar(3)`; a domain checks its constraints),
//!   then sent on. Straight into the remote table it is read by the remote
//!   column's type. So a leaf is loaded directly only when every loaded
//!   column has the same type (schema, name, typmod) on both sides
//!   ([`check_types`]).
//! - **Settings.** Through the coordinator, dates, times and intervals
//!   are read with the coordinator session's DateStyle, TimeZone and
//!   IntervalStyle (postgres_fdw then sends them in a fixed form). A
//!   session on a shard would read them with the shard's own settings
//!   (of its role or database), so it takes the coordinator's
//!   ([`READ_SETTINGS`], [`apply_settings`]).

use tokio_postgres::Client;

use super::{LeafRoute, Plan};
use crate::catalog::Column;
use crate::error::Result;

/// Settings that decide how a value's text is read into its type (input
/// functions), beyond the server's encoding.
pub const READ_SETTINGS: &[&str] = &[
    "DateStyle",
    "TimeZone",
    "IntervalStyle",
    "array_nulls",
    "xmloption",
    "lc_monetary",
];

/// `money` and `money[]`: the only columns `lc_monetary` reads.
const MONEY_TYPES: [u32; 2] = [790, 791];

/// The coordinator session's values of [`READ_SETTINGS`], read on a fresh
/// session of its own before anything changed them. `lc_monetary` only
/// when a `money` column is loaded: a shard may lack the locale.
pub async fn read_settings(client: &Client, columns: &[&Column]) -> Result<Vec<(String, String)>> {
    let money = columns.iter().any(|c| MONEY_TYPES.contains(&c.type_oid));
    let names: Vec<String> = READ_SETTINGS
        .iter()
        .filter(|s| money || **s != "lc_monetary")
        .map(|s| (*s).to_owned())
        .collect();
    let rows = client
        .query(
            "SELECT n, pg_catalog.current_setting(n) FROM unnest($1::text[]) AS n",
            &[&names],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Gives a shard's session the coordinator's `settings` (only those that
/// differ, so that a locale the shard lacks matters only when it differs).
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
struct TypeId {
    schema: String,
    name: String,
    typmod: i32,
}

/// Sends each foreign leaf whose remote columns differ in type from the
/// coordinator's through the coordinator, with the reason. `client` is a
/// coordinator session; `columns` the loaded columns. A server that
/// cannot be reached now is left as it is: the load's own connection
/// reports it.
pub async fn check_types(client: &Client, columns: &[&Column], plan: &mut Plan) -> Result<()> {
    let mut ours = Vec::with_capacity(columns.len());
    for c in columns {
        let row = client
            .query_one(
                "SELECT n.nspname::text, t.typname::text FROM pg_catalog.pg_type t \
                 JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = $1",
                &[&c.type_oid],
            )
            .await?;
        ours.push(TypeId {
            schema: row.get(0),
            name: row.get(1),
            typmod: c.typmod,
        });
    }
    let mut sessions: Vec<(String, Option<Client>)> = Vec::new();
    for route in plan.routes.iter_mut() {
        let LeafRoute::Remote(r) = route else {
            continue;
        };
        let at = match sessions.iter().position(|(s, _)| *s == r.server) {
            Some(i) => i,
            None => {
                sessions.push((r.server.clone(), r.target.connect().await.ok()));
                sessions.len() - 1
            }
        };
        let Some(remote) = &sessions[at].1 else {
            continue;
        };
        let rows = remote
            .query(
                include_str!("../../sql/shard_remote_types.sql"),
                &[&r.table.quoted()],
            )
            .await?;
        let mut why = None;
        for ((c, theirs_name), ours) in columns.iter().zip(&r.columns).zip(&ours) {
            let Some(row) = rows
                .iter()
                .find(|row| row.get::<_, String>(0) == *theirs_name)
            else {
                continue; // the remote COPY names the missing column
            };
            let theirs = TypeId {
                schema: row.get(1),
                name: row.get(2),
                typmod: row.get(3),
            };
            if theirs != *ours {
                why = Some(format!(
                    "column {:?} is {} here and {} in {} on server {} (the coordinator reads \
                     values by its own type)",
                    c.name,
                    c.type_name,
                    row.get::<_, String>(4),
                    r.table,
                    r.server
                ));
                break;
            }
        }
        if let Some(why) = why {
            *route = LeafRoute::Coordinator(why);
        }
    }
    Ok(())
}
