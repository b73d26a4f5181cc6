//! `--verify`: row count and an order-independent hash of every row,
//! computed by each server over its own table, compared on the client.
//!
//! ```sql
//! SELECT count(*), sum(first 64 bits of md5(convert_to(r::text, 'UTF8')))
//! FROM (SELECT cols FROM t) r
//! ```
//!
//! The source side runs on the snapshot's coordinator, so it hashes
//! exactly the table state that was copied, whatever was written since.
//! md5 and the UTF8 conversion make the hash the same on every version
//! and server encoding; a sum is blind to row order.
//!
//! The hash is over each row's *text* form, so it equals only when both
//! servers print the same values the same way. Both sessions set
//! DateStyle, IntervalStyle, TimeZone, extra_float_digits, bytea_output
//! and lc_monetary (`money`) alike, and, when a column is of a reg* type,
//! an empty search_path (their names print schema-qualified). Known
//! limits: a column whose type
//! differs between the sides (integer vs bigint prints the same;
//! numeric(10,2) vs numeric does not when scales differ) may differ in
//! text though the values are equal; and a type
//! whose output function changed between major versions (none of the
//! built-in types between 14 and 17, as far as the round-trip tests see)
//! would be reported as a mismatch, never hidden.

use tokio_postgres::Client;

use crate::error::Result;

/// Session settings that make both servers print values alike.
pub const SESSION: &str = "SET DateStyle = ISO, YMD; SET IntervalStyle = postgres; \
     SET TimeZone = 'UTC'; SET extra_float_digits = 3; SET bytea_output = hex; \
     SET lc_monetary = 'C'";

/// Count and hash of one table on one server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Digest {
    /// Rows.
    pub rows: i64,
    /// Sum of the rows' 64-bit hashes, as decimal text.
    pub hash: String,
}

/// The statement computing a [`Digest`] of `select` (`SELECT cols FROM t`).
pub fn digest_sql(select: &str) -> String {
    format!(
        "SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(('x' || \
         pg_catalog.substr(pg_catalog.md5(pg_catalog.convert_to(r::text, 'UTF8')), 1, 16))\
         ::bit(64)::int8::numeric), 0)::text FROM ({select}) r"
    )
}

/// Computes the digest of `select` on `client` (whose session has
/// [`SESSION`] applied).
pub async fn digest(client: &Client, select: &str) -> Result<Digest> {
    let row = client.query_one(&digest_sql(select), &[]).await?;
    Ok(Digest {
        rows: row.get(0),
        hash: row.get(1),
    })
}
