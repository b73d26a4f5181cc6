//! `--resume`: the ledger of committed byte ranges, `pgtide.ledger` in the
//! target database.
//!
//! Every chunk (and, while bad rows are isolated, every committed part of
//! one) inserts one ledger row **in its own transaction**, after its rows
//! and before `COMMIT` (the loader's `run`, used by `Loader::load` and by
//! isolation's attempts, calls `record` for a loader that carries a
//! [`Mark`]). So a range is in the ledger exactly
//! when its rows are committed: a kill, a lost connection or a crash at
//! any moment leaves both or neither, and a `COMMIT` whose answer was lost
//! is settled by `txid_status` for both at once. After a crash, when the
//! transaction's id may have been handed out again, the row itself is the
//! witness ([`Written`], `settle.rs`).
//!
//! A row names the input's identity (canonical path, size on disk, a
//! SHA-256 of its first and last MiB, or of the whole file with
//! `--resume=strict`), the table (name and OID), the format options, and
//! the byte range `[first_byte, end_byte)` of the decompressed input. A
//! resumed run reads the committed ranges of each input ([`prepare`]),
//! refuses a file, table or options that differ (saying what differs), and
//! its reader skips every record inside them, cutting the rest at record
//! boundaries again: record boundaries are the same whatever the chunk
//! size, so a resume may use another `--workers` or `--chunk-bytes`.
//! Rejected rows are not in the ledger: the reject file's log says which
//! records were rejected, and a resumed run skips those (`reject`).

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use bytes::Bytes;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::batch::Batch;
use crate::error::{Error, Result};

#[path = "ledger_claim.rs"]
mod claim;
pub(super) use claim::guard;
#[path = "ledger_entries.rs"]
mod entries;
#[path = "ledger_refusals.rs"]
mod refusals;
#[path = "ledger_unfinished.rs"]
mod unfinished;
pub use entries::{forget, list, routed_servers, Entry};
pub use refusals::stdin_refused;
use refusals::{listed_twice, mismatch};
pub(super) use unfinished::unfinished;

/// The schema and table of the ledger.
pub const LEDGER_TABLE: &str = "pgtide.ledger";

/// Created on first use. `run` names the pgtide run that committed the
/// range (as in the reject log); `rows` is the server's row count.
/// `shard` is NULL for a range whose every row is committed (the ordinary
/// path, and `--route coordinator`); for a load routed on the client it
/// names the server whose rows of the range are committed (the entry is
/// on that server, in its transaction; see `sharded/resume.rs`), or, on
/// the coordinator, `@SERVER` for a marker saying that SERVER's ledger
/// holds entries of this input. Added to ledgers made before it existed
/// (checked first, so that no lock is taken when it is there).
const CREATE_SQL: &str = "
CREATE SCHEMA IF NOT EXISTS pgtide;
CREATE TABLE IF NOT EXISTS pgtide.ledger (
    input        text        NOT NULL,
    size         bigint      NOT NULL,
    fingerprint  text        NOT NULL,
    table_name   text        NOT NULL,
    table_oid    oid         NOT NULL,
    options      text        NOT NULL,
    first_byte   bigint      NOT NULL,
    end_byte     bigint      NOT NULL,
    rows         bigint      NOT NULL,
    run          text        NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS ledger_input_end ON pgtide.ledger (input, end_byte);
DROP INDEX IF EXISTS pgtide.ledger_input;
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                   WHERE attrelid = 'pgtide.ledger'::regclass AND attname = 'shard'
                     AND NOT attisdropped) THEN
        ALTER TABLE pgtide.ledger ADD COLUMN shard text;
    END IF;
END $$;
COMMENT ON TABLE pgtide.ledger IS
    'pgtide load --resume: byte ranges committed, one row per chunk, written in the chunk''s transaction';
";

/// Bytes at each end of a file that `--resume` fingerprints.
const EDGE: u64 = 1 << 20;

