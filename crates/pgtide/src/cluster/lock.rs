//! A cross-process lock for starting the embedded server: two `pgtide`
//! commands started at once must not both run `initdb`.
//!
//! A directory is the lock because `mkdir` is atomic on every filesystem
//! and needs neither `unsafe` (flock) nor a newer Rust than the workspace's
//! minimum. A lock left by a killed pgtide is broken once it is older than
//! any start can take.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{cluster_error, owner};
use crate::Result;

/// How long a start waits for another pgtide's start to finish; longer
/// than `initdb` plus `pg_ctl`'s own 60 s wait.
const LOCK_WAIT: Duration = Duration::from_secs(180);

/// A lock older than this was left by a killed pgtide.
const LOCK_STALE: Duration = Duration::from_secs(600);

/// A lock held as a directory next to the server's (mkdir is atomic).
pub(crate) struct DirLock(PathBuf);

impl DirLock {
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.with_extension("lock");
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| owner::io_error(parent, "create", e))?;
        }
        let start = Instant::now();
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(DirLock(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(owner::io_error(&path, "create", e)),
            }
            let age = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok());
            if age.is_some_and(|a| a > LOCK_STALE) {
                let _ = std::fs::remove_dir(&path);
            } else if start.elapsed() > LOCK_WAIT {
                return Err(cluster_error(
                    format!(
                        "another pgtide holds {} (starting the embedded server)",
                        path.display()
                    ),
                    "wait for it, or remove that directory if no pgtide is running",
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}
