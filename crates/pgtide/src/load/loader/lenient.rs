//! PostgreSQL 17's `ON_ERROR ignore` for a loader's COPY: bad values
//! skipped by the server in one pass, each skip told in a NOTICE.

use super::{record_at_line, Batch, BatchError, Loader};
use crate::failure::first_number;

impl Loader {
    /// COPY with `ON_ERROR ignore, LOG_VERBOSITY verbose` (PostgreSQL 17+):
    /// rows with bad values are skipped by the server in one pass, and each
    /// skip is told in a NOTICE naming its line. Those rows are left for
    /// the caller to reject (with the reason a plain COPY of the row gives).
    /// If the rows inserted and the notices do not add up to the records
    /// sent, each notice naming one, the COPY is undone (savepoint) and
    /// run plainly (whose count is checked), so nothing can vanish.
    pub(super) async fn copy_lenient(
        &mut self,
        sql: &str,
        batch: &Batch,
    ) -> Result<u64, BatchError> {
        if let Some(n) = self.notices.as_mut() {
            while n.try_recv().is_ok() {}
        }
        self.client
            .batch_execute("SAVEPOINT pgtide_lenient")
            .await
            .map_err(BatchError::plain)?;
        let rows = self.copy_with(sql, batch).await?;
        // Every skip notice counts, even when the rows inserted are as
        // many as the records sent: then the server saw more rows than
        // pgtide counted, and a skipped one would vanish unseen.
        let mut skipped = Vec::new();
        let mut notices = 0u64;
        if let Some(n) = self.notices.as_mut() {
            while let Ok(notice) = n.try_recv() {
                if !is_skip_notice(notice.routine()) {
                    continue;
                }
                notices += 1;
                // "skipping row ... at line N for column ...": the column
                // name and value come after N, in every translation.
                let line = first_number(notice.message()).map(|(n, _)| n);
                if let Some(i) =
                    line.and_then(|l| record_at_line(&self.spec.dialect, &batch.data, l))
                {
                    skipped.push(i);
                }
            }
        }
        if notices == 0 && rows == batch.records {
            return Ok(rows);
        }
        skipped.sort_unstable();
        skipped.dedup();
        let all_placed = skipped.len() as u64 == notices;
        if all_placed && rows.checked_add(notices) == Some(batch.records) {
            self.skipped = skipped;
            return Ok(rows);
        }
        self.client
            .batch_execute("ROLLBACK TO SAVEPOINT pgtide_lenient")
            .await
            .map_err(BatchError::plain)?;
        let plain = self.spec.copy_sql.clone();
        self.copy_with(&plain, batch).await
    }
}

/// Whether a NOTICE with this routine is ON_ERROR's "skipping row ...":
/// raised by `NextCopyFrom` up to PostgreSQL 17 and by
/// `CopyFromTextLikeOneRow` from 18 on (the per-format row routines).
fn is_skip_notice(routine: Option<&str>) -> bool {
    matches!(routine, Some("NextCopyFrom" | "CopyFromTextLikeOneRow"))
}
