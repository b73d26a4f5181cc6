//! The connection attempt: one host at a time, TLS as planned, and an
//! error that says which server failed, why, and what to do.
//!
//! Hosts are tried here rather than handed to tokio-postgres as a list
//! because libpq looks the password file up *per host*, and because each
//! failure should name its own host and port. What a failure says is
//! `explain`'s.

use std::future::Future;
use std::time::Duration;

use tokio_postgres::config::{LoadBalanceHosts, SslMode as PgSslMode};
use tokio_postgres::{Client, Config, NoTls};

use super::connector::Connector;
use super::explain::{after_tls, combine, explain, is_socket_error, Failure};
use super::pgpass::{self, Lookup};
use super::tap::{Io, TapTls, Tapped, Wire};
use super::tls::Plan;
use super::{Endpoint, SessionAttrs, Target};
use crate::Result;

/// The server's NOTICE messages on one connection, in the order sent.
pub type Notices = tokio::sync::mpsc::UnboundedReceiver<tokio_postgres::error::DbError>;

/// A client on the first host that takes it, its connection driven by a
/// spawned task, and the server's notices.
pub(crate) async fn connect(target: &Target) -> Result<(Client, Notices)> {
    let (client, notices, ()) = each_host(target, |_, config, tls, want| async move {
        // tokio-postgres opens the socket (each address of the host);
        // `target_session_attrs` is checked here, as on our own sockets.
        let connected = match tls {
            Some(connector) => {
                let (client, mut conn) = config.connect(connector).await.map_err(Failure::Pg)?;
                check_session_attrs(want, &client, &mut conn).await?;
                spawnable((client, conn))
            }
            None => {
                let (client, mut conn) = config.connect(NoTls).await.map_err(Failure::Pg)?;
                check_session_attrs(want, &client, &mut conn).await?;
                spawnable((client, conn))
            }
        };
        Ok((connected, ()))
    })
    .await?;
    Ok((client, notices))
}

/// As [`connect`], on a socket pgtide opens itself, with the [`Wire`] that
/// lets a raw protocol session use the connection between the client's
/// requests (see `conn::tap`). The same hosts, TLS plan, fallbacks,
/// timeouts and errors as [`connect`] (the same [`each_host`]);
/// tokio-postgres still does TLS and authentication
/// (`Config::connect_raw`).
pub(crate) async fn connect_wire(target: &Target) -> Result<(Client, Notices, Wire)> {
    each_host(target, |ep, config, tls, want| {
        raw(target, ep, config, tls, want)
    })
    .await
}

