//! Results as a markdown table: medians, min, max and ratios against a
//! reference contender (the format docs/benchmarks.md records).

use crate::{Measurement, Unit};

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
