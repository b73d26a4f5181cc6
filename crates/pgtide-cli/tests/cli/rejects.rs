//! Reject files: never an input overwritten or a link followed, `--force`
//! to overwrite one, and private permissions.

use std::process::Output;

use crate::common::{cluster, pgtide, psql, text};
use crate::{assert_refused_and_untouched, table_with_three_rows};

/// Runs `pgtide load INPUT --rejects REJECTS --truncate` (plus `extra`)
/// into `t`.
fn load_with_rejects(db: &str, input: &str, rejects: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "load",
        input,
        "--table",
        "t",
        "--db",
        db,
        "--truncate",
        "-q",
        "--rejects",
        rejects,
    ];
    args.extend_from_slice(extra);
    pgtide(&args, b"")
}

#[test]
fn a_reject_file_never_overwrites_an_input_or_follows_a_link() {
    use std::os::unix::fs::symlink;
    let c = cluster();
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let data = "10,x\n11,y\n";
    let input = p("in.csv");
    std::fs::write(&input, data).unwrap();
    std::fs::hard_link(&input, p("hard.csv")).unwrap();
    symlink(&input, p("sym_to_input.csv")).unwrap();
    std::fs::write(p("other.txt"), "keep me\n").unwrap();
    symlink(p("other.txt"), p("sym_to_other.rejects")).unwrap();
    std::fs::write(p("old.rejects"), "old rejects\n").unwrap();
    let log_input = p("x.rejects.log");
    std::fs::write(&log_input, data).unwrap();

    let cases: [(&str, &str, &str, &[&str]); 8] = [
        ("the input itself", &input, &input, &[]),
        ("the input, with --force", &input, &input, &["--force"]),
        (
            "a hard link to the input",
            &input,
            &p("hard.csv"),
            &["--force"],
        ),
        (
            "a symlink to the input",
            &input,
            &p("sym_to_input.csv"),
            &["--force"],
        ),
        (
            "the input by another spelling",
            &input,
            &format!("{}/./in.csv", p("")),
            &[],
        ),
        (
            "its .log is the input",
            &log_input,
            &p("x.rejects"),
            &["--force"],
        ),
        (
            "a symlink at the reject path",
            &input,
            &p("sym_to_other.rejects"),
            &["--force"],
        ),
        (
            "an existing reject file without --force",
            &input,
            &p("old.rejects"),
            &[],
        ),
    ];
    for (case, input, rejects, extra) in cases {
        table_with_three_rows(&c);
        let out = load_with_rejects(&db, input, rejects, extra);
        assert_refused_and_untouched(&c, &out, case);
        assert_eq!(std::fs::read_to_string(input).unwrap(), data, "{case}");
    }
    assert_eq!(
        std::fs::read_to_string(p("other.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(
        std::fs::read_to_string(p("old.rejects")).unwrap(),
        "old rejects\n"
    );
    let out = load_with_rejects(&db, &input, &p("old.rejects"), &[]);
    let err = text(&out.stderr);
    assert!(err.contains("--force"), "{err}");
    let out = load_with_rejects(&db, &input, &input, &[]);
    let err = text(&out.stderr);
    assert!(err.contains("is an input"), "{err}");
}

#[test]
fn force_overwrites_a_reject_file_and_reject_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let c = cluster();
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let input = p("in.csv");
    std::fs::write(&input, "10,x\nbad,y\n12,z\n").unwrap();
    let mode = |path: &str| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;

    table_with_three_rows(&c);
    let fresh = p("fresh.rejects");
    let out = load_with_rejects(&db, &input, &fresh, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "bad,y\n");
    assert_eq!(mode(&fresh), 0o600);
    assert_eq!(mode(&format!("{fresh}.log")), 0o600);

    let old = p("old.rejects");
    std::fs::write(&old, "old rejects, much longer than the new ones\n").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = load_with_rejects(&db, &input, &old, &["--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "bad,y\n");
    assert_eq!(mode(&old), 0o600);
    assert_eq!(
        psql(&c, "SELECT string_agg(id::text, ',' ORDER BY id) FROM t"),
        "10,12"
    );
}
