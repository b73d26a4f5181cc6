//! A bounded, in-order pipeline of requests on one connection.
//!
//! tokio-postgres pipelines the queries of one `Client`: a request is
//! written as soon as its future is first polled, and responses come back
//! in order. [`drive`] keeps at most a [`Window`] of such futures alive
//! (so many requests, so many bytes), starts new ones as the oldest
//! complete, and stops at the first error. The bound is the point: seed
//! 001's pipeline queued 1M requests and grew the client's memory without
//! limit; and a count alone is no bound when rows are wide (256 rows of
//! 1600 columns are megabytes of Bind messages in flight). New requests
//! are queued in bursts (when half the window has drained), so the
//! connection writes many of them per system call.
//!
//! A job that must run alone (a record sent by its own COPY) starts only
//! once everything before it has answered, and nothing starts until it
//! has: a COPY that the server refuses before copy mode (because an
//! earlier request in flight aborted the transaction) would leave the
//! connection out of step (see `step::rollback_in_step`).

use std::future::Future;

use futures_util::stream::{FuturesOrdered, StreamExt};
use futures_util::FutureExt;

/// What may be in flight at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Requests.
    pub requests: usize,
    /// Bytes of their parameters (one job is always let in, however big).
    pub bytes: usize,
}

/// What one job weighs in the [`Window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// Bytes it sends.
    pub bytes: usize,
    /// It runs with nothing else in flight.
    pub alone: bool,
}

/// `--method pipeline`: enough requests to hide the round trip (a request
/// costs the server a few microseconds), and a byte bound that keeps wide
/// rows (1600 columns) to about a megabyte in flight.
pub const PIPELINE_WINDOW: Window = Window {
    requests: 256,
    bytes: 1 << 20,
};

