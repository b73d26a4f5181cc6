//! Where exported bytes go: a file that appears complete or not at all,
//! or stdout; compressed with gzip or zstd when asked.
//!
//! A file is written as `FILE.XXXXXX.partial` (a new name, created
//! exclusively: never a file or link someone put there, never another
//! export's) in the same directory (so the final rename never crosses file
//! systems), fsynced, renamed over `FILE`, and the directory is fsynced so
//! the rename survives a crash. If anything fails, or the [`Output`] is
//! dropped before [`Output::finish`], the partial file is removed.
//!
//! What `FILE` already is decides the rest, as psql `\copy .. TO 'FILE'`
//! would write it: a symbolic link is followed (the file it points to is
//! replaced, the link stays; not another user's link in `/tmp`); an
//! existing file must be writable, and keeps its mode (and its owner,
//! where this user may give it); a new one gets the mode the umask gives;
//! a FIFO or a device is written into as it is (no rename: replacing
//! `/dev/null` or a pipe a reader waits on would be wrong), and then what
//! reached it before a failure stays there.
//!
//! The writes (and the compression) run on one OS thread fed by a bounded
//! channel, so a slow disk or compressor pushes back on the connections
//! instead of buffering: at most [`QUEUE_DEPTH`] pieces wait here.

use std::fs::{File, Metadata, OpenOptions, Permissions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use bytes::Bytes;
use tempfile::TempPath;
use tokio::sync::mpsc;

use crate::error::{Error, ErrorKind, Result};
use crate::source::Compression;

/// Pieces (each at most about [`super::receive::PIECE_BYTES`]) queued for
/// the writer thread: enough to keep it busy while a connection refills,
/// small enough to stay a few MiB.
pub const QUEUE_DEPTH: usize = 4;

/// Buffer between the encoder and the file: one large write per 1 MiB.
const WRITE_BUF: usize = 1 << 20;

/// What the writer thread did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Written {
    /// Bytes handed to the output (the COPY data, before compression).
    pub data_bytes: u64,
    /// Bytes stored (after compression).
    pub stored_bytes: u64,
}

/// An open output. Send pieces with [`Output::send`], then call
/// [`Output::finish`]; dropping it instead removes the partial file.
pub struct Output {
    name: String,
    tx: Option<mpsc::Sender<Bytes>>,
    thread: Option<JoinHandle<io::Result<Written>>>,
    /// `(partial, final)` for files; `None` for stdout and special files.
    paths: Option<(TempPath, PathBuf)>,
}

/// The compression for `name`: `.gz` gzip, `.zst` zstd, else none, unless
/// `explicit` says otherwise.
pub fn compression_for(name: &str, explicit: Option<Compression>) -> Compression {
    if let Some(c) = explicit {
        return c;
    }
    if name.ends_with(".gz") {
        Compression::Gzip
    } else if name.ends_with(".zst") {
        Compression::Zstd
    } else {
        Compression::None
    }
}

impl Output {
    /// Creates the partial file (or opens a special file, or takes stdout
    /// for `-`) and starts the writer thread. Fails before any server work
    /// when the file cannot be created. A FIFO is opened once a reader
    /// has opened it, unless `stop` says to give up first.
    pub fn create(name: &str, compression: Compression, stop: &dyn Fn() -> bool) -> Result<Output> {
        let (sink, paths) = if name == "-" {
            (Sink::Stdout(io::stdout()), None)
        } else {
            open_file(name, stop)?
        };
        let (tx, rx) = mpsc::channel::<Bytes>(QUEUE_DEPTH);
        let thread = std::thread::Builder::new()
            .name("pgtide-export-writer".into())
            .spawn(move || write_all(rx, sink, compression))
            .map_err(|e| Error::bug(format!("cannot start the writer thread: {e}")))?;
        Ok(Output {
            name: name.to_owned(),
            tx: Some(tx),
            thread: Some(thread),
            paths,
        })
    }

    /// The output as the user named it (`-` for stdout).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Queues `piece` for writing; waits while the queue is full. An
    /// error means the writer stopped: [`Output::finish`] says why.
    pub async fn send(&self, piece: Bytes) -> std::result::Result<(), WriterStopped> {
        match &self.tx {
            Some(tx) => tx.send(piece).await.map_err(|_| WriterStopped),
            None => Err(WriterStopped),
        }
    }

    /// The writer's error after a failed [`Output::send`] (the partial
    /// file is removed).
    pub async fn failure(mut self) -> Error {
        match self.join().await {
            Err(e) => e,
            Ok(_) => Error::bug("the output writer stopped without an error"),
        }
    }

