//! Screening a failed chunk (`load/screen.rs`): rows the client thinks bad
//! are sent alone, never rejected on the client's word: a NULL for a NOT
//! NULL column that a BEFORE trigger fills in still loads; and the order
//! in which rows reach the table when some go by text COPY.

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Method};
use pgtide::progress::Progress;
use support::{Compress, Db};

#[tokio::test]
async fn suspects_are_tried_alone_and_load_when_the_server_takes_them() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE sc (id int PRIMARY KEY, v int NOT NULL, d date);
             CREATE FUNCTION sc_fill() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN NEW.v := coalesce(NEW.v, -1); RETURN NEW; END $$;
             CREATE TRIGGER sc_fill BEFORE INSERT ON sc FOR EACH ROW EXECUTE FUNCTION sc_fill();",
        )
        .await
        .unwrap();
    let mut file = String::new();
    let mut bad = Vec::new();
    for i in 0..500 {
        let line = match i {
            50 | 300 => format!("{i},,2024-01-01"), // suspect, but the trigger fills v
            120 => format!("{i},x,2024-01-01"),     // bad int
            200 => format!("{i},1,2024-02-30"),     // bad date
            400 => format!("{},1,2024-01-01", i - 1), // duplicate key: not screened
            _ => format!("{i},{i},2024-01-01"),
        };
        if matches!(i, 120 | 200 | 400) {
            bad.push(line.clone());
        }
        file.push_str(&line);
        file.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    for (n, method) in [Method::Copy, Method::Binary].into_iter().enumerate() {
        db.client.batch_execute("TRUNCATE sc").await.unwrap();
        let path = db.file(file.as_bytes(), Compress::None);
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse("sc").unwrap(),
            CopyFormat::Csv,
        );
        o.method = method;
        o.rejects = Some(dir.path().join(format!("r{n}.csv")));
        let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap();
        assert!(r.failure.is_none(), "{method:?}: {:?}", r.failure);
        assert_eq!((r.rows_loaded, r.rows_rejected), (497, 3), "{method:?}");
        let rejected = std::fs::read_to_string(o.rejects.as_ref().unwrap()).unwrap();
        assert_eq!(rejected.lines().collect::<Vec<_>>(), bad, "{method:?}");
        let filled: i64 = db
            .client
            .query_one("SELECT count(*) FROM sc WHERE v = -1", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(filled, 2, "{method:?}: the suspects loaded");
    }
}