/// Runs `start(job)` for every job within `window` (each job weighed by
/// `cost`), results in job order; returns the sum of the results, or the
/// first error. An error for which `secondary` is true (an "aborted
/// transaction" error that only follows the real one) is returned only if
/// no other error follows among the requests already sent.
pub async fn drive<I, F, Fut, E>(
    jobs: I,
    window: Window,
    cost: impl Fn(&I::Item) -> Cost,
    mut start: F,
    secondary: impl Fn(&E) -> bool,
) -> Result<u64, E>
where
    I: Iterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = Result<u64, E>>,
{
    let depth = window.requests.max(1);
    let mut jobs = jobs.fuse();
    let mut waiting: Option<I::Item> = None;
    let mut in_flight = FuturesOrdered::new();
    let (mut bytes, mut alone) = (0usize, false);
    let mut total = 0u64;
    let mut first_error: Option<E> = None;
    loop {
        // Refill in bursts, from half empty to full: requests queued
        // together are written together (one write for many rows, not one
        // per row).
        let half = in_flight.len() <= depth / 2 && bytes <= window.bytes / 2;
        if first_error.is_none() && half && !alone {
            while in_flight.len() < depth {
                let Some(job) = waiting.take().or_else(|| jobs.next()) else {
                    break;
                };
                let c = cost(&job);
                let fits = !c.alone && bytes + c.bytes <= window.bytes;
                if !in_flight.is_empty() && !fits {
                    waiting = Some(job);
                    break;
                }
                bytes += c.bytes;
                alone = c.alone;
                in_flight.push_back(start(job).map(move |r| (c.bytes, r)));
                if alone {
                    break;
                }
            }
        }
        debug_assert!(in_flight.len() <= depth, "pipeline over its bound");
        let Some((done, result)) = in_flight.next().await else {
            return first_error.map_or(Ok(total), Err);
        };
        bytes -= done;
        alone &= !in_flight.is_empty();
        match result {
            Ok(n) => total += n,
            Err(e) if secondary(&e) => {
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// What a run saw: its result, the most jobs and bytes alive at once,
    /// and how often a job alone had company.
    struct Seen {
        result: Result<u64, u64>,
        peak: usize,
        peak_bytes: usize,
        crowded: usize,
    }

    /// Jobs that each stay alive a little while, counting how many (and
    /// how many bytes) are alive at once; job `i` weighs `weigh(i)`.
    async fn run(n: u64, window: Window, weigh: fn(u64) -> Cost, fail_at: Option<u64>) -> Seen {
        let alive = AtomicUsize::new(0);
        let alive_bytes = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let peak_bytes = AtomicUsize::new(0);
        let crowded = AtomicUsize::new(0);
        let result = drive(
            0..n,
            window,
            |&i| weigh(i),
            |i| {
                let c = weigh(i);
                let now = alive.fetch_add(1, Ordering::SeqCst) + 1;
                let b = alive_bytes.fetch_add(c.bytes, Ordering::SeqCst) + c.bytes;
                peak.fetch_max(now, Ordering::SeqCst);
                peak_bytes.fetch_max(b, Ordering::SeqCst);
                let (alive, alive_bytes, crowded) = (&alive, &alive_bytes, &crowded);
                async move {
                    // Jobs finish out of order: results must still be in order.
                    for _ in 0..(n - i) % 7 {
                        tokio::task::yield_now().await;
                        if c.alone && alive.load(Ordering::SeqCst) > 1 {
                            crowded.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    alive.fetch_sub(1, Ordering::SeqCst);
                    alive_bytes.fetch_sub(c.bytes, Ordering::SeqCst);
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
        Seen {
            result,
            peak: peak.load(Ordering::SeqCst),
            peak_bytes: peak_bytes.load(Ordering::SeqCst),
            crowded: crowded.load(Ordering::SeqCst),
        }
    }

    fn light(_: u64) -> Cost {
        Cost {
            bytes: 1,
            alone: false,
        }
    }

    fn requests(n: usize) -> Window {
        Window {
            requests: n,
            bytes: usize::MAX / 2,
        }
    }

    #[tokio::test]
    async fn never_more_than_depth_in_flight() {
        for depth in [1, 2, 7, 256] {
            let seen = run(600, requests(depth), light, None).await;
            assert_eq!(seen.result, Ok(600));
            assert!(seen.peak <= depth, "depth {depth}: {} alive", seen.peak);
            assert_eq!(seen.peak, depth.min(600), "the pipeline must fill up");
        }
    }

    #[tokio::test]
    async fn never_more_than_the_bytes_in_flight_but_always_one() {
        let window = Window {
            requests: 256,
            bytes: 100_000,
        };
        // Wide rows: 256 of them would be 5 MB.
        let wide = |_| Cost {
            bytes: 20_000,
            alone: false,
        };
        let seen = run(600, window, wide, None).await;
        assert_eq!(seen.result, Ok(600));
        assert_eq!(seen.peak_bytes, 100_000);
        // One job bigger than the window still goes, alone.
        let huge = |_| Cost {
            bytes: 1_000_000,
            alone: false,
        };
        let seen = run(10, window, huge, None).await;
        assert_eq!((seen.result, seen.peak), (Ok(10), 1));
    }

    #[tokio::test]
    async fn a_job_alone_has_nothing_else_in_flight() {
        let every_tenth = |i: u64| Cost {
            bytes: 1,
            alone: i % 10 == 3,
        };
        let seen = run(600, requests(64), every_tenth, None).await;
        assert_eq!(seen.result, Ok(600));
        assert_eq!(seen.crowded, 0);
        assert!(seen.peak > 1, "the others are still pipelined");
    }

    #[tokio::test]
    async fn first_real_error_wins_over_aborted_followers() {
        let seen = run(100, requests(8), light, Some(42)).await;
        assert_eq!(seen.result, Err(42));
        assert!(seen.peak <= 8);
    }

    #[tokio::test]
    async fn empty_input() {
        assert_eq!(run(0, requests(4), light, None).await.result, Ok(0));
    }
}
