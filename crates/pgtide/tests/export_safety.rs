//! What `pgtide export` may do to the files and the database it is
//! pointed at (outside testing, as root): it replaced `/dev/full`, a FIFO
//! a reader waited on and a symbolic link with regular files, wrote
//! through a link planted at its fixed `FILE.partial` name, gave an
//! existing 0600 file mode 0644, and ran the statements of a `--query`
//! that closed COPY's parenthesis. Now it writes as psql `\copy .. TO`
//! does: into special files, through links, keeping an existing file's
//! mode; its partial file has a fresh name, created exclusively; and a
//! query is one statement. A FIFO nobody reads is waited for, and
//! Ctrl-C ends the wait.

mod support;

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use pgtide::copyopts::CopyFormat;
use pgtide::export::{self, ExportOptions, What};
use pgtide::progress::Progress;
use support::Db;

async fn export(db: &Db, what: What, out: &Path) -> pgtide::Result<u64> {
    let o = ExportOptions::new(what, out.display().to_string(), CopyFormat::Csv);
    let r = export::run(&db.target, &o, Arc::new(Progress::new(1))).await?;
    Ok(r.rows)
}

fn three_rows() -> What {
    What::Query("SELECT g FROM generate_series(1, 3) g".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_links_fifos_and_queries_are_treated_as_psql_would() {
    let db = Db::start().await;
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);

    // A link is followed: the file it names is replaced, the link stays,
    // and an existing file keeps its mode.
    std::fs::write(at("real.csv"), "old\n").unwrap();
    std::fs::set_permissions(at("real.csv"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink("real.csv", at("link.csv")).unwrap();
    assert_eq!(export(&db, three_rows(), &at("link.csv")).await.unwrap(), 3);
    let link = std::fs::symlink_metadata(at("link.csv")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    assert_eq!(
        std::fs::read_to_string(at("real.csv")).unwrap(),
        "1\n2\n3\n"
    );
    let mode = std::fs::metadata(at("real.csv"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the file's mode was changed");

    // A link planted where the partial file used to be is left alone.
    std::fs::write(at("victim"), "precious\n").unwrap();
    std::os::unix::fs::symlink(at("victim"), at("out.csv.partial")).unwrap();
    export(&db, three_rows(), &at("out.csv")).await.unwrap();
    assert_eq!(std::fs::read_to_string(at("victim")).unwrap(), "precious\n");
    assert_eq!(std::fs::read_to_string(at("out.csv")).unwrap(), "1\n2\n3\n");

    // Another user's link in a shared directory (sticky, world-writable,
    // as /tmp) is not followed: they could aim it at any file. Only root
    // can make a link look like another user's.
    if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
        let shared = at("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::fs::write(at("target"), "kept\n").unwrap();
        let planted = shared.join("out.csv");
        std::os::unix::fs::symlink(at("target"), &planted).unwrap();
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
        let e = export(&db, three_rows(), &planted).await.unwrap_err();
        assert!(e.message().contains("another user"), "{e:?}");
        assert_eq!(std::fs::read_to_string(at("target")).unwrap(), "kept\n");
    }

    // A FIFO is written into, as it is: the reader gets the rows.
    let fifo = at("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut got = String::new();
            std::fs::File::open(fifo)
                .unwrap()
                .read_to_string(&mut got)
                .unwrap();
            got
        })
    };
    assert_eq!(export(&db, three_rows(), &fifo).await.unwrap(), 3);
    assert_eq!(reader.join().unwrap(), "1\n2\n3\n");
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO was replaced");

    // A FIFO nobody reads: the export waits for a reader, and a stop
    // request (Ctrl-C) ends the wait (an open() would not hear it).
    let lonely = at("lonely");
    let made = std::process::Command::new("mkfifo").arg(&lonely).status();
    assert!(made.unwrap().success(), "mkfifo");
    let o = ExportOptions::new(three_rows(), lonely.display().to_string(), CopyFormat::Csv);
    let progress = Arc::new(Progress::new(1));
    let stopper = {
        let p = progress.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            p.request_stop();
        })
    };
    let waited = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        export::run(&db.target, &o, progress),
    );
    let e = waited.await.expect("the stop ends the wait").unwrap_err();
    stopper.await.unwrap();
    assert_eq!(e.kind(), pgtide::ErrorKind::Interrupted, "{e:?}");
    assert!(e.message().contains("waiting for a reader"), "{e:?}");

    // A query cannot close COPY's parenthesis and run statements.
    db.client
        .batch_execute("CREATE TABLE precious (a int)")
        .await
        .unwrap();
    let sneaky = "SELECT 1) TO STDOUT; DROP TABLE precious; COPY (SELECT 1";
    let e = export(&db, What::Query(sneaky.into()), &at("q.csv"))
        .await
        .expect_err("two statements in a --query");
    assert_eq!(e.sqlstate(), Some("42601"), "{e:?}");
    assert!(e.hint().unwrap().contains("one query"), "{e:?}");
    db.client
        .query_one("SELECT count(*) FROM precious", &[])
        .await
        .expect("the table is still there");
    assert!(!at("q.csv").exists());
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let name = f.unwrap().file_name();
        let name = name.to_string_lossy();
        assert!(
            !name.ends_with(".partial") || name == "out.csv.partial",
            "{name}"
        );
    }
}

/// A query that writes (`DELETE .. RETURNING`) commits only once its rows
/// are in place: an export that cannot write them (a full disk) deletes
/// nothing; one that can deletes them and keeps them in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writing_query_commits_only_with_its_output() {
    let db = Db::start().await;
    db.client
        .batch_execute(
            "CREATE TABLE victim (id int, v text);
             INSERT INTO victim SELECT g, repeat('v', 100) FROM generate_series(1, 5000) g",
        )
        .await
        .unwrap();
    let count = || async {
        let n: i64 = db
            .client
            .query_one("SELECT count(*) FROM victim", &[])
            .await
            .unwrap()
            .get(0);
        n
    };
    let delete = || What::Query("DELETE FROM victim WHERE id > 1000 RETURNING *".into());
    let full = export(&db, delete(), Path::new("/dev/full")).await;
    assert!(full.is_err(), "a full disk is an error");
    assert_eq!(
        count().await,
        5000,
        "the rows of a failed export are not deleted"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("deleted.csv");
    assert_eq!(export(&db, delete(), &out).await.unwrap(), 4000);
    assert_eq!(count().await, 1000);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 4000);

    // A COMMIT that fails (a deferred foreign key) undoes the query and
    // leaves the file that was there as it was.
    db.client
        .batch_execute(
            "CREATE TABLE q (id int PRIMARY KEY);
             CREATE TABLE qd (id int, ref int REFERENCES q DEFERRABLE INITIALLY DEFERRED)",
        )
        .await
        .unwrap();
    let kept = dir.path().join("kept.csv");
    std::fs::write(&kept, "PRECIOUS\n").unwrap();
    let insert = What::Query("INSERT INTO qd VALUES (1, 999) RETURNING *".into());
    let e = export(&db, insert, &kept)
        .await
        .expect_err("the commit fails");
    assert!(e.hint().unwrap_or("").contains("left as it was"), "{e:?}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "PRECIOUS\n");
    let n: i64 = db
        .client
        .query_one("SELECT count(*) FROM qd", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    let partials = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|f| {
            f.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("partial")
        })
        .count();
    assert_eq!(partials, 0, "no partial file left");
}
