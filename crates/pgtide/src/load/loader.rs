//! Load methods as interchangeable loaders behind one seam.
//!
//! A [`Loader`] owns one connection and loads a [`Batch`] (whole records,
//! exactly as in the input) in one transaction: `BEGIN`, the method's
//! statements, `COMMIT`. It reports success with the server's row count,
//! or a [`BatchError`] that says which record of the batch failed (when
//! the server said so) and whether the commit's fate is unknown (the
//! connection broke after `COMMIT` was sent). The worker pool and error
//! isolation (`reject`) only ever talk to this seam, so every method gets
//! `--workers` and `--rejects` for free.
//!
//! The methods (`--method`):
//!
//! | method | what is sent | picks it when |
//! |---|---|---|
//! | `copy` | the input bytes, `COPY ... FROM STDIN` | the default: plain loads |
//! | `binary` | rows encoded client-side, `COPY ... (FORMAT binary)` (`load/binary.rs`) | the server's CPU is the limit (text input functions cost more than the client's encoding) |
//! | `pipeline` | one prepared `INSERT` per row, windows of 256 under one Sync (`load/wire.rs`) | `--sql` (upserts), rules that must see INSERTs |
//! | `values` | multi-row `INSERT ... VALUES (..),(..)` with bound parameters | INSERT semantics without pipelining (poolers, proxies) |
//! | `insert` | one prepared `INSERT` per row, each awaited | the seeds' baseline |
//!
//! Every method loads exactly what `copy` loads: values reach the server as
//! text and go through the column type's input function (or, for `binary`,
//! through an encoder that only encodes what it can prove equal).

mod attempts;
mod held;
mod lenient;
mod locate;
mod nested;
mod prepare;
mod staging;
mod turn;

use std::sync::Arc;

use bytes::Bytes;
use copyfmt::convert::Encoder;
use tokio_postgres::Client;

use super::binary;
use super::copy::copy_bytes;
use super::insert;
use super::invariants::check_count;
use super::lazy::{self, Lazy};
use super::ledger;
use super::spec::copy_error;
pub use super::spec::{record_at_line, LoaderSpec, Method, MethodSetup};
pub(super) use super::step::rollback_in_step;
use super::upsert::Merged;
use super::values;
use super::wire;
use crate::batch::{tx_start, TxStart, BEGIN_SQL};
pub use crate::batch::{Batch, BatchError};
use crate::error::{Error, Result};

/// A loader; it listens to notices only when its COPY runs with
/// `ON_ERROR ignore` (elsewhere nobody would drain them).
pub(super) fn new_loader(
    client: Client,
    notices: crate::conn::Notices,
    wire: crate::conn::Wire,
    spec: &Arc<LoaderSpec>,
) -> Loader {
    let mut loader = match spec.on_error_sql {
        Some(_) => Loader::with_notices(client, notices, spec.clone()),
        None => Loader::new(client, spec.clone()),
    };
    loader.wire = Some(wire);
    loader
}

/// Per-connection state of the methods: prepared statements, encoders.
#[derive(Default)]
pub(super) struct MethodState {
    /// Prepared INSERT statements by rows per statement.
    pub statements: insert::Statements,
    /// `pipeline` on the wire: its prepared statement.
    pub wire: wire::Prepared,
    /// `binary`: encoders for this connection's session, once known
    /// (`None` inside: this session needs text COPY).
    pub encoders: Option<Option<Arc<Vec<Encoder>>>>,
    /// The savepoint the statements run under (an isolation attempt):
    /// `values` rolls back to it, not the whole transaction, to find a
    /// bad row.
    pub savepoint: Option<&'static str>,
}

