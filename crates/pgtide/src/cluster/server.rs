//! The steps every pgtide-managed server goes through: `initdb` with a
//! password, our settings in `postgresql.conf`, `pg_ctl start/stop`,
//! and the server log when something fails. Throwaway and embedded
//! clusters differ only in where they live and in durability.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::owner::{self, Owner};
use super::{PgBin, SslFiles};
use crate::{Error, ErrorKind, Result};

/// The superuser every pgtide cluster is created with.
pub(crate) const SUPERUSER: &str = "postgres";

/// Lines of the server log quoted in a start failure: enough for the
/// FATAL line and its context, short enough to read in a terminal.
const LOG_TAIL_LINES: usize = 20;

/// How long `pg_ctl` waits for start or stop. Cold starts of a fresh
/// cluster on a slow CI disk take a few seconds; a minute means broken.
const PG_CTL_WAIT_SECS: &str = "60";

/// The on-disk layout of one cluster: `<base>/data`, `<base>/sock`,
/// `<base>/server.log`.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub base: PathBuf,
    pub owner: Option<Owner>,
}

impl Layout {
    pub fn data(&self) -> PathBuf {
        self.base.join("data")
    }
    pub fn sock(&self) -> PathBuf {
        self.base.join("sock")
    }
    pub fn log(&self) -> PathBuf {
        self.base.join("server.log")
    }

    /// Creates `base` (0700) and hands it to the server's user.
    pub fn create_base(&self) -> Result<()> {
        std::fs::create_dir_all(&self.base)
            .map_err(|e| owner::io_error(&self.base, "create", e))?;
        if self.owner.is_some() {
            check_traversable(&self.base)?;
        }
        let perms = std::fs::Permissions::from_mode(0o700);
        std::fs::set_permissions(&self.base, perms)
            .map_err(|e| owner::io_error(&self.base, "chmod", e))?;
        owner::chown_tree(&self.base, self.owner)
    }

    fn command(&self, bin: &PgBin, program: &str) -> std::process::Command {
        owner::command(&bin.tool(program), self.owner, &self.base)
    }
}