/// How an input is recognised on resume (`--resume[=strict]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeMode {
    /// Path, size and a SHA-256 of the first and last MiB.
    Edges,
    /// Path, size and a SHA-256 of the whole file (read once more).
    Strict,
}

/// One input as the ledger knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Canonical path.
    pub path: String,
    /// Size on disk (compressed size for gzip/zstd).
    pub size: i64,
    /// `edges:<sha256>` or `full:<sha256>`.
    pub fingerprint: String,
    /// The table, as resolved (`schema.name`).
    pub table: String,
    /// The table's OID: a table dropped and made again is another table.
    pub table_oid: u32,
    /// The format options (JSON), compared field by field.
    pub options: String,
}

impl Resume {
    /// The same, for the table `--create` made now (OID `oid`): the OID
    /// planned before was of a table made and rolled back to read its
    /// shape, and a resumed run would take rows written under it for
    /// rows of a table dropped and created again since.
    pub fn for_created_table(&self, oid: u32) -> Resume {
        let inputs = self.inputs.iter().map(|(name, (id, ranges))| {
            let id = Identity {
                table_oid: oid,
                ..(**id).clone()
            };
            (name.clone(), (Arc::new(id), ranges.clone()))
        });
        Resume {
            run: self.run.clone(),
            inputs: inputs.collect(),
            entries: self.entries,
            rejected: self.rejected.clone(),
            notes: self.notes.clone(),
        }
    }
}

/// Byte ranges `[first, end)` of a decompressed input, sorted, merged.
pub type Ranges = Vec<(u64, u64)>;

/// What a resumed run skips, per input as named on the command line.
#[derive(Debug, Default)]
pub struct Resume {
    /// This run's name, written to the ledger and the reject log.
    pub run: Arc<str>,
    /// Per input (as given): its identity and its committed ranges,
    /// sorted and merged.
    pub inputs: BTreeMap<String, (Arc<Identity>, Ranges)>,
    /// Earlier runs' ledger rows found (0: a fresh load).
    pub entries: u64,
    /// Records earlier runs rejected (byte offsets per input as named),
    /// from the reject file's log (`reject::earlier`).
    pub rejected: BTreeMap<String, std::collections::BTreeSet<u64>>,
    /// Notes for the summary.
    pub notes: Vec<String>,
}

impl Resume {
    /// The committed ranges of `input`.
    pub fn committed(&self, input: &str) -> &[(u64, u64)] {
        self.inputs.get(input).map_or(&[], |(_, r)| r.as_slice())
    }

    /// The mark a worker puts on its loader for `chunk`.
    pub fn mark(&self, input: &str, origin: &Bytes, first_byte: u64) -> Option<Mark> {
        let (id, _) = self.inputs.get(input)?;
        Some(Mark {
            id: id.clone(),
            run: self.run.clone(),
            origin: origin.clone(),
            first_byte,
        })
    }
}

/// A loader's ledger entry to come: the chunk being loaded (`origin`, its
/// offset `first_byte` in the decompressed input). Each batch committed
/// while the mark is on records the bytes it holds (a batch is always
/// `origin` or a slice of it, as isolation sends).
#[derive(Debug, Clone)]
pub struct Mark {
    id: Arc<Identity>,
    run: Arc<str>,
    origin: Bytes,
    first_byte: u64,
}

/// The ledger row a transaction wrote: it is in the table exactly when
/// that transaction committed, so it settles a `COMMIT` whose answer was
/// lost in a crash. Asked by its key and by its `xmin` (the writer's id):
/// a range can be in the ledger twice in one run (a chunk's record set
/// aside by `ON_ERROR`, then retried alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    id: Arc<Identity>,
    run: Arc<str>,
    range: (u64, u64),
}

