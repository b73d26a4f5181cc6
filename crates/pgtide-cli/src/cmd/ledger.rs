//! `pgtide ledger list|forget`: the `--resume` ledger (pgtide.ledger).

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
                println!("the ledger ({}) is empty", ledger::LEDGER_TABLE);
            } else {
                for e in &entries {
                    println!(
                        "{} -> {}: {} bytes of {} committed, {} rows, {} ranges, {} runs, last {}",
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
            if all {
                n += ledger::forget(&client, None, table.as_deref()).await?;
            }
            for input in &inputs {
                n += ledger::forget(&client, Some(input), table.as_deref()).await?;
            }
            println!("forgot {n} ledger entries; the rows loaded stay in their tables");
        }
    }
    Ok(crate::EXIT_OK)
}
