//! One chunk's rows on one server of a sharded load: one transaction,
//! one COPY per destination, and what the user is told when it fails.
//!
//! ```text
//! BEGIN; SELECT txid_current()
//! COPY leaf (cols) FROM STDIN ...      one per destination with rows
//! server count == rows sent? (fewer only when triggers may drop rows)
//! COMMIT   lost answer: txid_status on a new connection; a server that
//!          cannot be reached leaves the part in doubt, and says so
//! ```
//!
//! A refused row is placed in the input as the main path places it
//! (`input:line: ...; row: ...`, [`RowFailure`] in the report), with the
//! leaf and server that refused it: the server's `line N` counts lines of
//! that destination's COPY, which are not the chunk's.

use tokio_postgres::Client;

use super::{Dest, Routed, Shared};
use crate::batch::{tx_start, TxStart, BEGIN_SQL, TX_START_SQL};
use crate::chunk::Chunk;
use crate::error::{Error, ErrorKind, Result};
use crate::failure::RowFailure;
use crate::load::copy::copy_bytes;
use crate::load::row_error::show_row;
use crate::load::spec::record_of_error;

/// Why a server's part of a chunk did not commit.
pub(super) struct PartFailed {
    pub error: Error,
    /// The input row the server refused, when it named one.
    pub row: Option<RowFailure>,
    /// The COMMIT was sent and not answered, and the server could not be
    /// asked afterwards: the part may be committed.
    pub in_doubt: bool,
    /// The rows' fault (a row error of a COPY): with `--rejects`, the part
    /// is done again with its bad rows isolated.
    pub row_fault: bool,
}

impl From<Error> for PartFailed {
    fn from(error: Error) -> Self {
        PartFailed {
            error,
            row: None,
            in_doubt: false,
            row_fault: false,
        }
    }
}

/// What a server's part of a chunk did: rows per destination, and (with
/// `--rejects`) the rows it refused, placed in the input.
pub(super) struct Part {
    pub counts: Counts,
    pub rejects: Vec<crate::reject::Reject>,
}

/// Rows of one destination: (dest, rows sent, rows the server counted).
pub(super) type Counts = Vec<(usize, u64, u64)>;

/// One chunk's rows for server `i`: one transaction, one COPY per
/// destination with rows.
pub(super) async fn first_attempt(
    s: &Shared,
    client: &Client,
    i: usize,
    routed: &Routed,
    chunk: &Chunk,
) -> std::result::Result<Counts, PartFailed> {
    let mine: Vec<usize> = (0..s.dests.len())
        .filter(|&d| s.dests[d].server == i && !routed.bufs[d].is_empty())
        .collect();
    if mine.is_empty() {
        return Ok(Vec::new());
    }
    let label = &s.servers[i].label;
    let tx = begin(s, client, i, false)
        .await
        .map_err(|e| part_error(e, label, chunk))?;
    let mut counts = Vec::new();
    for d in mine {
        let data = routed.bufs[d].clone();
        let sent = routed.records[d].len() as u64;
        let dest = &s.dests[d];
        let got = match copy_bytes(client, &dest.sql, &s.framing, &data, s.message_bytes).await {
            Ok(n) => n,
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(refused(s, e, d, routed, chunk));
            }
        };
        if got > sent || (got < sent && !dest.may_skip) {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(Error::bug(format!(
                "{}: the server counted {got} rows of the {sent} sent",
                dest.label
            ))
            .into());
        }
        counts.push((d, sent, got));
    }
    if let Err(e) = record(s, client, i, routed, chunk, &[], &counts).await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(part_error(e, label, chunk).into());
    }
    commit_part(s, client, i, &tx, chunk, counts).await
}

/// `--resume`: server `i`'s ledger rows for its part of `chunk`, in the
/// part's open transaction (nothing without `--resume`).
pub(super) async fn record(
    s: &Shared,
    client: &Client,
    i: usize,
    routed: &Routed,
    chunk: &Chunk,
    rejected: &[(u64, u64)],
    counts: &Counts,
) -> Result<()> {
    let Some(r) = &s.resume else {
        return Ok(());
    };
    let rows = counts.iter().map(|c| c.2).sum();
    let label = &s.servers[i].label;
    super::resume::record_part(r, label, client, chunk, routed, rejected, rows).await
}

