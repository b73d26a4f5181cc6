//! The one error type of the library.
//!
//! Follows rust-csv and rust-postgres: a boxed private payload behind public
//! questions (`kind()`, `sqlstate()`, `hint()`). A bad *row* is never an
//! `Error`; it is a reject (see the `reject` module). An
//! `Error` ends the operation, and its `hint` tells the user what to do next.

use std::fmt;

/// What went wrong, in the terms a user acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The user's options or connection string are invalid.
    Config,
    /// A server could not be reached or refused the connection.
    Connect,
    /// A connection was lost while working (SQLSTATE class 08, the session
    /// terminated by 57P01-57P03, or a broken socket: [`classify`] says
    /// [`Class::Connection`]); the only kind that is worth retrying as such.
    ConnectionLost,
    /// The server rejected a statement (the SQLSTATE says why).
    Server,
    /// An input file could not be read or is not in the declared format.
    Input,
    /// An output file could not be written.
    Output,
    /// The embedded or throwaway PostgreSQL server could not be managed.
    Cluster,
    /// More rows were rejected than `--max-rejects` allows.
    RejectLimit,
    /// The user asked the work to stop (SIGINT, SIGTERM): what was
    /// committed is listed, nothing after it was sent.
    Interrupted,
    /// An internal invariant broke (for example rows read != loaded +
    /// rejected). Always a bug in pgtide.
    Bug,
}

struct Inner {
    kind: ErrorKind,
    message: String,
    hint: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    sqlstate: Option<String>,
}

/// An error that ends an operation, with a hint for the user.
pub struct Error(Box<Inner>);

/// Shorthand used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a one-line `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error(Box::new(Inner {
            kind,
            message: message.into(),
            hint: None,
            source: None,
            sqlstate: None,
        }))
    }

    /// Adds what the user should do about it.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.0.hint = Some(hint.into());
        self
    }

    /// Adds the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.0.source = Some(Box::new(source));
        self
    }

    /// Adds a SQLSTATE code reported by the server.
    pub fn with_sqlstate(mut self, code: impl Into<String>) -> Self {
        self.0.sqlstate = Some(code.into());
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The one-line message, without the cause chain.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// What the user should do about it, when we know.
    pub fn hint(&self) -> Option<&str> {
        self.0.hint.as_deref()
    }

    /// Whether writing to a pipe whose reader went away caused this
    /// (`pgtide export -o - | head`).
    pub fn is_broken_pipe(&self) -> bool {
        let io = self
            .0
            .source
            .as_deref()
            .and_then(|s| s.downcast_ref::<std::io::Error>());
        io.is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// The server's SQLSTATE, when the server reported the error.
    pub fn sqlstate(&self) -> Option<&str> {
        self.0.sqlstate.as_deref()
    }

    /// Shorthand for an `Input` error.
    pub fn input(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Input, message)
    }

    /// Shorthand for a `Config` error.
    pub fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config, message)
    }

    /// Shorthand for a `Bug` error.
    pub fn bug(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Bug, message)
            .with_hint("this is a bug in pgtide; please report it with the command line")
    }

    /// Wraps an I/O error on `path` while reading input.
    pub fn read(path: &str, err: std::io::Error) -> Self {
        Error::new(ErrorKind::Input, format!("cannot read {path}: {err}")).with_source(err)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.0.kind)
            .field("message", &self.0.message)
            .field("hint", &self.0.hint)
            .field("sqlstate", &self.0.sqlstate)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source.as_deref().map(|e| e as _)
    }
}

impl From<tokio_postgres::Error> for Error {
    /// Classifies by SQLSTATE and socket state, never by message text:
    /// the kind agrees with [`classify`].
    fn from(err: tokio_postgres::Error) -> Self {
        if let Some(db) = err.as_db_error() {
            let code = db.code().code().to_owned();
            let kind = if classify(&err) == Class::Connection {
                ErrorKind::ConnectionLost
            } else {
                ErrorKind::Server
            };
            let mut message = db.message().to_owned();
            if let Some(detail) = db.detail() {
                message.push_str(&format!(" (detail: {detail})"));
            }
            if let Some(context) = db.where_() {
                message.push_str(&format!(" (context: {context})"));
            }
            let hint = db.hint().map(str::to_owned);
            let mut e = Error::new(kind, message).with_sqlstate(code);
            if let Some(h) = hint {
                e = e.with_hint(h);
            }
            return e.with_source(err);
        }
        if err.is_closed() {
            return Error::new(
                ErrorKind::ConnectionLost,
                format!("connection to the server was lost: {err}"),
            )
            .with_hint("check that the server is up and reachable, then retry")
            .with_source(err);
        }
        let message = match std::error::Error::source(&err) {
            Some(cause) => format!("{err}: {cause}"),
            None => err.to_string(),
        };
        Error::new(ErrorKind::Connect, message).with_source(err)
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Error::new(ErrorKind::Input, err.to_string()).with_source(err)
    }
}