/// One connection loading batches with one method.
pub struct Loader {
    client: Client,
    spec: Arc<LoaderSpec>,
    state: MethodState,
    /// Set when the connection broke during `COMMIT`: the transaction id
    /// and the rows it holds, so that the worker can ask a new connection
    /// whether it committed (`txid_status`) instead of guessing.
    in_doubt: Option<InDoubt>,
    /// The server's notices, when the COPY runs with `ON_ERROR ignore`.
    notices: Option<crate::conn::Notices>,
    /// Records of the last batch that `ON_ERROR ignore` skipped.
    skipped: Vec<u64>,
    /// Rows of committed batches that the table dropped on purpose (its
    /// triggers), not yet taken by [`Loader::take_skipped_by_table`].
    skipped_by_table: u64,
    /// A committed batch whose server count [`check_count`] refused.
    bug: Option<Error>,
    /// `--resume`: the chunk being loaded, whose batches each insert
    /// their ledger row before `COMMIT` ([`Loader::set_mark`]).
    mark: Option<ledger::Mark>,
    /// The last ledger row written in the open transaction (`--resume`):
    /// the witness of a `COMMIT` in doubt after a crash.
    written: Option<ledger::Written>,
    /// What the attempts of an open transaction ([`Loader::attempt`])
    /// will add to the counts above if it commits.
    pending: Pending,
    /// The savepoint the last attempt on the wire left open.
    open: attempts::Open,
    /// `--single-transaction --rejects`: the counts of the load's
    /// transaction from before the savepoint [`Loader::enter_chunk`]
    /// opened, kept apart so that undoing the chunk undoes only its own.
    outer: Option<Pending>,
    /// The connection's stream for `pipeline`'s protocol path
    /// (`load/wire.rs`); without it, `pipeline` goes through tokio-postgres.
    wire: Option<crate::conn::Wire>,
    /// `--on-conflict`: the session's staging table exists.
    stage_ready: bool,
    /// `--on-conflict`: the batch [`Loader::stage`] left in the staging
    /// table (its bytes), which the next `load` of it merges without
    /// COPYing again.
    staged: Option<Bytes>,
    /// `--on-conflict`: the staging table was emptied for the next batch
    /// before that batch's savepoint (an attempt of isolation): a
    /// `TRUNCATE` inside a savepoint costs more with every savepoint
    /// before it in the transaction (outside testing: a 1%-bad upsert of
    /// 20,000 rows took 330 s), one outside it does not.
    stage_emptied: bool,
    /// The server refused `load/references.rs`' query once: not asked
    /// again on this connection.
    references_refused: bool,
    /// `--on-conflict`: what the last merge did, counted once committed.
    merged_now: Merged,
    /// `--on-conflict`: rows committed merges inserted and updated, not
    /// yet taken by [`Loader::take_merged`].
    merged: Merged,
    /// The next batch may commit lazily (`load/lazy.rs`): set by the
    /// worker for its first attempt only.
    lazy_next: bool,
    /// The last batch committed lazily (not yet known on disk).
    lazy: Option<Lazy>,
    /// The transaction the last batch began.
    last_begin: Option<TxStart>,
    /// The chunk being loaded, when commits go in input order
    /// (`load/turns.rs`).
    turn: Option<super::turns::Turn>,
    /// The last commit gave way to an earlier chunk (`load/turns.rs`).
    gave_way: bool,
}

/// Counts of attempts not yet committed.
#[derive(Default)]
struct Pending {
    skipped_by_table: u64,
    bug: Option<Error>,
    merged: Merged,
}

impl Pending {
    /// Adds the counts of a savepoint released inside this transaction.
    fn absorb(&mut self, inner: Pending) {
        self.skipped_by_table += inner.skipped_by_table;
        self.bug = self.bug.take().or(inner.bug);
        self.merged.add(inner.merged);
    }
}

