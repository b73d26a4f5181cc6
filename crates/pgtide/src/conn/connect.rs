//! The connection attempt: one host at a time, TLS as planned, and an
//! error that says which server failed, why, and what to do.
//!
//! Hosts are tried here rather than handed to tokio-postgres as a list
//! because libpq looks the password file up *per host*, and because each
//! failure should name its own host and port.

use std::time::Duration;

use tokio_postgres::config::{LoadBalanceHosts, SslMode as PgSslMode};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};

use super::pgpass::{self, Lookup};
use super::tap::{Io, TapTls, Tapped, Wire};
use super::tls::Plan;
use super::{Endpoint, Target};
use crate::{Error, ErrorKind, Result};

/// The server's NOTICE messages on one connection, in the order sent.
pub type Notices = tokio::sync::mpsc::UnboundedReceiver<tokio_postgres::error::DbError>;

pub(crate) async fn connect(target: &Target) -> Result<(Client, Notices)> {
    let plan = target.tls.plan()?;
    let mut errors = Vec::new();
    for endpoint in order(target) {
        match attempt(target, endpoint, &plan).await {
            Ok(connected) => return Ok(connected),
            Err(e) => errors.push(e),
        }
    }
    Err(combine(errors))
}

/// As [`connect`], on a socket pgtide opens itself, with the [`Wire`] that
/// lets a raw protocol session use the connection between the client's
/// requests (see `conn::tap`). The same hosts, TLS plan, fallbacks,
/// timeouts and errors as [`connect`]; tokio-postgres still does TLS and
/// authentication (`Config::connect_raw`).
pub(crate) async fn connect_wire(target: &Target) -> Result<(Client, Notices, Wire)> {
    let plan = target.tls.plan()?;
    let mut errors = Vec::new();
    for endpoint in order(target) {
        match attempt_wire(target, endpoint, &plan).await {
            Ok(connected) => return Ok(connected),
            Err(e) => errors.push(e),
        }
    }
    Err(combine(errors))
}

/// [`attempt`] over a [`Tapped`] socket.
async fn attempt_wire(
    target: &Target,
    ep: &Endpoint,
    plan: &Plan,
) -> Result<(Client, Notices, Wire)> {
    let (config, passfile_note) = config_for(target, ep);
    let socket = ep.host.starts_with('/');
    let plain = |mut c: Config| async move {
        c.ssl_mode(PgSslMode::Disable);
        within(target, raw(target, ep, c, None)).await
    };
    let result = match plan {
        _ if socket => plain(config.clone()).await,
        Plan::Plain => plain(config.clone()).await,
        Plan::Tls {
            connector,
            fallback,
        } => {
            let mut c = config.clone();
            c.ssl_mode(if *fallback {
                PgSslMode::Prefer
            } else {
                PgSslMode::Require
            });
            let tls = within(target, raw(target, ep, c, Some(connector.clone()))).await;
            match tls {
                Err(Failure::Pg(e)) if *fallback && !is_socket_error(&e) => {
                    plain(config.clone()).await
                }
                other => other,
            }
        }
    };
    match result {
        Ok(((client, connection, notices), wire)) => {
            // As in `attempt`: errors reach the user through the client.
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok((client, notices, wire))
        }
        Err(f) => Err(explain(target, ep, f, passfile_note.as_deref())),
    }
}

/// One connection on our own socket: TCP (each address of the host, with
/// tokio-postgres' socket options) or the unix socket, then `connect_raw`
/// (TLS when `tls` is given), then `target_session_attrs`, as
/// tokio-postgres' own `connect` does them.
async fn raw(
    target: &Target,
    ep: &Endpoint,
    config: Config,
    tls: Option<postgres_openssl::MakeTlsConnector>,
) -> std::result::Result<(Spawnable, Wire), Failure> {
    use tokio_postgres::tls::MakeTlsConnect;
    let socket = Tapped::new(
        open_socket(ep, &target.session)
            .await
            .map_err(Failure::Socket)?,
    );
    let wire = socket.wire();
    match tls {
        Some(mut make) => {
            let host = if ep.host.starts_with('/') {
                ""
            } else {
                &ep.host
            };
            let inner = MakeTlsConnect::<Tapped>::make_tls_connect(&mut make, host)
                .map_err(|e| Failure::Socket(std::io::Error::other(e)))?;
            let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
            let tls = TapTls {
                inner,
                slot: slot.clone(),
            };
            let (client, mut conn) = config.connect_raw(socket, tls).await.map_err(Failure::Pg)?;
            check_session_attrs(target, &client, &mut conn).await?;
            // Under TLS the raw session talks to the TLS stream.
            let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            Ok((forward(client, conn), taken.unwrap_or(wire)))
        }
        None => {
            let (client, mut conn) = config
                .connect_raw(socket, NoTls)
                .await
                .map_err(Failure::Pg)?;
            check_session_attrs(target, &client, &mut conn).await?;
            Ok((forward(client, conn), wire))
        }
    }
}

