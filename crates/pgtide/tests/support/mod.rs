//! Shared by the integration tests: a throwaway cluster and the
//! "same as server-side COPY" check.
#![allow(dead_code)]

pub mod crash;
pub mod pipe;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::StreamExt;
use pgtide::cluster::{Cluster, ClusterOptions, PgBin};
use pgtide::conn::Target;
use pgtide::copyopts::{CopyFormat, CopyOptions, Header};
use pgtide::ident::QualifiedName;
use pgtide::load::{self, LoadOptions, Report};
use pgtide::progress::Progress;
use tokio_postgres::Client;

/// How the test input file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compress {
    None,
    Gzip,
    Zstd,
}

/// One load to check.
#[derive(Debug, Clone)]
pub struct Case {
    pub table_def: String,
    pub data: Vec<u8>,
    pub opts: CopyOptions,
    pub workers: usize,
    pub chunk: usize,
    pub compress: Compress,
    pub columns: Option<Vec<String>>,
    pub table_override: Option<String>,
    /// `--method` (default copy).
    pub method: load::Method,
    /// `--sql`.
    pub sql: Option<String>,
    /// `--batch-rows`.
    pub batch_rows: Option<usize>,
    /// `--rejects`.
    pub rejects: Option<PathBuf>,
}

impl Case {
    pub fn new(table_def: &str, format: CopyFormat, data: &[u8]) -> Case {
        Case {
            table_def: table_def.into(),
            data: data.to_vec(),
            opts: CopyOptions::new(format),
            workers: 1,
            chunk: 1 << 20,
            compress: Compress::None,
            columns: None,
            table_override: None,
            method: load::Method::Copy,
            sql: None,
            batch_rows: None,
            rejects: None,
        }
    }
    pub fn method(mut self, m: load::Method) -> Case {
        self.method = m;
        self
    }
    pub fn workers(mut self, n: usize) -> Case {
        self.workers = n;
        self
    }
    pub fn chunk(mut self, n: usize) -> Case {
        self.chunk = n;
        self
    }
    pub fn header(mut self, h: Header) -> Case {
        self.opts.header = h;
        self
    }
    pub fn compress(mut self, c: Compress) -> Case {
        self.compress = c;
        self
    }
}

/// A throwaway cluster plus a directory the server can read files from.
pub struct Db {
    pub cluster: Cluster,
    pub target: Target,
    pub client: Client,
    dir: tempfile::TempDir,
    next: AtomicUsize,
}

impl Db {
    pub async fn start() -> Db {
        let cluster = tokio::task::spawn_blocking(|| {
            let bin = PgBin::for_tests().expect("PostgreSQL binaries");
            Cluster::temp(&bin, ClusterOptions::default()).expect("start a throwaway cluster")
        })
        .await
        .unwrap();
        let target = cluster.target();
        let client = target.connect().await.expect("connect");
        let dir = tempfile::Builder::new()
            .prefix("pgtide-test")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Db {
            cluster,
            target,
            client,
            dir,
            next: AtomicUsize::new(0),
        }
    }

