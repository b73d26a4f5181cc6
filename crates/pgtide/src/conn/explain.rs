//! A failed connection attempt, told to the user: which server, why, and
//! what to do (`hint:`), and one error for all the hosts tried.
//!
//! Kept apart from `connect`, which decides *how* to connect, because the
//! words for each failure (SQLSTATE, socket error, TLS, password file,
//! `target_session_attrs`, timeout) are most of the code and change for
//! other reasons than the attempt loop. A message names the host and port
//! ([`Endpoint::describe`]), never a password.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use super::{Endpoint, Target};
use crate::{Error, ErrorKind};

/// Why one attempt on one host failed.
pub(super) enum Failure {
    /// tokio-postgres' error: refused, authentication, TLS, its own socket.
    Pg(tokio_postgres::Error),
    /// Opening our own socket (`connect_wire`).
    Socket(std::io::Error),
    /// The server is not what `target_session_attrs` asks for.
    Refused(&'static str),
    /// `connect_timeout` expired.
    Timeout(Duration),
}

/// Whether `e` came from the socket: then `sslmode=prefer` does not
/// retry without TLS (the host is not reachable at all).
pub(super) fn is_socket_error(e: &tokio_postgres::Error) -> bool {
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
pub(super) fn explain(
    target: &Target,
    ep: &Endpoint,
    f: Failure,
    passfile_note: Option<&str>,
) -> Error {
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

/// `plain`, the failure of a plain connection tried after TLS failed
/// (`sslmode=prefer`), with `tls`, why TLS failed, in front, as libpq
/// reports both; the hints of both, since either may be the cause.
pub(super) fn after_tls(plain: Error, tls: Error) -> Error {
    let mut err = Error::new(
        plain.kind(),
        format!("{}; then, without TLS: {}", tls.message(), plain.message()),
    );
    if let Some(code) = plain.sqlstate() {
        err = err.with_sqlstate(code);
    }
    match (tls.hint(), plain.hint()) {
        (Some(t), Some(p)) if t == p => err.with_hint(t),
        (Some(t), Some(p)) => err.with_hint(format!("{t}; without TLS: {p}")),
        (Some(h), None) | (None, Some(h)) => err.with_hint(h),
        (None, None) => err,
    }
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
            // One code for the server's, the database's and the role's limit.
            "no connection slot is free under the limit the server named (max_connections, \
             or the CONNECTION LIMIT of the database or the role): use fewer workers, or \
             raise that limit"
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
pub(super) fn combine(mut errors: Vec<Error>) -> Error {
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
