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

pub mod isolate;
pub mod paths;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

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
                    .with_hint("check that the directory exists and is writable")
                })
        };
        Ok(RejectFile {
            path: path.to_owned(),
            rows: open(path)?,
            log: open(&log_path)?,
            prologue: None,
            epilogue: None,
            written: 0,
            next_seq: 0,
            waiting: BTreeMap::new(),
        })
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
        Ok(())
    }

    /// Writes whatever is still waiting (chunks after a gap left by a
    /// stopped load), the trailer, and flushes.
    pub fn finish(mut self) -> Result<u64> {
        for (_, rejects) in std::mem::take(&mut self.waiting) {
            for r in rejects {
                self.write(&r)?;
            }
        }
        if self.written > 0 {
            if let Some(e) = self.epilogue {
                self.rows.write_all(e).map_err(|e| self.io_error(e))?;
            }
        }
        self.rows.flush().map_err(|e| self.io_error(e))?;
        self.log.flush().map_err(|e| self.io_error(e))?;
        Ok(self.written)
    }

    fn write(&mut self, r: &Reject) -> Result<()> {
        if self.written == 0 {
            if let Some(p) = self.prologue.take() {
                self.rows.write_all(&p).map_err(|e| self.io_error(e))?;
            }
        }
        self.rows.write_all(&r.raw).map_err(|e| self.io_error(e))?;
        // A last row without its newline gets one, so that rows written
        // after it stay separate rows.
        if self.epilogue.is_none() && !r.raw.ends_with(b"\n") {
            self.rows.write_all(b"\n").map_err(|e| self.io_error(e))?;
        }
        let json = serde_json::to_string(&r.at).map_err(|e| Error::bug(e.to_string()))?;
        writeln!(self.log, "{json}").map_err(|e| self.io_error(e))?;
        self.written += 1;
        Ok(())
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
