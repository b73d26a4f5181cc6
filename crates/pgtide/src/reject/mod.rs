//! Rejected rows: where they go, and the count that proves nothing was
//! lost.
//!
//! A bad row is a value, not an error. Each [`Reject`] keeps the row's
//! bytes exactly as they were in the input and where it was (file, physical
//! line, record number, byte offset) with the server's reason (SQLSTATE,
//! message, detail, hint). The [`RejectFile`] writes the rows, in input
//! order, in the input's own format (header first when the input had one,
//! binary header and trailer for binary input), so that the file can be
//! fixed and loaded again with the same command; beside it,
//! `<path>.log` gets one JSON object per reject.
//!
//! Chunks finish out of order across workers; the writer keeps the rejects
//! of chunks that finished early until every earlier chunk has reported,
//! which holds at most the rejects of the chunks in flight (bounded by
//! workers x chunk size), however many rows are rejected in total.

pub mod gate;
mod hints;
pub mod isolate;
pub mod paths;
mod resilient;
mod site;
mod sizes;
mod verdict;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use copyfmt::scan::{Eol, RecordSpan};

use crate::error::{Error, ErrorKind, Result};
use crate::failure::RowFailure;

/// One rejected row.
#[derive(Debug, Clone)]
pub struct Reject {
    /// Where it was and why the server refused it.
    pub at: RowFailure,
    /// The row's bytes as in the input (terminator included when it had
    /// one).
    pub raw: Bytes,
    /// The input's line-ending style: the terminator a last row without
    /// one gets in the reject file.
    pub eol: Eol,
}

impl Reject {
    /// The reject of the record at `span` of `chunk`.
    pub fn of(at: RowFailure, chunk: &crate::chunk::Chunk, span: &RecordSpan) -> Reject {
        Reject {
            at,
            raw: chunk.data.slice(span.start..span.end),
            eol: chunk.eol,
        }
    }
}

/// The reject file and its JSON-lines log, written in input order.
pub struct RejectFile {
    path: PathBuf,
    rows: BufWriter<File>,
    log: BufWriter<File>,
    /// Written before the first row: the header record or binary header.
    prologue: Option<Bytes>,
    /// Written at the end (binary trailer), only if a row was written.
    epilogue: Option<&'static [u8]>,
    written: u64,
    next_seq: u64,
    waiting: BTreeMap<u64, Vec<Reject>>,
    /// `--resume`: this run's name, logged with each row, with the rows
    /// file's length after it (see [`Earlier`]).
    resumed: Option<Resumed>,
}

/// A reject file of a `--resume` load.
struct Resumed {
    run: Arc<str>,
    /// Rows written by earlier runs (kept: the header is there already).
    earlier_rows: u64,
    /// Length of the rows file.
    rows_len: u64,
    /// Log lines of rows written but not flushed: the log is written
    /// only after the rows it names are, so a kill never leaves a logged
    /// row missing.
    log: Vec<u8>,
}

/// What earlier runs of a `--resume` load left in the reject file: the
/// records they rejected (a resumed run skips them) and how much of the
/// file and log to keep. A row is kept only when its log line is whole
/// and names where the row ends; rows after the last such line (a kill
/// between writing a row and its log line) are cut off and rejected
/// again.
#[derive(Debug, Default)]
pub struct Earlier {
    /// Byte offsets (decompressed input) of the rejected records, per
    /// input as named on the command line.
    pub rejected: BTreeMap<String, BTreeSet<u64>>,
    /// Rows kept.
    pub rows: u64,
    rows_len: u64,
    log_len: u64,
}

/// One log line of a `--resume` load.
#[derive(serde::Serialize)]
struct LogLine<'a> {
    /// The run that wrote the row.
    run: &'a str,
    /// The rows file's length after the row.
    end: u64,
    #[serde(flatten)]
    at: &'a RowFailure,
}

/// Reads what earlier runs left in `path` and its log (nothing when they
/// do not exist).
pub fn earlier(path: &Path) -> Result<Earlier> {
    let mut out = Earlier::default();
    let Ok(rows_len) = std::fs::metadata(path).map(|m| m.len()) else {
        return Ok(out);
    };
    let Ok(log) = File::open(log_path(path)) else {
        return Ok(out);
    };
    let mut reader = BufReader::new(log);
    let mut line = Vec::new();
    let mut at = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::read(&log_path(path).display().to_string(), e))?;
        if n == 0 || !line.ends_with(b"\n") {
            break;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) else {
            break;
        };
        let (Some(input), Some(byte), Some(end)) = (
            v.get("input").and_then(|x| x.as_str()),
            v.get("byte").and_then(|x| x.as_u64()),
            v.get("end").and_then(|x| x.as_u64()),
        ) else {
            break;
        };
        if end > rows_len {
            break;
        }
        out.rejected
            .entry(input.to_owned())
            .or_default()
            .insert(byte);
        out.rows += 1;
        out.rows_len = end;
        at += n as u64;
        out.log_len = at;
    }
    Ok(out)
}

