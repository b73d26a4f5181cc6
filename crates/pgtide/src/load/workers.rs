//! The worker pool: one reader thread cutting chunks, N async workers each
//! with its own connection running one COPY per chunk.
//!
//! The channel between them is bounded (depth = workers), so memory stays
//! at about `workers x chunk size x 2` whatever the input size. On the
//! first failed chunk the channel is closed: the reader stops, running
//! chunks finish and commit, and nothing new starts (see the commit model
//! in `load`).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use copyfmt::fields::{split_record, Fields, NullSpec};
use copyfmt::scan::Dialect;

use super::copy::Framing;
use super::failure::RowFailure;
use super::method::{Batch, BatchError, Loader, LoaderSpec, Method};
use super::LineRange;
use crate::chunk::{Chunk, Chunker, HeaderMode};
use crate::conn::Target;
use crate::copyopts::{CopyFormat, Header};
use crate::error::{Error, ErrorKind, Result};
use crate::progress::Progress;
use crate::source::Source;

/// Everything the pool needs, resolved by `load::run`.
pub(super) struct Plan {
    pub target: Target,
    pub method: Method,
    pub sql: String,
    pub dialect: Dialect,
    pub format: CopyFormat,
    pub header: Header,
    pub column_names: Vec<String>,
    pub relname: String,
    pub inputs: Vec<String>,
    pub workers: usize,
    pub chunk_bytes: usize,
    pub message_bytes: usize,
}

/// What the pool did.
pub(super) struct Outcome {
    pub rows_read: u64,
    pub rows_loaded: u64,
    pub bytes: u64,
    pub chunks: u64,
    pub committed: Vec<LineRange>,
    pub notes: Vec<String>,
    pub failure: Option<Error>,
    pub failed_row: Option<RowFailure>,
}

/// A committed chunk.
struct Done {
    seq: u64,
    input: Arc<str>,
    first_line: u64,
    last_line: u64,
    rows: u64,
    bytes: u64,
}

/// A failed chunk.
struct Failed {
    seq: u64,
    error: Error,
    row: Option<RowFailure>,
}

#[derive(Default)]
struct Shared {
    done: Vec<Done>,
    failed: Vec<Failed>,
}

/// What the reader thread read.
struct ReadStats {
    rows: u64,
    notes: Vec<String>,
}

pub(super) async fn execute(plan: Plan, progress: Arc<Progress>) -> Result<Outcome> {
    for input in &plan.inputs {
        if let Ok(meta) = std::fs::metadata(input) {
            Progress::add(&progress.total_bytes, meta.len());
        }
    }
    // Connect every worker before reading anything: a bad target fails
    // fast and leaves the table untouched.
    let mut clients = Vec::with_capacity(plan.workers);
    for _ in 0..plan.workers {
        clients.push(plan.target.connect().await?);
    }
    let (tx, rx) = async_channel::bounded::<Chunk>(plan.workers);
    let (header_tx, header_rx) = std::sync::mpsc::channel::<Bytes>();
    let plan = Arc::new(plan);
    let reader = {
        let plan = plan.clone();
        let progress = progress.clone();
        std::thread::spawn(move || read_all(&plan, &tx, &header_tx, &progress))
    };
    // Binary input: every chunk's COPY needs the file header in front.
    let prefix = if plan.format == CopyFormat::Binary {
        header_rx.recv().ok()
    } else {
        None
    };
    let spec = Arc::new(LoaderSpec {
        method: plan.method,
        copy_sql: plan.sql.clone(),
        framing: Framing {
            binary_trailer: prefix.is_some(),
            prefix,
        },
        message_bytes: plan.message_bytes,
        dialect: plan.dialect.clone(),
        relname: plan.relname.clone(),
    });
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut tasks = Vec::new();
    for (id, client) in clients.into_iter().enumerate() {
        let loader = Loader::new(client, spec.clone());
        let (rx, shared, progress) = (rx.clone(), shared.clone(), progress.clone());
        tasks.push(tokio::spawn(work(id, loader, rx, shared, progress)));
    }
    drop(rx);
    for t in tasks {
        if let Err(e) = t.await {
            return Err(Error::bug(format!("a load worker panicked: {e}")));
        }
    }
    let read = reader
        .join()
        .map_err(|_| Error::bug("the input reader thread panicked"))?;
    Ok(summarize(shared, read))
}

