//! `--chart FILE.svg`: results as grouped horizontal bars, hand-written
//! SVG (no plotting dependency for a few dozen rectangles).
//!
//! One group per data set, one bar per contender and server inside it,
//! each bar the median with a thin line from the min to the max run.
//! Times are scaled per group: groups of one scenario differ by orders of
//! magnitude (32 loads of 10K rows vs one 8M-row load), and the
//! comparison that matters is inside a group. Rates (rows per minute) share
//! one scale, because how they grow from group to group (1, 2, 4 ...
//! clients) is the point. Every bar is a
//! `<rect class="bar">`, so the chart is easy to check in tests.

use std::fmt::Write;

use crate::{Measurement, Unit};

/// Chart geometry in pixels. Wide enough for contender labels such as
/// `postgres_fdw batch_size 100 · PG 15.13`.
const WIDTH: f64 = 960.0;
const LABEL_W: f64 = 330.0;
const BAR_W: f64 = 480.0;
const BAR_H: f64 = 16.0;
const GAP: f64 = 4.0;
const GROUP_HEAD: f64 = 26.0;
const TOP: f64 = 64.0;

/// Colour per series (contender × server), cycled: the Tableau 10 palette,
/// readable for the common kinds of colour blindness.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// Renders `results` as an SVG document titled `title`.
pub fn svg(results: &[Measurement], title: &str) -> String {
    let groups = distinct(results.iter().map(|m| m.dataset.as_str()));
    let names: Vec<String> = results.iter().map(series_of).collect();
    let series = distinct(names.iter().map(String::as_str));
    let unit = results.first().map(|m| m.unit).unwrap_or_default();
    let subtitle = match unit {
        Unit::Seconds => "median seconds, lower is better; bars scaled per group",
        Unit::RowsPerMin => "median rows per minute, higher is better; one scale",
    };
    let global = scale_of(results.iter());
    let legend_rows = series.len().div_ceil(3) as f64;
    let top = TOP + legend_rows * 18.0;
    let height =
        top + groups.len() as f64 * GROUP_HEAD + results.len() as f64 * (BAR_H + GAP) + 20.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="10" y="22" font-size="16" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let _ = writeln!(
        out,
        r##"<text x="10" y="42" fill="#555">{subtitle}; lines span min to max</text>"##
    );
    for (i, s) in series.iter().enumerate() {
        let (x, y) = (
            10.0 + (i % 3) as f64 * 310.0,
            TOP - 10.0 + (i / 3) as f64 * 18.0,
        );
        let _ = writeln!(
            out,
            r#"<rect class="legend" x="{x}" y="{y}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            PALETTE[i % PALETTE.len()],
            x + 16.0,
            y + 10.0,
            esc(s)
        );
    }
    let mut y = top;
    for g in &groups {
        let members: Vec<&Measurement> = results.iter().filter(|m| m.dataset == *g).collect();
        let scale = match unit {
            Unit::Seconds => scale_of(members.iter().copied()),
            Unit::RowsPerMin => global,
        };
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" font-weight="bold">{}</text>"#,
            y + 16.0,
            esc(g)
        );
        y += GROUP_HEAD;
        for m in members {
            let name = series_of(m);
            let colour =
                PALETTE[series.iter().position(|s| *s == name).unwrap_or(0) % PALETTE.len()];
            bar(&mut out, m, &name, colour, scale, y);
            y += BAR_H + GAP;
        }
    }
    out.push_str("</svg>\n");
    out
}

/// One bar (or a "skipped" note) at height `y`.
fn bar(out: &mut String, m: &Measurement, name: &str, colour: &str, scale: f64, y: f64) {
    let text_y = y + BAR_H - 4.0;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{text_y}" text-anchor="end">{}</text>"#,
        LABEL_W - 8.0,
        esc(name)
    );
    let median = m.median();
    if m.skipped.is_some() || !median.is_finite() || scale <= 0.0 {
        let why = m.skipped.as_deref().unwrap_or("no data");
        let _ = writeln!(
            out,
            r##"<text x="{LABEL_W}" y="{text_y}" fill="#999">skipped: {}</text>"##,
            esc(why)
        );
        return;
    }
    let px = |v: f64| LABEL_W + BAR_W * (v / scale).clamp(0.0, 1.0);
    let w = px(median) - LABEL_W;
    let _ = writeln!(
        out,
        r#"<rect class="bar" x="{LABEL_W}" y="{y}" width="{w:.1}" height="{BAR_H}" fill="{colour}"><title>{}: {}</title></rect>"#,
        esc(name),
        label(m.unit, median)
    );
    let mid = y + BAR_H / 2.0;
    let _ = writeln!(
        out,
        r##"<line x1="{:.1}" y1="{mid}" x2="{:.1}" y2="{mid}" stroke="#333" stroke-width="1.5"/>"##,
        px(m.min()),
        px(m.max())
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{text_y}">{}</text>"#,
        px(m.max().max(median)) + 6.0,
        label(m.unit, median)
    );
}

/// The largest value drawn (a median or a max) among `ms`.
fn scale_of<'a>(ms: impl Iterator<Item = &'a Measurement>) -> f64 {
    ms.filter(|m| m.skipped.is_none())
        .map(|m| m.max().max(m.median()))
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max)
}

/// A series is one contender on one server.
fn series_of(m: &Measurement) -> String {
    if m.server.is_empty() {
        m.contender.clone()
    } else {
        format!("{} · {}", m.contender, m.server)
    }
}

fn label(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Seconds => format!("{v:.3} s"),
        Unit::RowsPerMin => format!("{:.2}M rows/min", v / 1e6),
    }
}

/// The distinct values in first-seen order.
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in items {
        if !out.iter().any(|o| o == i) {
            out.push(i.to_owned());
        }
    }
    out
}

/// XML text escaping.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rect_per_bar_and_escaped_labels() {
        let mut a = Measurement::new("g<1>", "psql \\copy", 10, "PG 15");
        a.seconds = vec![1.0, 2.0, 3.0];
        let mut b = Measurement::new("g<1>", "pgtide & co", 10, "PG 15");
        b.seconds = vec![0.5];
        let mut c = Measurement::new("g2", "pgtide & co", 10, "PG 15");
        c.skipped = Some("no <psql>".into());
        let s = svg(&[a, b, c], "t");
        assert!(s.starts_with("<svg"), "{s}");
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<rect class=\"bar\"").count(), 2);
        assert!(s.contains("g&lt;1&gt;") && s.contains("pgtide &amp; co"));
        assert!(s.contains("skipped: no &lt;psql&gt;"));
        assert!(!s.contains("NaN"));
    }
}
