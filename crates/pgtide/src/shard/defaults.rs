//! Columns the input leaves out. A row loaded through the parent gets the
//! **parent's** default for them (or NULL): COPY and INSERT evaluate the
//! defaults of the relation they name, before the row is routed, and
//! postgres_fdw sends the value on. A row COPYed straight into a leaf
//! gets the leaf's own default instead, which a partition attached from
//! a table of its own may not have, or have otherwise (outside testing:
//! rows routed on the client stored NULL where the parent said `now()`).
//!
//! So: a parent's identity on such a column sends the whole load through
//! the coordinator ([`parent_reason`]); a leaf goes through it when its
//! defaults for them differ from the parent's (a foreign leaf whenever
//! the parent has one: no COPY on its server evaluates the parent's
//! expression) ([`check_leaves`]). A remote table's own defaults are
//! `remote_check`'s.

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use super::{LeafRoute, Plan};
use crate::catalog::{Column, Table};
use crate::error::Result;

/// What one relation gives a left-out column: `(relation, column,
/// default expression, identity)`.
type Fill = (Oid, String, Option<String>, bool);

/// The columns of `table` the input (`columns`) leaves out and that are
/// not generated.
fn left_out(table: &Table, columns: &[&Column]) -> Vec<String> {
    table
        .columns
        .iter()
        .filter(|c| !c.generated && !columns.iter().any(|l| l.name == c.name))
        .map(|c| c.name.clone())
        .collect()
}

async fn fills(client: &Client, oids: &[Oid], names: &[String]) -> Result<Vec<Fill>> {
    let rows = client
        .query(
            include_str!("../../sql/shard_defaults.sql"),
            &[&oids, &names],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}

/// Why no row can be routed on the client, if none can: the parent has
/// an identity on a column the input leaves out (its sequence is the
/// parent's, and only a load through the parent draws from it).
pub async fn parent_reason(
    client: &Client,
    table: &Table,
    columns: &[&Column],
) -> Result<Option<String>> {
    let names = left_out(table, columns);
    if names.is_empty() {
        return Ok(None);
    }
    let identity = fills(client, &[table.oid], &names)
        .await?
        .into_iter()
        .find(|f| f.3);
    Ok(identity.map(|(_, name, _, _)| {
        format!(
            "column {name:?} is not in the input and is an identity column of {}: its values \
             come from the parent",
            table.name
        )
    }))
}

/// Sends through the coordinator each leaf that would fill a left-out
/// column otherwise than the parent.
pub async fn check_leaves(
    client: &Client,
    table: &Table,
    columns: &[&Column],
    plan: &mut Plan,
) -> Result<()> {
    let names = left_out(table, columns);
    if names.is_empty() {
        return Ok(());
    }
    let mut oids = vec![table.oid];
    oids.extend(plan.tree.leaves.iter().map(|l| l.oid));
    let fills = fills(client, &oids, &names).await?;
    let of = |oid: Oid, name: &str| {
        fills
            .iter()
            .find(|f| f.0 == oid && f.1 == name)
            .map(|f| (f.2.clone(), f.3))
    };
    for (leaf, route) in plan.tree.leaves.iter().zip(plan.routes.iter_mut()) {
        if matches!(route, LeafRoute::Coordinator(_)) {
            continue;
        }
        let differs = names.iter().find(|name| {
            let parent = of(table.oid, name);
            match route {
                // No COPY on the shard evaluates the parent's expression.
                LeafRoute::Remote(_) => parent.is_some(),
                _ => of(leaf.oid, name) != parent,
            }
        });
        if let Some(name) = differs {
            let parent = match of(table.oid, name) {
                Some((Some(expr), _)) => format!("DEFAULT {expr}"),
                _ => "NULL".to_owned(),
            };
            *route = LeafRoute::Coordinator(format!(
                "column {name:?} is not in the input: through {} it is {parent}, which a COPY \
                 into the leaf would not give it",
                table.name
            ));
        }
    }
    Ok(())
}
