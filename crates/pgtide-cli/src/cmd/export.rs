//! `pgtide export`: flags -> `ExportOptions` -> `pgtide::export::run` ->
//! summary.

use std::sync::Arc;

use pgtide::copyopts::Header;
use pgtide::export::{self, ExportOptions, ForceQuote, What};
use pgtide::ident::{parse_column_list, QualifiedName};
use pgtide::progress::Progress;
use pgtide::source::Compression;

use crate::args::{CompressArg, ExportArgs};
use crate::progress::{Display, Work};
use crate::render;

/// Runs the export and returns the exit code.
pub async fn run(a: ExportArgs) -> pgtide::Result<u8> {
    let opts = options(&a)?;
    let target = super::target_or_embedded(a.db.as_deref()).await?;
    let progress = Arc::new(Progress::new(opts.workers));
    super::stop_on_signal(progress.clone());
    let shown = Display::start(
        a.progress,
        a.quiet || a.json,
        Work::Export,
        progress.clone(),
    );
    let report = export::run(&target, &opts, progress).await;
    shown.finish();
    match report {
        Ok(r) => {
            render::export_summary(&r, a.json);
            Ok(crate::EXIT_OK)
        }
        // The reader of stdout stopped early (`| head`): nothing to say.
        Err(e) if a.output == "-" && e.is_broken_pipe() => Ok(crate::EXIT_CLOSED_STDOUT),
        // The partial file is already gone.
        Err(e) if e.kind() == pgtide::ErrorKind::Interrupted => {
            render::error(&e);
            Ok(crate::EXIT_INTERRUPTED)
        }
        Err(e) => Err(e),
    }
}

/// What was typed -> library options (no I/O here).
fn options(a: &ExportArgs) -> pgtide::Result<ExportOptions> {
    let what = match (&a.table, &a.query) {
        (Some(t), None) => What::Table(QualifiedName::parse(t)?),
        (None, Some(q)) => What::Query(q.clone()),
        _ => {
            return Err(pgtide::Error::config(
                "give exactly one of --table and --query",
            ))
        }
    };
    let mut o = ExportOptions::new(what, a.output.clone(), a.format);
    o.columns = a.columns.as_deref().map(parse_column_list).transpose()?;
    o.workers = a.workers;
    o.compress = a.compress.map(|c| match c {
        CompressArg::None => Compression::None,
        CompressArg::Gzip => Compression::Gzip,
        CompressArg::Zstd => Compression::Zstd,
    });
    o.force_quote = match a.force_quote.as_deref().map(str::trim) {
        None => ForceQuote::None,
        Some("*") => ForceQuote::All,
        Some(cols) => ForceQuote::Columns(parse_column_list(cols)?),
    };
    let c = &mut o.copy;
    if a.header {
        c.header = Header::Skip;
    }
    super::copy_chars(
        c,
        a.delimiter.as_deref(),
        a.quote.as_deref(),
        a.escape.as_deref(),
    )?;
    c.null = a.null.clone();
    c.encoding = a.encoding.clone();
    o.validate()?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::args::{Cli, Command};
    use pgtide::export::ForceQuote;

    fn options(args: &[&str]) -> pgtide::Result<pgtide::export::ExportOptions> {
        let cli =
            Cli::try_parse_from([&["pgtide", "export", "-t", "t", "-o", "x.csv"], args].concat())
                .expect("arguments parse");
        let Command::Export(a) = cli.command else {
            panic!("not an export");
        };
        super::options(&a)
    }

    /// Column names follow SQL's rules, as `load --columns` and psql's
    /// `\copy t (a, "B c")`: a quoted name may hold a comma.
    #[test]
    fn column_lists_take_sql_identifiers() {
        let o = options(&[
            "--columns",
            "Name, \"a,b\", \"C\"",
            "--format",
            "csv",
            "--force-quote",
            "\"a,b\"",
        ])
        .unwrap();
        assert_eq!(o.columns.unwrap(), ["name", "a,b", "C"]);
        assert!(matches!(o.force_quote, ForceQuote::Columns(c) if c == ["a,b"]));
        let o = options(&["--format", "csv", "--force-quote", " * "]).unwrap();
        assert!(matches!(o.force_quote, ForceQuote::All));
        assert!(options(&["--columns", "\"a"]).is_err());
    }
}
