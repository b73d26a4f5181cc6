//! `load` against a real throwaway server: every loaded table must equal
//! what server-side `COPY ... FROM 'file'` makes of the same bytes
//! (counts, and `EXCEPT ALL` both ways), for every format case, worker
//! count and chunk size, including chunk sizes that put a boundary at
//! nearly every record.
//!
//! Runs against `$PGTIDE_TEST_PGBIN` (PG 17 in CI) or the default
//! binaries (Debian's PG 15).

mod support;

use pgtide::copyopts::{CopyFormat, Header};
use pgtide::ErrorKind;
use support::{Case, Db};

fn csv_case(data: &str) -> Case {
    Case::new("a int, b text, c text", CopyFormat::Csv, data.as_bytes())
}

#[tokio::test]
async fn csv_quoting_cases_match_server_copy_at_every_chunk_size() {
    let db = Db::start().await;
    let data = "1,plain,x\n\
                2,\"quoted, comma\",y\n\
                3,\"multi\nline\nfield\",z\n\
                4,\"a \"\"quote\"\" inside\",w\n\
                5,,\"\"\n\
                6,\"ends with newline\n\",v\n\
                7,\"\\.\",backslash-dot-quoted\n\
                8,last,no-final-newline";
    for workers in [1, 3] {
        for chunk in [1, 7, 33, 1 << 20] {
            db.check(&csv_case(data).workers(workers).chunk(chunk))
                .await;
        }
    }
}

#[tokio::test]
async fn csv_with_crlf_header_and_custom_quote_escape() {
    let db = Db::start().await;
    let crlf = "a,b,c\r\n1,\"x\r\ny\",z\r\n2,p,q\r\n";
    for chunk in [1, 5, 1 << 20] {
        db.check(&csv_case(crlf).header(Header::Skip).workers(2).chunk(chunk))
            .await;
    }
    // QUOTE ' and ESCAPE \ : \' is an escaped quote inside quotes.
    let custom = "1;'it\\'s; here';x\n2;'two\nlines';y\n3;plain;'\\\\'\n";
    for chunk in [1, 9, 1 << 20] {
        let mut c = csv_case(custom).workers(2).chunk(chunk);
        c.opts.delimiter = Some(b';');
        c.opts.quote = Some(b'\'');
        c.opts.escape = Some(b'\\');
        db.check(&c).await;
    }
}

#[tokio::test]
async fn text_format_escapes_match_server_copy() {
    let db = Db::start().await;
    let data = "1\tplain\tx\n\
                2\ttab\\there\ty\n\
                3\tbackslash-newline\\\ncontinues\tz\n\
                4\t\\N\tnull-b\n\
                5\tdouble backslash\\\\\tw\n\
                6\toctal \\101 hex \\x42\tv\n";
    for workers in [1, 3] {
        for chunk in [1, 10, 1 << 20] {
            let c = Case::new("a int, b text, c text", CopyFormat::Text, data.as_bytes())
                .workers(workers)
                .chunk(chunk);
            db.check(&c).await;
        }
    }
}

#[tokio::test]
async fn compressed_inputs_and_column_subsets() {
    let db = Db::start().await;
    let mut data = String::new();
    for i in 0..5000 {
        data.push_str(&format!("{i},\"row {i}, with comma\"\n"));
    }
    for compress in [support::Compress::Gzip, support::Compress::Zstd] {
        let mut c = Case::new(
            "a int, b text, extra int default 7",
            CopyFormat::Csv,
            data.as_bytes(),
        )
        .workers(2)
        .chunk(4096)
        .compress(compress);
        c.columns = Some(vec!["a".into(), "b".into()]);
        db.check(&c).await;
    }
}

#[tokio::test]
async fn binary_input_matches_server_copy() {
    let db = Db::start().await;
    let bytes = db
        .server_binary_file(
            "SELECT g, 'v' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE g * 1.5 END \
             FROM generate_series(1, 2000) g",
        )
        .await;
    for (workers, chunk) in [(1, 1 << 20), (3, 100), (2, 1)] {
        let c = Case::new("a int, b text, c numeric", CopyFormat::Binary, &bytes)
            .workers(workers)
            .chunk(chunk);
        db.check(&c).await;
    }
}

