//! The TLS connector of a connection: built once per process for the same
//! settings and files, and not at all when nothing is verified and the
//! server answers the TLS request with "no".
//!
//! Why: `SslConnector::builder` loads the system's root store whatever is
//! configured afterwards, which parses every certificate of
//! `/etc/ssl/certs/ca-certificates.crt`: 40 ms of CPU on the machine of
//! docs/benchmarks.md, paid by every connection (the catalog connection,
//! each worker, each reconnect). A 1-worker load of 78 MB spent 3% of its
//! time there, against a server (the embedded one, most local ones) that
//! has no TLS. libpq never reads the system store unless
//! `sslrootcert=system`.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};

use postgres_openssl::{MakeTlsConnector, TlsConnector, TlsStream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connector as `tls::TlsSettings::plan` chose it.
#[derive(Clone)]
pub(crate) enum Connector {
    /// Built (and checked) before connecting: settings with files.
    Built(MakeTlsConnector),
    /// No verification and no client certificate: built when the server
    /// agrees to TLS, from [`unverified`]'s recipe.
    Unverified(fn() -> Result<MakeTlsConnector, String>),
}

/// The connector built by `build` for settings whose files and options
/// `key` stamps, from the process' cache when built before.
pub(crate) fn cached<E>(
    key: String,
    build: impl FnOnce() -> Result<MakeTlsConnector, E>,
) -> Result<MakeTlsConnector, E> {
    static BUILT: OnceLock<Mutex<HashMap<String, MakeTlsConnector>>> = OnceLock::new();
    let cache = BUILT.get_or_init(Default::default);
    if let Some(c) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(c.clone());
    }
    let built = build()?;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, built.clone());
    Ok(built)
}

/// The unverified connector, built once per process by `build`.
fn unverified(build: fn() -> Result<MakeTlsConnector, String>) -> Result<MakeTlsConnector, String> {
    static BUILT: OnceLock<Result<MakeTlsConnector, String>> = OnceLock::new();
    BUILT.get_or_init(build).clone()
}

impl<S> MakeTlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Debug + 'static + Sync + Send,
{
    type Stream = TlsStream<S>;
    type TlsConnect = Connect;
    type Error = openssl::error::ErrorStack;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Connect, Self::Error> {
        Ok(match self {
            Connector::Built(make) => {
                Connect::Ready(MakeTlsConnect::<S>::make_tls_connect(make, domain)?)
            }
            Connector::Unverified(build) => Connect::Later {
                build: *build,
                domain: domain.to_owned(),
            },
        })
    }
}

/// One connection's TLS handshake.
pub(crate) enum Connect {
    Ready(TlsConnector),
    Later {
        build: fn() -> Result<MakeTlsConnector, String>,
        domain: String,
    },
}

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Debug + 'static + Sync + Send,
{
    type Stream = TlsStream<S>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<TlsStream<S>, BoxError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let ready = match self {
            Connect::Ready(c) => Ok(c),
            Connect::Later { build, domain } => unverified(build).and_then(|mut make| {
                MakeTlsConnect::<S>::make_tls_connect(&mut make, &domain).map_err(|e| e.to_string())
            }),
        };
        match ready {
            Ok(c) => c.connect(stream),
            Err(e) => Box::pin(async move { Err(BoxError::from(e)) }),
        }
    }
}
