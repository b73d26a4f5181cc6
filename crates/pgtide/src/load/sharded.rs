//! Loading a partitioned target with rows routed on the client.
//!
//! ```text
//! reader thread: Source -> Chunker (as every load)
//!   -> bounded channel (depth 1)
//!   -> N workers, each with one connection per server (the coordinator
//!      and every foreign server holding a leaf):
//!        split each record (copyfmt::fields), route it (Plan::route),
//!        append its original bytes to its leaf's buffer;
//!        per server, concurrently: BEGIN; one COPY per leaf with rows
//!        (columns by name: partitions may order or name them otherwise);
//!        COMMIT
//! ```
//!
//! Commit model: one transaction per chunk per server. A chunk is done
//! when every server committed its part; the report lists done chunks as
//! line ranges, and per server (`Report::shards`) the chunks whose part
//! it committed, so nothing committed is unaccounted for when a server
//! refuses a row or goes away (a COMMIT it never answered is settled by
//! `txid_status`, or listed as in doubt). Rows the client cannot route go
//! through the coordinator's parent table in the coordinator's
//! transaction. `choose` says whether a load is routed here, and its
//! plan; `worker` takes chunks; `route` cuts one per destination;
//! `rejects` loads a server's part (isolating bad rows with `--rejects`)
//! through `server`, which sends it and words its failures.
//!
//! `--rejects`: a server's part refused for a row is done again with its
//! bad rows isolated, in one transaction still (`rejects.rs`).
//!
//! `--resume`: each server's part records its byte range in that
//! server's ledger, in the part's transaction, and a resumed run sends
//! each server only the rows it lacks (`resume.rs`).
//!
//! Not here (the load falls back to the ordinary path, see
//! `choose::eligible`): `--truncate`, `HEADER MATCH`, methods other
//! than COPY, a non-UTF-8 input or server encoding.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use copyfmt::fields::NullSpec;
use copyfmt::scan::Dialect;

mod choose;
mod rejects;
mod resume;
mod route;
mod server;
mod worker;

use super::copy::Framing;
use super::{LineRange, LoadOptions, Method, Report, RowFailure, ShardReport};
use crate::catalog::{Column, Table};
use crate::chunk::{Chunk, Chunker};
use crate::conn::Target;
use crate::copyopts::CopyFormat;
use crate::error::{Error, Result};
use crate::progress::{Counts, Progress};
use crate::reject::gate::Gate;
use crate::reject::RejectFile;
use crate::shard::{remote, remote_check, LeafRoute, Plan};
use crate::source::Source;
use route::{merge, Routed};
use server::name_server;
use worker::worker;

pub use choose::{eligible, plan, Route};

/// One COPY destination: a leaf, or the coordinator's parent table.
struct Dest {
    label: String,
    server: usize,
    sql: String,
    /// The relation as its server names it in `COPY rel, line N`.
    relname: String,
    /// Its server may count fewer rows than were sent, on purpose (a
    /// trigger that drops rows): those are skipped by the table; else a
    /// shortfall is a bug (`invariants`).
    may_skip: bool,
}

/// The label of server 0.
const COORDINATOR: &str = "coordinator";

/// A server: the coordinator (index 0) or a foreign server.
struct Server {
    label: String,
    target: Target,
    /// Makes each part's transaction id safe from a crash before its
    /// `COMMIT` ([`crate::witness`]).
    witness: Arc<crate::witness::Witness>,
}

impl Server {
    fn new(label: String, target: &Target) -> Server {
        Server {
            label,
            target: target.clone(),
            witness: crate::witness::Witness::new(target.clone()),
        }
    }
}

struct Shared {
    plan: Plan,
    dests: Vec<Dest>,
    /// Leaf index -> dest index.
    leaf_dest: Vec<usize>,
    coordinator_dest: usize,
    servers: Vec<Server>,
    dialect: Dialect,
    nulls: NullSpec,
    framing: Framing,
    message_bytes: usize,
    ledger: Mutex<Ledger>,
    progress: Arc<Progress>,
    /// `--rejects`: rows a server refuses are isolated and written here
    /// (in input order: every chunk submits once, by its `seq`).
    isolate: bool,
    max_rejects: Option<u64>,
    rejects: Mutex<Option<RejectFile>>,
    /// `--resume`: what earlier runs committed, per server.
    resume: Option<resume::ShardResume>,
}

