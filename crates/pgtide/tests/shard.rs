//! Sharded targets (issue 10): client-side routing checked against the
//! server itself.
//!
//! - every routed key type: the client's partition hash against
//!   `satisfies_hash_partition()` on random values (modulus 1021, a prime,
//!   and 64), so a single wrong bit in the 64-bit hash shows;
//! - hash (multi-column, NULLs), list, range, sub-partitions and DEFAULT:
//!   `Plan::route` against where the server's own INSERT put each row.

mod support;

use pgtide::catalog::Table;
use pgtide::conn::Env;
use pgtide::ident::QualifiedName;
use pgtide::shard::{self, Dest, Plan, Scratch};
use support::Db;
use tokio_postgres::Client;

use copyfmt::fields::{split_record, Fields, NullSpec};
use copyfmt::scan::Dialect;

/// xorshift64*: deterministic values without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn int(&mut self, bits: u32) -> i64 {
        let v = self.next() as i64;
        let small = self.below(3) == 0;
        let shift = if small { 64 - 8 } else { 64 - bits };
        v >> shift
    }
}

fn text_value(r: &mut Rng) -> String {
    const ALPHABET: &[&str] = &[
        "a", "b", "Z", "0", " ", "é", "ß", "漢", "'", "\"", ",", "😀",
    ];
    let n = r.below(40) as usize;
    (0..n)
        .map(|_| ALPHABET[r.below(ALPHABET.len() as u64) as usize])
        .collect()
}

fn digits(r: &mut Rng, n: usize) -> String {
    (0..n.max(1))
        .map(|_| char::from(b'0' + r.below(10) as u8))
        .collect()
}

fn date(r: &mut Rng) -> String {
    let m = 1 + r.below(12);
    let d = 1 + r.below(28);
    let bc = if r.below(10) == 0 { " BC" } else { "" };
    let y = 1 + r.below(if bc.is_empty() { 9999 } else { 4700 });
    format!("{y:04}-{m:02}-{d:02}{bc}")
}

fn time(r: &mut Rng) -> String {
    let frac = match r.below(3) {
        0 => String::new(),
        1 => format!(".{}", digits(r, 3)),
        _ => format!(".{}", digits(r, 6)),
    };
    format!(
        "{:02}:{:02}:{:02}{frac}",
        r.below(24),
        r.below(60),
        r.below(60)
    )
}

/// Random values of `ty` in forms the client reads.
fn values(ty: &str, r: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| match ty {
            "int2" => r.int(16).to_string(),
            "int4" => r.int(32).to_string(),
            "int8" => r.int(64).to_string(),
            "bool" => ["t", "f", "true", "no", "1"][r.below(5) as usize].to_owned(),
            "text" | "varchar(60)" => text_value(r),
            "char(12)" => text_value(r).chars().take(12).collect(),
            "uuid" => {
                let h = format!("{:016x}{:016x}", r.next(), r.next());
                format!(
                    "{}-{}-{}-{}-{}",
                    &h[..8],
                    &h[8..12],
                    &h[12..16],
                    &h[16..20],
                    &h[20..]
                )
            }
            "date" => date(r),
            "timestamp" => {
                let d = date(r);
                match d.strip_suffix(" BC") {
                    Some(d) => format!("{d} {} BC", time(r)),
                    None => format!("{d} {}", time(r)),
                }
            }
            "timestamptz" => {
                let off = ["+00", "-05", "+05:30", "Z", "+14"][r.below(5) as usize];
                let d = date(r);
                let (d, bc) = match d.strip_suffix(" BC") {
                    Some(d) => (d.to_owned(), " BC"),
                    None => (d, ""),
                };
                format!("{d} {}{off}{bc}", time(r))
            }
            "numeric" | "numeric(12,3)" => match r.below(12) {
                0 => "NaN".into(),
                1 if ty == "numeric" => "-Infinity".into(),
                1 => "NaN".into(),
                2 => "0.000".into(),
                _ => {
                    let sign = if r.below(2) == 0 { "-" } else { "" };
                    let int = if ty == "numeric" {
                        r.below(30)
                    } else {
                        r.below(9)
                    };
                    let int = digits(r, int as usize);
                    let nf = r.below(8) as usize;
                    let frac = digits(r, nf);
                    let exp = if ty == "numeric" && r.below(4) == 0 {
                        format!("e{}", r.int(6) % 40)
                    } else {
                        String::new()
                    };
                    format!("{sign}{int}.{frac}{exp}")
                }
            },
            _ => unreachable!("{ty}"),
        })
        .collect()
}

