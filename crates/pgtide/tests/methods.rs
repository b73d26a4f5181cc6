//! `load --method` against a real throwaway server: every method, with 1
//! and 3 workers and chunk sizes that cut the input into many batches,
//! must give the table server-side `COPY ... FROM 'file'` gives (counts
//! and `EXCEPT ALL` both ways), under session settings that change how
//! text is read (TimeZone across a DST change, DateStyle), with values the
//! binary encoder defers to the server. Failures must name the row.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` (PG 17 in CI) or the default
//! binaries (Debian's PG 15).

mod support;

use pgtide::copyopts::CopyFormat;
use pgtide::load::Method;
use support::{Case, Db};

/// Every column type the binary encoder knows, plus the forms people
/// actually have in files.
const MIXED_DEF: &str = "i int, bi bigint, si smallint, f8 float8, f4 real, n numeric, \
     n52 numeric(5,2), d date, ts timestamp, tz timestamptz, t text, vc varchar(10), \
     bp char(5), b bytea, u uuid, j json, jb jsonb, ai int[], at text[], bo bool, \
     iv interval, tm time, ts3 timestamp(3)";

/// One CSV field: `None` = NULL (an empty unquoted field), `Some` = the
/// value, always quoted (so `Some("")` is an empty string).
fn csv(rows: &[Vec<Option<&str>>]) -> Vec<u8> {
    let mut out = String::new();
    for row in rows {
        let fields: Vec<String> = row
            .iter()
            .map(|f| match f {
                None => String::new(),
                Some(v) => format!("\"{}\"", v.replace('"', "\"\"")),
            })
            .collect();
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out.into_bytes()
}

/// Rows for [`MIXED_DEF`]: edge values of every type, and forms the
/// encoder must leave to the server.
fn mixed_rows(extra_dates: &[&'static str]) -> Vec<Vec<Option<&'static str>>> {
    let big: &'static str = Box::leak(format!("1{}", "7".repeat(999)).into_boxed_str());
    let frac: &'static str = Box::leak(format!("-0.{}", "3".repeat(1000)).into_boxed_str());
    let mut rows: Vec<Vec<Option<&'static str>>> = vec![
        // Plain values.
        vec![
            "1",
            "9000000000",
            "-32768",
            "3.14159",
            "2.5",
            "12.50",
            "1.005",
            "2024-02-29",
            "2024-02-29 13:45:00.123456",
            "2024-02-29 13:45:00+01",
            "hello",
            "short",
            "ab",
            "\\x00ff10",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "{\"a\": [1, 2.50, \"x\"]}",
            "{\"b\":1,\"a\":[true,null]}",
            "{1,2,3}",
            "{a,b}",
            "t",
            "1 day 02:03:04",
            "23:59:59.999999",
            "2024-01-01 00:00:00.1235",
        ],
        // Special floats and numerics.
        vec![
            "2147483647",
            "-9223372036854775808",
            "0",
            "NaN",
            "-Infinity",
            "NaN",
            "-0.005",
            "infinity",
            "-infinity",
            "infinity",
            "",
            "",
            "",
            "\\x",
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "[]",
            "[]",
            "{}",
            "{}",
            "false",
            "00:00:00",
            "00:00:00",
            "infinity",
        ],
        vec![
            "-0",
            "+17",
            " 42 ",
            "-0",
            "-0.0",
            big,
            "999.994",
            "0044-03-15 BC",
            "0001-01-01 00:00:00 BC",
            "1999-12-31 23:59:59.9999994+00",
            frac,
            "é€😀",
            "é",
            "\\\\escaped\\000",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
            "\"\\u00e9\"",
            "\"\\u00e9 \\ud83d\\ude00\"",
            "{NULL,-1,NULL}",
            "{\"a b\",\"c,d\",NULL,\"NULL\",\"\\\"q\\\"\"}",
            "yes",
            "-1 years -2 mons +3 days -04:05:06.5",
            "12:00",
            "2000-02-29 12:00:00.9996",
        ],
        // Timestamps with offsets across the 2021 DST changes in New York,
        // and without offsets (the session's zone decides).
        vec![
            "3",
            "1",
            "1",
            "1e308",
            "1.17549435e-38",
            "1e-1000",
            "-999.99",
            "2021-03-14",
            "2021-03-14 02:30:00",
            "2021-03-14 02:30:00",
            "\\N is not null in CSV",
            "",
            "abc  ",
            "abc\\\\",
            "00000000-0000-0000-0000-000000000000",
            "null",
            "\"s\"",
            "{2147483647}",
            "{\"\"}",
            "on",
            "-00:00:01",
            "08:30:15.5",
            "2021-03-14 02:30:00",
        ],
        vec![
            "4",
            "2",
            "2",
            "4.9e-324",
            "3.4028235e38",
            "1e1000",
            "0.001",
            "2021-11-07",
            "2021-11-07 01:30:00",
            "2021-11-07 01:30:00-04",
            "tab\there",
            "ten chars!",
            "x",
            "\\x0A",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            "{\"nested\":{\"k\":[[],{}]}}",
            "{\"nested\":{\"k\":[[],{}]}}",
            "{-0,+1}",
            "{\"\",\" \"}",
            "0",
            "-1 years 2 mons 3 days 04:05",
            "01:02",
            "2021-11-07 01:30:00",
        ],
        vec![
            "5",
            "3",
            "3",
            "-1.5e-10",
            "1e-37",
            "0.000001",
            "-0",
            "2021-11-07",
            "2021-11-07 01:30:00",
            "2021-11-07 01:30:00-05",
            "new\nline",
            "a\"b",
            "\"",
            "plain text bytes",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            " { \"sp\" : 1 } ",
            " [1, 2] ",
            "{1,2}",
            "{\"with \\\\ backslash\"}",
            "1",
            "10:00:00",
            "13:00",
            "epoch",
        ],
        // Forms the encoder defers (session-dependent or not converted):
        // all valid, so the server must load them exactly.
        vec![
            "6",
            "4",
            "4",
            "  7.5  ",
            "nan",
            "  12.3e2  ",
            "5",
            "January 8, 1999",
            "epoch",
            "2021-11-07 01:30:00",
            "x",
            "abcdefghij   ",
            "abcde   ",
            "\\x0a0B",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "\"\\u0000\"",
            "{\"a\":1,\"a\":2}",
            "{ 1 , 2 }",
            "{\"a\",  b }",
            "TRUE",
            "@ 1 hour ago",
            "24:00:00",
            "2021-06-01T12:00:00+02",
        ],
        // Replaced below by NULLs everywhere (empty unquoted fields).
        vec![""; 23],
    ]
    .into_iter()
    .map(|r: Vec<&'static str>| r.into_iter().map(Some).collect())
    .collect();
    // The all-NULL row: unquoted empty fields.
    let last = rows.len() - 1;
    rows[last] = vec![None; 23];
    rows[last][0] = Some("7");
    for (k, d) in extra_dates.iter().enumerate() {
        let id: &'static str = Box::leak((100 + k).to_string().into_boxed_str());
        let mut r: Vec<Option<&'static str>> = vec![None; 23];
        r[0] = Some(id);
        r[7] = Some(d);
        r[8] = Some(d);
        r[9] = Some(d);
        rows.push(r);
    }
    rows
}

/// Sets a session parameter for new connections (the loaders) and for the
/// test's own connection (the server-side reference COPY).
async fn set_everywhere(db: &Db, name: &str, value: &str) {
    db.client
        .batch_execute(&format!(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET {name} = %L', \
             current_database(), '{value}'); END $$; SET {name} = '{value}'"
        ))
        .await
        .unwrap();
}

async fn every_method_matches(db: &Db, data: &[u8], table_def: &str) {
    for method in Method::ALL {
        for workers in [1, 3] {
            for chunk in [1, 300, 1 << 20] {
                let case = Case::new(table_def, CopyFormat::Csv, data)
                    .method(method)
                    .workers(workers)
                    .chunk(chunk);
                db.check(&case).await;
            }
        }
    }
}

#[tokio::test]
async fn mixed_types_in_new_york_match_server_copy() {
    let db = Db::start().await;
    set_everywhere(&db, "TimeZone", "America/New_York").await;
    let data = csv(&mixed_rows(&[
        "2021-03-14 01:59:59",
        "03/04/2020",
        "2020-04-03 10:00 EST",
    ]));
    every_method_matches(&db, &data, MIXED_DEF).await;
    // Every column has an encoder: binary really is binary here.
    let case = Case::new(MIXED_DEF, CopyFormat::Csv, &data).method(Method::Binary);
    let report = db.load_report(&case).await;
    assert!(
        report.failure.is_none() && report.notes.is_empty(),
        "{:?}",
        report.notes
    );
}

#[tokio::test]
async fn mixed_types_under_other_datestyles_and_utc() {
    let db = Db::start().await;
    set_everywhere(&db, "DateStyle", "SQL, DMY").await;
    set_everywhere(&db, "IntervalStyle", "sql_standard").await;
    let dates = ["03/04/2020", "03.04.2020 10:00", "2020-04-03 10:00"];
    let data = csv(&mixed_rows(&dates));
    every_method_matches(&db, &data, MIXED_DEF).await;
    set_everywhere(&db, "DateStyle", "German, MDY").await;
    set_everywhere(&db, "TimeZone", "UTC").await;
    every_method_matches(&db, &data, MIXED_DEF).await;
}

#[tokio::test]
async fn text_format_with_null_option_matches_server_copy() {
    let db = Db::start().await;
    let data = "1\tNULL\t{1,NULL}\t\\x41\n\
                2\t\\N\t{}\tNULL\n\
                3\ttab\\there\t{\"a\\\\b\"}\t\\\\x42\n\
                4\t\\\\N\t{2}\t\\x\n";
    for method in Method::ALL {
        for chunk in [1, 1 << 20] {
            let mut case = Case::new(
                "a int, b text, c text[], d bytea",
                CopyFormat::Text,
                data.as_bytes(),
            )
            .method(method)
            .workers(2)
            .chunk(chunk);
            case.opts.null = Some("NULL".into());
            db.check(&case).await;
        }
    }
}

#[tokio::test]
async fn csv_force_null_and_force_not_null_match_server_copy() {
    let db = Db::start().await;
    let data = "1,\"\",,\"\"\n2,x,\"\",\n";
    for method in Method::ALL {
        let mut case = Case::new(
            "a int, b text, c text, d text",
            CopyFormat::Csv,
            data.as_bytes(),
        )
        .method(method);
        case.opts.force_null = vec!["b".into()];
        case.opts.force_not_null = vec!["c".into()];
        db.check(&case).await;
        // PostgreSQL 17's `*`, every column, on every server version.
        for (null, not_null) in [("*", "c"), ("b", "*"), ("*", "*")] {
            case.opts.force_null = vec![null.into()];
            case.opts.force_not_null = vec![not_null.into()];
            db.check(&case).await;
        }
    }
}

#[tokio::test]
async fn type_without_binary_form_falls_back_to_copy_with_a_note() {
    let db = Db::start().await;
    let data = "1,10.0.0.1/8,\"(1,2)\"\n2,::1,\"(3.5,-4)\"\n";
    let def = "a int, ip inet, p point";
    let case = Case::new(def, CopyFormat::Csv, data.as_bytes()).method(Method::Binary);
    let report = db.load_report(&case).await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_loaded, 2);
    let note = report.notes.join("\n");
    assert!(
        note.contains("binary") && note.contains("ip (inet)") && note.contains("p (point)"),
        "{note}"
    );
    db.check(&case.clone().workers(2).chunk(1)).await;
    // A table the encoder covers gets no note.
    let ok = Case::new("a int, b text", CopyFormat::Csv, b"1,x\n").method(Method::Binary);
    assert!(db.load_report(&ok).await.notes.is_empty());
}

#[tokio::test]
async fn sql_upsert_runs_per_row_in_order() {
    let db = Db::start().await;
    for (k, method) in [Method::Pipeline, Method::Insert].into_iter().enumerate() {
        for workers in [1, 3] {
            let table = format!("up_{k}_{workers}");
            db.client
                .batch_execute(&format!(
                    "CREATE TABLE {table} (id int primary key, v text, hits int default 1);
                     INSERT INTO {table} VALUES (1, 'old', 1), (9, 'untouched', 1)"
                ))
                .await
                .unwrap();
            // id 2 twice in one batch: the second wins, as in the file.
            let data = "1,new\n2,first\n3,c\n2,second\n4,d\n";
            let mut case = Case::new("id int, v text", CopyFormat::Csv, data.as_bytes())
                .method(method)
                .workers(workers)
                .chunk(if workers == 1 { 1 << 20 } else { 1 });
            case.table_override = Some(table.clone());
            case.columns = Some(vec!["id".into(), "v".into()]);
            case.sql = Some(format!(
                "INSERT INTO {table} (id, v) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET v = excluded.v, hits = {table}.hits + 1"
            ));
            let report = db.load_report(&case).await;
            assert!(report.failure.is_none(), "{:?}", report.failure);
            assert_eq!(report.rows_loaded, 5);
            let rows = db
                .client
                .query(&format!("SELECT id, v, hits FROM {table} ORDER BY id"), &[])
                .await
                .unwrap();
            let got: Vec<(i32, String, i32)> = rows
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            let two = if workers == 1 {
                "second".to_owned()
            } else {
                got[1].1.clone() // separate batches on separate connections
            };
            assert_eq!(
                got,
                vec![
                    (1, "new".into(), 2),
                    (2, two, 2),
                    (3, "c".into(), 1),
                    (4, "d".into(), 1),
                    (9, "untouched".into(), 1),
                ],
                "{method:?} {workers}"
            );
        }
    }
}

#[tokio::test]
async fn sql_option_errors_are_config_errors() {
    let db = Db::start().await;
    let mut case = Case::new("a int, b text", CopyFormat::Csv, b"1,x\n").method(Method::Pipeline);
    case.sql = Some("INSERT INTO nowhere VALUES ($1)".into());
    let e = db.load_err(&case).await;
    assert!(e.message().contains("nowhere"), "{e:?}");
    case.table_override = Some("params".into());
    db.client
        .batch_execute("CREATE TABLE params (a int, b text)")
        .await
        .unwrap();
    case.sql = Some("INSERT INTO params (a) VALUES ($1)".into());
    let e = db.load_err(&case).await;
    assert!(e.message().contains("1 parameters"), "{e:?}");
    case.sql = Some("INSERT INTO params VALUES ($1, $2)".into());
    let e = db.load_err(&case.clone().method(Method::Values)).await;
    assert!(e.message().contains("--sql"), "{e:?}");
    let mut values = case.clone().method(Method::Values);
    values.sql = None;
    values.batch_rows = Some(40_000);
    let e = db.load_err(&values).await;
    assert!(e.message().contains("--batch-rows"), "{e:?}");
}

/// A bad int in record `bad` (0-based) of 40; for binary, records before
/// it that the encoder defers, so tuple and record numbers differ.
fn bad_int_data(bad: usize, bad_value: &str) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..40 {
        let a = if i == bad {
            bad_value.to_owned()
        } else {
            i.to_string()
        };
        // Month-name dates go by text COPY under --method binary.
        let d = if i % 3 == 0 {
            "\"January 8, 1999\""
        } else {
            "1999-01-08"
        };
        // A quoted newline makes physical lines differ from records.
        out.push_str(&format!("{a},{d},\"row\n{i}\"\n"));
    }
    out.into_bytes()
}

#[tokio::test]
async fn every_method_reports_the_failing_record() {
    let db = Db::start().await;
    let def = "a int check (a < 1000), d date, t text";
    // 'x' fails in the input function (binary defers it to text COPY);
    // 5000 fails the CHECK (binary sends it in the binary COPY).
    for bad_value in ["x", "5000"] {
        for bad in [0, 17, 39] {
            for method in Method::ALL {
                for (workers, chunk) in [(1, 1 << 20), (2, 64)] {
                    let case = Case::new(def, CopyFormat::Csv, &bad_int_data(bad, bad_value))
                        .method(method)
                        .workers(workers)
                        .chunk(chunk);
                    let report = db.load_report(&case).await;
                    let what = format!("{method:?} {bad_value} at {bad}, chunk {chunk}");
                    assert!(report.failure.is_some(), "{what}");
                    let row = report
                        .failed_row
                        .unwrap_or_else(|| panic!("{what}: no row in {:?}", report.failure));
                    assert_eq!(row.record, bad as u64 + 1, "{what}: {row:?}");
                    assert_eq!(row.line, 2 * bad as u64 + 1, "{what}: {row:?}");
                    let sqlstate = if bad_value == "x" { "22P02" } else { "23514" };
                    assert_eq!(row.sqlstate.as_deref(), Some(sqlstate), "{what}");
                }
            }
        }
    }
}

#[tokio::test]
async fn malformed_records_fail_with_the_servers_error() {
    let db = Db::start().await;
    let data = "1,a\n2,b\n3,c,extra\n4,d\n";
    for method in Method::ALL {
        let case = Case::new("a int, b text", CopyFormat::Csv, data.as_bytes()).method(method);
        let report = db.load_report(&case).await;
        let row = report.failed_row.expect("a failed row");
        assert_eq!(row.record, 3, "{method:?}");
        assert!(row.message.contains("extra data"), "{method:?}: {row:?}");
    }
}

#[tokio::test]
async fn values_batches_and_identity_columns() {
    let db = Db::start().await;
    let mut data = String::new();
    for i in 0..2500 {
        data.push_str(&format!("{i},v{i}\n"));
    }
    let def = "id int generated always as identity, v text";
    for rows in [None, Some(1), Some(7), Some(32_767)] {
        let mut case = Case::new(def, CopyFormat::Csv, data.as_bytes())
            .method(Method::Values)
            .chunk(10_000);
        case.batch_rows = rows;
        db.check(&case).await;
    }
    for method in [Method::Pipeline, Method::Insert, Method::Binary] {
        db.check(&Case::new(def, CopyFormat::Csv, data.as_bytes()).method(method))
            .await;
    }
}

#[tokio::test]
async fn binary_input_with_insert_methods() {
    let db = Db::start().await;
    let file = db
        .server_binary_file(
            "SELECT g, 'r' || g, now()::timestamptz, NULL::numeric FROM generate_series(1, 500) g",
        )
        .await;
    let def = "a int, b text, c timestamptz, n numeric";
    for method in Method::ALL {
        for chunk in [100, 1 << 20] {
            let case = Case::new(def, CopyFormat::Binary, &file)
                .method(method)
                .workers(2)
                .chunk(chunk);
            db.check(&case).await;
        }
    }
}

/// Issue 11 part 2: the report names the method that ran, and the one
/// asked for: binary input asked to go by `--method binary` is already
/// binary COPY, so `copy` ran.
#[tokio::test]
async fn the_report_names_the_method_that_ran() {
    let db = Db::start().await;
    let file = db
        .server_binary_file("SELECT g FROM generate_series(1, 10) g")
        .await;
    let report = db
        .load_report(&Case::new("a int", CopyFormat::Binary, &file).method(Method::Binary))
        .await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!((report.method, report.method_requested), ("copy", "binary"));
    let report = db
        .load_report(&Case::new("a int, b text", CopyFormat::Csv, b"1,x\n").method(Method::Values))
        .await;
    assert_eq!(
        (report.method, report.method_requested),
        ("values", "values")
    );
}
