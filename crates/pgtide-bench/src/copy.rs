//! `pgtide bench copy`: issue 7's copy targets: rows of one server's
//! table into the same table on another server, no file in between.
//!
//! The source is the scenario's server (`--db`); the target is a second
//! throwaway server on the same host, started with the same binaries
//! (`PgBin::find()`, or the ones given) and the source's `fsync`
//! setting. Contenders, lower is better:
//! - the psql pipe, binary (the reference): `psql -c "COPY t TO STDOUT
//!   (FORMAT binary)" | psql -c "COPY t FROM STDIN (FORMAT binary)"`;
//! - the same pipe in text format;
//! - `pgcopydb copy table-data` (when installed), the table named in an
//!   `[include-only-table]` filter; passwords through a 0600 passfile;
//! - `pgtide copy --table t --workers N` (the library's
//!   `transfer::run`, in this process).
//!
//! Tables: `datasets::SERVER_DATASETS` (`x_int`, `x_wide`), filled on the
//! source and created empty on the target; the target table is
//! truncated (and a CHECKPOINT taken) before every run, outside the
//! timing, and its row count checked after. Runs are interleaved.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use pgtide::cluster::{find_psql, PgBin};
use pgtide::conn::Target;
use pgtide::ident::{quote, QualifiedName};
use pgtide::progress::Progress;
use pgtide::transfer::{self, TransferOptions};
use pgtide::{Error, ErrorKind, Result};

use crate::datasets::SERVER_DATASETS;
use crate::runner::Runner;
use crate::{blocking, count_rows, counted, expect_rows, second_server, Measurement, Scenario};

/// The reference: the binary psql pipe.
pub const PSQL_BINARY: &str = "psql pipe (binary)";
/// The text psql pipe.
pub const PSQL_TEXT: &str = "psql pipe (text)";
/// `pgcopydb copy table-data`.
pub const PGCOPYDB: &str = "pgcopydb copy table-data";

/// `pgtide copy (N workers)`.
pub fn copy_name(workers: usize) -> String {
    format!("pgtide copy ({})", counted(workers, "worker"))
}

/// What to run.
#[derive(Debug, Clone)]
pub struct CopyBench {
    /// Scale of the row counts (1.0 = 10M ints and 1M wide rows).
    pub scale: f64,
    /// Runs per contender.
    pub runs: usize,
    /// `pgtide copy --workers` counts.
    pub workers: Vec<usize>,
    /// Work directory (pgcopydb's state, its passfile).
    pub dir: PathBuf,
    /// Binaries for the target server; `None` = `PgBin::find()`.
    pub target_bin: Option<PgBin>,
}

impl Scenario for CopyBench {
    fn announce(&self) -> String {
        format!(
            "pgtide bench copy: scale {}, {} runs, workers {:?}",
            self.scale, self.runs, self.workers
        )
    }

    fn title(&self) -> String {
        "copy between two servers: pgtide copy vs psql pipes vs pgcopydb (issue 7)".into()
    }

    fn references(&self) -> Vec<String> {
        vec![PSQL_BINARY.into(), PGCOPYDB.into()]
    }

    async fn run(
        &self,
        source: &Target,
        on_result: &mut dyn FnMut(&Measurement),
    ) -> Result<Vec<Measurement>> {
        let mut r = Runner::connect(source, self.runs, on_result).await?;
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::config(format!("cannot create {}: {e}", self.dir.display())))?;
        let cluster = second_server(&r.client, self.target_bin.clone()).await?;
        let measured = self.measure(&mut r, source, &cluster.target()).await;
        let _ = tokio::task::spawn_blocking(move || drop(cluster)).await;
        measured?;
        Ok(r.finish())
    }
}

