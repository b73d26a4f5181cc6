//! `load --explain`: the load resolved as `run` resolves it
//! (`resolve.rs`), nothing written, and each decision said in one line.

use serde::Serialize;

use super::resolve::{every_column, find, resolve, resumed_create};
use super::{ledger, pool, sharded, upsert, LoadOptions, Method};
use crate::conn::Target;
use crate::copyopts::CopyFormat;
use crate::error::Result;

/// What a load would do, as `--explain` prints it: one line per decision.
#[derive(Debug, Serialize)]
pub struct Explain {
    /// `(what, decision)` pairs, in the order a reader needs them.
    pub lines: Vec<(String, String)>,
}

impl Explain {
    fn say(&mut self, what: &str, decision: impl Into<String>) {
        self.lines.push((what.to_owned(), decision.into()));
    }
}

/// `load --explain`: the load resolved as `run` resolves it (the same
/// checks, the method's fallbacks, the ledger read), nothing written.
pub async fn explain(target: &Target, opts: &LoadOptions) -> Result<Explain> {
    let opts = &*resumed_create(opts);
    let found = find(target, opts).await?;
    let opts = &*every_column(opts, &found)?;
    let (table, columns) = (&found.table, found.columns(opts)?);
    let (control, server_version) = (&found.control, &found.server_version);
    let mut x = Explain { lines: Vec::new() };
    x.say("server", format!("PostgreSQL {server_version}"));
    x.say(
        "table",
        format!(
            "{} ({}), columns {}",
            table.name,
            kind(table.kind),
            columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    if let Some(c) = found.created.as_ref().filter(|c| !c.exists) {
        x.say(
            "create",
            format!("{} (right before the first chunk)", c.sql),
        );
    }
    x.say(
        "inputs",
        format!("{} (format {})", opts.inputs.join(", "), opts.copy.format),
    );
    let mut on_client = false;
    if table.kind == 'p' {
        let mut leaves = Vec::new();
        let routed = match sharded::plan(target, opts, table, &columns).await? {
            _ if opts.on_conflict.is_some() || opts.single_transaction => {
                "through the parent table (--on-conflict and --single-transaction are not \
                 routed on the client)"
                    .to_owned()
            }
            Ok(plan) => {
                on_client = true;
                let (each, nodes) = plan.explain();
                leaves.extend(each.into_iter().map(|l| {
                    match (l.server, l.remote_table, l.reason) {
                        (Some(server), Some(remote), _) => {
                            format!("{} -> {remote} on {server}", l.partition)
                        }
                        (_, _, Some(why)) => {
                            format!("{} -> through the coordinator: {why}", l.partition)
                        }
                        _ => format!("{} -> {}", l.partition, l.route),
                    }
                }));
                leaves.extend(
                    nodes
                        .into_iter()
                        .map(|(node, why)| format!("{node} -> through the coordinator: {why}")),
                );
                format!(
                    "on the client: each row to its leaf ({} leaves), foreign leaves by COPY on \
                     their own servers",
                    plan.tree.leaves.len()
                )
            }
            Err(why) => format!("through the parent table: {why}"),
        };
        x.say("routing", routed);
        for leaf in leaves {
            x.say("leaf", leaf);
        }
    }
    // Explaining creates nothing: without a ledger yet, there is nothing
    // to skip, and the plan is resolved as for a fresh load (which would
    // create pgtide.ledger).
    let ledger_exists: bool = control
        .query_one("SELECT to_regclass('pgtide.ledger') IS NOT NULL", &[])
        .await?
        .get(0);
    let fresh;
    // Routed on the client, each server keeps its own entries: the
    // coordinator's ledger alone cannot say what is left.
    let resolving = match opts.resume {
        Some(_) if !ledger_exists || on_client => {
            let mut o = opts.clone();
            o.resume = None;
            fresh = o;
            &fresh
        }
        _ => opts,
    };
    let r = resolve(target, resolving, &found, false).await?;
    let mut spec = pool::loader_spec(&r.plan);
    let fallbacks = spec.prepare(control).await?;
    x.say("method", describe_method(spec.method, &fallbacks));
    x.say(
        "workers",
        format!(
            "{} connection{}, chunks of about {} bytes cut at row boundaries",
            opts.workers,
            if opts.workers == 1 { "" } else { "s" },
            opts.chunk_bytes
        ),
    );
    x.say(
        "transactions",
        match (opts.single_transaction, opts.rejects.is_some()) {
            (true, false) => {
                "one for the whole load, on one connection (--single-transaction): \
                     committed at the end only if every row loaded; any failure rolls \
                     everything back, the TRUNCATE and CREATE too"
            }
            (true, true) => {
                "one for the whole load, on one connection (--single-transaction): each \
                     chunk under a savepoint, bad rows set aside (--rejects) and the rest \
                     committed once at the end; a fatal error, Ctrl-C or --max-rejects \
                     exceeded rolls everything back, the TRUNCATE and CREATE too"
            }
            (false, _) => {
                "one per chunk (BEGIN, the rows, COMMIT): a failed chunk stops the load, \
                      and the summary lists the committed line ranges"
            }
        },
    );
    x.say(
        "truncate",
        match (&r.plan.truncate_sql, opts.truncate) {
            (Some(sql), _) if opts.single_transaction => {
                format!("{sql}, once every check passed, in the load's transaction")
            }
            (Some(sql), _) => {
                format!("{sql}, once every check passed, right before the first chunk")
            }
            (None, true) => "no: this run resumes a load recorded in the ledger".to_owned(),
            (None, false) => "no".to_owned(),
        },
    );
    x.say(
        "freeze",
        match &r.freeze {
            Ok(()) => "yes: COPY .. FREEZE, the table is emptied or created in the load's \
                       transaction, so the rows are written frozen (no VACUUM rewrite later)"
                .to_owned(),
            Err(why) => format!("no: {why}"),
        },
    );
    let deferrable = super::indexes::deferrable(control, table).await?;
    let saved = super::indexes::saved(control, Some(table.oid)).await?;
    let mut indexes = describe_indexes(opts, &deferrable, &saved);
    if opts.defer_constraints {
        let keys = super::constraints::deferrable(control, table).await?;
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        indexes.push_str(&match names.is_empty() {
            true => "; --defer-constraints: no PRIMARY KEY or UNIQUE constraint".to_owned(),
            false => format!(
                "; --defer-constraints: {} dropped too and added back after the load (index \
                 rebuilt, then ADD CONSTRAINT .. USING INDEX): duplicates are not refused row \
                 by row, they make the re-add fail at the end",
                names.join(", ")
            ),
        });
    }
    x.say("indexes", indexes);
    x.say("rejects", describe_rejects(opts, &r.plan, on_client));
    if let Some(u) = &r.upsert {
        x.say(
            "on conflict",
            format!(
                "({}) {}: each chunk COPYed into pg_temp.{}, merged in input order by: {}",
                u.key.join(", "),
                u.mode.name(),
                upsert::STAGE,
                u.merge_sql
            ),
        );
    }
    match (&r.resume, opts.resume) {
        (_, Some(_)) if on_client => x.say(
            "resume",
            "each server's part of a chunk records its byte range in that server's \
             pgtide.ledger, in the part's transaction; a resumed run sends each server only \
             the rows its ledger (or the coordinator's whole-range entries) does not hold",
        ),
        (Some(resume), _) => x.say("resume", describe_resume(resume)),
        (None, Some(_)) => x.say(
            "resume",
            "no ledger entry yet (pgtide.ledger is created by the first --resume load): \
             everything is loaded, each chunk recorded in the ledger",
        ),
        (None, None) => {}
    }
    Ok(x)
}

fn kind(relkind: char) -> &'static str {
    match relkind {
        'p' => "partitioned",
        'f' => "foreign",
        'v' => "view",
        _ => "table",
    }
}

fn describe_method(method: Method, fallbacks: &[String]) -> String {
    let what = match method {
        Method::Copy => "COPY .. FROM STDIN, the input bytes passed through",
        Method::Binary => "binary COPY, rows encoded on the client",
        Method::Pipeline => "prepared INSERT per row, pipelined",
        Method::Values => "multi-row INSERT .. VALUES",
        Method::Insert => "prepared INSERT per row, each awaited",
    };
    let mut out = format!("{} ({what})", method.name());
    for f in fallbacks {
        out.push_str("; ");
        out.push_str(f);
    }
    out
}

fn describe_indexes(
    opts: &LoadOptions,
    deferrable: &[String],
    saved: &[super::indexes::Saved],
) -> String {
    let saved_names: Vec<&str> = saved.iter().map(|s| s.name.as_str()).collect();
    let mut out = match (opts.defer_indexes, deferrable.is_empty()) {
        (false, true) => "kept: maintained as rows arrive (no non-unique secondary index to defer)"
            .to_owned(),
        (false, false) => format!(
            "kept: maintained as rows arrive (--defer-indexes would drop {} and build them after the load)",
            deferrable.join(", ")
        ),
        (true, true) => "--defer-indexes: no non-unique secondary index to drop".to_owned(),
        (true, false) => format!(
            "deferred: {} dropped right before the first chunk (definitions saved in {}), \
             built again after the load by up to {} connections; unique indexes are kept",
            deferrable.join(", "),
            super::indexes::SAVED_TABLE,
            opts.workers
        ),
    };
    if !saved_names.is_empty() {
        out.push_str(&format!(
            "; saved by an interrupted load, still to build: {} ({})",
            saved_names.join(", "),
            if opts.defer_indexes {
                "built after this load"
            } else {
                "`pgtide ledger restore-indexes`"
            }
        ));
    }
    out
}

fn describe_rejects(opts: &LoadOptions, plan: &pool::Plan, on_client: bool) -> String {
    let Some(path) = &opts.rejects else {
        return "none: the first bad row stops the load (--rejects FILE to set bad rows aside)"
            .to_owned();
    };
    let mut out = format!("to {} (reasons in {}.log)", path.display(), path.display());
    let on_error = plan.on_error_sql.as_ref().filter(|_| opts.resume.is_none());
    out.push_str(match (on_error, plan.format) {
        _ if on_client => {
            "; a server's part of a chunk refused for a row is done again in that \
             server's transaction, its bad rows isolated"
        }
        _ if opts.single_transaction => {
            "; each chunk under a savepoint of the load's one transaction, a failed one \
             isolated under savepoints (no ON_ERROR: its first attempt runs on the wire); \
             kept until the one COMMIT, and a rollback keeps the rows found bad in the file"
        }
        (Some(_), _) => "; bad values skipped by the server in one pass (ON_ERROR ignore)",
        (None, CopyFormat::Binary) => "; a failed chunk is retried in ranges",
        (None, _) => {
            "; a failed chunk is retried in ranges (ON_ERROR needs PostgreSQL 17+, \
                      --method copy, and no --resume or --on-conflict)"
        }
    });
    if let Some(m) = opts.max_rejects {
        out.push_str(&format!("; stops after {m}"));
    }
    out
}

fn describe_resume(r: &ledger::Resume) -> String {
    if r.entries == 0 {
        return "no ledger entry for these inputs: everything is loaded, each chunk recorded \
                in pgtide.ledger"
            .to_owned();
    }
    let mut parts = Vec::new();
    for (input, (_, ranges)) in &r.inputs {
        let bytes: u64 = ranges.iter().map(|(a, b)| b - a).sum();
        parts.push(format!("{input}: {bytes} bytes in {} ranges", ranges.len()));
    }
    format!(
        "skips what earlier runs committed ({} ledger entries): {}",
        r.entries,
        parts.join("; ")
    )
}
