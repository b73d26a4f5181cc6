//! Everything the user sees: errors with hints, the progress bar, summaries.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgtide::load::Report;
use pgtide::progress::Progress;

/// Prints `error: ...` and, when known, `hint: ...` to stderr.
pub fn error(e: &pgtide::Error) {
    let code = e
        .sqlstate()
        .map(|c| format!(" (SQLSTATE {c})"))
        .unwrap_or_default();
    eprintln!("error: {}{code}", e.message());
    if let Some(h) = e.hint() {
        eprintln!("hint: {h}");
    }
}

/// The first Ctrl-C: say what happens now, and how to abort at once.
pub fn stopping() {
    eprintln!(
        "\npgtide: stopping: no new chunk will start; chunks in progress commit or roll back \
         (Ctrl-C again to abort at once)"
    );
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
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
        v["error"] = serde_json::json!(r.failure.as_ref().map(|e| e.message().to_owned()));
        println!("{v}");
        return;
    }
    println!("{}", rows_line(r));
    println!(
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
    for note in &r.notes {
        println!("note: {note}");
    }
    if r.failure.is_some() {
        if r.committed.is_empty() {
            println!("committed: nothing");
        }
        for c in &r.committed {
            println!(
                "done: {} lines {}-{} (committed or rejected)",
                c.input, c.first, c.last
            );
        }
    }
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
    format!(
        "loaded {} rows, rejected {} rows{see}{skipped}, read {} rows",
        thousands(r.rows_loaded),
        thousands(r.rows_rejected),
        thousands(r.rows_read),
    )
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
pub struct ProgressBar {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressBar {
    /// Starts drawing from `progress` every 200 ms.
    pub fn start(progress: Arc<Progress>) -> ProgressBar {
        ProgressBar::spawn(progress, draw)
    }

    /// Starts `draw` on its own thread when stderr is a terminal.
    fn spawn(progress: Arc<Progress>, draw: fn(&Progress, &AtomicBool)) -> ProgressBar {
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return ProgressBar { stop, thread: None };
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || draw(&progress, &flag));
        ProgressBar {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and clears the bar.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn draw(p: &Progress, stop: &AtomicBool) {
    let total = Progress::get(&p.total_bytes);
    let bar = indicatif::ProgressBar::with_draw_target(
        (total > 0).then_some(total),
        indicatif::ProgressDrawTarget::stderr_with_hz(5),
    );
    let template = if total > 0 {
        "{bar:30} {bytes}/{total_bytes} {msg} ETA {eta}"
    } else {
        "{spinner} {bytes} {msg}"
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    let start = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let rows = Progress::get(&p.rows_loaded);
        bar.set_position(Progress::get(&p.read_bytes));
        let rate = rows as f64 / start.elapsed().as_secs_f64().max(1e-3);
        let mut msg = format!("{} rows, {:.0} rows/s", thousands(rows), rate);
        if p.worker_rows.len() > 1 {
            let per: Vec<String> = p
                .worker_rows
                .iter()
                .map(|w| thousands(Progress::get(w)))
                .collect();
            msg.push_str(&format!(" [workers: {}]", per.join(" ")));
        }
        bar.set_message(msg);
        std::thread::sleep(Duration::from_millis(200));
    }
    bar.finish_and_clear();
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
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

impl ProgressBar {
    /// Starts drawing an export's progress: rows against the planner's
    /// estimate when there is one, and bytes received.
    pub fn start_export(progress: Arc<Progress>) -> ProgressBar {
        ProgressBar::spawn(progress, draw_export)
    }
}

fn draw_export(p: &Progress, stop: &AtomicBool) {
    let total = Progress::get(&p.total_rows);
    let bar = indicatif::ProgressBar::with_draw_target(
        (total > 0).then_some(total),
        indicatif::ProgressDrawTarget::stderr_with_hz(5),
    );
    let template = if total > 0 {
        "{bar:30} {human_pos}/~{human_len} rows {msg} ETA {eta}"
    } else {
        "{spinner} {human_pos} rows {msg}"
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    while !stop.load(Ordering::Relaxed) {
        let rows = Progress::get(&p.rows_read);
        // The estimate can be low: never draw past the end.
        if total > 0 && rows > total {
            bar.set_length(rows);
        }
        bar.set_position(rows);
        bar.set_message(format!(
            "{:.1} MB",
            Progress::get(&p.read_bytes) as f64 / 1e6
        ));
        std::thread::sleep(Duration::from_millis(200));
    }
    bar.finish_and_clear();
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
