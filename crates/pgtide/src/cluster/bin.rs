//! Finding the PostgreSQL server binaries (`initdb`, `pg_ctl`,
//! `postgres`) and their major version.
//!
//! The search order puts what the user chose first (`$PGTIDE_PGBIN`), then
//! what the system says (`pg_config --bindir`, `initdb` on `PATH`), then
//! Debian's layout, where server binaries are not on `PATH` at all.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, ErrorKind, Result};

/// The server programs a cluster needs; a directory without them is not a
/// candidate.
const REQUIRED: [&str; 3] = ["initdb", "pg_ctl", "postgres"];

/// A directory of PostgreSQL server binaries of one major version.
#[derive(Debug, Clone)]
pub struct PgBin {
    dir: PathBuf,
    version: u32,
}

impl PgBin {
    /// Finds server binaries: `$PGTIDE_PGBIN` (a bin dir), `pg_config
    /// --bindir`, `initdb` on `PATH`, then the highest
    /// `/usr/lib/postgresql/*/bin`.
    pub fn find() -> Result<PgBin> {
        if let Some(dir) = std::env::var_os("PGTIDE_PGBIN").filter(|d| !d.is_empty()) {
            return PgBin::at(dir);
        }
        let found = from_pg_config()
            .or_else(initdb_on_path)
            .or_else(highest_debian);
        match found {
            Some(dir) => PgBin::at(dir),
            None => Err(not_found()),
        }
    }

    /// The binaries in `dir`, checked and versioned.
    pub fn at(dir: impl Into<PathBuf>) -> Result<PgBin> {
        let dir = dir.into();
        if let Some(missing) = REQUIRED.iter().find(|p| !dir.join(p).is_file()) {
            return Err(Error::new(
                ErrorKind::Cluster,
                format!(
                    "{} has no {missing}: not a PostgreSQL server bin directory",
                    dir.display()
                ),
            )
            .with_hint(
                "point PGTIDE_PGBIN at the bin directory of a PostgreSQL server \
                 installation (for example /usr/lib/postgresql/15/bin)",
            ));
        }
        let version = version_of(&dir.join("postgres"))?;
        Ok(PgBin { dir, version })
    }

    /// For tests: `$PGTIDE_TEST_PGBIN` if set, else [`PgBin::find`].
    pub fn for_tests() -> Result<PgBin> {
        match std::env::var_os("PGTIDE_TEST_PGBIN").filter(|d| !d.is_empty()) {
            Some(dir) => PgBin::at(dir),
            None => PgBin::find(),
        }
    }

    /// The bin directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The major version, from `postgres --version` (15 for 15.13).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The path of program `name` in this bin directory.
    pub fn tool(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A `psql`: this directory's, else one on `PATH`, else the highest
    /// Debian one (relocatable server builds often ship none).
    pub fn psql(&self) -> Option<PathBuf> {
        let own = self.tool("psql");
        if own.is_file() {
            return Some(own);
        }
        find_psql()
    }
}

/// A `psql` when no server bin directory is at hand: one on `PATH`, else
/// the highest Debian one (`/usr/lib/postgresql/*/bin/psql`).
pub fn find_psql() -> Option<PathBuf> {
    on_path("psql").or_else(|| {
        debian_dirs()
            .into_iter()
            .rev()
            .map(|d| d.join("psql"))
            .find(|p| p.is_file())
    })
}

/// A `pg_dump` that can dump a server of major version `min_major`
/// (pg_dump refuses servers newer than itself): `$PGTIDE_PG_DUMP`, else
/// the first of `$PGTIDE_PGBIN`, `pg_config --bindir`, the Debian
/// directories (highest first) and `PATH` whose version is high enough.
/// Returns its path and version line.
pub fn find_pg_dump(min_major: u32) -> Result<(PathBuf, String)> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("PGTIDE_PG_DUMP").filter(|p| !p.is_empty()) {
        candidates.push(p.into());
    } else {
        if let Some(dir) = std::env::var_os("PGTIDE_PGBIN").filter(|d| !d.is_empty()) {
            candidates.push(PathBuf::from(dir).join("pg_dump"));
        }
        if let Some(dir) = from_pg_config() {
            candidates.push(dir.join("pg_dump"));
        }
        candidates.extend(debian_dirs().into_iter().rev().map(|d| d.join("pg_dump")));
        candidates.extend(on_path("pg_dump"));
    }
    let mut seen = Vec::new();
    for p in candidates.into_iter().filter(|p| p.is_file()) {
        let Ok(out) = Command::new(&p).arg("--version").output() else {
            continue;
        };
        let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        match parse_version(&line) {
            Some(v) if v >= min_major => return Ok((p, line)),
            Some(v) => seen.push(format!("{} ({v})", p.display())),
            None => {}
        }
    }
    let found = if seen.is_empty() {
        "no pg_dump found".to_owned()
    } else {
        format!("only older ones: {}", seen.join(", "))
    };
    Err(Error::new(
        ErrorKind::Config,
        format!(
            "--create needs pg_dump {min_major} or newer (the source server's major version): {found}"
        ),
    )
    .with_hint(format!(
        "install the PostgreSQL {min_major} client (Debian/Ubuntu: apt-get install \
         postgresql-client-{min_major}) or set PGTIDE_PG_DUMP to a pg_dump of version \
         {min_major} or newer; or create the tables on the target first and leave out --create"
    )))
}

