//! `pgtide ledger list|forget|restore-indexes`: the `--resume` ledger
//! (pgtide.ledger) and the indexes `--defer-indexes` saved.

use pgtide::load::ledger;

use crate::args::{LedgerAction, LedgerArgs};

/// Runs the action and returns the exit code.
pub async fn run(a: LedgerArgs) -> pgtide::Result<u8> {
    let target = super::target_or_embedded(a.db.as_deref()).await?;
    let client = target.connect().await?;
    match a.action {
        LedgerAction::List { json } => {
            let entries = ledger::list(&client).await?;
            if json {
                let text = serde_json::to_string_pretty(&entries)
                    .map_err(|e| pgtide::Error::bug(e.to_string()))?;
                super::write_stdout(format!("{text}\n").as_bytes());
            } else if entries.is_empty() {
                outln!("the ledger ({}) is empty", ledger::LEDGER_TABLE);
            } else {
                for e in &entries {
                    // Loads routed on the client: entries per server.
                    let marker = e.shard.as_deref().and_then(|m| m.strip_prefix('@'));
                    if let Some(server) = marker {
                        outln!(
                            "{} -> {}: routed on the client; server {server} keeps its entries \
                             in its own ledger (list or forget them there with --db)",
                            e.input,
                            e.table
                        );
                        continue;
                    }
                    let shard = e
                        .shard
                        .as_deref()
                        .map(|s| format!(" (rows on server {s})"))
                        .unwrap_or_default();
                    outln!(
                        "{} -> {}{shard}: {} bytes of {} committed, {} rows, {} ranges, {} runs, \
                         last {}",
                        e.input,
                        e.table,
                        e.bytes_committed,
                        e.size,
                        e.rows,
                        e.ranges,
                        e.runs,
                        e.last_commit
                    );
                }
            }
        }
        LedgerAction::Forget { inputs, table, all } => {
            let table = table
                .map(|t| pgtide::ident::QualifiedName::parse(&t).map(|q| q.to_string()))
                .transpose()?;
            let mut n = 0;
            // Loads routed on the client keep entries on each shard
            // server too: named before their markers go.
            let mut elsewhere = Vec::new();
            if all {
                elsewhere.extend(ledger::routed_servers(&client, None).await?);
                n += ledger::forget(&client, None, table.as_deref()).await?;
            }
            for input in &inputs {
                elsewhere.extend(ledger::routed_servers(&client, Some(input)).await?);
                n += ledger::forget(&client, Some(input), table.as_deref()).await?;
            }
            outln!("forgot {n} ledger entries; the rows loaded stay in their tables");
            for (input, server) in elsewhere {
                outln!(
                    "note: {input} was loaded routed on the client: server {server} keeps \
                     its own entries; forget them there too (`pgtide ledger forget {input} \
                     --db` with {server}'s connection), or a later --resume skips the rows \
                     {server} holds"
                );
            }
        }
        LedgerAction::RestoreIndexes { workers } => {
            drop(client);
            let r = pgtide::load::indexes::rebuild(&target, None, workers).await?;
            outln!(
                "built {} index{} in {:.2} s{}{}",
                r.built.len(),
                if r.built.len() == 1 { "" } else { "es" },
                r.seconds,
                if r.built.is_empty() { "" } else { ": " },
                r.built.join(", ")
            );
            if let Some(note) = r.not_built_note() {
                outln!("{note}");
            }
            if let Some(e) = r.failure {
                return Err(e);
            }
        }
    }
    Ok(crate::EXIT_OK)
}
