//! The method checked against the options and the server before any row
//! is read (`LoaderSpec::prepare`): `binary`'s fallbacks to text COPY, and
//! what the INSERT methods cannot read as COPY would.

use tokio_postgres::Client;

use super::super::{binary, insert};
use super::{LoaderSpec, Method, MethodSetup};
use crate::copyopts::CopyFormat;
use crate::error::{Error, Result};

impl LoaderSpec {
    /// Checks the method against the options and the server, on `client`
    /// (one of the loaders' connections, so its session settings are the
    /// ones the loaders see), before any row is read. `binary` falls back
    /// to `copy` when a column type has no safe binary form or the session
    /// is not UTF-8; the returned notes say so.
    pub async fn prepare(&mut self, client: &Client) -> Result<Vec<String>> {
        let setup = self.setup.clone();
        let mut notes = Vec::new();
        match self.method {
            Method::Copy => {}
            Method::Binary if setup.format == CopyFormat::Binary => {
                notes.push(
                    "--method binary: the input is binary COPY already; sent as it is (method copy)"
                        .to_owned(),
                );
                self.method = Method::Copy;
            }
            Method::Binary => {
                let escapes = text_escapes_need_copy(client, &setup).await?;
                if let Some(enc) = escapes {
                    notes.push(format!(
                        "--method binary: text escapes such as \\351 are bytes of the database \
                         encoding ({enc}), which only COPY reads; loaded by text COPY instead"
                    ));
                    self.method = Method::Copy;
                } else if let Some(why) = binary::fallback_reason(client, &setup).await? {
                    notes.push(format!(
                        "--method binary: {why}; loaded by text COPY instead (same result)"
                    ));
                    self.method = Method::Copy;
                }
            }
            Method::Pipeline | Method::Values | Method::Insert => {
                if !setup.utf8_input() {
                    return Err(Error::config(format!(
                        "--method {} needs UTF-8 input, the input is {}",
                        self.method.name(),
                        setup.encoding.as_deref().unwrap_or("?")
                    ))
                    .with_hint(
                        "use --method copy (the server converts), or convert the file to UTF-8",
                    ));
                }
                if let Some(enc) = text_escapes_need_copy(client, &setup).await? {
                    return Err(Error::config(format!(
                        "--method {} reads text input as UTF-8, but the database encoding is \
                         {enc}: a text escape such as \\351 stands for a byte of {enc}, which \
                         only COPY reads as it should",
                        self.method.name()
                    ))
                    .with_hint("use --method copy (or --format csv, which has no such escapes)"));
                }
                insert::check(client, self.method, &setup).await?;
            }
        }
        Ok(notes)
    }
}

/// Text input into a database whose encoding is not UTF-8: the server
/// de-escapes `\351` or `\xE9` after converting the line to the database
/// encoding, so the byte is one of that encoding; the client-side methods
/// send UTF-8 and would read it otherwise. `Some(encoding)` then.
async fn text_escapes_need_copy(client: &Client, setup: &MethodSetup) -> Result<Option<String>> {
    if setup.format != CopyFormat::Text {
        return Ok(None);
    }
    let enc: String = client.query_one("SHOW server_encoding", &[]).await?.get(0);
    Ok((!enc.eq_ignore_ascii_case("UTF8")).then_some(enc))
}
