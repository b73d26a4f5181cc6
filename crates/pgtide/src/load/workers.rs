//! The worker pool: one reader thread cutting chunks, N async workers each
//! with its own connection running one COPY per chunk.
//!
//! The channel between them holds one chunk, so memory stays
//! at about `(workers + 2) x chunk size` whatever the input size. On the
//! first failed chunk the channel is closed: the reader stops, running
//! chunks finish and commit, and nothing new starts (see the commit model
//! in `load`).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use copyfmt::fields::{split_record, Fields, NullSpec};
use copyfmt::scan::Dialect;

use super::copy::Framing;
use super::failure::RowFailure;
use super::method::{Loader, LoaderSpec, Method};
use super::worker::{work, Ctx};
use super::LineRange;
use crate::chunk::{Chunk, Chunker, HeaderMode};
use crate::conn::Target;
use crate::copyopts::{CopyFormat, Header};
use crate::error::{Error, ErrorKind, Result};
use crate::progress::Progress;
use crate::reject::RejectFile;
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
    pub max_record_bytes: usize,
    pub message_bytes: usize,
    /// Reject file path (`--rejects`): bad rows are isolated, not fatal.
    pub rejects: Option<std::path::PathBuf>,
    /// `--force`: the reject file may replace an existing one.
    pub overwrite_rejects: bool,
    /// `CREATE TABLE` (`--create`), run once everything is checked.
    pub create_sql: Option<String>,
    /// `TRUNCATE` statement (`--truncate`), run once everything is checked.
    pub truncate_sql: Option<String>,
    /// `--max-rejects`.
    pub max_rejects: Option<u64>,
    /// COPY with `ON_ERROR ignore` (PostgreSQL 17+ with `--rejects`).
    pub on_error_sql: Option<String>,
    /// The target's triggers may drop rows (`catalog::may_skip_rows`).
    pub table_may_skip: bool,
    /// Columns, NULL spelling, `--sql` and `--batch-rows` for the methods.
    pub method_setup: super::method::MethodSetup,
}

/// What the pool did.
pub(super) struct Outcome {
    pub rows_read: u64,
    pub rows_loaded: u64,
    pub rows_rejected: u64,
    pub rows_skipped_by_table: u64,
    pub bytes: u64,
    pub chunks: u64,
    pub committed: Vec<LineRange>,
    pub notes: Vec<String>,
    pub failure: Option<Error>,
    pub failed_row: Option<RowFailure>,
}

/// Input lines whose rows are all committed or rejected.
pub(super) struct Done {
    pub seq: u64,
    pub input: Arc<str>,
    pub first_line: u64,
    pub last_line: u64,
}

/// A chunk that stopped the load.
pub(super) struct Failed {
    pub seq: u64,
    pub error: Error,
    pub row: Option<RowFailure>,
}

/// What the workers report, under one lock (touched once per chunk).
#[derive(Default)]
pub(super) struct Shared {
    pub done: Vec<Done>,
    pub failed: Vec<Failed>,
    pub rejects: Option<RejectFile>,
    pub loaded: u64,
    pub rejected: u64,
    /// Rows the table dropped on purpose (its triggers).
    pub skipped_by_table: u64,
    pub bytes: u64,
}

/// What the reader thread read, also when it failed: the rows handed
/// out before an error were read, and the summary must say so.
#[derive(Default)]
struct ReadStats {
    rows: u64,
    notes: Vec<String>,
    /// Reading stopped early because a stop was requested.
    interrupted: bool,
    /// Why reading stopped before the end of the inputs.
    error: Option<Error>,
}

