//! Commits in input order, so that of two rows with one key the first is
//! loaded and the second rejected whatever the worker count, as one COPY
//! would decide (`--rejects`, `--workers` above 1, a table with a unique
//! or exclusion index).
//!
//! Chunks load side by side as before; only their `COMMIT`s wait, each
//! until every earlier chunk is over (`order.rs`). Waiting must not
//! deadlock: when a later chunk inserted a key first, the earlier chunk's
//! insert of it waits for the later transaction on the server, while the
//! later one waits for the earlier one's turn here. So a waiting chunk
//! asks the server now and then whether its transaction blocks an earlier
//! chunk's, directly or through other backends of the load
//! (`pg_blocking_pids`); if so it gives way: its connection is closed
//! (the server rolls the transaction back) and the chunk is sent again on
//! a new one, where its turn to commit comes after the earlier chunk.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::Client;

use super::order::Order;

/// Whether the transaction of backend `$1` holds up one of the backends
/// `$2` (earlier chunks): it is among their blockers, or their blockers'
/// blockers, through any backend (another session may stand between
/// them, which the server's deadlock detector cannot see through the
/// client's wait).
const BLOCKS_EARLIER_SQL: &str = "\
    WITH RECURSIVE up(pid) AS ( \
        SELECT unnest($2::int4[]) \
      UNION \
        SELECT b FROM up, unnest(pg_catalog.pg_blocking_pids(up.pid)) AS b \
    ) SELECT $1 IN (SELECT pid FROM up)";

/// The longest pause between two questions to the server while a chunk
/// waits for its turn (the first comes after 5 ms).
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// The turns of one load's chunks, and which backend holds which chunk.
pub(crate) struct Turns {
    order: Order,
    /// Backend pid -> the chunk its open transaction loads.
    holders: Mutex<HashMap<i32, u64>>,
    /// `COMMIT`s wait for every earlier chunk (a unique or exclusion
    /// index, `--rejects`).
    commit_in_order: bool,
    /// A row may be refused for want of a row of an earlier chunk (a
    /// foreign key into the table itself, a row trigger): a chunk that
    /// failed is loaded again, or isolated, only once every earlier chunk
    /// is over ([`Turns::after_earlier`]).
    earlier_matters: bool,
    /// The table has row triggers on INSERT: each sees the rows other
    /// workers have committed, not every earlier row (see
    /// [`Turns::trigger_note`]).
    row_triggers: bool,
}

/// A loader's place in the turns: the chunk it loads now.
#[derive(Clone)]
pub(crate) struct Turn {
    pub turns: Arc<Turns>,
    pub seq: u64,
}

impl Turns {
    /// Turns from chunk 0, when the table at `table` (SQL, quoted) needs
    /// them: commits in input order when bad rows are rejected
    /// (`rejects`) and a row's fate may depend on another chunk's key;
    /// failed chunks retried after the earlier ones when a row may need
    /// an earlier chunk's row. `None` when neither.
    pub async fn needed(
        client: &Client,
        table: &str,
        rejects: bool,
    ) -> crate::error::Result<Option<Turns>> {
        let row = client
            .query_one(include_str!("../../sql/load_turns.sql"), &[&table])
            .await?;
        let (unique, keys, row_triggers): (bool, bool, bool) = (row.get(0), row.get(1), row.get(2));
        let (commit_in_order, earlier_matters) = (rejects && unique, keys || row_triggers);
        Ok((commit_in_order || earlier_matters).then(|| Turns {
            order: Order::new(),
            holders: Mutex::new(HashMap::new()),
            commit_in_order,
            earlier_matters,
            row_triggers,
        }))
    }