/// A batch whose `COMMIT` got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InDoubt {
    /// Its transaction, as the server numbered it.
    pub tx: TxStart,
    /// The ledger row it wrote (`--resume`), in the table if it committed.
    pub ledger: Option<ledger::Written>,
    /// Rows it inserted, if it committed.
    pub rows: u64,
    /// Rows the table dropped on purpose, if it committed.
    pub skipped_by_table: u64,
    /// `--on-conflict`: rows it inserted and updated, if it committed.
    pub merged: Merged,
    /// A server row count that nothing explains, found in it (the bug's
    /// message): reported if it committed.
    pub bug: Option<String>,
    /// It committed lazily (`load/lazy.rs`): "committed" counts only once
    /// known on disk.
    pub lazy: bool,
}

impl InDoubt {
    /// A lazily committed batch of `rows` rows, whose fate a broken
    /// connection hid before it was known on disk.
    pub(super) fn from_lazy(lazy: Lazy, rows: u64) -> InDoubt {
        InDoubt {
            tx: lazy.tx,
            ledger: lazy.ledger,
            rows,
            skipped_by_table: 0,
            merged: Merged::default(),
            bug: None,
            lazy: true,
        }
    }
}

impl Loader {
    /// A loader over an open connection.
    pub fn new(client: Client, spec: Arc<LoaderSpec>) -> Loader {
        Loader {
            client,
            spec,
            state: MethodState::default(),
            in_doubt: None,
            notices: None,
            skipped: Vec::new(),
            skipped_by_table: 0,
            bug: None,
            mark: None,
            written: None,
            pending: Pending::default(),
            open: attempts::Open::default(),
            outer: None,
            wire: None,
            stage_ready: false,
            staged: None,
            stage_emptied: false,
            references_refused: false,
            merged_now: Merged::default(),
            merged: Merged::default(),
            lazy_next: false,
            lazy: None,
            last_begin: None,
            turn: None,
            gave_way: false,
        }
    }

    /// A loader that reads the server's notices: with `spec.on_error_sql`
    /// set, its COPY skips rows with bad values and reports them through
    /// [`Loader::take_skipped`].
    pub fn with_notices(
        client: Client,
        notices: crate::conn::Notices,
        spec: Arc<LoaderSpec>,
    ) -> Loader {
        let mut loader = Loader::new(client, spec);
        loader.notices = Some(notices);
        loader
    }

