//! Benchmark harness: the seed documents' experiments as data.
//!
//! Every scenario times pgtide next to its baselines (psql `\copy`,
//! server-side `COPY ... FROM 'file'`) in the same run, on the same server,
//! repeats each measurement, and reports medians and ratios. Nothing here
//! asserts a timing: tests only check the shape of the results.

pub mod baseline;
pub mod chart;
pub mod concurrent;
pub mod datasets;
pub mod export;
pub mod fdw;
pub mod load;
pub mod methods;
pub mod parallel;
pub mod rejects;

use bytes::Bytes;
use futures_util::SinkExt;
use serde::Serialize;
use tokio_postgres::Client;

use crate::error::Result;
use crate::ident::QualifiedName;
use crate::load::copy::MESSAGE_BYTES;

/// What a measurement's samples are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Wall time of one run (lower is better): `seconds` holds the samples.
    #[default]
    Seconds,
    /// Rows loaded per minute of one run (higher is better), for the
    /// fixed-duration scenarios: `rows_per_min` holds the samples.
    RowsPerMin,
}

/// Repeated timings of one contender on one data set.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurement {
    /// Data set name, e.g. `t_narrow`.
    pub dataset: String,
    /// Who was timed, e.g. `pgtide (2 workers)` or `psql \copy`.
    pub contender: String,
    /// Rows loaded per run (for [`Unit::RowsPerMin`]: the fewest rows any
    /// run loaded).
    pub rows: u64,
    /// Wall times in seconds, one per run.
    pub seconds: Vec<f64>,
    /// Why it could not run, when it could not (e.g. no psql binary).
    pub skipped: Option<String>,
    /// The server it ran against (its `server_version`, e.g. `PG 15.13`);
    /// empty when the scenario does not label servers.
    pub server: String,
    /// What `median`, `min` and `max` are in.
    pub unit: Unit,
    /// Rows per minute, one per run ([`Unit::RowsPerMin`] only).
    pub rows_per_min: Vec<f64>,
}

impl Measurement {
    /// An empty measurement in seconds, labelled with its server.
    pub fn new(dataset: &str, contender: &str, rows: u64, server: &str) -> Self {
        Measurement {
            dataset: dataset.into(),
            contender: contender.into(),
            rows,
            server: server.into(),
            ..Default::default()
        }
    }

    /// The samples in [`Measurement::unit`].
    pub fn samples(&self) -> &[f64] {
        match self.unit {
            Unit::Seconds => &self.seconds,
            Unit::RowsPerMin => &self.rows_per_min,
        }
    }

    /// Median of the runs (NaN when skipped).
    pub fn median(&self) -> f64 {
        let mut s = self.samples().to_vec();
        s.sort_by(f64::total_cmp);
        match s.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        }
    }
    /// Smallest sample (the fastest run, in seconds).
    pub fn min(&self) -> f64 {
        self.samples().iter().copied().fold(f64::NAN, f64::min)
    }
    /// Largest sample.
    pub fn max(&self) -> f64 {
        self.samples().iter().copied().fold(f64::NAN, f64::max)
    }
}

/// A results table: rows are measurements; ratios are computed against the
/// named reference contender of the same data set and server (time ratio
/// for [`Unit::Seconds`], throughput ratio for [`Unit::RowsPerMin`]). A
/// `server` column appears when measurements are labelled with servers,
/// and with several servers a ratio against the first server's same
/// measurement (e.g. PG 16 / PG 15, as in seeds 000 and 003).
pub fn table(results: &[Measurement], reference: &str) -> String {
    let mut servers: Vec<&str> = Vec::new();
    for m in results.iter().filter(|m| !m.server.is_empty()) {
        if !servers.contains(&m.server.as_str()) {
            servers.push(&m.server);
        }
    }
    let unit = match results.first().map(|m| m.unit).unwrap_or_default() {
        Unit::Seconds => "s",
        Unit::RowsPerMin => "rows/min",
    };
    let mut head = vec!["data set".to_owned()];
    if !servers.is_empty() {
        head.push("server".into());
    }
    head.extend(["contender", "rows"].map(String::from));
    head.extend(["median", "min", "max"].map(|h| format!("{h} {unit}")));
    head.push("vs reference".into());
    if servers.len() > 1 {
        head.push(format!("vs {}", servers[0]));
    }
    // Text columns (data set, server, contender) left, numbers right.
    let text_columns = head.len() - 5 - usize::from(servers.len() > 1);
    let mut out = format!("| {} |\n|", head.join(" | "));
    out.push_str(&"---|".repeat(text_columns));
    out.push_str(&"---:|".repeat(head.len() - text_columns));
    out.push('\n');
    for m in results {
        let mut cells = vec![m.dataset.clone()];
        if !servers.is_empty() {
            cells.push(m.server.clone());
        }
        cells.push(m.contender.clone());
        cells.push(m.rows.to_string());
        match &m.skipped {
            Some(why) => {
                cells.push(format!("skipped: {why}"));
                cells.resize(head.len(), String::new());
            }
            None => {
                let reference = find(results, &m.dataset, &m.server, reference);
                cells.extend([m.median(), m.min(), m.max()].map(|v| value(m.unit, v)));
                cells.push(ratio(m.median(), reference));
                if servers.len() > 1 {
                    let first = find(results, &m.dataset, servers[0], &m.contender);
                    cells.push(ratio(m.median(), first));
                }
            }
        }
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// Median of `contender` on `dataset` and `server`, NaN when absent.
fn find(results: &[Measurement], dataset: &str, server: &str, contender: &str) -> f64 {
    results
        .iter()
        .find(|r| r.dataset == dataset && r.server == server && r.contender == contender)
        .map(Measurement::median)
        .unwrap_or(f64::NAN)
}

fn value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Seconds => format!("{v:.3}"),
        Unit::RowsPerMin => format!("{:.3}M", v / 1e6),
    }
}

