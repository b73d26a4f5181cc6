//! `--create`: tables inferred from the kinds of CSV people have (flights,
//! penguins with NA, weather, a wide census-like file, dates in several
//! styles, empty strings vs NULL), each load compared with server-side
//! `COPY FROM 'file'` into a copy of the created table; a later value that
//! does not fit (error naming line and column, or rejected); existing
//! tables, `--explain`, `--type`, stdin.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` (PG 17 in CI) or the default
//! binaries (Debian's PG 15).

mod support;

use std::path::Path;
use std::sync::Arc;

use pgtide::copyopts::{CopyFormat, Header};
use pgtide::ident::QualifiedName;
use pgtide::infer::create::Create;
use pgtide::load::{self, LoadOptions, Report};
use pgtide::progress::Progress;
use support::{assert_same_rows, Compress, Db};

/// Options for loading `path` into `table` with `--header --create`.
fn opts(path: &Path, table: &str) -> LoadOptions {
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.copy.header = Header::Skip;
    o.create = Some(Create::default());
    o
}

async fn run(db: &Db, o: &LoadOptions) -> Report {
    load::run(&db.target, o, Arc::new(Progress::new(o.workers)))
        .await
        .expect("load starts")
}

/// Column names and types of `table`, in order.
async fn columns(db: &Db, table: &str) -> Vec<(String, String)> {
    db.client
        .query(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn type_of<'a>(cols: &'a [(String, String)], name: &str) -> &'a str {
    &cols
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no column {name} in {cols:?}"))
        .1
}

/// The load is clean and equals server-side COPY of the same file into a
/// table made like the created one.
async fn check_same_as_server(db: &Db, o: &LoadOptions, table: &str, report: &Report) {
    assert!(report.failure.is_none(), "{table}: {:?}", report.failure);
    assert_eq!(report.rows_read, report.rows_loaded, "{table}");
    let want = format!("{table}_want");
    let null = o
        .copy
        .null
        .as_ref()
        .map(|n| format!(", NULL '{n}'"))
        .unwrap_or_default();
    db.client
        .batch_execute(&format!(
            "CREATE TABLE {want} (LIKE {table}); \
             COPY {want} FROM '{}' WITH (FORMAT csv, HEADER true{null})",
            o.inputs[0]
        ))
        .await
        .unwrap();
    assert_same_rows(&db.client, table, &want, table).await;
}

fn flights(n: usize) -> String {
    let mut s = String::from(
        "year,month,day,dep_time,dep_delay,arr_delay,carrier,flight,tailnum,origin,dest,air_time,distance,time_hour\n",
    );
    let carriers = ["UA", "AA", "B6", "DL"];
    for i in 0..n {
        let dep = 500 + (i * 7) % 1800;
        let delay = (i as i64 * 13) % 90 - 20;
        // Cancelled flights have no arrival delay or air time.
        let (arr, air) = if i % 37 == 0 {
            (String::new(), String::new())
        } else {
            ((delay - 5).to_string(), (30 + i % 400).to_string())
        };
        s.push_str(&format!(
            "2013,{},{},{dep},{delay},{arr},{},{},N{:05}X,EWR,IAH,{air},{},2013-{:02}-{:02} {:02}:00:00\n",
            1 + i % 12,
            1 + i % 28,
            carriers[i % 4],
            100 + i % 4000,
            i % 40000,
            200 + i % 4800,
            1 + i % 12,
            1 + i % 28,
            5 + i % 18,
        ));
    }
    s
}

#[tokio::test]
async fn flights_like() {
    let db = Db::start().await;
    let path = db.file(flights(3000).as_bytes(), Compress::None);
    let mut o = opts(&path, "flights");
    // Part of the file: integers stay integer (smallint only when every
    // row was seen).
    o.create.as_mut().unwrap().sample_rows = 500;
    let report = run(&db, &o).await;
    let cols = columns(&db, "flights").await;
    for (c, t) in [
        ("year", "integer"),
        ("dep_time", "integer"),
        ("dep_delay", "integer"),
        ("arr_delay", "integer"),
        ("carrier", "text"),
        ("tailnum", "text"),
        ("air_time", "integer"),
        ("time_hour", "timestamp without time zone"),
    ] {
        assert_eq!(type_of(&cols, c), t, "{c}");
    }
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("created table public.flights")),
        "{:?}",
        report.notes
    );
    check_same_as_server(&db, &o, "flights", &report).await;
    let nulls: i64 = db
        .client
        .query_one("SELECT count(*) FROM flights WHERE arr_delay IS NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(nulls, 3000 / 37 + 1);
}

