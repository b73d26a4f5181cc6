//! Where a reject file may go.
//!
//! The reject file and its log are created by the load, so a wrong path
//! destroys whatever is there: `--rejects in.csv` used to truncate the very
//! input being loaded. Before the load touches anything, [`check`] refuses a
//! reject path (or its `.log`) that is an input, whether by the same name,
//! another spelling, a hard link or a symbolic link (compared by device and
//! inode, and by canonical path); that is a symbolic link (never followed:
//! it could point anywhere); or that exists, unless the user said
//! `--force`. [`create`] then opens the files without following links and
//! readable by the owner only, since they hold rejected data.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// Reject files are readable and writable by their owner only.
const MODE: u32 = 0o600;

/// An input, as a file on disk.
struct Identity {
    name: String,
    dev_ino: Option<(u64, u64)>,
    canonical: Option<PathBuf>,
}

/// Checks `path` and its log (`path.log`) against `inputs` (`-` is stdin,
/// which may be a file redirected with `<`) and what is on disk.
pub fn check(path: &Path, inputs: &[String], overwrite: bool) -> Result<()> {
    let inputs: Vec<Identity> = inputs.iter().map(|i| identity(i)).collect();
    check_one(path, path, &inputs, overwrite)?;
    check_one(&super::log_path(path), path, &inputs, overwrite)
}

/// Creates (or, with `overwrite`, opens) `p` for writing, mode 0600,
/// locked for this run ([`lock`]), refusing a symbolic link at `p` even if
/// one appeared after [`check`]. The caller empties it once both reject
/// files are locked.
pub fn create(p: &Path, overwrite: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .write(true)
        .mode(MODE)
        .custom_flags(libc::O_NOFOLLOW);
    if overwrite {
        options.create(true);
    } else {
        options.create_new(true);
    }
    let file = options.open(p)?;
    lock(&file)?;
    // `mode` applies only to a file created here; an overwritten one keeps
    // its old permissions unless set.
    file.set_permissions(Permissions::from_mode(MODE))?;
    Ok(file)
}

/// Takes the file for this run alone (an exclusive `flock`, held while it
/// is open), before anything in it changes: two runs writing one reject
/// file tear each other's rows (outside testing: a `--resume` run whose
/// sessions were terminated went on while a second one started).
pub fn lock(file: &File) -> io::Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "another pgtide run is writing it",
        )),
        // A file system without `flock` (some network mounts): unlocked,
        // as before locks were taken.
        Err(std::fs::TryLockError::Error(e))
            if e.kind() == io::ErrorKind::Unsupported || e.raw_os_error() == Some(libc::ENOLCK) =>
        {
            Ok(())
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// What to do about a reject file that cannot be opened for `e`.
pub fn hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::WouldBlock => "wait for that run to end, or give another --rejects file",
        _ => "check that the directory exists and is writable",
    }
}

/// One of the two reject paths (`p`; `path` is what `--rejects` named).
fn check_one(p: &Path, path: &Path, inputs: &[Identity], overwrite: bool) -> Result<()> {
    let what = if p == path {
        format!("--rejects {}", p.display())
    } else {
        format!("--rejects {}: its log {}", path.display(), p.display())
    };
    let me = identity_of_path(p);
    if let Some(input) = inputs.iter().find(|i| same_file(i, &me)) {
        return Err(refusal(
            format!(
                "{what} is an input ({}); writing rejects there would destroy it",
                input.name
            ),
            "choose a reject file that is not one of the inputs (nor a link to one)",
        ));
    }
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() {
        return Err(refusal(
            format!("{what} is a symbolic link; pgtide does not write through links"),
            "give the real path, or remove the link",
        ));
    }
    if meta.is_dir() {
        return Err(refusal(
            format!("{what} is a directory"),
            "give a file path for --rejects",
        ));
    }
    if !overwrite {
        return Err(refusal(
            format!("{what} already exists"),
            "use --force to overwrite it, or choose another --rejects path",
        ));
    }
    Ok(())
}

fn refusal(message: String, hint: &str) -> Error {
    Error::new(ErrorKind::Config, message).with_hint(hint)
}

/// Same device and inode, or the same canonical path.
fn same_file(a: &Identity, b: &Identity) -> bool {
    let same_inode = a.dev_ino.is_some() && a.dev_ino == b.dev_ino;
    let same_path = a.canonical.is_some() && a.canonical == b.canonical;
    same_inode || same_path
}

/// An input's identity; stdin's is the file it was redirected from, if any.
fn identity(input: &str) -> Identity {
    let path = if input == "-" { "/dev/stdin" } else { input };
    Identity {
        name: input.to_owned(),
        ..identity_of_path(Path::new(path))
    }
}

/// Device and inode (following links), and the canonical path, of `p`;
/// for a file that does not exist yet, its directory's canonical path
/// joined with its name.
fn identity_of_path(p: &Path) -> Identity {
    let dev_ino = std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let canonical = std::fs::canonicalize(p).ok().or_else(|| {
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(parent).ok()?.join(p.file_name()?))
    });
    Identity {
        name: p.display().to_string(),
        dev_ino,
        canonical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_another_run_writes_is_neither_truncated_nor_shared() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let rejects = dir.path().join("r");
        let mut first = create(&rejects, false).unwrap();
        first.write_all(b"1,x\n").unwrap();
        let e = create(&rejects, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        assert_eq!(std::fs::read(&rejects).unwrap(), b"1,x\n");
        drop(first);
        create(&rejects, true).unwrap();
    }

    #[test]
    fn a_new_file_in_a_new_place_is_fine_and_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.csv");
        std::fs::write(&input, "1\n").unwrap();
        let rejects = dir.path().join("r");
        let inputs = vec![input.to_str().unwrap().to_owned()];
        check(&rejects, &inputs, false).unwrap();
        let f = create(&rejects, false).unwrap();
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, MODE);
        assert!(check(&rejects, &inputs, false).is_err());
        check(&rejects, &inputs, true).unwrap();
    }

    #[test]
    fn stdin_is_compared_too_and_create_never_follows_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create(&link, true).is_err());
        assert!(create(&link, false).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        // A relative name and an absolute one for the same new file.
        let a = identity_of_path(Path::new("x.rejects"));
        let b = identity_of_path(&std::env::current_dir().unwrap().join("x.rejects"));
        assert!(same_file(&a, &b));
    }
}
