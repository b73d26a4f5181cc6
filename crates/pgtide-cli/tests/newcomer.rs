//! Issue 13 part 3: without `--format`, the format comes from the file
//! (binary signature, then the name), and the summary says which.

mod common;

use common::{cluster, pgtide, psql, text};

#[test]
fn format_defaults_from_the_file_and_the_summary_says_so() {
    let c = cluster();
    psql(&c, "CREATE TABLE t (id int, v text)");
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("rows.tsv");
    std::fs::write(&tsv, "1\ta,b\n2\t\\N\n").unwrap();
    let out = pgtide(
        &["load", tsv.to_str().unwrap(), "--table", "t", "--db", &db],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("note: format text (from the file name"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        psql(&c, "SELECT count(*) FROM t WHERE v = 'a,b' OR v IS NULL"),
        "2"
    );
    // A binary COPY file, whatever its name.
    let bin = dir.path().join("rows.dat");
    let out = c
        .psql()
        .args([
            "-X",
            "-c",
            &format!("\\copy t TO '{}' (FORMAT binary)", bin.display()),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = pgtide(
        &[
            "load",
            bin.to_str().unwrap(),
            "--table",
            "t",
            "--db",
            &db,
            "--json",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["notes"].to_string().contains("binary COPY signature"),
        "{v}"
    );
    assert_eq!(psql(&c, "SELECT count(*) FROM t"), "4");
}

/// Issue 13 part 1 from the command line: `--create --explain` prints the
/// statement and creates nothing; `--create` creates and loads and names
/// renamed columns; a later misfit fails with the line, the column and
/// what to do; a second `--create` is refused.
#[test]
fn create_from_the_command_line() {
    let c = cluster();
    let db = c.conninfo();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("flights.csv");
    let mut data = String::from("Year,carrier,dep_delay,,when\n");
    for i in 0..300 {
        data.push_str(&format!(
            "2013,UA,{},x,2013-01-01 05:{:02}:00\n",
            i % 40 - 5,
            i % 60
        ));
    }
    data.push_str("2013,UA,late,x,2013-01-01 06:00:00\n");
    std::fs::write(&csv, &data).unwrap();
    let path = csv.to_str().unwrap();
    let base = ["load", path, "--table", "flights", "--header", "--db", &db];
    let args = |extra: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };

    let out = pgtide(
        &args(&["--create", "--explain", "--sample-rows", "50"]),
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("CREATE TABLE public.flights ("), "{plan}");
    assert!(plan.contains("\"Year\" integer"), "{plan}");
    assert!(plan.contains("c4 text"), "{plan}");
    assert!(plan.contains("\"when\" timestamp"), "{plan}");
    assert_eq!(psql(&c, "SELECT to_regclass('flights') IS NULL"), "t");

    // The last row does not fit the inferred integer.
    let out = pgtide(&args(&["--create", "--sample-rows", "50"]), b"");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{path}:302: column dep_delay")),
        "{err}"
    );
    assert!(err.contains("--type dep_delay=TYPE"), "{err}");
    assert!(err.contains("--sample-rows"), "{err}");
    assert!(
        text(&out.stdout).contains("column 4: empty header field -> c4"),
        "{}",
        text(&out.stdout)
    );

    let out = pgtide(&args(&["--create"]), b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );

    // --type and if-not-exists on a fresh table: every row loads.
    psql(&c, "DROP TABLE flights");
    let out = pgtide(
        &args(&["--create=if-not-exists", "--type", "dep_delay=text"]),
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(psql(&c, "SELECT count(*) FROM flights"), "301");
    assert_eq!(
        psql(&c, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'flights'::regclass AND attname = 'dep_delay'"),
        "text"
    );
}

/// `pgtide completions` and `pgtide man` come from the clap definitions:
/// every shell gets a script naming the subcommands and their flags, bash
/// parses it, and the man page has every subcommand's options.
#[test]
fn completions_and_man_page() {
    for shell in ["bash", "zsh", "fish"] {
        let out = pgtide(&["completions", shell], b"");
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in [
            "load",
            "export",
            "create",
            "sample-rows",
            "output",
            "workers",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
        if shell == "bash" {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("pgtide.bash");
            std::fs::write(&file, &script).unwrap();
            let check = std::process::Command::new("bash")
                .arg("-n")
                .arg(&file)
                .output()
                .unwrap();
            assert!(check.status.success(), "bash -n: {}", text(&check.stderr));
        }
    }
    let out = pgtide(&["completions", "powershell"], b"");
    assert_eq!(out.status.code(), Some(2));

    let out = pgtide(&["man"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let man = text(&out.stdout);
    assert!(
        man.starts_with(".ie") || man.contains(".TH pgtide"),
        "{}",
        &man[..200.min(man.len())]
    );
    for want in [
        ".SH \"PGTIDE LOAD\"",
        ".SH \"PGTIDE EXPORT\"",
        "\\-\\-create",
        "\\-\\-sample\\-rows",
        "\\-\\-rejects",
        "\\-\\-output",
        "Commit model",
    ] {
        assert!(man.contains(want), "man page lacks {want}");
    }
}