    /// Options to load `bytes` (written to a file) into `table` as CSV.
    pub fn csv_options(&self, bytes: &[u8], table: &str) -> LoadOptions {
        let path = self.file(bytes, Compress::None);
        LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse(table).unwrap(),
            CopyFormat::Csv,
        )
    }

    /// Writes `bytes` to a file the server can read.
    pub fn file(&self, bytes: &[u8], compress: Compress) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("in{n}"));
        let stored = match compress {
            Compress::None => bytes.to_vec(),
            Compress::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(bytes).unwrap();
                e.finish().unwrap()
            }
            Compress::Zstd => zstd::encode_all(bytes, 3).unwrap(),
        };
        std::fs::write(&path, stored).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    fn fresh_tables(&self) -> (String, String) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        (format!("got_{n}"), format!("want_{n}"))
    }

    fn options(&self, case: &Case, table: &str) -> LoadOptions {
        let path = self.file(&case.data, case.compress);
        let table = case.table_override.as_deref().unwrap_or(table);
        let mut o = LoadOptions::new(
            vec![path.to_string_lossy().into_owned()],
            QualifiedName::parse(table).unwrap(),
            case.opts.format,
        );
        o.copy = case.opts.clone();
        o.workers = case.workers;
        o.chunk_bytes = case.chunk;
        o.columns = case.columns.clone();
        o.method = case.method;
        o.sql = case.sql.clone();
        o.batch_rows = case.batch_rows;
        o.rejects = case.rejects.clone();
        o
    }

    pub async fn load_report(&self, case: &Case) -> Report {
        let (got, _) = self.fresh_tables();
        self.create(&got, &case.table_def).await;
        let opts = self.options(case, &got);
        load::run(&self.target, &opts, Arc::new(Progress::new(case.workers)))
            .await
            .expect("load starts")
    }

    pub async fn load_err(&self, case: &Case) -> pgtide::Error {
        let (got, _) = self.fresh_tables();
        self.create(&got, &case.table_def).await;
        let opts = self.options(case, &got);
        match load::run(&self.target, &opts, Arc::new(Progress::new(case.workers))).await {
            Err(e) => e,
            Ok(r) => r.failure.expect("the load was expected to fail"),
        }
    }

    pub async fn load_missing_file(&self) -> pgtide::Error {
        let (got, _) = self.fresh_tables();
        self.create(&got, "a int").await;
        let opts = LoadOptions::new(
            vec!["/nonexistent/input.csv".into()],
            QualifiedName::parse(&got).unwrap(),
            CopyFormat::Csv,
        );
        match load::run(&self.target, &opts, Arc::new(Progress::new(1))).await {
            Err(e) => e,
            Ok(r) => r.failure.expect("a missing file must fail the load"),
        }
    }

    async fn create(&self, table: &str, def: &str) {
        self.client
            .batch_execute(&format!("CREATE TABLE {table} ({def})"))
            .await
            .unwrap();
    }

    /// Loads `case` with pgtide and with server-side COPY of the same
    /// (uncompressed) bytes; the two tables must be equal.
    pub async fn check(&self, case: &Case) {
        let (got, want) = self.fresh_tables();
        self.create(&got, &case.table_def).await;
        self.create(&want, &case.table_def).await;
        let plain = self.file(&case.data, Compress::None);
        let cols = case.columns.as_ref().map(|c| c.join(", "));
        // PostgreSQL 17's FORCE_NULL * spelled out, as pgtide does.
        let names = match &case.columns {
            Some(c) => c.clone(),
            None => {
                texts(
                    &self.client,
                    &format!(
                        "SELECT attname FROM pg_attribute WHERE attrelid = '{want}'::regclass \
                 AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
                    ),
                )
                .await
            }
        };
        let star = |list: &Vec<String>| match list.as_slice() {
            [only] if only == "*" => names.clone(),
            _ => list.clone(),
        };
        let mut reference = case.opts.clone();
        reference.force_null = star(&case.opts.force_null);
        reference.force_not_null = star(&case.opts.force_not_null);
        let stdin_sql = reference.copy_from_sql(&want, cols.as_deref());
        let header = match case.opts.header {
            Header::None => "",
            Header::Skip => "HEADER true, ",
            Header::Match => "HEADER match, ",
        };
        let server_sql = stdin_sql.replace(
            "FROM STDIN WITH (",
            &format!("FROM '{}' WITH ({header}", plain.display()),
        );
        self.client
            .batch_execute(&server_sql)
            .await
            .unwrap_or_else(|e| panic!("server COPY failed for {case:?}: {e:?}"));
        let opts = self.options(case, &got);
        let report = load::run(&self.target, &opts, Arc::new(Progress::new(case.workers)))
            .await
            .unwrap_or_else(|e| panic!("load failed to start for {case:?}: {e:?}"));
        assert!(
            report.failure.is_none(),
            "load failed for {case:?}: {:?}",
            report.failure
        );
        if case.chunk * 4 < case.data.len() && case.compress == Compress::None {
            assert!(
                report.chunks > 1,
                "small chunks must split the input: {case:?}"
            );
        }
        let count = |t: &str| format!("SELECT count(*) FROM {t}");
        let n_got: i64 = self
            .client
            .query_one(&count(&got), &[])
            .await
            .unwrap()
            .get(0);
        let n_want: i64 = self
            .client
            .query_one(&count(&want), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n_got, n_want, "row counts differ for {case:?}");
        assert_eq!(
            report.rows_loaded as i64, n_want,
            "report rows for {case:?}"
        );
        assert_eq!(report.rows_read as i64, n_want, "rows read for {case:?}");
        assert_same_rows(&self.client, &got, &want, &format!("{case:?}")).await;
    }

    /// What server-side `COPY (query) TO STDOUT (FORMAT binary)` produces.
    pub async fn server_binary_file(&self, query: &str) -> Vec<u8> {
        let stream = self
            .client
            .copy_out(&format!("COPY ({query}) TO STDOUT (FORMAT binary)"))
            .await
            .unwrap();
        futures_util::pin_mut!(stream);
        let mut out = Vec::new();
        while let Some(piece) = stream.next().await {
            out.extend_from_slice(&piece.unwrap());
        }
        out
    }
}

