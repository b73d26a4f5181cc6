//! The `pgtide` binary: parse flags, call the library, render the result.
//!
//! Errors print as `error: ...` and `hint: ...` on stderr, never as a panic
//! or a backtrace. Exit codes are documented in `pgtide load --help`.

#[macro_use]
mod out;
mod args;
mod cmd;
mod progress;
mod render;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Every row was loaded / the command succeeded.
pub(crate) const EXIT_OK: u8 = 0;
/// The load finished, and some rows went to the reject file.
pub(crate) const EXIT_REJECTS: u8 = 1;
/// Any error, usage errors included (clap's convention).
pub(crate) const EXIT_ERROR: u8 = 2;
/// Stopped: more rows were rejected than --max-rejects allows.
pub(crate) const EXIT_REJECT_LIMIT: u8 = 3;
/// Stopped by SIGINT/SIGTERM (128 + 2, the shell's convention for Ctrl-C).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;
/// `export -o -` whose reader went away before the end (`| head`): what a
/// shell reports for a program that SIGPIPE stopped (128 + 13), said
/// quietly, as `cat` would.
pub(crate) const EXIT_CLOSED_STDOUT: u8 = 141;

fn main() -> ExitCode {
    // A panic is a bug in pgtide; even then the user gets one `error:` line
    // and a hint, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        errln!("error: pgtide hit an internal bug: {info}");
        errln!("hint: please report it with the command line that caused it");
    }));
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            render::error(&pgtide::Error::bug(format!(
                "cannot start the async runtime: {e}"
            )));
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Load(a) => cmd::load::run(a).await,
            Command::Export(a) => cmd::export::run(a).await,
            Command::Copy(a) => cmd::copy::run(a).await,
            Command::Server { action } => cmd::server::run(action).await,
            Command::Ledger(a) => cmd::ledger::run(a).await,
            Command::Bench(a) => cmd::bench::run(a).await,
            Command::Demo(a) => cmd::demo::run(a).await,
            Command::Completions { shell } => cmd::docs::completions(shell),
            Command::Man => cmd::docs::man(),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            render::error(&e);
            ExitCode::from(EXIT_ERROR)
        }
    }
}
