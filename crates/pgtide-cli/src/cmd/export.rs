//! `pgtide export`: flags -> `ExportOptions` -> `pgtide::export::run` ->
//! summary.

use std::sync::Arc;

use pgtide::copyopts::Header;
use pgtide::export::{self, ExportOptions, ForceQuote, What};
use pgtide::ident::QualifiedName;
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
        // FILE.partial is already gone.
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
    o.columns = a
        .columns
        .as_ref()
        .map(|cols| cols.iter().map(|c| identifier(c)).collect())
        .transpose()?;
    o.workers = a.workers;
    o.compress = a.compress.map(|c| match c {
        CompressArg::None => Compression::None,
        CompressArg::Gzip => Compression::Gzip,
        CompressArg::Zstd => Compression::Zstd,
    });
    o.force_quote = match a.force_quote.as_deref() {
        None => ForceQuote::None,
        Some([star]) if star == "*" => ForceQuote::All,
        Some(cols) => ForceQuote::Columns(
            cols.iter()
                .map(|c| identifier(c))
                .collect::<Result<_, _>>()?,
        ),
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

/// One column name in SQL identifier syntax: `Name` folds to `name`,
/// `"Name"` keeps its case.
fn identifier(s: &str) -> pgtide::Result<String> {
    let q = QualifiedName::parse(s).map_err(|_| {
        pgtide::Error::config(format!("invalid column name {s:?}"))
            .with_hint("quote names with \"\" to keep case or special characters")
    })?;
    if q.schema.is_some() {
        return Err(pgtide::Error::config(format!("invalid column name {s:?}"))
            .with_hint("a column name has no dot; quote it (\"a.b\") if it has one"));
    }
    Ok(q.name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn column_names_follow_sql_case_rules() {
        assert_eq!(super::identifier("Name").unwrap(), "name");
        assert_eq!(super::identifier("\"Name\"").unwrap(), "Name");
        assert_eq!(super::identifier("\"a.b\"").unwrap(), "a.b");
        assert!(super::identifier("a.b").is_err());
    }
}
