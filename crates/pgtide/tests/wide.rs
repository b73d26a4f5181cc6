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

/// A window answered with as much as it carried (`--sql .. RETURNING *` of
/// 4 KB rows: a window is a megabyte each way) over a Unix socket, whose
/// buffers hold a fraction of that: the pipeline wrote a whole window
/// before it read any answer, the server stopped reading once its answers
/// filled the socket, and both waited for ever. Now every window being
/// written has its answers read meanwhile; bad rows at window edges too.
#[tokio::test]
async fn a_window_answered_with_as_much_as_it_carried_does_not_hang() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE echo (id int, v text)")
        .await
        .unwrap();
    let bad = [5usize, 255, 256, 511, 1999];
    let data: String = (0..2000)
        .map(|i| {
            let id = if bad.contains(&i) {
                "x".to_owned()
            } else {
                i.to_string()
            };
            format!("{id},{}\n", "v".repeat(4000))
        })
        .collect();
    let mut o = db.csv_options(data.as_bytes(), "echo");
    o.method = Method::Pipeline;
    o.sql = Some("INSERT INTO echo VALUES ($1, $2) RETURNING *".into());
    let rejects = std::path::PathBuf::from(&o.inputs[0]).with_extension("rejects");
    o.rejects = Some(rejects.clone());
    let socket = db.cluster.conninfo().replace(
        "host=127.0.0.1",
        &format!("host={}", db.cluster.socket_dir().display()),
    );
    let target = pgtide::conn::Target::parse_with(&socket, &pgtide::conn::Env::empty()).unwrap();
    let load = pgtide::load::run(
        &target,
        &o,
        std::sync::Arc::new(pgtide::progress::Progress::new(1)),
    );
    let r = tokio::time::timeout(std::time::Duration::from_secs(120), load)
        .await
        .expect("the load hung")
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!((r.rows_loaded, r.rows_rejected), (1995, 5));
    let lines: Vec<u64> = bad.iter().map(|&i| i as u64 + 1).collect();
    assert_eq!(rejected_lines(&rejects), lines);
}