/// A binary row whose int4 field says 3 bytes: the server answers
/// `insufficient data left in message` with SQLSTATE 08P01 (a protocol
/// violation, at ERROR: the session lives on). It is the row's fault:
/// rejected with its line, not retried as a lost connection.
#[tokio::test]
async fn a_binary_field_shorter_than_its_type_is_the_rows_fault() {
    let db = Db::start().await;
    let bytes = db
        .server_binary_file("SELECT g, 'v' || g FROM generate_series(1, 2000) g")
        .await;
    let (head, mut tuples) = binary_fields(&bytes);
    // Tuple 1500 (line 1500): its int4 field becomes 3 bytes long.
    tuples[1499][0] = b"abc".to_vec();
    let file = binary_file(&head, &tuples);
    let dir = tempfile::tempdir().unwrap();
    for workers in [1, 3] {
        db.client
            .batch_execute("DROP TABLE IF EXISTS short; CREATE TABLE short (a int, b text)")
            .await
            .unwrap();
        let mut o = db.csv_options(&file, "short");
        o.copy.format = CopyFormat::Binary;
        o.workers = workers;
        o.chunk_bytes = 4096;
        let rejects = dir.path().join(format!("r{workers}"));
        o.rejects = Some(rejects.clone());
        let progress = std::sync::Arc::new(pgtide::progress::Progress::new(workers));
        let r = pgtide::load::run(&db.target, &o, progress).await.unwrap();
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!((r.rows_loaded, r.rows_rejected), (1999, 1));
        assert_eq!(support::rejected_lines(&rejects), [1500]);
    }
}

/// A binary COPY file's header and its tuples, each as its fields' bytes
/// (`None` fields, NULLs, are not expected here).
fn binary_fields(bytes: &[u8]) -> (Vec<u8>, Vec<Vec<Vec<u8>>>) {
    // Header 19 bytes, then tuples: field count, (length, data)..., then -1.
    let (head, body) = (&bytes[..19], &bytes[19..bytes.len() - 2]);
    let mut tuples = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let mut fields = Vec::new();
        let mut end = at + 2;
        for _ in 0..i16::from_be_bytes([body[at], body[at + 1]]) {
            let len = i32::from_be_bytes(body[end..end + 4].try_into().unwrap());
            assert!(len >= 0, "no NULLs expected");
            fields.push(body[end + 4..end + 4 + len as usize].to_vec());
            end += 4 + len as usize;
        }
        tuples.push(fields);
        at = end;
    }
    (head.to_vec(), tuples)
}

/// The binary COPY file of `tuples` after `head` (see [`binary_fields`]).
fn binary_file(head: &[u8], tuples: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut file = head.to_vec();
    for t in tuples {
        file.extend_from_slice(&(t.len() as i16).to_be_bytes());
        for f in t {
            file.extend_from_slice(&(f.len() as i32).to_be_bytes());
            file.extend_from_slice(f);
        }
    }
    file.extend_from_slice(&[0xff, 0xff]);
    file
}

/// A binary field whose receive function refuses it with a code of a
/// class that is otherwise about the session: an array of another element
/// type (`array_recv`, 42804) and a jsonb without its version byte
/// (XX000). Raised while the server read that one field, they are the
/// row's fault: rejected with their lines, for COPY and for the INSERT
/// methods (bound parameters), not a stopped load (outside testing).
#[tokio::test]
async fn binary_fields_the_receive_functions_refuse_are_rejected() {
    let db = Db::start().await;
    let bytes = db
        .server_binary_file(
            "SELECT g, ARRAY[g, g + 1], jsonb_build_object('k', g) FROM generate_series(1, 300) g",
        )
        .await;
    let (head, mut tuples) = binary_fields(&bytes);
    // Line 50: an int8[] of the same values (element type 20, not 23).
    let int8s = db
        .server_binary_file("SELECT ARRAY[50::int8, 51::int8]")
        .await;
    tuples[49][1] = binary_fields(&int8s).1[0][0].clone();
    // Line 200: the jsonb's version byte (1) becomes 123.
    tuples[199][2][0] = 123;
    let file = binary_file(&head, &tuples);
    let dir = tempfile::tempdir().unwrap();
    for method in [
        pgtide::load::Method::Copy,
        pgtide::load::Method::Values,
        pgtide::load::Method::Pipeline,
    ] {
        db.client
            .batch_execute("DROP TABLE IF EXISTS recv; CREATE TABLE recv (a int, e int[], j jsonb)")
            .await
            .unwrap();
        let mut o = db.csv_options(&file, "recv");
        o.copy.format = CopyFormat::Binary;
        o.method = method;
        o.chunk_bytes = 1024;
        let rejects = dir.path().join(format!("r{}", method.name()));
        o.rejects = Some(rejects.clone());
        let progress = std::sync::Arc::new(pgtide::progress::Progress::new(1));
        let r = pgtide::load::run(&db.target, &o, progress).await.unwrap();
        assert!(r.failure.is_none(), "{}: {:?}", method.name(), r.failure);
        assert_eq!(
            (r.rows_loaded, r.rows_rejected),
            (298, 2),
            "{}",
            method.name()
        );
        assert_eq!(
            support::rejected_lines(&rejects),
            [50, 200],
            "{}",
            method.name()
        );
        let n: i64 = db
            .client
            .query_one("SELECT count(*) FROM recv WHERE a NOT IN (50, 200)", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 298);
    }
}

