//! A second throwaway server that the scenario's server reaches through
//! postgres_fdw (`fdw-batch`'s remote, `shards`' shard server): the
//! extension, the second server, the foreign server and user mapping that
//! point at it, and their removal.
//!
//! The remote is started by [`second_server`] and reached at its own
//! address, so the main server must run on this host. The user mapping
//! holds the remote's password: [`Remote::stop`] drops it, and a scenario
//! whose set-up failed calls [`drop_server`].

use pgtide::cluster::{Cluster, PgBin};
use pgtide::ident::{quote, quote_literal};
use pgtide::{Error, Result};
use tokio_postgres::Client;

use crate::second_server;

/// The second server and a connection to it.
pub struct Remote {
    /// The foreign server's name on the main server.
    pub name: &'static str,
    /// The second server (stopped when dropped).
    pub cluster: Cluster,
    /// A connection to the second server.
    pub client: Client,
}

impl Remote {
    /// Creates postgres_fdw on the server `client` is on (its absence is a
    /// configuration error: the reason the remote's contenders are
    /// skipped), starts the second server with `bin`, and creates on the
    /// main server the foreign server `name` pointing at it, with
    /// `options` added to its own (e.g. `, batch_size '100'`), and the
    /// current user's user mapping.
    pub async fn start(
        client: &Client,
        bin: Option<PgBin>,
        name: &'static str,
        options: &str,
    ) -> Result<Remote> {
        client
            .batch_execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
            .await
            .map_err(|e| Error::config(format!("postgres_fdw is not available: {e}")))?;
        let cluster = second_server(client, bin).await?;
        let target = cluster.target();
        let remote = target.connect().await?;
        let server = quote(name);
        let lit = |s: &str| quote_literal(s);
        client
            .batch_execute(&format!(
                "DROP SERVER IF EXISTS {server} CASCADE; \
                 CREATE SERVER {server} FOREIGN DATA WRAPPER postgres_fdw \
                   OPTIONS (host {}, port {}, dbname {}{options}); \
                 CREATE USER MAPPING FOR CURRENT_USER SERVER {server} \
                   OPTIONS (user {}, password {});",
                lit(target.host()),
                lit(&target.port().to_string()),
                lit(target.dbname()),
                lit(target.user()),
                lit(cluster.password()),
            ))
            .await?;
        Ok(Remote {
            name,
            cluster,
            client: remote,
        })
    }

    /// Drops the foreign server (with its user mapping and foreign tables)
    /// from the main server, and stops the second server.
    pub async fn stop(self, client: &Client) -> Result<()> {
        let dropped = drop_server(client, self.name).await;
        drop(self.client);
        let cluster = self.cluster;
        let _ = tokio::task::spawn_blocking(move || drop(cluster)).await;
        dropped
    }
}

/// Drops the foreign server `name` and everything that depends on it.
pub async fn drop_server(client: &Client, name: &str) -> Result<()> {
    let sql = format!("DROP SERVER IF EXISTS {} CASCADE", quote(name));
    Ok(client.batch_execute(&sql).await?)
}
