//! The records of a chunk under isolation (`isolate.rs`): their spans,
//! which of them are already settled and left out of what is sent, and
//! what a verdict on a range of them records.
//!
//! Ranges are always given in the chunk's record numbers. Records that
//! were rejected before the ranges around them are sent (the screen's
//! suspects, probed alone) are *left out*: a range is sent as the records
//! it keeps, one contiguous slice of the chunk when it keeps them all, a
//! new buffer of them otherwise. So the rows between a chunk's screened bad
//! rows go as one statement, not one per gap, and a failure in them (a
//! CHECK, a duplicate key) is placed through the same map.

use copyfmt::scan::{Format, RecordSpan};

use crate::batch::{Batch, BatchError};
use crate::chunk::Chunk;
use crate::failure::RowFailure;

/// Where the rows come from and why they fail: what a reject records.
pub(super) struct Site<'a> {
    pub chunk: &'a Chunk,
    pub spans: &'a [RecordSpan],
    pub format: Format,
    pub relname: &'a str,
    /// The columns bound as parameters (`LoaderSpec::parameter_columns`).
    pub params: &'a [String],
    /// Records already settled and left out of every range sent,
    /// ascending.
    left_out: Vec<usize>,
}

impl<'a> Site<'a> {
    pub fn new(
        chunk: &'a Chunk,
        spans: &'a [RecordSpan],
        format: Format,
        (relname, params): (&'a str, &'a [String]),
    ) -> Self {
        Site {
            chunk,
            spans,
            format,
            relname,
            params,
            left_out: Vec::new(),
        }
    }

    /// Leaves record `index` out of every range sent from now on (it was
    /// settled). Records are left out in ascending order.
    pub fn leave_out(&mut self, index: usize) {
        debug_assert!(self.left_out.last().is_none_or(|&l| l < index));
        self.left_out.push(index);
    }

    /// The left-out records within `lo..hi`.
    fn left_out_in(&self, lo: usize, hi: usize) -> &[usize] {
        let from = self.left_out.partition_point(|&l| l < lo);
        let to = self.left_out.partition_point(|&l| l < hi);
        &self.left_out[from..to]
    }

    /// How many records of `lo..hi` a range sends.
    pub fn kept(&self, lo: usize, hi: usize) -> usize {
        hi.saturating_sub(lo) - self.left_out_in(lo, hi).len()
    }

    /// The chunk's record that is the `k`-th (0-based) record sent for the
    /// range `lo..hi`.
    pub fn record(&self, lo: usize, hi: usize, k: usize) -> Option<usize> {
        let mut at = lo + k;
        for &l in self.left_out_in(lo, hi) {
            if l <= at {
                at += 1;
            } else {
                break;
            }
        }
        (at < hi).then_some(at)
    }

    /// The runs of kept records of `lo..hi`, as `(lo, hi)` ranges.
    fn runs(&self, lo: usize, hi: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut from = lo;
        for &l in self.left_out_in(lo, hi) {
            if from < l {
                out.push((from, l));
            }
            from = l + 1;
        }
        if from < hi {
            out.push((from, hi));
        }
        out
    }

    /// The records of `lo..hi` that are kept, as one batch: a zero-copy
    /// slice of the chunk when none is left out.
    pub fn batch(&self, lo: usize, hi: usize) -> Batch {
        let runs = self.runs(lo, hi);
        let records = runs.iter().map(|&(l, h)| h - l).sum::<usize>() as u64;
        let data = match runs.as_slice() {
            [(l, h)] => self
                .chunk
                .data
                .slice(self.spans[*l].start..self.spans[h - 1].end),
            _ => {
                let size = runs.iter().map(|&(l, h)| self.bytes(l, h)).sum();
                let mut data = Vec::with_capacity(size);
                for (l, h) in runs {
                    data.extend_from_slice(
                        &self.chunk.data[self.spans[l].start..self.spans[h - 1].end],
                    );
                }
                data.into()
            }
        };
        Batch { data, records }
    }

    /// The kept records of `lo..hi` are committed: their line ranges go to
    /// `done`, their bytes to `bytes`.
    pub fn settled(&self, lo: usize, hi: usize, done: &mut Vec<(u64, u64)>, bytes: &mut u64) {
        for (l, h) in self.runs(lo, hi) {
            done.push(self.lines(l, h));
            *bytes += self.bytes(l, h) as u64;
        }
    }

    /// Record `index` failed with the server's error `e`.
    pub fn failure(&self, index: usize, e: &BatchError) -> RowFailure {
        RowFailure::new(
            self.chunk,
            index as u64,
            &self.spans[index],
            self.relname,
            self.params,
            &e.error,
        )
    }

    /// Bytes of records `lo..hi` (left-out ones too).
    pub fn bytes(&self, lo: usize, hi: usize) -> usize {
        self.spans[hi - 1].end - self.spans[lo].start
    }

    /// The end of the longest range from `lo` (at most `hi`) of at most
    /// `max` bytes; at least one kept record when `lo..hi` has one.
    pub fn end_within(&self, lo: usize, hi: usize, max: usize) -> usize {
        let limit = self.spans[lo].start + max;
        let within = self.spans[lo..hi].partition_point(|s| s.end <= limit);
        let mut end = lo + within.max(1);
        while end < hi && self.kept(lo, end) == 0 {
            end += 1;
        }
        end
    }

    /// First and last input line of records `lo..hi`.
    pub fn lines(&self, lo: usize, hi: usize) -> (u64, u64) {
        let start = |i: usize| self.chunk.line_of(&self.spans[i]);
        let last = match self.spans.get(hi) {
            Some(_) => start(hi) - 1,
            None => self.chunk.last_line(),
        };
        (start(lo), last.max(start(lo)))
    }
}
