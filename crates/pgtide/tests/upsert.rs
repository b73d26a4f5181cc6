//! `--on-conflict update|skip` (issue 9 part 2): a file merged into a table
//! that has rows, through a staging table, with duplicate keys across chunk
//! and worker boundaries resolved as documented (last row wins for update,
//! first for skip), bad rows isolated, and a failed chunk stopping every
//! later merge.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::upsert::OnConflict;
use pgtide::load::{self, LoadOptions, Method, Report};
use pgtide::progress::Progress;
use support::{rejected_lines, Compress, Db};

/// Keys 0..KEYS, most of them three times: again 3 and 40 rows later, so
/// that duplicates meet inside chunks and across neighbouring chunks (which
/// different workers load at the same time), with values that say which
/// occurrence they are.
const KEYS: i32 = 3_000;
const EXISTING: i32 = 1_000;

/// (file, the rows in file order as (id, v, n)).
fn changes() -> (Vec<u8>, Vec<(i32, String, i32)>) {
    let id = |k: i32| (k * 7919) % KEYS;
    let mut rows = Vec::new();
    for k in 0..KEYS + 40 {
        for (round, back) in [(0, 0), (1, 3), (2, 40)] {
            let j = k - back;
            if (0..KEYS).contains(&j) && (round == 0 || j % 5 != 0) {
                let id = id(j);
                rows.push((id, format!("r{round} \"{id}\""), round * 100_000 + j));
            }
        }
    }
    let mut file = Vec::new();
    for (id, v, n) in &rows {
        file.extend_from_slice(format!("{id},\"{}\",{n}\n", v.replace('"', "\"\"")).as_bytes());
    }
    (file, rows)
}

async fn table(db: &Db, name: &str, key: &str) {
    db.client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id int {key}, v text, n int NOT NULL, d int DEFAULT 7);
             INSERT INTO {name} (id, v, n) SELECT g, 'old', -g FROM generate_series(0, {}) g;",
            EXISTING - 1
        ))
        .await
        .unwrap();
}

fn options(db: &Db, data: &[u8], name: &str, mode: OnConflict) -> LoadOptions {
    let path = db.file(data, Compress::None);
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse(name).unwrap(),
        CopyFormat::Csv,
    );
    o.columns = Some(vec!["id".into(), "v".into(), "n".into()]);
    o.on_conflict = Some(mode);
    o
}

async fn run(db: &Db, o: &LoadOptions) -> Report {
    load::run(&db.target, o, Arc::new(Progress::new(o.workers)))
        .await
        .expect("the load starts")
}

/// The table as (id -> (v, n)), ordered.
async fn contents(db: &Db, name: &str) -> BTreeMap<i32, (String, i32)> {
    db.client
        .query(&format!("SELECT id, v, n, d FROM {name}"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(
                r.get::<_, i32>(3),
                7,
                "columns not loaded keep their default"
            );
            (r.get(0), (r.get(1), r.get(2)))
        })
        .collect()
}

/// What the table must hold after merging `rows` into the EXISTING rows.
fn expected(rows: &[(i32, String, i32)], mode: OnConflict) -> BTreeMap<i32, (String, i32)> {
    let mut want: BTreeMap<i32, (String, i32)> =
        (0..EXISTING).map(|g| (g, ("old".to_owned(), -g))).collect();
    let mut seen = std::collections::HashSet::new();
    for (id, v, n) in rows {
        match mode {
            OnConflict::Update => {
                want.insert(*id, (v.clone(), *n));
            }
            OnConflict::Skip => {
                if seen.insert(*id) && !want.contains_key(id) {
                    want.insert(*id, (v.clone(), *n));
                }
            }
        }
        seen.insert(*id);
    }
    want
}

