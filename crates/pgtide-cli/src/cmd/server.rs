//! `pgtide server start|stop|status|url`: the embedded PostgreSQL.

use pgtide::cluster;

use crate::args::ServerAction;

/// Runs the action (blocking work on a blocking thread).
pub async fn run(action: ServerAction) -> pgtide::Result<u8> {
    tokio::task::spawn_blocking(move || blocking(action))
        .await
        .map_err(|e| pgtide::Error::bug(format!("server task failed: {e}")))?
}

fn blocking(action: ServerAction) -> pgtide::Result<u8> {
    match action {
        ServerAction::Start => {
            let s = cluster::server_start()?;
            outln!("{s}");
        }
        ServerAction::Stop => {
            let s = cluster::server_stop()?;
            outln!("{s}");
        }
        ServerAction::Status => {
            let s = cluster::server_status()?;
            outln!("{s}");
        }
        ServerAction::Url => outln!("{}", cluster::server_url()?),
    }
    Ok(crate::EXIT_OK)
}
