//! The embedded server: one persistent cluster per machine user, owned by
//! pgtide, so that `pgtide load file.csv` works with nothing installed or
//! configured by hand (`pgtide server start|stop|status|url`).
//!
//! Where it lives (`<dir>` below): `/var/lib/pgtide/server` for root,
//! else `$XDG_DATA_HOME/pgtide/server` or `~/.local/share/pgtide/server`;
//! `$PGTIDE_SERVER_DIR` overrides both.
//!
//! - `<dir>/data`: the data directory (durable: fsync stays on).
//! - `<dir>/pgpass`: the superuser password, mode 0600, in libpq's
//!   password-file format (`*:*:*:postgres:<password>`). pgtide reads it
//!   itself, and `url` points libpq at it with `?passfile=`, so
//!   `psql "$(pgtide server url)"` works and the password is never
//!   printed, put in a URL, or on a command line.
//! - `<dir>/state.json`: port, bin directory and major version, so that
//!   `status`/`url`/`stop` in a later invocation find the same server.
//! - `<dir>/server.log`, `<dir>/sock/`: server log and unix socket.
//!
//! - `<dir>/.pgtide-server`: the marker that pgtide created `<dir>`.
//!
//! Concurrent `start`s (say, two loads at once) are serialised by a lock
//! directory `<dir>.lock`, because `initdb` must run once.
//!
//! pgtide only ever initialises a directory it created itself: a fresh
//! one, an empty one, or one with its marker. As root it gives `<dir>` to
//! user `pgtide`, so a `PGTIDE_SERVER_DIR` pointing at anything else (a
//! home directory, `/etc`) would otherwise hand someone else's files to
//! that user.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lock::DirLock;
use super::owner::{self, Owner};
use super::server::{self, Layout, SUPERUSER};
use super::{cluster_error, conninfo, PgBin};
use crate::conn::pgpass::{self, Lookup};
use crate::conn::{Env, Target};
use crate::Result;

/// The file that marks a server directory as created by pgtide.
const MARKER: &str = ".pgtide-server";

/// The embedded server at one location.
#[derive(Debug, Clone)]
pub struct Embedded {
    dir: PathBuf,
}

/// Whether the embedded server exists and runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// `pgtide server start` has never run here.
    NotInitialized,
    /// Initialised, not running.
    Stopped,
    /// Running and accepting connections.
    Running,
}

/// What `pgtide server status` shows.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// Exists / runs.
    pub state: ServerState,
    /// The server's directory (`<dir>` in the module docs).
    pub dir: PathBuf,
    /// The TCP port on 127.0.0.1, once started.
    pub port: Option<u16>,
    /// The postmaster's pid while running.
    pub pid: Option<u32>,
    /// PostgreSQL major version, once initialised.
    pub version: Option<u32>,
    /// The connection URI without the password (see the module docs).
    pub url: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    port: Option<u16>,
    bin_dir: Option<PathBuf>,
    version: Option<u32>,
}