#[tokio::test]
async fn duplicates_resolve_the_same_for_every_worker_count_chunk_size_and_method() {
    let db = Db::start().await;
    let (file, rows) = changes();
    let new_keys = (EXISTING..KEYS).count() as u64;
    let mut n = 0;
    for mode in [OnConflict::Update, OnConflict::Skip] {
        for (workers, chunk, method) in [
            (1, 1 << 20, Method::Copy),
            (2, 2048, Method::Copy),
            (4, 777, Method::Copy),
            (3, 4096, Method::Binary),
        ] {
            n += 1;
            let name = format!("up_{n}");
            table(&db, &name, "PRIMARY KEY").await;
            let mut o = options(&db, &file, &name, mode);
            o.workers = workers;
            o.chunk_bytes = chunk;
            o.method = method;
            let r = run(&db, &o).await;
            let what = format!("{mode:?}, {workers} workers, {chunk} B chunks, {method:?}");
            assert!(r.failure.is_none(), "{what}: {:?}", r.failure);
            assert_eq!(r.rows_read, rows.len() as u64, "{what}");
            assert_eq!(r.rows_loaded, r.rows_read, "{what}");
            let u = r.upsert.as_ref().expect("an upsert report");
            assert_eq!(
                u.inserted, new_keys,
                "{what}: each new key is inserted once"
            );
            assert_eq!(
                u.inserted + u.updated + u.unchanged,
                r.rows_loaded,
                "{what}"
            );
            if mode == OnConflict::Skip {
                assert_eq!(u.updated, 0, "{what}");
            }
            assert_eq!(contents(&db, &name).await, expected(&rows, mode), "{what}");
        }
    }
}

#[tokio::test]
async fn keys_with_a_null_never_fold_and_a_unique_index_can_be_the_key() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE nk (a int, b int, v text, UNIQUE (a, b));
             INSERT INTO nk VALUES (1, 1, 'old'), (1, NULL, 'old null');",
        )
        .await
        .unwrap();
    let data = b"1,1,new\n1,,n1\n1,,n2\n2,2,x\n2,2,y\n";
    let path = db.file(data, Compress::None);
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("nk").unwrap(),
        CopyFormat::Csv,
    );
    o.on_conflict = Some(OnConflict::Update);
    // No primary key: without --key, an error that names the unique keys.
    let e = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap_err();
    assert!(e.message().contains("no primary key"), "{e}");
    assert!(e.hint().unwrap_or("").contains("(a, b)"), "{e:?}");
    o.key = Some(vec!["b".into(), "a".into()]);
    let r = run(&db, &o).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let got: Vec<(i32, Option<i32>, String)> = db
        .client
        .query("SELECT a, b, v FROM nk ORDER BY a, b, v", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let want = vec![
        (1, Some(1), "new".to_owned()),
        (1, None, "n1".to_owned()),
        (1, None, "n2".to_owned()),
        (1, None, "old null".to_owned()),
        (2, Some(2), "y".to_owned()),
    ];
    assert_eq!(got, want);
    let u = r.upsert.unwrap();
    assert_eq!((u.inserted, u.updated, u.unchanged), (3, 1, 1));
}