/// One worker: chunks from the channel until it closes or a chunk fails.
async fn work(
    id: usize,
    mut loader: Loader,
    rx: async_channel::Receiver<Chunk>,
    shared: Arc<Mutex<Shared>>,
    progress: Arc<Progress>,
) {
    while let Ok(chunk) = rx.recv().await {
        let batch = Batch {
            data: chunk.data.clone(),
            records: chunk.records,
        };
        let result = loader.load(&batch).await;
        let mut s = shared.lock().expect("worker state lock");
        match result {
            Ok(rows) => {
                Progress::add(&progress.rows_loaded, rows);
                Progress::add(&progress.worker_rows[id], rows);
                s.done.push(Done {
                    seq: chunk.seq,
                    input: chunk.input.clone(),
                    first_line: chunk.first_line,
                    last_line: last_line(&chunk),
                    rows,
                    bytes: chunk.data.len() as u64,
                });
            }
            Err(e) => {
                s.failed.push(failed_chunk(&chunk, loader.spec(), e));
                rx.close();
                break;
            }
        }
    }
}

fn failed_chunk(chunk: &Chunk, spec: &LoaderSpec, e: BatchError) -> Failed {
    let row = e
        .record
        .and_then(|i| RowFailure::locate(chunk, &spec.dialect, i, &spec.relname, &e.error));
    let mut error = chunk_error(chunk, row.as_ref(), e.error);
    if e.commit_unknown {
        error = error.with_hint(format!(
            "the connection broke while committing lines {}-{} of {}: check whether they \
             are in the table before loading them again",
            chunk.first_line,
            last_line(chunk),
            chunk.input
        ));
    }
    Failed {
        seq: chunk.seq,
        error,
        row,
    }
}

fn summarize(shared: Arc<Mutex<Shared>>, read: Result<ReadStats>) -> Outcome {
    let mut s = std::mem::take(&mut *shared.lock().expect("worker state lock"));
    s.done.sort_by_key(|d| d.seq);
    s.failed.sort_by_key(|f| f.seq);
    let first_failure = s.failed.into_iter().next();
    let (rows_read, notes, read_error) = match read {
        Ok(r) => (r.rows, r.notes, None),
        Err(e) => (0, Vec::new(), Some(e)),
    };
    let (failure, failed_row) = match (first_failure, read_error) {
        (Some(f), _) => (Some(f.error), f.row),
        (None, Some(e)) => (Some(e), None),
        (None, None) => (None, None),
    };
    Outcome {
        rows_read,
        rows_loaded: s.done.iter().map(|d| d.rows).sum(),
        bytes: s.done.iter().map(|d| d.bytes).sum(),
        chunks: s.done.len() as u64,
        committed: merge_ranges(&s.done),
        notes,
        failure,
        failed_row,
    }
}

/// The last physical line of a chunk (binary: its last tuple).
fn last_line(chunk: &Chunk) -> u64 {
    let lines = chunk.lines.max(chunk.records);
    chunk.first_line + lines.saturating_sub(1)
}

/// Merges committed chunks into contiguous line ranges per input.
fn merge_ranges(done: &[Done]) -> Vec<LineRange> {
    let mut out: Vec<LineRange> = Vec::new();
    for d in done {
        match out.last_mut() {
            Some(r) if *r.input == *d.input && r.last + 1 >= d.first_line => {
                r.last = r.last.max(d.last_line);
                r.rows += d.rows;
            }
            _ => out.push(LineRange {
                input: d.input.to_string(),
                first: d.first_line,
                last: d.last_line,
                rows: d.rows,
            }),
        }
    }
    out
}

