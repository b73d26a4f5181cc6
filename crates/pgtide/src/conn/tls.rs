//! `sslmode` and friends, turned into an OpenSSL connector with libpq's
//! semantics.
//!
//! tokio-postgres knows only disable/prefer/require and leaves
//! verification to the connector, so the libpq rules live here:
//!
//! - `allow` is treated as `prefer` (TLS first; libpq tries plain first,
//!   which only matters for servers that reject TLS, and those answer
//!   the TLS request with "no" anyway).
//! - `prefer` falls back to a plain connection if TLS fails (connect.rs).
//! - `require` does not verify the server, unless a root certificate file
//!   exists (`sslrootcert`, default `~/.postgresql/root.crt`): then it
//!   verifies the chain like `verify-ca`. This is libpq's documented
//!   backward-compatibility rule, and surprising, so it is tested.
//! - `verify-ca` verifies the chain against the root file only (never the
//!   system store); `verify-full` also checks the host name (or IP SAN).
//! - `sslrootcert=system` uses the system store and requires
//!   `verify-full` (libpq 16).
//! - A client certificate (`sslcert`, default
//!   `~/.postgresql/postgresql.crt`) is sent when the file exists, with its
//!   key (`sslkey`, default `~/.postgresql/postgresql.key`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode};
use openssl::x509::store::X509StoreBuilder;
use postgres_openssl::MakeTlsConnector;

use super::connector::{cached, Connector};
use crate::{Error, Result};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SslMode {
    /// Never use TLS.
    Disable,
    /// Treated as `Prefer` (see the module docs).
    Allow,
    /// Try TLS, fall back to a plain connection (libpq's default).
    Prefer,
    /// TLS; verify only when a root certificate file exists.
    Require,
    /// TLS, and the server certificate must chain to the root file.
    VerifyCa,
    /// As `VerifyCa`, and the certificate must name the host.
    VerifyFull,
}

impl SslMode {
    pub(crate) fn parse(s: &str) -> Result<SslMode> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => {
                return Err(Error::config("invalid sslmode value").with_hint(
                    "use one of disable, allow, prefer, require, verify-ca, \
                     verify-full",
                ))
            }
        })
    }

    /// The name libpq uses.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Resolved TLS settings of a target; file paths are checked at connect
/// time, as libpq does, because files may appear between parse and
/// connect.
#[derive(Debug, Clone)]
pub(crate) struct TlsSettings {
    pub mode: SslMode,
    /// `sslrootcert` as given, else the default path (none without a home
    /// directory).
    pub rootcert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// How to open the connection.
pub(crate) enum Plan {
    Plain,
    Tls {
        connector: Connector,
        /// `prefer`: retry without TLS if TLS fails.
        fallback: bool,
    },
}

impl TlsSettings {
    /// Chooses the connector, checking the files the mode needs: built
    /// now (or taken from the process' cache) when there are files to
    /// load, built on first use of TLS when there are none
    /// (`conn::connector`).
    pub(crate) fn plan(&self) -> Result<Plan> {
        if self.mode == SslMode::Disable {
            return Ok(Plan::Plain);
        }
        let system = self.rootcert.as_deref() == Some(Path::new("system"));
        if system && self.mode != SslMode::VerifyFull {
            return Err(Error::config(format!(
                "weak sslmode \"{}\" may not be used with sslrootcert=system",
                self.mode.as_str()
            ))
            .with_hint("use sslmode=verify-full with sslrootcert=system"));
        }
        let root = self.rootcert.as_deref().filter(|p| !system && p.exists());
        if root.is_none() && !system && self.mode >= SslMode::VerifyCa {
            return Err(self.missing_root());
        }
        let verify_host = self.mode == SslMode::VerifyFull;
        let has_cert = self.cert.as_deref().is_some_and(Path::exists);
        let connector = if root.is_none() && !system && !has_cert {
            Connector::Unverified(unverified)
        } else {
            let key = format!(
                "{verify_host} {system} {} {} {}",
                stamp(root),
                stamp(self.cert.as_deref()),
                stamp(self.key.as_deref())
            );
            Connector::Built(
                cached(key, || self.connector(root, system, verify_host))
                    .map_err(|e| tls_setup_error(&e))?,
            )
        };
        Ok(Plan::Tls {
            connector,
            fallback: self.mode <= SslMode::Prefer,
        })
    }