    /// Flushes, fsyncs and renames `FILE.partial` to `FILE`.
    pub async fn finish(self) -> Result<Written> {
        self.finish_after(async { Ok(()) }, false).await
    }

    /// Whether the output is a file of its own, written under another name
    /// and renamed when complete (not stdout, a FIFO or a device, which
    /// see the bytes as they come).
    pub fn renamed(&self) -> bool {
        self.paths.is_some()
    }

    /// [`Output::finish`], with `commit` run once every byte is written
    /// and fsynced, before the file takes its name. When it fails
    /// certainly, the partial file is removed and `FILE` is as it was;
    /// when it may have committed (`NotCommitted::maybe`), or (`keep`)
    /// the rename fails after it did, the partial file is kept and the
    /// error names it: its rows may exist nowhere else.
    pub async fn finish_after(
        mut self,
        commit: impl std::future::Future<Output = std::result::Result<(), NotCommitted>>,
        keep: bool,
    ) -> Result<Written> {
        let written = self.join().await?;
        if let Err(e) = commit.await {
            if !e.maybe {
                self.remove_partial();
                return Err(e.error);
            }
            return Err(match self.paths.take() {
                Some((partial, _)) => kept(partial, e.error),
                None => e.error,
            });
        }
        if let Some((partial, path)) = self.paths.take() {
            let done = tokio::task::spawn_blocking(move || publish(partial, &path, keep))
                .await
                .map_err(|e| Error::bug(format!("rename task failed: {e}")))?;
            done?;
        }
        Ok(written)
    }

    async fn join(&mut self) -> Result<Written> {
        drop(self.tx.take());
        let Some(thread) = self.thread.take() else {
            return Err(Error::bug("output joined twice"));
        };
        let result = tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|e| Error::bug(format!("writer join failed: {e}")))?;
        let result = match result {
            Ok(r) => r,
            Err(_) => Err(io::Error::other("the writer thread panicked")),
        };
        result.map_err(|e| {
            let shown = match &self.paths {
                Some((partial, _)) => partial.display().to_string(),
                None if self.name == "-" => "stdout".to_owned(),
                None => self.name.clone(),
            };
            let err = write_error(Path::new(&shown), e);
            self.remove_partial();
            err
        })
    }

    fn remove_partial(&mut self) {
        if let Some((partial, _)) = self.paths.take() {
            let _ = partial.close();
        }
    }
}

impl Drop for Output {
    /// Not finished: stop the writer and remove the partial file.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.remove_partial();
    }
}

/// The writer thread stopped; its error is returned by
/// [`Output::failure`].
#[derive(Debug)]
pub struct WriterStopped;

/// Where `name`'s bytes go: see the module docs.
fn open_file(name: &str, stop: &dyn Fn() -> bool) -> Result<(Sink, Option<(TempPath, PathBuf)>)> {
    let path = PathBuf::from(name);
    let fail = |e| write_error(&path, e);
    let existing = match std::fs::metadata(&path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(fail(e)),
    };
    match &existing {
        Some(m) if m.is_dir() => {
            return Err(
                Error::new(ErrorKind::Output, format!("{name} is a directory"))
                    .with_hint("give a file path for --output, or - for stdout"),
            )
        }
        Some(m) if !m.is_file() => {
            // Kept open until the file below is: the reader, woken by
            // it, must never find the FIFO without a writer (an EOF).
            let waited = match m.file_type().is_fifo() {
                true => Some(wait_for_reader(&path, stop)?),
                false => None,
            };
            let file = OpenOptions::new().write(true).open(&path).map_err(fail)?;
            drop(waited);
            return Ok((Sink::Special(file), None));
        }
        // Replaced only if it could be written, as psql would write it: a
        // read-only file, or another user's, stays as it is.
        Some(_) => {
            if let Err(e) = OpenOptions::new().write(true).open(&path) {
                return Err(Error::new(
                    ErrorKind::Output,
                    format!("cannot write {name}: {e}"),
                )
                .with_hint("the file exists and this user may not write it; choose another --output or fix its permissions")
                .with_source(e));
            }
        }
        None => {}
    }
    // A link (to a file, or to nothing yet) is followed, as a write
    // through it would be: the file it names is the one replaced.
    let path = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_symlink() => follow(&path)?,
        _ => path,
    };
    let (file, partial) = partial_file(&path, existing.as_ref())?;
    Ok((Sink::File(file), Some((partial, path))))
}

