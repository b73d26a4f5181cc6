//! The outside facts a connection depends on: `PG*` variables, the home
//! directory, the OS user name and the default socket directory.
//!
//! They are gathered into one value, [`Env`], instead of being read where
//! they are used, for two reasons: resolution becomes a pure function that
//! tests can drive with any environment (environment variables are
//! process-global, so tests that set them would race), and the library
//! reads the process state in exactly one place.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// libpq's compiled-in socket directory on Debian and most Linux packages.
const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// A snapshot of the environment that connection settings are read from.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, String>,
    home: Option<PathBuf>,
    os_user: Option<String>,
    socket_dir: Option<PathBuf>,
}

impl Env {
    /// The current process: its `PG*` variables, `$HOME` (else the
    /// passwd entry), the OS user name, and `/var/run/postgresql` if that
    /// directory exists.
    pub fn from_process() -> Env {
        let vars = std::env::vars()
            .filter(|(k, _)| k.starts_with("PG"))
            .collect();
        // `home_dir` reads $HOME first, as libpq does since PostgreSQL 16;
        // it was deprecated for Windows' sake only.
        #[allow(deprecated)]
        let home = std::env::home_dir();
        let socket_dir = Path::new(DEFAULT_SOCKET_DIR);
        Env {
            vars,
            home,
            os_user: os_user_name(),
            socket_dir: socket_dir.is_dir().then(|| socket_dir.to_owned()),
        }
    }

    /// An environment with nothing set: no variables, no home directory,
    /// no socket directory (so the default host is `localhost`) and no OS
    /// user name.
    pub fn empty() -> Env {
        Env::default()
    }

    /// Sets a variable, such as `PGHOST`.
    pub fn set(mut self, name: &str, value: &str) -> Env {
        self.vars.insert(name.to_owned(), value.to_owned());
        self
    }

    /// Sets the home directory, where `.pgpass` and `.postgresql/` live.
    pub fn home(mut self, dir: impl Into<PathBuf>) -> Env {
        self.home = Some(dir.into());
        self
    }

    /// Sets the OS user name, the default database user.
    pub fn os_user(mut self, name: &str) -> Env {
        self.os_user = Some(name.to_owned());
        self
    }

    /// Sets the directory used when no host is given (libpq's default
    /// unix socket directory).
    pub fn socket_dir(mut self, dir: impl Into<PathBuf>) -> Env {
        self.socket_dir = Some(dir.into());
        self
    }

    /// The value of a variable, if set (empty counts as set, as in libpq).
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    pub(crate) fn home_dir(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    pub(crate) fn user_name(&self) -> Option<&str> {
        self.os_user.as_deref()
    }

    pub(crate) fn default_socket_dir(&self) -> Option<&Path> {
        self.socket_dir.as_deref()
    }

    /// True when anything that names a server is set; see
    /// [`Target::resolve`](super::Target::resolve).
    pub(crate) fn names_a_server(&self) -> bool {
        const VARS: [&str; 7] = [
            "PGHOST",
            "PGHOSTADDR",
            "PGPORT",
            "PGUSER",
            "PGDATABASE",
            "PGSERVICE",
            "PGPASSWORD",
        ];
        VARS.iter().any(|v| self.vars.contains_key(*v))
    }
}

/// The effective user id of this process.
///
/// Read from `/proc/self/status` because the workspace forbids `unsafe`
/// (which `libc::geteuid` needs); where `/proc` is absent, the owner of a
/// freshly created file is the same number.
pub(crate) fn euid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    let from_proc = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(2)?.parse().ok()
        });
    from_proc
        .or_else(|| Some(tempfile::tempfile().ok()?.metadata().ok()?.uid()))
        .unwrap_or(u32::MAX)
}

/// The name of the effective user, as libpq finds it (getpwuid): from
/// `/etc/passwd`, else `$USER` or `$LOGNAME` for accounts that live in a
/// directory service.
fn os_user_name() -> Option<String> {
    let uid = euid();
    passwd_entry(|_, entry_uid| entry_uid == uid)
        .map(|(name, _, _)| name)
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|n| !n.is_empty())
}

/// The first `/etc/passwd` entry `(name, uid, gid)` for which `wanted(name,
/// uid)` holds. Parsed by hand: `getpwnam`/`getpwuid` need `unsafe`.
pub(crate) fn passwd_entry(wanted: impl Fn(&str, u32) -> bool) -> Option<(String, u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        let uid = f.get(2)?.parse().ok()?;
        let gid = f.get(3)?.parse().ok()?;
        wanted(f[0], uid).then(|| (f[0].to_owned(), uid, gid))
    })
}