#[tokio::test]
async fn header_match_is_checked_on_the_client() {
    let db = Db::start().await;
    let good = csv_case("a,b,c\n1,x,y\n").header(Header::Match);
    db.check(&good).await;
    let bad = csv_case("a,wrong,c\n1,x,y\n").header(Header::Match);
    let err = db.load_err(&bad).await;
    assert_eq!(err.kind(), ErrorKind::Input, "{err:?}");
    assert!(err.message().contains("field 2"), "{err:?}");
    // A header field that spells the NULL string is NULL, which names no
    // column, as the server rules (outside testing: taken as the name);
    // quoted, in CSV, it is the name.
    let mut spelled =
        Case::new("\"N\" int, b int", CopyFormat::Csv, b"N,b\n1,2\n").header(Header::Match);
    spelled.opts.null = Some("N".into());
    let err = db.load_err(&spelled).await;
    assert!(err.message().contains("NULL string"), "{err:?}");
    let mut quoted = spelled.clone();
    quoted.data = b"\"N\",b\n1,2\n".to_vec();
    db.check(&quoted).await;
    let text = Case::new("a int, b int", CopyFormat::Text, b"\\N\tb\n1\t2\n").header(Header::Match);
    let err = db.load_err(&text).await;
    assert!(err.message().contains("NULL string"), "{err:?}");
}

#[tokio::test]
async fn bad_row_reports_its_file_line_and_what_was_committed() {
    let db = Db::start().await;
    // Line 5 starts the bad record (lines 3-4 are one quoted record).
    let data = "1,a,x\n2,b,y\n3,\"multi\nline\",z\nnot-an-int,c,w\n5,d,v\n";
    for workers in [1, 2] {
        let c = csv_case(data).workers(workers).chunk(1 << 20);
        let report = db.load_report(&c).await;
        let failure = report.failure.expect("the load must fail");
        assert_eq!(failure.sqlstate(), Some("22P02"), "{failure:?}");
        let row = report.failed_row.expect("the failing row is located");
        assert_eq!((row.line, row.record), (5, 4), "{row:?}");
        assert_eq!(row.column.as_deref(), Some("a"));
        assert!(failure.message().contains(":5:"), "{}", failure.message());
        assert_eq!(report.rows_loaded, 0, "one chunk: nothing committed");
    }
    // With one record per chunk, everything before the bad row commits.
    let report = db.load_report(&csv_case(data).chunk(1)).await;
    assert_eq!(report.failed_row.map(|r| r.line), Some(5));
    assert_eq!(report.rows_loaded, 3);
    assert_eq!(report.committed.len(), 1);
    assert_eq!(
        (report.committed[0].first, report.committed[0].last),
        (1, 4)
    );
}

#[tokio::test]
async fn setup_errors_are_typed_with_hints() {
    let db = Db::start().await;
    let mut missing = csv_case("1,a,b\n");
    missing.table_override = Some("no_such_table".into());
    let err = db.load_err(&missing).await;
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.hint().is_some());

    let mut bad_col = csv_case("1,a,b\n");
    bad_col.columns = Some(vec!["a".into(), "nope".into()]);
    let err = db.load_err(&bad_col).await;
    assert!(err.message().contains("nope"), "{err:?}");

    let err = db.load_missing_file().await;
    assert_eq!(err.kind(), ErrorKind::Input);
}

