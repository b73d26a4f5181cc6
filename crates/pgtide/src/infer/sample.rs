//! Reading a bounded sample of the inputs for `--create`.
//!
//! What is read, per input (at most [`MAX_INPUTS`] inputs):
//! - the head: the first `rows` records (`--sample-rows`, default
//!   [`DEFAULT_SAMPLE_ROWS`]), through the same chunker the load uses (so
//!   gzip/zstd, the header and COPY's record rules are the load's);
//! - then, when the input is a plain (uncompressed) regular file longer
//!   than its head, [`PROBES`] evenly spaced probes over the rest: each
//!   seeks, skips to the next line start, and takes up to `rows / PROBES`
//!   whole records. A probe can land inside a quoted CSV field; records
//!   whose field count differs from the header's are ignored, so such a
//!   landing costs samples, never a wrong row count.
//!
//! So at most `2 x rows` records per input are looked at, and the whole
//! input only when it is that small (then the sample is `complete`, and
//! exact-fit types are allowed). Compressed files and stdin give the head
//! only (stdin cannot be read twice: `--create` refuses it).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use copyfmt::fields::{split_record, Fields, NullSpec};
use copyfmt::scan::{records, Dialect};

use super::names::{self, ColumnName};
use super::ColumnStats;
use crate::chunk::Chunker;
use crate::copyopts::Header;
use crate::error::{Error, Result};
use crate::source::{Compression, Source};

/// `--sample-rows` default: records read from the head of each input (and
/// as many again spread over the rest of a plain file).
pub const DEFAULT_SAMPLE_ROWS: usize = 10_000;
/// Evenly spaced probes after the head of a plain file.
pub const PROBES: usize = 64;
/// Inputs sampled; later ones are loaded without being looked at.
pub const MAX_INPUTS: usize = 8;
/// Bytes read per probe (a probe keeps only whole records).
const PROBE_BYTES: usize = 256 * 1024;

/// How to read the inputs (COPY's own rules).
#[derive(Debug, Clone)]
pub struct SampleSpec {
    /// Record and field rules.
    pub dialect: Dialect,
    /// The NULL string (`None`: the format's default).
    pub null: Option<String>,
    /// CSV FORCE_NULL / FORCE_NOT_NULL column names.
    pub force_null: Vec<String>,
    /// See `force_null`.
    pub force_not_null: Vec<String>,
    /// The first line of each input is a header.
    pub header: bool,
    /// Column names given with `--columns` (instead of the header's).
    pub columns: Option<Vec<String>>,
    /// Records from each input's head.
    pub rows: usize,
    /// Longest record, as for the load.
    pub max_record_bytes: usize,
    /// The input is UTF-8 (no `--encoding`, or a UTF-8 one): a header's
    /// names can be read on the client.
    pub utf8: bool,
}

/// What the sample says.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Column names (from `--columns`, the header, or `c1..cn`).
    pub names: Vec<ColumnName>,
    /// One per column.
    pub stats: Vec<ColumnStats>,
    /// Records sampled.
    pub rows: u64,
    /// Records ignored because their field count differs.
    pub misfits: u64,
    /// Every record of every input was sampled.
    pub complete: bool,
}

/// Samples `inputs` (files; `-` is refused by the caller).
pub fn sample(inputs: &[String], spec: &SampleSpec) -> Result<Sample> {
    let mut state: Option<State> = None;
    let mut complete = inputs.len() <= MAX_INPUTS;
    for input in inputs.iter().take(MAX_INPUTS) {
        complete &= sample_input(input, spec, &mut state)?;
    }
    let Some(s) = state else {
        return Err(
            Error::input("--create: the input has no rows and no header to name columns")
                .with_hint("create the table yourself, or give a file with a header line"),
        );
    };
    Ok(Sample {
        names: s.names,
        stats: s.stats,
        rows: s.rows,
        misfits: s.misfits,
        complete,
    })
}

/// The sample so far; settled by the first record (or header) seen.
struct State {
    names: Vec<ColumnName>,
    stats: Vec<ColumnStats>,
    nulls: NullSpec,
    rows: u64,
    misfits: u64,
    fields: Fields,
}

impl State {
    fn new(spec: &SampleSpec, names: Vec<ColumnName>) -> State {
        let mut nulls = NullSpec::for_dialect(&spec.dialect);
        if let Some(n) = &spec.null {
            nulls.null = n.as_bytes().to_vec();
        }
        let all: Vec<String> = names.iter().map(|c| c.name.clone()).collect();
        let flags = |list: &[String]| {
            let list = crate::copyopts::every_column(list, &all).unwrap_or_else(|| list.to_vec());
            all.iter().map(|c| list.contains(c)).collect()
        };
        nulls.force_null = flags(&spec.force_null);
        nulls.force_not_null = flags(&spec.force_not_null);
        State {
            stats: vec![ColumnStats::default(); names.len()],
            names,
            nulls,
            rows: 0,
            misfits: 0,
            fields: Fields::new(),
        }
    }

