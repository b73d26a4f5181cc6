//! Connections, made exactly as libpq makes them.
//!
//! Users already have a way to say where their server is: a `psql`
//! connection string, `PG*` variables, `~/.pgpass`, `sslmode`. pgtide
//! accepts the same things with the same meaning, so `--db` takes whatever
//! `psql` takes. tokio-postgres has its own, smaller dialect (no
//! `~/.pgpass`, no `verify-full`, different defaults), so the libpq rules
//! are implemented here on top of it.
//!
//! The pieces, in the order a connection goes through them:
//!
//! - `config`: the string (URI or `key=value`) → keyword/value pairs.
//! - [`env`](mod@env): the environment, as one value that tests can replace.
//! - `resolve`: pairs + environment → a [`Target`] (defaults applied).
//! - [`pgpass`]: the password file, looked up per host at connect time.
//! - `tls`: `sslmode` → an OpenSSL connector with libpq's rules.
//! - `connect`: the per-host attempt loop (one for tokio-postgres' socket
//!   and for pgtide's own).
//! - `explain`: a failed attempt as an error naming the host, with a hint.
//! - `tap`: a socket shared with a raw protocol session (`load::wire`'s
//!   pipeline, `copyout`'s COPY TO STDOUT).
//!
//! This module knows nothing about tables, files or COPY, and never
//! prints. A password never appears in a message, `Debug` or
//! [`Target::redacted`].
//!
//! ```no_run
//! # async fn f() -> pgtide::Result<()> {
//! use pgtide::conn::Target;
//! let target = Target::parse("postgresql://app@db.example/prod?sslmode=verify-full")?;
//! let client = target.connect().await?;
//! # Ok(()) }
//! ```

mod config;
mod connect;
mod connector;
pub use connect::Notices;
pub mod env;
mod explain;
pub mod pgpass;
mod resolve;
mod tap;
mod tls;

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use env::Env;
pub use tap::{Raw, Wire};
pub use tls::SslMode;

use crate::Result;

/// Resolved connection parameters: where to connect, as whom, and how.
#[derive(Clone)]
pub struct Target {
    endpoints: Vec<Endpoint>,
    user: String,
    dbname: String,
    password: Option<String>,
    passfile: Option<PathBuf>,
    tls: tls::TlsSettings,
    application_name: String,
    options: Option<String>,
    connect_timeout: Option<Duration>,
    session: Session,
}

/// One server to try: libpq's `host`/`hostaddr`/`port` triple.
#[derive(Debug, Clone)]
struct Endpoint {
    /// Host name, IP address or unix socket directory (starts with `/`);
    /// the address itself when only `hostaddr` was given.
    host: String,
    hostaddr: Option<IpAddr>,
    port: u16,
}

/// libpq's `target_session_attrs`: which server of the host list is
/// wanted. Checked by pgtide on every connection (`connect.rs`), since
/// tokio-postgres knows only the first three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionAttrs {
    Any,
    ReadWrite,
    ReadOnly,
    /// Not in recovery.
    Primary,
    /// In recovery.
    Standby,
    /// A standby if any host is one, else any server.
    PreferStandby,
}

/// Options passed through to tokio-postgres unchanged (but
/// `target_session_attrs`, see [`SessionAttrs`]).
#[derive(Debug, Clone)]
struct Session {
    target_session_attrs: SessionAttrs,
    channel_binding: tokio_postgres::config::ChannelBinding,
    ssl_negotiation: tokio_postgres::config::SslNegotiation,
    load_balance: tokio_postgres::config::LoadBalanceHosts,
    keepalives: bool,
    keepalives_idle: Option<Duration>,
    keepalives_interval: Option<Duration>,
    keepalives_count: Option<u32>,
    tcp_user_timeout: Option<Duration>,
}

impl Target {
    /// The `--db` value (a `postgresql://`/`postgres://` URI or a libpq
    /// `key=value` string), else the `PG*` environment variables.
    ///
    /// Returns `Ok(None)` when nothing is configured at all: no `--db`
    /// and none of `PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGSERVICE
    /// PGPASSWORD` set. The caller then decides on a default (the embedded
    /// server), instead of connecting to whatever libpq would guess.
    pub fn resolve(db: Option<&str>) -> Result<Option<Target>> {
        Target::resolve_with(db, &Env::from_process())
    }

    /// [`Target::resolve`] with an explicit environment.
    pub fn resolve_with(db: Option<&str>, env: &Env) -> Result<Option<Target>> {
        match db {
            Some(db) => Target::parse_with(db, env).map(Some),
            None if env.names_a_server() => Target::parse_with("", env).map(Some),
            None => Ok(None),
        }
    }

    /// Parses a connection string; the process environment fills what it
    /// leaves out, as in libpq.
    pub fn parse(conninfo: &str) -> Result<Target> {
        Target::parse_with(conninfo, &Env::from_process())
    }

    /// [`Target::parse`] with an explicit environment.
    pub fn parse_with(conninfo: &str, env: &Env) -> Result<Target> {
        let params = config::Params::parse(conninfo)?;
        resolve::resolve(&params, env)
    }