/// The library enforces its own limits for every caller (the CLI only
/// repeats them to name the flag): out-of-range numbers and `--sql` with a
/// method that cannot run it are config errors before anything is written.
#[tokio::test]
async fn limits_and_the_sql_rule_are_checked_before_anything_is_written() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE lim (a int, b text); INSERT INTO lim VALUES (1, 'kept')")
        .await
        .unwrap();
    let base = db.csv_options(b"2,x\n", "lim");
    let cases: Vec<(&str, pgtide::load::LoadOptions)> = vec![
        (
            "--chunk-bytes",
            pgtide::load::LoadOptions {
                chunk_bytes: 0,
                ..base.clone()
            },
        ),
        (
            "--chunk-bytes",
            pgtide::load::LoadOptions {
                chunk_bytes: pgtide::load::MAX_CHUNK_BYTES + 1,
                ..base.clone()
            },
        ),
        (
            "--message-bytes",
            pgtide::load::LoadOptions {
                message_bytes: 0,
                ..base.clone()
            },
        ),
        (
            "--workers",
            pgtide::load::LoadOptions {
                workers: pgtide::load::MAX_WORKERS + 1,
                ..base.clone()
            },
        ),
        (
            "--sql",
            pgtide::load::LoadOptions {
                sql: Some("INSERT INTO lim VALUES ($1::int, $2)".into()),
                method: pgtide::load::Method::Values,
                ..base.clone()
            },
        ),
    ];
    for (flag, mut o) in cases {
        o.truncate = true;
        let err = load_one(&db, &o).await.expect_err(flag);
        assert_eq!(err.kind(), ErrorKind::Config, "{flag}: {err:?}");
        assert!(err.message().contains(flag), "{flag}: {}", err.message());
        let row = db
            .client
            .query_one("SELECT count(*) FROM lim", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 1, "{flag}: the table was touched");
    }
    // Once rows flow, a failure does not undo the TRUNCATE: the summary
    // says so (outside testing: "committed: nothing" and an empty table).
    let mut o = base.clone();
    o.truncate = true;
    o.inputs = vec![db
        .file(b"7,a\nx,b\n", support::Compress::None)
        .to_string_lossy()
        .into_owned()];
    let report = load_one(&db, &o).await.unwrap();
    assert!(report.failure.is_some());
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.starts_with("--truncate: the table was emptied")),
        "{:?}",
        report.notes
    );
    // --sql alone picks the method that runs it.
    assert_eq!(
        pgtide::load::Method::default_for(Some("INSERT ..")),
        pgtide::load::Method::Pipeline
    );
}

/// Outside testing: HEADER MATCH compared the raw bytes of a LATIN1
/// header with the UTF-8 column names, refusing a right header and taking
/// a wrong one (UTF-8 bytes that LATIN1 reads as other letters). The
/// client cannot convert as the server does, so it says so instead of
/// guessing, before anything is written; ASCII headers are checked as
/// before.
#[tokio::test]
async fn header_match_refuses_non_ascii_names_it_cannot_convert() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE enc (id int, \"café\" text); INSERT INTO enc VALUES (0, 'x')")
        .await
        .unwrap();
    for header in [&b"id,caf\xe9\n1,a\n"[..], b"id,caf\xc3\xa9\n1,a\n"] {
        let mut o = db.csv_options(header, "enc");
        o.copy.header = pgtide::copyopts::Header::Match;
        o.copy.encoding = Some("LATIN1".into());
        o.truncate = true;
        let err = load_one(&db, &o)
            .await
            .expect_err("a header it cannot read");
        assert!(err.message().contains("non-ASCII"), "{err:?}");
        let n: i64 = db
            .client
            .query_one("SELECT count(*) FROM enc", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 1, "the table was touched");
    }
}

/// `pgtide load` of `o` with one worker.
/// Outside testing: in a LATIN1 database, text escapes such as `\303\251`
/// are bytes of LATIN1 to the server (`Ã©`), while the client-side methods
/// read them as UTF-8 (`é`). `binary` goes by text COPY instead (with a
/// note), and the INSERT methods refuse before loading anything.
#[tokio::test]
async fn text_escapes_into_a_latin1_database_go_by_copy() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE DATABASE l1 ENCODING 'LATIN1' TEMPLATE template0 LOCALE 'C'")
        .await
        .unwrap();
    let target = db.target.with_dbname("l1");
    let l1 = target.connect().await.unwrap();
    l1.batch_execute("CREATE TABLE e (v text)").await.unwrap();
    let path = db.file(b"\\303\\251\n", support::Compress::None);
    let options = |method| {
        let mut o = pgtide::load::LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            pgtide::ident::QualifiedName::parse("e").unwrap(),
            pgtide::copyopts::CopyFormat::Text,
        );
        o.method = method;
        o
    };
    let run = |o: pgtide::load::LoadOptions| {
        let target = target.clone();
        async move {
            let progress = std::sync::Arc::new(pgtide::progress::Progress::new(1));
            pgtide::load::run(&target, &o, progress).await
        }
    };
    let r = run(options(pgtide::load::Method::Binary)).await.unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert!(
        r.notes.iter().any(|n| n.contains("LATIN1")),
        "{:?}",
        r.notes
    );
    let v: String = l1.query_one("SELECT v FROM e", &[]).await.unwrap().get(0);
    assert_eq!(v, "\u{c3}\u{a9}", "as COPY reads it");
    let e = run(options(pgtide::load::Method::Values))
        .await
        .expect_err("refused");
    assert!(e.message().contains("LATIN1"), "{e:?}");
    let n: i64 = l1
        .query_one("SELECT count(*) FROM e", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "nothing more was loaded");
}

async fn load_one(db: &Db, o: &pgtide::load::LoadOptions) -> pgtide::Result<pgtide::load::Report> {
    pgtide::load::run(
        &db.target,
        o,
        std::sync::Arc::new(pgtide::progress::Progress::new(1)),
    )
    .await
}
