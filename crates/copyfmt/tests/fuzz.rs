//! The fuzz targets of `fuzz/targets.rs`, run by proptest with a fixed
//! case budget (CI runs them on every test run; `cargo fuzz` runs the same
//! targets without a budget, see `fuzz/README.md`).
//!
//! On top of each target's own invariants, every run checks that the
//! target allocated no more than the input justifies: a length or count
//! field read from the data must never size a buffer. A counting global
//! allocator (`stats_alloc`; the workspace forbids `unsafe`) measures it.
//!
//! Inputs that once broke a target live in `fuzz/regressions/<target>/`
//! and are replayed by `regressions_still_pass`.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestError, TestRunner};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[path = "../fuzz/targets.rs"]
mod targets;

#[global_allocator]
static ALLOCATOR: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Runs `target` on `input` and fails if it allocated more than the
/// input's size allows. The allocator's counts are process-wide, which is
/// why this file has a single test that runs everything in turn. The
/// targets keep a few vectors proportional to the input (record ends,
/// decoded values, field slots): 64 bytes per input byte plus 128 KiB in
/// all is generous, and still below what any length field (up to 2 GiB)
/// or field count (32,767 slots of 24 bytes) would ask for.
fn run(target: fn(&[u8]), input: &[u8]) {
    let region = Region::new(ALLOCATOR);
    target(input);
    let change = region.change();
    let total = change.bytes_allocated as u64 + change.bytes_reallocated.max(0) as u64;
    let allowed = 64 * input.len() as u64 + 128 * 1024;
    assert!(
        total <= allowed,
        "{total} bytes allocated for {} bytes of input",
        input.len()
    );
}

/// Text and CSV inputs: option bytes, then data made mostly of the bytes
/// that matter (quotes, escapes, delimiters, line breaks, `\.`).
fn textual() -> impl Strategy<Value = Vec<u8>> {
    let special = prop::sample::select(b"\"\\,\t|\n\r.'aN".to_vec());
    (
        any::<[u8; 3]>(),
        prop::collection::vec(prop_oneof![4 => special, 1 => any::<u8>()], 0..400),
    )
        .prop_map(|(opts, data)| [&opts[..], &data].concat())
}

/// A 32-bit length that is right, slightly wrong, negative or huge.
fn length(right: usize) -> impl Strategy<Value = i32> {
    let right = i32::try_from(right).unwrap_or(i32::MAX);
    prop_oneof![
        8 => Just(right),
        1 => Just(-1),
        1 => prop::sample::select(vec![
            -2, i32::MIN, i32::MAX, 0x4000_0000, 0x0100_0000, right + 1, right.saturating_sub(1)
        ]),
        1 => any::<i32>(),
    ]
}

/// One binary tuple, mostly well formed: a field count (sometimes a lie),
/// then fields whose length words are sometimes wrong or huge, sometimes
/// cut short.
fn tuple() -> impl Strategy<Value = Vec<u8>> {
    let field = prop::collection::vec(any::<u8>(), 0..24)
        .prop_flat_map(|v| (length(v.len()), Just(v)))
        .prop_map(|(len, v)| [&len.to_be_bytes()[..], &v].concat());
    (prop::collection::vec(field, 0..6), any::<u8>()).prop_flat_map(|(fields, lie)| {
        let n = fields.len() as i16;
        let count = prop_oneof![
            6 => Just(n),
            1 => prop::sample::select(vec![-1, -2, i16::MIN, i16::MAX, n + 1, n.saturating_sub(1)]),
        ];
        (count, Just(fields), Just(lie))
    })
    .prop_map(|(count, fields, lie)| {
        let mut t = count.to_be_bytes().to_vec();
        t.extend(fields.concat());
        // Now and then cut the tuple short.
        if lie % 7 == 0 {
            t.truncate(usize::from(lie) % (t.len() + 1));
        }
        t
    })
}