fn penguins() -> String {
    let mut s = String::from(
        "\"species\",\"island\",\"bill_length_mm\",\"bill_depth_mm\",\"flipper_length_mm\",\"body_mass_g\",\"sex\",\"year\"\n",
    );
    let species = ["Adelie", "Gentoo", "Chinstrap"];
    for i in 0..344 {
        if i % 90 == 3 {
            s.push_str(&format!(
                "\"{}\",\"Torgersen\",NA,NA,NA,NA,NA,2007\n",
                species[i % 3]
            ));
            continue;
        }
        let sex = if i % 11 == 0 {
            "NA"
        } else if i % 2 == 0 {
            "\"male\""
        } else {
            "\"female\""
        };
        s.push_str(&format!(
            "\"{}\",\"Biscoe\",{}.{},{}.{},{},{},{sex},{}\n",
            species[i % 3],
            34 + i % 20,
            i % 10,
            14 + i % 8,
            (i * 3) % 10,
            172 + i % 60,
            2700 + (i * 37) % 3600,
            2007 + i % 3
        ));
    }
    s
}

#[tokio::test]
async fn penguins_with_na() {
    let db = Db::start().await;
    let path = db.file(penguins().as_bytes(), Compress::None);
    // Without --null NA, NA is a value: the columns holding it are text,
    // and the plan says what they would be.
    let o = opts(&path, "penguins_raw");
    let plan = load::create::explain(&db.target, &o).await.unwrap();
    let text = plan.explain();
    assert!(
        text.contains("CREATE TABLE public.penguins_raw ("),
        "{text}"
    );
    assert!(
        text.contains("numeric(3, 1) if \"NA\" meant NULL (--null)"),
        "{text}"
    );
    let report = run(&db, &o).await;
    let cols = columns(&db, "penguins_raw").await;
    assert_eq!(type_of(&cols, "bill_length_mm"), "text");
    assert_eq!(type_of(&cols, "year"), "smallint");
    check_same_as_server(&db, &o, "penguins_raw", &report).await;

    // With --null NA the measurements are numbers. The whole file was
    // sampled, so exact types: numeric(p,s) and smallint.
    let mut o = opts(&path, "penguins");
    o.copy.null = Some("NA".into());
    let report = run(&db, &o).await;
    let cols = columns(&db, "penguins").await;
    assert_eq!(type_of(&cols, "bill_length_mm"), "numeric(3,1)");
    assert_eq!(type_of(&cols, "flipper_length_mm"), "smallint");
    assert_eq!(type_of(&cols, "body_mass_g"), "smallint");
    assert_eq!(type_of(&cols, "sex"), "text");
    assert_eq!(type_of(&cols, "year"), "smallint");
    check_same_as_server(&db, &o, "penguins", &report).await;
}

fn weather(n: usize) -> String {
    let mut s = String::from(
        "station,observed_at,temp_c,pressure_hpa,humidity,raining,sunrise,daylight,meta\n",
    );
    for i in 0..n {
        let temp = if i % 50 == 7 {
            "NaN".to_string()
        } else {
            format!("{:.1}e0", (i % 400) as f64 / 10.0 - 5.0)
        };
        let precip_meta = if i % 5 == 0 {
            String::new() // NULL
        } else {
            format!(
                "\"{{\"\"src\"\":\"\"sensor-{}\"\",\"\"ok\"\":true}}\"",
                i % 3
            )
        };
        s.push_str(&format!(
            "{:08x}-0000-4000-8000-{:012x},2024-{:02}-{:02}T{:02}:00:00{},{temp},{}.{},{},{},0{}:{:02}:00,{} hours,{precip_meta}\n",
            i % 7,
            i % 7,
            1 + i % 12,
            1 + i % 28,
            i % 24,
            ["Z", "+01:00", "-0530"][i % 3],
            980 + i % 60,
            i % 10,
            i % 101,
            if i % 3 == 0 { "t" } else { "f" },
            5 + i % 3,
            i % 60,
            8 + i % 8,
        ));
    }
    s
}