    /// The records (0-based, in the last batch) that the server skipped
    /// with `ON_ERROR ignore`; they are neither loaded nor rejected yet.
    pub fn take_skipped(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.skipped)
    }

    /// Rows that committed batches sent but the table dropped on purpose
    /// (BEFORE trigger returning NULL) since the last call: neither
    /// loaded nor rejected, "skipped by the table".
    pub fn take_skipped_by_table(&mut self) -> u64 {
        std::mem::take(&mut self.skipped_by_table)
    }

    /// A committed batch whose server row count cannot be explained: the
    /// load must stop with this error (kind `Bug`). The batch stays
    /// committed, so every count reported is what the server did.
    pub fn take_bug(&mut self) -> Option<Error> {
        self.bug.take()
    }

    /// Counts the rows the table dropped in a batch whose commit was in
    /// doubt and turned out committed (it is settled on a new loader).
    pub fn committed_in_doubt(&mut self, d: InDoubt) {
        self.skipped_by_table += d.skipped_by_table;
        self.merged.add(d.merged);
        self.bug = self.bug.take().or(d.bug.map(Error::bug));
    }

    /// `--on-conflict`: rows that committed merges inserted and updated
    /// since the last call.
    pub fn take_merged(&mut self) -> Merged {
        std::mem::take(&mut self.merged)
    }

    /// Hands over what `ON_ERROR` skipped in a batch whose commit was in
    /// doubt and turned out committed (settled on this new loader).
    pub fn carry_skipped(&mut self, skipped: Vec<u64>) {
        self.skipped = skipped;
    }

    /// The batch whose commit is in doubt after the last `load` failed
    /// with `commit_unknown`.
    pub fn in_doubt(&self) -> Option<InDoubt> {
        self.in_doubt.clone()
    }

    /// The connection (for isolation queries and tests).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// What this loader runs.
    pub fn spec(&self) -> &LoaderSpec {
        &self.spec
    }

    /// Loads `batch` in one transaction; returns the rows inserted.
    pub async fn load(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        let lazy = std::mem::take(&mut self.lazy_next);
        self.lazy = None;
        self.in_doubt = None;
        self.written = None;
        self.skipped.clear();
        self.ensure_stage().await?;
        // One round trip: open the transaction and learn its id, which is
        // what settles a COMMIT that got no answer.
        let xid = tx_start(
            &self
                .client
                .simple_query(BEGIN_SQL)
                .await
                .map_err(BatchError::plain)?,
        );
        self.last_begin = xid;
        self.witness_start(xid);
        self.began_turn(xid);
        let result = self.run(batch).await;
        match result {
            Ok(rows) => {
                let on_error = self.skipped.len() as u64;
                let counted = check_count(batch.records, rows, on_error, self.spec.table_may_skip);
                self.commit(xid, rows, counted, lazy).await
            }
            Err(e) => {
                // The transaction is aborted; end it (a broken connection
                // ends it anyway), and never reuse a connection that may
                // be out of step with the server.
                if !rollback_in_step(&self.client).await {
                    self.discard();
                }
                Err(e)
            }
        }
    }

    /// Has the witness ([`crate::witness`]) make the transaction's id safe
    /// from a crash while its rows are sent.
    fn witness_start(&self, xid: Option<TxStart>) {
        if let (Some(w), Some(tx)) = (&self.spec.witness, xid) {
            w.start(tx);
        }
    }

    /// Waits, before `COMMIT`, for what [`Loader::witness_start`] began;
    /// true when the witness vouched.
    async fn witness_wait(&self, xid: Option<TxStart>) -> bool {
        match (&self.spec.witness, xid) {
            (Some(w), Some(tx)) => w.vouch_for(&tx).await,
            _ => false,
        }
    }

    /// Closes this loader's connection for good: every later use fails as
    /// a broken connection (`Class::Connection`), which the worker answers
    /// with a fresh one (`reconnect::load_reconnecting`). For a connection
    /// whose next answer may belong to an earlier request.
    fn discard(&mut self) {
        // The `postgres` crate's own way to close a client it cannot drop.
        self.client.__private_api_close();
    }

    /// The connection is gone (broken, or discarded after an error that
    /// left it out of step): the worker must replace it.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Commits a batch whose statements succeeded with `rows` rows, of
    /// which `counted` says how many the table dropped (or why the count
    /// is a bug). The counts are taken only once the commit succeeded.
    /// `lazy`: without waiting for the WAL flush (`load/lazy.rs`), if the
    /// witness vouched and there is nothing to count but rows.
    async fn commit(
        &mut self,
        xid: Option<TxStart>,
        rows: u64,
        counted: Result<u64>,
        lazy: bool,
    ) -> Result<u64, BatchError> {
        let vouched = self.witness_wait(xid).await;
        // Given way (`load/turns.rs`): nothing is committed, and the
        // closed connection makes the worker send the batch again.
        self.wait_turn(xid).await?;
        let merged = std::mem::take(&mut self.merged_now);
        let lazy = lazy
            && vouched
            && matches!(counted, Ok(0))
            && self.skipped.is_empty()
            && self.bug.is_none()
            && merged == Merged::default();
        let sql = if lazy { lazy::COMMIT_SQL } else { "COMMIT" };
        match self.client.batch_execute(sql).await {
            Ok(()) => {
                if let (true, Some(tx)) = (lazy, xid) {
                    let ledger = self.written.take();
                    self.lazy = Some(Lazy { tx, ledger });
                }
                match counted {
                    Ok(n) => self.skipped_by_table += n,
                    Err(bug) => self.bug = Some(bug),
                }
                self.merged.add(merged);
                Ok(rows)
            }
            Err(error) => {
                let unknown = crate::error::classify(&error) == crate::error::Class::Connection;
                if unknown {
                    let (skipped_by_table, bug) = match counted {
                        Ok(n) => (n, None),
                        Err(bug) => (0, Some(bug.message().to_owned())),
                    };
                    let ledger = self.written.take();
                    self.in_doubt = xid.map(|tx| InDoubt {
                        tx,
                        ledger,
                        rows,
                        skipped_by_table,
                        merged,
                        bug,
                        lazy,
                    });
                }
                Err(BatchError {
                    record: None,
                    commit_unknown: unknown,
                    error,
                })
            }
        }
    }

    /// The method's statements, inside the batch's transaction, then
    /// (`--resume`) the batch's ledger row, so that both commit or
    /// neither does (`load/ledger.rs`).
    async fn run(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        let rows = match self.spec.instead_rule {
            true => self.run_method(batch).await?.min(batch.records),
            false => self.run_method(batch).await?,
        };
        if let Some(mark) = &self.mark {
            match ledger::record(&self.client, mark, batch, rows)
                .await
                .map_err(BatchError::plain)?
            {
                Ok(written) => self.written = Some(written),
                Err(bug) => self.bug = self.bug.take().or(Some(bug)),
            }
        }
        Ok(rows)
    }

    /// `--resume`: each batch loaded from now on records its bytes of
    /// this chunk in the ledger, in its own transaction (`None`: stop).
    pub fn set_mark(&mut self, mark: Option<ledger::Mark>) {
        self.mark = mark;
    }

    /// Whether each batch records its byte range in the ledger
    /// (`--resume`): then a batch must be one slice of its chunk.
    pub fn has_mark(&self) -> bool {
        self.mark.is_some()
    }

    /// The mark, for a loader that replaces this one (reconnect).
    pub fn take_mark(&mut self) -> Option<ledger::Mark> {
        self.mark.take()
    }

    /// The rows of `batch`, sent by the method.
    async fn send_rows(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        let spec = self.spec.clone();
        match spec.method {
            Method::Copy => self.copy(batch).await,
            Method::Binary => {
                let encoders = match &self.state.encoders {
                    Some(e) => e.clone(),
                    None => {
                        let e = binary::encoders(&self.client, &spec.setup)
                            .await
                            .map_err(BatchError::plain)?
                            .map(Arc::new);
                        self.state.encoders = Some(e.clone());
                        e
                    }
                };
                match encoders {
                    Some(enc) => binary::load(&self.client, &spec, &enc, batch).await,
                    None => self.copy(batch).await,
                }
            }
            Method::Pipeline | Method::Insert | Method::Values => {
                let state = &mut self.state;
                let client = &self.client;
                match (spec.method, self.wire.as_ref()) {
                    (Method::Values, _) => {
                        let savepoint = state.savepoint;
                        values::load(client, &spec, &mut state.statements, batch, savepoint).await
                    }
                    (Method::Pipeline, Some(wire)) => {
                        wire::rows(client, wire, &spec, &mut state.wire, batch).await
                    }
                    _ => insert::load(client, &spec, &mut state.statements, batch).await,
                }
            }
        }
    }

    async fn copy(&mut self, batch: &Batch) -> Result<u64, BatchError> {
        let s = self.spec.clone();
        match (&s.on_error_sql, self.notices.is_some()) {
            // A single record gains nothing from ON_ERROR: run it plainly
            // and get the server's own reason when it fails.
            (Some(sql), true) if batch.records > 1 => self.copy_lenient(sql, batch).await,
            _ => self.copy_with(&s.copy_sql, batch).await,
        }
    }

    async fn copy_with(&self, sql: &str, batch: &Batch) -> Result<u64, BatchError> {
        let s = &self.spec;
        copy_bytes(&self.client, sql, &s.framing, &batch.data, s.message_bytes)
            .await
            .map_err(|e| copy_error(s, &batch.data, e))
    }
}
