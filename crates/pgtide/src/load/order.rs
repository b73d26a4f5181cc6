//! Chunks that must take effect in input order (`--on-conflict`: the last
//! row of a key wins, so chunk n+1 may not merge before chunk n).
//!
//! A worker stages its chunk (the expensive COPY) whenever it gets it, then
//! waits for its turn: every chunk before it committed, rejected or
//! skipped. Once a chunk fails, no later chunk takes its turn: the
//! committed lines stay a prefix of the input, so loading the rest again
//! (or `--resume`) applies the rows in the file's order.

use tokio::sync::watch;

/// Turns by chunk sequence number (`Chunk::seq`, dense from 0).
pub(super) struct Order {
    state: watch::Sender<State>,
}

#[derive(Default)]
struct State {
    /// The lowest chunk not finished yet.
    next: u64,
    /// Finished chunks above `next`.
    finished: std::collections::BTreeSet<u64>,
    /// The first chunk that failed: no chunk after it takes its turn.
    failed: Option<u64>,
}

impl Order {
    /// Turns from chunk 0.
    pub fn new() -> Order {
        Order {
            state: watch::Sender::new(State::default()),
        }
    }

    /// Waits until every chunk before `seq` is finished: `true`, its turn;
    /// `false`, an earlier chunk failed and `seq` must not take effect.
    pub async fn wait(&self, seq: u64) -> bool {
        let mut rx = self.state.subscribe();
        let Ok(state) = rx
            .wait_for(|s| s.next >= seq || s.failed.is_some_and(|f| f < seq))
            .await
        else {
            return false;
        };
        state.failed.is_none_or(|f| f >= seq)
    }

    /// Chunk `seq` is finished (its rows committed or rejected).
    pub fn finished(&self, seq: u64) {
        self.state.send_modify(|s| {
            s.finished.insert(seq);
            while s.finished.remove(&s.next) {
                s.next += 1;
            }
        });
    }

    /// Chunk `seq` failed (or will never finish): later chunks give up.
    pub fn failed(&self, seq: u64) {
        self.state.send_modify(|s| {
            s.failed = Some(s.failed.map_or(seq, |f| f.min(seq)));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn turns_follow_the_sequence_in_any_finishing_order() {
        let order = Arc::new(Order::new());
        assert!(order.wait(0).await);
        let waiting = tokio::spawn({
            let order = order.clone();
            async move { order.wait(2).await }
        });
        order.finished(1);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        order.finished(0);
        assert!(waiting.await.unwrap());
    }

    #[tokio::test]
    async fn a_failed_chunk_stops_later_ones_only() {
        let order = Order::new();
        order.finished(0);
        order.failed(2);
        assert!(order.wait(1).await);
        order.finished(1);
        assert!(order.wait(2).await, "the failed chunk itself may go on");
        assert!(!order.wait(3).await);
    }
}
