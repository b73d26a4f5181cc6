//! `pgtide server start` refuses a directory it did not create and
//! changes nothing in it (owners and modes kept, as root too).

use std::process::Command;

use crate::common::text;

#[test]
fn server_start_refuses_a_directory_it_did_not_create_and_touches_nothing() {
    use std::os::unix::fs::MetadataExt;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("theirs");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/file.txt"), "someone else's").unwrap();
    // As root (CI, containers), give the files a foreign owner, as a
    // user's own directory would have: they must keep it.
    let foreign = 4242;
    let root = running_as_root();
    if root {
        for p in [dir.clone(), dir.join("sub"), dir.join("sub/file.txt")] {
            std::os::unix::fs::chown(&p, Some(foreign), Some(foreign)).unwrap();
        }
    }
    let owners = || {
        ["", "sub", "sub/file.txt"].map(|p| {
            let m = std::fs::metadata(dir.join(p)).unwrap();
            (m.uid(), m.gid(), m.mode())
        })
    };
    let before = owners();
    let out = Command::new(env!("CARGO_BIN_EXE_pgtide"))
        .args(["server", "start"])
        .env("PGTIDE_SERVER_DIR", &dir)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: refusing to set up the embedded server in"),
        "{err}"
    );
    assert!(err.contains("not created by pgtide"), "{err}");
    assert!(
        err.contains("\nhint: ") && err.contains("PGTIDE_SERVER_DIR"),
        "{err}"
    );
    assert_eq!(owners(), before, "owners or modes changed");
    if root {
        assert_eq!(before[2].0, foreign);
    }
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["sub"], "nothing written into the directory");
}

/// Whether this test runs as root (the case where pgtide chowns).
fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    text(&out.stdout).trim() == "0"
}