/// The socket of one endpoint, set up as tokio-postgres sets its own up
/// (`connect_socket`): TCP_NODELAY, `tcp_user_timeout`, keepalives; each
/// address of the host in turn.
async fn open_socket(ep: &Endpoint, s: &super::Session) -> std::io::Result<Box<dyn Io>> {
    if ep.host.starts_with('/') {
        let path = format!("{}/.s.PGSQL.{}", ep.host, ep.port);
        return Ok(Box::new(tokio::net::UnixStream::connect(path).await?));
    }
    let addrs: Vec<std::net::SocketAddr> = match ep.hostaddr {
        Some(ip) => vec![std::net::SocketAddr::new(ip, ep.port)],
        None => tokio::net::lookup_host((ep.host.as_str(), ep.port))
            .await?
            .collect(),
    };
    let mut last = None;
    for addr in addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(tcp) => {
                tcp.set_nodelay(true)?;
                let sock = socket2::SockRef::from(&tcp);
                if let Some(t) = s.tcp_user_timeout {
                    sock.set_tcp_user_timeout(Some(t))?;
                }
                if s.keepalives {
                    let mut k = socket2::TcpKeepalive::new().with_time(
                        s.keepalives_idle
                            .unwrap_or(Duration::from_secs(2 * 60 * 60)),
                    );
                    if let Some(i) = s.keepalives_interval {
                        k = k.with_interval(i);
                    }
                    if let Some(n) = s.keepalives_count {
                        k = k.with_retries(n);
                    }
                    sock.set_tcp_keepalive(&k)?;
                }
                return Ok(Box::new(tcp));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "could not resolve any addresses",
        )
    }))
}

/// `target_session_attrs=read-write|read-only`, checked as tokio-postgres'
/// `connect` checks it (`SHOW transaction_read_only`), with the
/// connection driven meanwhile.
async fn check_session_attrs<S, T>(
    target: &Target,
    client: &Client,
    conn: &mut tokio_postgres::Connection<S, T>,
) -> std::result::Result<(), Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio_postgres::config::TargetSessionAttrs as A;
    let want = target.session.target_session_attrs;
    if want == A::Any {
        return Ok(());
    }
    let show = client.simple_query("SHOW transaction_read_only");
    let rows = tokio::select! {
        rows = show => rows.map_err(Failure::Pg)?,
        end = conn => return Err(match end {
            Err(e) => Failure::Pg(e),
            Ok(()) => Failure::Socket(std::io::ErrorKind::UnexpectedEof.into()),
        }),
    };
    let value = rows.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
        _ => None,
    });
    let refused = match (want, value.as_deref()) {
        (A::ReadWrite, Some("on")) => Some("database does not allow writes"),
        (A::ReadOnly, Some("off")) => Some("database is not read only"),
        _ => None,
    };
    match refused {
        Some(why) => Err(Failure::Refused(why)),
        None => Ok(()),
    }
}

/// `load_balance_hosts=random` shuffles the hosts, as in libpq.
fn order(target: &Target) -> Vec<&Endpoint> {
    let mut hosts: Vec<&Endpoint> = target.endpoints.iter().collect();
    if matches!(target.session.load_balance, LoadBalanceHosts::Random) {
        for i in (1..hosts.len()).rev() {
            let mut byte = [0u8; 8];
            // Falls back to no shuffle if the RNG fails: order is not a
            // correctness property.
            let _ = openssl::rand::rand_bytes(&mut byte);
            hosts.swap(i, (u64::from_le_bytes(byte) % (i as u64 + 1)) as usize);
        }
    }
    hosts
}

/// One host: TLS as planned, then (for `prefer`) plain if TLS failed.
async fn attempt(target: &Target, ep: &Endpoint, plan: &Plan) -> Result<(Client, Notices)> {
    let (config, passfile_note) = config_for(target, ep);
    // libpq ignores sslmode on unix sockets, and the server refuses TLS
    // there: a local connection is already private.
    let socket = ep.host.starts_with('/');
    let result = match plan {
        _ if socket => {
            let mut c = config.clone();
            c.ssl_mode(PgSslMode::Disable);
            timed(target, c.connect(NoTls)).await
        }
        Plan::Plain => {
            let mut c = config.clone();
            c.ssl_mode(PgSslMode::Disable);
            timed(target, c.connect(NoTls)).await
        }
        Plan::Tls {
            connector,
            fallback,
        } => {
            let mut c = config.clone();
            c.ssl_mode(if *fallback {
                PgSslMode::Prefer
            } else {
                PgSslMode::Require
            });
            let tls = timed(target, c.connect(connector.clone())).await;
            match tls {
                Err(Failure::Pg(e)) if *fallback && !is_socket_error(&e) => {
                    let mut c = config.clone();
                    c.ssl_mode(PgSslMode::Disable);
                    timed(target, c.connect(NoTls)).await
                }
                other => other,
            }
        }
    };
    match result {
        Ok((client, connection, notices)) => {
            tokio::spawn(async move {
                // The error, if any, reaches the user through the client:
                // its next call fails with "connection closed".
                let _ = connection.await;
            });
            Ok((client, notices))
        }
        Err(f) => Err(explain(target, ep, f, passfile_note.as_deref())),
    }
}

