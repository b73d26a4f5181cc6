//! Wide tables (issue 8 B8): PostgreSQL's 1600 columns with every method,
//! with and without bad rows. A row of 1600 parameters is a large Bind
//! message; the pipeline must bound what it has in flight by bytes, not
//! only by count, or the connection fails.

mod support;

use pgtide::copyopts::CopyFormat;
use pgtide::load::Method;
use support::{rejected_lines, Case, Db};

const COLUMNS: usize = 1600;
const ROWS: usize = 200;

fn table_def() -> String {
    (0..COLUMNS)
        .map(|c| format!("c{c} int"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ROWS` rows; the rows in `bad` get a value that is not an integer in
/// their last column.
fn data(bad: &[usize]) -> Vec<u8> {
    let mut out = String::new();
    for r in 0..ROWS {
        for c in 0..COLUMNS {
            if c > 0 {
                out.push(',');
            }
            if c == COLUMNS - 1 && bad.contains(&r) {
                out.push('x');
            } else {
                out.push_str(&(r * 100_000 + c).to_string());
            }
        }
        out.push('\n');
    }
    out.into_bytes()
}

#[tokio::test]
async fn sixteen_hundred_columns_load_with_every_method() {
    let db = Db::start().await;
    let def = table_def();
    let data = data(&[]);
    for method in Method::ALL {
        for workers in [1, 3] {
            let case = Case::new(&def, CopyFormat::Csv, &data)
                .method(method)
                .workers(workers)
                .chunk(4 << 20);
            db.check(&case).await;
        }
    }
}

#[tokio::test]
async fn sixteen_hundred_columns_with_bad_rows_with_every_method() {
    let db = Db::start().await;
    let def = table_def();
    let bad = [0, 3, 100, 101, ROWS - 1];
    let data = data(&bad);
    let dir = tempfile::tempdir().unwrap();
    for method in Method::ALL {
        for workers in [1, 3] {
            let mut case = Case::new(&def, CopyFormat::Csv, &data)
                .method(method)
                .workers(workers);
            let rejects = dir.path().join(format!("{}-{workers}", method.name()));
            case.rejects = Some(rejects.clone());
            let report = db.load_report(&case).await;
            let ctx = format!("{}, workers {workers}", method.name());
            assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
            assert_eq!(
                (report.rows_loaded, report.rows_rejected, report.rows_read),
                ((ROWS - bad.len()) as u64, bad.len() as u64, ROWS as u64),
                "{ctx}"
            );
            let lines = rejected_lines(&rejects);
            let want: Vec<u64> = bad.iter().map(|&r| r as u64 + 1).collect();
            assert_eq!(lines, want, "{ctx}: rejected lines");
        }
    }
}
