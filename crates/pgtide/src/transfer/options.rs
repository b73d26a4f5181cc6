//! What a copy is asked to do: `TransferOptions` and the checks that need
//! no server.
//!
//! Its own file because the CLI (`cmd/copy.rs`) and the bench build it,
//! and because rejecting a bad combination of flags before connecting to
//! either server is a job of its own.

use crate::error::{Error, Result};
use crate::ident::QualifiedName;

/// What to copy, and how.
#[derive(Debug, Clone)]
pub struct TransferOptions {
    /// Tables named with `--table` (SQL name rules).
    pub tables: Vec<QualifiedName>,
    /// Schemas whose every table is copied (`--schema`).
    pub schemas: Vec<String>,
    /// The target table's name when it differs (one table only).
    pub target_table: Option<QualifiedName>,
    /// Worker pairs (a source and a target connection each).
    pub workers: usize,
    /// Empty each target table first, in the transaction that loads it
    /// (then one transaction per table, with FREEZE where possible).
    pub truncate: bool,
    /// Compare row count and row hash on both servers afterwards.
    pub verify: bool,
    /// Text COPY even where binary would pass.
    pub force_text: bool,
    /// Create tables missing on the target from `pg_dump --schema-only`
    /// of the source (see [`create`](super::create)).
    pub create: bool,
    /// Before each range's `COMMIT`, make its transaction id safe from a
    /// crash on a connection of its own (see [`crate::witness`]), so that
    /// a `COMMIT` a crash cut off is settled. On by default; off only for
    /// tests of what happens without.
    pub witness: bool,
}

impl TransferOptions {
    /// Copies `tables` with one worker.
    pub fn new(tables: Vec<QualifiedName>) -> Self {
        TransferOptions {
            tables,
            schemas: Vec::new(),
            target_table: None,
            workers: 1,
            truncate: false,
            verify: false,
            force_text: false,
            create: false,
            witness: true,
        }
    }

    /// Rejects what cannot work, before connecting.
    pub fn validate(&self) -> Result<()> {
        if self.workers == 0 {
            return Err(Error::config("--workers must be at least 1"));
        }
        if self.tables.is_empty() && self.schemas.is_empty() {
            return Err(Error::config("nothing to copy")
                .with_hint("name tables with --table T (repeatable) or a schema with --schema S"));
        }
        if self.target_table.is_some() && (self.tables.len() != 1 || !self.schemas.is_empty()) {
            return Err(
                Error::config("--target-table needs exactly one --table").with_hint(
                    "without --target-table, each table goes to the same name on the target",
                ),
            );
        }
        if self.create && self.target_table.is_some() {
            return Err(Error::config("--create cannot be combined with --target-table")
                .with_hint("--create makes each table under its source name; create the renamed table first"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let t = |n: &str| QualifiedName::parse(n).unwrap();
        assert!(TransferOptions::new(vec![]).validate().is_err());
        let mut o = TransferOptions::new(vec![t("a"), t("b")]);
        o.target_table = Some(t("c"));
        assert!(o.validate().is_err());
        o.tables.pop();
        assert!(o.validate().is_ok());
    }
}
