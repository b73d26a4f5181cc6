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
            eprintln!("warning: cannot write to stdout: {e}");
        }
        _ => {}
    }
}