/// Waits until a process opens the FIFO at `path` for reading (an open
/// for writing would block until then, deaf to Ctrl-C), checking `stop`
/// every 100 ms; returns the (non-blocking) end it opened.
fn wait_for_reader(path: &Path, stop: &dyn Fn() -> bool) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    loop {
        let tried = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path);
        match tried {
            Ok(file) => return Ok(file),
            // No reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => return Err(write_error(path, e)),
        }
        if stop() {
            return Err(Error::new(
                ErrorKind::Interrupted,
                format!(
                    "the export was interrupted while waiting for a reader of {}",
                    path.display()
                ),
            )
            .with_hint(
                "nothing was written; start the program that reads the FIFO, then the export",
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The file a symbolic link at `path` names, through any chain of links.
/// As the kernel's `protected_symlinks` would, a link in a sticky
/// world-writable directory (`/tmp`) is followed only if this user or the
/// directory's owner made it: another user could aim it at any file
/// between our look at the path and the rename.
fn follow(path: &Path) -> Result<PathBuf> {
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let dir = match at.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                if let Ok(d) = std::fs::metadata(&dir) {
                    let shared = d.mode() & 0o1002 == 0o1002;
                    if shared && Some(m.uid()) != me && m.uid() != d.uid() {
                        return Err(Error::new(
                            ErrorKind::Output,
                            format!(
                                "{} is a symbolic link another user made in a shared directory",
                                at.display()
                            ),
                        )
                        .with_hint("pgtide does not follow it (as the kernel's protected_symlinks would not); choose another --output"));
                    }
                }
                let to = std::fs::read_link(&at).map_err(|e| write_error(&at, e))?;
                at = match at.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(Error::new(
        ErrorKind::Output,
        format!("{} is a loop of symbolic links", path.display()),
    )
    .with_hint("choose another --output"))
}

/// Creates `FILE.XXXXXX.partial` beside `path`, exclusively, with the mode
/// (and, where allowed, the owner) of the file it will replace, or the
/// umask's for a new file.
fn partial_file(path: &Path, existing: Option<&Metadata>) -> Result<(File, TempPath)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut prefix = path.file_name().unwrap_or_default().to_os_string();
    prefix.push(".");
    let created = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".partial")
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| write_error(&partial_name(path), e))?;
    let (file, partial) = created.into_parts();
    if let Some(m) = existing {
        let keep = file.set_permissions(Permissions::from_mode(m.mode() & 0o7777));
        keep.map_err(|e| write_error(&partial, e))?;
        // Only root may give a file away; anyone else keeps their own.
        let _ = std::os::unix::fs::fchown(&file, Some(m.uid()), Some(m.gid()));
    }
    Ok((file, partial))
}

/// The partial file's name as messages show it before it exists.
fn partial_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".XXXXXX.partial");
    path.with_file_name(name)
}

/// Counts the bytes that reach the sink (after compression).
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The writer thread: pieces -> encoder -> buffered sink; at the end the
/// encoder is finished (its errors seen, not lost in a drop) and a file
/// is fsynced.
fn write_all(
    mut rx: mpsc::Receiver<Bytes>,
    sink: Sink,
    compression: Compression,
) -> io::Result<Written> {
    let counting = Counting {
        inner: BufWriter::with_capacity(WRITE_BUF, sink),
        bytes: 0,
    };
    let mut encoder = match compression {
        Compression::None => Encoder::Plain(counting),
        Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
            counting,
            flate2::Compression::default(),
        )),
        Compression::Zstd => Encoder::Zstd(zstd::stream::write::Encoder::new(counting, 3)?),
    };
    let mut data_bytes = 0u64;
    while let Some(piece) = rx.blocking_recv() {
        data_bytes += piece.len() as u64;
        encoder.write_all(&piece)?;
    }
    let mut counting = encoder.finish()?;
    counting.flush()?;
    let stored_bytes = counting.bytes;
    match counting.inner.into_inner().map_err(|e| e.into_error())? {
        Sink::File(f) => f.sync_all()?,
        Sink::Special(mut f) => f.flush()?,
        Sink::Stdout(mut s) => s.flush()?,
    }
    Ok(Written {
        data_bytes,
        stored_bytes,
    })
}

