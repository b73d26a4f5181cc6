//! Opening an input: a path or `-` (stdin), decompressed when it is gzip or
//! zstd.
//!
//! Compression is detected by magic bytes, never by file name alone, so a
//! `.csv` that is really gzip still loads and a `.gz` that is plain text is
//! not mangled. This module knows nothing of rows, quoting or servers: it
//! hands a blocking `Read` to the chunker.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::progress::Progress;

/// Read buffer size. Large enough that a read system call moves a useful
/// amount of data; the chunker copies out of it anyway.
const READ_BUF: usize = 256 * 1024;

/// How the bytes of an input are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain bytes.
    None,
    /// gzip (magic `1f 8b`), possibly several concatenated members.
    Gzip,
    /// zstd (magic `28 b5 2f fd`), possibly several frames.
    Zstd,
}

/// One opened input.
pub struct Source {
    /// What the user called it: the path, or `-` for stdin.
    pub name: String,
    /// Size on disk when known (plain files); used for progress/ETA.
    pub size: Option<u64>,
    /// How the bytes were compressed.
    pub compression: Compression,
    /// The decompressed byte stream.
    pub reader: Box<dyn Read + Send>,
}

impl Source {
    /// Opens `name` (`-` means stdin) and wraps a decompressor when the
    /// magic bytes say so.
    pub fn open(name: &str) -> Result<Source> {
        Source::open_counted(name, None)
    }

    /// Like [`Source::open`], counting the stored (compressed) bytes read
    /// into `progress.read_bytes`, which is what an ETA can compare with
    /// the file size.
    pub fn open_counted(name: &str, progress: Option<Arc<Progress>>) -> Result<Source> {
        let (mut raw, size): (Box<dyn Read + Send>, Option<u64>) = if name == "-" {
            (Box::new(io::stdin()), None)
        } else {
            let (file, size) = open_file(name)?;
            (Box::new(file), Some(size))
        };
        if let Some(progress) = progress {
            raw = Box::new(Counted {
                inner: raw,
                progress,
            });
        }
        let mut buffered = BufReader::with_capacity(READ_BUF, raw);
        let compression = sniff(&mut buffered).map_err(|e| Error::read(name, e))?;
        let reader: Box<dyn Read + Send> = match compression {
            Compression::None => Box::new(buffered),
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
            Compression::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(buffered)
                    .map_err(|e| Error::read(name, e))?,
            ),
        };
        Ok(Source {
            name: name.to_owned(),
            size,
            compression,
            reader,
        })
    }
}

/// Checks that `name` can be opened as an input (`-`, or a readable file
/// that is not a directory), without reading it: a load checks every
/// input this way before it touches the table (`--truncate`). A pipe is
/// only looked up, not opened: opening a named FIFO waits for its writer,
/// and closing it again breaks the writer's pipe.
pub fn check(name: &str) -> Result<()> {
    if name == "-" {
        return Ok(());
    }
    if read_once(name) {
        std::fs::metadata(name).map_err(|e| open_error(name, e))?;
    } else {
        open_file(name)?;
    }
    Ok(())
}

/// Whether `name` can be read only once: stdin (`-`), or anything else
/// that is not a regular file (a pipe, a named FIFO, the `/dev/fd/N` of a
/// shell's `<(zcat ...)`, a socket, a terminal). Nothing may look into
/// such an input before the load reads it (its format, a sample for
/// `--create`, a fingerprint for `--resume`, a later file's header): the
/// bytes looked at would be gone from the load (outside testing: `pgtide
/// load <(cat f.csv)` lost the rows of the first 64 KiB, which peeking at
/// the format had read).
pub fn read_once(name: &str) -> bool {
    name == "-" || std::fs::metadata(name).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Opens a plain file for reading; a directory is an error (reading one
/// fails only later, and less clearly). Returns the file and its size.
fn open_file(name: &str) -> Result<(File, u64)> {
    let file = File::open(name).map_err(|e| open_error(name, e))?;
    let meta = file.metadata().map_err(|e| open_error(name, e))?;
    if meta.is_dir() {
        return Err(Error::input(format!("{name} is a directory"))
            .with_hint("give a file path, or - to read stdin"));
    }
    Ok((file, meta.len()))
}

/// The decompressed bytes a [`Source`] has handed out, counted apart from
/// whoever reads them, so that what the chunker cut can be checked against
/// it (`load::invariants::check_bytes`).
#[derive(Debug, Clone, Default)]
pub struct ByteCount(Arc<AtomicU64>);

impl ByteCount {
    /// Bytes counted so far.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

impl Source {
    /// Counts the decompressed bytes read from `reader` from now on.
    pub fn count_decompressed(&mut self) -> ByteCount {
        let count = ByteCount::default();
        let inner = std::mem::replace(&mut self.reader, Box::new(io::empty()));
        self.reader = Box::new(CountedOut {
            inner,
            count: count.clone(),
        });
        count
    }
}

/// Counts decompressed bytes as they are read.
struct CountedOut {
    inner: Box<dyn Read + Send>,
    count: ByteCount,
}

impl Read for CountedOut {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.0.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}

/// Counts bytes as they are read.
struct Counted {
    inner: Box<dyn Read + Send>,
    progress: Arc<Progress>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        Progress::add(&self.progress.read_bytes, n as u64);
        Ok(n)
    }
}

/// Looks at the first bytes without consuming them.
fn sniff(r: &mut impl BufRead) -> io::Result<Compression> {
    let head = r.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    })
}

