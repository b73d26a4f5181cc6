//! Live progress while a load or export runs, on stderr: a bar with
//! percent, bytes, rows, rate and ETA on a terminal, or one JSON object per
//! second (`--progress json`) for wrappers and CI logs. The library only
//! keeps counters (`pgtide::progress::Progress`); this module polls them.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgtide::progress::Progress;

use crate::args::ProgressArg;
use crate::render::thousands;

/// What is being counted: a load's input bytes, or an export's rows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Load,
    Export,
}

/// A running progress display; [`Display::finish`] stops and clears it.
pub struct Display {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Display {
    /// Starts the display `mode` asks for. `auto` draws a bar when stderr
    /// is a terminal and nothing otherwise; `quiet` or a JSON summary on
    /// stdout turn `auto` off.
    pub fn start(mode: ProgressArg, quiet: bool, work: Work, progress: Arc<Progress>) -> Display {
        let stop = Arc::new(AtomicBool::new(false));
        let mode = match mode {
            ProgressArg::Auto if quiet || !std::io::stderr().is_terminal() => ProgressArg::None,
            ProgressArg::Auto => ProgressArg::Bar,
            m => m,
        };
        let flag = stop.clone();
        let thread = match mode {
            ProgressArg::Bar => Some(std::thread::spawn(move || bar(&progress, work, &flag))),
            ProgressArg::Json => Some(std::thread::spawn(move || json(&progress, work, &flag))),
            _ => None,
        };
        Display { stop, thread }
    }

    /// Stops and clears the display.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One reading of the counters.
struct Sample {
    /// Done so far, in the unit of `total` (bytes for a load, rows for an
    /// export).
    done: u64,
    /// The whole, when known (file sizes; the planner's row estimate).
    total: Option<u64>,
    rows: u64,
    rejected: u64,
    bytes: u64,
    seconds: f64,
}

impl Sample {
    fn take(p: &Progress, work: Work, start: Instant) -> Sample {
        let bytes = Progress::get(&p.read_bytes);
        let (done, total, rows) = match work {
            Work::Load => (
                bytes,
                Progress::get(&p.total_bytes),
                Progress::get(&p.rows_loaded),
            ),
            Work::Export => {
                let rows = Progress::get(&p.rows_read);
                (rows, Progress::get(&p.total_rows), rows)
            }
        };
        Sample {
            done,
            // An estimate can be low: never past the end.
            total: (total > 0).then_some(total.max(done)),
            rows,
            rejected: Progress::get(&p.rows_rejected),
            bytes,
            seconds: start.elapsed().as_secs_f64().max(1e-3),
        }
    }

    fn percent(&self) -> Option<f64> {
        self.total.map(|t| 100.0 * self.done as f64 / t as f64)
    }

    /// Seconds left at the average rate so far; unknown before any
    /// progress or without a total.
    fn eta(&self) -> Option<f64> {
        let total = self.total?;
        (self.done > 0).then(|| self.seconds * (total - self.done) as f64 / self.done as f64)
    }
}

fn bar(p: &Progress, work: Work, stop: &AtomicBool) {
    let start = Instant::now();
    let first = Sample::take(p, work, start);
    let bar = indicatif::ProgressBar::with_draw_target(
        first.total,
        indicatif::ProgressDrawTarget::stderr_with_hz(5),
    );
    let template = match (work, first.total.is_some()) {
        (Work::Load, true) => "{bar:30} {percent:>3}% {bytes}/{total_bytes} {msg} ETA {eta}",
        (Work::Load, false) => "{spinner} {bytes} {msg}",
        (Work::Export, true) => {
            "{bar:30} {percent:>3}% about {human_pos}/{human_len} rows {msg} ETA {eta}"
        }
        (Work::Export, false) => "{spinner} {human_pos} rows {msg}",
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    while !stop.load(Ordering::Relaxed) {
        let s = Sample::take(p, work, start);
        if let Some(t) = s.total {
            bar.set_length(t);
        }
        bar.set_position(s.done);
        let mut msg = match work {
            Work::Load => format!(
                "{} rows, {:.0} rows/s",
                thousands(s.rows),
                s.rows as f64 / s.seconds
            ),
            Work::Export => format!("{:.1} MB", s.bytes as f64 / 1e6),
        };
        if work == Work::Load && p.worker_rows.len() > 1 {
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

/// One JSON object per second on stderr, and a last one at the end.
fn json(p: &Progress, work: Work, stop: &AtomicBool) {
    let start = Instant::now();
    let mut last = Instant::now();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping || last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            let line = json_line(&Sample::take(p, work, start));
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
        if stopping {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn json_line(s: &Sample) -> serde_json::Value {
    serde_json::json!({
        "progress": true,
        "seconds": (s.seconds * 10.0).round() / 10.0,
        "bytes": s.bytes,
        "rows": s.rows,
        "rows_rejected": s.rejected,
        "rows_per_sec": (s.rows as f64 / s.seconds).round(),
        "total": s.total,
        "percent": s.percent().map(|p| (p * 10.0).round() / 10.0),
        "eta_seconds": s.eta().map(f64::round),
    })
}

#[cfg(test)]
mod tests {
    use super::Sample;

    fn sample(done: u64, total: Option<u64>, seconds: f64) -> Sample {
        Sample {
            done,
            total,
            rows: done,
            rejected: 0,
            bytes: done,
            seconds,
        }
    }

    #[test]
    fn percent_and_eta_from_the_average_rate() {
        let s = sample(250, Some(1000), 10.0);
        assert_eq!(s.percent(), Some(25.0));
        assert_eq!(s.eta(), Some(30.0));
        assert_eq!(sample(0, Some(1000), 1.0).eta(), None);
        assert_eq!(sample(5, None, 1.0).percent(), None);
        let v = super::json_line(&s);
        assert_eq!(v["percent"], 25.0);
        assert_eq!(v["eta_seconds"], 30.0);
    }
}
