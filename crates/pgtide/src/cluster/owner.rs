//! Who runs the server, and running programs as that user.
//!
//! `initdb`, `pg_ctl` and `postgres` refuse to run as root, and pgtide is
//! often run as root (containers, CI). Then the server runs as a system
//! user `pgtide`, created on first use, and every file the server touches
//! is handed to it. As any other user, the server simply runs as that
//! user and nothing here changes ownership.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use crate::{Error, ErrorKind, Result};

/// The system user that owns servers started by root.
pub(crate) const SERVER_USER: &str = "pgtide";

/// useradd's exit status for "user already exists".
const USERADD_EXISTS: i32 = 9;

/// A uid/gid pair that server programs run as, or `None` for "the
/// current user".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Serialises user creation within the process; across processes,
/// useradd's "already exists" status covers the race.
static CREATE_USER: Mutex<()> = Mutex::new(());

/// The user the server must run as: `None` unless we are root.
pub(crate) fn server_owner() -> Result<Option<Owner>> {
    if crate::conn::env::euid() != 0 {
        return Ok(None);
    }
    let _guard = CREATE_USER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(owner) = lookup(SERVER_USER) {
        return Ok(Some(owner));
    }
    create_user()?;
    lookup(SERVER_USER).map(Some).ok_or_else(|| {
        Error::new(
            ErrorKind::Cluster,
            format!("user {SERVER_USER} was created but cannot be found"),
        )
        .with_hint("check /etc/passwd, or run pgtide as a non-root user")
    })
}

fn lookup(name: &str) -> Option<Owner> {
    let entry = crate::conn::env::passwd_entry(|n, _| n == name)?;
    Some(Owner {
        uid: entry.1,
        gid: entry.2,
    })
}

fn create_user() -> Result<()> {
    let args = [
        "--system",
        "--no-create-home",
        "--shell",
        "/usr/sbin/nologin",
        SERVER_USER,
    ];
    let mut last = None;
    for program in ["useradd", "/usr/sbin/useradd"] {
        match Command::new(program).args(args).output() {
            Ok(out) if out.status.success() || out.status.code() == Some(USERADD_EXISTS) => {
                return Ok(())
            }
            Ok(out) => {
                return Err(cannot_create(
                    String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                ));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(cannot_create(
        last.map(|e| e.to_string()).unwrap_or_default(),
    ))
}

fn cannot_create(why: String) -> Error {
    Error::new(
        ErrorKind::Cluster,
        format!("cannot create the system user {SERVER_USER}: {why}"),
    )
    .with_hint(format!(
        "PostgreSQL refuses to run as root; create the user yourself (useradd --system \
         --no-create-home --shell /usr/sbin/nologin {SERVER_USER}) or run pgtide as a non-root user"
    ))
}

/// A command for a server program: runs as `owner`, in `cwd`, with the
/// caller's `PG*` variables removed so that a `PGPORT` or `PGDATA` meant
/// for the user's own server cannot redirect ours.
pub(crate) fn command(program: &Path, owner: Option<Owner>, cwd: &Path) -> Command {
    let mut c = Command::new(program);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            c.env_remove(k);
        }
    }
    // Server messages in English, whatever the caller's locale: they end
    // up in our errors.
    c.env("LC_ALL", "C").current_dir(cwd);
    if let Some(o) = owner {
        c.uid(o.uid)
            .gid(o.gid)
            .env("HOME", cwd)
            .env("USER", SERVER_USER)
            .env("LOGNAME", SERVER_USER);
    }
    c
}

/// Runs `c`, returning its stdout; a failure carries stderr and `hint`.
pub(crate) fn run(mut c: Command, what: &str, hint: &str) -> Result<String> {
    let out = c.output().map_err(|e| spawn_error(c.get_program(), e))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(Error::new(
        ErrorKind::Cluster,
        format!("{what} failed ({}): {}", out.status, stderr.trim()),
    )
    .with_hint(hint))
}

pub(crate) fn spawn_error(program: &OsStr, e: std::io::Error) -> Error {
    let program = Path::new(program).display().to_string();
    let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
        format!(
            "the server runs as user {SERVER_USER} when pgtide runs as root: the PostgreSQL \
             binaries must be readable and executable by it (chmod -R a+rX the installation, \
             and make its parent directories traversable), or set PGTIDE_PGBIN to another copy"
        )
    } else {
        "check the PostgreSQL installation (PGTIDE_PGBIN)".to_owned()
    };
    Error::new(ErrorKind::Cluster, format!("cannot run {program}: {e}"))
        .with_hint(hint)
        .with_source(e)
}

/// Gives `path` and everything below it to `owner` (no-op for `None`).
pub(crate) fn chown_tree(path: &Path, owner: Option<Owner>) -> Result<()> {
    let Some(o) = owner else {
        return Ok(());
    };
    std::os::unix::fs::lchown(path, Some(o.uid), Some(o.gid))
        .map_err(|e| io_error(path, "change the owner of", e))?;
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).map_err(|e| io_error(path, "read", e))? {
            let entry = entry.map_err(|e| io_error(path, "read", e))?;
            chown_tree(&entry.path(), owner)?;
        }
    }
    Ok(())
}

pub(crate) fn io_error(path: &Path, doing: &str, e: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Cluster,
        format!("cannot {doing} {}: {e}", path.display()),
    )
    .with_hint("check the permissions and free space of that directory")
    .with_source(e)
}