fn open_error(name: &str, e: io::Error) -> Error {
    let hint = match e.kind() {
        io::ErrorKind::NotFound => "check the path; use - to read stdin",
        io::ErrorKind::PermissionDenied => {
            "check the file's permissions for the user running pgtide"
        }
        _ => "check that the file exists and is readable",
    };
    Error::new(ErrorKind::Input, format!("cannot open {name}: {e}"))
        .with_source(e)
        .with_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn read_all(path: &std::path::Path) -> (Compression, Vec<u8>) {
        let mut s = Source::open(path.to_str().unwrap()).unwrap();
        let mut out = Vec::new();
        s.reader.read_to_end(&mut out).unwrap();
        (s.compression, out)
    }

    #[test]
    fn detects_gzip_and_zstd_by_magic_not_name() {
        let dir = tempfile::tempdir().unwrap();
        let data = b"1,a\n2,b\n".repeat(1000);

        let gz = dir.path().join("data.csv");
        let mut enc =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        enc.write_all(&data).unwrap();
        enc.finish().unwrap();
        assert_eq!(read_all(&gz), (Compression::Gzip, data.clone()));

        let zs = dir.path().join("data.gz");
        std::fs::write(&zs, zstd::encode_all(&data[..], 1).unwrap()).unwrap();
        assert_eq!(read_all(&zs), (Compression::Zstd, data.clone()));

        let plain = dir.path().join("plain.zst");
        std::fs::write(&plain, &data).unwrap();
        assert_eq!(read_all(&plain), (Compression::None, data));
    }

    #[test]
    fn missing_file_is_an_input_error_with_hint() {
        let err = Source::open("/nonexistent/x.csv").err().unwrap();
        assert_eq!(err.kind(), ErrorKind::Input);
        assert!(err.hint().unwrap().contains("path"));
    }
}

/// The COPY format of an input given without `--format`, and why: the
/// binary COPY signature in its first (decompressed) bytes, else the file
/// name (`.csv` -> csv; `.tsv`, `.txt`, `.tab` -> text, after any `.gz`
/// or `.zst`), else csv. Stdin and pipes are not peeked at
/// ([`read_once`]): by name, else csv.
pub fn guess_format(name: &str) -> Result<(crate::copyopts::CopyFormat, &'static str)> {
    use crate::copyopts::CopyFormat;
    if name == "-" {
        return Ok((CopyFormat::Csv, "the default for stdin"));
    }
    let mut head = Vec::with_capacity(copyfmt::binary::SIGNATURE.len());
    if !read_once(name) {
        Source::open(name)?
            .reader
            .take(copyfmt::binary::SIGNATURE.len() as u64)
            .read_to_end(&mut head)
            .map_err(|e| Error::read(name, e))?;
    }
    if head == copyfmt::binary::SIGNATURE {
        return Ok((
            CopyFormat::Binary,
            "the file starts with the binary COPY signature",
        ));
    }
    let lower = name.to_ascii_lowercase();
    let stem = [".gz", ".zst", ".zstd"]
        .iter()
        .find_map(|c| lower.strip_suffix(c))
        .unwrap_or(&lower);
    let by_name = match stem.rsplit_once('.').map(|(_, ext)| ext) {
        Some("csv") => Some(CopyFormat::Csv),
        Some("tsv" | "txt" | "tab") => Some(CopyFormat::Text),
        _ => None,
    };
    Ok(match by_name {
        Some(f) => (f, "from the file name"),
        None => (CopyFormat::Csv, "the default"),
    })
}

#[cfg(test)]
mod guess_tests {
    use super::guess_format;
    use crate::copyopts::CopyFormat;

    #[test]
    fn format_from_signature_then_name_then_csv() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p.to_string_lossy().into_owned()
        };
        let cases = [
            (file("a.csv", b"1,2\n"), CopyFormat::Csv),
            (file("a.TSV", b"1\t2\n"), CopyFormat::Text),
            (
                file("a.txt.zst", &zstd::encode_all(&b"1\t2\n"[..], 1).unwrap()),
                CopyFormat::Text,
            ),
            (file("a.dat", b"1,2\n"), CopyFormat::Csv),
            (
                file("b.csv", b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0"),
                CopyFormat::Binary,
            ),
        ];
        for (path, want) in cases {
            assert_eq!(guess_format(&path).unwrap().0, want, "{path}");
        }
        assert_eq!(guess_format("-").unwrap().0, CopyFormat::Csv);
    }
}
