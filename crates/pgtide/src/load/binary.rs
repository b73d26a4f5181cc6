//! `--method binary`: text/CSV records encoded client-side into binary
//! COPY, so the server skips its text input functions (seed 004: the
//! input and output functions are most of COPY's cost).
//!
//! Each record is split as COPY reads it (`copyfmt::fields`), and each
//! field is encoded by the column type's [`Encoder`]. The encoders only
//! encode what they can prove equal to the server's reading of the text;
//! for anything else they say [`Uncertain`](copyfmt::convert::Uncertain).
//! Such a record is neither rejected nor altered: the binary COPY ends
//! before it, and its original bytes and those of every record after it
//! are sent, in the same transaction, by the load's own text COPY
//! statement, so the server decides (and, if the value is bad, writes the
//! real error) and the rows still arrive in the input's order (outside
//! testing: sent after the others, such a row lost to a later duplicate
//! that COPY would have rejected). A record the splitter refuses, or with
//! the wrong number of fields, goes the same way.
//!
//! Encoders depend on the session (`TimeZone`, `integer_datetimes`), read
//! with `SHOW` on each loader's own connection. A column type without a
//! safe binary form, or a session whose `client_encoding` is not UTF8,
//! makes the whole load use text COPY (decided once, before loading, and
//! reported in the load's notes).

use bytes::Bytes;
use copyfmt::binary::{write_header, write_trailer, RowWriter};
use copyfmt::convert::{Encoder, Session};
use copyfmt::fields::{split_record, Fields};
use copyfmt::scan;
use futures_util::SinkExt;
use tokio_postgres::{Client, SimpleQueryMessage};

use super::copy::{copy_bytes, Framing};
use super::setup::is_utf8_name;
use super::spec::{record_of_error, LoaderSpec, MethodSetup};
use crate::batch::{Batch, BatchError};
use crate::error::Result;
use crate::failure::parse_context;

/// The settings of one session that the encoders depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFacts {
    /// `SHOW TimeZone`.
    pub timezone: String,
    /// `SHOW DateStyle`.
    pub datestyle: String,
    /// `SHOW integer_datetimes` is `on`.
    pub integer_datetimes: bool,
    /// `SHOW client_encoding`.
    pub client_encoding: String,
    /// `SHOW array_nulls` is `on`.
    pub array_nulls: bool,
}

impl SessionFacts {
    /// Reads them on `client` (one round trip).
    pub async fn read(client: &Client) -> std::result::Result<SessionFacts, tokio_postgres::Error> {
        let messages = client
            .simple_query(
                "SHOW TimeZone; SHOW DateStyle; SHOW integer_datetimes; SHOW client_encoding; \
                 SHOW array_nulls",
            )
            .await?;
        let mut values = messages.iter().filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or_default().to_owned()),
            _ => None,
        });
        let mut next = || values.next().unwrap_or_default();
        Ok(SessionFacts {
            timezone: next(),
            datestyle: next(),
            integer_datetimes: next() == "on",
            client_encoding: next(),
            array_nulls: next() == "on",
        })
    }

    /// What the encoders need. `YYYY-MM-DD`, the only date form they
    /// encode, is year-month-day in every DateStyle (a first field of 3+
    /// digits is a year), so DateStyle never turns them off.
    pub fn session(&self) -> Session {
        Session {
            timezone_utc: is_utc(&self.timezone),
            datestyle_iso_ymd: true,
            integer_datetimes: self.integer_datetimes,
            array_nulls: self.array_nulls,
        }
    }
}

/// Zone names that are UTC itself (no rules, no offset ever). Anything
/// else, fixed offsets included, is treated as "not known to be UTC",
/// which only makes more timestamptz values go to text COPY.
fn is_utc(zone: &str) -> bool {
    const UTC: &[&str] = &[
        "utc",
        "etc/utc",
        "uct",
        "etc/uct",
        "gmt",
        "etc/gmt",
        "universal",
        "etc/universal",
        "zulu",
        "etc/zulu",
    ];
    UTC.contains(&zone.to_ascii_lowercase().as_str())
}

/// The encoders for `setup`'s columns in `facts`' session, or why the
/// load must use text COPY.
fn encoders_for(
    setup: &MethodSetup,
    facts: &SessionFacts,
) -> std::result::Result<Vec<Encoder>, String> {
    if !is_utf8_name(&facts.client_encoding) {
        return Err(format!(
            "client_encoding is {}, not UTF8",
            facts.client_encoding
        ));
    }
    let session = facts.session();
    let mut encoders = Vec::with_capacity(setup.columns.len());
    let mut missing = Vec::new();
    for c in &setup.columns {
        match Encoder::for_type(c.type_oid, c.typmod, &session) {
            Some(e) => encoders.push(e),
            None => missing.push(format!("{} ({})", c.name, c.type_name)),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "no client-side binary encoding for column{} {}{}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            match facts.array_nulls {
                true => "",
                false => " (array_nulls is off: an unquoted NULL in an array is a string)",
            }
        ));
    }
    Ok(encoders)
}