#[tokio::test]
async fn bad_options_fail_before_anything_is_written() {
    let db = Db::start().await;
    table(&db, "opt", "").await;
    db.client
        .batch_execute("CREATE UNIQUE INDEX ON opt (id) WHERE id > 0")
        .await
        .unwrap();
    let data = b"1,a,1\n";
    let mut o = options(&db, data, "opt", OnConflict::Update);
    let target = &db.target;
    let err = |o: LoadOptions| async move {
        load::run(target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap_err()
    };
    let e = err(o.clone()).await;
    assert!(e.message().contains("no primary key"), "{e}");
    o.key = Some(vec!["id".into()]);
    let e = err(o.clone()).await;
    assert!(
        e.message().contains("no unique index"),
        "a partial index is no arbiter: {e}"
    );
    o.key = None;
    o.method = Method::Pipeline;
    let e = err(o.clone()).await;
    assert!(e.message().contains("--method copy or binary"), "{e}");
    let count: i64 = db
        .client
        .query_one("SELECT count(*) FROM opt", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, i64::from(EXISTING));
}

#[tokio::test]
async fn bad_rows_are_isolated_and_good_ones_merged() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE bad (id int PRIMARY KEY, v text, n int NOT NULL CHECK (n >= 0), d int DEFAULT 7);
             INSERT INTO bad (id, v, n) SELECT g, 'old', g FROM generate_series(0, 99) g;",
        )
        .await
        .unwrap();
    let mut file = String::new();
    let mut bad_lines = Vec::new();
    for i in 0..400 {
        let line = match i % 37 {
            5 => format!("{i},x,oops"), // type error: COPY names the line
            11 => format!("{i},x,"),    // NOT NULL: found by the merge
            19 => format!("{i},x,-1"),  // CHECK: found by the merge
            _ => format!("{},v{i},{i}", i % 150),
        };
        if matches!(i % 37, 5 | 11 | 19) {
            bad_lines.push(line.clone());
        }
        file.push_str(&line);
        file.push('\n');
    }
    let rejects = tempfile::tempdir().unwrap();
    let rpath = rejects.path().join("r.csv");
    let mut o = options(&db, file.as_bytes(), "bad", OnConflict::Update);
    o.rejects = Some(rpath.clone());
    o.workers = 2;
    o.chunk_bytes = 1024;
    let r = run(&db, &o).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_rejected, bad_lines.len() as u64);
    assert_eq!(r.rows_loaded + r.rows_rejected, 400);
    let rejected = std::fs::read_to_string(&rpath).unwrap();
    assert_eq!(rejected.lines().collect::<Vec<_>>(), bad_lines);
    // The last good row of each key wins.
    let mut want: BTreeMap<i32, String> = (0..100).map(|g| (g, "old".to_owned())).collect();
    for i in 0..400 {
        if !matches!(i % 37, 5 | 11 | 19) {
            want.insert(i % 150, format!("v{i}"));
        }
    }
    let got: BTreeMap<i32, String> = db
        .client
        .query("SELECT id, v FROM bad", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn after_a_failed_chunk_no_later_chunk_merges() {
    let db = Db::start().await;
    table(&db, "stop", "PRIMARY KEY").await;
    // Key 5 everywhere: the last committed row decides its value, so the
    // committed lines must be a prefix of the file.
    let mut file = String::new();
    for i in 0..2_000 {
        if i == 1_000 {
            file.push_str("5,bad,notanumber\n");
        } else {
            file.push_str(&format!("5,line {},{i}\n", i + 1));
        }
    }
    let mut o = options(&db, file.as_bytes(), "stop", OnConflict::Update);
    o.workers = 3;
    o.chunk_bytes = 1024;
    let r = run(&db, &o).await;
    assert!(r.failure.is_some(), "the bad row stops the load");
    assert_eq!(r.committed.len(), 1, "{:?}", r.committed);
    let done = &r.committed[0];
    assert_eq!(done.first, 1);
    assert!(done.last < 1001, "{done:?}");
    let v: String = db
        .client
        .query_one("SELECT v FROM stop WHERE id = 5", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, format!("line {}", done.last));
}

#[tokio::test]
async fn resume_records_merged_chunks_and_a_second_run_has_nothing_left() {
    let db = Db::start().await;
    table(&db, "res", "PRIMARY KEY").await;
    let (file, rows) = changes();
    let mut o = options(&db, &file, "res", OnConflict::Update);
    o.resume = Some(pgtide::load::ledger::ResumeMode::Edges);
    o.workers = 2;
    o.chunk_bytes = 4096;
    let r = run(&db, &o).await;
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.rows_loaded, rows.len() as u64);
    let again = run(&db, &o).await;
    assert!(again.failure.is_none(), "{:?}", again.failure);
    assert_eq!(
        (again.rows_read, again.rows_resumed),
        (0, rows.len() as u64)
    );
    assert_eq!(
        contents(&db, "res").await,
        expected(&rows, OnConflict::Update)
    );
}