/// Whether the row `w` names is in the ledger, and whether the statement's
/// snapshot sees transaction `xid` as over: when it does not, the answer
/// about the row proves nothing yet (a transaction shows as committed in
/// `txid_status` a moment before new snapshots see its rows).
pub(crate) async fn witnessed(
    client: &Client,
    w: &Written,
    xid: i64,
) -> std::result::Result<(bool, bool), tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT txid_visible_in_snapshot($1, txid_current_snapshot()), \
             EXISTS (SELECT FROM pgtide.ledger WHERE input = $2 AND run = $3 \
                     AND first_byte = $4 AND end_byte = $5 \
                     AND xmin::text::int8 = $1 % 4294967296)",
            &[
                &xid,
                &w.id.path,
                &&*w.run,
                &(w.range.0 as i64),
                &(w.range.1 as i64),
            ],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// Inserts the ledger row for `batch` in the open transaction (called by
/// `Loader::load` after the batch's statements, before `COMMIT`) and
/// returns it. A batch that is not inside the mark's chunk cannot be
/// placed: nothing is recorded and the error returned (a bug) stops the
/// load.
pub(super) async fn record(
    client: &Client,
    mark: &Mark,
    batch: &Batch,
    rows: u64,
) -> std::result::Result<std::result::Result<Written, Error>, tokio_postgres::Error> {
    let base = mark.origin.as_ptr() as usize;
    let at = (batch.data.as_ptr() as usize).wrapping_sub(base);
    let len = batch.data.len();
    if len == 0 || at > mark.origin.len() || mark.origin.len() - at < len {
        return Ok(Err(Error::bug(format!(
            "{}: a batch of {} records is not inside its chunk; it is committed but not \
             in the ledger, so --resume would load it again",
            mark.id.path, batch.records
        ))));
    }
    let first = mark.first_byte + at as u64;
    let range = (first, first + len as u64);
    insert(client, &mark.id, &mark.run, range, rows, None).await?;
    Ok(Ok(Written {
        id: mark.id.clone(),
        run: mark.run.clone(),
        range,
    }))
}

/// Inserts one ledger row in the open transaction: `range` of `id`'s
/// input committed, `rows` rows, by run `run`; `shard` as the column says
/// (`None`: every row of the range). Fails (the transaction with it) when
/// another run committed an overlapping range (`ledger_claim.rs`).
pub(super) async fn insert(
    client: &Client,
    id: &Identity,
    run: &str,
    range: (u64, u64),
    rows: u64,
    shard: Option<&str>,
) -> std::result::Result<(), tokio_postgres::Error> {
    let claim = serde_json::json!({
        "input": id.path,
        "size": id.size,
        "fingerprint": id.fingerprint,
        "table_name": id.table,
        "table_oid": id.table_oid,
        "options": id.options,
        "first_byte": range.0,
        "end_byte": range.1,
        "rows": rows,
        "run": run,
        "shard": shard,
    })
    .to_string();
    claim::insert(client, &claim).await
}

/// Whether the ledger can be used as it is (its table with the `shard`
/// column older pgtide versions lacked), and whether it has its index on
/// `(input, end_byte)`, which keeps each chunk's claim a few index entries
/// long however many chunks the input has.
const STATE_SQL: &str = "SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute \
                WHERE attrelid = to_regclass('pgtide.ledger') AND attname = 'shard' \
                  AND NOT attisdropped), \
    to_regclass('pgtide.ledger_input_end') IS NOT NULL";

/// Where a user who may not create the ledger learns how it is shared.
const GRANT_HINT: &str = "--resume keeps its ledger in schema pgtide of the target database: \
    the first --resume load needs CREATE on the database; for other users, GRANT USAGE ON \
    SCHEMA pgtide and SELECT, INSERT, DELETE ON pgtide.ledger (see the README)";