/// For each value, the remainder `satisfies_hash_partition` accepts with
/// `modulus` for a table hash-partitioned by one column of type `ty`.
async fn server_remainders(
    c: &Client,
    table: &str,
    ty: &str,
    vals: &[String],
    modulus: i32,
) -> Vec<i64> {
    let rows = c
        .query(
            &format!(
                "SELECT u.i, r FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i), \
                 generate_series(0, $2 - 1) r \
                 WHERE satisfies_hash_partition('{table}'::regclass, $2, r, u.v::{ty}) \
                 ORDER BY u.i"
            ),
            &[&vals, &modulus],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), vals.len(), "one remainder per value ({ty})");
    rows.iter().map(|r| r.get::<_, i32>(1) as i64).collect()
}

#[tokio::test]
async fn hash_of_every_type_matches_satisfies_hash_partition() {
    let db = Db::start().await;
    let c = &db.client;
    let types = [
        ("int2", 21u32, -1),
        ("int4", 23, -1),
        ("int8", 20, -1),
        ("bool", 16, -1),
        ("text", 25, -1),
        ("varchar(60)", 1043, 64),
        ("char(12)", 1042, 16),
        ("uuid", 2950, -1),
        ("date", 1082, -1),
        ("timestamp", 1114, -1),
        ("timestamptz", 1184, -1),
        ("numeric", 1700, -1),
        ("numeric(12,3)", 1700, ((12 << 16) | 3) + 4),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (i, (ty, oid, typmod)) in types.iter().enumerate() {
        let table = format!("h{i}");
        c.batch_execute(&format!(
            "CREATE TABLE {table} (k {ty}) PARTITION BY HASH (k)"
        ))
        .await
        .unwrap();
        let vals = values(ty, &mut rng, 400);
        let reader = shard::key::KeyReader::new(*oid, *typmod).unwrap();
        let mut buf = Vec::new();
        let hashes: Vec<u64> = vals
            .iter()
            .map(|v| {
                let k = reader
                    .read(v.as_bytes(), &mut buf)
                    .unwrap_or_else(|| panic!("{ty} value {v:?} not read"));
                shard::key::row_hash(&[reader.ty()], &[Some(k)]).unwrap()
            })
            .collect();
        for modulus in [1021, 64] {
            let want = server_remainders(c, &table, ty, &vals, modulus).await;
            for ((v, h), w) in vals.iter().zip(&hashes).zip(&want) {
                assert_eq!(
                    (h % modulus as u64) as i64,
                    *w,
                    "{ty} value {v:?}, modulus {modulus}"
                );
            }
        }
    }
}

/// Routes every line of `csv` with the plan of `table`, inserts the
/// rows with the server's own INSERT, and compares leaf by leaf.
async fn check_routing(db: &Db, table: &str, csv: &str) -> Vec<Dest> {
    let c = &db.client;
    let t = Table::resolve(c, &QualifiedName::parse(table).unwrap())
        .await
        .unwrap();
    let cols = t.select(None).unwrap();
    let session = db.target.connect().await.unwrap();
    let plan = Plan::build(
        &session,
        &db.target,
        &t,
        &cols,
        &Default::default(),
        &Env::empty(),
    )
    .await
    .unwrap();
    let d = Dialect::csv();
    let mut fields = Fields::new();
    let mut scratch = Scratch::default();
    let mut dests = Vec::new();
    for line in csv.lines() {
        split_record(&d, &NullSpec::csv(), line.as_bytes(), &mut fields).unwrap();
        dests.push(plan.route(&fields, &mut scratch));
    }
    // The server's placement: COPY into the parent, then tableoid per row
    // (a column `n` numbers the rows).
    let sink = c
        .copy_in::<_, bytes::Bytes>(&format!("COPY {table} FROM STDIN (FORMAT csv)"))
        .await
        .unwrap();
    futures_util::pin_mut!(sink);
    use futures_util::SinkExt;
    sink.send(bytes::Bytes::from(csv.to_owned())).await.unwrap();
    sink.finish().await.unwrap();
    let rows = c
        .query(
            &format!("SELECT n, tableoid::oid FROM {table} ORDER BY n"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), dests.len());
    for (row, dest) in rows.iter().zip(&dests) {
        let n: i32 = row.get(0);
        let oid: u32 = row.get(1);
        match dest {
            Dest::Leaf(i) => assert_eq!(
                plan.tree.leaves[*i].oid,
                oid,
                "row {n} of {table} ({:?}): client says {}",
                csv.lines().nth(n as usize),
                plan.tree.leaves[*i].name
            ),
            Dest::Coordinator => {}
        }
    }
    dests
}

#[tokio::test]
async fn hash_list_range_subpartitions_default_route_like_the_server() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE mh (n int, a int8, b text, c uuid) PARTITION BY HASH (a, b, c);
             CREATE TABLE mh0 PARTITION OF mh FOR VALUES WITH (modulus 4, remainder 0);
             CREATE TABLE mh1 PARTITION OF mh FOR VALUES WITH (modulus 4, remainder 1);
             CREATE TABLE mh2 PARTITION OF mh FOR VALUES WITH (modulus 8, remainder 2);
             CREATE TABLE mh6 PARTITION OF mh FOR VALUES WITH (modulus 8, remainder 6);
             CREATE TABLE mh3 PARTITION OF mh FOR VALUES WITH (modulus 4, remainder 3);

             CREATE TABLE li (n int, k text, v int) PARTITION BY LIST (k);
             CREATE TABLE li_ab PARTITION OF li FOR VALUES IN ('a', 'b', 'it''s');
             CREATE TABLE li_null PARTITION OF li FOR VALUES IN (NULL, 'z');
             CREATE TABLE li_def PARTITION OF li DEFAULT;

             CREATE TABLE ra (n int, d date, x numeric) PARTITION BY RANGE (d, x);
             CREATE TABLE ra1 PARTITION OF ra FOR VALUES FROM (MINVALUE, MINVALUE) TO ('2020-01-01', 0);
             CREATE TABLE ra2 PARTITION OF ra FOR VALUES FROM ('2020-01-01', 0) TO ('2020-01-01', MAXVALUE);
             CREATE TABLE ra3 PARTITION OF ra FOR VALUES FROM ('2020-01-01', MAXVALUE) TO ('2021-06-01', '-1.5')
                 PARTITION BY HASH (x);
             CREATE TABLE ra3a PARTITION OF ra3 FOR VALUES WITH (modulus 2, remainder 0);
             CREATE TABLE ra3b PARTITION OF ra3 FOR VALUES WITH (modulus 2, remainder 1);
             CREATE TABLE ra_def PARTITION OF ra DEFAULT PARTITION BY LIST (x);
             CREATE TABLE ra_def1 PARTITION OF ra_def FOR VALUES IN (1, 2.5);
             CREATE TABLE ra_def2 PARTITION OF ra_def DEFAULT;",
        )
        .await
        .unwrap();
    let mut rng = Rng(42);
    let mut csv = String::new();
    for n in 0..2000 {
        let a = if rng.below(10) == 0 {
            String::new()
        } else {
            rng.int(64).to_string()
        };
        let b = if rng.below(10) == 0 {
            String::new()
        } else {
            format!("\"{}\"", text_value(&mut rng).replace('"', "\"\""))
        };
        let c = if rng.below(10) == 0 {
            String::new()
        } else {
            format!("{:016x}{:016x}", rng.next(), rng.next())
        };
        csv.push_str(&format!("{n},{a},{b},{c}\n"));
    }
    let dests = check_routing(&db, "mh", &csv).await;
    assert!(dests.iter().all(|d| matches!(d, Dest::Leaf(_))));

    let keys = ["a", "b", "it's", "z", "", "\"\"", "c", "A", "a "];
    let csv: String = (0..500)
        .map(|n| {
            let k = keys[rng.below(keys.len() as u64) as usize];
            let k = if k.contains('\'') {
                format!("\"{k}\"")
            } else {
                k.to_owned()
            };
            format!("{n},{k},{n}\n")
        })
        .collect();
    let dests = check_routing(&db, "li", &csv).await;
    assert!(dests.iter().all(|d| matches!(d, Dest::Leaf(_))));

    let csv: String = (0..2000)
        .map(|n| {
            let d = match rng.below(6) {
                0 => String::new(),
                1 => "2020-01-01".into(),
                2 => "2021-06-01".into(),
                _ => format!(
                    "20{:02}-{:02}-{:02}",
                    18 + rng.below(5),
                    1 + rng.below(12),
                    1 + rng.below(28)
                ),
            };
            let x = match rng.below(8) {
                0 => String::new(),
                1 => "0".into(),
                2 => "-1.5".into(),
                3 => "2.50".into(),
                4 => "1".into(),
                _ => format!("{}.{}", rng.int(8), rng.below(100)),
            };
            format!("{n},{d},{x}\n")
        })
        .collect();
    let dests = check_routing(&db, "ra", &csv).await;
    assert!(dests.iter().all(|d| matches!(d, Dest::Leaf(_))));
}

