//! `--create`: tables missing on the target made from pg_dump of the
//! source (indexes, a foreign key, sequences, a trigger, partitions; the
//! same definitions on both sides), and the error when no pg_dump fits.

use std::sync::Arc;

use pgtide::cluster::PgBin;
use pgtide::progress::Progress;
use pgtide::transfer::{self, TransferOptions};
use pgtide::ErrorKind;

use super::{both, copy_ok, names, pair, same_rows, Server};

/// `pg_dump --schema-only --no-owner --no-privileges -n SCHEMA` of a
/// server, without psql's per-run `\restrict` key lines.
fn schema_dump(s: &Server, pg_dump: &std::path::Path, schema: &str) -> String {
    let mut cmd = std::process::Command::new(pg_dump);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .envs(s.target.libpq_env())
        .args([
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            "-n",
            schema,
        ])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn create_makes_missing_tables_from_pg_dump_and_sets_sequences() {
    // A pg_dump that cannot exist: the error says what to install.
    let e = pgtide::cluster::find_pg_dump(99).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
    assert!(e.message().contains("pg_dump 99 or newer"), "{e:?}");
    assert!(e.hint().unwrap().contains("PGTIDE_PG_DUMP"), "{e:?}");

    let (src, dst) = pair().await;
    // Trigger functions are not part of a table's dump: both sides have it.
    both(
        &src,
        &dst,
        "CREATE FUNCTION public.touch() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN NEW.touched := '2001-02-03 04:05:06+00'; RETURN NEW; END $$",
    )
    .await;
    src.client
        .batch_execute(
            "CREATE SCHEMA app;
             CREATE TABLE app.customers (id serial PRIMARY KEY, email text NOT NULL UNIQUE,
               since date DEFAULT DATE '2020-01-01');
             CREATE TABLE app.orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
               customer int NOT NULL REFERENCES app.customers (id) ON DELETE CASCADE,
               amount numeric(10,2) CHECK (amount >= 0), note text, touched timestamptz);
             CREATE INDEX orders_customer ON app.orders (customer);
             CREATE INDEX orders_note ON app.orders (lower(note)) WHERE note IS NOT NULL;
             CREATE TRIGGER orders_touch BEFORE UPDATE ON app.orders
               FOR EACH ROW EXECUTE FUNCTION public.touch();
             CREATE TABLE app.events (id int, at date NOT NULL) PARTITION BY RANGE (at);
             CREATE TABLE app.events_2020 PARTITION OF app.events
               FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');
             CREATE TABLE app.events_2021 PARTITION OF app.events
               FOR VALUES FROM ('2021-01-01') TO ('2022-01-01');
             CREATE INDEX events_at ON app.events (at);
             INSERT INTO app.customers (email) SELECT 'c' || g || '@x' FROM generate_series(1, 2000) g;
             SELECT setval('app.customers_id_seq', 5000);
             INSERT INTO app.orders (customer, amount, note)
               SELECT 1 + g % 2000, g / 100.0, CASE WHEN g % 3 = 0 THEN 'n' || g END
               FROM generate_series(1, 20000) g;
             INSERT INTO app.events SELECT g, DATE '2020-01-01' + g % 700
               FROM generate_series(1, 3000) g;",
        )
        .await
        .unwrap();
    let mut o = TransferOptions::new(vec![]);
    o.schemas = vec!["app".into()];
    o.workers = 2;
    o.verify = true;
    o.create = true;
    let main = PgBin::for_tests().unwrap();
    let pg_dump = match pgtide::cluster::find_pg_dump(main.version()) {
        Ok((p, _)) => p,
        Err(_) => {
            // No pg_dump for this version here: the copy says so, before
            // writing anything.
            let e = transfer::run(&src.target, &dst.target, &o, Arc::new(Progress::new(2)))
                .await
                .expect_err("no pg_dump");
            assert!(e.hint().unwrap().contains("PGTIDE_PG_DUMP"), "{e:?}");
            eprintln!("no pg_dump {} found: --create not tested", main.version());
            return;
        }
    };
    let r = copy_ok(&src, &dst, &o).await;
    let c = r.created.as_ref().expect("tables were created");
    assert!(c.post_data, "{c:?}");
    let mut tables = c.tables.clone();
    tables.sort();
    assert_eq!(
        tables,
        [
            "app.customers",
            "app.events",
            "app.events_2020",
            "app.events_2021",
            "app.orders"
        ]
    );
    assert_eq!(
        c.sequences,
        ["app.customers_id_seq = 5000", "app.orders_id_seq = 20000"]
    );
    assert!(r.tables.iter().all(|t| t.created), "{:?}", r.tables);
    for t in ["app.customers", "app.orders", "app.events"] {
        same_rows(&src, &dst, t).await;
    }
    // The same definitions: indexes, keys, the trigger, defaults,
    // partitions, identity and serial sequences.
    let (a, b) = (
        schema_dump(&src, &pg_dump, "app"),
        schema_dump(&dst, &pg_dump, "app"),
    );
    assert!(a.contains("CREATE TRIGGER orders_touch"), "{a}");
    assert!(a.contains("FOREIGN KEY (customer)"), "{a}");
    assert_eq!(a, b);
    // Sequences continue where the source's are; keys and triggers work.
    let next: i32 = dst
        .client
        .query_one(
            "INSERT INTO app.customers (email) VALUES ('new') RETURNING id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(next, 5001);
    let e = dst
        .client
        .batch_execute("INSERT INTO app.orders (customer) VALUES (999999)")
        .await
        .unwrap_err();
    assert_eq!(e.code().unwrap().code(), "23503", "{e:?}");
    let touched: String = dst
        .client
        .query_one(
            "UPDATE app.orders SET note = 'x' WHERE id = 1 RETURNING touched::date::text",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(touched, "2001-02-03");
    // A second run finds the table: nothing created, no pg_dump run.
    let mut again = TransferOptions::new(names(&["app.events"]));
    again.create = true;
    again.truncate = true;
    let r = copy_ok(&src, &dst, &again).await;
    assert!(r.created.is_none());
    same_rows(&src, &dst, "app.events").await;
}

/// A sequence or a foreign table named as a source is refused before
/// `--create` writes anything on the target (a sequence of that name was
/// created there, then the copy failed on `LOCK TABLE`).
#[tokio::test]
async fn a_source_that_is_no_table_is_refused_before_create() {
    let (src, dst) = pair().await;
    src.client
        .batch_execute(
            "CREATE SEQUENCE s1;
             CREATE EXTENSION postgres_fdw;
             CREATE SERVER elsewhere FOREIGN DATA WRAPPER postgres_fdw;
             CREATE FOREIGN TABLE ft (a int) SERVER elsewhere;",
        )
        .await
        .unwrap();
    for (table, what) in [("s1", "sequence"), ("ft", "foreign table")] {
        let mut o = TransferOptions::new(names(&[table]));
        o.create = true;
        let e = transfer::run(&src.target, &dst.target, &o, Arc::new(Progress::new(1)))
            .await
            .expect_err(table);
        assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
        assert_eq!(
            e.message(),
            format!("cannot copy from {what} public.{table} (on the source)")
        );
        let left = dst
            .client
            .query_one(
                "SELECT count(*) FROM pg_catalog.pg_class WHERE relname = $1",
                &[&table],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!(left, 0, "{table} was created on the target");
    }
}
