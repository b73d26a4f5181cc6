//! The loader that isolation (`isolate.rs`) drives: what it must be able
//! to do with a range of a failed chunk. Owned here, implemented in
//! `load/` (the worker's session, the sharded path's), so the arrows point
//! from `load` to `reject` only.

use std::future::Future;

use copyfmt::scan::{Dialect, Eol};

use crate::batch::{Batch, BatchError, TxStart};

/// How isolation sends a range: through a loader that reconnects and
/// retries as the main path does (the worker's `Session`), so that a
/// server restart or a deadlock while bad rows are isolated neither stops
/// the load nor loads a row twice.
pub trait Resilient: Send {
    /// How the input's records are read (to find them in a chunk).
    fn dialect(&self) -> &Dialect;
    /// The relation name as the server prints it in error contexts.
    fn relname(&self) -> &str;
    /// The columns bound as parameters, for an INSERT method's errors
    /// (`LoaderSpec::parameter_columns`); none for COPY.
    fn parameter_columns(&self) -> Vec<String> {
        Vec::new()
    }
    /// Whether a batch may be a new buffer of records that are not
    /// contiguous in the chunk (`reject/site.rs`): not when each batch's
    /// byte range of the input is recorded (`--resume`'s ledger).
    fn gapped_batches(&self) -> bool {
        false
    }
    /// Whether a row's verdict may depend on the rows loaded before it
    /// whatever its error: the table has row triggers that run before the
    /// insert (one may fill a NULL, or fail, from earlier rows). Then no
    /// probe's refusal settles a row out of its place.
    fn before_triggers(&self) -> bool {
        true
    }
    /// The records of the last batch that the server set aside itself
    /// (`ON_ERROR ignore`), 0-based in that batch.
    fn take_skipped(&mut self) -> Vec<u64>;
    /// Loads `batch` in one transaction, retrying what is not the rows'
    /// fault; an error returned is the rows' fault or stops the load.
    fn load(&mut self, batch: &Batch) -> impl Future<Output = Result<u64, BatchError>> + Send;
    /// Opens one transaction for many [`Resilient::attempt`]s; its id.
    fn begin(&mut self) -> impl Future<Output = Result<Option<TxStart>, BatchError>> + Send;
    /// Loads `batch` under a savepoint of the open transaction; a failed
    /// batch leaves the transaction usable. No retry here: anything that
    /// is not the rows' fault ends the transaction's pass.
    fn attempt(&mut self, batch: &Batch) -> impl Future<Output = Result<u64, BatchError>> + Send;
    /// [`Resilient::attempt`] for `batches` in order: the results of the
    /// first ones (at least one; a failure is always the last result), the
    /// batches after them were not run. A loader that can sends them all
    /// in one round trip.
    fn attempts(
        &mut self,
        batches: &[Batch],
    ) -> impl Future<Output = Vec<Result<u64, BatchError>>> + Send {
        // One at a time: what the server skipped (`take_skipped`) is only
        // known for the last batch run.
        async move {
            match batches.first() {
                Some(b) => vec![self.attempt(b).await],
                None => Vec::new(),
            }
        }
    }
    /// Tries each of `batches` alone inside the open transaction and undoes
    /// it: for each, the server's error, or `None` when it loads on its
    /// own. `None` when the loader cannot do it in one round trip (then
    /// isolation sends them as ranges).
    fn probe(
        &mut self,
        batches: &[Batch],
    ) -> impl Future<Output = Option<Result<Vec<Option<BatchError>>, BatchError>>> + Send {
        let _ = batches;
        std::future::ready(None)
    }
    /// The 0-based records of `batch` (read in the chunk's `eol` style)
    /// that a foreign key will refuse, asked inside the open transaction;
    /// `None` when the loader cannot tell. Only a hint (see
    /// `load/references.rs`).
    fn missing_references(
        &mut self,
        batch: &Batch,
        eol: Eol,
    ) -> impl Future<Output = Option<Vec<u64>>> + Send {
        let _ = (batch, eol);
        std::future::ready(None)
    }
    /// Commits the open transaction: `Ok(true)` committed, `Ok(false)`
    /// certainly not; `Err` when nobody can tell (a COMMIT whose answer
    /// was lost and whose transaction the server cannot place).
    fn commit(
        &mut self,
        xid: Option<TxStart>,
    ) -> impl Future<Output = Result<bool, BatchError>> + Send;
    /// Rolls the open transaction back.
    fn rollback(&mut self) -> impl Future<Output = ()> + Send;
}