/// The error for a failed chunk: the server's words, placed in the input.
fn chunk_error(chunk: &Chunk, row: Option<&RowFailure>, e: tokio_postgres::Error) -> Error {
    let err = Error::from(e);
    if err.kind() != ErrorKind::Server {
        return err;
    }
    let place = match row {
        Some(r) => match &r.column {
            Some(c) => format!("{}:{}: column {c}: ", r.input, r.line),
            None => format!("{}:{}: ", r.input, r.line),
        },
        None => format!(
            "{}: in lines {}-{}: ",
            chunk.input,
            chunk.first_line,
            last_line(chunk)
        ),
    };
    let mut out = Error::new(ErrorKind::Server, format!("{place}{}", err.message()));
    if let Some(code) = err.sqlstate() {
        out = out.with_sqlstate(code);
    }
    out.with_hint(match err.hint() {
        Some(h) => format!("{h}; committed line ranges are listed in the summary"),
        None => "fix the row and load the lines that were not committed (the \
                 summary lists what was), or reload with --truncate"
            .to_owned(),
    })
}

/// The reader thread: every input in order, cut into chunks.
fn read_all(
    plan: &Plan,
    tx: &async_channel::Sender<Chunk>,
    header_tx: &std::sync::mpsc::Sender<Bytes>,
    progress: &Arc<Progress>,
) -> Result<ReadStats> {
    let mut stats = ReadStats {
        rows: 0,
        notes: Vec::new(),
    };
    let mut seq = 0;
    let mode = match plan.header {
        Header::None => HeaderMode::None,
        _ => HeaderMode::Consume,
    };
    for input in &plan.inputs {
        let source = Source::open_counted(input, Some(progress.clone()))?;
        let mut chunker = Chunker::new(
            input,
            source.reader,
            plan.dialect.clone(),
            mode,
            plan.chunk_bytes,
            seq,
        );
        let mut first = true;
        while let Some(chunk) = chunker.next_chunk()? {
            if first {
                first = false;
                check_header(plan, input, chunker.header())?;
                if let (CopyFormat::Binary, Some(h)) = (plan.format, chunker.header()) {
                    // Only the first file's header is sent; the signature
                    // is fixed, and differing flags are rejected below.
                    let _ = header_tx.send(h.clone());
                }
            }
            stats.rows += chunk.records;
            Progress::add(&progress.rows_read, chunk.records);
            if tx.send_blocking(chunk).is_err() {
                return Ok(stats); // a worker failed; stop reading
            }
        }
        if first {
            check_header(plan, input, chunker.header())?;
        }
        if chunker.ended_by_marker() && plan.format != CopyFormat::Binary {
            stats.notes.push(format!(
                "{input}: reading stopped at an end-of-data marker (\\.), as COPY does; \
                 anything after it was not loaded"
            ));
        }
        seq = chunker.next_seq();
    }
    Ok(stats)
}

/// HEADER MATCH: the header must name the loaded columns, in order, as
/// PostgreSQL requires. Checked on the client because the header never
/// reaches the server.
fn check_header(plan: &Plan, input: &str, header: Option<&Bytes>) -> Result<()> {
    if plan.header != Header::Match {
        return Ok(());
    }
    let Some(header) = header.filter(|h| !h.is_empty()) else {
        return Err(Error::input(format!(
            "{input}: HEADER MATCH given but the file is empty"
        )));
    };
    let nulls = NullSpec {
        null: match plan.format {
            CopyFormat::Csv => Vec::new(),
            _ => b"\\N".to_vec(),
        },
        force_null: Vec::new(),
        force_not_null: Vec::new(),
    };
    let mut fields = Fields::new();
    split_record(&plan.dialect, &nulls, header, &mut fields)
        .map_err(|e| Error::input(format!("{input}:1: cannot read the header line: {e}")))?;
    let mismatch = |msg: String| {
        Error::input(format!("{input}:1: header does not match: {msg}")).with_hint(format!(
            "the header must list the loaded columns in order: {}; use --header (not match) \
             to skip it without checking, or --columns to name the file's columns",
            plan.column_names.join(",")
        ))
    };
    if fields.len() != plan.column_names.len() {
        return Err(mismatch(format!(
            "{} fields, {} columns loaded",
            fields.len(),
            plan.column_names.len()
        )));
    }
    for (i, want) in plan.column_names.iter().enumerate() {
        let got = fields.get(i).map(String::from_utf8_lossy);
        if got.as_deref() != Some(want.as_str()) {
            return Err(mismatch(format!(
                "field {} is {:?}, expected {want:?}",
                i + 1,
                got.unwrap_or_default()
            )));
        }
    }
    Ok(())
}
