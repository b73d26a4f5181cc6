//! `pgtide export` end to end through the binary: JSON summary, stdout with
//! compression, and the `error:` + `hint:` lines and exit code 2 of a
//! missing table, an error in the middle of the COPY, a write permission
//! error and a full device.

use std::process::{Command, Output, Stdio};

use pgtide::cluster::{Cluster, ClusterOptions, PgBin};

fn pgtide(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pgtide"));
    c.args(args)
        .env_remove("PGHOST")
        .env_remove("PGPASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn run(c: &mut Command) -> Output {
    c.output().expect("run pgtide")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn cluster_with_table() -> Cluster {
    let bin = PgBin::for_tests().expect("PostgreSQL binaries");
    let c = Cluster::temp(&bin, ClusterOptions::default()).expect("throwaway cluster");
    let out = c
        .psql()
        .args([
            "-X",
            "-q",
            "-c",
            "CREATE TABLE \"Events\" (id int, name text, at date); \
             INSERT INTO \"Events\" SELECT g, 'n' || g, date '2024-01-01' + g \
             FROM generate_series(1, 5000) g; ANALYZE \"Events\"",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    c
}

fn assert_error(out: &Output, message: &str, hint: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("error: ") && l.contains(message)),
        "no error line with {message:?}: {err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("hint: ") && l.contains(hint)),
        "no hint line with {hint:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn exports_to_a_file_with_json_and_to_compressed_stdout() {
    let c = cluster_with_table();
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.csv");
    let file_s = file.display().to_string();
    let out = run(&mut pgtide(&[
        "export",
        "--table",
        "\"Events\"",
        "--columns",
        "id,NAME",
        "--output",
        &file_s,
        "--header",
        "--db",
        &db,
        "--json",
        "--workers",
        "2",
    ]));
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["rows"], 5000);
    assert_eq!(v["workers"], 2);
    assert_eq!(v["format"], "csv");
    assert_eq!(v["source"], "public.Events");
    assert!(v["server_version"].as_str().is_some());
    assert!(v["seconds"].as_f64().is_some());
    let written = std::fs::read(&file).unwrap();
    assert_eq!(v["bytes"], written.len() as u64);
    let csv = text(&written);
    assert_eq!(csv.lines().next(), Some("id,name"));
    assert_eq!(csv.lines().count(), 5001);
    assert!(csv.contains("\n4999,n4999\n"));

    let out = run(&mut pgtide(&[
        "export",
        "--query",
        "SELECT id, name FROM \"Events\"",
        "--output",
        "-",
        "--compress",
        "zstd",
        "--header",
        "--db",
        &db,
    ]));
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let plain = zstd::decode_all(&out.stdout[..]).expect("zstd on stdout");
    assert!(plain == written, "stdout differs from the file export");
    // The human summary goes to stderr when the data is on stdout.
    assert!(
        text(&out.stderr).contains("exported 5,000 rows"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_missing_table_is_exit_2_with_a_hint_and_no_file() {
    let c = cluster_with_table();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.csv");
    let out = run(&mut pgtide(&[
        "export",
        "--table",
        "events",
        "--output",
        &file.display().to_string(),
        "--db",
        &c.conninfo(),
    ]));
    assert_error(&out, "table events does not exist", "quote");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn an_error_in_the_middle_of_the_copy_is_exit_2_and_no_file() {
    let c = cluster_with_table();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.csv");
    // Row 50,000 fails after the rows before it were sent.
    let query =
        "SELECT CASE WHEN g = 50000 THEN 1/(g-g) ELSE g END FROM generate_series(1,100000) g";
    let out = run(&mut pgtide(&[
        "export",
        "--query",
        query,
        "--output",
        &file.display().to_string(),
        "--db",
        &c.conninfo(),
    ]));
    assert_error(&out, "division by zero", "nothing was written");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    // To stdout: what came before the error may be out, but the exit
    // status says it failed.
    let out = run(&mut pgtide(&[
        "export",
        "--query",
        query,
        "--output",
        "-",
        "--db",
        &c.conninfo(),
    ]));
    assert_error(&out, "division by zero", "stdout may have received part");
}

#[test]
fn an_unwritable_directory_is_exit_2_with_a_hint() {
    let c = cluster_with_table();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.csv").display().to_string();
    let db = c.conninfo();
    let args = [
        "export",
        "--table",
        "\"Events\"",
        "--output",
        &file,
        "--db",
        &db,
    ];
    // root writes anywhere: run as nobody then (the directory is root's,
    // 0755); otherwise take write permission away.
    let out = if is_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_pgtide"))
            .args(args)
            .env_remove("PGHOST")
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null());
        run(&mut cmd)
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
        run(&mut pgtide(&args))
    };
    assert_error(&out, "Permission denied", "write permission");
    assert!(!std::path::Path::new(&file).exists());
}

/// Whether we run as root (from /proc, without unsafe code).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2))
                == Some("0")
        })
        .unwrap_or(false)
}

#[test]
fn a_full_device_is_exit_2_with_a_hint() {
    // /dev/full answers every write with ENOSPC: the same error a full
    // disk gives, without filling one.
    let c = cluster_with_table();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = run(pgtide(&[
        "export",
        "--table",
        "\"Events\"",
        "--output",
        "-",
        "--db",
        &c.conninfo(),
    ])
    .stdout(Stdio::from(full)));
    assert_error(&out, "No space left on device", "full");
}