impl RejectFile {
    /// Creates `path` and `path.log`, mode 0600, never through a symbolic
    /// link; existing files are truncated only with `overwrite` (`--force`).
    /// The paths must have passed [`paths::check`].
    pub fn create(path: &Path, overwrite: bool) -> Result<RejectFile> {
        let log_path = log_path(path);
        let open = |p: &Path| {
            paths::create(p, overwrite)
                .map(|f| BufWriter::with_capacity(256 * 1024, f))
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Output,
                        format!("cannot create {}: {e}", p.display()),
                    )
                    .with_hint(paths::hint(&e))
                })
        };
        // Both locked before either is emptied: a run that holds one keeps it.
        let (rows, log) = (open(path)?, open(&log_path)?);
        for (f, p) in [(&rows, path), (&log, log_path.as_path())] {
            f.get_ref().set_len(0).map_err(|e| {
                Error::new(
                    ErrorKind::Output,
                    format!("cannot empty {}: {e}", p.display()),
                )
            })?;
        }
        Ok(RejectFile {
            path: path.to_owned(),
            rows,
            log,
            prologue: None,
            epilogue: None,
            written: 0,
            next_seq: 0,
            waiting: BTreeMap::new(),
            resumed: None,
        })
    }

    /// `--resume`: opens `path` and its log to append to what earlier
    /// runs wrote (`earlier`, from [`earlier`]; anything after it is cut
    /// off), creating them (mode 0600, no link followed) when missing.
    /// Each row's log line names `run`.
    pub fn append(path: &Path, earlier: &Earlier, run: Arc<str>) -> Result<RejectFile> {
        let open = |p: &Path| -> std::io::Result<File> {
            use std::os::unix::fs::OpenOptionsExt;
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(p)?;
            paths::lock(&f)?;
            Ok(f)
        };
        // Both locked before either is cut: a run that holds one keeps it.
        let cut = |f: &mut File, keep: u64| -> std::io::Result<()> {
            f.set_len(keep)?;
            f.seek(SeekFrom::Start(keep)).map(|_| ())
        };
        let log = log_path(path);
        let fail = |p: &Path, e: std::io::Error| {
            Error::new(
                ErrorKind::Output,
                format!("cannot open {}: {e}", p.display()),
            )
            .with_hint(paths::hint(&e))
        };
        let mut rows = open(path).map_err(|e| fail(path, e))?;
        let mut log_file = open(&log).map_err(|e| fail(&log, e))?;
        cut(&mut rows, earlier.rows_len).map_err(|e| fail(path, e))?;
        cut(&mut log_file, earlier.log_len).map_err(|e| fail(&log, e))?;
        Ok(RejectFile {
            path: path.to_owned(),
            rows: BufWriter::with_capacity(256 * 1024, rows),
            log: BufWriter::with_capacity(256 * 1024, log_file),
            prologue: None,
            epilogue: None,
            written: 0,
            next_seq: 0,
            waiting: BTreeMap::new(),
            resumed: Some(Resumed {
                run,
                earlier_rows: earlier.rows,
                rows_len: earlier.rows_len,
                log: Vec::new(),
            }),
        })
    }

    /// A file made by [`RejectFile::create`] for a `--resume` load that
    /// starts it over (`--force`): its log lines name `run` and where each
    /// row ends, as appended ones do, so that the next run reads them.
    pub fn resumed_by(mut self, run: Arc<str>) -> RejectFile {
        self.resumed = Some(Resumed {
            run,
            earlier_rows: 0,
            rows_len: 0,
            log: Vec::new(),
        });
        self
    }

    /// Removes the reject file and its log, for a load that stopped before
    /// it could write anything into them.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(log_path(&self.path));
    }

    /// The reject file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets what precedes the rows (the input's header record, or the
    /// binary file header) and, for binary, the trailer.
    pub fn set_framing(&mut self, prologue: Option<Bytes>, binary: bool) {
        self.prologue = prologue;
        self.epilogue = binary.then_some(&copyfmt::binary::TRAILER[..]);
    }

    /// Rows written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Hands over the rejects of chunk `seq` (possibly none). Every chunk
    /// must report once so that later chunks' rejects can be written.
    pub fn submit(&mut self, seq: u64, rejects: Vec<Reject>) -> Result<()> {
        self.waiting.insert(seq, rejects);
        while let Some(rejects) = self.waiting.remove(&self.next_seq) {
            self.next_seq += 1;
            for r in rejects {
                self.write(&r)?;
            }
        }
        self.flush_resumed()
    }

    /// `--resume`: the rows reach the file before their log lines.
    fn flush_resumed(&mut self) -> Result<()> {
        let Some(log) = self.resumed.as_mut().map(|r| std::mem::take(&mut r.log)) else {
            return Ok(());
        };
        if log.is_empty() {
            return Ok(());
        }
        self.rows.flush().map_err(|e| self.io_error(e))?;
        self.log.write_all(&log).map_err(|e| self.io_error(e))?;
        self.log.flush().map_err(|e| self.io_error(e))
    }

    /// [`RejectFile::finish`], and the file must hold the `counted` rows
    /// the load's summary will state: a row counted and not written (or
    /// the reverse) would make the summary lie, so that is a bug.
    pub fn finish_counted(self, counted: u64) -> Result<()> {
        match self.finish()? {
            written if written == counted => Ok(()),
            written => Err(Error::bug(format!(
                "the reject file holds {written} rows of this run, but {counted} were rejected"
            ))),
        }
    }

    /// Writes whatever is still waiting (chunks after a gap left by a
    /// stopped load), the trailer, and flushes.
    pub fn finish(mut self) -> Result<u64> {
        for (_, rejects) in std::mem::take(&mut self.waiting) {
            for r in rejects {
                self.write(&r)?;
            }
        }
        self.flush_resumed()?;
        let earlier = self.resumed.as_ref().map_or(0, |r| r.earlier_rows);
        if self.written + earlier > 0 {
            if let Some(e) = self.epilogue {
                self.rows.write_all(e).map_err(|e| self.io_error(e))?;
            }
        }
        self.rows.flush().map_err(|e| self.io_error(e))?;
        self.log.flush().map_err(|e| self.io_error(e))?;
        Ok(self.written)
    }

    fn write(&mut self, r: &Reject) -> Result<()> {
        let earlier = self.resumed.as_ref().map_or(0, |r| r.earlier_rows);
        if self.written == 0 && earlier == 0 {
            if let Some(p) = self.prologue.take() {
                self.rows.write_all(&p).map_err(|e| self.io_error(e))?;
                self.grow(p.len());
            }
        }
        self.rows.write_all(&r.raw).map_err(|e| self.io_error(e))?;
        self.grow(r.raw.len());
        // A last row without its line break gets one, in the input's style
        // (a file of `\r\n` rows with one bare `\n` would be refused when
        // loaded again), so that rows written after it stay separate rows.
        // A row that ends with `\r` has one: the style is a lone `\r`.
        if self.epilogue.is_none() && !r.raw.ends_with(b"\n") && !r.raw.ends_with(b"\r") {
            let end: &[u8] = match r.eol {
                Eol::CrNl => b"\r\n",
                Eol::Cr => b"\r",
                Eol::Nl | Eol::Unknown => b"\n",
            };
            self.rows.write_all(end).map_err(|e| self.io_error(e))?;
            self.grow(end.len());
        }
        self.written += 1;
        if let Some(resumed) = self.resumed.as_mut() {
            let line = LogLine {
                run: &resumed.run,
                end: resumed.rows_len,
                at: &r.at,
            };
            serde_json::to_writer(&mut resumed.log, &line)
                .map_err(|e| Error::bug(e.to_string()))?;
            resumed.log.push(b'\n');
            return Ok(());
        }
        let json = serde_json::to_string(&r.at).map_err(|e| Error::bug(e.to_string()))?;
        writeln!(self.log, "{json}").map_err(|e| self.io_error(e))?;
        Ok(())
    }

    /// Counts `n` bytes written to the rows file (`--resume`).
    fn grow(&mut self, n: usize) {
        if let Some(r) = self.resumed.as_mut() {
            r.rows_len += n as u64;
        }
    }

    fn io_error(&self, e: std::io::Error) -> Error {
        Error::new(
            ErrorKind::Output,
            format!("cannot write {}: {e}", self.path.display()),
        )
        .with_hint("check free space; the load stopped so that no reject is lost")
    }
}

/// `dirty.rejects` -> `dirty.rejects.log`.
pub fn log_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".log");
    PathBuf::from(s)
}
