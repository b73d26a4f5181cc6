//! Tables tied by the target's foreign keys: a referenced table is copied
//! before the tables that reference it (the larger referencing table
//! went first and failed), `--truncate` empties a referenced table with
//! those that reference it (PostgreSQL refuses it alone), and a table
//! that references itself is copied by one COPY, whose checks run at its
//! end, rather than in ranges committed one by one.

use pgtide::transfer::TransferOptions;

use super::{both, copy_ok, names, pair, same_rows};

const SCHEMA: &str = "
    CREATE TABLE par (id int PRIMARY KEY, v text);
    CREATE TABLE kid (id int PRIMARY KEY, pid int REFERENCES par, pad text);
    CREATE TABLE grandkid (id int PRIMARY KEY, kid int REFERENCES kid);
    CREATE TABLE boss (id int PRIMARY KEY, boss int REFERENCES boss, pad text);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referenced_tables_go_first_and_a_self_reference_goes_whole() {
    let (src, dst) = pair().await;
    both(&src, &dst, SCHEMA).await;
    // kid and boss are far larger than par (largest first would start
    // them first); each boss row references one in a far block.
    src.client
        .batch_execute(
            "INSERT INTO par SELECT g, 'p' FROM generate_series(1, 100) g;
             INSERT INTO kid SELECT g, 1 + g % 100, repeat('k', 200) FROM generate_series(1, 20000) g;
             INSERT INTO grandkid SELECT g, g FROM generate_series(1, 20000) g;
             INSERT INTO boss SELECT g, NULL, repeat('b', 200) FROM generate_series(1, 20000) g;
             UPDATE boss SET boss = 1 + (id + 10000) % 20000;",
        )
        .await
        .unwrap();
    let tables = ["public.grandkid", "public.kid", "public.par", "public.boss"];
    for truncate in [false, true] {
        if !truncate {
            dst.client
                .batch_execute("TRUNCATE par, kid, grandkid, boss")
                .await
                .unwrap();
        }
        let mut o = TransferOptions::new(names(&tables));
        o.workers = 3;
        o.truncate = truncate;
        o.verify = true;
        copy_ok(&src, &dst, &o).await;
        for t in ["par", "kid", "grandkid", "boss"] {
            same_rows(&src, &dst, t).await;
        }
    }
}
