//! Sharded targets: a partitioned table whose rows are routed on the
//! client, each to its leaf partition, and loaded there directly: a local
//! partition on the coordinator, a postgres_fdw foreign table on its own
//! server (seed 002, issue 10).
//!
//! - [`tree`]: the partition tree from the catalog (hash, list, range,
//!   sub-partitions, DEFAULT), and routing one split record through it.
//! - [`key`]: key values read as the server reads them; hashing and
//!   comparing as the server does.
//! - [`hash`]: PostgreSQL's partition hash, bit for bit.
//! - [`remote`]: foreign leaves: server, user mapping, remote table.
//! - [`remote_check`]: what makes a direct load store a value otherwise
//!   than the coordinator would: column types, the session's settings.
//!
//! Whatever the client cannot route exactly (see `tree.rs`) goes through
//! the coordinator, which routes it itself: never a guess.

pub mod defaults;
pub mod hash;
pub mod key;
pub mod remote;
pub mod remote_check;
pub mod tree;

use serde::Serialize;
use tokio_postgres::Client;

use crate::catalog::{Column, Table};
use crate::conn::{Env, Target};
use crate::error::Result;
use copyfmt::fields::Fields;
pub use remote::{Overrides, Remote};
pub use tree::{Dest, Scratch, Tree};

/// How one leaf's rows are loaded.
#[derive(Debug, Clone)]
pub enum LeafRoute {
    /// COPY into the partition on the coordinator.
    Local,
    /// COPY into the remote table on the foreign server.
    Remote(Box<Remote>),
    /// Through the coordinator's parent table (the reason).
    Coordinator(String),
}

/// The routing plan of a load into a partitioned table.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The partition tree.
    pub tree: Tree,
    /// How each leaf of `tree.leaves` is loaded.
    pub routes: Vec<LeafRoute>,
    /// The input's columns, by name, in input order.
    pub columns: Vec<String>,
    /// [`Tree::fields_read`], once.
    pub fields_read: usize,
    /// The coordinator session's settings that shard sessions take
    /// ([`remote_check::SET_ON_SHARDS`]).
    pub settings: Vec<(String, String)>,
    /// A trigger on the coordinator's tree may drop rows without an error
    /// (`catalog::may_skip_rows_here`), so that a COPY there counts fewer
    /// rows than were sent. A remote table's: `Remote::may_skip`.
    pub local_may_skip: bool,
}

/// One leaf of the plan, for `--explain` and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct LeafPlan {
    /// The partition on the coordinator.
    pub partition: String,
    /// Its bound as the server prints it (with its parents' when
    /// sub-partitioned: the leaf's own only).
    pub bound: String,
    /// `local`, `remote` or `coordinator`.
    pub route: &'static str,
    /// Remote: foreign server name and where it is (no password).
    pub server: Option<String>,
    /// Remote: the remote table.
    pub remote_table: Option<String>,
    /// Coordinator: why.
    pub reason: Option<String>,
}

