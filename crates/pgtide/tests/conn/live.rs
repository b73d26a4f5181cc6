//! Connecting to real servers: passwords from every source, options,
//! unix sockets, and errors that say where, why and what to do.

use std::os::unix::fs::PermissionsExt;

use pgtide::cluster::{Cluster, ClusterOptions};
use pgtide::conn::Env;
use pgtide::ErrorKind;

use super::{assert_no_secret, bin, parse};

#[tokio::test]
async fn connecting_to_a_real_server() {
    let cluster = Cluster::temp(&bin(), ClusterOptions::default()).unwrap();
    let pw = cluster.password().to_owned();
    let base = format!("host=127.0.0.1 port={} user=postgres", cluster.port());
    let none = Env::empty();

    let client = cluster.target().connect().await.unwrap();
    let name: String = client
        .query_one("SHOW application_name", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(name, "pgtide");

    let t = parse(
        &format!("{base} password={pw} options='-c search_path=elsewhere'"),
        &none,
    );
    let path: String = t
        .connect()
        .await
        .unwrap()
        .query_one("SHOW search_path", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(path, "elsewhere");

    // libpq's session variables, as psql follows them (outside testing:
    // `03/04/2024` loaded as 4 March instead of 3 April), after `options`.
    let env = Env::empty()
        .set("PGDATESTYLE", "ISO, DMY")
        .set("PGTZ", "Asia/Tokyo")
        .set("PGOPTIONS", "-c search_path=elsewhere -c timezone=UTC");
    let c = parse(&format!("{base} password={pw}"), &env)
        .connect()
        .await
        .unwrap();
    let row = c
        .query_one(
            "SELECT current_setting('DateStyle'), current_setting('TimeZone'), \
                    current_setting('search_path'), '03/04/2024'::date::text",
            &[],
        )
        .await
        .unwrap();
    let got: (String, String, String, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(
        got,
        (
            "ISO, DMY".into(),
            "Asia/Tokyo".into(),
            "elsewhere".into(),
            "2024-04-03".into()
        )
    );

    let socket = format!(
        "host={} port={} user=postgres password={pw}",
        cluster.socket_dir().display(),
        cluster.port()
    );
    let t = parse(&socket, &none);
    assert!(t.redacted().contains("?host=/"), "{}", t.redacted());
    t.connect().await.expect("connect over the unix socket");

    let db = cluster
        .target()
        .with_dbname("template1")
        .connect()
        .await
        .unwrap();
    let current: String = db
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(current, "template1");
    let err = cluster
        .target()
        .with_dbname("nope")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.sqlstate(), Some("3D000"));
    assert!(err.hint().unwrap().contains("createdb"), "{err:?}");
}

#[tokio::test]
async fn passwords_come_from_pgpassword_or_the_password_file() {
    let cluster = Cluster::temp(&bin(), ClusterOptions::default()).unwrap();
    let pw = cluster.password().to_owned();
    let base = format!("host=127.0.0.1 port={} user=postgres", cluster.port());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pgpass");
    std::fs::write(
        &file,
        format!(
            "# pgtide test\n127.0.0.1:{}:*:postgres:{pw}\n",
            cluster.port()
        ),
    )
    .unwrap();
    let env = Env::empty().set("PGPASSFILE", &file.to_string_lossy());

    let mode = |m| std::fs::set_permissions(&file, std::fs::Permissions::from_mode(m)).unwrap();
    mode(0o600);
    parse(&base, &env)
        .connect()
        .await
        .expect("password from PGPASSFILE");
    parse(&base, &Env::empty().set("PGPASSWORD", &pw))
        .connect()
        .await
        .expect("password from PGPASSWORD");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::copy(&file, home.join(".pgpass")).unwrap();
    parse(&base, &Env::empty().home(&home))
        .connect()
        .await
        .expect("password from ~/.pgpass");

    mode(0o644);
    let err = parse(&base, &env).connect().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect);
    let hint = err.hint().unwrap();
    assert!(
        hint.contains("group or world access") && hint.contains("PGPASSWORD"),
        "{hint}"
    );
    assert_no_secret(&err, &pw);
}

#[tokio::test]
async fn connection_errors_say_where_why_and_what_to_do() {
    let cluster = Cluster::temp(&bin(), ClusterOptions::default()).unwrap();
    let pw = cluster.password().to_owned();
    let none = Env::empty();

    let wrong = format!(
        "postgresql://postgres:{}x@127.0.0.1:{}/postgres",
        pw,
        cluster.port()
    );
    let err = parse(&wrong, &none).connect().await.unwrap_err();
    assert_eq!(
        (err.kind(), err.sqlstate()),
        (ErrorKind::Connect, Some("28P01")),
        "{err:?}"
    );
    assert!(
        err.message().contains(&format!("port {}", cluster.port())),
        "{err:?}"
    );
    assert!(err.hint().unwrap().contains("PGPASSWORD") && err.hint().unwrap().contains(".pgpass"));
    assert_no_secret(&err, &pw);
    // Tried once: `sslmode=prefer` against a server without TLS was plain
    // already, and a wrong password is not sent again (outside testing:
    // two failed logins, and an error that spoke of TLS).
    assert!(!err.message().contains("without TLS"), "{err:?}");

    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = format!("host=127.0.0.1 port={dead} user=postgres password={pw}");
    let err = parse(&down, &none).connect().await.unwrap_err();
    assert!(
        err.message()
            .contains(&format!("\"127.0.0.1\", port {dead}")),
        "{err:?}"
    );
    assert!(
        err.hint()
            .unwrap()
            .starts_with("is the server running on host \"127.0.0.1\""),
        "{err:?}"
    );
    assert_no_secret(&err, &pw);

    // libpq tries each host in turn.
    let two = format!(
        "host=127.0.0.1,localhost port={dead},{} user=postgres password={pw}",
        cluster.port()
    );
    parse(&two, &none)
        .connect()
        .await
        .expect("the second host answers");
}

/// libpq's `target_session_attrs` values of PostgreSQL 14+ against a
/// primary (they were refused as invalid): `primary` and `prefer-standby`
/// take it (the latter after no host turned out a standby), `standby`
/// refuses it and says why; on both kinds of connection.
#[tokio::test]
async fn target_session_attrs_primary_and_standby() {
    let cluster = Cluster::temp(&bin(), ClusterOptions::default()).unwrap();
    let pw = cluster.password().to_owned();
    let none = Env::empty();
    let base = format!(
        "host=127.0.0.1 port={} user=postgres password={pw}",
        cluster.port()
    );
    for attrs in ["primary", "prefer-standby", "read-write"] {
        let t = parse(&format!("{base} target_session_attrs={attrs}"), &none);
        t.connect().await.expect(attrs);
        t.connect_wire().await.expect(attrs);
    }
    for attrs in ["standby", "read-only"] {
        let t = parse(&format!("{base} target_session_attrs={attrs}"), &none);
        let err = t.connect().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connect, "{err:?}");
        assert!(
            err.hint().unwrap().contains("target_session_attrs"),
            "{err:?}"
        );
        let Err(err) = t.connect_wire().await else {
            panic!("{attrs}: a primary taken on the raw path");
        };
        assert_eq!(err.kind(), ErrorKind::Connect, "{err:?}");
        assert_no_secret(&err, &pw);
    }
    let err = parse(&format!("{base} target_session_attrs=standby"), &none)
        .connect()
        .await
        .unwrap_err();
    assert!(err.message().contains("not in hot standby"), "{err:?}");
}

/// What `psql` needs to reach a target, through the environment only.
#[test]
fn libpq_env_drives_psql() {
    let cluster = Cluster::temp(&bin(), ClusterOptions::default()).unwrap();
    let Some(psql) = cluster.bin().psql() else {
        panic!("no psql found; install postgresql-client");
    };
    let out = std::process::Command::new(psql)
        .env_clear()
        .envs(cluster.target().libpq_env())
        .args(["-X", "-At", "-c", "SELECT current_user"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "postgres");
}