impl Embedded {
    /// The server at its default location (see the module docs).
    pub fn default_location() -> Result<Embedded> {
        if let Some(dir) = std::env::var_os("PGTIDE_SERVER_DIR").filter(|d| !d.is_empty()) {
            return Ok(Embedded::at(dir));
        }
        if crate::conn::env::euid() == 0 {
            return Ok(Embedded::at("/var/lib/pgtide/server"));
        }
        #[allow(deprecated)] // deprecated for Windows only; reads $HOME first
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::home_dir().map(|h| h.join(".local/share")));
        match data {
            Some(d) => Ok(Embedded::at(d.join("pgtide/server"))),
            None => Err(cluster_error(
                "cannot find a place for the embedded server: no home directory".into(),
                "set HOME, XDG_DATA_HOME or PGTIDE_SERVER_DIR",
            )),
        }
    }

    /// The server in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Embedded {
        Embedded { dir: dir.into() }
    }

    /// The server's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The 0600 password file (libpq format).
    pub fn password_file(&self) -> PathBuf {
        self.dir.join("pgpass")
    }

    /// Initialises (first time) and starts the server; a no-op if it runs.
    pub fn start(&self) -> Result<ServerStatus> {
        let _lock = DirLock::acquire(&self.dir)?;
        let layout = self.layout(owner::server_owner()?);
        let mut state = self.state();
        let bin = if self.initialised() {
            self.bin_for_data(&state)?
        } else {
            self.claim_dir()?;
            let bin = PgBin::find()?;
            self.init(&bin, &layout)?;
            bin
        };
        if !server::is_running(&bin, &layout) {
            let port = match state.port.filter(|p| server::port_is_free(*p)) {
                Some(p) => p,
                None => server::free_port()?,
            };
            server::start(&bin, &layout, port)?;
            state = State {
                port: Some(port),
                bin_dir: Some(bin.dir().to_owned()),
                version: Some(bin.version()),
            };
            self.save(&state)?;
        }
        self.status()
    }

    /// Stops the server (fast shutdown: sessions are ended, data is
    /// flushed); a no-op if it is not running.
    pub fn stop(&self) -> Result<ServerStatus> {
        let status = self.status()?;
        if status.state == ServerState::Running {
            let bin = self.bin_for_data(&self.state())?;
            server::stop(&bin, &self.layout(owner::server_owner()?), "fast")?;
        }
        self.status()
    }

    /// Where the server is and whether it runs.
    pub fn status(&self) -> Result<ServerStatus> {
        let state = self.state();
        let mut status = ServerStatus {
            state: ServerState::NotInitialized,
            dir: self.dir.clone(),
            port: state.port,
            pid: None,
            version: state.version.or_else(|| self.data_version()),
            url: None,
        };
        if !self.initialised() {
            return Ok(status);
        }
        let layout = self.layout(owner::server_owner()?);
        let running = match self.bin_for_data(&state) {
            Ok(bin) => server::is_running(&bin, &layout),
            Err(_) => false,
        };
        status.state = if running {
            ServerState::Running
        } else {
            ServerState::Stopped
        };
        if running {
            if let Some((pid, port)) = server::pid_and_port(&layout) {
                status.pid = Some(pid);
                status.port = Some(port);
            }
            status.url = status.port.map(|p| self.url_for(p));
        }
        Ok(status)
    }

    /// The URI of the running server, without the password: it names the
    /// password file with `passfile=` instead.
    pub fn url(&self) -> Result<String> {
        match self.status()?.url {
            Some(url) => Ok(url),
            None => Err(cluster_error(
                format!(
                    "the embedded server in {} is not running",
                    self.dir.display()
                ),
                "start it with: pgtide server start",
            )),
        }
    }

    /// A target for the server (password included), starting it if needed.
    pub fn target(&self) -> Result<Target> {
        let status = self.start()?;
        let port = status
            .port
            .ok_or_else(|| crate::Error::bug("embedded server runs without a port"))?;
        let key = pgpass::Key {
            host: "127.0.0.1",
            port,
            dbname: SUPERUSER,
            user: SUPERUSER,
        };
        let password = match pgpass::lookup(&self.password_file(), key) {
            Lookup::Found(p) => p,
            Lookup::NotFound => return Err(self.lost_password("is missing or empty")),
            Lookup::Ignored(why) => return Err(self.lost_password(&why)),
        };
        Target::parse_with(&conninfo(port, &password), &Env::empty())
    }

    fn lost_password(&self, why: &str) -> crate::Error {
        cluster_error(
            format!(
                "the embedded server's password file {}: {why}",
                self.password_file().display()
            ),
            "restore it (mode 0600), or stop the server and delete its directory to start afresh \
             (its data is lost)",
        )
    }

    fn layout(&self, owner: Option<Owner>) -> Layout {
        Layout {
            base: self.dir.clone(),
            owner,
        }
    }

    /// Makes sure `<dir>` is pgtide's before anything is written or
    /// chowned there: created now, empty, or marked by an earlier start.
    /// Anything else is refused, and nothing in it is touched.
    fn claim_dir(&self) -> Result<()> {
        let marker = self.dir.join(MARKER);
        match std::fs::metadata(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = self.dir.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| owner::io_error(parent, "create", e))?;
                }
                std::fs::create_dir(&self.dir)
                    .map_err(|e| owner::io_error(&self.dir, "create", e))?;
            }
            Err(e) => return Err(owner::io_error(&self.dir, "read", e)),
            Ok(m) if !m.is_dir() => return Err(self.foreign("is not a directory")),
            Ok(_) if marker.symlink_metadata().is_ok_and(|m| m.is_file()) => return Ok(()),
            Ok(_) => {
                let mut entries = std::fs::read_dir(&self.dir)
                    .map_err(|e| owner::io_error(&self.dir, "read", e))?;
                if entries.next().is_some() {
                    return Err(self.foreign("is not empty and was not created by pgtide"));
                }
            }
        }
        server::write_private(&marker, b"created by pgtide for its embedded server\n")
    }

    fn foreign(&self, what: &str) -> crate::Error {
        cluster_error(
            format!(
                "refusing to set up the embedded server in {}: it {what}",
                self.dir.display()
            ),
            "point PGTIDE_SERVER_DIR at a directory that does not exist yet (pgtide creates it) \
             or an empty one; pgtide never takes over a directory holding other files",
        )
    }

    fn initialised(&self) -> bool {
        self.dir.join("data/PG_VERSION").is_file()
    }

    fn data_version(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("data/PG_VERSION"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The binaries that created the data (remembered), else any found,
    /// as long as the major version matches the data directory's.
    fn bin_for_data(&self, state: &State) -> Result<PgBin> {
        let remembered = state.bin_dir.as_ref().and_then(|d| PgBin::at(d).ok());
        let bin = match remembered {
            Some(b) => b,
            None => PgBin::find()?,
        };
        match self.data_version() {
            Some(v) if v != bin.version() => Err(cluster_error(
                format!(
                    "the embedded server in {} was created by PostgreSQL {v}, but the binaries in {} are \
                     PostgreSQL {}",
                    self.dir.display(),
                    bin.dir().display(),
                    bin.version()
                ),
                &format!(
                    "set PGTIDE_PGBIN to a PostgreSQL {v} bin directory, or delete {} to start afresh \
                     (its data is lost)",
                    self.dir.display()
                ),
            )),
            _ => Ok(bin),
        }
    }

    /// First start: password file first (so the password is never lost),
    /// then initdb and our settings.
    fn init(&self, bin: &PgBin, layout: &Layout) -> Result<()> {
        layout.create_base()?;
        let password = server::random_password()?;
        let line = format!("*:*:*:{SUPERUSER}:{password}\n");
        server::write_private(&self.password_file(), line.as_bytes())?;
        server::initdb(bin, layout, &password, false)?;
        server::configure(layout, None, &[])
    }

    fn state(&self) -> State {
        std::fs::read(self.dir.join("state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn save(&self, state: &State) -> Result<()> {
        let path = self.dir.join("state.json");
        let text =
            serde_json::to_vec_pretty(state).map_err(|e| crate::Error::bug(e.to_string()))?;
        std::fs::write(&path, text).map_err(|e| owner::io_error(&path, "write", e))
    }

    fn url_for(&self, port: u16) -> String {
        let passfile: String = self
            .password_file()
            .to_string_lossy()
            .bytes()
            .map(|b| match b {
                b'/' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
                b if b.is_ascii_alphanumeric() => (b as char).to_string(),
                b => format!("%{b:02X}"),
            })
            .collect();
        format!("postgresql://{SUPERUSER}@127.0.0.1:{port}/{SUPERUSER}?passfile={passfile}")
    }
}

impl fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let version = self
            .version
            .map(|v| format!("PostgreSQL {v}, "))
            .unwrap_or_default();
        match self.state {
            ServerState::NotInitialized => {
                write!(
                    f,
                    "not initialized ({}); start it with: pgtide server start",
                    self.dir.display()
                )
            }
            ServerState::Stopped => write!(f, "stopped ({version}{})", self.dir.display()),
            ServerState::Running => {
                let pid = self.pid.map(|p| format!("pid {p}, ")).unwrap_or_default();
                let url = self.url.as_deref().unwrap_or("?");
                write!(f, "running at {url} ({version}{pid}{})", self.dir.display())
            }
        }
    }
}

/// Starts the embedded server at its default location.
pub fn server_start() -> Result<ServerStatus> {
    Embedded::default_location()?.start()
}

/// Stops the embedded server.
pub fn server_stop() -> Result<ServerStatus> {
    Embedded::default_location()?.stop()
}

/// Reports on the embedded server.
pub fn server_status() -> Result<ServerStatus> {
    Embedded::default_location()?.status()
}

/// The embedded server's URI (no password; see the module docs).
pub fn server_url() -> Result<String> {
    Embedded::default_location()?.url()
}

/// A target for the embedded server, started if needed.
pub fn server_target() -> Result<Target> {
    Embedded::default_location()?.target()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_fresh_empty_or_marked_directory_is_claimed() {
        let parent = tempfile::tempdir().unwrap();
        let fresh = Embedded::at(parent.path().join("a/server"));
        fresh.claim_dir().unwrap();
        assert!(fresh.dir().join(MARKER).is_file());
        fresh.claim_dir().expect("its own directory again");

        let empty = Embedded::at(parent.path().join("empty"));
        std::fs::create_dir(empty.dir()).unwrap();
        empty.claim_dir().unwrap();
        assert!(empty.dir().join(MARKER).is_file());

        let foreign = Embedded::at(parent.path().join("foreign"));
        std::fs::create_dir(foreign.dir()).unwrap();
        std::fs::write(foreign.dir().join("notes.txt"), "mine").unwrap();
        let e = foreign.claim_dir().unwrap_err();
        assert!(e.message().contains("not created by pgtide"), "{e:?}");
        assert!(e.hint().unwrap().contains("PGTIDE_SERVER_DIR"), "{e:?}");
        assert!(!foreign.dir().join(MARKER).exists());

        let file = Embedded::at(parent.path().join("foreign/notes.txt"));
        assert!(file.claim_dir().is_err());
    }
}
