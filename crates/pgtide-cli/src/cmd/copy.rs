//! `pgtide copy`: flags -> `TransferOptions` -> `pgtide::transfer::run`
//! -> summary.

use std::sync::Arc;

use pgtide::conn::Target;
use pgtide::ident::QualifiedName;
use pgtide::progress::Progress;
use pgtide::transfer::{self, TransferOptions, TransferReport};

use crate::args::CopyArgs;
use crate::progress::{Display, Work};
use crate::render::{self, thousands};

/// Runs the copy and returns the exit code.
pub async fn run(a: CopyArgs) -> pgtide::Result<u8> {
    let opts = options(&a)?;
    let from = Target::parse(&a.from)?;
    let to = Target::parse(&a.to)?;
    let progress = Arc::new(Progress::new(opts.workers));
    super::stop_on_signal(progress.clone());
    let shown = Display::start(
        a.progress,
        a.quiet || a.json,
        Work::Export,
        progress.clone(),
    );
    let report = transfer::run(&from, &to, &opts, progress).await;
    shown.finish();
    let report = report?;
    summary(&report, a.json);
    match &report.failure {
        None => Ok(crate::EXIT_OK),
        Some(e) => {
            render::error(e);
            Ok(match e.kind() {
                pgtide::ErrorKind::Interrupted => crate::EXIT_INTERRUPTED,
                _ => crate::EXIT_ERROR,
            })
        }
    }
}

/// What was typed -> library options (no I/O here).
fn options(a: &CopyArgs) -> pgtide::Result<TransferOptions> {
    let tables = a
        .table
        .iter()
        .map(|t| QualifiedName::parse(t))
        .collect::<pgtide::Result<Vec<_>>>()?;
    let mut o = TransferOptions::new(tables);
    o.schemas = a
        .schema
        .iter()
        .map(|s| pgtide::ident::parse_name(s))
        .collect::<pgtide::Result<Vec<_>>>()?;
    o.target_table = a
        .target_table
        .as_deref()
        .map(QualifiedName::parse)
        .transpose()?;
    o.workers = a.workers;
    o.truncate = a.truncate;
    o.verify = a.verify;
    o.force_text = a.text;
    o.create = a.create;
    o.validate()?;
    Ok(o)
}

/// One line for the whole copy, one per table (format and why, FREEZE,
/// verify), and on failure the committed ranges; or a JSON object.
fn summary(r: &TransferReport, json: bool) {
    if json {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        v["rows_per_sec"] = serde_json::json!(r.rows_per_sec());
        v["mb_per_sec"] = serde_json::json!(r.mb_per_sec());
        v["ok"] = serde_json::json!(r.failure.is_none());
        v["error"] = serde_json::json!(r.failure.as_ref().map(|e| e.message().to_owned()));
        outln!("{v}");
        return;
    }
    outln!(
        "copied {} rows in {} table{} in {:.2} s ({:.0} rows/s, {:.1} MB/s, {} worker{}, \
         PostgreSQL {} -> {})",
        thousands(r.rows),
        r.tables.len(),
        if r.tables.len() == 1 { "" } else { "s" },
        r.seconds,
        r.rows_per_sec(),
        r.mb_per_sec(),
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        r.source_version,
        r.target_version,
    );
    for t in &r.tables {
        let into = if t.source == t.target {
            String::new()
        } else {
            format!(" -> {}", t.target)
        };
        let mut line = format!(
            "  {}{into}: {} rows, {} ({})",
            t.source,
            thousands(t.rows),
            t.format,
            t.format_reason
        );
        if t.truncated {
            match &t.freeze_reason {
                None if t.freeze => line.push_str("; truncated, COPY FREEZE"),
                Some(why) => line.push_str(&format!("; truncated, no FREEZE: {why}")),
                None => line.push_str("; truncated"),
            }
        }
        if t.created {
            line.push_str("; created");
        }
        if t.rows_skipped_by_table > 0 {
            line.push_str(&format!(
                "; skipped by the table: {}",
                thousands(t.rows_skipped_by_table)
            ));
        }
        if let Some(v) = &t.verify {
            line.push_str(if v.matched {
                "; verified"
            } else {
                "; VERIFY MISMATCH"
            });
            if !v.matched {
                line.push_str(&format!(
                    " (source {} rows, hash {}; target {} rows, hash {})",
                    v.source.rows, v.source.hash, v.target.rows, v.target.hash
                ));
            }
        }
        outln!("{line}");
        if r.failure.is_some() && t.ranges_committed < t.ranges {
            outln!(
                "    committed {} of {} ranges: {}",
                t.ranges_committed,
                t.ranges,
                if t.committed.is_empty() {
                    "nothing".to_owned()
                } else {
                    t.committed.join(", ")
                }
            );
        }
    }
    if let Some(c) = &r.created {
        outln!(
            "created {} table{} on the target with {}{}",
            c.tables.len(),
            if c.tables.len() == 1 { "" } else { "s" },
            c.pg_dump,
            if c.post_data {
                "; indexes, constraints and triggers added after the rows"
            } else {
                "; indexes, constraints and triggers NOT added (see the error): the tables \
                 exist now, and a new run's --create leaves them as they are"
            }
        );
        if !c.sequences.is_empty() {
            outln!("  sequences set: {}", c.sequences.join(", "));
        }
    }
    for note in &r.notes {
        outln!("note: {note}");
    }
}
