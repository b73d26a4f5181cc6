//! PostgreSQL servers that pgtide starts itself.
//!
//! Three users, one implementation: the tests and `bench` need a
//! throwaway server ([`Cluster::temp`]); the README's first run needs a
//! server with nothing installed by hand ([`embedded`], behind `pgtide
//! server start|stop|status|url`). Both are an `initdb` + `pg_ctl` of
//! binaries found by [`PgBin`], listening on 127.0.0.1 only, with a random
//! superuser password.
//!
//! Running as root is the normal case in containers and CI, and the
//! server refuses it: see `owner.rs` for the `pgtide` system user that
//! runs the server then. This module must not be reachable from load
//! paths that were given an explicit target.
//!
//! ```no_run
//! use pgtide::cluster::{Cluster, ClusterOptions, PgBin};
//! let bin = PgBin::find()?;
//! let cluster = Cluster::temp(&bin, ClusterOptions::default())?;
//! let target = cluster.target(); // connect with target.connect().await
//! # Ok::<(), pgtide::Error>(())
//! ```

mod bin;
pub mod embedded;
mod lock;
mod owner;
mod server;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use bin::{find_pg_dump, find_psql, PgBin};
pub use embedded::{
    server_start, server_status, server_stop, server_target, server_url, Embedded, ServerState,
    ServerStatus,
};

use crate::conn::{Env, Target};
use crate::{Error, ErrorKind, Result};
use server::Layout;

/// Throwaway clusters live under /tmp, which the `pgtide` user can
/// traverse even when the caller's $TMPDIR (or /root) is private.
const TEMP_PARENT: &str = "/tmp";

/// A certificate and key for the server (PEM files; copied into the data
/// directory).
#[derive(Debug, Clone)]
pub struct SslFiles {
    /// Server certificate (chain).
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// CA certificates the server trusts for client certificates
    /// (`ssl_ca_file`), if any.
    pub ca: Option<PathBuf>,
}

impl SslFiles {
    /// A certificate and its key, no client CA.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> SslFiles {
        SslFiles {
            cert: cert.into(),
            key: key.into(),
            ca: None,
        }
    }
}

/// How to set up a cluster beyond pgtide's defaults.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// Turn TLS on with these files.
    pub ssl: Option<SslFiles>,
    /// Extra `postgresql.conf` settings, name and value (written quoted).
    pub settings: Vec<(String, String)>,
}

/// A running throwaway server, stopped and deleted on drop.
pub struct Cluster {
    bin: PgBin,
    layout: Layout,
    data: PathBuf,
    port: u16,
    password: String,
    // Removes the directory after `Drop::drop` has stopped the server.
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// `initdb` into a fresh directory under /tmp, a free port on
    /// 127.0.0.1, started. `fsync` is off: nothing here must survive a
    /// crash, and tests run several times faster.
    pub fn temp(bin: &PgBin, opts: ClusterOptions) -> Result<Cluster> {
        let owner = owner::server_owner()?;
        let dir = tempfile::Builder::new()
            .prefix("pgtide-cluster-")
            .tempdir_in(TEMP_PARENT)
            .map_err(|e| owner::io_error(Path::new(TEMP_PARENT), "create a directory in", e))?;
        let layout = Layout {
            base: dir.path().to_owned(),
            owner,
        };
        layout.create_base()?;
        let password = server::random_password()?;
        server::initdb(bin, &layout, &password, true)?;
        let mut settings = vec![("fsync".to_owned(), "off".to_owned())];
        settings.extend(opts.settings);
        server::configure(&layout, opts.ssl.as_ref(), &settings)?;
        let port = server::free_port()?;
        server::start(bin, &layout, port)?;
        Ok(Cluster {
            bin: bin.clone(),
            data: layout.data(),
            layout,
            port,
            password,
            _dir: dir,
        })
    }

    /// Stops the server with `pg_ctl stop -m <mode>` (`fast`: sessions
    /// are ended and a checkpoint written; `immediate`: no checkpoint,
    /// crash recovery at the next start) and starts it again on the same
    /// port. Every open session is gone afterwards. For fault tests.
    pub fn restart(&self, mode: &str) -> Result<()> {
        server::stop(&self.bin, &self.layout, mode)?;
        server::start(&self.bin, &self.layout, self.port)
    }

    /// Stops the server (`pg_ctl stop -m <mode>`) until [`Cluster::start`]:
    /// a server that is down, for fault tests.
    pub fn stop(&self, mode: &str) -> Result<()> {
        server::stop(&self.bin, &self.layout, mode)
    }

    /// Starts a server [`Cluster::stop`] stopped, on the same port.
    pub fn start(&self) -> Result<()> {
        server::start(&self.bin, &self.layout, self.port)
    }

    /// The superuser connection (user and database `postgres`), password
    /// included. Built from an empty environment, so the caller's `PG*`
    /// variables cannot redirect it.
    pub fn target(&self) -> Target {
        Target::parse_with(&self.conninfo(), &Env::empty())
            .expect("a cluster's own conninfo parses")
    }

    /// A libpq `key=value` string for this cluster, usable by `psql`; it
    /// contains the password, so never print it.
    pub fn conninfo(&self) -> String {
        conninfo(self.port, &self.password)
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The superuser's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The binaries the cluster runs.
    pub fn bin(&self) -> &PgBin {
        &self.bin
    }

    /// The unix socket directory (connect with `host=<this dir>`).
    pub fn socket_dir(&self) -> PathBuf {
        self.layout.sock()
    }

    /// The server log file.
    pub fn log_file(&self) -> PathBuf {
        self.layout.log()
    }

    /// `psql` with `PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE` set (and
    /// the caller's other `PG*` variables removed): the bin directory's
    /// own psql, else one on `PATH` or under /usr/lib/postgresql.
    pub fn psql(&self) -> Command {
        let psql = self.bin.psql().unwrap_or_else(|| PathBuf::from("psql"));
        let mut c = Command::new(psql);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("PG") {
                c.env_remove(k);
            }
        }
        c.envs(self.target().libpq_env());
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Immediate: the data is thrown away, so there is nothing to
        // flush. Errors are ignored: the directory goes anyway.
        let _ = server::stop(&self.bin, &self.layout, "immediate");
    }
}

/// The key=value string for a pgtide server on 127.0.0.1.
fn conninfo(port: u16, password: &str) -> String {
    let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
    format!(
        "host=127.0.0.1 port={port} user={} dbname={} password='{quoted}'",
        server::SUPERUSER,
        server::SUPERUSER
    )
}

fn cluster_error(message: String, hint: &str) -> Error {
    Error::new(ErrorKind::Cluster, message).with_hint(hint)
}