impl Plan {
    /// Reads the tree of `table` (partitioned) on `client` and resolves
    /// every leaf. `client` is a fresh session of the coordinator's: its
    /// settings are read first ([`Plan::settings`]), then its DateStyle and
    /// TimeZone are set here for reading bounds. A foreign leaf whose
    /// remote columns have other types goes through the coordinator
    /// ([`remote_check::check_types`]).
    pub async fn build(
        client: &Client,
        coordinator: &Target,
        table: &Table,
        columns: &[&Column],
        overrides: &Overrides,
        env: &Env,
    ) -> Result<Plan> {
        let settings = remote_check::read_settings(client).await?;
        let passed_on = remote_check::passed_on(client).await?;
        client.batch_execute(tree::session_sql()).await?;
        let cols: Vec<(String, u32, i32)> = columns
            .iter()
            .map(|c| (c.name.clone(), c.type_oid, c.typmod))
            .collect();
        let names: Vec<String> = cols.iter().map(|c| c.0.clone()).collect();
        let tree = Tree::read(client, table.oid, table.name.clone(), &cols).await?;
        let mut routes = Vec::with_capacity(tree.leaves.len());
        for leaf in &tree.leaves {
            let route = match leaf.relkind {
                'r' => LeafRoute::Local,
                'f' => match remote::resolve(
                    client,
                    leaf.oid,
                    &leaf.name,
                    &names,
                    coordinator,
                    overrides,
                    env,
                )
                .await?
                {
                    remote::ForeignLeaf::Direct(r) => LeafRoute::Remote(r),
                    remote::ForeignLeaf::Coordinator(why) => LeafRoute::Coordinator(why),
                },
                k => LeafRoute::Coordinator(format!("relation kind {k:?}")),
            };
            routes.push(route);
        }
        for name in overrides.keys() {
            let used = routes
                .iter()
                .any(|r| matches!(r, LeafRoute::Remote(x) if &x.server == name));
            if !used {
                return Err(crate::Error::config(format!(
                    "--shard-db names foreign server {name:?}, which holds no partition of {}",
                    table.name
                )));
            }
        }
        let mut plan = Plan {
            fields_read: tree.fields_read(),
            tree,
            routes,
            columns: names,
            settings,
            local_may_skip: crate::catalog::may_skip_rows_here(client, table.oid).await?,
        };
        remote_check::check_types(client, columns, &passed_on, &mut plan).await?;
        defaults::check_leaves(client, table, columns, &mut plan).await?;
        Ok(plan)
    }

    /// Whether the COPY into the parent may count fewer rows than were
    /// sent: a trigger on the tree, or a foreign leaf it loads (whose
    /// remote table pgtide does not see: postgres_fdw counts no row for
    /// one a remote trigger dropped).
    pub fn coordinator_may_skip(&self) -> bool {
        self.local_may_skip
            || self
                .tree
                .leaves
                .iter()
                .zip(&self.routes)
                .any(|(leaf, route)| {
                    leaf.relkind == 'f' && matches!(route, LeafRoute::Coordinator(_))
                })
    }

    /// Where the record split into `fields` goes: a leaf loaded directly,
    /// or the coordinator. `fields` may hold only the first
    /// [`Tree::fields_read`] fields: a record with more fields than the
    /// table has columns is then routed by its key and refused by its
    /// leaf's server, just as the coordinator would have refused it.
    pub fn route(&self, fields: &Fields, s: &mut Scratch) -> Dest {
        if fields.len() < self.fields_read {
            return Dest::Coordinator; // a key is missing: the server reports it
        }
        match self.tree.route(fields, s) {
            Dest::Leaf(i) if matches!(self.routes[i], LeafRoute::Coordinator(_)) => {
                Dest::Coordinator
            }
            d => d,
        }
    }

    /// The plan leaf by leaf, plus the partitioned tables whose rows go
    /// through the coordinator, as `(table, reason)`.
    pub fn explain(&self) -> (Vec<LeafPlan>, Vec<(String, String)>) {
        let leaves = self
            .tree
            .leaves
            .iter()
            .zip(&self.routes)
            .map(|(leaf, route)| {
                let mut p = LeafPlan {
                    partition: leaf.name.to_string(),
                    bound: leaf.bound.clone(),
                    route: "local",
                    server: None,
                    remote_table: None,
                    reason: None,
                };
                match route {
                    LeafRoute::Local => {}
                    LeafRoute::Remote(r) => {
                        p.route = "remote";
                        p.server = Some(format!("{} ({})", r.server, r.target.redacted()));
                        p.remote_table = Some(r.table.to_string());
                    }
                    LeafRoute::Coordinator(why) => {
                        p.route = "coordinator";
                        p.reason = Some(why.clone());
                    }
                }
                p
            })
            .collect();
        let mut nodes = Vec::new();
        collect_coordinator_nodes(&self.tree.root, &mut nodes);
        (leaves, nodes)
    }
}

fn collect_coordinator_nodes(node: &tree::Node, out: &mut Vec<(String, String)>) {
    if let Some(why) = &node.coordinator {
        out.push((node.name.to_string(), why.clone()));
    }
    for c in node.children() {
        if let tree::Child::Node(n) = c {
            collect_coordinator_nodes(n, out);
        }
    }
}