/// A connection in progress, typed to whichever TLS stream was chosen.
type Connected<S> = (
    Client,
    tokio_postgres::Connection<tokio_postgres::Socket, S>,
);

/// Both kinds of connection erased to one spawnable future, which
/// forwards the server's notices (COPY's `ON_ERROR ignore` reports skipped
/// rows only that way; they are dropped when nobody listens).
type Spawnable = (
    Client,
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send>>,
    Notices,
);

enum Failure {
    Pg(tokio_postgres::Error),
    /// Opening our own socket (`connect_wire`).
    Socket(std::io::Error),
    /// The server is not what `target_session_attrs` asks for.
    Refused(&'static str),
    Timeout(Duration),
}

/// Runs `fut` under `connect_timeout`, which in libpq bounds the whole
/// attempt (authentication included), not only the TCP connect.
async fn timed<S>(
    target: &Target,
    fut: impl std::future::Future<Output = Result<Connected<S>, tokio_postgres::Error>>,
) -> Result<Spawnable, Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    within(target, async { fut.await.map_err(Failure::Pg) })
        .await
        .map(|(client, conn)| forward(client, conn))
}

/// `fut` under `connect_timeout`.
async fn within<T>(
    target: &Target,
    fut: impl std::future::Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    match target.connect_timeout {
        Some(limit) => match tokio::time::timeout(limit, fut).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout(limit)),
        },
        None => fut.await,
    }
}

/// The connection as one spawnable future that forwards the server's
/// notices.
fn forward<R, S>(client: Client, mut conn: tokio_postgres::Connection<R, S>) -> Spawnable
where
    R: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let forward = async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(tokio_postgres::AsyncMessage::Notice(n))) => {
                    let _ = tx.send(n);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    };
    (client, Box::pin(forward) as _, rx)
}

/// The tokio-postgres configuration for one endpoint, and why the
/// password file was ignored, if it was.
fn config_for(target: &Target, ep: &Endpoint) -> (Config, Option<String>) {
    let mut c = Config::new();
    if ep.host.starts_with('/') {
        c.host_path(&ep.host);
    } else {
        c.host(&ep.host);
    }
    if let Some(addr) = ep.hostaddr {
        c.hostaddr(addr);
    }
    c.port(ep.port).user(&target.user).dbname(&target.dbname);
    c.application_name(&target.application_name);
    let note = password(target, ep, &mut c);
    if let Some(o) = &target.options {
        c.options(o);
    }
    if let Some(t) = target.connect_timeout {
        c.connect_timeout(t);
    }
    let s = &target.session;
    c.target_session_attrs(s.target_session_attrs)
        .channel_binding(s.channel_binding)
        .ssl_negotiation(s.ssl_negotiation)
        .keepalives(s.keepalives);
    if let Some(d) = s.keepalives_idle {
        c.keepalives_idle(d);
    }
    if let Some(d) = s.keepalives_interval {
        c.keepalives_interval(d);
    }
    if let Some(n) = s.keepalives_count {
        c.keepalives_retries(n);
    }
    if let Some(d) = s.tcp_user_timeout {
        c.tcp_user_timeout(d);
    }
    (c, note)
}

/// Explicit password (or PGPASSWORD) first, else the password file.
fn password(target: &Target, ep: &Endpoint, c: &mut Config) -> Option<String> {
    if let Some(p) = &target.password {
        c.password(p);
        return None;
    }
    let file = target.passfile.as_deref()?;
    let key = pgpass::Key {
        host: &ep.host,
        port: ep.port,
        dbname: &target.dbname,
        user: &target.user,
    };
    match pgpass::lookup(file, key) {
        Lookup::Found(p) => {
            c.password(p);
            None
        }
        Lookup::NotFound => None,
        Lookup::Ignored(why) => Some(why),
    }
}

fn is_socket_error(e: &tokio_postgres::Error) -> bool {
    source_of::<std::io::Error>(e).is_some()
}

fn source_of<T: std::error::Error + 'static>(e: &tokio_postgres::Error) -> Option<&T> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<T>() {
            return Some(t);
        }
        cur = err.source();
    }
    None
}