/// Runs the load. Nothing is written (table, reject file) until every
/// worker is connected, the method accepted the options, and the reader
/// has cut the first chunk and checked the headers; only then is the table
/// truncated (`--truncate`) and the first chunk sent.
pub(super) async fn execute(plan: Plan, progress: Arc<Progress>) -> Result<Outcome> {
    for input in &plan.inputs {
        if let Ok(meta) = std::fs::metadata(input) {
            Progress::add(&progress.total_bytes, meta.len());
        }
    }
    // Connect every worker before reading anything: a bad target (or too
    // many workers for the server) fails fast and leaves the table untouched.
    let mut clients = Vec::with_capacity(plan.workers);
    for _ in 0..plan.workers {
        clients.push(plan.target.connect_with_notices().await?);
    }
    let mut spec = LoaderSpec {
        method: plan.method,
        copy_sql: plan.sql.clone(),
        framing: Framing::default(),
        message_bytes: plan.message_bytes,
        dialect: plan.dialect.clone(),
        relname: plan.relname.clone(),
        setup: Arc::new(plan.method_setup.clone()),
        on_error_sql: plan.on_error_sql.clone(),
        table_may_skip: plan.table_may_skip,
    };
    // Checked on a loader's own connection: its session is the loaders'.
    let method_notes = match clients.first() {
        Some((client, _)) => spec.prepare(client).await?,
        None => Vec::new(),
    };
    // One chunk waiting is enough: the reader cuts chunks at gigabytes per
    // second, far faster than any server takes them, and every chunk
    // waiting costs its size in memory.
    let (tx, rx) = async_channel::bounded::<Chunk>(1);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Option<Bytes>>();
    let plan = Arc::new(plan);
    let reader = {
        let plan = plan.clone();
        let progress = progress.clone();
        std::thread::spawn(move || read_all(&plan, &tx, ready_tx, &progress))
    };
    let shared = Arc::new(Mutex::new(Shared::default()));
    let Ok(header) = ready_rx.await else {
        // The reader stopped before the first chunk: its error says why.
        return Err(reader_error(reader_join(reader)));
    };
    if let Err(e) = start_writing(&plan, &mut spec, &shared, header, &clients).await {
        rx.close(); // the reader stops at its next chunk
        let _ = reader_join(reader);
        return Err(e);
    }
    let spec = Arc::new(spec);
    let ctx = Arc::new(Ctx {
        target: plan.target.clone(),
        spec: spec.clone(),
        shared: shared.clone(),
        progress: progress.clone(),
        isolate: plan.rejects.is_some(),
        max_rejects: plan.max_rejects,
    });
    let mut tasks = Vec::new();
    for (id, (client, notices)) in clients.into_iter().enumerate() {
        let loader = new_loader(client, notices, &spec);
        tasks.push(tokio::spawn(work(id, loader, rx.clone(), ctx.clone())));
    }
    drop(rx);
    for t in tasks {
        if let Err(e) = t.await {
            return Err(Error::bug(format!("a load worker panicked: {e}")));
        }
    }
    let read = reader_join(reader)?;
    let mut outcome = summarize(shared, read);
    outcome.notes.splice(0..0, method_notes);
    Ok(outcome)
}

/// Everything is checked and the first chunk is cut (its input's header,
/// if any, is `header`): frames binary COPY, creates the reject file, and
/// creates (`--create`) and truncates the table (`--truncate`), in that
/// order, so that a reject file that cannot be created leaves the table as
/// it was (and uncreated).
async fn start_writing(
    plan: &Plan,
    spec: &mut LoaderSpec,
    shared: &Mutex<Shared>,
    header: Option<Bytes>,
    clients: &[(tokio_postgres::Client, crate::conn::Notices)],
) -> Result<()> {
    let binary = plan.format == CopyFormat::Binary;
    if binary {
        // Every chunk's COPY needs the file header in front.
        spec.framing = Framing {
            binary_trailer: header.is_some(),
            prefix: header.clone(),
        };
    }
    if let Some(path) = &plan.rejects {
        let mut file = RejectFile::create(path, plan.overwrite_rejects)?;
        file.set_framing(header, binary);
        shared.lock().expect("worker state").rejects = Some(file);
    }
    let first_writes = [&plan.create_sql, &plan.truncate_sql];
    for sql in first_writes.into_iter().flatten() {
        let Some((client, _)) = clients.first() else {
            break;
        };
        if let Err(e) = client.execute(sql.as_str(), &[]).await {
            // Nothing was loaded: an empty reject file left behind would
            // only make the next run ask for --force.
            if let Some(file) = shared.lock().expect("worker state").rejects.take() {
                file.discard();
            }
            return Err(e.into());
        }
    }
    Ok(())
}

/// Waits for the reader thread.
fn reader_join(reader: std::thread::JoinHandle<ReadStats>) -> Result<ReadStats> {
    reader
        .join()
        .map_err(|_| Error::bug("the input reader thread panicked"))
}

/// Why a reader that stopped before its first chunk stopped.
fn reader_error(read: Result<ReadStats>) -> Error {
    match read {
        Ok(ReadStats { error: Some(e), .. }) | Err(e) => e,
        Ok(_) => Error::bug("the input reader ended without saying so"),
    }
}

