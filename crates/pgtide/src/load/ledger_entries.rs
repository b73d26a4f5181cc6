//! `pgtide ledger list|forget`: the loads the ledger holds, and clearing
//! them.

use tokio_postgres::Client;

use crate::error::Result;

/// One load in the ledger, for `pgtide ledger list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Entry {
    /// Canonical input path.
    pub input: String,
    /// The table.
    pub table: String,
    /// `None`: ranges whose every row is committed. For a load routed on
    /// the client, the server whose rows of the ranges are committed (on
    /// that server's ledger), or `@SERVER` on the coordinator: a marker
    /// saying SERVER's own ledger holds entries of this input (list them
    /// with `pgtide ledger list` against SERVER's database).
    pub shard: Option<String>,
    /// Size on disk when recorded.
    pub size: i64,
    /// Decompressed bytes committed.
    pub bytes_committed: i64,
    /// Rows committed.
    pub rows: i64,
    /// Ledger rows (committed ranges).
    pub ranges: i64,
    /// Runs that committed something.
    pub runs: i64,
    /// When the last range was committed.
    pub last_commit: String,
}

/// Every load in the ledger (none when there is no ledger yet).
pub async fn list(client: &Client) -> Result<Vec<Entry>> {
    if !exists(client).await? {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            "SELECT input, table_name, max(size), sum(end_byte - first_byte)::bigint, \
             coalesce(sum(rows) FILTER (WHERE shard IS NULL OR shard NOT LIKE '@%'), 0)::bigint, \
             count(*), count(DISTINCT run), max(committed_at)::text, shard \
             FROM pgtide.ledger GROUP BY input, table_name, shard \
             ORDER BY input, table_name, shard NULLS FIRST",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Entry {
            input: r.get(0),
            table: r.get(1),
            size: r.get(2),
            bytes_committed: r.get(3),
            rows: r.get(4),
            ranges: r.get(5),
            runs: r.get(6),
            last_commit: r.get(7),
            shard: r.get(8),
        })
        .collect())
}

/// Clears the ledger entries of `input` (a path: canonicalised when it
/// exists; `None`: every input) and, when given, of that table only
/// (`schema.name`, or a name matched in any schema). Returns the ledger
/// rows deleted, whatever their `shard`. The loaded rows are not touched.
/// The entries a load routed on the client wrote on other servers stay
/// there (the `@SERVER` markers name them): forget them with the same
/// command against each server's database.
pub async fn forget(client: &Client, input: Option<&str>, table: Option<&str>) -> Result<u64> {
    if !exists(client).await? {
        return Ok(0);
    }
    let path = input.map(|i| {
        std::fs::canonicalize(i).map_or_else(|_| i.to_owned(), |p| p.to_string_lossy().into_owned())
    });
    let n = client
        .execute(
            "DELETE FROM pgtide.ledger WHERE ($1::text IS NULL OR input = $1) \
             AND ($2::text IS NULL OR table_name = $2 \
                  OR right(table_name, length($2) + 1) = '.' || $2)",
            &[&path, &table],
        )
        .await?;
    Ok(n)
}

/// The servers whose own ledgers hold entries of `input` (`None`: of
/// every input), as the coordinator's `@SERVER` markers name them:
/// `(input, server)` pairs. [`forget`] on the coordinator leaves those
/// entries where they are; the caller says so.
pub async fn routed_servers(client: &Client, input: Option<&str>) -> Result<Vec<(String, String)>> {
    if !exists(client).await? {
        return Ok(Vec::new());
    }
    let path = input.map(|i| {
        std::fs::canonicalize(i).map_or_else(|_| i.to_owned(), |p| p.to_string_lossy().into_owned())
    });
    let rows = client
        .query(
            "SELECT DISTINCT input, substr(shard, 2) FROM pgtide.ledger \
             WHERE shard LIKE '@%' AND ($1::text IS NULL OR input = $1) ORDER BY 1, 2",
            &[&path],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

async fn exists(client: &Client) -> Result<bool> {
    let row = client
        .query_one("SELECT to_regclass('pgtide.ledger') IS NOT NULL", &[])
        .await?;
    Ok(row.get(0))
}