/// Turns a failure into an error naming the endpoint, with a hint.
fn explain(target: &Target, ep: &Endpoint, f: Failure, passfile_note: Option<&str>) -> Error {
    let place = ep.describe();
    let e = match f {
        Failure::Timeout(limit) => {
            return Error::new(
                ErrorKind::Connect,
                format!(
                    "could not connect to {place}: timeout expired after {}s",
                    limit.as_secs()
                ),
            )
            .with_hint("check the host, port and firewall, or raise connect_timeout")
        }
        Failure::Pg(e) => e,
        Failure::Socket(io) => {
            return Error::new(
                ErrorKind::Connect,
                format!("could not connect to {place}: error connecting to server: {io}"),
            )
            .with_hint(socket_hint(ep, io.kind()))
        }
        Failure::Refused(why) => {
            return Error::new(
                ErrorKind::Connect,
                format!("could not connect to {place}: {why}"),
            )
            .with_hint("target_session_attrs asks for another kind of server; check the host list")
        }
    };
    let why = match std::error::Error::source(&e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    };
    let mut err = Error::new(
        ErrorKind::Connect,
        format!("could not connect to {place}: {why}"),
    );
    if let Some(db) = e.as_db_error() {
        err = err.with_sqlstate(db.code().code());
    }
    let hint = hint(target, ep, &e, passfile_note);
    err.with_hint(hint).with_source(e)
}

fn hint(
    target: &Target,
    ep: &Endpoint,
    e: &tokio_postgres::Error,
    passfile_note: Option<&str>,
) -> String {
    let auth = || {
        let mut h = format!(
            "check the user name and password for user \"{}\": set the password in \
             PGPASSWORD or in ~/.pgpass (mode 0600; PGPASSFILE or passfile= name another \
             file), not in --db, where other users can read it with ps",
            target.user
        );
        if let Some(note) = passfile_note {
            h.push_str(&format!("; note: {note}, so it was ignored"));
        }
        h
    };
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        return if code == &SqlState::INVALID_PASSWORD
            || code == &SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            auth()
        } else if code == &SqlState::INVALID_CATALOG_NAME {
            format!(
                "create the database (createdb \"{}\"), or name an existing one in --db or PGDATABASE",
                target.dbname
            )
        } else if code == &SqlState::TOO_MANY_CONNECTIONS {
            "the server has no free connection slots; use fewer workers or raise max_connections"
                .into()
        } else if code == &SqlState::CANNOT_CONNECT_NOW {
            "the server is starting up or shutting down; retry in a moment".into()
        } else {
            "see the server's message above".into()
        };
    }
    // tokio-postgres reports "the server asked for a password and we have
    // none" as a configuration error; its text is the only marker.
    let text = match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    };
    if text.contains("password missing") {
        return auth();
    }
    if let Some(io) = source_of::<std::io::Error>(e) {
        return socket_hint(ep, io.kind());
    }
    if source_of::<openssl::ssl::Error>(e).is_some()
        || source_of::<openssl::error::ErrorStack>(e).is_some()
        || e.to_string().contains("TLS")
    {
        return format!(
            "the TLS connection failed under sslmode={}: check sslrootcert (the CA that signed the \
             server's certificate), that the host name matches the certificate for verify-full, \
             and that the server has ssl=on; sslmode=disable turns TLS off",
            target.tls.mode.as_str()
        );
    }

    "check the connection settings in --db and the PG* variables".into()
}

fn socket_hint(ep: &Endpoint, kind: std::io::ErrorKind) -> String {
    use std::io::ErrorKind as K;
    match kind {
        K::ConnectionRefused | K::NotFound if ep.host.starts_with('/') => format!(
            "is the server running locally and accepting connections on that socket? \
             (host={} port={})",
            ep.host, ep.port
        ),
        K::ConnectionRefused => format!(
            "is the server running on host \"{}\" and accepting TCP/IP connections on port {}?",
            ep.host, ep.port
        ),
        K::PermissionDenied => "this user may not open the socket; check the directory's permissions".into(),
        _ => format!(
            "check that the host name \"{}\" is right and the server is reachable (network, firewall)",
            ep.host
        ),
    }
}

/// One error per host tried; a single host's error is returned as is.
fn combine(mut errors: Vec<Error>) -> Error {
    if errors.len() == 1 {
        return errors.pop().expect("one error");
    }
    let message = errors
        .iter()
        .map(|e| e.message().to_owned())
        .collect::<Vec<_>>()
        .join("; ");
    let hint = errors.iter().find_map(|e| e.hint().map(str::to_owned));
    let mut err = Error::new(
        ErrorKind::Connect,
        format!(
            "could not connect to any of {} hosts: {message}",
            errors.len()
        ),
    );
    if let Some(h) = hint {
        err = err.with_hint(h);
    }
    err
}