    /// Connects (trying each host in turn, as libpq does) and spawns the
    /// connection task on the current tokio runtime.
    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        Ok(connect::connect(self).await?.0)
    }

    /// Like [`Target::connect`], also returning the server's NOTICE
    /// messages as they arrive.
    pub async fn connect_with_notices(&self) -> Result<(tokio_postgres::Client, Notices)> {
        connect::connect(self).await
    }

    /// Like [`Target::connect_with_notices`], on a socket pgtide owns, with
    /// the [`Wire`] through which a raw protocol session may use the
    /// connection between the client's requests (`load::wire`: pipelined
    /// INSERTs with one Sync per window; `copyout`: COPY TO STDOUT, many
    /// rows per read). TLS and authentication are tokio-postgres' own, as
    /// for [`Target::connect`].
    pub async fn connect_wire(&self) -> Result<(tokio_postgres::Client, Notices, Wire)> {
        connect::connect_wire(self).await
    }

    /// The same target with another database.
    pub fn with_dbname(&self, db: &str) -> Target {
        Target {
            dbname: db.to_owned(),
            ..self.clone()
        }
    }

    /// The first host: a name, an IP address or a socket directory.
    pub fn host(&self) -> &str {
        &self.endpoints[0].host
    }

    /// The first host's port.
    pub fn port(&self) -> u16 {
        self.endpoints[0].port
    }

    /// The database user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The database name.
    pub fn dbname(&self) -> &str {
        &self.dbname
    }

    /// The `sslmode` in force.
    pub fn sslmode(&self) -> SslMode {
        self.tls.mode
    }

    /// The `application_name` sent to the server (default `pgtide`).
    pub fn application_name(&self) -> &str {
        &self.application_name
    }

    /// True when a password was given explicitly or by `PGPASSWORD` (a
    /// password file is only read at connect time).
    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// The same target as libpq environment variables, for running `psql`
    /// or `pg_dump` against it without putting the password on a command
    /// line (`Command::envs(target.libpq_env())`). Includes `PGPASSWORD`
    /// when a password was given, so never log the result.
    pub fn libpq_env(&self) -> Vec<(&'static str, String)> {
        let join = |f: &dyn Fn(&Endpoint) -> String| {
            self.endpoints.iter().map(f).collect::<Vec<_>>().join(",")
        };
        let mut env = vec![
            ("PGHOST", join(&|e| e.host.clone())),
            ("PGPORT", join(&|e| e.port.to_string())),
            ("PGUSER", self.user.clone()),
            ("PGDATABASE", self.dbname.clone()),
            ("PGSSLMODE", self.tls.mode.as_str().to_owned()),
            ("PGAPPNAME", self.application_name.clone()),
        ];
        if self.endpoints.iter().any(|e| e.hostaddr.is_some()) {
            let addr = |e: &Endpoint| e.hostaddr.map(|a| a.to_string()).unwrap_or_default();
            env.push(("PGHOSTADDR", join(&addr)));
        }
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
        let optional = [
            ("PGPASSWORD", self.password.clone()),
            ("PGPASSFILE", path(&self.passfile)),
            ("PGSSLROOTCERT", path(&self.tls.rootcert)),
            ("PGSSLCERT", path(&self.tls.cert)),
            ("PGSSLKEY", path(&self.tls.key)),
            ("PGOPTIONS", self.options.clone()),
            (
                "PGCONNECT_TIMEOUT",
                self.connect_timeout.map(|d| d.as_secs().to_string()),
            ),
        ];
        env.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
        env
    }

    /// A URI for messages and logs: never the password.
    /// For example `postgresql://app@db.example:5432/prod`.
    pub fn redacted(&self) -> String {
        let mut uri = format!("postgresql://{}@", encode(&self.user));
        let sockets = self.endpoints.iter().any(|e| e.host.starts_with('/'));
        if !sockets {
            let hosts: Vec<String> = self.endpoints.iter().map(Endpoint::uri_authority).collect();
            uri.push_str(&hosts.join(","));
        }
        uri.push('/');
        uri.push_str(&encode(&self.dbname));
        if sockets {
            let hosts: Vec<&str> = self.endpoints.iter().map(|e| e.host.as_str()).collect();
            let ports: Vec<String> = self.endpoints.iter().map(|e| e.port.to_string()).collect();
            uri.push_str(&format!(
                "?host={}&port={}",
                hosts.join(","),
                ports.join(",")
            ));
        }
        uri
    }
}

impl Endpoint {
    fn uri_authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", encode(&self.host), self.port)
        }
    }

    /// "host:port" (or the socket path) for messages.
    fn describe(&self) -> String {
        if self.host.starts_with('/') {
            return format!("socket \"{}/.s.PGSQL.{}\"", self.host, self.port);
        }
        match self.hostaddr {
            Some(addr) if addr.to_string() != self.host => {
                format!("host \"{}\" ({addr}), port {}", self.host, self.port)
            }
            _ => format!("host \"{}\", port {}", self.host, self.port),
        }
    }
}

impl fmt::Debug for Target {
    /// Redacted: the URI without the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Target").field(&self.redacted()).finish()
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
