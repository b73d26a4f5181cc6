//! `--verify`, run once the rows are committed: the same digest
//! (`verify::digest`) of every table on the source's coordinator, which
//! still holds the copied snapshot, and on the target; a table that
//! differs is the copy's failure.
//!
//! The digest SQL and the session settings are `verify`'s; this file
//! pairs the tables, records both digests in the report, and words the
//! mismatch.

use tokio_postgres::Client;

use super::plan::Planned;
use super::range::side;
use super::report::{TableReport, Verified};
use super::verify;
use crate::error::{Error, ErrorKind};
use crate::snapshot;

/// `--verify`: digests on the snapshot's coordinator and on the target;
/// the first mismatch (naming every table that differs) as the failure.
pub(super) async fn check(
    snap: &snapshot::Snapshot,
    dst: &Client,
    plans: &[Planned],
    reports: &mut [TableReport],
    names_objects: bool,
) -> Option<Error> {
    let run = async {
        // reg* values hashed qualified on both sides, as they were copied.
        let session = match names_objects {
            true => format!("{}; {}", verify::SESSION, super::QUALIFIED_NAMES),
            false => verify::SESSION.to_owned(),
        };
        snap.coordinator().batch_execute(&session).await?;
        dst.batch_execute(&session).await?;
        let mut differ = Vec::new();
        for (p, r) in plans.iter().zip(reports.iter_mut()) {
            let s = verify::digest(
                snap.coordinator(),
                &format!("SELECT {} FROM {}", p.columns, p.source.rows_from()),
            )
            .await
            .map_err(|e| side("the source", e))?;
            let t = verify::digest(
                dst,
                &format!("SELECT {} FROM {}", p.columns, p.target.rows_from()),
            )
            .await
            .map_err(|e| side("the target", e))?;
            let matched = s == t;
            if !matched {
                differ.push(format!(
                    "{} ({} rows) -> {} ({} rows)",
                    p.source.name, s.rows, p.target.name, t.rows
                ));
            }
            r.verify = Some(Verified {
                source: s,
                target: t,
                matched,
            });
        }
        Ok::<_, Error>(differ)
    };
    match run.await {
        Err(e) => Some(e),
        Ok(d) if d.is_empty() => None,
        Ok(d) => Some(
            Error::new(
                ErrorKind::Output,
                format!(
                    "verify: the target differs from the source: {}",
                    d.join(", ")
                ),
            )
            .with_hint(
                "row count or row hash differ: rows already in the target (use --truncate), \
                 triggers or defaults on the target, or writes to it during the copy; values \
                 whose text differs between the servers (different column types) \
                 also count as different",
            ),
        ),
    }
}
