//! The batched [`Records`] against the per-record loop it replaced, kept
//! here as the reference: same spans, lines and line-ending errors on
//! inputs full of the bytes that drive the machine, in every window size.

use proptest::prelude::*;

use super::*;

/// The old iterator: one `Stop::First` call per record, the error from
/// `Boundary::bad` and `Scanner::last_error`.
fn reference(d: &Dialect, eol: Eol, bytes: &[u8]) -> Vec<RecordSpan> {
    let mut scanner = Scanner::resume_with(d.clone(), eol);
    let (mut pos, mut line) = (0, 0);
    let mut spans = Vec::new();
    while pos < bytes.len() {
        let (start, line_before) = (pos, line);
        match scanner.scan(&bytes[pos..], Stop::First) {
            Some(b) => {
                pos += b.offset;
                line += b.lines;
                let eol_error = (b.bad > 0).then(|| scanner.last_error()).flatten();
                spans.push(RecordSpan {
                    start,
                    end: pos,
                    line: line_before,
                    eol_error,
                });
            }
            None => {
                let broken = scanner.error().is_some();
                let ended = scanner.end_of_data() || scanner.finish();
                if broken || !ended {
                    spans.push(RecordSpan {
                        start,
                        end: bytes.len(),
                        line: line_before,
                        eol_error: scanner.pending_error(),
                    });
                }
                break;
            }
        }
    }
    spans
}

fn csv_with(quote: u8, escape: u8) -> Dialect {
    Dialect {
        quote,
        escape,
        ..Dialect::csv()
    }
}

/// The bytes the brief of this path named, with a variable share of
/// plain `a`s so that some inputs take the 64-byte fast path a lot.
fn machine_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    (0usize..48).prop_flat_map(move |plain| {
        let mut alphabet = b",\t\"\\.\r\n".to_vec();
        alphabet.resize(alphabet.len() + 1 + plain, b'a');
        prop::collection::vec(prop::sample::select(alphabet), 0..max)
    })
}

fn dialects() -> impl Strategy<Value = Dialect> {
    let base = prop::sample::select(vec![
        Dialect::text(),
        Dialect::csv(),
        csv_with(b'"', b'\\'),
        csv_with(b'"', b'a'),
        csv_with(b'\'', b'"'),
        csv_with(b'\\', b'\\'),
        csv_with(b'.', b'.'),
    ]);
    (base, any::<bool>(), any::<bool>()).prop_map(|(mut d, marker, mid)| {
        d.end_marker = marker;
        d.mid_record_marker = mid;
        d
    })
}

fn eols() -> impl Strategy<Value = Eol> {
    prop::sample::select(vec![Eol::Unknown, Eol::Nl, Eol::CrNl, Eol::Cr])
}

/// Window sizes around the 64-byte block and the real one.
fn windows() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![1, 2, 7, 63, 64, 65, 128, 200, WINDOW])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn batched_records_equal_per_record_scans(
        d in dialects(), eol in eols(), input in machine_bytes(300), window in windows(),
    ) {
        let want = reference(&d, eol, &input);
        let got: Vec<RecordSpan> = Records::new(&d, eol, &input, window).collect();
        prop_assert_eq!(&got, &want);
        let public: Vec<RecordSpan> = records_with(&d, eol, &input).collect();
        prop_assert_eq!(&public, &want);
        if eol == Eol::Unknown {
            prop_assert_eq!(&records(&d, &input).collect::<Vec<_>>(), &want);
        }
    }
}

/// A small deterministic generator for the inputs longer than a window.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Rows of plain and quoted fields with the odd special byte, so that
/// records straddle windows in both the fast and the slow path.
fn long_input(rng: &mut Lcg, size: usize, specials: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 64);
    while out.len() < size {
        out.extend_from_slice(b"123,\"quoted, \"\"x\"\" y\",abc\t\\N,");
        for _ in 0..rng.next(4) {
            out.push(specials[rng.next(specials.len() as u64) as usize]);
        }
        out.extend_from_slice(if rng.next(3) == 0 { b"\r\n" } else { b"\n" });
    }
    out
}

#[test]
fn long_inputs_across_windows() {
    let mut rng = Lcg(7);
    let dialects = [Dialect::text(), Dialect::csv(), csv_with(b'"', b'\\')];
    for specials in [&b"a,"[..], b"\"\\.", b"\r\n\"\\.a"] {
        for size in [WINDOW - 10, 3 * WINDOW + 17] {
            let input = long_input(&mut rng, size, specials);
            for d in &dialects {
                for eol in [Eol::Unknown, Eol::Nl, Eol::CrNl] {
                    let want = reference(d, eol, &input);
                    let got: Vec<RecordSpan> = records_with(d, eol, &input).collect();
                    assert_eq!(got.len(), want.len(), "{d:?} {eol:?}");
                    assert_eq!(got, want, "{d:?} {eol:?}");
                }
            }
        }
    }
}

#[test]
fn marker_after_a_window_ends_the_records() {
    let mut input = b"a,b\n".repeat(WINDOW / 4 + 3);
    input.extend_from_slice(b"\\.\nignored\n");
    for d in [Dialect::text(), Dialect::csv()] {
        let got: Vec<RecordSpan> = records(&d, &input).collect();
        assert_eq!(got.len(), WINDOW / 4 + 3);
        assert_eq!(got, reference(&d, Eol::Unknown, &input));
    }
}

#[test]
fn broken_dialect_and_binary_match_the_reference() {
    let broken = csv_with(b',', b',');
    let input = b"a,b\nc\n".repeat(5000);
    let got: Vec<RecordSpan> = records(&broken, &input).collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got, reference(&broken, Eol::Unknown, &input));
    // Binary stays on the per-record path: a tuple, then bytes that do
    // not parse.
    let mut bin = 1i16.to_be_bytes().to_vec();
    bin.extend_from_slice(&(-1i32).to_be_bytes());
    bin.extend_from_slice(&[0xff, 0x00, 0x12]);
    let d = Dialect::binary();
    let got: Vec<RecordSpan> = records(&d, &bin).collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got, reference(&d, Eol::Unknown, &bin));
}