impl Shared {
    /// `--max-rejects`' gate, the main path's: says yes while one more
    /// rejected row is allowed (every row refused, on the client or by a
    /// server, passes through it once), one per chunk or server's part.
    fn gate(&self) -> Gate {
        Gate::new(self.progress.clone(), self.max_rejects)
    }
}

/// What the shard workers record besides the counts (those are the
/// load's `Progress`, its one ledger of counts, as on the main path).
#[derive(Default)]
struct Ledger {
    chunks: u64,
    per_dest: BTreeMap<usize, u64>,
    committed: Vec<LineRange>,
    /// Per server: the chunks whose part on it committed (an empty part
    /// counts), so that a failure leaves every committed row accounted.
    per_server: Vec<Vec<LineRange>>,
    /// Per server: the chunks whose part's COMMIT got no answer.
    in_doubt: Vec<Vec<LineRange>>,
    partial: Vec<String>,
    failure: Option<Error>,
    failed_row: Option<RowFailure>,
}

/// Loads `opts.inputs` into the partitioned `table` along `plan`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    target: &Target,
    opts: &LoadOptions,
    table: &Table,
    columns: &[&Column],
    plan: Plan,
    server_version: String,
    progress: Arc<Progress>,
) -> Result<Report> {
    let start = Instant::now();
    let major = server_version
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let dialect = opts.copy.dialect(major);
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let list = |cols: &[&str]| {
        cols.iter()
            .map(|c| crate::ident::quote(c))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut servers = vec![Server::new(COORDINATOR.into(), target)];
    let mut dests = vec![Dest {
        label: format!("{} (through the coordinator)", table.name),
        server: 0,
        sql: opts
            .copy
            .copy_from_sql(&table.name.quoted(), Some(&list(&names))),
        relname: table.name.name.clone(),
        may_skip: plan.coordinator_may_skip(),
    }];
    let mut leaf_dest = Vec::with_capacity(plan.routes.len());
    for (leaf, route) in plan.tree.leaves.iter().zip(&plan.routes) {
        match route {
            LeafRoute::Coordinator(_) => leaf_dest.push(0),
            LeafRoute::Local => {
                dests.push(Dest {
                    label: leaf.name.to_string(),
                    server: 0,
                    sql: opts
                        .copy
                        .copy_from_sql(&leaf.name.quoted(), Some(&list(&names))),
                    relname: leaf.name.name.clone(),
                    may_skip: plan.local_may_skip,
                });
                leaf_dest.push(dests.len() - 1);
            }
            LeafRoute::Remote(r) => {
                let server = match servers.iter().position(|s| s.label == r.server) {
                    Some(i) => i,
                    None => {
                        servers.push(Server::new(r.server.clone(), &r.target));
                        servers.len() - 1
                    }
                };
                // FORCE_NULL/FORCE_NOT_NULL name columns: the remote names.
                let mut copy = opts.copy.clone();
                let rename = |v: &[String]| -> Vec<String> {
                    v.iter()
                        .map(|n| {
                            names
                                .iter()
                                .position(|c| c == n)
                                .map_or(n.clone(), |i| r.columns[i].clone())
                        })
                        .collect()
                };
                copy.force_null = rename(&opts.copy.force_null);
                copy.force_not_null = rename(&opts.copy.force_not_null);
                let (tbl, cols) = remote::remote_copy_target(r);
                dests.push(Dest {
                    label: format!("{} on {} ({})", leaf.name, r.server, r.table),
                    server,
                    sql: copy.copy_from_sql(&tbl, Some(&cols)),
                    relname: r.table.name.clone(),
                    may_skip: r.may_skip,
                });
                leaf_dest.push(dests.len() - 1);
            }
        }
    }
    let mut nulls = NullSpec::for_dialect(&dialect);
    if let Some(null) = &opts.copy.null {
        nulls.null = null.as_bytes().to_vec();
    }
    nulls.force_null = names
        .iter()
        .map(|c| opts.copy.force_null.iter().any(|f| f == c))
        .collect();
    nulls.force_not_null = names
        .iter()
        .map(|c| opts.copy.force_not_null.iter().any(|f| f == c))
        .collect();
    let framing = if opts.copy.format == CopyFormat::Binary {
        let mut h = Vec::new();
        copyfmt::binary::write_header(&mut h);
        Framing {
            prefix: Some(Bytes::from(h)),
            binary_trailer: true,
        }
    } else {
        Framing::default()
    };
    // Every worker's connection to every server is made before anything
    // is read or sent: a server that does not answer then means nothing
    // was loaded (a worker connecting later could meet a server lost
    // mid-load, and its error would say so wrongly).
    let mut all_clients = Vec::new();
    for _ in 0..opts.workers.max(1) {
        let mut clients = Vec::new();
        for s in &servers {
            let client = s
                .target
                .connect()
                .await
                .map_err(|e| unreachable(e, &s.label))?;
            // Values are read as the coordinator would read them.
            remote_check::apply_settings(&client, &plan.settings)
                .await
                .map_err(|e| {
                    Error::config(format!(
                        "{}: cannot take the coordinator's settings ({}): {}",
                        s.label,
                        remote_check::SET_ON_SHARDS.join(", "),
                        e.message()
                    ))
                    .with_hint("--route coordinator loads through the coordinator")
                })?;
            clients.push(client);
        }
        all_clients.push(clients);
    }
    let first_clients = &all_clients[0];
    // After every server answered: a load that cannot start leaves no
    // reject file behind.
    let resume = resume::prepare(opts, table, columns, &servers, first_clients).await?;
    let reject_file = match (&opts.rejects, &resume) {
        (Some(path), Some(r)) => Some(match &r.earlier {
            Some(earlier) => RejectFile::append(path, earlier, r.resume.run.clone())?,
            None => {
                RejectFile::create(path, opts.overwrite_rejects)?.resumed_by(r.resume.run.clone())
            }
        }),
        (Some(path), None) => Some(RejectFile::create(path, opts.overwrite_rejects)?),
        (None, _) => None,
    };
    let n_servers = servers.len();
    let shared = Arc::new(Shared {
        plan,
        dests,
        leaf_dest,
        coordinator_dest: 0,
        servers,
        dialect: dialect.clone(),
        nulls,
        framing,
        message_bytes: opts.message_bytes,
        ledger: Mutex::new(Ledger {
            per_server: vec![Vec::new(); n_servers],
            in_doubt: vec![Vec::new(); n_servers],
            ..Ledger::default()
        }),
        progress: progress.clone(),
        isolate: opts.rejects.is_some(),
        max_rejects: opts.max_rejects,
        rejects: Mutex::new(reject_file),
        resume,
    });
    let (tx, rx) = async_channel::bounded::<Chunk>(1);
    let reader = {
        let inputs = opts.inputs.clone();
        let header = opts.copy.header;
        let chunk_bytes = opts.chunk_bytes;
        let max_record = opts.max_record_bytes;
        let progress = progress.clone();
        let shared = shared.clone();
        let binary = opts.copy.format == CopyFormat::Binary;
        tokio::task::spawn_blocking(move || -> Result<u64> {
            let mut seq = 0;
            let mut rows = 0;
            let mut framed = false;
            for input in &inputs {
                let source = Source::open_counted(input, Some(progress.clone()))?;
                let mut chunker = Chunker::new(
                    input,
                    source.reader,
                    dialect.clone(),
                    header,
                    chunk_bytes,
                    seq,
                )
                .max_record(max_record);
                while let Some(chunk) = chunker.next_chunk()? {
                    if progress.stop_requested() {
                        // Lines from here on are not loaded: the load must
                        // say so (exit 130), never end as a success.
                        return Err(super::pool::interrupted());
                    }
                    if !framed {
                        // The reject file starts as the first input does
                        // (its header record, or the binary header).
                        framed = true;
                        if let Some(f) = shared.rejects.lock().unwrap().as_mut() {
                            f.set_framing(chunker.header().cloned(), binary);
                        }
                    }
                    rows += chunk.records;
                    Progress::add(&progress.rows_read, chunk.records);
                    if tx.send_blocking(chunk).is_err() {
                        return Ok(rows);
                    }
                }
                seq = chunker.next_seq();
            }
            Ok(rows)
        })
    };
    let mut workers = Vec::new();
    for (w, clients) in all_clients.into_iter().enumerate() {
        let shared = shared.clone();
        let rx = rx.clone();
        workers.push(tokio::spawn(async move {
            if let Err(e) = worker(&shared, rx.clone(), w, clients).await {
                rx.close();
                let mut l = shared.ledger.lock().unwrap();
                l.failure.get_or_insert(e);
            }
        }));
    }
    drop(rx);
    for w in workers {
        w.await
            .map_err(|e| Error::bug(format!("a shard worker panicked: {e}")))?;
    }
    match reader.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            shared.ledger.lock().unwrap().failure.get_or_insert(e);
        }
        Err(e) => return Err(Error::bug(format!("the reader panicked: {e}"))),
    };
    let counts = Counts::of(&progress);
    let mut ledger = std::mem::take(&mut *shared.ledger.lock().unwrap());
    ledger
        .committed
        .sort_by(|a, b| (&a.input, a.first).cmp(&(&b.input, b.first)));
    let mut notes = vec![format!(
        "rows routed on the client to {} leaves of {} (--route coordinator to let the server route)",
        shared.plan.tree.leaves.len(),
        table.name
    )];
    for (d, rows) in &ledger.per_dest {
        notes.push(format!("{}: {rows} rows", shared.dests[*d].label));
    }
    notes.extend(ledger.partial.iter().cloned());
    let shards = std::mem::take(&mut ledger.per_server)
        .into_iter()
        .enumerate()
        .map(|(i, mut ranges)| {
            ranges.sort_by(|a, b| (&a.input, a.first).cmp(&(&b.input, b.first)));
            ShardReport {
                in_doubt: std::mem::take(&mut ledger.in_doubt[i]),
                server: shared.servers[i].label.clone(),
                rows: ledger
                    .per_dest
                    .iter()
                    .filter(|(d, _)| shared.dests[**d].server == i)
                    .map(|(_, n)| n)
                    .sum(),
                committed: merge(ranges),
            }
        })
        .collect();
    let file = shared.rejects.lock().unwrap().take();
    if let Some(Err(e)) = file.map(|f| f.finish_counted(counts.rejected)) {
        ledger.failure.get_or_insert(e);
    }
    let mut report = Report {
        rows_read: counts.read,
        rows_loaded: counts.loaded,
        rows_in_doubt: counts.in_doubt,
        rows_rejected: counts.rejected,
        rows_skipped_by_table: counts.skipped_by_table,
        rows_resumed: counts.resumed,
        rejects_path: opts.rejects.as_ref().map(|p| p.display().to_string()),
        bytes: counts.bytes,
        seconds: start.elapsed().as_secs_f64(),
        workers: opts.workers,
        method: opts.method.name(),
        method_requested: opts.method.name(),
        server_version,
        chunks: ledger.chunks,
        table: table.name.to_string(),
        committed: merge(ledger.committed),
        notes,
        failure: ledger.failure.take(),
        failed_row: ledger.failed_row.take(),
        upsert: None,
        shards,
        single_transaction: false,
        freeze: super::Freeze {
            used: false,
            reason: Some(
                "rows routed on the client commit per chunk and server; COPY FREEZE needs \
                 one transaction that emptied the table"
                    .to_owned(),
            ),
        },
    };
    if let Some(r) = &shared.resume {
        let resuming = r.resume.entries > 0;
        super::resume_notes(&r.resume, opts, resuming, &mut report);
    }
    if report.failure.is_none() {
        report.failure = super::invariants::check_rows(
            report.rows_read,
            report.rows_loaded,
            report.rows_rejected,
            report.rows_skipped_by_table,
        )
        .err();
    }
    Ok(report)
}

/// A server that does not answer before the load starts: nothing was
/// sent anywhere.
fn unreachable(e: Error, label: &str) -> Error {
    if label == COORDINATOR {
        return e;
    }
    let hint = format!(
        "nothing was loaded; start {label} or point --shard-db {label}=CONNINFO at it, \
         or load through the coordinator with --route coordinator"
    );
    let hint = match e.hint() {
        Some(h) => format!("{}; {hint}", h.trim_end_matches('.')),
        None => hint,
    };
    name_server(e, label, Some(&hint))
}