/// Creates the ledger, or what an older one lacks, if needed (serialised
/// by an advisory lock, so two first loads at once do not collide). A
/// complete ledger is left alone: its DDL needs its owner, and a user a
/// DBA granted its rows to (see the README) is not; such a user works
/// with an older ledger without the index too (claims read more of it).
pub async fn ensure(client: &Client) -> Result<()> {
    let state = client
        .query_one(STATE_SQL, &[])
        .await
        .map_err(|e| Error::from(e).with_hint(GRANT_HINT))?;
    let (usable, indexed): (bool, bool) = (state.get(0), state.get(1));
    if usable && indexed {
        return Ok(());
    }
    let created = client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(hashtext('pgtide.ledger')); {CREATE_SQL} COMMIT"
        ))
        .await;
    match created {
        Ok(()) => Ok(()),
        Err(e) if usable && e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
            // The batch's transaction is aborted: end it.
            client.batch_execute("ROLLBACK").await?;
            Ok(())
        }
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(Error::from(e).with_hint(GRANT_HINT))
        }
    }
}

/// The format options as the ledger compares them.
pub fn describe_options(copy: &crate::copyopts::CopyOptions, columns: &[String]) -> String {
    let byte = |b: Option<u8>| b.map(|b| (b as char).to_string());
    serde_json::json!({
        "format": copy.format.to_string(),
        "header": format!("{:?}", copy.header).to_lowercase(),
        "delimiter": byte(copy.delimiter),
        "quote": byte(copy.quote),
        "escape": byte(copy.escape),
        "null": copy.null,
        "force_null": copy.force_null,
        "force_not_null": copy.force_not_null,
        "encoding": copy.encoding,
        "columns": columns,
    })
    .to_string()
}

/// Reads the ledger for `inputs` (names as given) loading into `table`:
/// each input's identity is checked against what the ledger recorded
/// (another file, table or options: an error saying what differs), and
/// its committed ranges are returned. Creates the ledger on first use.
/// An input begun with rows routed on the client (per-server entries,
/// `sharded/resume.rs`) is refused: this path cannot send each server
/// only its missing rows.
pub async fn prepare(
    client: &Client,
    inputs: &[String],
    mode: ResumeMode,
    table: (&str, u32),
    options: &str,
) -> Result<Resume> {
    let (resume, _) = prepare_on(&[(client, None)], inputs, mode, table, options).await?;
    let paths: Vec<String> = resume
        .inputs
        .values()
        .map(|(id, _)| id.path.clone())
        .collect();
    let routed = client
        .query(
            "SELECT DISTINCT input, shard FROM pgtide.ledger \
             WHERE input = ANY($1) AND shard IS NOT NULL ORDER BY 1, 2",
            &[&paths],
        )
        .await?;
    if let Some(r) = routed.first() {
        let input: String = r.get(0);
        return Err(Error::config(format!(
            "--resume: {input} was begun with its rows routed on the client: the ledger \
             ({LEDGER_TABLE}) holds per-server entries for it, which this run (through the \
             coordinator's parent table) cannot honour without loading rows twice"
        ))
        .with_hint(
            "resume it as it began: without --route coordinator, --on-conflict, --truncate \
             or --single-transaction (`pgtide ledger list` on the coordinator names the \
             servers holding entries)",
        ));
    }
    Ok(resume)
}

