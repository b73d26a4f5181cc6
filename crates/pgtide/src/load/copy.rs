//! The COPY method: a chunk's bytes forwarded unchanged into
//! `COPY ... FROM STDIN`.
//!
//! The bytes are never re-encoded; they are cut into CopyData messages of
//! [`MESSAGE_BYTES`]. The caller (`method`) wraps it in the batch's
//! transaction.

use bytes::Bytes;
use futures_util::SinkExt;
use tokio_postgres::Client;

/// CopyData message size. psql 14 sent one message per row and psql 15
/// sends 8 KiB; larger messages cut per-message work on both sides until
/// the server's 64 KiB read buffer is the limit. Measured in
/// docs/benchmarks.md ("message size").
pub const MESSAGE_BYTES: usize = 64 * 1024;

/// What to send around each chunk's bytes.
#[derive(Debug, Clone, Default)]
pub struct Framing {
    /// Sent before the data: the binary file header, when binary.
    pub prefix: Option<Bytes>,
    /// Whether to end with the binary trailer.
    pub binary_trailer: bool,
}

/// Runs one COPY of `data` (whole records); returns the server's row
/// count.
pub async fn copy_bytes(
    client: &Client,
    sql: &str,
    framing: &Framing,
    data: &Bytes,
    message_bytes: usize,
) -> Result<u64, tokio_postgres::Error> {
    let sink = client.copy_in::<_, Bytes>(sql).await?;
    futures_util::pin_mut!(sink);
    if let Some(prefix) = &framing.prefix {
        sink.feed(prefix.clone()).await?;
    }
    let step = message_bytes.max(1);
    let mut off = 0;
    while off < data.len() {
        let end = (off + step).min(data.len());
        sink.feed(data.slice(off..end)).await?;
        off = end;
    }
    if framing.binary_trailer {
        sink.feed(Bytes::from_static(copyfmt::binary::TRAILER))
            .await?;
    }
    sink.finish().await
}
