//! The shard servers of `bench shards`: one or two throwaway servers that
//! hold the tables of the [`PARTITIONS`] foreign partitions (on two, the
//! first half on one and the rest on the other), the foreign servers and
//! the partitioned parent that point at them, what each run checks there,
//! and their removal.

use pgtide::cluster::PgBin;
use pgtide::ident::{quote, quote_literal};
use pgtide::Result;
use tokio_postgres::Client;

use super::{expect_placed, misplaced_sql, COLUMNS, PARENT, PARTITIONS};
use crate::datasets::create_table;
use crate::expect_rows;
use crate::remote::{drop_server, Remote};

/// The foreign servers' names on the main server, in order.
pub const NAMES: [&str; 2] = ["shards", "shards_b"];

/// The shard servers, and the parent whose partitions live there.
pub struct Shards {
    remotes: Vec<Remote>,
}

impl Shards {
    /// Starts `servers` (1 or 2) shard servers, creates their tables, and
    /// on the main server the foreign servers (`batch_size` 100, the
    /// issue's measurement), user mappings and the partitioned parent. On
    /// failure, whatever was made is removed again.
    pub async fn start(client: &Client, bin: Option<PgBin>, servers: usize) -> Result<Shards> {
        let mut shards = Shards {
            remotes: Vec::new(),
        };
        let made = shards
            .make(client, bin, servers.clamp(1, NAMES.len()))
            .await;
        match made {
            Ok(()) => Ok(shards),
            Err(e) => {
                let _ = shards.stop(client).await;
                for name in NAMES {
                    let _ = drop_server(client, name).await;
                }
                Err(e)
            }
        }
    }

    async fn make(&mut self, client: &Client, bin: Option<PgBin>, servers: usize) -> Result<()> {
        for name in &NAMES[..servers] {
            let remote = Remote::start(client, bin.clone(), name, ", batch_size '100'").await?;
            self.remotes.push(remote);
        }
        let parent = quote(PARENT);
        let mut sql = format!("{} PARTITION BY HASH (n);", create_table(&parent, COLUMNS));
        let mut remote_sql = vec![String::new(); servers];
        for i in 0..PARTITIONS {
            let home = self.home(i);
            remote_sql[home].push_str(&format!("{};", create_table(&remote_table(i), COLUMNS)));
            sql.push_str(&format!(
                "CREATE FOREIGN TABLE {} PARTITION OF {parent} \
                   FOR VALUES WITH (modulus {PARTITIONS}, remainder {i}) \
                   SERVER {} OPTIONS (table_name {});",
                quote(&partition(i)),
                quote(self.remotes[home].name),
                quote_literal(&format!("shards_r{i}")),
            ));
        }
        for (remote, sql) in self.remotes.iter().zip(&remote_sql) {
            remote.client.batch_execute(sql).await?;
        }
        client.batch_execute(&sql).await?;
        Ok(())
    }

    /// The server (index into the remotes) that holds partition `i`.
    fn home(&self, i: usize) -> usize {
        i * self.remotes.len() / PARTITIONS
    }

    /// Sets every foreign server's `batch_size`.
    pub async fn set_batch_size(&self, client: &Client, batch_size: u32) -> Result<()> {
        for remote in &self.remotes {
            let sql = format!(
                "ALTER SERVER {} OPTIONS (SET batch_size {})",
                quote(remote.name),
                quote_literal(&batch_size.to_string())
            );
            client.batch_execute(&sql).await?;
        }
        Ok(())
    }

    /// The tables of partitions on server `home`.
    fn tables_on(&self, home: usize) -> Vec<String> {
        (0..PARTITIONS)
            .filter(|&i| self.home(i) == home)
            .map(remote_table)
            .collect()
    }

    /// Empties every shard table, then writes a checkpoint on each shard
    /// server, as the runner does on the main server before every run: a
    /// run must not pay for the dirty pages and WAL of the run before it
    /// (without it, the direct loads with 2 workers took 0.3 s more than
    /// the same loads into local partitions; with 1 worker, no more).
    pub async fn truncate(&self) -> Result<()> {
        for (home, remote) in self.remotes.iter().enumerate() {
            let sql = format!("TRUNCATE {}; CHECKPOINT", self.tables_on(home).join(", "));
            remote.client.batch_execute(&sql).await?;
        }
        Ok(())
    }

    /// Every row arrived once, each on the partition the server's own hash
    /// says (`satisfies_hash_partition` on the coordinator, which reads
    /// each partition back through postgres_fdw; untimed). The rows on
    /// the servers add up to the file's, the first text column (unique in
    /// the file) is distinct on each server, and a row on two servers
    /// would be on a partition its hash does not choose.
    pub async fn check(&self, coordinator: &Client, rows: u64, who: &str) -> Result<()> {
        let (mut n, mut distinct) = (0, 0);
        for (home, remote) in self.remotes.iter().enumerate() {
            let parts: Vec<String> = self
                .tables_on(home)
                .iter()
                .map(|t| format!("SELECT c1 FROM {t}"))
                .collect();
            let sql = format!(
                "SELECT count(*), count(DISTINCT c1) FROM ({}) x",
                parts.join(" UNION ALL ")
            );
            let row = remote.client.query_one(&sql, &[]).await?;
            n += row.get::<_, i64>(0) as u64;
            distinct += row.get::<_, i64>(1) as u64;
        }
        expect_rows(n, rows, who)?;
        expect_rows(distinct, rows, who)?;
        // OFFSET 0: evaluated here, not pushed to the shard.
        let misplaced = misplaced_sql(PARENT, partition, " OFFSET 0");
        expect_placed(coordinator, &misplaced, who).await
    }

    /// Drops the parent and the foreign servers (their user mappings hold
    /// passwords) and stops the shard servers.
    pub async fn stop(self, client: &Client) -> Result<()> {
        let sql = format!("DROP TABLE IF EXISTS {}", quote(PARENT));
        let dropped = client.batch_execute(&sql).await;
        let mut stopped = Ok(());
        for remote in self.remotes {
            stopped = stopped.and(remote.stop(client).await);
        }
        dropped?;
        stopped
    }
}

/// The coordinator's foreign table for partition `i`.
fn partition(i: usize) -> String {
    format!("shards_p{i}")
}

/// Partition `i`'s table on its shard server.
fn remote_table(i: usize) -> String {
    quote(&format!("shards_r{i}"))
}
