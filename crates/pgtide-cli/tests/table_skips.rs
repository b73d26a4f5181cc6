//! Rows dropped by the table's own BEFORE INSERT trigger: exit 0, and the
//! summary (human and JSON) says how many were skipped by the table.

mod common;

use common::{cluster, pgtide, psql, text};

#[test]
fn rows_a_trigger_drops_are_reported_as_skipped_by_the_table() {
    let c = cluster();
    psql(
        &c,
        "CREATE TABLE t (id int, v text);
         CREATE FUNCTION no_drafts() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN IF NEW.v = 'draft' THEN RETURN NULL; END IF; RETURN NEW; END $$;
         CREATE TRIGGER no_drafts BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION no_drafts()",
    );
    let db = c.conninfo();
    let input = b"1,a\n2,draft\n3,b\n4,draft\n5,c\n";
    let args = ["load", "-", "--table", "t", "--format", "csv", "--db", &db];
    let out = pgtide(&args, input);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout
            .starts_with("loaded 3 rows, rejected 0 rows, skipped by the table: 2, read 5 rows\n"),
        "{stdout}"
    );
    assert_eq!(
        psql(&c, "SELECT string_agg(v, '' ORDER BY id) FROM t"),
        "abc"
    );

    let json = [&args[..], &["--json", "--method", "values"]].concat();
    let out = pgtide(&json, input);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["rows_read"], 5);
    assert_eq!(v["rows_loaded"], 3);
    assert_eq!(v["rows_skipped_by_table"], 2);
    assert_eq!(v["ok"], true);

    // No trigger, nothing skipped: the line is the usual one.
    psql(&c, "DROP TRIGGER no_drafts ON t");
    let out = pgtide(&args, input);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("loaded 5 rows, rejected 0 rows, read 5 rows\n"),
        "{}",
        text(&out.stdout)
    );
}