/// What a failed statement means for the rows it carried, decided by the
/// SQLSTATE class only (never by message text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Something about the rows (bad value, constraint, trigger): isolate
    /// the row and reject it.
    Row,
    /// Serialization failure or deadlock (class 40), or a lock wait that
    /// timed out (55P03): nothing is wrong with the rows, retry them.
    Transient,
    /// The connection broke (class 08, or no SQLSTATE at all): reconnect
    /// and retry, unless the commit's fate is unknown.
    Connection,
    /// The statement itself cannot work (permissions, resources, server
    /// shutting down, internal error): stop.
    Fatal,
}

/// The SQLSTATE of the `--resume` ledger's refusal (`load/ledger_claim.rs`,
/// `CLAIM_SQL`): another run committed an overlapping range of the same
/// input into the same table. Not a row's fault and not worth a retry.
pub const LEDGER_CLAIMED: &str = "PT001";

/// Whether `err` is an ERROR (the session lives on) that a COPY raised on
/// one column of one of its rows (`COPY t, line N, column c`): a field's
/// data, not the framing of the messages (an unexpected message during
/// COPY is 08P01 at ERROR with the row's line too, but no column).
/// The severity is read unlocalized (`lc_messages` translates the other).
fn row_of_copy(err: &tokio_postgres::Error) -> bool {
    err.as_db_error().is_some_and(|d| {
        d.parsed_severity() == Some(tokio_postgres::error::Severity::Error)
            && d.where_().is_some_and(|w| {
                w.starts_with("COPY ") && w.contains(", line ") && w.contains(", column ")
            })
    })
}

/// Whether `err` is an ERROR raised while one bound parameter of an
/// INSERT was read (`unnamed portal parameter $k`, one line of context):
/// that row's value, as a COPY's field is for [`row_of_copy`].
fn row_of_parameter(err: &tokio_postgres::Error) -> bool {
    err.as_db_error().is_some_and(|d| {
        d.parsed_severity() == Some(tokio_postgres::error::Severity::Error)
            && d.where_()
                .is_some_and(|w| !w.contains('\n') && w.contains("parameter $"))
    })
}

/// How the server's message for a row refused by a row-level security
/// policy begins (`ExecWithCheckOptions`).
const RLS_REFUSAL: &str = "new row violates row-level security policy";

/// Classifies a server error. Classes 22 (data), 23 (integrity), P0
/// (PL/pgSQL RAISE), 54 (row too big) and any code a trigger may raise
/// are row errors; the classes below are about the session or server.
pub fn classify(err: &tokio_postgres::Error) -> Class {
    let Some(code) = err.code() else {
        return Class::Connection;
    };
    // The session was terminated (pg_terminate_backend, shutdown): the
    // connection is gone even though the server said why.
    if matches!(code.code(), "57P01" | "57P02" | "57P03") {
        return Class::Connection;
    }
    // lock_not_available (lock_timeout, NOWAIT): another session held a
    // lock too long. Class 55 is otherwise left to rows (a trigger may
    // raise it), but this one must never send good rows to the rejects.
    if code.code() == "55P03" {
        return Class::Transient;
    }
    // Another run committed these rows' range (`load/ledger.rs`).
    if code.code() == LEDGER_CLAIMED {
        return Class::Fatal;
    }
    // A binary COPY row whose field is shorter than its length says
    // ("insufficient data left in message") is reported as a protocol
    // violation, at ERROR with the row's line: the session goes on and
    // the fault is the row's. (Outside testing: taken for a lost
    // connection, the chunk was retried for a minute, then the load
    // stopped without rejecting the row.)
    if code.code() == "08P01" && row_of_copy(err) {
        return Class::Row;
    }
    // A row that a row-level security policy refuses (its WITH CHECK) is
    // the row's fault, though its code is that of a missing privilege,
    // which stops the load. Told apart by the server's message (English
    // messages: under another `lc_messages` it stops the load).
    if code.code() == "42501"
        && err
            .as_db_error()
            .is_some_and(|d| d.message().starts_with(RLS_REFUSAL))
    {
        return Class::Row;
    }
    // A field's receive or input function that reports a bad value with a
    // code of a class that otherwise stops the load (array_recv's and
    // record_recv's element type: datatype_mismatch 42804; jsonb's version
    // byte and extension types that use elog: internal_error XX000): the
    // value is the row's fault when the server was reading that one field
    // (outside testing: one bad binary row stopped a `--rejects` load).
    // Not a missing privilege or corrupt data, which no row causes.
    if matches!(code.code(), "42804" | "XX000") && (row_of_copy(err) || row_of_parameter(err)) {
        return Class::Row;
    }
    match &code.code()[..2] {
        "08" => Class::Connection,
        "40" => Class::Transient,
        // insufficient resources, operator intervention, system error,
        // internal error, invalid transaction state, syntax or access rule,
        // feature not supported, invalid catalog/schema name, config file
        "53" | "57" | "58" | "XX" | "25" | "42" | "0A" | "3D" | "3F" | "F0" => Class::Fatal,
        _ => Class::Row,
    }
}
