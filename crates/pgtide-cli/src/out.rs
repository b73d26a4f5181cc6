//! Writing to stdout without panicking when it is closed.
//!
//! `println!` panics when stdout is a pipe whose reader has gone
//! (`pgtide server status | head -c1`): Rust ignores SIGPIPE, so the
//! write fails with EPIPE instead of killing the process. Restoring
//! SIGPIPE is no cure: a server closing its socket mid-load would then
//! kill pgtide before it could reconnect or report. So output goes through
//! [`outln!`]: a closed stdout drops it quietly, and the command ends with
//! the exit code of what it did.

/// `println!` that never panics; see the module docs.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: with stderr closed (`2>&1 | head -1`)
/// the line is dropped and the command still ends with its own exit code
/// (`eprintln!` panicked there, and the panic hook's own `eprintln!`
/// made it an abort, exit 134).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::err_line(format_args!($($arg)*))
    };
}

/// Writes one line to stdout. A closed pipe is not an error worth a
/// word; any other failure (a full disk behind `>`) is said on stderr.
pub(crate) fn line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            errln!("warning: cannot write to stdout: {e}");
        }
        _ => {}
    }
}

/// Writes one line to stderr; any failure is ignored (there is nowhere
/// left to say it).
pub(crate) fn err_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err
        .write_fmt(args)
        .and_then(|()| err.write_all(b"\n"))
        .and_then(|()| err.flush());
}
