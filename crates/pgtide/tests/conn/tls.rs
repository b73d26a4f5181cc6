//! sslmode against a real server with `ssl=on`, case by case as libpq
//! documents it (https://www.postgresql.org/docs/current/libpq-ssl.html).

use pgtide::cluster::{Cluster, ClusterOptions, SslFiles};
use pgtide::conn::{Env, Target};
use pgtide::ErrorKind;

use super::certs::Certs;
use super::{assert_no_secret, bin};

/// Connects with the cluster's conninfo plus `extra` (later keys win);
/// Ok(true) when the session uses TLS.
async fn ssl_in_use(cluster: &Cluster, extra: &str, env: &Env) -> pgtide::Result<bool> {
    let target = Target::parse_with(&format!("{} {extra}", cluster.conninfo()), env)?;
    let ssl = |client: tokio_postgres::Client| async move {
        let row = client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await?;
        Ok::<bool, pgtide::Error>(row.get(0))
    };
    let plain = match target.connect().await {
        Ok(client) => ssl(client).await,
        Err(e) => Err(e),
    };
    // A loader's connection (our own socket, `connect_wire`) must come
    // out the same way, with the same error.
    let wire = match target.connect_wire().await {
        Ok((client, ..)) => ssl(client).await,
        Err(e) => Err(e),
    };
    match (&plain, &wire) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{extra}: TLS in use"),
        (Err(a), Err(b)) => {
            assert_eq!(a.message(), b.message(), "{extra}");
            assert_eq!(a.hint(), b.hint(), "{extra}");
        }
        _ => panic!("{extra}: connect {plain:?}, connect_wire {wire:?}"),
    }
    plain
}

/// `--method pipeline` speaks the protocol itself between tokio-postgres'
/// requests (`load::wire`): over TLS it must write into the TLS stream,
/// and SCRAM channel binding must still work.
#[tokio::test]
async fn a_pipeline_load_over_tls_with_channel_binding() {
    use std::sync::Arc;
    let certs = Certs::generate();
    let cluster = ssl_cluster(&certs, vec![]);
    let extra = "sslmode=require channel_binding=require host=localhost";
    let target =
        Target::parse_with(&format!("{} {extra}", cluster.conninfo()), &Env::empty()).unwrap();
    let client = target.connect().await.unwrap();
    client
        .batch_execute("CREATE TABLE p (id int PRIMARY KEY, v text)")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.csv");
    let mut data = String::new();
    for i in 0..1000 {
        // One duplicate key, in the middle of the second window.
        let id = if i == 400 { 7 } else { i };
        data.push_str(&format!("{id},row {i}\n"));
    }
    std::fs::write(&file, data).unwrap();
    let mut o = pgtide::load::LoadOptions::new(
        vec![file.to_str().unwrap().into()],
        pgtide::ident::QualifiedName::parse("p").unwrap(),
        pgtide::copyopts::CopyFormat::Csv,
    );
    o.method = pgtide::load::Method::Pipeline;
    o.rejects = Some(dir.path().join("p.rejects"));
    let report = pgtide::load::run(&target, &o, Arc::new(pgtide::progress::Progress::new(1)))
        .await
        .unwrap();
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert_eq!((report.rows_loaded, report.rows_rejected), (999, 1));
    let n: i64 = client
        .query_one("SELECT count(*) FROM p", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 999);
}

enum Want {
    Tls,
    Plain,
    Fails,
}

async fn check(cluster: &Cluster, extra: &str, env: &Env, want: Want) {
    let got = ssl_in_use(cluster, extra, env).await;
    match (want, got) {
        (Want::Tls, Ok(true)) | (Want::Plain, Ok(false)) => {}
        (Want::Fails, Err(e)) => {
            assert_no_secret(&e, cluster.password());
            assert!(e.hint().is_some(), "{extra}: an error with a hint: {e:?}");
        }
        (_, got) => panic!("{extra}: unexpected outcome {got:?}"),
    }
}

fn ssl_cluster(certs: &Certs, settings: Vec<(String, String)>) -> Cluster {
    let mut ssl = SslFiles::new(certs.path("server.crt"), certs.path("server.key"));
    ssl.ca = Some(certs.path("ca.crt"));
    Cluster::temp(
        &bin(),
        ClusterOptions {
            ssl: Some(ssl),
            settings,
        },
    )
    .expect("an ssl=on cluster")
}

