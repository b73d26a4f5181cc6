//! How much isolation (`isolate.rs`) sends at once: the retry window
//! after a located bad row, the ranges sent in one round trip, and the
//! longest range sent in one transaction's pass, which shrinks as a chunk
//! turns out dirty. Apart from isolation's logic, since these are tuning
//! that measurements change, not the order in which rows get their
//! verdicts.

/// Smallest retry window after a located bad row: below this, per-batch
/// round trips cost more than resending a few rows.
pub(super) const MIN_WINDOW: usize = 64;

/// Ranges sent in one round trip
/// ([`Resilient::attempts`](super::resilient::Resilient::attempts)): at
/// most this many, those after the first of at most [`AHEAD_BYTES`]
/// together. When a range fails, the ones behind it were sent for
/// nothing (the server drops them), so the bytes bound what a bad row
/// costs the wire.
pub(super) const AHEAD: usize = 64;
/// See [`AHEAD`].
pub(super) const AHEAD_BYTES: usize = 64 * 1024;
/// Bounds of the longest range sent in one transaction's pass
/// ([`range_bytes`]).
const MIN_RANGE_BYTES: usize = 8 * 1024;
/// See [`MIN_RANGE_BYTES`].
const MAX_RANGE_BYTES: usize = 1024 * 1024;

/// The longest range worth sending when `failures` ranges failed in the
/// first `reached` bytes of the chunk. A failure undoes the rows of its
/// range before the bad one (the server parsed and inserted them for
/// nothing), so long ranges waste more per bad row; every range is also a
/// statement and a savepoint, so short ones cost more per row. With `g`
/// bytes between failures, ranges of `r` bytes waste about `r / 2` per
/// failure and cost one statement per `r`: the sum is least near
/// `sqrt(2 g s / c)`, `s / c` (a statement's cost over a byte's) being
/// about 2,000 bytes on PG 15, hence `sqrt(4096 g)`. Without the bound,
/// the range after a bad row was the rest of the chunk: 1% duplicate
/// keys and CHECK failures made the server insert 1.8x the file's rows.
pub(super) fn range_bytes(reached: usize, failures: usize) -> usize {
    match failures {
        0 => MAX_RANGE_BYTES,
        f => (4096 * (reached / f).max(1))
            .isqrt()
            .clamp(MIN_RANGE_BYTES, MAX_RANGE_BYTES),
    }
}
