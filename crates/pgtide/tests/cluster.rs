//! The servers pgtide starts itself, against real PostgreSQL binaries
//! (`PGTIDE_TEST_PGBIN` picks the version; default: whatever
//! `PgBin::find` finds).

use std::os::unix::fs::PermissionsExt;

use pgtide::cluster::{Cluster, ClusterOptions, Embedded, PgBin, ServerState};
use pgtide::ErrorKind;

fn bin() -> PgBin {
    PgBin::for_tests().expect("PostgreSQL server binaries (set PGTIDE_TEST_PGBIN)")
}

fn temp(opts: ClusterOptions) -> Cluster {
    Cluster::temp(&bin(), opts).expect("a throwaway cluster starts")
}

#[tokio::test]
async fn temp_cluster_serves_its_version_and_vanishes_on_drop() {
    let bin = bin();
    let cluster = Cluster::temp(&bin, ClusterOptions::default()).unwrap();
    let data = cluster.data_dir().to_owned();
    assert!(
        data.join("PG_VERSION").is_file(),
        "{data:?} is a data directory"
    );
    let client = cluster
        .target()
        .connect()
        .await
        .expect("connect as postgres");
    let row = client
        .query_one(
            "SELECT current_setting('server_version_num')::int / 10000, current_user",
            &[],
        )
        .await;
    let row = row.unwrap();
    assert_eq!(row.get::<_, i32>(0) as u32, bin.version());
    assert_eq!(row.get::<_, String>(1), "postgres");
    let fsync: String = client.query_one("SHOW fsync", &[]).await.unwrap().get(0);
    assert_eq!(
        fsync, "off",
        "throwaway clusters trade durability for speed"
    );
    drop(client);
    let port = cluster.port();
    drop(cluster);
    assert!(!data.exists(), "{data:?} is removed on drop");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens on {port} after drop"
    );
}

#[tokio::test]
async fn settings_reach_postgresql_conf_and_the_superuser_needs_its_password() {
    let opts = ClusterOptions {
        settings: vec![("work_mem".into(), "7MB".into())],
        ..Default::default()
    };
    let cluster = temp(opts);
    let client = cluster.target().connect().await.unwrap();
    let work_mem: String = client.query_one("SHOW work_mem", &[]).await.unwrap().get(0);
    assert_eq!(work_mem, "7MB");
    assert!(cluster.conninfo().contains(cluster.password()));
    let wrong = format!(
        "host=127.0.0.1 port={} user=postgres password=wrong",
        cluster.port()
    );
    let env = pgtide::conn::Env::empty();
    let err = pgtide::conn::Target::parse_with(&wrong, &env)
        .unwrap()
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err:?}");
}

#[test]
fn psql_is_preconfigured_for_the_cluster() {
    let cluster = temp(ClusterOptions::default());
    let out = cluster
        .psql()
        .args(["-X", "-At", "-c", "SELECT current_database()"])
        .output();
    let out = out.expect("psql runs (install postgresql-client)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "postgres");
}

#[test]
fn a_server_that_cannot_start_quotes_its_log() {
    let opts = ClusterOptions {
        settings: vec![("shared_buffers".into(), "lots".into())],
        ..Default::default()
    };
    let err = Cluster::temp(&bin(), opts)
        .err()
        .expect("an invalid setting stops the start");
    assert_eq!(err.kind(), ErrorKind::Cluster);
    assert!(
        err.message().contains("shared_buffers"),
        "the log tail names the setting: {}",
        err.message()
    );
    assert!(err.hint().is_some());
}

#[test]
fn bin_dirs_are_checked() {
    let err = PgBin::at("/nonexistent/bin").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cluster);
    assert!(err.hint().unwrap().contains("PGTIDE_PGBIN"), "{err:?}");
    let bin = bin();
    assert!(bin.tool("postgres").is_file());
    assert!(bin.version() >= 13, "version {}", bin.version());
}

/// The whole life of the embedded server, in a private directory.
#[tokio::test(flavor = "multi_thread")]
async fn embedded_server_persists_across_restarts() {
    let parent = tempfile::Builder::new()
        .prefix("pgtide-embedded-")
        .tempdir_in("/tmp")
        .unwrap();
    // The server may run as user pgtide (when tests run as root).
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = Embedded::at(parent.path().join("server"));
    assert_eq!(server.status().unwrap().state, ServerState::NotInitialized);
    assert!(server.url().is_err(), "no url before start");

    let started = tokio::task::block_in_place(|| server.start()).unwrap();
    assert_eq!(started.state, ServerState::Running, "{started}");
    let url = server.url().unwrap();
    let password = std::fs::read_to_string(server.password_file()).unwrap();
    let password = password.trim().rsplit(':').next().unwrap().to_owned();
    assert!(!url.contains(&password), "the url never holds the password");
    assert!(!started.to_string().contains(&password));
    let mode = std::fs::metadata(server.password_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // The url works as is: libpq (and pgtide) read the password file.
    let via_url = pgtide::conn::Target::parse_with(&url, &pgtide::conn::Env::empty()).unwrap();
    let client = via_url
        .connect()
        .await
        .expect("connect through the url's passfile");
    client
        .batch_execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
        .await
        .unwrap();
    let fsync: String = client.query_one("SHOW fsync", &[]).await.unwrap().get(0);
    assert_eq!(fsync, "on", "the embedded server keeps its data safe");
    drop(client);

    let again = tokio::task::block_in_place(|| server.start()).unwrap();
    assert_eq!(
        (again.port, again.pid),
        (started.port, started.pid),
        "a second start is a no-op"
    );

    let stopped = tokio::task::block_in_place(|| server.stop()).unwrap();
    assert_eq!(stopped.state, ServerState::Stopped);
    let target = tokio::task::block_in_place(|| server.target()).unwrap();
    let client = target
        .connect()
        .await
        .expect("target() restarts the server");
    let x: i32 = client
        .query_one("SELECT x FROM kept", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(x, 42, "data survives a restart");
    drop(client);
    tokio::task::block_in_place(|| server.stop()).unwrap();
}
