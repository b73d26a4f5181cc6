//! What a copy did: `TransferReport` and its per-table `TableReport`s,
//! built from the plan and the committed jobs.
//!
//! Plain data (serialized by the CLI's `--json`): what each table was
//! copied as and why, how many ranges it had and which were committed,
//! merged into block spans (`blocks 0-767`, `whole table`), so that after
//! a failure the user sees exactly what is on the target.

use serde::Serialize;
use tokio_postgres::types::Oid;

use super::plan::Planned;
use super::range::{Done, Job};
use super::verify::Digest;
use crate::error::Error;

/// One table's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct TableReport {
    /// The source table as resolved.
    pub source: String,
    /// The target table as resolved.
    pub target: String,
    /// `binary` (passed through, nothing decoded) or `text`.
    pub format: &'static str,
    /// Why that format.
    pub format_reason: String,
    /// Whether the target was emptied by a committed `TRUNCATE` (in a
    /// loading transaction: its own, or that of a table it references).
    pub truncated: bool,
    /// Whether `COPY ... FREEZE` was used.
    pub freeze: bool,
    /// Why not, when `--truncate` was given and FREEZE was not used.
    pub freeze_reason: Option<String>,
    /// Rows committed on the target.
    pub rows: u64,
    /// Rows sent that the target's triggers dropped.
    pub rows_skipped_by_table: u64,
    /// COPY bytes passed.
    pub bytes: u64,
    /// Jobs (block ranges, or 1 for the whole table).
    pub ranges: usize,
    /// Jobs committed.
    pub ranges_committed: usize,
    /// The committed ranges, merged: `blocks 0-767`, `whole table`.
    pub committed: Vec<String>,
    /// Source and target digests, with `--verify`.
    pub verify: Option<Verified>,
    /// Created on the target by `--create` (pre-data before the rows).
    pub created: bool,
}

/// `--verify`'s finding for one table.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// On the source, in the copied snapshot.
    pub source: Digest,
    /// On the target, after the copy.
    pub target: Digest,
    /// Whether they are equal.
    pub matched: bool,
}

/// What `--create` did.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedReport {
    /// Tables created (source names, partitions included).
    pub tables: Vec<String>,
    /// `pg_dump --version` of the pg_dump used.
    pub pg_dump: String,
    /// Whether indexes, constraints and triggers (post-data) were added:
    /// not when the copy stopped before the end.
    pub post_data: bool,
    /// Sequences set to the source's values, `name = value`.
    pub sequences: Vec<String>,
}

/// What a copy did.
#[derive(Debug, Serialize)]
pub struct TransferReport {
    /// Per table, largest first (the order they were copied).
    pub tables: Vec<TableReport>,
    /// Rows committed on the target, over all tables.
    pub rows: u64,
    /// COPY bytes passed.
    pub bytes: u64,
    /// Wall time.
    pub seconds: f64,
    /// Worker pairs.
    pub workers: usize,
    /// `server_version` of the source.
    pub source_version: String,
    /// `server_version` of the target.
    pub target_version: String,
    /// Things the user should know.
    pub notes: Vec<String>,
    /// `--create`: the tables created on the target (partitions
    /// included), the pg_dump used, whether post-data was applied, and
    /// the sequences set (`name = value`).
    pub created: Option<CreatedReport>,
    /// Why the copy stopped early (the tables say what was committed);
    /// `None` when it is complete (and verified, with `--verify`).
    #[serde(skip)]
    pub failure: Option<Error>,
}

impl TransferReport {
    /// Rows per second over the wall time.
    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.seconds.max(1e-9)
    }
    /// MB (10^6) of COPY data per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

/// One report per planned table (plan order): `ranges[i]` jobs planned
/// for table `i`, `done` the committed jobs, `truncated[i]` whether a
/// committed `TRUNCATE` emptied table `i`, `created` the oids of the
/// tables `--create` made.
pub(super) fn tables(
    plans: &[Planned],
    ranges: &[usize],
    mut done: Vec<(Job, Done)>,
    truncated: &[bool],
    created: &[Oid],
) -> Vec<TableReport> {
    let mut reports: Vec<TableReport> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| TableReport {
            source: p.source.name.to_string(),
            target: p.target.name.to_string(),
            format: if p.binary { "binary" } else { "text" },
            format_reason: p.format_reason.clone(),
            truncated: truncated[i],
            freeze: p.freeze,
            freeze_reason: p.freeze_reason.clone(),
            rows: 0,
            rows_skipped_by_table: 0,
            bytes: 0,
            ranges: ranges[i],
            ranges_committed: 0,
            committed: Vec::new(),
            verify: None,
            created: created.contains(&p.source.oid),
        })
        .collect();
    done.sort_by_key(|(j, _)| (j.table, j.index));
    for (j, d) in &done {
        let r = &mut reports[j.table];
        r.rows += d.rows;
        r.rows_skipped_by_table += d.skipped;
        r.bytes += d.bytes;
        r.ranges_committed += 1;
    }
    for (i, r) in reports.iter_mut().enumerate() {
        let mine: Vec<&Job> = done
            .iter()
            .filter(|(j, _)| j.table == i)
            .map(|(j, _)| j)
            .collect();
        r.committed = merged(&mine);
    }
    reports
}

/// Committed jobs of one table (sorted) as merged block ranges.
fn merged(jobs: &[&Job]) -> Vec<String> {
    let mut spans: Vec<(u64, Option<u64>)> = Vec::new();
    for j in jobs {
        match spans.last_mut() {
            Some(last) if last.1 == Some(j.blocks.0) => last.1 = j.blocks.1,
            _ => spans.push(j.blocks),
        }
    }
    spans
        .into_iter()
        .map(|(a, b)| match (a, b) {
            (0, None) => "whole table".to_owned(),
            (a, None) => format!("blocks {a}-end"),
            (a, Some(b)) => format!("blocks {a}-{}", b - 1),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(index: usize, blocks: (u64, Option<u64>)) -> Job {
        Job {
            table: 0,
            index,
            blocks,
            begin: String::new(),
            source_sql: String::new(),
            target_sql: String::new(),
            extra_messages: 0,
            may_skip: false,
        }
    }

    #[test]
    fn committed_ranges_merge() {
        let a = job(0, (0, Some(8)));
        let b = job(1, (8, Some(16)));
        let d = job(3, (24, None));
        assert_eq!(merged(&[&a, &b, &d]), ["blocks 0-15", "blocks 24-end"]);
        assert_eq!(merged(&[&job(0, (0, None))]), ["whole table"]);
        assert!(merged(&[]).is_empty());
    }
}
