//! `pgtide load`: flags -> `LoadOptions` -> `pgtide::load::run` -> summary.

use std::sync::Arc;

use pgtide::copyopts::{option_byte, CopyFormat};
use pgtide::ident::{parse_column_list, QualifiedName};
use pgtide::infer::create::Create;
use pgtide::load::{self, LoadOptions};
use pgtide::progress::Progress;

use crate::args::{CreateArg, CreateArgs, LoadArgs, MethodArg, OnConflictArg, ResumeArg};
use crate::progress::{Display, Work};
use crate::render;

/// Runs the load and returns the exit code.
pub async fn run(a: LoadArgs) -> pgtide::Result<u8> {
    let (format, guessed) = match a.format {
        Some(f) => (f, None),
        None => {
            let first = a.inputs.first().map_or("-", String::as_str);
            let (f, why) = pgtide::source::guess_format(first)?;
            (f, Some(format!("format {f} ({why}; --format to choose)")))
        }
    };
    let opts = options(&a, format)?;
    if a.inputs.iter().filter(|i| *i == "-").count() > 1 {
        return Err(pgtide::Error::config("stdin (-) can be given only once"));
    }
    let target = super::target_or_embedded(a.db.as_deref()).await?;
    if a.create.explain {
        if opts.create.is_some() {
            let plan = load::create::explain(&target, &opts).await?;
            super::write_stdout(plan.explain().as_bytes());
            super::write_stdout(b"\n");
        }
        let plan = load::explain(&target, &opts).await?;
        super::write_stdout(render::explain(&plan, a.json).as_bytes());
        return Ok(crate::EXIT_OK);
    }
    let progress = Arc::new(Progress::new(opts.workers));
    super::stop_on_signal(progress.clone());
    let shown = Display::start(a.progress, a.quiet || a.json, Work::Load, progress.clone());
    let report = load::run(&target, &opts, progress).await;
    shown.finish();
    let mut report = report?;
    report.notes.extend(guessed);
    render::load_summary(&report, a.json);
    match &report.failure {
        None if report.rows_rejected > 0 => Ok(crate::EXIT_REJECTS),
        None => Ok(crate::EXIT_OK),
        Some(e) => {
            render::error(e);
            Ok(match e.kind() {
                pgtide::ErrorKind::RejectLimit => crate::EXIT_REJECT_LIMIT,
                pgtide::ErrorKind::Interrupted => crate::EXIT_INTERRUPTED,
                _ => crate::EXIT_ERROR,
            })
        }
    }
}

/// What was typed (and the format, resolved) -> library options (no I/O
/// here).
fn options(a: &LoadArgs, format: CopyFormat) -> pgtide::Result<LoadOptions> {
    let mut o = LoadOptions::new(a.inputs.clone(), QualifiedName::parse(&a.table)?, format);
    o.columns = a.columns.as_deref().map(parse_column_list).transpose()?;
    o.workers = a.workers;
    o.truncate = a.truncate;
    o.defer_indexes = a.defer_indexes;
    o.defer_constraints = a.defer_constraints;
    o.single_transaction = a.single_transaction;
    o.method = match (a.method, &a.sql) {
        (None, sql) => load::Method::default_for(sql.as_deref()),
        (Some(MethodArg::Copy), _) => load::Method::Copy,
        (Some(MethodArg::Binary), _) => load::Method::Binary,
        (Some(MethodArg::Pipeline), _) => load::Method::Pipeline,
        (Some(MethodArg::Values), _) => load::Method::Values,
        (Some(MethodArg::Insert), _) => load::Method::Insert,
    };
    o.sql = a.sql.clone();
    o.batch_rows = a.batch_rows;
    o.rejects = a.rejects.clone();
    o.overwrite_rejects = a.force;
    o.max_rejects = a.max_rejects;
    o.chunk_bytes = a.chunk_bytes;
    o.message_bytes = a.message_bytes;
    o.max_record_bytes = a.max_record_bytes;
    o.route = pgtide::load::sharded::Route::parse(&a.route)?;
    for s in &a.shard_db {
        let (server, conninfo) = pgtide::shard::remote::parse_override(s)?;
        o.shard_db.insert(server, conninfo);
    }
    o.create = create_options(&a.create)?;
    o.resume = a.resume.resume.map(|r| match r {
        ResumeArg::Fingerprint => load::ledger::ResumeMode::Edges,
        ResumeArg::Strict => load::ledger::ResumeMode::Strict,
    });
    o.on_conflict = a.upsert.on_conflict.map(|w| match w {
        OnConflictArg::Update => load::upsert::OnConflict::Update,
        OnConflictArg::Skip => load::upsert::OnConflict::Skip,
    });
    o.key = a.upsert.key.as_deref().map(parse_column_list).transpose()?;
    let c = &mut o.copy;
    c.header = a.header;
    c.delimiter = a
        .delimiter
        .as_deref()
        .map(|v| option_byte("delimiter", v))
        .transpose()?;
    c.quote = a
        .quote
        .as_deref()
        .map(|v| option_byte("quote", v))
        .transpose()?;
    c.escape = a
        .escape
        .as_deref()
        .map(|v| option_byte("escape", v))
        .transpose()?;
    c.null = a.null.clone();
    c.force_null = column_lists(&a.force_null)?;
    c.force_not_null = column_lists(&a.force_not_null)?;
    c.encoding = a.encoding.clone();
    c.validate()?;
    Ok(o)
}

/// Every occurrence of a repeatable column-list flag, in order.
fn column_lists(lists: &[String]) -> pgtide::Result<Vec<String>> {
    let mut names = Vec::new();
    for list in lists {
        names.extend(parse_column_list(list)?);
    }
    Ok(names)
}

/// `--create`, `--type col=TYPE`, `--sample-rows`.
fn create_options(a: &CreateArgs) -> pgtide::Result<Option<Create>> {
    let Some(when) = a.create else {
        return Ok(None);
    };
    let mut types = Vec::new();
    for t in &a.types {
        let Some((col, ty)) = t.split_once('=') else {
            return Err(
                pgtide::Error::config(format!("--type {t}: expected COL=TYPE"))
                    .with_hint("e.g. --type zip=text"),
            );
        };
        types.push((col.trim().to_string(), ty.trim().to_string()));
    }
    Ok(Some(Create {
        if_not_exists: when == CreateArg::IfNotExists,
        types,
        sample_rows: a.sample_rows,
    }))
}
