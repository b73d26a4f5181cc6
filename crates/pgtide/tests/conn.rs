//! Connections made as libpq makes them: parsing, environment, password
//! file, errors, and (in conn/tls.rs) every sslmode against real servers.
//!
//! Environment variables are process-global, so tests drive resolution
//! through an explicit `Env`; the one test of the real process
//! environment holds `PROCESS_ENV`.

#[path = "conn/certs.rs"]
mod certs;
#[path = "conn/live.rs"]
mod live;
#[path = "conn/tls.rs"]
mod tls;

use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;

use pgtide::cluster::PgBin;
use pgtide::conn::pgpass::{self, Lookup};
use pgtide::conn::{Env, SslMode, Target};
use pgtide::ErrorKind;

static PROCESS_ENV: Mutex<()> = Mutex::new(());

pub fn bin() -> PgBin {
    PgBin::for_tests().expect("PostgreSQL server binaries (set PGTIDE_TEST_PGBIN)")
}

/// The password must appear nowhere: message, hint, Debug, causes.
pub fn assert_no_secret(err: &pgtide::Error, secret: &str) {
    let mut texts = vec![
        err.to_string(),
        format!("{err:?}"),
        err.hint().unwrap_or("").to_owned(),
    ];
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        texts.push(s.to_string());
        source = s.source();
    }
    for t in texts {
        assert!(!t.contains(secret), "the password leaked into {t:?}");
    }
}

fn alice() -> Env {
    Env::empty().os_user("alice")
}

pub fn parse(conninfo: &str, env: &Env) -> Target {
    Target::parse_with(conninfo, env).unwrap_or_else(|e| panic!("{conninfo}: {e:?}"))
}

#[test]
fn defaults_are_libpqs() {
    let t = parse("", &alice());
    assert_eq!(
        (t.host(), t.port(), t.user(), t.dbname()),
        ("localhost", 5432, "alice", "alice")
    );
    assert_eq!(t.application_name(), "pgtide");
    assert_eq!(t.sslmode(), SslMode::Prefer);
    let t = parse("", &alice().socket_dir("/var/run/postgresql"));
    assert_eq!(t.host(), "/var/run/postgresql");
    assert_eq!(
        t.redacted(),
        "postgresql://alice@/alice?host=/var/run/postgresql&port=5432"
    );
}

#[test]
fn the_environment_fills_what_the_string_leaves_out() {
    let env = alice()
        .set("PGHOST", "envhost")
        .set("PGPORT", "6000")
        .set("PGUSER", "bob")
        .set("PGDATABASE", "envdb")
        .set("PGAPPNAME", "envapp")
        .set("PGSSLMODE", "require");
    let t = parse("", &env);
    assert_eq!(
        (t.host(), t.port(), t.user(), t.dbname()),
        ("envhost", 6000, "bob", "envdb")
    );
    assert_eq!(
        (t.application_name(), t.sslmode()),
        ("envapp", SslMode::Require)
    );
    let t = parse("postgresql://carol@h:7000/db?sslmode=disable", &env);
    assert_eq!(
        (t.host(), t.port(), t.user(), t.dbname()),
        ("h", 7000, "carol", "db")
    );
    assert_eq!(t.sslmode(), SslMode::Disable);
    // dbname defaults to the user *after* PGUSER is applied.
    let t = parse("", &alice().set("PGUSER", "dave"));
    assert_eq!(t.dbname(), "dave");
}

#[test]
fn resolve_is_none_only_when_nothing_names_a_server() {
    assert!(Target::resolve_with(None, &alice()).unwrap().is_none());
    let only_appname = alice().set("PGAPPNAME", "x").set("PGSSLMODE", "require");
    assert!(Target::resolve_with(None, &only_appname).unwrap().is_none());
    for var in [
        "PGHOST",
        "PGHOSTADDR",
        "PGPORT",
        "PGUSER",
        "PGDATABASE",
        "PGPASSWORD",
    ] {
        let value = if var == "PGHOSTADDR" {
            "127.0.0.1"
        } else if var == "PGPORT" {
            "5433"
        } else {
            "x"
        };
        let env = alice().set(var, value);
        assert!(
            Target::resolve_with(None, &env).unwrap().is_some(),
            "{var} names a server"
        );
    }
    let err = Target::resolve_with(None, &alice().set("PGSERVICE", "prod")).unwrap_err();
    assert!(err.message().contains("PGSERVICE"), "{err:?}");
    assert!(Target::resolve_with(Some("host=h"), &alice())
        .unwrap()
        .is_some());
}