    fn add(&mut self, dialect: &Dialect, record: &[u8]) {
        if split_record(dialect, &self.nulls, record, &mut self.fields).is_err()
            || self.fields.len() != self.stats.len()
        {
            self.misfits += 1;
            return;
        }
        self.rows += 1;
        for (i, s) in self.stats.iter_mut().enumerate() {
            s.add(self.fields.get(i));
        }
    }
}

/// Splits a header or record into its fields as strings.
fn header_fields(dialect: &Dialect, raw: &[u8]) -> Result<Vec<Option<String>>> {
    let mut fields = Fields::new();
    split_record(dialect, &NullSpec::for_dialect(dialect), raw, &mut fields)
        .map_err(|e| Error::input(format!("cannot read the header line: {e}")))?;
    Ok(fields
        .iter()
        .map(|f| f.map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect())
}

fn first_state(spec: &SampleSpec, header: Option<&[u8]>, first: Option<&[u8]>) -> Result<State> {
    let names = if let Some(cols) = &spec.columns {
        let given: Vec<Option<String>> = cols.iter().cloned().map(Some).collect();
        names::columns(Some(&given), given.len())
    } else if let Some(h) = header {
        if !spec.utf8 && h.iter().any(|&b| b >= 0x80) {
            // Names read from raw bytes of another encoding would come
            // out mangled (U+FFFD) in the CREATE TABLE.
            return Err(Error::input(
                "the header has non-ASCII column names in a non-UTF-8 --encoding, which \
                 pgtide cannot read",
            )
            .with_hint("name the columns with --columns, or convert the file to UTF-8"));
        }
        let fields = header_fields(&spec.dialect, h)?;
        names::columns(Some(&fields), fields.len())
    } else {
        let n = match first {
            Some(r) => header_fields(&spec.dialect, r)?.len(),
            None => 0,
        };
        names::columns(None, n)
    };
    Ok(State::new(spec, names))
}

/// Samples one input; true when all of it was read.
fn sample_input(input: &str, spec: &SampleSpec, state: &mut Option<State>) -> Result<bool> {
    let source = Source::open(input)?;
    let plain = source.compression == Compression::None;
    let mode = if spec.header {
        Header::Skip
    } else {
        Header::None
    };
    let mut chunker = Chunker::new(input, source.reader, spec.dialect.clone(), mode, 1 << 20, 0)
        .max_record(spec.max_record_bytes);
    let mut taken = 0usize;
    let mut head_end = 0u64;
    let mut complete = true;
    while let Some(chunk) = chunker.next_chunk()? {
        for span in records(&spec.dialect, &chunk.data) {
            let rec = &chunk.data[span.start..span.end];
            if state.is_none() {
                *state = Some(first_state(
                    spec,
                    chunker.header().map(|h| &h[..]),
                    Some(rec),
                )?);
            }
            if taken == spec.rows {
                complete = false;
                break;
            }
            if span.eol_error.is_none() {
                if let Some(s) = state.as_mut() {
                    s.add(&spec.dialect, rec);
                }
            }
            taken += 1;
            head_end = chunk.first_byte + span.end as u64;
        }
        if !complete {
            break;
        }
    }
    if state.is_none() {
        if let Some(h) = chunker.header().filter(|h| !h.is_empty()) {
            *state = Some(first_state(spec, Some(h), None)?);
        }
    }
    if complete || !plain || crate::source::read_once(input) {
        return Ok(complete);
    }
    if let Some(s) = state.as_mut() {
        probe(input, spec, head_end, s)?;
    }
    Ok(false)
}

/// Evenly spaced records after the head of a plain file.
fn probe(input: &str, spec: &SampleSpec, head_end: u64, state: &mut State) -> Result<()> {
    let mut file = File::open(input).map_err(|e| Error::read(input, e))?;
    let size = file.metadata().map_err(|e| Error::read(input, e))?.len();
    if !file
        .metadata()
        .map_err(|e| Error::read(input, e))?
        .is_file()
        || size <= head_end
    {
        return Ok(());
    }
    let per_probe = (spec.rows / PROBES).max(1);
    let span = size - head_end;
    let mut buf = vec![0u8; PROBE_BYTES];
    for k in 1..=PROBES as u64 {
        let at = head_end + span * k / (PROBES as u64 + 1);
        file.seek(SeekFrom::Start(at))
            .map_err(|e| Error::read(input, e))?;
        let n = read_full(&mut file, &mut buf).map_err(|e| Error::read(input, e))?;
        let bytes = &buf[..n];
        let at_eof = at + n as u64 >= size;
        // Skip the (probably partial) record the seek landed in.
        let Some(start) = memchr::memchr(b'\n', bytes).map(|i| i + 1) else {
            continue;
        };
        let spans: Vec<_> = records(&spec.dialect, &bytes[start..]).collect();
        // Without the end of the file, the last span may be cut short.
        let whole = if at_eof {
            spans.len()
        } else {
            spans.len().saturating_sub(1)
        };
        for s in spans.iter().take(whole.min(per_probe)) {
            if s.eol_error.is_none() {
                state.add(&spec.dialect, &bytes[start + s.start..start + s.end]);
            }
        }
    }
    Ok(())
}

fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
