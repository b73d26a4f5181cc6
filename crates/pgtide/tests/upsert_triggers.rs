//! `--on-conflict` into a table with BEFORE row triggers: every row of
//! the file meets them as one `INSERT .. ON CONFLICT` per row would,
//! whatever the chunk size (`load/upsert/rounds.rs`). The merge used to
//! keep one row per key: a trigger that dropped that row threw the
//! earlier rows' update away, and an UPDATE trigger that counts fired
//! once per key and chunk (outside testing).

mod support;

use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::ident::QualifiedName;
use pgtide::load::upsert::OnConflict;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;
use support::{texts, Compress, Db};

async fn load(db: &Db, data: &[u8], table: &str, columns: &[&str], chunk: usize) {
    let input = db.file(data, Compress::None);
    let mut o = LoadOptions::new(
        vec![input.to_str().unwrap().into()],
        QualifiedName::parse(table).unwrap(),
        CopyFormat::Csv,
    );
    o.on_conflict = Some(OnConflict::Update);
    o.columns = Some(columns.iter().map(|c| c.to_string()).collect());
    o.chunk_bytes = chunk;
    let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
        .await
        .unwrap();
    assert!(r.failure.is_none(), "{:?}", r.failure);
}

#[tokio::test]
async fn each_row_meets_the_before_triggers_whatever_the_chunks() {
    let db = Db::start().await;
    // A row the trigger drops leaves the earlier rows of its key applied.
    db.client
        .batch_execute(
            "CREATE FUNCTION drop0() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN IF NEW.v = 0 THEN RETURN NULL; END IF; RETURN NEW; END $$;
             CREATE FUNCTION count_updates() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN NEW.n := OLD.n + 1; RETURN NEW; END $$;",
        )
        .await
        .unwrap();
    // Padding rows so that small chunks part the rows of key 1.
    let pad: String = (100..400).map(|i| format!("{i},p\n")).collect();
    for (run, chunk) in [4 << 20, 1024].into_iter().enumerate() {
        let (tr, tu) = (format!("tr{run}"), format!("tu{run}"));
        db.client
            .batch_execute(&format!(
                "CREATE TABLE {tr} (k int PRIMARY KEY, v int);
                 CREATE TRIGGER bi BEFORE INSERT ON {tr} FOR EACH ROW EXECUTE FUNCTION drop0();
                 INSERT INTO {tr} VALUES (1, 10), (2, 10);
                 CREATE TABLE {tu} (k int PRIMARY KEY, v text, n int DEFAULT 0);
                 CREATE TRIGGER bu BEFORE UPDATE ON {tu} FOR EACH ROW EXECUTE FUNCTION count_updates();
                 INSERT INTO {tu} VALUES (1, 'x', 0);"
            ))
            .await
            .unwrap();
        load(&db, b"1,20\n1,0\n2,30\n3,0\n3,7\n", &tr, &["k", "v"], chunk).await;
        let got = texts(
            &db.client,
            &format!("SELECT k || '=' || v FROM {tr} ORDER BY k"),
        )
        .await;
        assert_eq!(got, ["1=20", "2=30", "3=7"], "chunk {chunk}");
        let file = format!("1,a\n{pad}1,b\n1,c\n");
        load(&db, file.as_bytes(), &tu, &["k", "v"], chunk).await;
        let got = texts(
            &db.client,
            &format!("SELECT v || ' ' || n FROM {tu} WHERE k = 1"),
        )
        .await;
        assert_eq!(got, ["c 3"], "chunk {chunk}: one update per row");
    }
}

/// With `update`, a row whose foreign key points nowhere is refused even
/// when a later row of its key follows in the same chunk (the merge kept
/// only the later row, so the first was never checked; outside testing):
/// as one `INSERT .. ON CONFLICT` per row refuses it.
#[tokio::test]
async fn a_row_that_loses_to_a_later_one_is_still_checked_against_foreign_keys() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE fkq (a text PRIMARY KEY); INSERT INTO fkq VALUES ('p');
             CREATE TABLE fku (id int PRIMARY KEY, a text REFERENCES fkq);",
        )
        .await
        .unwrap();
    let input = db.file(b"1,nosuch\n1,p\n2,p\n", Compress::None);
    for rejects in [false, true] {
        db.client.batch_execute("TRUNCATE fku").await.unwrap();
        let mut o = LoadOptions::new(
            vec![input.to_str().unwrap().into()],
            QualifiedName::parse("fku").unwrap(),
            CopyFormat::Csv,
        );
        o.on_conflict = Some(OnConflict::Update);
        o.rejects = rejects.then(|| input.with_extension(format!("rej{rejects}")));
        let r = load::run(&db.target, &o, Arc::new(Progress::new(1)))
            .await
            .unwrap();
        if rejects {
            assert!(r.failure.is_none(), "{:?}", r.failure);
            assert_eq!((r.rows_loaded, r.rows_rejected), (2, 1));
            assert_eq!(support::rejected_lines(o.rejects.as_ref().unwrap()), [1]);
            assert_eq!(
                texts(&db.client, "SELECT id || ':' || a FROM fku ORDER BY id").await,
                ["1:p", "2:p"]
            );
        } else {
            let e = r.failure.expect("the first row breaks the foreign key");
            assert_eq!(e.sqlstate(), Some("23503"), "{e}");
        }
    }
}

/// A trigger that changes the key folds two rows of one round into one
/// key, which one merge statement cannot update twice (21000; outside
/// testing the load stopped unless chunks held one row): that round is
/// merged row by row, as one `INSERT .. ON CONFLICT` per row gives it.
/// And an identity `GENERATED ALWAYS` column is written as COPY writes
/// it (the merge lacked `OVERRIDING SYSTEM VALUE`: every such upsert
/// failed).
#[tokio::test]
async fn a_trigger_that_changes_the_key_and_an_identity_column_merge_as_rows_would() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE kn (id int PRIMARY KEY, v text);
             CREATE FUNCTION kn_abs() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN NEW.id := abs(NEW.id); RETURN NEW; END $$;
             CREATE TRIGGER kn_abs BEFORE INSERT ON kn FOR EACH ROW EXECUTE FUNCTION kn_abs();
             CREATE TABLE ida (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
             INSERT INTO ida (v) VALUES ('a'), ('b');",
        )
        .await
        .unwrap();
    for chunk in [4 << 20, 8] {
        db.client.batch_execute("TRUNCATE kn").await.unwrap();
        load(
            &db,
            b"1,a\n-1,b\n2,c\n-2,d\n2,e\n",
            "kn",
            &["id", "v"],
            chunk,
        )
        .await;
        let got = texts(&db.client, "SELECT id || '=' || v FROM kn ORDER BY id").await;
        assert_eq!(got, ["1=b", "2=e"], "chunk {chunk}");
    }
    load(&db, b"1,z\n3,q\n", "ida", &["id", "v"], 4 << 20).await;
    let got = texts(&db.client, "SELECT id || '=' || v FROM ida ORDER BY id").await;
    assert_eq!(got, ["1=z", "2=b", "3=q"]);
}
