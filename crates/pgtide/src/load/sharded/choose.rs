//! Whether a load into a partitioned table is routed on the client
//! (`--route`, the options that allow it) and its routing plan.

use super::{LoadOptions, Method};
use crate::catalog::{Column, Table};
use crate::conn::{Env, Target};
use crate::copyopts::{CopyFormat, Header};
use crate::error::{Error, Result};
use crate::shard::{LeafRoute, Plan};

/// `--route`: where rows of a partitioned target are routed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Route {
    /// On the client when a leaf is a postgres_fdw table loaded directly
    /// (where it pays: the coordinator would insert row by row); through
    /// the coordinator when every leaf is local.
    #[default]
    Auto,
    /// Always on the client (local leaves loaded into the partition).
    Direct,
    /// Always through the coordinator (the parent table's COPY).
    Coordinator,
}

impl Route {
    /// Parses `auto`, `direct`, `coordinator`.
    pub fn parse(s: &str) -> Result<Route> {
        match s {
            "auto" => Ok(Route::Auto),
            "direct" => Ok(Route::Direct),
            "coordinator" => Ok(Route::Coordinator),
            _ => Err(Error::config(format!(
                "--route {s:?}: expected auto, direct or coordinator"
            ))),
        }
    }
}

/// Why the load cannot route on the client, if it cannot (options only).
pub fn eligible(opts: &LoadOptions) -> std::result::Result<(), &'static str> {
    if opts.route == Route::Coordinator {
        return Err("--route coordinator");
    }
    if opts.method != Method::Copy {
        return Err("only --method copy routes on the client");
    }
    if opts.copy.format == CopyFormat::Binary {
        // The partition key is computed from a field's text: a binary
        // field's bytes read as text would be another value (an int4
        // whose four bytes are the digits "1234" is 825373492), and its
        // row would go to another leaf's server (outside testing).
        return Err("binary input: the client reads partition keys as text");
    }
    if opts.truncate {
        return Err("--truncate is not yet supported with client-side routing");
    }
    if opts.copy.header == Header::Match {
        return Err("HEADER MATCH is not yet supported with client-side routing");
    }
    if opts.copy.encoding.as_deref().is_some_and(|e| {
        let n: String = e.chars().filter(char::is_ascii_alphanumeric).collect();
        !n.eq_ignore_ascii_case("utf8") && !n.eq_ignore_ascii_case("unicode")
    }) {
        return Err("the input is not UTF-8");
    }
    Ok(())
}

/// The load's routing plan, or `None` (with the reason) when it goes
/// through the coordinator. Reads the tree in a session of its own.
pub async fn plan(
    target: &Target,
    opts: &LoadOptions,
    table: &Table,
    columns: &[&Column],
) -> Result<std::result::Result<Plan, String>> {
    if let Err(why) = eligible(opts) {
        return Ok(Err(why.into()));
    }
    let client = target.connect().await?;
    let enc: String = client.query_one("SHOW server_encoding", &[]).await?.get(0);
    if enc != "UTF8" {
        return Ok(Err(format!(
            "the coordinator's encoding is {enc}, not UTF8"
        )));
    }
    if let Some(why) = crate::shard::defaults::parent_reason(&client, table, columns).await? {
        return Ok(Err(why));
    }
    let plan = Plan::build(
        &client,
        target,
        table,
        columns,
        &opts.shard_db,
        &Env::from_process(),
    )
    .await?;
    let remote = plan
        .routes
        .iter()
        .any(|r| matches!(r, LeafRoute::Remote(_)));
    if opts.route == Route::Auto && !remote {
        // A foreign leaf that must go through the coordinator says why.
        let foreign = plan
            .tree
            .leaves
            .iter()
            .zip(&plan.routes)
            .find_map(|(leaf, route)| match (leaf.relkind, route) {
                ('f', LeafRoute::Coordinator(why)) => Some((&leaf.name, why)),
                _ => None,
            });
        return Ok(Err(match foreign {
            Some((leaf, why)) => {
                format!("no foreign leaf can be loaded on its server ({leaf}: {why})")
            }
            None => {
                "no leaf is a postgres_fdw table (--route direct to route local partitions too)"
                    .into()
            }
        }));
    }
    Ok(Ok(plan))
}
