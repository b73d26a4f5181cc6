//! Issue 8, A1 and A2: line endings as PostgreSQL reads them (`\n`,
//! `\r\n`, a lone `\r`; the first line settles the style) and the server's
//! `line N` mapped back to the right input row, with quoted line breaks at
//! chunk starts, at every chunk size and worker count.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use pgtide::copyopts::{CopyFormat, Header};
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method, Report};
use pgtide::progress::Progress;
use support::{Case, Compress, Db};

/// Loads `data` (CSV) into `table` with `--rejects`; returns the report
/// and the rejected (record, sqlstate) pairs from the log.
async fn load_with_rejects(
    db: &Db,
    table: &str,
    data: &[u8],
    workers: usize,
    chunk: usize,
    header: Header,
) -> (Report, Vec<(u64, String)>) {
    load_format_with_rejects(db, table, CopyFormat::Csv, data, workers, chunk, header).await
}

/// [`load_with_rejects`] in any format.
async fn load_format_with_rejects(
    db: &Db,
    table: &str,
    format: CopyFormat,
    data: &[u8],
    workers: usize,
    chunk: usize,
    header: Header,
) -> (Report, Vec<(u64, String)>) {
    let method = Method::Copy;
    load_method_with_rejects(db, table, format, method, data, workers, chunk, header).await
}

/// [`load_with_rejects`] in any format, by any method.
#[allow(clippy::too_many_arguments)]
async fn load_method_with_rejects(
    db: &Db,
    table: &str,
    format: CopyFormat,
    method: Method,
    data: &[u8],
    workers: usize,
    chunk: usize,
    header: Header,
) -> (Report, Vec<(u64, String)>) {
    load_tweaked_with_rejects(db, table, format, data, |o| {
        o.copy.header = header;
        o.method = method;
        o.workers = workers;
        o.chunk_bytes = chunk;
    })
    .await
}