#[tokio::test]
async fn weather_types() {
    let db = Db::start().await;
    let path = db.file(weather(2000).as_bytes(), Compress::None);
    let mut o = opts(&path, "weather");
    o.workers = 3;
    o.chunk_bytes = 16 << 10;
    o.create.as_mut().unwrap().sample_rows = 500;
    let report = run(&db, &o).await;
    let cols = columns(&db, "weather").await;
    for (c, t) in [
        ("station", "uuid"),
        ("observed_at", "timestamp with time zone"),
        ("temp_c", "double precision"),
        ("pressure_hpa", "numeric"),
        ("humidity", "integer"),
        ("raining", "boolean"),
        ("sunrise", "time without time zone"),
        ("daylight", "interval"),
        ("meta", "jsonb"),
    ] {
        assert_eq!(type_of(&cols, c), t, "{c}");
    }
    check_same_as_server(&db, &o, "weather", &report).await;
}

#[tokio::test]
async fn wide_census_names_and_zip_codes() {
    let db = Db::start().await;
    let mut header = vec![
        "GEOID".to_string(),
        "ZIP".into(),
        "Name".into(),
        "".into(),
        "order".into(),
        "pop total".into(),
        "pop total".into(),
    ];
    for k in 0..120 {
        header.push(format!("B01001_{k:03}E"));
    }
    let mut s = header.join(",") + "\n";
    for i in 0..500u64 {
        let mut row = vec![
            format!("{:011}", 10_000_000_000 + i * 7),
            format!("{:05}", (i * 137) % 99999), // leading zeros: text
            format!("\"Tract {i}, County\""),
            i.to_string(),
            (i % 3).to_string(),
            (i * 1000).to_string(),
            (i * 30_000_000).to_string(),
        ];
        for k in 0..120u64 {
            row.push(if k % 10 == 0 {
                format!("{}.{:02}", i + k, (i * k) % 100)
            } else {
                ((i + 1) * (k + 1)).to_string()
            });
        }
        s.push_str(&(row.join(",") + "\n"));
    }
    let path = db.file(s.as_bytes(), Compress::Gzip);
    let mut o = opts(&path, "census");
    o.create.as_mut().unwrap().sample_rows = 100; // gzip: the head only
    let report = run(&db, &o).await;
    let cols = columns(&db, "census").await;
    assert_eq!(cols.len(), 127);
    assert_eq!(cols[0], ("GEOID".into(), "bigint".into()));
    assert_eq!(cols[1], ("ZIP".into(), "text".into()));
    assert_eq!(cols[3].0, "c4");
    assert_eq!(cols[4], ("order".into(), "integer".into()));
    assert_eq!(cols[5].0, "pop total");
    assert_eq!(cols[6], ("pop total_2".into(), "bigint".into()));
    assert_eq!(type_of(&cols, "B01001_000E"), "numeric");
    assert_eq!(type_of(&cols, "B01001_001E"), "integer");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n == "column 4: empty header field -> c4"),
        "{:?}",
        report.notes
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("header \"pop total\" -> \"pop total_2\"")),
        "{:?}",
        report.notes
    );
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_loaded, 500);
    let zip: String = db
        .client
        .query_one("SELECT \"ZIP\" FROM census WHERE c4 = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(zip, "00137");
}