/// The server's user must be able to reach `base`: every parent needs
/// the "x" bit for others (we do not chown directories we did not make).
fn check_traversable(base: &Path) -> Result<()> {
    for dir in base.ancestors().skip(1) {
        let mode = std::fs::metadata(dir)
            .map(|m| m.permissions().mode())
            .unwrap_or(0o755);
        if mode & 0o001 == 0 {
            return Err(Error::new(
                ErrorKind::Cluster,
                format!(
                    "{} is not traversable by user {}, so the server cannot reach {}",
                    dir.display(),
                    owner::SERVER_USER,
                    base.display()
                ),
            )
            .with_hint(format!(
                "chmod o+x {} or choose another directory (PGTIDE_SERVER_DIR)",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// `initdb` into `layout.data()` with superuser `postgres`, password
/// authentication everywhere, UTF8 and the C locale (fast, and the same
/// on every machine). `no_sync` skips initdb's fsync for throwaways.
pub(crate) fn initdb(bin: &PgBin, layout: &Layout, password: &str, no_sync: bool) -> Result<()> {
    let pwfile = layout.base.join("initdb.pw");
    write_private(&pwfile, password.as_bytes())?;
    owner::chown_tree(&pwfile, layout.owner)?;
    let mut c = layout.command(bin, "initdb");
    c.arg("-D").arg(layout.data());
    c.args([
        "-U",
        SUPERUSER,
        "--auth=scram-sha-256",
        "-E",
        "UTF8",
        "--locale=C",
    ]);
    c.arg(format!("--pwfile={}", pwfile.display()));
    if no_sync {
        c.arg("--no-sync");
    }
    let result = owner::run(
        c,
        "initdb",
        "see initdb's message above; the directory must be empty or absent",
    );
    let _ = std::fs::remove_file(&pwfile);
    result.map(drop)
}

/// Appends pgtide's settings to `postgresql.conf`. Every value is written
/// quoted, which PostgreSQL accepts for settings of any type.
pub(crate) fn configure(
    layout: &Layout,
    ssl: Option<&SslFiles>,
    extra: &[(String, String)],
) -> Result<()> {
    let sock = layout.sock();
    std::fs::create_dir_all(&sock).map_err(|e| owner::io_error(&sock, "create", e))?;
    owner::chown_tree(&sock, layout.owner)?;
    let mut settings: Vec<(String, String)> = vec![
        // Only this machine: the password is random but the server is a
        // tool's, not a service.
        ("listen_addresses".into(), "127.0.0.1".into()),
        // Our own socket directory, so that we never collide with a
        // system server's /var/run/postgresql or need write access there.
        ("unix_socket_directories".into(), sock.display().to_string()),
    ];
    if let Some(ssl) = ssl {
        settings.extend(install_ssl(layout, ssl)?);
    }
    settings.extend(extra.iter().cloned());
    let mut text = String::from("\n# Added by pgtide.\n");
    for (name, value) in &settings {
        text.push_str(&format!("{name} = '{}'\n", value.replace('\'', "''")));
    }
    let conf = layout.data().join("postgresql.conf");
    let mut f = OpenOptions::new()
        .append(true)
        .open(&conf)
        .map_err(|e| owner::io_error(&conf, "open", e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| owner::io_error(&conf, "write", e))
}

/// Copies the certificate and key into the data directory, where the
/// server's user can read them whatever their original permissions.
fn install_ssl(layout: &Layout, ssl: &SslFiles) -> Result<Vec<(String, String)>> {
    let data = layout.data();
    let mut files = vec![
        (&ssl.cert, "server.crt", "ssl_cert_file"),
        (&ssl.key, "server.key", "ssl_key_file"),
    ];
    if let Some(ca) = &ssl.ca {
        files.push((ca, "root.crt", "ssl_ca_file"));
    }
    let mut settings = vec![("ssl".to_owned(), "on".to_owned())];
    for (from, name, setting) in files {
        let bytes = std::fs::read(from).map_err(|e| owner::io_error(from, "read", e))?;
        let to = data.join(name);
        write_private(&to, &bytes)?;
        owner::chown_tree(&to, layout.owner)?;
        settings.push((setting.to_owned(), name.to_owned()));
    }
    Ok(settings)
}

/// Writes a file readable by its owner only (created that way, never
/// briefly world-readable).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let _ = std::fs::remove_file(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| owner::io_error(path, "create", e))?;
    f.write_all(bytes)
        .map_err(|e| owner::io_error(path, "write", e))
}

/// A port that was free a moment ago, chosen by the kernel.
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| {
        Error::new(
            ErrorKind::Cluster,
            format!("cannot find a free port on 127.0.0.1: {e}"),
        )
        .with_hint("is the loopback interface up?")
    })?;
    Ok(listener
        .local_addr()
        .map_err(|e| Error::new(ErrorKind::Cluster, e.to_string()))?
        .port())
}

/// True if nothing listens on `port` right now.
pub(crate) fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// `pg_ctl start -w` on `port`; a failure quotes the end of the log.
pub(crate) fn start(bin: &PgBin, layout: &Layout, port: u16) -> Result<()> {
    let mut c = layout.command(bin, "pg_ctl");
    c.args(["start", "-w", "-s", "-t", PG_CTL_WAIT_SECS, "-D"])
        .arg(layout.data());
    c.arg("-l")
        .arg(layout.log())
        .args(["-o", &format!("-p {port}")]);
    let out = c
        .output()
        .map_err(|e| owner::spawn_error(c.get_program(), e))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(Error::new(
        ErrorKind::Cluster,
        format!(
            "could not start the PostgreSQL server in {}: {}\n--- last lines of {} ---\n{}",
            layout.data().display(),
            stderr.trim(),
            layout.log().display(),
            log_tail(&layout.log())
        ),
    )
    .with_hint(
        "read the server log lines above; a port in use or a full disk are the usual causes",
    ))
}

/// `pg_ctl stop -w` with the given shutdown mode.
pub(crate) fn stop(bin: &PgBin, layout: &Layout, mode: &str) -> Result<()> {
    let mut c = layout.command(bin, "pg_ctl");
    c.args(["stop", "-w", "-s", "-t", PG_CTL_WAIT_SECS, "-m", mode, "-D"])
        .arg(layout.data());
    owner::run(
        c,
        "pg_ctl stop",
        "see the server log; stop the postmaster by hand if it hangs",
    )
    .map(drop)
}

/// `pg_ctl status`: exit 0 means a postmaster runs on this data dir.
pub(crate) fn is_running(bin: &PgBin, layout: &Layout) -> bool {
    let mut c = layout.command(bin, "pg_ctl");
    c.args(["status", "-s", "-D"]).arg(layout.data());
    c.output().map(|o| o.status.success()).unwrap_or(false)
}

/// The postmaster's pid and port, from lines 1 and 4 of
/// `postmaster.pid`: the running server's own word, even if our state
/// file was lost.
pub(crate) fn pid_and_port(layout: &Layout) -> Option<(u32, u16)> {
    let text = std::fs::read_to_string(layout.data().join("postmaster.pid")).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    Some((
        lines.first()?.trim().parse().ok()?,
        lines.get(3)?.trim().parse().ok()?,
    ))
}

/// The last lines of the log, or a note that it cannot be read.
pub(crate) fn log_tail(log: &Path) -> String {
    match std::fs::read_to_string(log) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
        }
        Err(e) => format!("(cannot read the log: {e})"),
    }
}

/// A random password: 32 hex digits (128 bits) from OpenSSL's CSPRNG.
pub(crate) fn random_password() -> Result<String> {
    let mut bytes = [0u8; 16];
    openssl::rand::rand_bytes(&mut bytes).map_err(|e| {
        Error::new(
            ErrorKind::Cluster,
            format!("cannot generate a password: {e}"),
        )
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
