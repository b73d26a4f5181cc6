//! The loader's `--on-conflict` work (`load/upsert.rs` says why): rows
//! COPYed into the session's staging table, ahead of their turn or inside
//! the batch's transaction, then merged; and screening a failed chunk
//! (`load/screen.rs`) with the session's encoders.

use std::sync::Arc;

use bytes::Bytes;
use copyfmt::scan;

use super::{binary, rollback_in_step, Batch, BatchError, Loader};
use crate::chunk::Chunk;
use crate::load::screen::MAX_SHARE;
use crate::load::upsert::Merged;

impl Loader {
    /// The method's statements; with `--on-conflict`, into the staging
    /// table (unless [`Loader::stage`] put this batch there already), then
    /// the merge.
    pub(super) async fn run_method(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        let Some(upsert) = self.spec.upsert.clone() else {
            return self.send_rows(batch).await;
        };
        self.merged_now = Merged::default();
        let staged = self
            .staged
            .take()
            .is_some_and(|s| same_bytes(&s, &batch.data));
        let emptied = std::mem::take(&mut self.stage_emptied);
        let rows = if staged {
            batch.records
        } else {
            if !emptied {
                self.client
                    .batch_execute(&upsert.truncate_sql)
                    .await
                    .map_err(BatchError::plain)?;
            }
            self.send_rows(batch).await?
        };
        if let Some(rounds) = &upsert.rounds {
            // Each row through the triggers (`load/upsert/rounds.rs`).
            let last: i64 = self
                .client
                .query_one(rounds.number_sql.as_str(), &[])
                .await
                .map_err(BatchError::plain)?
                .get(0);
            for round in 1..=last {
                self.merge_round(rounds, round).await?;
            }
            return Ok(rows);
        }
        let row = self
            .client
            .query_one(upsert.merge_sql.as_str(), &[])
            .await
            .map_err(BatchError::plain)?;
        self.merged_now = crate::load::upsert::merged(&row);
        let winners = row.get::<_, i64>(2) as u64;
        if winners < rows {
            // A key came more than once: the rows that lost are checked
            // by the server too (`Upsert::losers_sql`).
            let row = self
                .client
                .query_one(upsert.losers_sql.as_str(), &[])
                .await
                .map_err(BatchError::plain)?;
            self.merged_now.add(crate::load::upsert::merged(&row));
        }
        Ok(rows)
    }

