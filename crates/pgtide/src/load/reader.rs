//! The reader thread: every input in order, opened (decompressed), cut
//! into chunks at record boundaries, headers consumed once per file and
//! checked (`HEADER MATCH`), each chunk handed to the workers through a
//! channel of depth one. It also checks that every input was cut into
//! exactly its bytes, and stops at a stop request (Ctrl-C).

use std::sync::Arc;

use bytes::Bytes;
use copyfmt::fields::{split_record, Fields, NullSpec};

use super::plan::Plan;
use crate::chunk::{Chunk, Chunker};
use crate::copyopts::{CopyFormat, Header};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::source::Source;

/// How the reader thread ended. The rows it handed out (also before an
/// error: the summary must count them) and the rows `--resume` skipped
/// are counted in the load's `Progress`.
#[derive(Default)]
pub(super) struct ReadStats {
    pub notes: Vec<String>,
    /// Reading stopped early because a stop was requested.
    pub interrupted: bool,
    /// Why reading stopped before the end of the inputs.
    pub error: Option<Error>,
}

/// The reader thread: every input in order, cut into chunks. `ready` gets
/// the header of the first chunk's input once that chunk is cut and every
/// header is checked (or `None` when there is no chunk at all): nothing is
/// written before then.
pub(super) fn read_all(
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
    // Chunks handed out (with --resume, pieces of chunks) are numbered
    // without gaps: the reject file writes in that order.
    let mut sent = 0;
    check_later_headers(plan)?;
    for input in &plan.inputs {
        let mut source = Source::open_counted(input, Some(progress.clone()))?;
        let read = source.count_decompressed();
        let mut cut = 0u64;
        let mut chunker = Chunker::new(
            input,
            source.reader,
            plan.dialect.clone(),
            plan.header,
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
            cut += chunk.data.len() as u64;
            let pieces = match &plan.resume {
                None => vec![chunk],
                Some(r) => {
                    let (pieces, skipped) = super::ledger::unfinished(
                        chunk,
                        r.committed(input),
                        r.rejected.get(input.as_str()),
                        &plan.dialect,
                    )?;
                    Progress::add(&progress.rows_resumed, skipped);
                    pieces
                }
            };
            for mut piece in pieces {
                if progress.stop_requested() {
                    // Not counted as read: only chunks handed out are, so
                    // the summary's identity holds for what was attempted.
                    stats.interrupted = true;
                    return Ok(());
                }
                piece.seq = sent;
                sent += 1;
                Progress::add(&progress.rows_read, piece.records);
                if tx.send_blocking(piece).is_err() {
                    return Ok(()); // a worker failed; stop reading
                }
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

/// HEADER MATCH: checks the header of every input but the first before
/// anything is loaded, so that a wrong file later in the list cannot stop
/// a load that already truncated the table. The first input's header is
/// checked with its first chunk; stdin and pipes cannot be read twice
/// and are checked when their turn comes.
fn check_later_headers(plan: &Plan) -> Result<()> {
    if plan.header != Header::Match {
        return Ok(());
    }
    for input in plan
        .inputs
        .iter()
        .skip(1)
        .filter(|i| !crate::source::read_once(i))
    {
        let source = Source::open(input)?;
        // A 1-byte target: the chunker stops after the first record.
        let mut chunker = Chunker::new(
            input,
            source.reader,
            plan.dialect.clone(),
            Header::Skip,
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
    // The load's NULL string, without FORCE_NULL/FORCE_NOT_NULL (which
    // apply to data rows): a header field that spells it is NULL, which
    // names no column (the server: "got null value").
    let nulls = NullSpec {
        null: plan.method_setup.nulls.null.clone(),
        force_null: Vec::new(),
        force_not_null: Vec::new(),
    };
    if !plan.method_setup.utf8_input() && header.iter().any(|&b| b >= 0x80) {
        // The server compares the names after converting the line from the
        // input's encoding; raw bytes would refuse a right header and take
        // a wrong one.
        return Err(Error::input(format!(
            "{input}:1: HEADER MATCH cannot check non-ASCII column names in encoding {}",
            plan.method_setup.encoding.as_deref().unwrap_or_default()
        ))
        .with_hint(
            "use --header to skip the header without checking it, or convert the file to UTF-8",
        ));
    }
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
        let Some(got) = fields.get(i).map(String::from_utf8_lossy) else {
            return Err(mismatch(format!(
                "field {} is the NULL string ({:?}), expected {want:?}",
                i + 1,
                String::from_utf8_lossy(&nulls.null)
            )));
        };
        if got != want.as_str() {
            return Err(mismatch(format!(
                "field {} is {:?}, expected {want:?}",
                i + 1,
                got
            )));
        }
    }
    Ok(())
}