#[tokio::test]
async fn what_the_client_cannot_route_goes_to_the_coordinator() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE ex (n int, k text) PARTITION BY RANGE (lower(k));
             CREATE TABLE ex1 PARTITION OF ex DEFAULT;
             CREATE TABLE fl (n int, k float8) PARTITION BY LIST (k);
             CREATE TABLE fl1 PARTITION OF fl DEFAULT;
             CREATE TABLE tz (n int, k timestamptz) PARTITION BY HASH (k);
             CREATE TABLE tz0 PARTITION OF tz FOR VALUES WITH (modulus 2, remainder 0);
             CREATE TABLE tz1 PARTITION OF tz FOR VALUES WITH (modulus 2, remainder 1);",
        )
        .await
        .unwrap();
    let dests = check_routing(&db, "ex", "1,a\n2,B\n").await;
    assert_eq!(dests, vec![Dest::Coordinator; 2]);
    let dests = check_routing(&db, "fl", "1,1.5\n").await;
    assert_eq!(dests, vec![Dest::Coordinator]);
    // No offset: its meaning depends on the session's TimeZone.
    let dests = check_routing(
        &db,
        "tz",
        "1,2024-01-01 10:00:00\n2,2024-01-01 10:00:00+02\n",
    )
    .await;
    assert_eq!(dests[0], Dest::Coordinator);
    assert!(matches!(dests[1], Dest::Leaf(_)));
}