/// The first column of every row of `sql`, as text, in order.
pub async fn texts(client: &Client, sql: &str) -> Vec<String> {
    client
        .query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Tables `a` and `b` hold the same rows (`EXCEPT ALL` both ways). Rows
/// are compared as text: stricter than `=` (numeric 1.50 = 1.5, float
/// -0 = 0) and works for types without equality (json, point).
pub async fn assert_same_rows(client: &Client, a: &str, b: &str, ctx: &str) {
    for (x, y) in [(a, b), (b, a)] {
        let diff: i64 = client
            .query_one(
                &format!(
                    "SELECT count(*) FROM (SELECT x::text FROM {x} x \
                     EXCEPT ALL SELECT x::text FROM {y} x) d"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(diff, 0, "{x} has rows {y} lacks, for {ctx}");
    }
}

/// A second throwaway server holding the shards, and the coordinator's
/// postgres_fdw set-up for it (foreign server `shard2`).
pub async fn shard_server(db: &Db) -> (Cluster, Client) {
    let cluster = tokio::task::spawn_blocking(|| {
        let bin = PgBin::for_tests().unwrap();
        Cluster::temp(&bin, Default::default()).unwrap()
    })
    .await
    .unwrap();
    let client = cluster.target().connect().await.unwrap();
    db.client
        .batch_execute(&format!(
            "CREATE EXTENSION postgres_fdw;
             CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw
                 OPTIONS (host '127.0.0.1', port '{}', dbname 'postgres', batch_size '100');
             CREATE USER MAPPING FOR CURRENT_USER SERVER shard2
                 OPTIONS (user 'postgres', password '{}');",
            cluster.port(),
            cluster.password()
        ))
        .await
        .unwrap();
    (cluster, client)
}

/// SQL for `cluster` that makes it stop itself (immediate: no goodbye to
/// its sessions) when a row with `n = stop_at` is inserted into `table`,
/// holding that row until the server is gone. The program reads its input
/// first: a program that exits before COPY has written its row makes
/// COPY fail with a broken pipe, and the row is refused instead.
pub fn stop_trigger_sql(cluster: &Cluster, table: &str, stop_at: i32) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION stop_here() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.n = {stop_at} THEN
                 COPY (SELECT 1) TO PROGRAM
                     'cat >/dev/null; sh -c \"{} stop -m immediate -D {}\" </dev/null >/dev/null 2>&1 &';
                 PERFORM pg_sleep(120);
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER stop_here BEFORE INSERT ON {table}
             FOR EACH ROW EXECUTE FUNCTION stop_here();",
        cluster.bin().tool("pg_ctl").display(),
        cluster.data_dir().display()
    )
}

/// The input line of each row in the reject log beside `rejects`, in
/// order (empty when there is no log).
#[allow(dead_code)] // not every test binary reads reject logs
pub fn rejected_lines(rejects: &std::path::Path) -> Vec<u64> {
    let log = std::fs::read_to_string(pgtide::reject::log_path(rejects)).unwrap_or_default();
    log.lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["line"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// Rows the server inserted into `table` (`n_tup_ins`, rows later undone
/// included), once the load's sessions reported them: they report when
/// they end (within seconds; the bound keeps a server that never reports
/// from hanging). At least `loaded`, or the test fails.
pub async fn rows_inserted(client: &Client, table: &str, loaded: u64) -> i64 {
    let mut last = -1;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        let n: i64 = client
            .query_one(
                "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = $1",
                &[&table],
            )
            .await
            .unwrap()
            .get(0);
        if n == last && n >= loaded as i64 {
            break;
        }
        last = n;
    }
    assert!(
        last >= loaded as i64,
        "the server's statistics never counted the rows loaded ({last})"
    );
    last
}
