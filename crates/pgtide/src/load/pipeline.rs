//! A bounded, in-order pipeline of requests on one connection.
//!
//! tokio-postgres pipelines the queries of one `Client`: a request is
//! written as soon as its future is first polled, and responses come back
//! in order. [`drive`] keeps at most `depth` such futures alive, starts a
//! new one each time the oldest completes, and stops at the first error.
//! The bound is the point: seed 001's pipeline queued 1M requests and
//! grew the client's memory without limit; here memory is `depth` rows.
//! New requests are queued in bursts (when half the window has drained),
//! so the connection writes many of them per system call.

use std::future::Future;

use futures_util::stream::{FuturesOrdered, StreamExt};

/// Requests in flight for `--method pipeline`. Enough to hide the round
/// trip (a request costs the server a few microseconds), small enough
/// that the rows held are a few hundred kilobytes.
pub const PIPELINE_DEPTH: usize = 256;

/// Runs `start(job)` for every job with at most `depth` futures alive,
/// results in job order; returns the sum of the results, or the first
/// error. An error for which `secondary` is true (an "aborted
/// transaction" error that only follows the real one) is returned only if
/// no other error follows among the requests already sent.
pub async fn drive<I, F, Fut, E>(
    jobs: I,
    depth: usize,
    mut start: F,
    secondary: impl Fn(&E) -> bool,
) -> Result<u64, E>
where
    I: Iterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = Result<u64, E>>,
{
    let depth = depth.max(1);
    let mut jobs = jobs.fuse();
    let mut in_flight = FuturesOrdered::new();
    let mut total = 0u64;
    let mut first_error: Option<E> = None;
    loop {
        // Refill in bursts, from half empty to full: requests queued
        // together are written together (one write for many rows, not one
        // per row).
        if first_error.is_none() && in_flight.len() <= depth / 2 {
            while in_flight.len() < depth {
                match jobs.next() {
                    Some(job) => in_flight.push_back(start(job)),
                    None => break,
                }
            }
        }
        debug_assert!(in_flight.len() <= depth, "pipeline over its bound");
        match in_flight.next().await {
            None => return first_error.map_or(Ok(total), Err),
            Some(Ok(n)) => total += n,
            Some(Err(e)) if secondary(&e) => {
                first_error.get_or_insert(e);
            }
            Some(Err(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Jobs that each stay alive a little while, counting how many are
    /// alive at once.
    async fn run(n: u64, depth: usize, fail_at: Option<u64>) -> (Result<u64, u64>, usize) {
        let alive = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let result = drive(
            0..n,
            depth,
            |i| {
                let now = alive.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let alive = &alive;
                async move {
                    // Jobs finish out of order: results must still be in order.
                    for _ in 0..(n - i) % 7 {
                        tokio::task::yield_now().await;
                    }
                    alive.fetch_sub(1, Ordering::SeqCst);
                    if Some(i) == fail_at {
                        Err(i)
                    } else if fail_at.is_some_and(|f| i > f) {
                        Err(1_000_000 + i)
                    } else {
                        Ok(1)
                    }
                }
            },
            |e: &u64| *e >= 1_000_000,
        )
        .await;
        (result, peak.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn never_more_than_depth_in_flight() {
        for depth in [1, 2, 7, 256] {
            let (result, peak) = run(600, depth, None).await;
            assert_eq!(result, Ok(600));
            assert!(peak <= depth, "depth {depth}: {peak} alive at once");
            assert_eq!(peak, depth.min(600), "the pipeline must fill up");
        }
    }

    #[tokio::test]
    async fn first_real_error_wins_over_aborted_followers() {
        let (result, peak) = run(100, 8, Some(42)).await;
        assert_eq!(result, Err(42));
        assert!(peak <= 8);
    }

    #[tokio::test]
    async fn empty_input() {
        assert_eq!(run(0, 4, None).await.0, Ok(0));
    }
}
