//! Keeping a connection in step with the server after an error.

use tokio_postgres::Client;

/// Ends a failed transaction and proves the connection is in step: after
/// an error, a response may still be on its way for an earlier request.
/// A COPY refused before copy mode (lock timeout, aborted transaction,
/// permissions) is the known case: tokio-postgres then sends one Sync too
/// many, and the server's extra ReadyForQuery would answer the next
/// request ("unexpected message from server", or worse, a wrong answer).
/// So the ROLLBACK carries a token no other request returns: in step only
/// when the answer is that token. False means discard the connection.
pub async fn rollback_in_step(client: &Client) -> bool {
    in_step_after(client, "ROLLBACK").await
}

/// Runs `sql` (a rollback, to the transaction's start or to a savepoint)
/// and proves the connection in step with a token, as
/// [`rollback_in_step`] does.
pub async fn in_step_after(client: &Client, sql: &str) -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    static TOKEN: AtomicU64 = AtomicU64::new(1);
    let token = TOKEN.fetch_add(1, Ordering::Relaxed).to_string();
    let Ok(messages) = client.simple_query(&format!("{sql}; SELECT {token}")).await else {
        return false;
    };
    let rows: Vec<_> = messages
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(r.get(0)),
            _ => None,
        })
        .collect();
    rows == [Some(token.as_str())]
}