#[tokio::test]
async fn sslmodes_behave_as_in_libpq() {
    let certs = Certs::generate();
    let cluster = ssl_cluster(&certs, vec![]);
    let ca = format!("sslrootcert={}", certs.path("ca.crt").display());
    let wrong = format!("sslrootcert={}", certs.path("wrong-ca.crt").display());
    let none = Env::empty();
    let cases: Vec<(String, Want)> = vec![
        ("sslmode=disable".into(), Want::Plain),
        ("sslmode=allow".into(), Want::Tls),
        ("sslmode=prefer".into(), Want::Tls),
        // prefer falls back to plain when TLS fails (here: verification).
        (format!("sslmode=prefer {wrong}"), Want::Plain),
        ("sslmode=require".into(), Want::Tls),
        (format!("sslmode=require {ca}"), Want::Tls),
        // libpq: with a root certificate, require verifies like verify-ca.
        (format!("sslmode=require {wrong}"), Want::Fails),
        (format!("sslmode=verify-ca {ca}"), Want::Tls),
        (format!("sslmode=verify-ca {wrong}"), Want::Fails),
        ("sslmode=verify-ca".into(), Want::Fails),
        (
            format!("sslmode=verify-ca {ca} host=wrong.example hostaddr=127.0.0.1"),
            Want::Tls,
        ),
        (
            format!("sslmode=verify-full {ca} host=localhost"),
            Want::Tls,
        ),
        (
            format!("sslmode=verify-full {ca} host=127.0.0.1"),
            Want::Tls,
        ),
        (
            format!("sslmode=verify-full {ca} host=wrong.example hostaddr=127.0.0.1"),
            Want::Fails,
        ),
        (
            format!("sslmode=verify-full {wrong} host=localhost"),
            Want::Fails,
        ),
    ];
    // libpq ignores sslmode on unix sockets (the server refuses TLS there).
    let socket = format!("sslmode=require host={}", cluster.socket_dir().display());
    check(&cluster, &socket, &none, Want::Plain).await;
    for (extra, want) in cases {
        check(&cluster, &extra, &none, want).await;
    }
}

#[tokio::test]
async fn the_default_root_certificate_is_used_like_libpq() {
    let certs = Certs::generate();
    let cluster = ssl_cluster(&certs, vec![]);
    let good = Env::empty().home(certs.home_with_root("good", &certs.path("ca.crt")));
    let bad = Env::empty().home(certs.home_with_root("bad", &certs.path("wrong-ca.crt")));
    check(
        &cluster,
        "sslmode=verify-full host=localhost",
        &good,
        Want::Tls,
    )
    .await;
    check(&cluster, "sslmode=require", &bad, Want::Fails).await;
    check(&cluster, "sslmode=verify-ca", &bad, Want::Fails).await;
    let env = Env::empty()
        .set("PGSSLMODE", "verify-full")
        .set("PGSSLROOTCERT", &certs.path("ca.crt").to_string_lossy());
    check(&cluster, "host=localhost", &env, Want::Tls).await;
    check(
        &cluster,
        "host=wrong.example hostaddr=127.0.0.1",
        &env,
        Want::Fails,
    )
    .await;
}

#[tokio::test]
async fn a_server_without_tls() {
    let cluster = Cluster::temp(&bin(), ClusterOptions::default()).unwrap();
    let none = Env::empty();
    check(&cluster, "sslmode=prefer", &none, Want::Plain).await;
    check(&cluster, "sslmode=disable", &none, Want::Plain).await;
    let err = ssl_in_use(&cluster, "sslmode=require", &none)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect);
    assert!(err.hint().unwrap().contains("sslmode"), "{err:?}");
}

/// Client certificates: `hostssl ... clientcert=verify-full` wants a
/// certificate for CN=postgres signed by the server's CA.
#[tokio::test]
async fn client_certificates_are_sent() {
    let certs = Certs::generate();
    let hba = "hostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-full\nlocal all all scram-sha-256\n";
    let hba = certs.write("pg_hba.conf", hba.as_bytes(), 0o644);
    let cluster = ssl_cluster(&certs, vec![("hba_file".into(), hba.display().to_string())]);
    let none = Env::empty();
    let cert = format!(
        "sslcert={} sslkey={}",
        certs.path("client.crt").display(),
        certs.path("client.key").display()
    );
    check(
        &cluster,
        &format!("sslmode=require {cert}"),
        &none,
        Want::Tls,
    )
    .await;
    check(&cluster, "sslmode=require", &none, Want::Fails).await;

    let key = std::fs::read(certs.path("client.key")).unwrap();
    let loose = certs.write("loose.key", &key, 0o644);
    let extra = format!(
        "sslmode=require sslcert={} sslkey={}",
        certs.path("client.crt").display(),
        loose.display()
    );
    let err = ssl_in_use(&cluster, &extra, &none).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.message().contains("group or world access"), "{err:?}");
}

/// `sslmode=prefer` against a server that refuses plain connections: when
/// TLS fails (here: verification), the plain attempt after it is refused
/// too, and the error says both, as libpq does; the second alone named
/// pg_hba.conf and hid the certificate problem.
#[tokio::test]
async fn prefer_says_why_tls_failed_when_plain_is_refused_too() {
    let certs = Certs::generate();
    let cluster = ssl_cluster(&certs, vec![]);
    let hba = cluster.data_dir().join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("hostnossl all all all reject\n{rules}")).unwrap();
    let admin = cluster.target().connect().await.unwrap();
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let wrong = format!("sslrootcert={}", certs.path("wrong-ca.crt").display());
    let extra = format!("sslmode=prefer {wrong}");
    let e = ssl_in_use(&cluster, &extra, &Env::empty())
        .await
        .expect_err("TLS fails verification, plain is refused");
    assert!(
        e.message().contains("certificate verify failed") && e.message().contains("without TLS"),
        "{e:?}"
    );
    assert!(e.hint().is_some_and(|h| h.contains("sslrootcert")), "{e:?}");
    check(&cluster, "sslmode=require", &Env::empty(), Want::Tls).await;
}
