//! No piece of a password is ever printed, whatever fails, and the hint
//! says to keep it out of `--db`.

use std::process::Output;

use crate::common::{cluster, pgtide, text};

/// Every piece of two or more characters of `password`: none may appear
/// in anything pgtide prints.
fn assert_no_piece_of(password: &str, out: &Output, db: &str) {
    let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let chars: Vec<char> = password.chars().collect();
    for len in 2..=chars.len() {
        for w in chars.windows(len) {
            let piece: String = w.iter().collect();
            assert!(
                !printed.contains(&piece),
                "{piece:?} of the password printed for --db {db:?}:\n{printed}"
            );
        }
    }
}

#[test]
fn no_piece_of_a_password_is_ever_printed_and_the_hint_keeps_it_out_of_db() {
    let c = cluster();
    let port = c.port();
    // Letters chosen so that no pair of them occurs in pgtide's or the
    // server's own wording; each has the characters that break a
    // connection string when typed raw.
    let passwords = [
        r#"Qz:Xj@Vk/Wq=Jx'Zk"Yq Kv"#,
        "Zq@Jv/Xk?Yw",
        "Vx?Jq=Zk@Qj",
        "Wz Jq=Xv",
        "Kq'Zx Vj",
        "Jz%Qx:Wv",
        "Xq:Zj:Vw@Kx",
    ];
    for pw in passwords {
        let encoded: String = pw
            .bytes()
            .map(|b| match b {
                b if b.is_ascii_alphanumeric() => (b as char).to_string(),
                b => format!("%{b:02X}"),
            })
            .collect();
        let quoted = pw.replace('\\', "\\\\").replace('\'', "\\'");
        let dbs = [
            format!("postgresql://postgres:{pw}@127.0.0.1:{port}/postgres"),
            format!("postgresql://postgres:{pw}@127.0.0.1:{port}/postgres?sslmode=disable"),
            format!("host=127.0.0.1 port={port} user=postgres password={pw} dbname=postgres"),
            format!("password={pw} host=127.0.0.1 port={port} user=postgres"),
            format!("host=127.0.0.1 password='{pw}' port={port}"),
            // Written correctly: the server refuses the wrong password.
            format!("postgresql://postgres:{encoded}@127.0.0.1:{port}/postgres"),
            format!("host=127.0.0.1 port={port} user=postgres password='{quoted}'"),
        ];
        for (i, db) in dbs.iter().enumerate() {
            let out = pgtide(&["load", "-", "--table", "t", "--db", db], b"1\n");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{db}: {err}");
            assert!(
                err.starts_with("error: ") && err.contains("\nhint: "),
                "{err}"
            );
            assert!(!err.contains("panicked"), "{err}");
            assert_no_piece_of(pw, &out, db);
            if i >= 5 {
                assert!(err.contains("authentication failed"), "{db}: {err}");
                assert!(
                    err.contains("PGPASSWORD") && err.contains(".pgpass"),
                    "{err}"
                );
                assert!(err.contains("not in --db"), "{err}");
            }
        }
    }
}
