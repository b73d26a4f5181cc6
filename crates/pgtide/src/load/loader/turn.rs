//! The loader's side of commits in input order (`load/turns.rs`): which
//! chunk it loads, its backend made known at each `BEGIN`, and the wait
//! before each `COMMIT`.

use super::Loader;
use crate::batch::{BatchError, TxStart};
use crate::load::turns::Turn;

impl Loader {
    /// The chunk the next batches belong to (`None`: commits wait for
    /// nothing).
    pub(crate) fn set_turn(&mut self, turn: Option<Turn>) {
        self.turn = turn;
    }

    /// Whether the last commit gave way (`load/turns.rs`) rather than
    /// lost its connection: the batch is sent again at once.
    pub fn take_gave_way(&mut self) -> bool {
        std::mem::take(&mut self.gave_way)
    }

    /// The chunk being loaded, for a loader that replaces this one.
    pub(crate) fn take_turn(&mut self) -> Option<Turn> {
        self.turn.take()
    }

    /// A transaction `xid` began for the current chunk: other chunks'
    /// waits can now tell whether it holds them up.
    pub(super) fn began_turn(&self, xid: Option<TxStart>) {
        if let (Some(turn), Some(pid)) = (&self.turn, xid.and_then(|x| x.backend_pid)) {
            turn.turns.began(pid, turn.seq);
        }
    }

    /// Waits before `COMMIT` until every earlier chunk is over. An error
    /// when this transaction held up an earlier chunk: the connection was
    /// closed (the server rolls back), nothing is committed, and the error
    /// (a broken connection) makes the caller send the batch again.
    pub(super) async fn wait_turn(&mut self, xid: Option<TxStart>) -> Result<(), BatchError> {
        let Some(turn) = &self.turn else {
            return Ok(());
        };
        let Some(pid) = xid.and_then(|x| x.backend_pid) else {
            return Ok(());
        };
        match turn.turns.wait(&self.client, pid, turn.seq).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.gave_way = true;
                self.discard();
                // Fails at once on the closed connection (were it to
                // succeed, the COMMIT would fail the same way).
                self.client
                    .batch_execute("")
                    .await
                    .map_err(BatchError::plain)?;
                Ok(())
            }
            // The question failed and left the transaction aborted: a
            // COMMIT would roll back without an error. Nothing is
            // committed; the connection is not trusted again.
            Err(e) => {
                self.discard();
                Err(BatchError::plain(e))
            }
        }
    }
}