/// Why this load cannot use binary COPY, if it cannot (checked on one of
/// the loaders' connections before loading).
pub(super) async fn fallback_reason(
    client: &Client,
    setup: &MethodSetup,
) -> Result<Option<String>> {
    if let Some(enc) = setup.encoding.as_deref().filter(|e| !is_utf8_name(e)) {
        return Ok(Some(format!("the input encoding is {enc}, not UTF-8")));
    }
    let facts = SessionFacts::read(client).await?;
    Ok(encoders_for(setup, &facts).err())
}

/// The encoders for this loader's session; `None` when it needs text COPY.
pub(super) async fn encoders(
    client: &Client,
    setup: &MethodSetup,
) -> std::result::Result<Option<Vec<Encoder>>, tokio_postgres::Error> {
    let facts = SessionFacts::read(client).await?;
    Ok(encoders_for(setup, &facts).ok())
}

/// `COPY t (cols) FROM STDIN (FORMAT binary)`.
pub fn binary_copy_sql(setup: &MethodSetup) -> String {
    format!(
        "COPY {} ({}) FROM STDIN (FORMAT binary)",
        setup.table,
        setup.column_list()
    )
}

/// Appends record `rec` as a binary tuple; false (and nothing appended)
/// when it must go by text COPY.
fn encode_record(
    spec: &LoaderSpec,
    encoders: &[Encoder],
    rec: &[u8],
    fields: &mut Fields,
    out: &mut Vec<u8>,
) -> bool {
    if split_record(&spec.dialect, &spec.setup.nulls, rec, fields).is_err()
        || fields.len() != encoders.len()
    {
        return false;
    }
    let Ok(ncols) = u16::try_from(encoders.len()) else {
        return false;
    };
    let mut row = RowWriter::begin_row(out, ncols);
    for (i, enc) in encoders.iter().enumerate() {
        match fields.get(i) {
            None => row.null(),
            Some(v) => {
                if row.field(|buf| enc.encode(v, buf)).is_err() {
                    return false; // dropping the writer removes the row
                }
            }
        }
    }
    row.finish().is_ok()
}

/// Loads `batch`: binary COPY of the records up to the first one the
/// encoders do not take, then text COPY of that record and all after it,
/// so that the rows reach the table in the input's order (which decides
/// which of two conflicting rows loads, and what a trigger sees);
/// returns the rows loaded.
pub(super) async fn load(
    client: &Client,
    spec: &LoaderSpec,
    encoders: &[Encoder],
    batch: &Batch,
) -> std::result::Result<u64, BatchError> {
    let data = &batch.data;
    let step = spec.message_bytes.max(1024);
    // The first record not encoded: (its index in the batch, its start).
    let mut cut: Option<(u64, usize)> = None;
    let result = async {
        let sink = client
            .copy_in::<_, Bytes>(&binary_copy_sql(&spec.setup))
            .await?;
        futures_util::pin_mut!(sink);
        let mut out = Vec::with_capacity(step + 4096);
        write_header(&mut out);
        let mut fields = Fields::new();
        for (i, span) in scan::records(&spec.dialect, data).enumerate() {
            let rec = &data[span.start..span.end];
            if !encode_record(spec, encoders, rec, &mut fields, &mut out) {
                cut = Some((i as u64, span.start));
                break;
            }
            if out.len() >= step {
                // Sent while the next piece is encoded: the client's
                // encoding overlaps the server's inserting.
                let piece = std::mem::replace(&mut out, Vec::with_capacity(step + 4096));
                sink.feed(Bytes::from(piece)).await?;
            }
        }
        write_trailer(&mut out);
        sink.feed(Bytes::from(out)).await?;
        sink.finish().await
    }
    .await;
    let binary_rows = result.map_err(|e| binary_error(spec, e))?;
    let Some((first, start)) = cut else {
        return Ok(binary_rows);
    };
    let text = data.slice(start..);
    let text_rows = copy_bytes(
        client,
        &spec.copy_sql,
        &Framing::default(),
        &text,
        spec.message_bytes,
    )
    .await
    .map_err(|e| {
        let record = record_of_error(&spec.dialect, &spec.relname, &text, &e).map(|k| first + k);
        BatchError {
            record,
            commit_unknown: false,
            error: e,
        }
    })?;
    Ok(binary_rows + text_rows)
}

/// A binary COPY error: its `line N` is the N-th tuple sent, which is the
/// N-th record of the batch (the records after the first one not encoded
/// go by text COPY).
fn binary_error(spec: &LoaderSpec, e: tokio_postgres::Error) -> BatchError {
    let record = e.as_db_error().and_then(|db| {
        let (line, _) = parse_context(db.where_()?, &spec.relname)?;
        line.checked_sub(1)
    });
    BatchError {
        record,
        commit_unknown: false,
        error: e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_zones() {
        assert!(is_utc("UTC"));
        assert!(is_utc("Etc/UTC"));
        assert!(!is_utc("America/New_York"));
        assert!(!is_utc("UTC+3"));
    }
}