    /// Merges round `round`; when a BEFORE INSERT trigger may fold rows
    /// into one key, under a savepoint, and a round it folded (21000) is
    /// merged again row by row (`upsert/rounds.rs`).
    async fn merge_round(
        &mut self,
        rounds: &crate::load::upsert::rounds::Rounds,
        round: i64,
    ) -> Result<(), BatchError> {
        let client = &self.client;
        if !rounds.folds {
            let row = client
                .query_one(rounds.merge_sql.as_str(), &[&round])
                .await
                .map_err(BatchError::plain)?;
            self.merged_now.add(crate::load::upsert::merged(&row));
            return Ok(());
        }
        client
            .batch_execute("SAVEPOINT pgtide_round")
            .await
            .map_err(BatchError::plain)?;
        match client.query_one(rounds.merge_sql.as_str(), &[&round]).await {
            Ok(row) => self.merged_now.add(crate::load::upsert::merged(&row)),
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::CARDINALITY_VIOLATION) => {
                let undo = format!("ROLLBACK TO SAVEPOINT pgtide_round; {}", rounds.index_sql);
                client
                    .batch_execute(&undo)
                    .await
                    .map_err(BatchError::plain)?;
                let rows = client
                    .query(rounds.rows_sql.as_str(), &[&round])
                    .await
                    .map_err(BatchError::plain)?;
                for r in rows {
                    let at: i64 = r.get(0);
                    // Unnamed (no statement to close behind the raw wire's
                    // back), in one round trip.
                    let row = client
                        .query_typed(
                            rounds.one_sql.as_str(),
                            &[(&at, tokio_postgres::types::Type::INT8)],
                        )
                        .await
                        .map_err(BatchError::plain)?;
                    // An aggregate: always one row.
                    if let Some(row) = row.first() {
                        self.merged_now.add(crate::load::upsert::merged(row));
                    }
                }
            }
            Err(e) => return Err(BatchError::plain(e)),
        }
        client
            .batch_execute("RELEASE SAVEPOINT pgtide_round")
            .await
            .map_err(BatchError::plain)
    }

    /// The records of `chunk` (which failed) that the server will refuse,
    /// as far as the client can tell (`load/screen.rs`); empty when it
    /// cannot tell.
    pub async fn screen(&mut self, chunk: &Chunk) -> Vec<usize> {
        let spec = self.spec.clone();
        if self.state.encoders.is_none() {
            let Ok(e) = binary::encoders(&self.client, &spec.setup).await else {
                return Vec::new();
            };
            self.state.encoders = Some(e.map(Arc::new));
        }
        let encoders = self.state.encoders.clone().flatten();
        crate::load::screen::suspects(&spec, encoders.as_deref().map(|e| e.as_slice()), chunk)
    }

    /// `--on-conflict`: `suspects` (the client's, ascending) and the
    /// records of `chunk` (which failed) that a CHECK constraint refuses,
    /// asked of the others staged in a transaction rolled back
    /// (`upsert/checks.rs`). Only the client's when the question fails
    /// (a bad value the client did not see stops the staging COPY) or
    /// when too many records look bad (as `load/screen.rs` gives up).
    /// Runs its own transaction: never inside an open one (not for
    /// `--single-transaction`, whose one transaction it would roll back).
    pub async fn check_suspects(&mut self, chunk: &Chunk, suspects: Vec<usize>) -> Vec<usize> {
        let Some(sql) = self
            .spec
            .upsert
            .as_ref()
            .and_then(|u| u.suspects_sql.clone())
        else {
            return suspects;
        };
        let mut kept = Vec::new();
        let mut data = Vec::with_capacity(chunk.data.len());
        let mut skip = suspects.iter().peekable();
        for (i, span) in scan::records_with(&self.spec.dialect, chunk.eol, &chunk.data).enumerate()
        {
            if skip.next_if_eq(&&i).is_none() {
                kept.push(i);
                data.extend_from_slice(&chunk.data[span.start..span.end]);
            }
        }
        let batch = Batch {
            data: data.into(),
            records: kept.len() as u64,
        };
        let Ok(found) = self.staged_query(&batch, &sql).await else {
            return suspects;
        };
        let mut all: Vec<usize> = found
            .iter()
            .filter_map(|&p| usize::try_from(p).ok().and_then(|p| kept.get(p).copied()))
            .chain(suspects.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        match all.len() * MAX_SHARE > chunk.records as usize {
            true => suspects,
            false => all,
        }
    }

    /// Stages `batch` in a transaction, runs `sql` (one int8 column) over
    /// it, and rolls back.
    async fn staged_query(&mut self, batch: &Batch, sql: &str) -> Result<Vec<i64>, BatchError> {
        let Some(upsert) = self.spec.upsert.clone() else {
            return Ok(Vec::new());
        };
        self.ensure_stage().await?;
        let opened = self
            .client
            .batch_execute(&format!("BEGIN; {}", upsert.truncate_sql))
            .await
            .map_err(BatchError::plain);
        let answer = match opened {
            Ok(()) => match self.send_rows(batch).await {
                Ok(_) => (self.client.query(sql, &[]).await)
                    .map(|rows| rows.iter().map(|r| r.get::<_, i64>(0)).collect())
                    .map_err(BatchError::plain),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        // Also when `BEGIN` ran and the `TRUNCATE` failed: no transaction
        // is left open for the isolation that follows.
        if !rollback_in_step(&self.client).await {
            self.discard();
        }
        answer
    }

    /// [`Loader::screen`] as a task for another thread (the worker screens
    /// the next chunk while this one loads), once the session's encoders
    /// are known; `None` before (the first screen fetches them).
    pub fn screener(&self) -> Option<impl FnOnce(&Chunk) -> Vec<usize> + Send + 'static> {
        let encoders = self.state.encoders.clone()?;
        let spec = self.spec.clone();
        Some(move |chunk: &Chunk| {
            crate::load::screen::suspects(&spec, encoders.as_deref().map(|e| e.as_slice()), chunk)
        })
    }

    /// `--on-conflict`: COPYs `batch` into the staging table in a
    /// transaction of its own (nothing to make durable: the table is
    /// temporary), so that it is ready when the batch's turn to merge
    /// comes (`load/order.rs`). A failed COPY is reported as `load` would
    /// report it; the batch's `load` then COPYs again in its transaction.
    pub async fn stage(&mut self, batch: &Batch) -> Result<(), BatchError> {
        let Some(upsert) = self.spec.upsert.clone() else {
            return Ok(());
        };
        self.staged = None;
        self.ensure_stage().await?;
        let open = format!(
            "BEGIN; SET LOCAL synchronous_commit = off; {}",
            upsert.truncate_sql
        );
        if let Err(e) = self.client.batch_execute(&open).await {
            if !rollback_in_step(&self.client).await {
                self.discard();
            }
            return Err(BatchError::plain(e));
        }
        match self.send_rows(batch).await {
            Ok(rows) => {
                self.client
                    .batch_execute("COMMIT")
                    .await
                    .map_err(BatchError::plain)?;
                // A count that differs is left to the batch's own
                // transaction, which checks it (`check_count`).
                if rows == batch.records {
                    self.staged = Some(batch.data.clone());
                }
                Ok(())
            }
            Err(e) => {
                if !rollback_in_step(&self.client).await {
                    self.discard();
                }
                Err(e)
            }
        }
    }

    /// `--on-conflict`: creates the session's staging table, outside any
    /// transaction (one that rolled back would take the table with it).
    pub(super) async fn ensure_stage(&mut self) -> Result<(), BatchError> {
        let Some(upsert) = self.spec.upsert.clone() else {
            return Ok(());
        };
        if !self.stage_ready {
            self.client
                .batch_execute(&upsert.create_sql)
                .await
                .map_err(BatchError::plain)?;
            self.stage_ready = true;
        }
        Ok(())
    }
}

/// The same bytes, by identity: a batch is a slice of its chunk.
fn same_bytes(a: &Bytes, b: &Bytes) -> bool {
    a.as_ptr() == b.as_ptr() && a.len() == b.len()
}