/// The bytes' destination.
enum Sink {
    /// The partial file: fsynced at the end.
    File(File),
    /// A FIFO, a device or a socket: written into, nothing to fsync.
    Special(File),
    Stdout(io::Stdout),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(f) | Sink::Special(f) => f.write(buf),
            Sink::Stdout(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) | Sink::Special(f) => f.flush(),
            Sink::Stdout(s) => s.flush(),
        }
    }
}

type Counted = Counting<BufWriter<Sink>>;

enum Encoder {
    Plain(Counted),
    Gzip(flate2::write::GzEncoder<Counted>),
    Zstd(zstd::stream::write::Encoder<'static, Counted>),
}

impl Encoder {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Encoder::Plain(w) => w.write_all(buf),
            Encoder::Gzip(w) => w.write_all(buf),
            Encoder::Zstd(w) => w.write_all(buf),
        }
    }

    /// Writes the compressor's trailer and returns the sink.
    fn finish(self) -> io::Result<Counted> {
        match self {
            Encoder::Plain(w) => Ok(w),
            Encoder::Gzip(w) => w.finish(),
            Encoder::Zstd(w) => w.finish(),
        }
    }
}

/// Renames `partial` to `path` and fsyncs the directory. Removes
/// `partial` on failure.
/// Why a commit run before the output takes its name failed.
pub struct NotCommitted {
    /// What the server or the connection said.
    pub error: Error,
    /// The answer was lost: it may have committed.
    pub maybe: bool,
}

/// `error`, with the partial file kept and named: its rows may have been
/// committed (taken from the database) and exist nowhere else.
fn kept(partial: TempPath, error: Error) -> Error {
    let shown = partial.to_path_buf();
    let hint = match partial.keep() {
        Ok(_) => format!(
            "the rows are kept in {}: the transaction may have committed, so they may \
             exist nowhere else",
            shown.display()
        ),
        Err(_) => "the partial file could not be kept".to_owned(),
    };
    let hint = match error.hint() {
        Some(h) => format!("{h}; {hint}"),
        None => hint,
    };
    error.with_hint(hint)
}

/// `keep`: a failed rename keeps the partial file (its rows were
/// committed, `kept`) instead of removing it.
fn publish(partial: TempPath, path: &Path, keep: bool) -> Result<()> {
    // The writer thread fsynced the file's data already.
    let shown = partial.to_path_buf();
    if let Err(e) = partial.persist(path) {
        // The error gives the TempPath back; dropping it removes the file.
        let error = write_error(&shown, e.error);
        return Err(match keep {
            true => kept(e.path, error),
            false => error,
        });
    }
    let result = (|| {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        File::open(dir)?.sync_all()
    })();
    result.map_err(|e| write_error(&shown, e))
}

/// An I/O error on the output with what to do about it.
pub fn write_error(path: &Path, e: io::Error) -> Error {
    let shown = path.display();
    let hint = match e.kind() {
        io::ErrorKind::PermissionDenied => format!(
            "pgtide writes {shown} (renamed when complete) and needs write permission on its \
             directory; choose another --output or fix the permissions"
        ),
        io::ErrorKind::NotFound => {
            "the output's directory does not exist; create it or choose another --output".into()
        }
        io::ErrorKind::BrokenPipe => "the program reading pgtide's output stopped early".into(),
        _ if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) => {
            "the disk (or quota) is full: free space, write to another file system, or compress \
             with a .zst or .gz output name"
                .into()
        }
        _ => "check the output path and the file system".into(),
    };
    Error::new(ErrorKind::Output, format!("cannot write {shown}: {e}"))
        .with_hint(hint)
        .with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_is_in_the_same_directory() {
        assert_eq!(
            partial_name(Path::new("/a/b/out.csv.gz")),
            PathBuf::from("/a/b/out.csv.gz.XXXXXX.partial")
        );
        assert_eq!(
            partial_name(Path::new("x")),
            PathBuf::from("x.XXXXXX.partial")
        );
    }

    #[test]
    fn compression_by_name_unless_explicit() {
        assert_eq!(compression_for("a.csv.gz", None), Compression::Gzip);
        assert_eq!(compression_for("a.zst", None), Compression::Zstd);
        assert_eq!(compression_for("a.csv", None), Compression::None);
        assert_eq!(
            compression_for("-", Some(Compression::Zstd)),
            Compression::Zstd
        );
    }

    #[test]
    fn full_disk_says_so() {
        let e = write_error(
            Path::new("/x/out.csv.partial"),
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(e.kind(), ErrorKind::Output);
        assert!(e.message().contains("No space left"), "{}", e.message());
        assert!(e.hint().unwrap().contains("full"));
    }
}