fn summarize(shared: Arc<Mutex<Shared>>, read: ReadStats) -> Outcome {
    let mut s = std::mem::take(&mut *shared.lock().expect("worker state lock"));
    s.done.sort_by_key(|d| (d.seq, d.first_line));
    s.failed.sort_by_key(|f| f.seq);
    let mut failures = s.failed.into_iter();
    let first_failure = failures.next();
    let read_error = match read.error {
        Some(e) => Some(e),
        None if read.interrupted => Some(interrupted()),
        None => None,
    };
    let (rows_read, notes) = (read.rows, read.notes);
    let (mut failure, failed_row) = match (first_failure, read_error) {
        (Some(f), _) => (Some(f.error), f.row),
        (None, Some(e)) => (Some(e), None),
        (None, None) => (None, None),
    };
    // The reject file's own count is the rejected-row count of record.
    let mut rows_rejected = s.rejected;
    if let Some(file) = s.rejects.take() {
        match file.finish() {
            Ok(written) => rows_rejected = written,
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    Outcome {
        rows_read,
        rows_loaded: s.loaded,
        rows_rejected,
        rows_skipped_by_table: s.skipped_by_table,
        bytes: s.bytes,
        chunks: s
            .done
            .iter()
            .map(|d| d.seq)
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64,
        committed: merge_ranges(&s.done),
        notes,
        failure,
        failed_row,
    }
}

fn interrupted() -> Error {
    Error::new(
        ErrorKind::Interrupted,
        "interrupted: no new chunk was started; the chunks in progress were \
         committed or rolled back whole",
    )
    .with_hint(
        "the lines listed as committed are in the table and nothing else is; \
         load the remaining lines, or run again with --truncate",
    )
}

/// A loader; it listens to notices only when its COPY runs with
/// `ON_ERROR ignore` (elsewhere nobody would drain them).
pub(super) fn new_loader(
    client: tokio_postgres::Client,
    notices: crate::conn::Notices,
    spec: &Arc<LoaderSpec>,
) -> Loader {
    match spec.on_error_sql {
        Some(_) => Loader::with_notices(client, notices, spec.clone()),
        None => Loader::new(client, spec.clone()),
    }
}

/// The last physical line of a chunk (binary: its last tuple).
pub(super) fn last_line(chunk: &Chunk) -> u64 {
    let lines = chunk.lines.max(chunk.records);
    chunk.first_line + lines.saturating_sub(1)
}

/// Merges done line ranges into contiguous ranges per input.
fn merge_ranges(done: &[Done]) -> Vec<LineRange> {
    let mut out: Vec<LineRange> = Vec::new();
    for d in done {
        match out.last_mut() {
            Some(r) if *r.input == *d.input && r.last + 1 >= d.first_line => {
                r.last = r.last.max(d.last_line);
            }
            _ => out.push(LineRange {
                input: d.input.to_string(),
                first: d.first_line,
                last: d.last_line,
            }),
        }
    }
    out
}

/// The error for a failed chunk: the server's words, placed in the input.
pub(super) fn chunk_error(
    chunk: &Chunk,
    row: Option<&RowFailure>,
    preview: Option<&[u8]>,
    e: tokio_postgres::Error,
) -> Error {
    let Some(db) = e.as_db_error() else {
        return Error::from(e);
    };
    if crate::error::classify(&e) == crate::error::Class::Connection {
        return Error::from(e);
    }
    // The server's context counts lines from the chunk's start; the place
    // given here is the line in the input file instead.
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
    let mut message = format!("{place}{}", db.message());
    if let Some(detail) = db.detail() {
        message.push_str(&format!(" ({detail})"));
    }
    if let Some(p) = preview {
        message.push_str(&format!("; row: {}", show_row(p)));
    }
    let mut hint = String::from(
        "use --rejects FILE to set bad rows aside and load all the others; \
         the summary lists the lines already committed",
    );
    if let Some(h) = db.hint() {
        hint = format!("{h}; {hint}");
    }
    Error::new(ErrorKind::Server, message)
        .with_sqlstate(db.code().code())
        .with_hint(hint)
}

/// A row for an error message: its first 100 characters, quoted, without
/// the line end.
pub(super) fn show_row(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches(['\n', '\r']);
    let mut out: String = text.chars().take(100).collect();
    if text.chars().count() > 100 {
        out.push_str("...");
    }
    format!("{out:?}")
}

/// The reader thread: every input in order, cut into chunks. `ready` gets
/// the header of the first chunk's input once that chunk is cut and every
/// header is checked (or `None` when there is no chunk at all): nothing is
/// written before then.
fn read_all(
    plan: &Plan,
    tx: &async_channel::Sender<Chunk>,
    ready: tokio::sync::oneshot::Sender<Option<Bytes>>,
    progress: &Arc<Progress>,
) -> ReadStats {
    let mut stats = ReadStats::default();
    if let Err(e) = read_inputs(plan, tx, ready, progress, &mut stats) {
        stats.error = Some(e);
    }
    stats
}

/// [`read_all`]'s work; `stats` counts what was handed out so far.
fn read_inputs(
    plan: &Plan,
    tx: &async_channel::Sender<Chunk>,
    ready: tokio::sync::oneshot::Sender<Option<Bytes>>,
    progress: &Arc<Progress>,
    stats: &mut ReadStats,
) -> Result<()> {
    let mut ready = Some(ready);
    let mut seq = 0;
    let mode = header_mode(plan.header);
    check_later_headers(plan)?;
    for input in &plan.inputs {
        let mut source = Source::open_counted(input, Some(progress.clone()))?;
        let read = source.count_decompressed();
        let mut cut = 0u64;
        let mut chunker = Chunker::new(
            input,
            source.reader,
            plan.dialect.clone(),
            mode,
            plan.chunk_bytes,
            seq,
        )
        .max_record(plan.max_record_bytes);
        let mut first = true;
        while let Some(chunk) = chunker.next_chunk()? {
            if first {
                first = false;
                check_header(plan, input, chunker.header())?;
                if let Some(ready) = ready.take() {
                    // Only the first file's header is sent with binary
                    // COPY; the signature is fixed. A closed receiver
                    // means the pool gave up: the send below notices.
                    let _ = ready.send(chunker.header().cloned());
                }
            }
            if progress.stop_requested() {
                // Not counted as read: only chunks handed out are, so the
                // summary's identity holds for what was attempted.
                stats.interrupted = true;
                return Ok(());
            }
            stats.rows += chunk.records;
            cut += chunk.data.len() as u64;
            Progress::add(&progress.rows_read, chunk.records);
            if tx.send_blocking(chunk).is_err() {
                return Ok(()); // a worker failed; stop reading
            }
        }
        if first {
            check_header(plan, input, chunker.header())?;
        }
        check_input_bytes(input, &chunker, cut, read.get())?;
        if chunker.ended_by_marker() && plan.format != CopyFormat::Binary {
            stats.notes.push(format!(
                "{input}: reading stopped at an end-of-data marker (\\.), as COPY does; \
                 anything after it was not loaded"
            ));
        }
        seq = chunker.next_seq();
    }
    if let Some(ready) = ready {
        let _ = ready.send(None);
    }
    Ok(())
}

/// An input read to its end: its header and chunks (and, after an end
/// marker, the rest) are exactly the bytes the source produced.
fn check_input_bytes(input: &str, chunker: &Chunker, cut: u64, read: u64) -> Result<()> {
    let header = chunker.header().map_or(0, |h| h.len() as u64);
    // Bytes after the last chunk are legitimate only after an end marker.
    let after_end = if chunker.ended_by_marker() {
        chunker.unconsumed() as u64
    } else {
        0
    };
    super::invariants::check_bytes(input, header, cut, after_end, read)
}

fn header_mode(header: Header) -> HeaderMode {
    match header {
        Header::None => HeaderMode::None,
        _ => HeaderMode::Consume,
    }
}

/// HEADER MATCH: checks the header of every input but the first before
/// anything is loaded, so that a wrong file later in the list cannot stop
/// a load that already truncated the table. The first input's header is
/// checked with its first chunk; stdin cannot be read twice and is checked
/// when its turn comes.
fn check_later_headers(plan: &Plan) -> Result<()> {
    if plan.header != Header::Match {
        return Ok(());
    }
    for input in plan.inputs.iter().skip(1).filter(|i| *i != "-") {
        let source = Source::open(input)?;
        // A 1-byte target: the chunker stops after the first record.
        let mut chunker = Chunker::new(
            input,
            source.reader,
            plan.dialect.clone(),
            HeaderMode::Consume,
            1,
            0,
        );
        chunker.next_chunk()?;
        check_header(plan, input, chunker.header())?;
    }
    Ok(())
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