#[test]
fn uri_and_keyword_strings_agree() {
    let uri = parse(
        "postgres://u:p%20w@db.example:6543/my%20db?application_name=a&connect_timeout=5",
        &alice(),
    );
    let kv = parse(
        "host=db.example port=6543 user=u password='p w' dbname='my db' application_name=a",
        &alice(),
    );
    for t in [&uri, &kv] {
        assert_eq!(
            (t.host(), t.port(), t.user(), t.dbname()),
            ("db.example", 6543, "u", "my db")
        );
        assert!(t.has_password());
    }
    assert_eq!(uri.redacted(), "postgresql://u@db.example:6543/my%20db");
    let multi = parse("postgresql://a:1,[::1]:2/d", &alice());
    assert_eq!(multi.redacted(), "postgresql://alice@a:1,[::1]:2/d");
    let addr_only = parse("hostaddr=10.1.2.3", &alice());
    assert_eq!(addr_only.host(), "10.1.2.3");
}

#[test]
fn passwords_never_show() {
    let secret = "Sup3r-S3cret";
    for conninfo in [
        format!("postgresql://app:{secret}@db/prod"),
        format!("host=db user=app password={secret}"),
        "host=db user=app".to_owned(),
    ] {
        let t = parse(&conninfo, &alice().set("PGPASSWORD", secret));
        assert!(!t.redacted().contains(secret) && !format!("{t:?}").contains(secret));
        assert_eq!(
            t.redacted(),
            "postgresql://app@db:5432/prod".replace("prod", t.dbname())
        );
        let env = t.libpq_env();
        assert!(
            env.contains(&("PGPASSWORD", secret.to_owned())),
            "psql gets it through the environment"
        );
    }
    for bad in [
        format!("postgresql://app:{secret}@db:notaport/prod"),
        format!("postgresql://app:{secret}%zz@db/prod"),
        format!("postgresql://app:{secret}@db/prod?bogus=1"),
        format!("postgresql://app:{secret}@db/prod?sslmode=sometimes"),
        format!("host=db password={secret} bogus=1"),
        format!("host=db password='{secret}"),
        format!("password={secret} service=x"),
    ] {
        let err = Target::parse_with(&bad, &alice()).expect_err(&bad);
        assert_eq!(err.kind(), ErrorKind::Config, "{err:?}");
        assert!(err.hint().is_some(), "{err:?}");
        assert_no_secret(&err, secret);
    }
}

#[test]
fn invalid_options_are_named_by_position_never_quoted() {
    let err = Target::parse_with("host=h hots=x", &alice()).unwrap_err();
    assert_eq!(
        err.message(),
        "invalid connection option: unknown key in the 2nd option (at character 8)"
    );
    let err = Target::parse_with("postgresql://h/d?hots=x", &alice()).unwrap_err();
    assert_eq!(
        err.message(),
        "invalid connection option: unknown key in URI query parameter 1"
    );
    let err = Target::parse_with("port=x", &alice()).unwrap_err();
    assert_eq!(
        err.message(),
        "invalid port number: the 1st port in connection option \"port\" is not a number from 1 to 65535"
    );
    let env = alice().set("PGPORT", "x");
    let err = Target::parse_with("", &env).unwrap_err();
    assert_eq!(
        err.message(),
        "invalid port number: the 1st port in PGPORT is not a number from 1 to 65535"
    );
    let err = Target::parse_with("host=a,b,c port=1,2", &alice()).unwrap_err();
    assert!(err.message().contains("3 hosts"), "{err:?}");
}

#[test]
fn with_dbname_changes_only_the_database() {
    let t = parse("postgresql://u:pw@h:1/a", &alice());
    let b = t.with_dbname("b");
    assert_eq!(
        (b.host(), b.port(), b.user(), b.dbname()),
        ("h", 1, "u", "b")
    );
    assert!(b.has_password());
}

#[test]
fn the_process_environment_is_read() {
    let _guard = PROCESS_ENV.lock().unwrap();
    std::env::set_var("PGAPPNAME", "from-process-env");
    let t = Target::parse("host=h");
    std::env::remove_var("PGAPPNAME");
    assert_eq!(t.unwrap().application_name(), "from-process-env");
}

#[test]
fn pgpass_is_ignored_with_group_or_world_access() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pgpass");
    std::fs::write(&file, "h:5432:db:u:pw\n").unwrap();
    let key = pgpass::Key {
        host: "h",
        port: 5432,
        dbname: "db",
        user: "u",
    };
    for (mode, found) in [
        (0o600, true),
        (0o400, true),
        (0o640, false),
        (0o604, false),
        (0o610, false),
    ] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let got = pgpass::lookup(&file, key);
        assert_eq!(
            matches!(got, Lookup::Found(ref p) if p == "pw"),
            found,
            "mode {mode:o}: {got:?}"
        );
        if !found {
            assert!(matches!(got, Lookup::Ignored(_)), "mode {mode:o}: {got:?}");
        }
    }
    assert_eq!(
        pgpass::lookup(&dir.path().join("absent"), key),
        Lookup::NotFound
    );
    assert!(matches!(
        pgpass::lookup(dir.path(), key),
        Lookup::Ignored(_)
    ));
}
