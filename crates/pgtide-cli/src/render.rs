//! What the user reads at the end: errors with hints, summaries. The live
//! progress display is in `progress.rs`.

use pgtide::load::Report;

/// Prints `error: ...` and, when known, `hint: ...` to stderr.
pub fn error(e: &pgtide::Error) {
    let code = e
        .sqlstate()
        .map(|c| format!(" (SQLSTATE {c})"))
        .unwrap_or_default();
    errln!("error: {}{code}", e.message());
    if let Some(h) = e.hint() {
        errln!("hint: {h}");
    }
}

/// The first Ctrl-C: say what happens now, and how to abort at once.
pub fn stopping() {
    errln!(
        "\npgtide: stopping: nothing new starts; work in progress is finished or undone \
         (Ctrl-C again to abort at once)"
    );
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The end-of-load summary: one human line (plus committed ranges when it
/// failed) on stdout, or a JSON object.
pub fn load_summary(r: &Report, json: bool) {
    if json {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        v["rows_per_sec"] = serde_json::json!(r.rows_per_sec());
        v["mb_per_sec"] = serde_json::json!(r.mb_per_sec());
        v["ok"] = serde_json::json!(r.failure.is_none());
        v["rows_not_loaded"] = serde_json::json!(not_loaded(r));
        v["error"] = serde_json::json!(r.failure.as_ref().map(|e| e.message().to_owned()));
        outln!("{v}");
        return;
    }
    outln!("{}", rows_line(r));
    outln!(
        "into {} in {:.2} s ({:.0} rows/s, {:.1} MB/s, {} worker{}, method {}, PostgreSQL {})",
        r.table,
        r.seconds,
        r.rows_per_sec(),
        r.mb_per_sec(),
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        r.method,
        r.server_version,
    );
    if let Some(u) = &r.upsert {
        let written = match u.written {
            // A partitioned table does not say which rows were new.
            0 => format!(
                "inserted {}, updated {}",
                thousands(u.inserted),
                thousands(u.updated)
            ),
            n => format!("inserted or updated {}", thousands(n)),
        };
        outln!(
            "on conflict ({}) {}: {written}, unchanged {}",
            u.key.join(", "),
            u.on_conflict.name(),
            thousands(u.unchanged),
        );
    }
    for note in &r.notes {
        outln!("note: {note}");
    }
    if r.failure.is_some() {
        if r.committed.is_empty() && r.rows_in_doubt > 0 {
            // "nothing" would read as "the table holds none of it".
            outln!(
                "committed: nothing proven; {} rows in doubt (the error and the notes say \
                 which lines)",
                thousands(r.rows_in_doubt)
            );
        } else if r.committed.is_empty() {
            outln!("committed: nothing");
        }
        for c in &r.committed {
            outln!(
                "done: {} lines {}-{} (committed or rejected)",
                c.input,
                c.first,
                c.last
            );
        }
        // Routed on the client: a chunk commits once per server, so what
        // each server holds can go beyond the lines done everywhere.
        for s in &r.shards {
            for c in &s.committed {
                outln!(
                    "done on {}: {} lines {}-{} (their rows for {} are committed there)",
                    s.server,
                    c.input,
                    c.first,
                    c.last,
                    s.server
                );
            }
            for c in &s.in_doubt {
                outln!(
                    "in doubt on {}: {} lines {}-{} (COMMIT not answered: all or none there)",
                    s.server,
                    c.input,
                    c.first,
                    c.last
                );
            }
        }
    }
}

/// `load --explain`: `what: decision` lines, or JSON.
pub fn explain(plan: &pgtide::load::Explain, json: bool) -> String {
    if json {
        let map: serde_json::Map<String, serde_json::Value> = plan
            .lines
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        return format!("{}\n", serde_json::Value::Object(map));
    }
    let width = plan.lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (what, decision) in &plan.lines {
        out.push_str(&format!("{what:>width$}: {decision}\n"));
    }
    out
}

/// `loaded N rows, rejected N rows (see FILE)[, skipped by the table: N],
/// read N rows`; the skipped part only when the table's triggers dropped
/// rows, so the common line stays as it was.
fn rows_line(r: &Report) -> String {
    let see = r
        .rejects_path
        .as_ref()
        .map(|p| format!(" (see {p})"))
        .unwrap_or_default();
    let skipped = match r.rows_skipped_by_table {
        0 => String::new(),
        n => format!(", skipped by the table: {}", thousands(n)),
    };
    // A stopped load read rows it neither committed nor rejected: say how
    // many, so that the numbers add up (the `done:` ranges say which).
    let stopped = match not_loaded(r) {
        0 => String::new(),
        n => format!(", not loaded (the load stopped): {}", thousands(n)),
    };
    let doubt = match r.rows_in_doubt {
        0 => String::new(),
        n => format!(
            ", in doubt (all or none committed, see below): {}",
            thousands(n)
        ),
    };
    format!(
        "loaded {} rows, rejected {} rows{see}{skipped}, read {} rows{doubt}{stopped}",
        thousands(r.rows_loaded),
        thousands(r.rows_rejected),
        thousands(r.rows_read),
    )
}

/// Rows read but neither loaded, rejected nor skipped by the table: those
/// of the chunks a stopped load did not commit (0 for a finished load,
/// where the invariant check makes them add up).
fn not_loaded(r: &Report) -> u64 {
    r.rows_read
        .saturating_sub(r.rows_loaded + r.rows_rejected + r.rows_skipped_by_table + r.rows_in_doubt)
}

/// The end-of-export summary: one human line (and notes), or a JSON
/// object; on stdout, or on stderr when the data went to stdout.
pub fn export_summary(r: &pgtide::export::ExportReport, json: bool) {
    let text = if json {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        v["rows_per_sec"] = serde_json::json!(r.rows_per_sec());
        v["mb_per_sec"] = serde_json::json!(r.mb_per_sec());
        v.to_string()
    } else {
        let mut s = format!(
            "exported {} rows from {} to {} ({} bytes, {}{}) in {:.2} s \
             ({:.0} rows/s, {:.1} MB/s, {} worker{}, PostgreSQL {})",
            thousands(r.rows),
            r.source,
            if r.output == "-" { "stdout" } else { &r.output },
            thousands(r.bytes),
            r.format,
            if r.compression == "none" {
                String::new()
            } else {
                format!(", {}", r.compression)
            },
            r.seconds,
            r.rows_per_sec(),
            r.mb_per_sec(),
            r.workers,
            if r.workers == 1 { "" } else { "s" },
            r.server_version,
        );
        for note in &r.notes {
            s.push_str(&format!("\nnote: {note}"));
        }
        s
    };
    if r.output == "-" {
        errln!("{text}");
    } else {
        outln!("{text}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_separators() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1000), "1,000");
        assert_eq!(super::thousands(9_981_203), "9,981,203");
    }
}
