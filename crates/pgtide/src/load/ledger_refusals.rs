//! What `--resume` refuses, and how it says so: stdin, one file listed
//! twice, and an input whose ledger entries name another file, table or
//! format options.

use super::{Identity, LEDGER_TABLE};
use crate::error::Error;

/// `--resume` cannot skip what it cannot read again.
pub fn stdin_refused() -> Error {
    Error::config("--resume cannot read stdin (-) or a pipe: a resumed run reads the input again from its start to skip what is committed")
        .with_hint("save the input to a file and load the file with --resume")
}

/// One file given twice to a `--resume` load: the ledger knows a file by
/// its path, so both would share its entries, and once either had
/// committed a range the other's would be skipped as done (a killed run's
/// resume then found it "complete" with rows missing).
pub(super) fn listed_twice(before: &str, input: &str, path: &str) -> Error {
    let also = if before == input {
        String::new()
    } else {
        format!(" (as {before} and {input})")
    };
    Error::config(format!("{path} is listed twice{also} in a --resume load")).with_hint(
        "--resume knows a file by its path, so two loads of one file in one run would share \
         its entries and one of them would be skipped: list the file once, or load it twice \
         without --resume",
    )
}

/// The error for an input whose ledger entries say another file, table
/// or options.
pub(super) fn mismatch(input: &str, stored: &Identity, now: &Identity) -> Error {
    let mut what = Vec::new();
    if stored.size != now.size {
        what.push(format!(
            "its size was {} bytes, it is {} now",
            stored.size, now.size
        ));
    } else if stored.fingerprint != now.fingerprint {
        what.push("its content changed (the fingerprint of its first and last MiB, or of the whole file with --resume=strict, differs)".to_owned());
    }
    if stored.table != now.table {
        what.push(format!(
            "it was loaded into {}, not {}",
            stored.table, now.table
        ));
    } else if stored.table_oid != now.table_oid {
        what.push(format!(
            "table {} was dropped and created again since (OID {} then, {} now)",
            now.table, stored.table_oid, now.table_oid
        ));
    }
    if stored.options != now.options {
        what.push(options_diff(&stored.options, &now.options));
    }
    Error::config(format!(
        "--resume: {input} is not the load the ledger ({LEDGER_TABLE}) recorded: {}",
        what.join("; ")
    ))
    .with_hint(format!(
        "resume with the same file, table and options; or, to load it afresh, clear its \
         entries with `pgtide ledger forget {input}` (its committed rows stay in {})",
        stored.table
    ))
}

/// Which format options differ, by name.
fn options_diff(stored: &str, now: &str) -> String {
    let parse = |s: &str| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(s);
    let (Ok(a), Ok(b)) = (parse(stored), parse(now)) else {
        return format!("the options were {stored}, they are {now}");
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show = |v: Option<&serde_json::Value>| v.map_or("-".to_owned(), |v| v.to_string());
            format!("{k} was {}, is {}", show(a.get(k)), show(b.get(k)))
        })
        .collect();
    format!("other format options ({})", diffs.join(", "))
}