#[derive(Debug, Clone, Copy)]
enum Who {
    Psql(&'static str),
    Pgcopydb,
    Pgtide(usize),
}

impl Who {
    fn name(self) -> String {
        match self {
            Who::Psql("binary") => PSQL_BINARY.into(),
            Who::Psql(_) => PSQL_TEXT.into(),
            Who::Pgcopydb => PGCOPYDB.into(),
            Who::Pgtide(w) => copy_name(w),
        }
    }
}

impl CopyBench {
    /// Every contender on every data set, from `source` into `dest`.
    async fn measure(&self, r: &mut Runner<'_>, source: &Target, dest: &Target) -> Result<()> {
        let dst = dest.connect().await?;
        let psql = find_psql();
        let pgcopydb = on_path("pgcopydb");
        let mut contenders = vec![Who::Psql("binary"), Who::Psql("text"), Who::Pgcopydb];
        contenders.extend(self.workers.iter().map(|&w| Who::Pgtide(w)));
        for ds in SERVER_DATASETS {
            let rows = ds.rows_at(self.scale);
            ds.fill(&r.client, rows).await?;
            ds.create(&dst).await?;
            let label = format!("{} ({rows} rows)", ds.name);
            let mut ms: Vec<Measurement> = contenders
                .iter()
                .map(|w| r.blank(&label, &w.name(), rows))
                .collect();
            let table = ds.name;
            r.interleaved(&mut ms, "", async |_, i| {
                dst.batch_execute(&format!("TRUNCATE {}; CHECKPOINT", quote(table)))
                    .await?;
                let (p, s, d) = (psql.clone(), source.clone(), dest.clone());
                let start = Instant::now();
                match contenders[i] {
                    Who::Psql(format) => {
                        let p = p.ok_or_else(|| Error::config("psql not found"))?;
                        blocking(move || psql_pipe(&p, &s, &d, table, format)).await?;
                    }
                    Who::Pgcopydb => {
                        let p = pgcopydb.clone();
                        let p = p.ok_or_else(|| Error::config("pgcopydb is not installed"))?;
                        let dir = self.dir.clone();
                        blocking(move || run_pgcopydb(&p, &s, &d, table, &dir)).await?;
                    }
                    Who::Pgtide(workers) => {
                        let mut o = TransferOptions::new(vec![QualifiedName::parse(table)?]);
                        o.workers = workers;
                        let progress = Arc::new(Progress::new(workers));
                        let mut report = transfer::run(source, dest, &o, progress).await?;
                        if let Some(e) = report.failure.take() {
                            return Err(e);
                        }
                    }
                }
                let seconds = start.elapsed().as_secs_f64();
                let who = format!("{table}: {} on the target", contenders[i].name());
                expect_rows(count_rows(&dst, table).await?, rows, &who)?;
                Ok(seconds)
            })
            .await?;
            for m in ms {
                r.push(m);
            }
        }
        Ok(())
    }
}

/// `psql -c "COPY t TO STDOUT" | psql -c "COPY t FROM STDIN"`, each
/// connected through libpq's environment (passwords never on a command
/// line).
fn psql_pipe(psql: &Path, from: &Target, to: &Target, table: &str, format: &str) -> Result<()> {
    let t = quote(table);
    let args = |sql: String| {
        vec![
            "-X".to_owned(),
            "-q".into(),
            "-v".into(),
            "ON_ERROR_STOP=1".into(),
            "-c".into(),
            sql,
        ]
    };
    let spawn_error =
        |e: std::io::Error| Error::config(format!("cannot run {}: {e}", psql.display()));
    let mut out = Command::new(psql)
        .args(args(format!("COPY {t} TO STDOUT (FORMAT {format})")))
        .envs(from.libpq_env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    let pipe = out.stdout.take().expect("piped stdout");
    let into = Command::new(psql)
        .args(args(format!("COPY {t} FROM STDIN (FORMAT {format})")))
        .envs(to.libpq_env())
        .stdin(Stdio::from(pipe))
        .output()
        .map_err(spawn_error)?;
    let from_out = out.wait_with_output().map_err(spawn_error)?;
    for (side, o) in [("COPY TO", &from_out), ("COPY FROM", &into)] {
        if !o.status.success() {
            return Err(Error::new(
                ErrorKind::Server,
                format!(
                    "psql {side} failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            ));
        }
    }
    Ok(())
}

/// `pgcopydb copy table-data` of `public.<table>` only, in a fresh work
/// directory; both passwords in a 0600 passfile told apart by port.
fn run_pgcopydb(
    pgcopydb: &Path,
    from: &Target,
    to: &Target,
    table: &str,
    dir: &Path,
) -> Result<()> {
    let io =
        |e: std::io::Error| Error::config(format!("pgcopydb set-up in {}: {e}", dir.display()));
    let work = dir.join("pgcopydb-work");
    let _ = std::fs::remove_dir_all(&work);
    let filters = dir.join("pgcopydb-filters.ini");
    std::fs::write(&filters, format!("[include-only-table]\npublic.{table}\n")).map_err(io)?;
    let passfile = dir.join("pgcopydb-pgpass");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&passfile)
            .map_err(io)?;
        for t in [from, to] {
            let env = t.libpq_env();
            let get = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
            if let Some(pw) = get("PGPASSWORD") {
                let esc = |s: String| s.replace('\\', "\\\\").replace(':', "\\:");
                writeln!(
                    f,
                    "*:{}:*:{}:{}",
                    get("PGPORT").unwrap_or_default(),
                    esc(get("PGUSER").unwrap_or_default()),
                    esc(pw)
                )
                .map_err(io)?;
            }
        }
    }
    let conninfo = |t: &Target| {
        let env = t.libpq_env();
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        let q = |s: String| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
        format!(
            "host={} port={} user={} dbname={} sslmode={}",
            q(get("PGHOST").unwrap_or_default()),
            q(get("PGPORT").unwrap_or_default()),
            q(get("PGUSER").unwrap_or_default()),
            q(get("PGDATABASE").unwrap_or_default()),
            q(get("PGSSLMODE").unwrap_or_else(|| "prefer".into())),
        )
    };
    let mut cmd = Command::new(pgcopydb);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .env("PGPASSFILE", &passfile)
        .args(["copy", "table-data", "--source"])
        .arg(conninfo(from))
        .arg("--target")
        .arg(conninfo(to))
        .arg("--dir")
        .arg(&work)
        .arg("--filters")
        .arg(&filters)
        .output()
        .map_err(|e| Error::config(format!("cannot run {}: {e}", pgcopydb.display())))?;
    let _ = std::fs::remove_dir_all(&work);
    if !out.status.success() {
        return Err(Error::new(
            ErrorKind::Server,
            format!(
                "pgcopydb failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" / ")
            ),
        ));
    }
    Ok(())
}

fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}
