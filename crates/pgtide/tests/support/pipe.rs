//! Named pipes (FIFOs) as inputs: what a shell's `<(zcat ...)` gives, and
//! a way for a test to make a load wait between two parts of its input.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;

/// A named pipe in a directory of its own.
pub struct Pipe {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Pipe {
    pub fn new() -> Pipe {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.csv");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo");
        Pipe { path, _dir: dir }
    }

    pub fn name(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// Writes `parts` into the pipe from a thread of its own, each after
    /// the sender returned (the first at once), then closes it. A write
    /// the reader refused (it closed the pipe) ends the thread with the
    /// error.
    pub fn write(
        &self,
        parts: Vec<Vec<u8>>,
    ) -> (
        mpsc::Sender<()>,
        std::thread::JoinHandle<std::io::Result<()>>,
    ) {
        let (go, wait) = mpsc::channel::<()>();
        let path = self.path.clone();
        let writer = std::thread::spawn(move || {
            let mut pipe = std::fs::OpenOptions::new().write(true).open(path)?;
            for (i, part) in parts.into_iter().enumerate() {
                if i > 0 && wait.recv().is_err() {
                    break;
                }
                pipe.write_all(&part)?;
                pipe.flush()?;
            }
            Ok(())
        });
        (go, writer)
    }
}
