//! The loader's side of `load/references.rs`: the query that finds a
//! failed range's rows whose foreign keys have no referenced row, asked
//! inside isolation's one transaction, under a savepoint of its own so
//! that a query the server refuses (a value that does not convert, no
//! privilege to read a referenced table) leaves the transaction usable.

use copyfmt::scan::Eol;
use tokio_postgres::types::{ToSql, Type};

use super::{Batch, Loader};

impl Loader {
    /// The 0-based records of `batch` (read in the chunk's `eol` style)
    /// that a foreign key will refuse, as far as one query can tell;
    /// `None` when it cannot tell (no such key, fields it cannot read,
    /// the query failed: then it is not asked again on this connection).
    pub async fn missing_references(&mut self, batch: &Batch, eol: Eol) -> Option<Vec<u64>> {
        let refs = self
            .spec
            .references
            .clone()
            .filter(|_| !self.references_refused)?;
        let arrays = refs.params((&self.spec.dialect, &self.spec.setup), eol, &batch.data)?;
        self.settle().await.ok()?;
        self.client
            .batch_execute("SAVEPOINT pgtide_references")
            .await
            .ok()?;
        // The unnamed statement: a named one would be closed when dropped,
        // by a message whose answer arrives unasked while attempts read
        // the raw stream (`conn/tap.rs`), and the connection hangs.
        let params: Vec<(&(dyn ToSql + Sync), Type)> = arrays
            .iter()
            .map(|a| (a as &(dyn ToSql + Sync), Type::TEXT_ARRAY))
            .collect();
        let rows = self.client.query_typed(refs.sql.as_str(), &params).await;
        let end = match rows {
            Ok(_) => "RELEASE SAVEPOINT pgtide_references",
            Err(_) => {
                "ROLLBACK TO SAVEPOINT pgtide_references; RELEASE SAVEPOINT pgtide_references"
            }
        };
        if self.client.batch_execute(end).await.is_err() {
            self.discard();
            return None;
        }
        let Ok(rows) = rows else {
            self.references_refused = true;
            return None;
        };
        Some(rows.iter().map(|r| r.get::<_, i64>(0) as u64).collect())
    }
}