/// A suspect is probed alone before the rows ahead of it are loaded: a
/// refusal that may depend on them (here a foreign key to the row just
/// before it) is not taken as the row's verdict; the row is tried again
/// in its place, and loads.
#[tokio::test]
async fn a_suspect_refused_for_a_row_before_it_is_tried_again_in_its_place() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE tree (id int PRIMARY KEY, up int REFERENCES tree, v int NOT NULL);
             CREATE FUNCTION tree_fill() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN NEW.v := coalesce(NEW.v, -1); RETURN NEW; END $$;
             CREATE TRIGGER tree_fill BEFORE INSERT ON tree FOR EACH ROW EXECUTE FUNCTION tree_fill();",
        )
        .await
        .unwrap();
    // Rows point at row 1. Row 50 looks bad (NULL v, filled by the
    // trigger) and points at row 49; row 70 is bad (an int), and so row
    // 71, which points at it, fails its foreign key.
    let mut file = String::from("1,,1\n");
    for i in 2..=100 {
        file.push_str(&match i {
            50 => "50,49,\n".to_owned(),
            70 => "70,x,70\n".to_owned(),
            71 => "71,70,71\n".to_owned(),
            _ => format!("{i},1,{i}\n"),
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let path = db.file(file.as_bytes(), Compress::None);
    let mut o = LoadOptions::new(
        vec![path.to_string_lossy().into_owned()],
        QualifiedName::parse("tree").unwrap(),
        CopyFormat::Csv,
    );
    o.rejects = Some(dir.path().join("r.csv"));
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let rejected = std::fs::read_to_string(o.rejects.as_ref().unwrap()).unwrap();
    assert_eq!(rejected, "70,x,70\n71,70,71\n");
    assert_eq!((r.rows_loaded, r.rows_rejected), (98, 2));
    let filled: i64 = db
        .client
        .query_one("SELECT count(*) FROM tree WHERE id = 50 AND v = -1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(filled, 1, "the suspect loaded in its place");
}

/// Once a chunk had bad rows, each worker screens its next chunk while the
/// current one loads, and a chunk with suspects goes straight to
/// isolation: the verdicts are those of a chunk tried whole first, at
/// every worker count, including suspects the table accepts (a trigger
/// fills the NULL) and bad rows the screen cannot see (duplicate keys of a
/// row already in the table).
#[tokio::test]
async fn chunks_screened_ahead_of_their_turn_get_the_same_verdicts() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE ahead (id int PRIMARY KEY, v int NOT NULL, d date);
             CREATE FUNCTION ahead_fill() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN NEW.v := coalesce(NEW.v, -1); RETURN NEW; END $$;
             CREATE TRIGGER ahead_fill BEFORE INSERT ON ahead FOR EACH ROW EXECUTE FUNCTION ahead_fill();",
        )
        .await
        .unwrap();
    let (mut file, mut bad, mut filled) = (String::new(), Vec::new(), 0);
    for i in 0..6000 {
        let line = match i % 97 {
            5 => format!("{i},x,2024-01-01"),   // bad int
            20 => format!("{i},1,2024-02-30"),  // bad date
            40 => "-1,1,2024-01-01".to_owned(), // duplicate key
            60 => format!("{i},,2024-01-01"),   // filled by the trigger
            _ => format!("{i},{i},2024-01-01"),
        };
        match i % 97 {
            5 | 20 | 40 => bad.push(line.clone()),
            60 => filled += 1,
            _ => {}
        }
        file.push_str(&line);
        file.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let path = db.file(file.as_bytes(), Compress::None);
    for workers in [1, 2, 3] {
        // The row that the duplicates meet is there before the load, so
        // that the verdicts do not depend on which worker inserts first.
        db.client
            .batch_execute("TRUNCATE ahead; INSERT INTO ahead VALUES (-1, 0, NULL)")
            .await
            .unwrap();
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse("ahead").unwrap(),
            CopyFormat::Csv,
        );
        o.workers = workers;
        o.chunk_bytes = 4096;
        o.rejects = Some(dir.path().join(format!("r{workers}.csv")));
        let r = load::run(&db.target, &o, Arc::new(Progress::new(workers)))
            .await
            .unwrap();
        assert!(r.failure.is_none(), "{workers}: {:?}", r.failure);
        let rejected = std::fs::read_to_string(o.rejects.as_ref().unwrap()).unwrap();
        assert_eq!(
            rejected.lines().collect::<Vec<_>>(),
            bad,
            "{workers} workers"
        );
        assert_eq!(
            (r.rows_loaded, r.rows_rejected),
            (6000 - bad.len() as u64, bad.len() as u64),
            "{workers} workers"
        );
        let got: i64 = db
            .client
            .query_one("SELECT count(*) FROM ahead WHERE v = -1", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(got, filled, "{workers} workers: the suspects loaded");
    }
}

/// `--method binary` sends a record its encoders do not take (a date the
/// server reads, `Jan 5 2024`) by text COPY, with every record after it:
/// the rows reach the table in the input's order, so of two rows with one
/// key the first loads and the later is rejected, as with COPY (outside
/// testing: sent after the others, the first row lost to the later one).
#[tokio::test]
async fn rows_the_binary_encoders_leave_to_text_copy_keep_their_order() {
    let db = Db::start().await;
    db.client
        .batch_execute("CREATE TABLE dd (k date UNIQUE, v text)")
        .await
        .unwrap();
    let file = "2024-01-01,a\nJan 5 2024,first\n2024-01-05,second\n2024-01-07,b\n";
    let dir = tempfile::tempdir().unwrap();
    for (n, method) in [Method::Copy, Method::Binary].into_iter().enumerate() {
        db.client.batch_execute("TRUNCATE dd").await.unwrap();
        let path = db.file(file.as_bytes(), Compress::None);
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse("dd").unwrap(),
            CopyFormat::Csv,
        );
        o.method = method;
        o.rejects = Some(dir.path().join(format!("o{n}.csv")));
        let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap();
        assert!(r.failure.is_none(), "{method:?}: {:?}", r.failure);
        let rejected = std::fs::read_to_string(o.rejects.as_ref().unwrap()).unwrap();
        assert_eq!(rejected, "2024-01-05,second\n", "{method:?}");
        let v: String = db
            .client
            .query_one("SELECT v FROM dd WHERE k = '2024-01-05'", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(v, "first", "{method:?}");
    }
}

/// A NULL that a BEFORE trigger fills from the rows before it (a fill-down)
/// fails only out of its place: with such triggers no suspect is judged by
/// a try out of its place, so the row loads where it stands, in every
/// chunk, also in chunks that go straight to isolation once the load has
/// met bad rows (outside testing: such rows were rejected).
#[tokio::test]
async fn a_null_a_trigger_fills_from_earlier_rows_loads_in_its_place() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE fill (id int PRIMARY KEY, grp int, a int NOT NULL, d int CHECK (d >= 0));
             CREATE FUNCTION fill_down() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                 IF NEW.a IS NULL THEN
                   NEW.a := (SELECT a FROM fill WHERE grp = NEW.grp ORDER BY id LIMIT 1);
                 END IF;
                 RETURN NEW;
               END $$;
             CREATE TRIGGER fill_down BEFORE INSERT ON fill FOR EACH ROW EXECUTE FUNCTION fill_down();",
        )
        .await
        .unwrap();
    // Groups of 40 rows: the first sets `a`, the second leaves it to the
    // trigger, the last breaks the CHECK.
    let (mut file, mut bad) = (String::new(), Vec::new());
    for id in 0..2000 {
        let grp = id / 40;
        let line = match id % 40 {
            1 => format!("{id},{grp},,0"),
            39 => format!("{id},{grp},{id},-1"),
            _ => format!("{id},{grp},{id},0"),
        };
        if id % 40 == 39 {
            bad.push(line.clone());
        }
        file.push_str(&line);
        file.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let path = db.file(file.as_bytes(), Compress::None);
    for (n, chunk_bytes) in [1 << 20, 2048].into_iter().enumerate() {
        db.client.batch_execute("TRUNCATE fill").await.unwrap();
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse("fill").unwrap(),
            CopyFormat::Csv,
        );
        o.chunk_bytes = chunk_bytes;
        o.rejects = Some(dir.path().join(format!("f{n}.csv")));
        let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap();
        assert!(r.failure.is_none(), "{chunk_bytes}: {:?}", r.failure);
        let rejected = std::fs::read_to_string(o.rejects.as_ref().unwrap()).unwrap();
        assert_eq!(rejected.lines().collect::<Vec<_>>(), bad, "{chunk_bytes}");
        let filled: i64 = db
            .client
            .query_one(
                "SELECT count(*) FROM fill WHERE id % 40 = 1 AND a = id - 1",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(filled, 50, "{chunk_bytes}: every filled row loaded");
    }
}