/// The loop both [`connect`] and [`connect_wire`] run, generic over how
/// one connection is opened (`open`: the endpoint, its configuration with
/// `sslmode` set, and the TLS connector or `None` for plain; it returns
/// the connection and whatever else it built, such as the [`Wire`]).
///
/// As libpq does: hosts in order (shuffled by `load_balance_hosts=random`),
/// the first that connects and satisfies `target_session_attrs` wins; per
/// host, TLS as planned, then plain when `sslmode=prefer` and TLS failed
/// for another reason than the socket; `connect_timeout` bounds each whole
/// attempt; when every host fails, one error names each host and why
/// (never a password: [`Endpoint::describe`] has none).
async fn each_host<'a, T, F, Fut>(target: &'a Target, open: F) -> Result<(Client, Notices, T)>
where
    F: Fn(&'a Endpoint, Config, Option<Connector>, SessionAttrs) -> Fut,
    Fut: Future<Output = std::result::Result<(Spawnable, T), Failure>>,
{
    let plan = target.tls.plan()?;
    let mut errors = Vec::new();
    // `prefer-standby`: every host as `standby`, then every host as `any`.
    let passes = match target.session.target_session_attrs {
        SessionAttrs::PreferStandby => vec![SessionAttrs::Standby, SessionAttrs::Any],
        want => vec![want],
    };
    let hosts = order(target);
    for want in passes {
        for endpoint in &hosts {
            match attempt(target, endpoint, &plan, &|e, c, t| open(e, c, t, want)).await {
                Ok(connected) => return Ok(connected),
                Err(e) => errors.push(e),
            }
        }
    }
    Err(combine(errors))
}

/// One host: TLS as planned, then (for `prefer`) plain if TLS failed.
async fn attempt<'a, T, F, Fut>(
    target: &'a Target,
    ep: &'a Endpoint,
    plan: &Plan,
    open: &F,
) -> Result<(Client, Notices, T)>
where
    F: Fn(&'a Endpoint, Config, Option<Connector>) -> Fut,
    Fut: Future<Output = std::result::Result<(Spawnable, T), Failure>>,
{
    let (config, passfile_note) = config_for(target, ep);
    let plain = |mut c: Config| {
        c.ssl_mode(PgSslMode::Disable);
        within(target, open(ep, c, None))
    };
    // libpq ignores sslmode on unix sockets, and the server refuses TLS
    // there: a local connection is already private.
    let socket = ep.host.starts_with('/');
    // `prefer`: why TLS failed, when the plain attempt after it fails too
    // (libpq reports both; the second alone hides a certificate problem).
    let mut tls_failed = None;
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
            let tls = within(target, open(ep, c, Some(connector.clone()))).await;
            match tls {
                // A wrong password is not sent again without TLS: the
                // server may have refused TLS, so that attempt was plain
                // already (outside testing: two failed logins per run,
                // and an error that spoke of TLS), and a plain one takes
                // the same password.
                Err(Failure::Pg(e)) if *fallback && !is_socket_error(&e) && !bad_password(&e) => {
                    let plain = plain(config.clone()).await;
                    // Only when the server answered the plain attempt: a
                    // server that is down fails both the same way.
                    if matches!(&plain, Err(Failure::Pg(p)) if p.as_db_error().is_some()) {
                        tls_failed = Some(Failure::Pg(e));
                    }
                    plain
                }
                other => other,
            }
        }
    };
    match result {
        Ok(((client, connection, notices), built)) => {
            tokio::spawn(async move {
                // The error, if any, reaches the user through the client:
                // its next call fails with "connection closed".
                let _ = connection.await;
            });
            Ok((client, notices, built))
        }
        Err(f) => {
            let err = explain(target, ep, f, passfile_note.as_deref());
            Err(match tls_failed {
                Some(t) => after_tls(err, explain(target, ep, t, None)),
                None => err,
            })
        }
    }
}

/// The server refused the password (`invalid_password`, 28P01).
fn bad_password(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::INVALID_PASSWORD)
}

/// One connection on our own socket: TCP (each address of the host, with
/// tokio-postgres' socket options) or the unix socket, then `connect_raw`
/// (TLS when `tls` is given), then `target_session_attrs`, as
/// tokio-postgres' own `connect` does them.
async fn raw(
    target: &Target,
    ep: &Endpoint,
    config: Config,
    tls: Option<Connector>,
    want: SessionAttrs,
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
            check_session_attrs(want, &client, &mut conn).await?;
            // Under TLS the raw session talks to the TLS stream.
            let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            Ok((spawnable((client, conn)), taken.unwrap_or(wire)))
        }
        None => {
            let (client, mut conn) = config
                .connect_raw(socket, NoTls)
                .await
                .map_err(Failure::Pg)?;
            check_session_attrs(want, &client, &mut conn).await?;
            Ok((spawnable((client, conn)), wire))
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

/// `target_session_attrs`, checked as libpq checks it: `read-write` and
/// `read-only` by `SHOW transaction_read_only`, `primary` and `standby`
/// by `pg_is_in_recovery()`, with the connection driven meanwhile.
async fn check_session_attrs<S, T>(
    want: SessionAttrs,
    client: &Client,
    conn: &mut tokio_postgres::Connection<S, T>,
) -> std::result::Result<(), Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use SessionAttrs as A;
    let sql = match want {
        A::Any | A::PreferStandby => return Ok(()),
        A::ReadWrite | A::ReadOnly => "SHOW transaction_read_only",
        A::Primary | A::Standby => "SELECT pg_catalog.pg_is_in_recovery()",
    };
    let show = client.simple_query(sql);
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
        (A::Primary, Some("t")) => Some("server is in hot standby mode"),
        (A::Standby, Some("f")) => Some("server is not in hot standby mode"),
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

/// Both kinds of connection erased to one spawnable future, which
/// forwards the server's notices (COPY's `ON_ERROR ignore` reports skipped
/// rows only that way; they are dropped when nobody listens).
type Spawnable = (
    Client,
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send>>,
    Notices,
);

/// `fut` under `connect_timeout`, which in libpq bounds the whole
/// attempt (authentication included), not only the TCP connect.
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
fn spawnable<R, S>((client, mut conn): (Client, tokio_postgres::Connection<R, S>)) -> Spawnable
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
    c.target_session_attrs(tokio_postgres::config::TargetSessionAttrs::Any)
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