fn rows_csv(n: usize) -> String {
    let mut rng = Rng(7);
    (0..n)
        .map(|i| {
            let t = text_value(&mut rng).replace('"', "\"\"");
            let null = if rng.below(20) == 0 { "" } else { "\"\"" };
            format!("{i},\"{t}\",{null},row {i}\n")
        })
        .collect()
}

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn hash_partitions_on_another_server_are_loaded_directly() {
    let db = Db::start().await;
    let (_shards, remote) = support::shard_server(&db).await;
    // Remote tables in other column orders, one with a dropped column and
    // one whose column has another name (column_name option).
    let mut remote_sql = String::new();
    let mut coord_sql = String::from(
        "CREATE TABLE s (n int, c1 text, c2 text, c3 text) PARTITION BY HASH (n);
         CREATE TABLE want (n int, c1 text, c2 text, c3 text) PARTITION BY HASH (n);",
    );
    for i in 0..8 {
        let (def, opts) = match i % 3 {
            0 => ("c3 text, c2 text, c1 text, n int".to_owned(), String::new()),
            1 => (
                "junk int, n int, c1 text, c2 text, c3 text".to_owned(),
                String::new(),
            ),
            _ => (
                "n int, c1 text, other text, c3 text".to_owned(),
                ", c2 OPTIONS (column_name 'other')".to_owned(),
            ),
        };
        remote_sql.push_str(&format!("CREATE TABLE r{i} ({def});"));
        if i % 3 == 1 {
            remote_sql.push_str(&format!("ALTER TABLE r{i} DROP COLUMN junk;"));
        }
        let alter = if opts.is_empty() {
            String::new()
        } else {
            format!("ALTER FOREIGN TABLE s{i} ALTER COLUMN c2 OPTIONS (column_name 'other');")
        };
        coord_sql.push_str(&format!(
            "CREATE FOREIGN TABLE s{i} PARTITION OF s FOR VALUES WITH (modulus 8, remainder {i})
                 SERVER shard2 OPTIONS (table_name 'r{i}');
             {alter}
             CREATE TABLE want{i} PARTITION OF want FOR VALUES WITH (modulus 8, remainder {i});"
        ));
    }
    remote.batch_execute(&remote_sql).await.unwrap();
    db.client.batch_execute(&coord_sql).await.unwrap();

    let csv = rows_csv(100_000);
    let path = db.file(csv.as_bytes(), support::Compress::None);
    db.client
        .batch_execute(&format!("COPY want FROM '{}' (FORMAT csv)", path.display()))
        .await
        .unwrap();
    let mut opts = pgtide::load::LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("s").unwrap(),
        pgtide::copyopts::CopyFormat::Csv,
    );
    opts.workers = 2;
    opts.chunk_bytes = 256 << 10;
    let report = pgtide::load::run(
        &db.target,
        &opts,
        std::sync::Arc::new(pgtide::progress::Progress::new(2)),
    )
    .await
    .unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!(report.rows_loaded, 100_000);
    assert_eq!(report.rows_read, 100_000);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("routed on the client")),
        "{:?}",
        report.notes
    );
    for i in 0..8 {
        // Every row on the shard the server's own routing chose, none
        // lost, none twice.
        for (a, b) in [
            (format!("s{i}"), format!("want{i}")),
            (format!("want{i}"), format!("s{i}")),
        ] {
            let diff = count(
                &db.client,
                &format!("SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) d"),
            )
            .await;
            assert_eq!(diff, 0, "{a} has rows {b} lacks");
        }
        let wrong = count(
            &db.client,
            // OFFSET 0: evaluated here, not pushed to the remote server.
            &format!(
                "SELECT count(*) FROM (SELECT n FROM s{i} OFFSET 0) x \
                 WHERE NOT satisfies_hash_partition('s'::regclass, 8, {i}, n)"
            ),
        )
        .await;
        assert_eq!(wrong, 0);
        let n = count(&remote, &format!("SELECT count(*) FROM r{i}")).await;
        assert!(n > 10_000, "r{i} has {n} rows");
    }

    // A row whose line break does not fit the file's style is never sent
    // on the sharded path either: the load stops at its line, as the main
    // path does, and nothing of its chunk is loaded.
    let lines: Vec<String> = rows_csv(3).lines().map(str::to_owned).collect();
    // Chunks of one row each: the misfit row starts a chunk, and a COPY
    // of that chunk alone would settle on `\r\n` and load it.
    let misfit = format!("{}\n{}\r\n{}\n", lines[0], lines[1], lines[2]);
    opts.chunk_bytes = 1;
    opts.inputs = vec![db
        .file(misfit.as_bytes(), support::Compress::None)
        .to_string_lossy()
        .into_owned()];
    let report = pgtide::load::run(
        &db.target,
        &opts,
        std::sync::Arc::new(pgtide::progress::Progress::new(2)),
    )
    .await
    .unwrap();
    let e = report.failure.expect("a misfit line ending stops the load");
    assert_eq!(e.sqlstate(), Some("22P04"), "{}", e.message());
    assert!(
        e.message().contains(":2: unquoted carriage return"),
        "{}",
        e.message()
    );
    let loaded = report.rows_loaded as i64;
    assert!(loaded <= 2, "{loaded}");
    assert_eq!(
        count(&db.client, "SELECT count(*) FROM s").await,
        100_000 + loaded
    );

    // A remote table that lacks a column of its foreign table: the shard
    // refuses the statement, and no row is blamed for it.
    remote
        .batch_execute("ALTER TABLE r0 RENAME COLUMN c1 TO c1_renamed")
        .await
        .unwrap();
    opts.chunk_bytes = 1 << 20;
    opts.inputs = vec![path.to_string_lossy().into_owned()];
    let report = pgtide::load::run(
        &db.target,
        &opts,
        std::sync::Arc::new(pgtide::progress::Progress::new(2)),
    )
    .await
    .unwrap();
    let e = report.failure.expect("the shard refuses the COPY");
    let hint = e.hint().unwrap_or_default();
    assert!(hint.contains("not a row"), "{}: {hint}", e.message());
    assert!(!hint.contains("fix the row"), "{hint}");
}