/// COMMITs server `i`'s part; a lost answer is settled by `txid_status`.
pub(super) async fn commit_part(
    s: &Shared,
    client: &Client,
    i: usize,
    tx: &TxStart,
    chunk: &Chunk,
    counts: Counts,
) -> std::result::Result<Counts, PartFailed> {
    let label = &s.servers[i].label;
    s.servers[i].witness.vouch_for(tx).await;
    if let Err(e) = client.batch_execute("COMMIT").await {
        // A deferred constraint refused a row at COMMIT: with `--rejects`
        // the part is done again, checked per statement (`begin`).
        let row_fault = crate::error::classify(&e) == crate::error::Class::Row;
        let e = Error::from(e);
        if e.kind() != ErrorKind::ConnectionLost {
            let mut failed = PartFailed::from(part_error(e, label, chunk));
            failed.row_fault = row_fault;
            return Err(failed);
        }
        return match committed(&s.servers[i].target, tx).await {
            Some(true) => Ok(counts),
            Some(false) => Err(part_error(e, label, chunk).into()),
            None => Err(PartFailed {
                error: in_doubt(e, label, tx.xid, chunk),
                row: None,
                in_doubt: true,
                row_fault: false,
            }),
        };
    }
    Ok(counts)
}

/// Opens the transaction on server `i` and returns its id (with the
/// marks of the server's life that tell a crash), to settle a COMMIT
/// whose answer is lost; its witness starts at once. `immediate` (a
/// part done again with its bad rows isolated): deferred constraints are
/// checked at the end of each statement, where isolation can find the
/// row (at COMMIT, it could not); the first attempt checks them at
/// COMMIT, as a load through the parent would.
pub(super) async fn begin(
    s: &Shared,
    client: &Client,
    i: usize,
    immediate: bool,
) -> Result<TxStart> {
    let sql = match immediate {
        true => format!("BEGIN; SET CONSTRAINTS ALL IMMEDIATE; {TX_START_SQL}"),
        false => BEGIN_SQL.to_owned(),
    };
    let tx = tx_start(&client.simple_query(&sql).await?)
        .ok_or_else(|| Error::bug("txid_current() returned no row"))?;
    s.servers[i].witness.start(tx);
    Ok(tx)
}

/// Whether `tx` committed, asked on a new connection (`crate::settle`,
/// which waits for a server in crash recovery and sees a crash that
/// handed the id out again); `None` when nobody can tell.
async fn committed(target: &crate::conn::Target, tx: &TxStart) -> Option<bool> {
    crate::settle::ask(target, tx).await
}

fn in_doubt(e: Error, label: &str, txid: i64, chunk: &Chunk) -> Error {
    Error::new(
        ErrorKind::ConnectionLost,
        format!(
            "shard {label}: the COMMIT of {} lines {}-{} was not answered ({}), \
             and the server cannot be asked whether it committed",
            chunk.input,
            chunk.first_line,
            chunk.last_line(),
            e.message()
        ),
    )
    .with_hint(format!(
        "once {label} is back, SELECT txid_status({txid}) on it says whether those rows \
         are there; the lines listed as done are committed on every server"
    ))
}

/// `e` with the server it came from in front of its message.
pub(super) fn name_server(e: Error, label: &str, hint: Option<&str>) -> Error {
    let hint = hint.or(e.hint()).map(str::to_owned);
    let mut out = Error::new(e.kind(), format!("shard {label}: {}", e.message()));
    if let Some(h) = hint {
        out = out.with_hint(h);
    }
    if let Some(s) = e.sqlstate() {
        out = out.with_sqlstate(s.to_owned());
    }
    out
}