fn ratio(v: f64, reference: f64) -> String {
    let r = v / reference;
    if r.is_finite() {
        format!("{r:.2}x")
    } else {
        "-".into()
    }
}

/// The label of a server in reports: `PG ` and the first word of its
/// `server_version` (`PG 15.13` for "15.13 (Debian 15.13-0+deb12u1)").
pub async fn server_label(client: &Client) -> Result<String> {
    let v: String = client.query_one("SHOW server_version", &[]).await?.get(0);
    Ok(format!("PG {}", v.split_whitespace().next().unwrap_or("?")))
}

/// `SELECT count(*)` of `table` (a name the scenario chose, quoted here).
pub async fn count_rows(client: &Client, table: &str) -> Result<u64> {
    let sql = format!(
        "SELECT count(*) FROM {}",
        QualifiedName::parse(table)?.quoted()
    );
    let n: i64 = client.query_one(&sql, &[]).await?.get(0);
    Ok(n as u64)
}

/// One `COPY ... FROM STDIN` of `data` (whole rows in the statement's
/// format), cut into CopyData messages of the size `load` uses; returns
/// the server's row count. The bench's way to time "one client, one
/// COPY" without the chunker in between.
pub async fn copy_bytes(client: &Client, sql: &str, data: &Bytes) -> Result<u64> {
    let sink = client.copy_in::<_, Bytes>(sql).await?;
    futures_util::pin_mut!(sink);
    let mut off = 0;
    while off < data.len() {
        let end = (off + MESSAGE_BYTES).min(data.len());
        sink.feed(data.slice(off..end)).await?;
        off = end;
    }
    Ok(sink.finish().await?)
}

/// Times one `pgtide load` run in this process. A load that stopped is an
/// error: its time would mean nothing.
pub async fn time_load(
    target: &crate::conn::Target,
    opts: &crate::load::LoadOptions,
) -> crate::Result<(f64, crate::load::Report)> {
    let progress = std::sync::Arc::new(crate::progress::Progress::new(opts.workers));
    let start = std::time::Instant::now();
    let mut report = crate::load::run(target, opts, progress).await?;
    let seconds = start.elapsed().as_secs_f64();
    match report.failure.take() {
        Some(e) => Err(e),
        None => Ok((seconds, report)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max() {
        let m = Measurement {
            dataset: "d".into(),
            contender: "c".into(),
            rows: 1,
            seconds: vec![3.0, 1.0, 2.0, 10.0],
            skipped: None,
            ..Default::default()
        };
        assert_eq!(m.median(), 2.5);
        assert_eq!(m.min(), 1.0);
        assert_eq!(m.max(), 10.0);
        let t = table(&[m], "c");
        assert!(
            t.contains("| d | c | 1 | 2.500 | 1.000 | 10.000 | 1.00x |"),
            "{t}"
        );
    }

    fn rate(dataset: &str, server: &str, contender: &str, v: f64) -> Measurement {
        Measurement {
            unit: Unit::RowsPerMin,
            rows_per_min: vec![v],
            seconds: vec![60.0],
            ..Measurement::new(dataset, contender, 1000, server)
        }
    }

    #[test]
    fn servers_get_a_column_and_a_ratio_against_the_first() {
        let results = [
            rate("4 clients", "PG 15.1", "psql", 2e6),
            rate("4 clients", "PG 15.1", "pgtide", 4e6),
            rate("4 clients", "PG 17.0", "psql", 3e6),
            rate("4 clients", "PG 17.0", "pgtide", 6e6),
        ];
        let t = table(&results, "psql");
        assert!(
            t.starts_with("| data set | server | contender | rows | median rows/min |"),
            "{t}"
        );
        assert!(t.contains("| vs reference | vs PG 15.1 |"), "{t}");
        assert_eq!(
            t.lines().nth(1),
            Some("|---|---|---|---:|---:|---:|---:|---:|---:|")
        );
        assert!(
            t.contains("| 4 clients | PG 17.0 | pgtide | 1000 | 6.000M | 6.000M | 6.000M | 2.00x | 1.50x |"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 2 + results.len());
    }

    #[test]
    fn skipped_rows_keep_the_column_count() {
        let mut m = Measurement::new("d", "c", 1, "PG 15.1");
        m.skipped = Some("no psql".into());
        let t = table(&[m], "c");
        let cols = |l: &str| l.matches('|').count();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(cols(lines[0]), cols(lines[2]), "{t}");
        assert!(lines[2].contains("skipped: no psql"));
    }
}
