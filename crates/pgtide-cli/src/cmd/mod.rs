//! One module per subcommand: flags -> library options -> call -> render.

pub mod bench;
pub mod demo;
pub mod export;
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
    eprintln!(
        "pgtide: no connection configured (no --db, no PG* variables): using the embedded server at {}",
        target.redacted()
    );
    Ok(target)
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
