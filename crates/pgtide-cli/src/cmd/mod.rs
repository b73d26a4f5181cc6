//! One module per subcommand: flags -> library options -> call -> render.

pub mod bench;
pub mod copy;
pub mod demo;
pub mod docs;
pub mod export;
pub mod ledger;
pub mod load;
pub mod server;

use pgtide::cluster;
use pgtide::conn::Target;

/// The connection the user configured, or the embedded server (started if
/// needed), which is then announced on stderr.
pub async fn target_or_embedded(db: Option<&str>) -> pgtide::Result<Target> {
    if let Some(t) = Target::resolve(db)? {
        return Ok(t);
    }
    let target = tokio::task::spawn_blocking(cluster::server_target)
        .await
        .map_err(|e| pgtide::Error::bug(format!("embedded server task failed: {e}")))??;
    errln!(
        "pgtide: no connection configured (no --db, no PG* variables): using the embedded server at {}",
        target.redacted()
    );
    Ok(target)
}

/// The first SIGINT or SIGTERM asks the work to stop cleanly (no new
/// chunk; chunks in progress commit or roll back whole, then the summary
/// lists what was committed); a second one exits at once with 130 (the
/// server rolls back whatever was not committed).
pub fn stop_on_signal(progress: std::sync::Arc<pgtide::progress::Progress>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    tokio::spawn(async move {
        let mut asked = false;
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if asked {
                std::process::exit(i32::from(crate::EXIT_INTERRUPTED));
            }
            asked = true;
            progress.request_stop();
            crate::render::stopping();
        }
    });
}

/// `--delimiter`, `--quote`, `--escape` into `c`: one byte each, with the
/// escapes people type in shells (`\t`).
pub fn copy_chars(
    c: &mut pgtide::copyopts::CopyOptions,
    delimiter: Option<&str>,
    quote: Option<&str>,
    escape: Option<&str>,
) -> pgtide::Result<()> {
    let byte = |name, v: Option<&str>| {
        v.map(|v| pgtide::copyopts::option_byte(name, v))
            .transpose()
    };
    c.delimiter = byte("delimiter", delimiter)?;
    c.quote = byte("quote", quote)?;
    c.escape = byte("escape", escape)?;
    Ok(())
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) is not
/// an error, anything else is said on stderr.
pub fn write_stdout(bytes: &[u8]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            errln!("warning: cannot write to stdout: {e}");
        }
        _ => {}
    }
}
