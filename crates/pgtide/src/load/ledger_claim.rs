//! `--resume`: a ledger row is a claim on a byte range of an input, and
//! two runs of one input into one table must not both make it.

use tokio_postgres::Client;

use crate::error::{Error, Result};

/// Inserts the ledger row described by the setting `pgtide.claim` (JSON,
/// set with a bound parameter just before: no value is pasted into SQL),
/// unless another run committed an overlapping range of the same input
/// into the same table: then it fails with `error::LEDGER_CLAIMED`, and the
/// chunk's transaction with it. Two loads of one file at once (a user who
/// thinks the first one died runs `--resume` again) would otherwise both
/// load what neither had committed when it started. The transaction lock
/// makes the check and the insert one step against the other run's: it
/// is held until the chunk's `COMMIT`, which follows at once on the usual
/// path (each statement of the block sees what committed before it).
///
/// Only rows whose every row is committed (`shard` NULL) claim: a resumed
/// load routed on the client sends a server only its missing rows of a
/// chunk, so its entries there may legitimately overlap an earlier run's
/// (`sharded/resume.rs`); two such loads at once are not told apart.
const CLAIM_SQL: &str = "DO $claim$
DECLARE
    c jsonb := current_setting('pgtide.claim')::jsonb;
    other_run text;
    other_first int8;
    other_end int8;
BEGIN
    IF c->>'shard' IS NULL THEN
        PERFORM pg_advisory_xact_lock(
            hashtextextended('pgtide.ledger ' || (c->>'input') || ' ' || (c->>'table_oid'), 0));
        SELECT l.run, l.first_byte, l.end_byte INTO other_run, other_first, other_end FROM pgtide.ledger l
         WHERE l.input = c->>'input' AND l.table_oid = (c->>'table_oid')::oid
           AND l.run <> c->>'run' AND l.shard IS NULL
           AND l.first_byte < (c->>'end_byte')::int8 AND (c->>'first_byte')::int8 < l.end_byte
         LIMIT 1;
    END IF;
    IF other_run IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'PT001',
            MESSAGE = format('another pgtide run (%s) committed bytes %s-%s of %s into this '
                             'table while this run was loading them', other_run,
                             other_first, other_end, c->>'input'),
            HINT = 'two loads of one file into one table ran at once; this one stopped '
                   'without committing those rows. Let the other finish, then run the '
                   'same command with --resume: it loads only what is left';
    END IF;
    INSERT INTO pgtide.ledger (input, size, fingerprint, table_name, table_oid, options,
                               first_byte, end_byte, rows, run, shard)
    VALUES (c->>'input', (c->>'size')::int8, c->>'fingerprint', c->>'table_name',
            (c->>'table_oid')::oid, c->>'options', (c->>'first_byte')::int8,
            (c->>'end_byte')::int8, (c->>'rows')::int8, c->>'run', c->>'shard');
END
$claim$";

/// Refuses a `--resume` load of an input into a table that another
/// `--resume` load of it is running (two runs at once: the user thought
/// the first one had died). The session lock is held on `control` until
/// the load ends and drops it; taken before the ledger is read, so what
/// it says is not moving. A server restart ends it with the session:
/// then the claims above still keep each range to one run.
pub(crate) async fn guard(client: &Client, inputs: &[String], table: (&str, u32)) -> Result<()> {
    for input in inputs {
        let Ok(path) = std::fs::canonicalize(input) else {
            continue; // the ledger's own checks say what is wrong with it
        };
        let path = path.to_string_lossy();
        let row = client
            .query_one(
                "SELECT pg_try_advisory_lock(hashtextextended('pgtide.run ' || $1 || ' ' || $2, 0))",
                &[&path, &table.1.to_string()],
            )
            .await?;
        if !row.get::<_, bool>(0) {
            return Err(Error::config(format!(
                "another pgtide load --resume of {input} into {} is running",
                table.0
            ))
            .with_hint(
                "two loads of one file into one table at once would each load what the other \
                 does; wait for that one to end (or stop it), then run the same command again: \
                 it loads only what is left",
            ));
        }
    }
    Ok(())
}

/// Inserts the ledger row `claim` describes (JSON: the columns of
/// `pgtide.ledger`), in the open transaction, unless another run holds an
/// overlapping range: see [`CLAIM_SQL`].
pub(super) async fn insert(
    client: &Client,
    claim: &str,
) -> std::result::Result<(), tokio_postgres::Error> {
    client
        // For the session, not the transaction: some rows (the routing
        // markers of `sharded/resume.rs`) are inserted outside of one.
        .execute("SELECT set_config('pgtide.claim', $1, false)", &[&claim])
        .await?;
    client.batch_execute(CLAIM_SQL).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_refusal_is_classified_by_its_own_code() {
        let raise = format!("ERRCODE = '{}'", crate::error::LEDGER_CLAIMED);
        assert!(super::CLAIM_SQL.contains(&raise));
    }
}