    fn connector(
        &self,
        root: Option<&Path>,
        system: bool,
        verify_host: bool,
    ) -> Result<MakeTlsConnector, SetupError> {
        let mut b = SslConnector::builder(SslMethod::tls_client())
            .map_err(|e| SetupError::new("TLS", e))?;
        postgres_openssl::set_postgresql_alpn(&mut b).map_err(|e| SetupError::new("TLS", e))?;
        if system {
            b.set_default_verify_paths()
                .map_err(|e| SetupError::new("system root store", e))?;
            b.set_verify(SslVerifyMode::PEER);
        } else if let Some(root) = root {
            // Only the given roots are trusted, as in libpq: start from an
            // empty store instead of the system one the builder loaded.
            let empty = X509StoreBuilder::new().map_err(|e| SetupError::new("TLS", e))?;
            b.set_cert_store(empty.build());
            b.set_ca_file(root).map_err(|e| SetupError::file(root, e))?;
            b.set_verify(SslVerifyMode::PEER);
        } else {
            b.set_verify(SslVerifyMode::NONE);
        }
        self.client_cert(&mut b)?;
        let mut connector = MakeTlsConnector::new(b.build());
        if !verify_host {
            connector.set_callback(|config, _| {
                config.set_verify_hostname(false);
                Ok(())
            });
        }
        Ok(connector)
    }

    fn client_cert(&self, b: &mut openssl::ssl::SslConnectorBuilder) -> Result<(), SetupError> {
        let Some(cert) = self.cert.as_deref().filter(|p| p.exists()) else {
            return Ok(());
        };
        b.set_certificate_chain_file(cert)
            .map_err(|e| SetupError::file(cert, e))?;
        let Some(key) = self.key.as_deref().filter(|p| p.exists()) else {
            return Err(SetupError::message(format!(
                "certificate present, but not private key file \"{}\"",
                self.key.as_deref().unwrap_or(Path::new("")).display()
            )));
        };
        check_key_mode(key)?;
        b.set_private_key_file(key, SslFiletype::PEM)
            .map_err(|e| SetupError::file(key, e))?;
        b.check_private_key().map_err(|e| SetupError::file(key, e))
    }

    fn missing_root(&self) -> Error {
        let path = match &self.rootcert {
            Some(p) => format!("\"{}\"", p.display()),
            None => "~/.postgresql/root.crt".into(),
        };
        Error::config(format!(
            "sslmode={} needs a root certificate file, and {path} does not \
             exist",
            self.mode.as_str()
        ))
        .with_hint(
            "set sslrootcert=/path/to/ca.crt (or PGSSLROOTCERT), use \
             sslrootcert=system with sslmode=verify-full to trust the \
             system's roots, or use sslmode=require to skip verification",
        )
    }
}

/// The connector of settings without files: no verification, no client
/// certificate (see `conn::connector`).
fn unverified() -> std::result::Result<MakeTlsConnector, String> {
    let none = TlsSettings {
        mode: SslMode::Require,
        rootcert: None,
        cert: None,
        key: None,
    };
    none.connector(None, false, false).map_err(|e| e.0)
}

/// A file as the connector cache tells versions apart: its path, size,
/// modification time, inode, mode and owner (a file replaced or re-permissioned
/// between two connections is checked and loaded again, as libpq does per
/// connection).
fn stamp(path: Option<&Path>) -> String {
    let Some(path) = path else {
        return "-".into();
    };
    match std::fs::metadata(path) {
        Ok(m) => format!(
            "{:?}:{}:{}.{}:{}:{:o}:{}",
            path,
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ino(),
            m.mode(),
            m.uid()
        ),
        Err(_) => format!("{path:?}:absent"),
    }
}

/// libpq refuses a key readable by others: 0600 or less if owned by the
/// current user, 0640 or less if owned by root.
fn check_key_mode(key: &Path) -> Result<(), SetupError> {
    let meta = std::fs::metadata(key).map_err(|e| SetupError::file(key, e))?;
    let mask = if meta.uid() == super::env::euid() {
        0o077
    } else if meta.uid() == 0 {
        0o037
    } else {
        0
    };
    if meta.mode() & mask == 0 {
        return Ok(());
    }
    Err(SetupError::message(format!(
        "private key file \"{}\" has group or world access; file must have \
         permissions u=rw (0600) or less if owned by the current user, or \
         permissions u=rw,g=r (0640) or less if owned by root",
        key.display()
    )))
}

/// Why the connector could not be built, before any network traffic.
struct SetupError(String);

impl SetupError {
    fn new(what: &str, e: impl std::fmt::Display) -> SetupError {
        SetupError(format!("could not set up {what}: {e}"))
    }
    fn file(path: &Path, e: impl std::fmt::Display) -> SetupError {
        SetupError(format!("could not load \"{}\": {e}", path.display()))
    }
    fn message(m: String) -> SetupError {
        SetupError(m)
    }
}

fn tls_setup_error(e: &SetupError) -> Error {
    Error::config(e.0.clone()).with_hint(
        "check sslrootcert, sslcert and sslkey (or PGSSLROOTCERT, PGSSLCERT, \
         PGSSLKEY): the files must exist, be PEM, and the key must match \
         the certificate",
    )
}