/// Loads `data` into `table` with `--rejects` and the options `tweak`
/// sets; returns the report and the rejected (record, sqlstate) pairs.
async fn load_tweaked_with_rejects(
    db: &Db,
    table: &str,
    format: CopyFormat,
    data: &[u8],
    tweak: impl FnOnce(&mut LoadOptions),
) -> (Report, Vec<(u64, String)>) {
    let file = db.file(data, Compress::None);
    let dir = tempfile::tempdir().unwrap();
    let rejects = dir.path().join("r.csv");
    let mut o = LoadOptions::new(
        vec![file.to_string_lossy().into_owned()],
        QualifiedName::parse(table).unwrap(),
        format,
    );
    tweak(&mut o);
    o.rejects = Some(rejects.clone());
    let report = load::run(&db.target, &o, Arc::new(Progress::new(o.workers)))
        .await
        .expect("load starts");
    let log = std::fs::read_to_string(pgtide::reject::log_path(&rejects)).unwrap_or_default();
    let rejected = log
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["record"].as_u64().unwrap(),
                v["sqlstate"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (report, rejected)
}

/// A fresh `(id int, v text)` table.
async fn new_table(db: &Db, table: &str) {
    db.client
        .batch_execute(&format!("CREATE TABLE {table} (id int, v text)"))
        .await
        .unwrap();
}

async fn ids(db: &Db, table: &str) -> Vec<i32> {
    db.client
        .query(&format!("SELECT id FROM {table} ORDER BY id"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
async fn lone_cr_files_load_like_server_copy() {
    let db = Db::start().await;
    let csv = b"id,v\r1,a\r2,\"b\r\nc\"\r3,c\r";
    let text = b"1\ta\r2\tb\\\rx\r3\t\\N\r";
    for workers in [1, 3] {
        for chunk in [1, 5, 1 << 20] {
            let case = Case::new("id int, v text", CopyFormat::Csv, csv)
                .header(Header::Skip)
                .workers(workers)
                .chunk(chunk);
            db.check(&case).await;
            let case = Case::new("id int, v text", CopyFormat::Text, text)
                .workers(workers)
                .chunk(chunk);
            db.check(&case).await;
            let crlf = b"id,v\r\n1,\"a\rb\"\r\n2,\"x\ny\"\r\n3,z";
            let case = Case::new("id int, v text", CopyFormat::Csv, crlf)
                .header(Header::Skip)
                .workers(workers)
                .chunk(chunk);
            db.check(&case).await;
        }
    }
    // Every method reads the records the same way.
    for m in [
        load::Method::Binary,
        load::Method::Pipeline,
        load::Method::Values,
        load::Method::Insert,
    ] {
        for (format, data) in [(CopyFormat::Csv, &csv[5..]), (CopyFormat::Text, &text[..])] {
            let case = Case::new("id int, v text", format, data).method(m).chunk(7);
            db.check(&case).await;
        }
    }
    // The issue's report: with a header, 3 rows, not 0.
    let report = db
        .load_report(
            &Case::new("id int, v text", CopyFormat::Csv, b"id,v\r1,a\r2,b\r3,c\r")
                .header(Header::Skip),
        )
        .await;
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!((report.rows_read, report.rows_loaded), (3, 3));
}

#[tokio::test]
async fn quoted_crlf_in_a_chunks_first_row_maps_errors_to_the_right_row() {
    let db = Db::start().await;
    let data = b"1,\"a\r\nb\"\r\n2,x\r\nbad,y\r\n4,z\r\n";
    let mut n = 0;
    for workers in [1, 3] {
        for chunk in [1, 13, 1 << 20] {
            n += 1;
            let table = format!("m{n}");
            new_table(&db, &table).await;
            let (report, rejected) =
                load_with_rejects(&db, &table, data, workers, chunk, Header::None).await;
            let ctx = format!("workers {workers} chunk {chunk}");
            assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
            assert_eq!(
                (report.rows_read, report.rows_loaded, report.rows_rejected),
                (4, 3, 1),
                "{ctx}"
            );
            assert_eq!(rejected, [(3, "22P02".to_owned())], "{ctx}");
            assert_eq!(ids(&db, &table).await, [1, 2, 4], "{ctx}");
        }
    }
    // Without --rejects the error names the right line (lines 1-2 are the
    // first row, `bad,y` is line 4).
    let err = db
        .load_err(&Case::new("id int, v text", CopyFormat::Csv, data))
        .await;
    assert!(err.message().contains(":4:"), "{}", err.message());
    assert!(err.message().contains("bad"), "{}", err.message());
}

/// Rows whose line break does not fit the file's style are rejected with
/// the server's own error, never sent (a COPY starting with one would
/// settle on the wrong style), and the rows around them load.
#[tokio::test]
async fn rows_with_misfit_line_endings_are_rejected_not_misread() {
    let db = Db::start().await;
    // `\n` file: line 2 ends in `\r\n`, line 4 holds a lone `\r`.
    let data = b"1,a\n2,b\r\n3,c\n4,d\re\n5,f\n";
    let mut n = 0;
    for workers in [1, 3] {
        for chunk in [1, 6, 1 << 20] {
            n += 1;
            let table = format!("x{n}");
            new_table(&db, &table).await;
            let (report, rejected) =
                load_with_rejects(&db, &table, data, workers, chunk, Header::None).await;
            let ctx = format!("workers {workers} chunk {chunk}");
            assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
            assert_eq!(
                (report.rows_read, report.rows_loaded, report.rows_rejected),
                (5, 3, 2),
                "{ctx}"
            );
            assert_eq!(
                rejected,
                [(2, "22P04".to_owned()), (4, "22P04".to_owned())],
                "{ctx}"
            );
            assert_eq!(ids(&db, &table).await, [1, 3, 5], "{ctx}");
        }
    }
    // The server itself refuses the whole file; without --rejects pgtide
    // stops at the same row with the server's message.
    let err = db
        .load_err(&Case::new("id int, v text", CopyFormat::Csv, data))
        .await;
    assert!(
        err.message()
            .contains(":2: unquoted carriage return found in data"),
        "{}",
        err.message()
    );
    assert_eq!(err.sqlstate(), Some("22P04"));
}

/// A tiny deterministic generator (xorshift), so that failures repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random CSV file in one line-ending style, full of quoted `\r`, `\n`
/// and `\r\n` (so chunks often start with a multi-line row), with some
/// rows the server rejects. Returns the bytes, the good ids and the
/// 1-based records of the bad rows.
fn random_file(rng: &mut Rng) -> (Vec<u8>, BTreeSet<i32>, Vec<u64>) {
    let eol: &[u8] = [&b"\n"[..], b"\r\n", b"\r"][rng.below(3) as usize];
    let breaks: [&[u8]; 3] = [b"\n", b"\r\n", b"\r"];
    let mut data = Vec::new();
    let mut good = BTreeSet::new();
    let mut bad = Vec::new();
    let rows = 10 + rng.below(30) as i32;
    for id in 1..=rows {
        if rng.below(5) == 0 {
            data.extend_from_slice(format!("x{id},").as_bytes());
            bad.push(id as u64);
        } else {
            data.extend_from_slice(format!("{id},").as_bytes());
            good.insert(id);
        }
        if rng.below(2) == 0 {
            data.push(b'"');
            for _ in 0..rng.below(3) {
                data.extend_from_slice(b"v");
                data.extend_from_slice(breaks[rng.below(3) as usize]);
            }
            data.extend_from_slice(b"\"\"w\"");
        } else {
            data.extend_from_slice(b"plain");
        }
        if id < rows || rng.below(2) == 0 {
            data.extend_from_slice(eol);
        }
    }
    (data, good, bad)
}

#[tokio::test]
async fn random_files_with_quoted_line_breaks_map_every_error_exactly() {
    let db = Db::start().await;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut n = 0;
    for _ in 0..8 {
        let (data, good, bad) = random_file(&mut rng);
        for (workers, chunk) in [(1, 1), (1, 17), (3, 40), (2, 1 << 20)] {
            n += 1;
            let table = format!("r{n}");
            new_table(&db, &table).await;
            let (report, rejected) =
                load_with_rejects(&db, &table, &data, workers, chunk, Header::None).await;
            let ctx = format!(
                "workers {workers} chunk {chunk} file {:?}",
                String::from_utf8_lossy(&data)
            );
            assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
            let got: Vec<u64> = rejected.iter().map(|r| r.0).collect();
            assert_eq!(got, bad, "{ctx}");
            let loaded: BTreeSet<i32> = ids(&db, &table).await.into_iter().collect();
            assert_eq!(loaded, good, "{ctx}");
            assert_eq!(report.rows_loaded as usize, good.len(), "{ctx}");
        }
    }
}

/// Text `\.` in the middle of a row: up to PostgreSQL 17 it ends the data
/// (the row keeps what came before it); from 18 the server rejects that
/// row and reads on, and so must pgtide's chunking, or the rows after it
/// would be dropped as "after the end marker".
#[tokio::test]
async fn a_mid_row_end_marker_follows_the_servers_version() {
    let db = Db::start().await;
    let data = b"1\ta\n2\tb\\.\n3\tc\n";
    for chunk in [1, 1 << 20] {
        let table = format!("mid{chunk}");
        new_table(&db, &table).await;
        let (report, _) =
            load_format_with_rejects(&db, &table, CopyFormat::Text, data, 1, chunk, Header::None)
                .await;
        assert!(report.failure.is_none(), "{:?}", report.failure);
        if db.cluster.bin().version() >= 18 {
            assert_eq!((report.rows_loaded, report.rows_rejected), (2, 1));
            assert_eq!(ids(&db, &table).await, [1, 3]);
        } else {
            assert_eq!((report.rows_loaded, report.rows_rejected), (2, 0));
            assert_eq!(ids(&db, &table).await, [1, 2]);
        }
    }
}

/// Issue 8 (outside testing): `\.` followed by a line break of another
/// style than the file's, or by nothing at the end of the input, is not
/// the end marker. PostgreSQL rejects such a line (or, in CSV, reads an
/// unterminated `\.` as data), and reads nothing after an error; pgtide
/// stopped there instead and dropped the rows after it with exit 0. Now
/// the line is a row like any other: rejected with the server's reason,
/// and every method loads the same rows.
#[tokio::test]
async fn end_markers_the_server_refuses_are_rows_not_the_end() {
    let db = Db::start().await;
    let v18 = db.cluster.bin().version() >= 18;
    // (format, data, ids loaded, records rejected with their SQLSTATE)
    type Case = (
        CopyFormat,
        &'static [u8],
        &'static [i32],
        Vec<(u64, &'static str)>,
    );
    let cases: Vec<Case> = vec![
        (
            CopyFormat::Csv,
            b"1,a\n\\.\r\n3,c\n",
            &[1, 3],
            vec![(2, "22P04")],
        ),
        (
            CopyFormat::Csv,
            b"1,a\r\n\\.\n3,c\r\n",
            &[1, 3],
            vec![(2, "22P04")],
        ),
        (
            CopyFormat::Text,
            b"1\ta\n\\.\r\n3\tc\n",
            &[1, 3],
            vec![(2, "22P04")],
        ),
        (
            CopyFormat::Text,
            b"1\ta\r\\.\n3\tc\r",
            &[1],
            vec![(2, "22P04")],
        ),
        // Unterminated: CSV data (not an integer), a text error.
        (CopyFormat::Csv, b"1,a\n\\.", &[1], vec![(2, "22P02")]),
        (CopyFormat::Text, b"1\ta\n\\.", &[1], vec![(2, "22P04")]),
        (
            CopyFormat::Text,
            b"1\ta\\.b\n2\tc\n",
            &[2],
            vec![(1, "22P04")],
        ),
    ];
    for (i, (format, data, loaded, rejected)) in cases.into_iter().enumerate() {
        for method in [
            Method::Copy,
            Method::Binary,
            Method::Pipeline,
            Method::Values,
        ] {
            let table = format!("marker{i}_{}", method.name());
            new_table(&db, &table).await;
            let (report, got) = load_method_with_rejects(
                &db,
                &table,
                format,
                method,
                data,
                1,
                1 << 20,
                Header::None,
            )
            .await;
            let ctx = format!(
                "{format:?} {:?} {}",
                String::from_utf8_lossy(data),
                method.name()
            );
            assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
            assert_eq!(ids(&db, &table).await, loaded, "{ctx}");
            let want: Vec<(u64, String)> =
                rejected.iter().map(|(r, s)| (*r, s.to_string())).collect();
            assert_eq!(got, want, "{ctx} (PG 18: {v18})");
        }
    }
}

/// Outside testing: in Shift JIS (and Big5, GBK, UHC, GB18030, JOHAB) a
/// character's second byte may be `0x5C`, the backslash: `表` is
/// `0x95 0x5C`. The server skips a character's bytes when it looks for
/// line ends; pgtide read that `0x5C` as an escape of the line break, so
/// two rows became one, and with `--rejects` on PostgreSQL 17 the row
/// after it vanished with exit 0. Every chunk size and worker count must
/// find the server's rows.
#[tokio::test]
async fn sjis_characters_holding_a_backslash_byte_do_not_join_rows() {
    let db = Db::start().await;
    let text: &[u8] = b"1\ta\t\x95\x5c\nx2\tb\tc\n3\td\te\n4\tf\t\x95\x5c\x95\x5c\n";
    let csv: &[u8] = b"1,a,\"\x95\x5c\"\nx2,b,c\n3,d,e\n4,f,\x95\x5c\x95\x5c\n";
    for (format, data) in [(CopyFormat::Text, text), (CopyFormat::Csv, csv)] {
        for (workers, chunk) in [(1, 1 << 20), (2, 1), (2, 7)] {
            let table = format!("sjis_{format:?}_{workers}_{chunk}").to_lowercase();
            db.client
                .batch_execute(&format!("CREATE TABLE {table} (id int, a text, b text)"))
                .await
                .unwrap();
            let (report, rejected) = load_tweaked_with_rejects(&db, &table, format, data, |o| {
                o.copy.encoding = Some("SJIS".into());
                if format == CopyFormat::Csv {
                    o.copy.escape = Some(b'\\');
                }
                o.workers = workers;
                o.chunk_bytes = chunk;
            })
            .await;
            let ctx = format!("{format:?} workers {workers} chunk {chunk}");
            assert_eq!(report.rows_read, 4, "{ctx}");
            assert_eq!((report.rows_loaded, report.rows_rejected), (3, 1), "{ctx}");
            assert_eq!(rejected, [(2, "22P02".to_owned())], "{ctx}");
            let rows: Vec<(i32, String)> = db
                .client
                .query(&format!("SELECT id, b FROM {table} ORDER BY id"), &[])
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let want = [(1, "表"), (3, "e"), (4, "表表")];
            let want: Vec<(i32, String)> = want.iter().map(|(i, s)| (*i, s.to_string())).collect();
            assert_eq!(rows, want, "{ctx}");
        }
    }
}

/// A backslash before a Shift JIS character whose second byte is `0x5C`
/// (`Ы` is `0x84 0x5C`): PostgreSQL 14+ splits lines after converting to
/// its own encoding, so the backslash escapes the whole character. pgtide
/// skipped one byte after the backslash and read that `0x5C` as another
/// one, escaping the line break: the server found two rows in a batch
/// pgtide counted as one ("this is a bug", after committing them).
#[tokio::test]
async fn sjis_character_after_a_backslash_is_escaped_whole() {
    let db = Db::start().await;
    let data: &[u8] = b"1\ta\t\\\x84\x5c\n2\tb\tc\n3\td\t\\\x84\x5c\\\x84\x5c\n";
    for (workers, chunk) in [(1, 1 << 20), (2, 1), (2, 9)] {
        let table = format!("sjis_esc_{workers}_{chunk}");
        db.client
            .batch_execute(&format!("CREATE TABLE {table} (id int, a text, b text)"))
            .await
            .unwrap();
        let (report, rejected) =
            load_tweaked_with_rejects(&db, &table, CopyFormat::Text, data, |o| {
                o.copy.encoding = Some("SJIS".into());
                o.workers = workers;
                o.chunk_bytes = chunk;
            })
            .await;
        let ctx = format!("workers {workers} chunk {chunk}");
        assert!(report.failure.is_none(), "{ctx}: {:?}", report.failure);
        assert_eq!((report.rows_read, report.rows_loaded), (3, 3), "{ctx}");
        assert!(rejected.is_empty(), "{ctx}: {rejected:?}");
        let rows: Vec<String> = db
            .client
            .query(&format!("SELECT b FROM {table} ORDER BY id"), &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(rows, ["Ы", "c", "ЫЫ"], "{ctx}");
    }
}

/// The reject file keeps each rejected record's bytes as they were: in a
/// lone-`\r` file a record ends with `\r`, and no `\n` is added after it
/// (one was, making `\r\n` lines); only a last record without any line
/// break gets one, in the input's style (it was always `\n`, so a fixed
/// reject file of `\r\n` rows was refused when loaded again).
#[tokio::test]
async fn rejected_lone_cr_records_keep_their_line_breaks() {
    let db = Db::start().await;
    new_table(&db, "rc").await;
    for (data, want) in [
        (&b"1,a\rx,b\r3,c\ry,d\r"[..], &b"x,b\ry,d\r"[..]),
        (&b"1,a\nx,b\n3,c\ny,d"[..], &b"x,b\ny,d\n"[..]),
        (&b"1,a\r\nx,b\r\n3,c\r\ny,d"[..], &b"x,b\r\ny,d\r\n"[..]),
        (&b"1,a\rx,b\r3,c\ry,d"[..], &b"x,b\ry,d\r"[..]),
    ] {
        let file = db.file(data, Compress::None);
        let dir = tempfile::tempdir().unwrap();
        let rejects = dir.path().join("r.csv");
        let mut o = LoadOptions::new(
            vec![file.to_string_lossy().into_owned()],
            QualifiedName::parse("rc").unwrap(),
            CopyFormat::Csv,
        );
        o.rejects = Some(rejects.clone());
        let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap();
        assert_eq!((r.rows_loaded, r.rows_rejected), (2, 2), "{data:?}");
        assert_eq!(std::fs::read(&rejects).unwrap(), want, "{data:?}");
    }
}

/// Outside testing: an invalid Shift JIS lead byte before a line break or
/// a quote took that byte as the rest of its character, so row ends
/// shifted from there on: a header ending in `0xE9` swallowed the first
/// data row (dropped with the header, exit 0), and in CSV a row vanished
/// and a made-up value was stored. A byte no character holds there ends
/// the character; the row with the invalid byte alone is refused.
#[tokio::test]
async fn an_invalid_lead_byte_does_not_swallow_a_line_break_or_a_quote() {
    let db = Db::start().await;
    let csv: &[u8] = b"\"1\"\n\"ab\x95\"\n\"3\nx\"\n\"4\"\n\"5\ny\"\n\"6\"\n";
    let text: &[u8] = b"id\tcaf\xe9\n1\ta\n2\tb\n";
    for (workers, chunk) in [(1, 1 << 20), (2, 1), (3, 7)] {
        let table = format!("sjis_bad_{workers}_{chunk}");
        let def = format!("CREATE TABLE {table} (v text); CREATE TABLE {table}_h (id int, v text)");
        db.client.batch_execute(&def).await.unwrap();
        let ctx = format!("workers {workers} chunk {chunk}");
        let sjis = |o: &mut LoadOptions| {
            o.copy.encoding = Some("SJIS".into());
            o.workers = workers;
            o.chunk_bytes = chunk;
        };
        let (report, rejected) =
            load_tweaked_with_rejects(&db, &table, CopyFormat::Csv, csv, sjis).await;
        assert_eq!(rejected, [(2, "22021".to_owned())], "{ctx}");
        assert_eq!((report.rows_read, report.rows_loaded), (6, 5), "{ctx}");
        let values = support::texts(&db.client, &format!("SELECT v FROM {table} ORDER BY v")).await;
        assert_eq!(values, ["1", "3\nx", "4", "5\ny", "6"], "{ctx}");
        let header = |o: &mut LoadOptions| {
            sjis(o);
            o.copy.header = Header::Skip;
        };
        let h = format!("{table}_h");
        let (report, _) = load_tweaked_with_rejects(&db, &h, CopyFormat::Text, text, header).await;
        assert_eq!((report.rows_read, report.rows_loaded), (2, 2), "{ctx}");
        assert_eq!(ids(&db, &h).await, [1, 2], "{ctx}");
    }
}
