//! A backend killed (SIGKILL) while its `COMMIT` waits in a deferred
//! trigger, and a stranger who takes the next transaction id as soon as
//! the server takes connections again: with the killed transaction's WAL
//! still in the server's buffers ([`keep_wal_in_buffers`]), crash
//! recovery hands that id out again, and the stranger commits under it.
//! Whoever asks `txid_status` about the killed transaction then reads
//! "committed". Shared by the load and copy tests.

use std::time::{Duration, Instant};

use pgtide::conn::Target;
use tokio_postgres::Client;

/// Makes the WAL writer wait 10 s between rounds, so that a small
/// transaction's WAL is not on disk when its backend is killed.
pub async fn keep_wal_in_buffers(client: &Client) {
    for sql in [
        "ALTER SYSTEM SET wal_writer_delay = '10s'",
        "SELECT pg_reload_conf()",
    ] {
        client.batch_execute(sql).await.unwrap();
    }
}

/// SQL giving `table` a deferred trigger that sleeps 2 s per row inserted,
/// in `COMMIT`.
pub fn slow_commit_sql(table: &str) -> String {
    format!(
        "CREATE FUNCTION {table}_slow() RETURNS trigger LANGUAGE plpgsql
             AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$;
         CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON {table}
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {table}_slow();"
    )
}

/// Waits (through `admin`, on the server of `target`) for a `COMMIT`
/// (alone, or after the `SET LOCAL` of a lazy one: `load/lazy.rs`)
/// sleeping in the trigger of [`slow_commit_sql`], kills its backend with
/// SIGKILL, and commits a stranger's transaction as soon as the server is
/// back. Returns the killed transaction's id and the stranger's (32 bits).
pub async fn crash_in_commit(admin: &Client, target: &Target) -> (i64, i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (pid, killed_xid) = loop {
        assert!(Instant::now() < deadline, "no COMMIT waited in the trigger");
        let row = admin
            .query_opt(
                "SELECT pid, backend_xid::text::int8 FROM pg_stat_activity \
                 WHERE query LIKE '%COMMIT' AND wait_event = 'PgSleep'",
                &[],
            )
            .await
            .unwrap();
        if let Some(row) = row {
            break (row.get::<_, i32>(0), row.get::<_, i64>(1));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    loop {
        assert!(Instant::now() < deadline, "the server did not come back");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let Ok(c) = target.connect().await else {
            continue;
        };
        // The first connection after the kill may still be the old
        // server life's, about to be told to go. Ids below the killed
        // one that were handed out again too (an earlier transaction of
        // the load's that rolled back) are taken, one transaction each,
        // until the killed one is reached or passed.
        let mut taken = None;
        while let Ok(row) = c.query_one("SELECT txid_current()", &[]).await {
            let xid = row.get::<_, i64>(0) & 0xffff_ffff;
            taken = Some(xid);
            if xid >= killed_xid || Instant::now() >= deadline {
                break;
            }
        }
        if let Some(xid) = taken {
            return (killed_xid, xid);
        }
    }
}