/// `update` leaves a row that holds the file's values already as it is
/// (no new row version: its xmin stays), counted as unchanged; a value
/// that differs only in its bytes (`1.0` against `1.00`, equal numerics)
/// or in a NULL is rewritten. With a row UPDATE trigger on the table or on
/// one of its partitions, or row-level security, every matched row is
/// rewritten, since the trigger (or a policy) would see it. A partitioned
/// target merges through its parent (which once failed: its RETURNING
/// cannot read xmax).
#[tokio::test]
async fn rows_holding_the_files_values_are_left_alone_unless_a_trigger_would_see_them() {
    let db = Db::start().await;
    let hit = |on: &str| {
        format!(
            "CREATE FUNCTION {on}_hit() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN NEW.hits := OLD.hits + 1; RETURN NEW; END $$;
             CREATE TRIGGER hit BEFORE UPDATE ON {on}
               FOR EACH ROW EXECUTE FUNCTION {on}_hit();"
        )
    };
    let columns = "(id int PRIMARY KEY, v text, x numeric, hits int DEFAULT 0)";
    // `parent` range-partitioned with the one partition `leaf` (in place
    // of the plain table the loop creates under the case's name).
    let one_partition = |name: &str, parent: &str, leaf: &str| {
        format!(
            "DROP TABLE {name}; CREATE TABLE {parent} {columns} PARTITION BY RANGE (id);
             CREATE TABLE {leaf} PARTITION OF {parent} FOR VALUES FROM (0) TO (100);"
        )
    };
    // (table, what else it has, every matched row rewritten, hits each).
    let cases = [
        ("same_plain", String::new(), false, 0),
        ("same_trig", hit("same_trig"), true, 1),
        (
            "same_part",
            one_partition("same_part", "same_part", "same_part_low") + &hit("same_part_low"),
            true,
            1,
        ),
        (
            "same_rls",
            "ALTER TABLE same_rls ENABLE ROW LEVEL SECURITY".to_owned(),
            true,
            0,
        ),
        (
            // Partitioned with a foreign key: its triggers, cloned onto
            // the partition, are the server's own and see nothing.
            "same_fkpart",
            one_partition("same_fkpart", "same_fkpart", "same_fkpart_low")
                + "CREATE TABLE same_ref (id int PRIMARY KEY);
                   INSERT INTO same_ref SELECT generate_series(1, 10);
                   ALTER TABLE same_fkpart ADD FOREIGN KEY (id) REFERENCES same_ref;",
            false,
            0,
        ),
        (
            // A statement trigger whose NEW TABLE sees every updated row.
            "same_audit",
            "CREATE TABLE audit (n bigint);
             CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO audit SELECT count(*) FROM n; RETURN NULL; END $$;
             CREATE TRIGGER audit AFTER UPDATE ON same_audit REFERENCING NEW TABLE AS n
               FOR EACH STATEMENT EXECUTE FUNCTION audit();"
                .to_owned(),
            true,
            0,
        ),
        (
            // Loaded into a partition: the parent's row trigger is cloned
            // onto it.
            "same_leaf",
            one_partition("same_leaf", "same_up", "same_leaf") + &hit("same_up"),
            true,
            1,
        ),
    ];
    for (name, extra, all, hits) in cases {
        db.client
            .batch_execute(&format!(
                "CREATE TABLE {name} {columns}; {extra};
                 INSERT INTO {name} (id, v, x) VALUES
                   (1, 'a', 1.0), (2, 'b', 1.0), (3, NULL, 2), (4, 'd', NULL), (5, 'e', 5);"
            ))
            .await
            .unwrap();
        let before = xmins(&db, name).await;
        // 1 same, 2 same but 1.00, 3 same with its NULL, 4 NULL -> value,
        // 5 other text, 6 new.
        let file = b"1,a,1.0\n2,b,1.00\n3,,2\n4,d,4\n5,E,5\n6,f,6\n";
        let mut o = options(&db, file, name, OnConflict::Update);
        o.columns = Some(vec!["id".into(), "v".into(), "x".into()]);
        let r = run(&db, &o).await;
        assert!(r.failure.is_none(), "{:?}", r.failure);
        let u = r.upsert.expect("an upsert report");
        let after = xmins(&db, name).await;
        let rewritten: Vec<i32> = (1..=5).filter(|id| before[id] != after[id]).collect();
        let (changed, unchanged) = match all {
            true => (vec![1, 2, 3, 4, 5], 0),
            false => (vec![2, 4, 5], 2),
        };
        assert_eq!(rewritten, changed, "{name}");
        let told = r.notes.iter().any(|n| n.contains("rewritten too"));
        assert_eq!(told, all, "{name}: the summary says why: {:?}", r.notes);
        let counts = (u.inserted, u.updated, u.written, u.unchanged);
        let written = 1 + changed.len() as u64;
        if name.ends_with("part") {
            // A partitioned table cannot say which rows were new.
            assert_eq!(counts, (0, 0, written, unchanged), "{name}");
        } else {
            assert_eq!(counts, (1, written - 1, 0, unchanged), "{name}");
        }
        let values: Vec<String> = db
            .client
            .query(
                &format!("SELECT format('%s|%s|%s|%s', id, v, x, hits) FROM {name} ORDER BY id"),
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let want: Vec<String> = ["1|a|1.0", "2|b|1.00", "3||2", "4|d|4", "5|E|5"]
            .iter()
            .map(|v| format!("{v}|{hits}"))
            .chain(["6|f|6|0".to_owned()])
            .collect();
        assert_eq!(values, want, "{name}");
    }
}

/// id -> xmin of every row of `name`.
async fn xmins(db: &Db, name: &str) -> BTreeMap<i32, String> {
    db.client
        .query(&format!("SELECT id, xmin::text FROM {name}"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// Outside testing: a row that lost to another row of its key in the same
/// chunk was never sent to the server, so a CHECK or NOT NULL it broke
/// went unseen (counted as unchanged), while in another chunk the same
/// row was rejected. The server checks every row of `INSERT .. ON
/// CONFLICT` before the conflict, so each such row is rejected, whatever
/// the chunk size and worker count.
#[tokio::test]
async fn rows_losing_to_their_key_are_still_checked() {
    let db = Db::start().await;
    let pad = "p".repeat(300);
    // (k, v) rows: key 1 twice, one breaking the CHECK or NOT NULL; key 2
    // three times, the middle one bad; key 3 once.
    let data =
        format!("1,1,{pad}\n1,13,{pad}\n2,2,{pad}\n2,,{pad}\n2,4,{pad}\n3,13,{pad}\n1,5,{pad}\n");
    let mut n = 0;
    for mode in [OnConflict::Update, OnConflict::Skip] {
        for (workers, chunk) in [(1, 1 << 20), (1, 100), (2, 700)] {
            n += 1;
            let name = format!("losers_{n}");
            db.client
                .batch_execute(&format!(
                    "CREATE TABLE {name} (k int PRIMARY KEY, v int NOT NULL CHECK (v <> 13), pad text)"
                ))
                .await
                .unwrap();
            let mut o = options(&db, data.as_bytes(), &name, mode);
            o.columns = None;
            o.workers = workers;
            o.chunk_bytes = chunk;
            let dir = tempfile::tempdir().unwrap();
            o.rejects = Some(dir.path().join("r"));
            let r = run(&db, &o).await;
            let what = format!("{mode:?}, {workers} workers, {chunk} B chunks");
            assert!(r.failure.is_none(), "{what}: {:?}", r.failure);
            assert_eq!((r.rows_loaded, r.rows_rejected), (4, 3), "{what}");
            assert_eq!(rejected_lines(&dir.path().join("r")), [2, 4, 6], "{what}");
            let rows: Vec<(i32, i32)> = db
                .client
                .query(&format!("SELECT k, v FROM {name} ORDER BY k"), &[])
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let want = match mode {
                OnConflict::Update => [(1, 5), (2, 4)],
                OnConflict::Skip => [(1, 1), (2, 2)],
            };
            assert_eq!(rows, want, "{what}");
        }
    }
}
