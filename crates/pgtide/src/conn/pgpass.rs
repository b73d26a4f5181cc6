//! The password file (`~/.pgpass`, `PGPASSFILE`, `passfile=`), read with
//! libpq's exact rules so that a file that works for `psql` works for
//! pgtide, and one that `psql` ignores is ignored here too.
//!
//! Rules (libpq `passwordFromFile`): lines are
//! `host:port:database:user:password`; `#` starts a comment line; a field
//! that is exactly `*` matches anything; `\:` and `\\` escape; an empty
//! host or the default socket directory is matched as `localhost`; the
//! file is skipped if it is not a regular file or if its mode has any group
//! or other bit set. libpq prints a warning in the last case; the library
//! never prints, so it reports [`Lookup::Ignored`] and the connect error
//! carries it as a hint instead.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The socket directory that libpq treats as `localhost` in the file.
const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// What a password file lookup found.
#[derive(PartialEq, Eq)]
pub enum Lookup {
    /// A line matched; this is its (unescaped) password.
    Found(String),
    /// The file is absent, unreadable, or no line matched.
    NotFound,
    /// The file exists but libpq would refuse it; the reason says why.
    Ignored(String),
}

impl fmt::Debug for Lookup {
    /// Never shows the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lookup::Found(_) => f.write_str("Found(..)"),
            Lookup::NotFound => f.write_str("NotFound"),
            Lookup::Ignored(why) => write!(f, "Ignored({why:?})"),
        }
    }
}

/// The entry the connection (host, port, database, user) is looked up by.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    /// Host name, IP address or socket directory; empty for the default.
    pub host: &'a str,
    /// Port number as written.
    pub port: u16,
    /// Database name.
    pub dbname: &'a str,
    /// User name.
    pub user: &'a str,
}

/// Looks `key` up in the password file at `path`.
pub fn lookup(path: &Path, key: Key<'_>) -> Lookup {
    if key.dbname.is_empty() || key.user.is_empty() {
        return Lookup::NotFound;
    }
    let Ok(meta) = std::fs::metadata(path) else {
        return Lookup::NotFound;
    };
    if !meta.is_file() {
        return Lookup::Ignored(format!(
            "password file \"{}\" is not a plain file",
            path.display()
        ));
    }
    // libpq's test is `st_mode & (S_IRWXG | S_IRWXO)`: any bit, not only
    // the read bits.
    if meta.permissions().mode() & 0o077 != 0 {
        return Lookup::Ignored(format!(
            "password file \"{}\" has group or world access; permissions \
             should be u=rw (0600) or less",
            path.display()
        ));
    }
    match std::fs::read(path) {
        Ok(bytes) => find(&String::from_utf8_lossy(&bytes), key),
        Err(_) => Lookup::NotFound,
    }
}

/// Finds the first line of `text` that matches `key`.
pub(crate) fn find(text: &str, key: Key<'_>) -> Lookup {
    let host = if key.host.is_empty() || key.host == DEFAULT_SOCKET_DIR {
        "localhost"
    } else {
        key.host
    };
    let port = key.port.to_string();
    let wanted = [host, port.as_str(), key.dbname, key.user];
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut rest = Some(line);
        for token in wanted {
            rest = rest.and_then(|r| match_field(r, token));
        }
        if let Some(password) = rest {
            return Lookup::Found(unescape_password(password));
        }
    }
    Lookup::NotFound
}

/// Matches the field at the start of `line` against `token`; returns the
/// rest of the line after the field's `:`. A port of libpq's
/// `pwdfMatchesString`.
fn match_field<'a>(line: &'a str, token: &str) -> Option<&'a str> {
    if let Some(rest) = line.strip_prefix("*:") {
        return Some(rest);
    }
    let mut chars = line.char_indices();
    let mut want = token.chars();
    while let Some((i, c)) = chars.next() {
        let (escaped, c) = if c == '\\' {
            match chars.next() {
                Some((_, next)) => (true, next),
                None => return None,
            }
        } else {
            (false, c)
        };
        if c == ':' && !escaped {
            return want.next().is_none().then(|| &line[i + 1..]);
        }
        if want.next() != Some(c) {
            return None;
        }
    }
    None
}

/// The password runs to the first unescaped `:` or the end of the line.
fn unescape_password(field: &str) -> String {
    let mut out = String::new();
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        match c {
            ':' => break,
            '\\' => out.extend(chars.next().or(Some('\\'))),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(host: &'a str, port: u16, db: &'a str, u: &'a str) -> Key<'a> {
        Key {
            host,
            port,
            dbname: db,
            user: u,
        }
    }

    fn found(text: &str, k: Key<'_>) -> Option<String> {
        match find(text, k) {
            Lookup::Found(p) => Some(p),
            _ => None,
        }
    }

    #[test]
    fn first_matching_line_wins() {
        let text = "# comment\n\
                    db1:5432:prod:app:one\n\
                    *:5432:*:app:two\n\
                    *:*:*:*:three\n";
        let k = key("db1", 5432, "prod", "app");
        assert_eq!(found(text, k).as_deref(), Some("one"));
        let k = key("db2", 5432, "x", "app");
        assert_eq!(found(text, k).as_deref(), Some("two"));
        let k = key("db2", 6000, "x", "bob");
        assert_eq!(found(text, k).as_deref(), Some("three"));
    }

    #[test]
    fn escapes_in_fields_and_password() {
        let text = "my\\:host:5432:d\\\\b:u:pa\\:ss\\\\word:ignored\r\n";
        let k = key("my:host", 5432, "d\\b", "u");
        assert_eq!(found(text, k).as_deref(), Some("pa:ss\\word"));
    }

    #[test]
    fn localhost_matches_the_default_socket_only() {
        let text = "localhost:5432:*:u:sock\n";
        assert!(found(text, key("", 5432, "d", "u")).is_some());
        let k = key("/var/run/postgresql", 5432, "d", "u");
        assert!(found(text, k).is_some());
        assert!(found(text, key("/tmp", 5432, "d", "u")).is_none());
    }

    #[test]
    fn partial_and_star_prefix_do_not_match() {
        let text = "db:5432:prod:app\n\
                    db1*:5432:prod:app:x\n\
                    db:5432:pro:app:y\n";
        assert!(found(text, key("db", 5432, "prod", "app")).is_none());
        assert!(found(text, key("db12", 5432, "prod", "app")).is_none());
    }
}