#[tokio::test]
async fn dates_in_several_styles() {
    let db = Db::start().await;
    let mut s = String::from("iso,us,eu,written,compact,stamp,mixed\n");
    for i in 0..300 {
        let (m, d) = (1 + i % 12, 1 + i % 28);
        s.push_str(&format!(
            "2024-{m:02}-{d:02},{m:02}/{d:02}/2024,{d:02}.{m:02}.2024,\"{d} Mar 2024\",2024{m:02}{d:02},2024-{m:02}-{d:02} 10:{:02},{}\n",
            i % 60,
            if i % 2 == 0 { format!("2024-{m:02}-{d:02}") } else { format!("{m:02}/{d:02}/2024") },
        ));
    }
    let path = db.file(s.as_bytes(), Compress::None);
    let o = opts(&path, "dates");
    let report = run(&db, &o).await;
    let cols = columns(&db, "dates").await;
    for (c, t) in [
        ("iso", "date"),
        ("us", "text"),
        ("eu", "text"),
        ("written", "text"),
        ("compact", "integer"),
        ("stamp", "timestamp without time zone"),
        ("mixed", "text"),
    ] {
        assert_eq!(type_of(&cols, c), t, "{c}");
    }
    check_same_as_server(&db, &o, "dates", &report).await;

    // --type says what a US date is (DateStyle MDY, the default).
    let mut o = opts(&path, "dates_typed");
    o.create.as_mut().unwrap().types = vec![("us".into(), "date".into())];
    let report = run(&db, &o).await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    let cols = columns(&db, "dates_typed").await;
    assert_eq!(type_of(&cols, "us"), "date");
    let same: bool = db
        .client
        .query_one("SELECT bool_and(us = iso) FROM dates_typed", &[])
        .await
        .unwrap()
        .get(0);
    assert!(same);
}

#[tokio::test]
async fn empty_strings_are_not_nulls() {
    let db = Db::start().await;
    let path = db.file(b"id,note,n\n1,,5\n2,\"\",6\n3,x,\n", Compress::None);
    let o = opts(&path, "empties");
    let report = run(&db, &o).await;
    check_same_as_server(&db, &o, "empties", &report).await;
    let cols = columns(&db, "empties").await;
    assert_eq!(type_of(&cols, "note"), "text");
    assert_eq!(type_of(&cols, "n"), "smallint");
    let rows: Vec<(i16, Option<String>)> = db
        .client
        .query("SELECT id, note FROM empties ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        rows,
        [(1, None), (2, Some(String::new())), (3, Some("x".into()))]
    );
}

/// 20,000 integers, then one decimal far from every sampled record.
fn late_misfit() -> (String, u64) {
    let mut s = String::from("id,n\n");
    let bad_line = 19_990u64;
    for i in 2..=20_001u64 {
        if i == bad_line {
            s.push_str(&format!("{i},12.5\n"));
        } else {
            s.push_str(&format!("{i},{}\n", i % 1000));
        }
    }
    (s, bad_line)
}

