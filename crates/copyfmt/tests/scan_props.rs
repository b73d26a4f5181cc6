//! The row-boundary scanner against the byte-at-a-time reference on random
//! inputs: every dialect, cut at random points, fed a byte at a time, with
//! long plain runs (the 64-byte fast path and `quiet_blocks`), and
//! `records` against the same reference; binary files at any split.

use pgtide_copyfmt::scan::{records, Dialect, LeadBytes, RecordSpan, Stop};
use proptest::prelude::*;

mod common;

use common::*;

/// Bytes that matter to some dialect, and a lot of plain `a`s so that long
/// inputs take the 64-byte fast path too.
fn special_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    (0usize..40).prop_flat_map(move |plain| {
        let mut alphabet = b"\"\\,\n\r.'\x95\xb1\x8f".to_vec();
        alphabet.resize(alphabet.len() + plain, b'a');
        prop::collection::vec(prop::sample::select(alphabet), 0..max)
    })
}

/// Special bytes between runs of plain bytes, short or up to 300 long: fields long enough
/// for whole blocks without a special byte, which the scanner steps over
/// (`quiet_blocks`), in every state a run can start in.
fn long_fields(segments: usize) -> impl Strategy<Value = Vec<u8>> {
    let special = prop::sample::select(b"\"\\,\n\r.'\x95\xb1\x8f".to_vec());
    // Runs of 0-2 put special bytes side by side (a multibyte character
    // hiding a quote or backslash); the rest are long.
    let segment = (special, prop_oneof![0usize..3, 60usize..300]);
    prop::collection::vec(segment, 0..segments).prop_map(|segments| {
        let mut out = Vec::new();
        for (byte, plain) in segments {
            out.push(byte);
            out.resize(out.len() + plain, b'a');
        }
        out
    })
}

fn dialects() -> impl Strategy<Value = Dialect> {
    let base = prop::sample::select(vec![
        Dialect::text(),
        Dialect::csv(),
        csv_with(b'"', b'\\'),
        csv_with(b'\'', b'\''),
        csv_with(b'\'', b'"'),
        csv_with(b'\\', b'\\'),
        csv_with(b'.', b'.'),
    ]);
    let lead = prop::sample::select(vec![
        LeadBytes::Ascii,
        LeadBytes::Sjis,
        LeadBytes::Johab,
        LeadBytes::Double,
    ]);
    (base, any::<bool>(), any::<bool>(), lead).prop_map(|(mut d, marker, mid, lead)| {
        d.end_marker = marker;
        d.mid_record_marker = mid;
        d.lead_bytes = lead;
        d
    })
}

/// Sorted, deduplicated cut points inside `0..=len`.
fn cuts(len: usize, raw: &[usize]) -> Vec<usize> {
    let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// The scanner fed in pieces cut at `raw`, and in one piece, against the
/// reference.
fn check_feeds(d: &Dialect, input: &[u8], raw: &[usize]) -> Result<(), TestCaseError> {
    let (ends, eod) = reference(d, input);
    let cuts = cuts(input.len(), raw);
    let first = feed_first(d, input, &cuts);
    prop_assert_eq!(&first.ends, &ends);
    prop_assert_eq!(first.eod, eod);
    let last = feed_last(d, input, &cuts, &ends);
    prop_assert_eq!(&last, &first);
    let whole = feed_first(d, input, &[]);
    prop_assert_eq!(&whole, &first);
    Ok(())
}

/// [`records`] against the reference: spans, line numbers, and the tail.
fn check_records(d: &Dialect, input: &[u8]) -> Result<(), TestCaseError> {
    let (ends, eod) = reference(d, input);
    let spans: Vec<RecordSpan> = records(d, input).collect();
    let mut start = 0;
    for (span, &end) in spans.iter().zip(&ends) {
        prop_assert_eq!((span.start, span.end), (start, end));
        prop_assert_eq!(span.line, line_breaks(d, input, 0, start, Stop::Last));
        start = end;
    }
    let last = ends.last().copied().unwrap_or(0);
    let rest = &input[last..];
    let tail = !(eod || rest.is_empty());
    prop_assert_eq!(spans.len(), ends.len() + usize::from(tail));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn agrees_with_reference(d in dialects(), input in special_bytes(300),
                             raw in prop::collection::vec(any::<usize>(), 0..6)) {
        check_feeds(&d, &input, &raw)?;
    }

    #[test]
    fn long_fields_agree_with_reference(d in dialects(), input in long_fields(16),
                                        raw in prop::collection::vec(any::<usize>(), 0..6)) {
        check_feeds(&d, &input, &raw)?;
        check_records(&d, &input)?;
    }

    #[test]
    fn byte_at_a_time_equals_one_feed(d in dialects(), input in special_bytes(150)) {
        let whole = feed_first(&d, &input, &[]);
        let bytes: Vec<usize> = (1..input.len()).collect();
        prop_assert_eq!(&feed_last(&d, &input, &bytes, &whole.ends), &whole);
        prop_assert_eq!(&feed_first(&d, &input, &bytes), &whole);
    }

    #[test]
    fn records_agree_with_scanner(d in dialects(), input in special_bytes(200)) {
        check_records(&d, &input)?;
    }

    #[test]
    fn never_panics(d in dialects(), input in prop::collection::vec(any::<u8>(), 0..300),
                    raw in prop::collection::vec(any::<usize>(), 0..4)) {
        let cuts = cuts(input.len(), &raw);
        feed_first(&d, &input, &cuts);
        let mut b = Dialect::binary();
        b.end_marker = d.end_marker;
        feed_first(&b, &input, &cuts);
        let _ = records(&d, &input).count();
        let _ = records(&b, &input).count();
    }

    #[test]
    fn binary_tuples_at_any_split(
        tuples in prop::collection::vec(
            prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..40)), 0..5),
            0..8),
        ext in 0usize..4, trailer in any::<bool>(),
        raw in prop::collection::vec(any::<usize>(), 0..5)) {
        let (file, ends) = binary_file(ext, &tuples, trailer);
        let cuts = cuts(file.len(), &raw);
        let got = feed_first(&Dialect::binary(), &file, &cuts);
        prop_assert_eq!(&got.ends, &ends);
        prop_assert_eq!(got.eod, trailer);
        prop_assert_eq!(&feed_last(&Dialect::binary(), &file, &cuts, &ends), &got);
    }
}