fn is_server_dir(dir: &Path) -> bool {
    REQUIRED.iter().all(|p| dir.join(p).is_file())
}

fn from_pg_config() -> Option<PathBuf> {
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && is_server_dir(&dir)).then_some(dir)
}

/// `initdb` is often a symlink (Debian's wrappers, /usr/local/bin links):
/// the real directory holds the matching `postgres`.
fn initdb_on_path() -> Option<PathBuf> {
    let initdb = on_path("initdb")?.canonicalize().ok()?;
    let dir = initdb.parent()?.to_owned();
    is_server_dir(&dir).then_some(dir)
}

fn highest_debian() -> Option<PathBuf> {
    debian_dirs().into_iter().rev().find(|d| is_server_dir(d))
}

/// `/usr/lib/postgresql/*/bin`, lowest version first.
fn debian_dirs() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") else {
        return Vec::new();
    };
    let mut versions: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions.into_iter().map(|(_, d)| d).collect()
}

fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn version_of(postgres: &Path) -> Result<u32> {
    let out = Command::new(postgres)
        .arg("--version")
        .output()
        .map_err(|e| {
            Error::new(
                ErrorKind::Cluster,
                format!("cannot run {}: {e}", postgres.display()),
            )
            .with_hint("check that the file is an executable for this machine")
            .with_source(e)
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_version(&text).ok_or_else(|| {
        Error::new(
            ErrorKind::Cluster,
            format!(
                "cannot read the version of {}: {:?}",
                postgres.display(),
                text.trim()
            ),
        )
        .with_hint("is this a PostgreSQL server binary?")
    })
}

/// "postgres (PostgreSQL) 15.13 (Debian 15.13-0+deb12u1)" -> 15.
fn parse_version(text: &str) -> Option<u32> {
    let after = text.split("(PostgreSQL) ").nth(1)?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn not_found() -> Error {
    Error::new(ErrorKind::Cluster, "no PostgreSQL server binaries found").with_hint(
        "install PostgreSQL (Debian/Ubuntu: apt-get install postgresql), or run \
         scripts/fetch-postgres.sh 17.5.0 and set PGTIDE_PGBIN to the bin directory it \
         prints; PGTIDE_PGBIN may also name any directory holding initdb, pg_ctl and postgres",
    )
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("postgres (PostgreSQL) 15.13 (Debian 15.13-0+deb12u1)\n"),
            Some(15)
        );
        assert_eq!(parse_version("postgres (PostgreSQL) 17.5\n"), Some(17));
        assert_eq!(parse_version("postgres (PostgreSQL) 18beta1\n"), Some(18));
        assert_eq!(parse_version("nope"), None);
    }
}