/// An error of server `label` that names no row (a lost connection, a
/// failed COMMIT): the chunk's lines, and for a lost server what a retry
/// must not do.
fn part_error(e: Error, label: &str, chunk: &Chunk) -> Error {
    let lines = format!(
        "{} lines {}-{}: ",
        chunk.input,
        chunk.first_line,
        chunk.last_line()
    );
    let e = name_server(e, label, None);
    let mut out = Error::new(e.kind(), format!("{lines}{}", e.message()));
    if let Some(s) = e.sqlstate() {
        out = out.with_sqlstate(s.to_owned());
    }
    let hint = match e.kind() {
        ErrorKind::ConnectionLost => format!(
            "check that {label} is up; the lines listed as done are committed on every \
             server and each 'done on SERVER' line says what that server holds: load only \
             the rest (loading the whole input again would duplicate those rows)"
        ),
        _ => e.hint().unwrap_or_default().to_owned(),
    };
    if hint.is_empty() {
        out
    } else {
        out.with_hint(hint)
    }
}

/// A COPY into destination `d` failed: the row it names, placed in the
/// input, with the destination; or the server's error as it is.
fn refused(
    s: &Shared,
    e: tokio_postgres::Error,
    d: usize,
    routed: &Routed,
    chunk: &Chunk,
) -> PartFailed {
    let dest: &Dest = &s.dests[d];
    let label = &s.servers[dest.server].label;
    let Some(db) = e.as_db_error() else {
        return part_error(e.into(), label, chunk).into();
    };
    if crate::error::classify(&e) == crate::error::Class::Connection {
        return part_error(e.into(), label, chunk).into();
    }
    let index = record_of_error(&s.dialect, &dest.relname, &routed.bufs[d], &e)
        .and_then(|i| routed.records[d].get(i as usize).copied());
    let Some(index) = index else {
        let message = format!(
            "{}: in lines {}-{}: {}: {}",
            chunk.input,
            chunk.first_line,
            chunk.last_line(),
            dest.label,
            db.message()
        );
        let row_fault = crate::error::classify(&e) == crate::error::Class::Row;
        return PartFailed {
            row_fault,
            ..with_server_words(message, db, None, row_fault).into()
        };
    };
    let span = routed.spans[index as usize];
    let row_fault = crate::error::classify(&e) == crate::error::Class::Row;
    let row = RowFailure::new(chunk, index, &span, &dest.relname, &[], &e);
    let column = row
        .column
        .as_ref()
        .map(|c| format!("column {c}: "))
        .unwrap_or_default();
    let message = format!(
        "{}:{}: {}: {column}{}",
        row.input,
        row.line,
        dest.label,
        db.message()
    );
    let preview = show_row(&chunk.data[span.start..span.end]);
    PartFailed {
        error: with_server_words(message, db, Some(&preview), row_fault),
        row: Some(row),
        in_doubt: false,
        row_fault,
    }
}

fn with_server_words(
    mut message: String,
    db: &tokio_postgres::error::DbError,
    preview: Option<&str>,
    row_fault: bool,
) -> Error {
    if let Some(detail) = db.detail() {
        message.push_str(&format!(" ({detail})"));
    }
    if let Some(p) = preview {
        message.push_str(&format!("; row: {p}"));
    }
    // Not a row's fault: no row to fix. A missing column or table is
    // most likely a remote table that does not match its foreign table,
    // or a --shard-db that reaches another server.
    let what = match (row_fault, db.code().code()) {
        (true, _) => "fix the row",
        (false, "42703" | "42P01") => {
            "the shard refused the statement, not a row: check that its table has the \
             foreign table's columns and that --shard-db reaches the server the foreign \
             table names"
        }
        (false, _) => "the shard refused the statement, not a row: fix the cause",
    };
    let mut hint = format!(
        "{what}, then load the lines not listed as done (the summary lists them, \
         and per server what each committed)"
    );
    if let Some(h) = db.hint() {
        hint = format!("{h}; {hint}");
    }
    Error::new(ErrorKind::Server, message)
        .with_sqlstate(db.code().code())
        .with_hint(hint)
}