/// Binary scanner inputs: option bytes (binary dialect), a header (with
/// an extension now and then, sometimes a bad one), tuples, maybe the
/// trailer; then a few random byte flips.
fn binary_file() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<[u8; 2]>(),
        prop_oneof![4 => Just(0i32), 1 => length(3)],
        prop::collection::vec(tuple(), 0..6),
        any::<bool>(),
        prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
    )
        .prop_map(|(opts, ext, tuples, trailer, flips)| {
            let mut f = vec![7, opts[0], opts[1]]; // dialect(7): binary
            f.extend_from_slice(pgtide_copyfmt::binary::SIGNATURE);
            f.extend_from_slice(&0i32.to_be_bytes());
            f.extend_from_slice(&ext.to_be_bytes());
            f.extend_from_slice(&[0xab; 3][..usize::try_from(ext).unwrap_or(0).min(3)]);
            f.extend(tuples.concat());
            if trailer {
                f.extend_from_slice(&(-1i16).to_be_bytes());
            }
            for (at, byte) in flips {
                if f.len() > 3 {
                    let at = 3 + at % (f.len() - 3);
                    f[at] = byte;
                }
            }
            f
        })
}

/// Cases per property: about 3 s for all of them in a debug build.
const CASES: u32 = 3000;

/// Runs `target` on `CASES` inputs from `strategy`; a failing input is
/// shrunk and printed, to be kept in `fuzz/regressions/<name>/`.
fn fuzz<S: Strategy<Value = Vec<u8>>>(name: &str, strategy: S, target: fn(&[u8])) {
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    // A panic in the target fails the case; proptest shrinks it.
    let result = runner.run(&strategy, |input| {
        run(target, &input);
        Ok(())
    });
    if let Err(e) = result {
        match e {
            TestError::Fail(why, input) => panic!(
                "fuzz target {name} failed: {why}\nminimal input (keep it as \
                 fuzz/regressions/{name}/<name>): {input:?}"
            ),
            TestError::Abort(why) => panic!("fuzz target {name} aborted: {why}"),
        }
    }
}

/// Every target on random inputs, one after the other (see [`run`]).
#[test]
fn targets_hold_on_random_inputs() {
    fuzz("scan", textual(), targets::scan);
    fuzz("scan", binary_file(), targets::scan);
    fuzz(
        "scan",
        prop::collection::vec(any::<u8>(), 0..300),
        targets::scan,
    );
    fuzz("binary", tuple(), targets::binary);
    fuzz(
        "binary",
        prop::collection::vec(any::<u8>(), 0..64),
        targets::binary,
    );
    fuzz("line_mapping", textual(), targets::line_mapping);
    huge_lengths_allocate_nothing_big();
    // The meter itself: a buffer sized by a length field is caught.
    let sized_by_length = |input: &[u8]| {
        let len = input
            .first_chunk::<4>()
            .map_or(0, |b| u32::from_be_bytes(*b));
        std::hint::black_box(Vec::<u8>::with_capacity(len as usize));
    };
    let caught = std::panic::catch_unwind(|| run(sized_by_length, &0x0100_0000u32.to_be_bytes()));
    assert!(caught.is_err(), "a 16 MiB allocation went unnoticed");
    regressions_still_pass();
}

/// Lengths that would ask for gigabytes if a buffer were sized by them.
fn huge_lengths_allocate_nothing_big() {
    let mut file = vec![7, 0, 0];
    file.extend_from_slice(pgtide_copyfmt::binary::SIGNATURE);
    file.extend_from_slice(&0i32.to_be_bytes());
    file.extend_from_slice(&i32::MAX.to_be_bytes()); // header extension
    run(targets::scan, &file);
    for len in [i32::MAX, 0x4000_0000, -2, i32::MIN] {
        let mut t = 32767i16.to_be_bytes().to_vec();
        t.extend_from_slice(&len.to_be_bytes());
        t.extend_from_slice(b"abc");
        run(targets::binary, &t);
    }
}

/// A fuzz target: panics when an invariant fails.
type Target = fn(&[u8]);

/// Every input kept in `fuzz/regressions/<target>/` still passes.
fn regressions_still_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let targets: [(&str, Target); 3] = [
        ("scan", targets::scan),
        ("binary", targets::binary),
        ("line_mapping", targets::line_mapping),
    ];
    for (name, target) in targets {
        let Ok(dir) = std::fs::read_dir(root.join(name)) else {
            continue;
        };
        for entry in dir {
            let path = entry.unwrap().path();
            let input = std::fs::read(&path).unwrap();
            eprintln!("{}", path.display());
            run(target, &input);
        }
    }
}