#[tokio::test]
async fn a_later_value_that_does_not_fit() {
    let db = Db::start().await;
    let (data, bad_line) = late_misfit();
    let path = db.file(data.as_bytes(), Compress::None);
    let mut o = opts(&path, "late");
    o.create.as_mut().unwrap().sample_rows = 100;
    let plan = load::create::explain(&db.target, &o).await.unwrap();
    assert_eq!(plan.type_of("n"), Some("integer"), "{}", plan.explain());
    assert!(!plan.complete);
    assert!(
        plan.rows_sampled > 100,
        "probes add records: {}",
        plan.rows_sampled
    );

    // Without --rejects: the line, the column, and what to do.
    let report = run(&db, &o).await;
    let e = report.failure.expect("the decimal stops the load");
    assert!(
        e.message().contains(&format!(":{bad_line}: column n")),
        "{}",
        e.message()
    );
    let hint = e.hint().unwrap();
    assert!(hint.contains("--type n=TYPE"), "{hint}");
    assert!(hint.contains("--sample-rows"), "{hint}");
    assert!(hint.contains("DROP TABLE public.late"), "{hint}");
    assert!(hint.contains("--rejects"), "{hint}");

    // In one transaction the table went with the load: nothing to drop.
    // With the type given by --type, the sample is not to blame.
    let mut o1 = opts(&path, "late1");
    o1.create.as_mut().unwrap().sample_rows = 100;
    o1.create.as_mut().unwrap().types = vec![("n".into(), "integer".into())];
    o1.single_transaction = true;
    let report = run(&db, &o1).await;
    let hint = report
        .failure
        .expect("the decimal stops it")
        .hint()
        .unwrap()
        .to_owned();
    assert!(!hint.contains("DROP TABLE"), "{hint}");
    assert!(hint.contains("rolled back"), "{hint}");
    assert!(hint.contains("given by --type"), "{hint}");
    assert!(!hint.contains("--sample-rows"), "{hint}");
    assert!(report
        .notes
        .iter()
        .any(|n| n.contains("rolled back with the load")));

    // With --rejects: every other row is loaded, the misfit is rejected
    // with its line.
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(&path, "late2");
    o.create.as_mut().unwrap().sample_rows = 100;
    o.rejects = Some(dir.path().join("late.rejects"));
    let report = run(&db, &o).await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!((report.rows_loaded, report.rows_rejected), (19_999, 1));
    let rejected = std::fs::read_to_string(dir.path().join("late.rejects")).unwrap();
    assert_eq!(rejected, format!("id,n\n{bad_line},12.5\n"));
    let log = std::fs::read_to_string(dir.path().join("late.rejects.log")).unwrap();
    assert!(log.contains(&format!("\"line\":{bad_line}")), "{log}");
}

#[tokio::test]
async fn existing_tables_explain_type_and_stdin() {
    let db = Db::start().await;
    let path = db.file(b"a,b\n1,x\n2,y\n", Compress::None);

    // --explain creates nothing and loads nothing.
    let o = opts(&path, "t1");
    let plan = load::create::explain(&db.target, &o).await.unwrap();
    assert!(plan.explain().contains("CREATE TABLE public.t1 ("));
    assert!(
        plan.sql
            .starts_with("CREATE TABLE public.t1 (a smallint, b text)"),
        "{}",
        plan.sql
    );
    let exists: bool = db
        .client
        .query_one("SELECT to_regclass('t1') IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!exists);

    // A bad --type fails before anything is created.
    let mut bad = opts(&path, "t1");
    bad.create.as_mut().unwrap().types = vec![("b".into(), "no_such_type".into())];
    let e = load::run(&db.target, &bad, Arc::new(Progress::new(1)))
        .await
        .expect_err("unknown type");
    assert!(e.message().contains("no_such_type"), "{}", e.message());
    let mut bad = opts(&path, "t1");
    bad.create.as_mut().unwrap().types = vec![("zz".into(), "text".into())];
    let e = load::create::explain(&db.target, &bad).await.err().unwrap();
    assert!(e.hint().unwrap().contains("a, b"), "{e:?}");

    // Created and loaded; a second --create is refused, if-not-exists
    // loads into it as it is.
    let report = run(&db, &o).await;
    assert_eq!(report.rows_loaded, 2);
    let e = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .expect_err("exists");
    assert!(e.message().contains("already exists"), "{}", e.message());
    assert!(e.hint().unwrap().contains("--create=if-not-exists"));
    let mut again = opts(&path, "t1");
    again.create.as_mut().unwrap().if_not_exists = true;
    let report = run(&db, &again).await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert!(report.notes.iter().any(|n| n.contains("exists")));
    let n: i64 = db
        .client
        .query_one("SELECT count(*) FROM t1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 4);

    // stdin cannot be sampled and then loaded.
    let mut stdin = opts(&path, "t2");
    stdin.inputs = vec!["-".into()];
    let e = load::run(&db.target, &stdin, Arc::new(Progress::new(1)))
        .await
        .err()
        .unwrap();
    assert!(e.message().contains("stdin"), "{}", e.message());

    // No header: c1..cn, the mapping reported.
    let mut nohead = opts(&path, "t3");
    nohead.copy.header = Header::None;
    let plan = load::create::explain(&db.target, &nohead).await.unwrap();
    assert!(plan.sql.contains("(c1 text, c2 text)"), "{}", plan.sql);
}
