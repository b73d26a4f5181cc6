//! `--single-transaction --rejects`: isolation inside the load's one
//! transaction (`load/single.rs`). Each chunk is attempted under a
//! savepoint, so that a bad row rolls back that attempt and not the
//! transaction; a chunk that failed is isolated under a savepoint of its
//! own ([`Loader::enter_chunk`]), which stands for the transaction that
//! `reject::isolate` would otherwise begin and commit per chunk.

use std::mem::take;

use super::super::step::in_step_after;
use super::attempts::{Open, UNDO_ATTEMPT};
use super::{Batch, BatchError, Loader};

impl Loader {
    /// Loads `batch` (a whole chunk) under a savepoint of the load's open
    /// transaction, as [`Loader::attempt`] does. After a failure the
    /// attempt is already rolled back and its savepoint released, so that
    /// the transaction is usable at once (screening asks the session for
    /// its encoders) and savepoints do not nest deeper with every failed
    /// chunk. No `COPY .. FREEZE` here: PostgreSQL allows it only in the
    /// very subtransaction that emptied or created the table.
    pub async fn attempt_chunk(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        self.ensure_stage().await?;
        let result = self.attempt(batch).await;
        // Through tokio-postgres the savepoint was rolled back to and
        // released already; on the wire it was left open and failed.
        if result.is_err()
            && !self.is_closed()
            && take(&mut self.open) == Open::Failed
            && self.client.batch_execute(UNDO_ATTEMPT).await.is_err()
        {
            self.discard();
        }
        result
    }

    /// Opens the savepoint that stands for a chunk's own transaction
    /// while its bad rows are isolated ([`Loader::leave_chunk`] keeps
    /// what it loaded, [`Loader::undo_chunk`] drops it).
    pub async fn enter_chunk(&mut self) -> Result<(), BatchError> {
        let (settle, _) = take(&mut self.open).settle();
        let sql = format!("{settle}SAVEPOINT pgtide_chunk");
        if let Err(e) = self.client.batch_execute(&sql).await {
            self.discard();
            return Err(BatchError::plain(e));
        }
        self.outer = Some(take(&mut self.pending));
        Ok(())
    }

    /// Keeps what the chunk's isolation loaded: its savepoint released
    /// into the load's transaction, its counts added to the load's. An
    /// error leaves the transaction in an unknown state: the connection
    /// is closed, and the load rolls back.
    pub async fn leave_chunk(&mut self) -> Result<(), BatchError> {
        let (settle, _) = take(&mut self.open).settle();
        let sql = format!("{settle}RELEASE SAVEPOINT pgtide_chunk");
        let released = self.client.batch_execute(&sql).await;
        let chunk = take(&mut self.pending);
        self.pending = self.outer.take().unwrap_or_default();
        match released {
            Ok(()) => {
                self.pending.absorb(chunk);
                Ok(())
            }
            Err(e) => {
                self.discard();
                Err(BatchError::plain(e))
            }
        }
    }

    /// Drops what the chunk's isolation did, back to its savepoint; the
    /// load's transaction goes on. A connection that cannot be proven in
    /// step is closed (the load then rolls back).
    pub async fn undo_chunk(&mut self) {
        self.open = Open::Nothing;
        if let Some(outer) = self.outer.take() {
            self.pending = outer;
        }
        let sql = "ROLLBACK TO SAVEPOINT pgtide_chunk; RELEASE SAVEPOINT pgtide_chunk";
        if !in_step_after(&self.client, sql).await {
            self.discard();
        }
    }

    /// `SET CONSTRAINTS ALL IMMEDIATE` in the load's transaction, after
    /// settling what the last attempt left open (a failed attempt leaves
    /// the transaction aborted until then).
    pub async fn constraints_now(&mut self) -> Result<(), tokio_postgres::Error> {
        let (settle, _) = take(&mut self.open).settle();
        let sql = format!("{settle}SET CONSTRAINTS ALL IMMEDIATE");
        self.client.batch_execute(&sql).await
    }
}