    /// What the summary says of a table with row triggers on INSERT,
    /// loaded side by side: a trigger that reads the table (to look for an
    /// earlier row, say) sees only what other workers have committed, so
    /// it may decide otherwise than during one COPY, where it sees every
    /// earlier row. A refusal is retried after the earlier chunks; a row
    /// the trigger lets through cannot be (outside testing: a trigger that
    /// refused duplicate ids let both through with 3 workers).
    pub fn trigger_note(&self, workers: usize) -> Option<String> {
        self.row_triggers.then(|| {
            format!(
                "the table has row triggers on INSERT: with {workers} workers a trigger sees \
                 the rows other workers have committed, not every earlier row of the file; \
                 if a trigger reads the table (e.g. looks for an earlier row), load with \
                 --workers 1 to get what one COPY gives"
            )
        })
    }

    /// Whether a chunk that failed with `e` must wait for every earlier
    /// chunk before it is judged: the table lets a row depend on earlier
    /// rows, and the refusal is not one that no earlier row can change (a
    /// bad value, a NULL in a NOT NULL column).
    pub fn earlier_may_matter(&self, e: &crate::batch::BatchError) -> bool {
        self.earlier_matters
            && crate::error::classify(&e.error) == crate::error::Class::Row
            && !crate::reject::isolate::regardless_of_order(e)
    }

    /// Whether isolation must wait for every earlier chunk first.
    pub fn earlier_matters(&self) -> bool {
        self.earlier_matters
    }

    /// Waits until every chunk before `seq` is over: true; false when one
    /// of them failed (the load stops, and this chunk must not take
    /// effect).
    pub async fn after_earlier(&self, seq: u64) -> bool {
        self.order.wait(seq).await
    }

    /// Backend `pid` began a transaction for chunk `seq`.
    pub fn began(&self, pid: i32, seq: u64) {
        self.holders.lock().expect("turns").insert(pid, seq);
    }

    /// Chunk `seq` is over (`ok`: committed or rejected; otherwise failed,
    /// which lets every later chunk commit: the load stops anyway).
    pub fn over(&self, seq: u64, ok: bool) {
        self.holders.lock().expect("turns").retain(|_, s| *s != seq);
        match ok {
            true => self.order.finished(seq),
            false => self.order.failed(seq),
        }
    }

    /// Waits until chunk `seq`, whose open transaction runs on `client`
    /// (backend `pid`), may commit: `Ok(true)`. `Ok(false)`: it blocks an
    /// earlier chunk and must give way (roll back and load again).
    pub async fn wait(
        &self,
        client: &Client,
        pid: i32,
        seq: u64,
    ) -> Result<bool, tokio_postgres::Error> {
        if !self.commit_in_order {
            return Ok(true);
        }
        let turn = self.order.wait(seq);
        tokio::pin!(turn);
        let mut pause = Duration::from_millis(5);
        loop {
            tokio::select! {
                _ = &mut turn => return Ok(true),
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(MAX_PAUSE);
            let earlier: Vec<i32> = {
                let holders = self.holders.lock().expect("turns");
                holders
                    .iter()
                    .filter(|&(&p, &s)| p != pid && s < seq)
                    .map(|(&p, _)| p)
                    .collect()
            };
            if earlier.is_empty() {
                continue;
            }
            // The unnamed statement: a named one is closed when dropped, by
            // a message whose answer may arrive while the next attempts read
            // the raw stream (`conn/tap.rs`).
            use tokio_postgres::types::Type;
            let rows = client
                .query_typed(
                    BLOCKS_EARLIER_SQL,
                    &[(&pid, Type::INT4), (&earlier, Type::INT4_ARRAY)],
                )
                .await?;
            if rows.first().is_some_and(|r| r.get::<_, bool>(0)) {
                return Ok(false);
            }
        }
    }
}

/// Held by a worker while it loads chunk `seq`: if the worker panics,
/// the chunk is over (failed), so that later chunks do not wait for its
/// turn forever (the pool reports the panic).
pub(super) struct OnPanic {
    pub turns: Arc<Turns>,
    pub seq: u64,
}

impl Drop for OnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.turns.over(self.seq, false);
        }
    }
}