/// [`prepare`] over several ledgers, each with the entries it reads: `None`
/// the whole-range entries, `Some(server)` that server's (client-routed
/// loads). The identity is computed once and checked against every entry
/// of every ledger for the input, whatever its scope. Returns the resume
/// (its ranges: the first ledger's) and each ledger's ranges per input.
pub async fn prepare_on(
    ledgers: &[(&Client, Option<&str>)],
    inputs: &[String],
    mode: ResumeMode,
    table: (&str, u32),
    options: &str,
) -> Result<(Resume, Vec<BTreeMap<String, Ranges>>)> {
    for (client, _) in ledgers {
        ensure(client).await?;
    }
    let mut out = Resume {
        run: run_name().into(),
        ..Resume::default()
    };
    let mut each = vec![BTreeMap::new(); ledgers.len()];
    let mut listed: BTreeMap<String, &str> = BTreeMap::new();
    for input in inputs {
        if crate::source::read_once(input) {
            return Err(stdin_refused());
        }
        let path = std::fs::canonicalize(input)
            .map_err(|e| Error::read(input, e))?
            .to_string_lossy()
            .into_owned();
        if let Some(before) = listed.insert(path.clone(), input) {
            return Err(listed_twice(before, input, &path));
        }
        let mut rows = Vec::new();
        for (l, (client, scope)) in ledgers.iter().enumerate() {
            let found = client
                .query(
                    "SELECT size, fingerprint, table_name, table_oid, options, first_byte, \
                     end_byte, shard IS NOT DISTINCT FROM $2 \
                     FROM pgtide.ledger WHERE input = $1 ORDER BY first_byte",
                    &[&path, scope],
                )
                .await?;
            rows.extend(found.into_iter().map(|r| (l, r)));
        }
        let stored_full = rows
            .iter()
            .any(|(_, r)| r.get::<_, String>(1).starts_with("full:"));
        let full = mode == ResumeMode::Strict || stored_full;
        if mode == ResumeMode::Strict && !rows.is_empty() && !stored_full {
            out.notes.push(format!(
                "{input}: the ledger's entries were written without --resume=strict; the file \
                 was recognised by its size and first and last MiB"
            ));
        }
        let (size, fingerprint) =
            fingerprint(input, full && (rows.is_empty() || stored_full)).await?;
        let id = Identity {
            path,
            size,
            fingerprint,
            table: table.0.to_owned(),
            table_oid: table.1,
            options: options.to_owned(),
        };
        let mut ranges = vec![Vec::new(); ledgers.len()];
        for (l, r) in &rows {
            let stored = Identity {
                path: id.path.clone(),
                size: r.get(0),
                fingerprint: r.get(1),
                table: r.get(2),
                table_oid: r.get(3),
                options: r.get(4),
            };
            if stored != id {
                return Err(mismatch(input, &stored, &id));
            }
            if r.get::<_, bool>(7) {
                out.entries += 1;
                ranges[*l].push((r.get::<_, i64>(5) as u64, r.get::<_, i64>(6) as u64));
            }
        }
        let mut ranges = ranges.into_iter().map(merge);
        let first = ranges.next().unwrap_or_default();
        for (l, r) in ranges.enumerate() {
            each[l + 1].insert(input.clone(), r);
        }
        each[0].insert(input.clone(), first.clone());
        out.inputs.insert(input.clone(), (Arc::new(id), first));
    }
    Ok((out, each))
}

/// Sorted ranges merged where they touch or overlap.
fn merge(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// This run's name: start time and process id.
fn run_name() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.{:03}-{}",
        now.as_secs(),
        now.subsec_millis(),
        std::process::id()
    )
}

/// Size on disk and fingerprint of `input`: SHA-256 over the size and the
/// first and last MiB, or over the whole file (`full`).
async fn fingerprint(input: &str, full: bool) -> Result<(i64, String)> {
    let name = input.to_owned();
    let work = move || -> std::io::Result<(i64, String)> {
        let mut f = std::fs::File::open(&name)?;
        let size = f.metadata()?.len();
        let mut h = openssl::sha::Sha256::new();
        h.update(&size.to_le_bytes());
        let mut buf = vec![0u8; 256 * 1024];
        let mut hash_range = |f: &mut std::fs::File, from: u64, len: u64| -> std::io::Result<()> {
            f.seek(SeekFrom::Start(from))?;
            let mut left = len;
            while left > 0 {
                let want = buf.len().min(left as usize);
                let n = f.read(&mut buf[..want])?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
                left -= n as u64;
            }
            Ok(())
        };
        let kind = if full || size <= 2 * EDGE {
            hash_range(&mut f, 0, size)?;
            if full {
                "full"
            } else {
                "edges"
            }
        } else {
            hash_range(&mut f, 0, EDGE)?;
            hash_range(&mut f, size - EDGE, EDGE)?;
            "edges"
        };
        let hex: String = h.finish().iter().map(|b| format!("{b:02x}")).collect();
        Ok((size as i64, format!("{kind}:{hex}")))
    };
    let input = input.to_owned();
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::bug(format!("the fingerprint task failed: {e}")))?
        .map_err(|e| Error::read(&input, e))
}
