//! Parsing of libpq connection strings into keyword/value pairs.
//!
//! Two syntaxes reach us through `--db`, exactly as they reach `psql`:
//! `postgresql://user:pass@host:port/db?key=value` URIs and
//! `host=h port=5432 dbname='my db'` keyword strings. Both are turned into
//! the same plain list of [`Params`] here, before anything is resolved
//! (ripgrep's "low args"): this module does not read the environment, the
//! password file or the disk. `resolve.rs` gives the values meaning.
//!
//! Error messages follow libpq's wording so that users can search for them,
//! and never repeat a value: a value may be a password.

use crate::{Error, Result};

/// How pgtide treats a libpq keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Support {
    /// pgtide honours it.
    Yes,
    /// Accepted and ignored: it only tunes something pgtide has no
    /// equivalent for, and ignoring it weakens nothing.
    Ignored,
    /// libpq knows it but pgtide cannot honour it; silently ignoring it
    /// could weaken security or change which server is reached.
    No,
}

/// Every keyword libpq 17 knows, with its environment variable.
///
/// Keeping libpq's full list lets us tell "you made a typo" (an invalid
/// option, as libpq says) apart from "pgtide does not do that".
pub(crate) const KEYWORDS: &[(&str, Option<&str>, Support)] = &[
    ("host", Some("PGHOST"), Support::Yes),
    ("hostaddr", Some("PGHOSTADDR"), Support::Yes),
    ("port", Some("PGPORT"), Support::Yes),
    ("dbname", Some("PGDATABASE"), Support::Yes),
    ("user", Some("PGUSER"), Support::Yes),
    ("password", Some("PGPASSWORD"), Support::Yes),
    ("passfile", Some("PGPASSFILE"), Support::Yes),
    ("connect_timeout", Some("PGCONNECT_TIMEOUT"), Support::Yes),
    ("options", Some("PGOPTIONS"), Support::Yes),
    ("application_name", Some("PGAPPNAME"), Support::Yes),
    ("fallback_application_name", None, Support::Yes),
    ("client_encoding", Some("PGCLIENTENCODING"), Support::Yes),
    ("sslmode", Some("PGSSLMODE"), Support::Yes),
    ("sslrootcert", Some("PGSSLROOTCERT"), Support::Yes),
    ("sslcert", Some("PGSSLCERT"), Support::Yes),
    ("sslkey", Some("PGSSLKEY"), Support::Yes),
    ("sslnegotiation", Some("PGSSLNEGOTIATION"), Support::Yes),
    ("channel_binding", Some("PGCHANNELBINDING"), Support::Yes),
    (
        "target_session_attrs",
        Some("PGTARGETSESSIONATTRS"),
        Support::Yes,
    ),
    (
        "load_balance_hosts",
        Some("PGLOADBALANCEHOSTS"),
        Support::Yes,
    ),
    ("keepalives", None, Support::Yes),
    ("keepalives_idle", None, Support::Yes),
    ("keepalives_interval", None, Support::Yes),
    ("keepalives_count", None, Support::Yes),
    ("tcp_user_timeout", None, Support::Yes),
    ("gssencmode", Some("PGGSSENCMODE"), Support::Yes),
    ("sslcompression", Some("PGSSLCOMPRESSION"), Support::Ignored),
    ("sslsni", Some("PGSSLSNI"), Support::Ignored),
    ("krbsrvname", Some("PGKRBSRVNAME"), Support::Ignored),
    ("gsslib", Some("PGGSSLIB"), Support::Ignored),
    ("ssl_min_protocol_version", None, Support::Ignored),
    ("ssl_max_protocol_version", None, Support::Ignored),
    ("service", Some("PGSERVICE"), Support::No),
    ("sslpassword", None, Support::No),
    ("sslcrl", Some("PGSSLCRL"), Support::No),
    ("sslcrldir", Some("PGSSLCRLDIR"), Support::No),
    ("sslcertmode", Some("PGSSLCERTMODE"), Support::No),
    ("requirepeer", Some("PGREQUIREPEER"), Support::No),
    ("require_auth", Some("PGREQUIREAUTH"), Support::No),
    ("gssdelegation", Some("PGGSSDELEGATION"), Support::No),
    ("replication", None, Support::No),
];

/// The keyword/value pairs of one connection string, in order; a later
/// pair overrides an earlier one, as in libpq.
#[derive(Debug, Clone, Default)]
pub(crate) struct Params(Vec<(&'static str, String)>);

impl Params {
    /// Parses either syntax; a URI is recognised by its scheme, as libpq
    /// does.
    pub(crate) fn parse(conninfo: &str) -> Result<Params> {
        if let Some(rest) = strip_scheme(conninfo) {
            parse_uri(rest)
        } else {
            parse_keywords(conninfo)
        }
    }

    /// The last value given for `keyword`.
    pub(crate) fn get(&self, keyword: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| *k == keyword)
            .map(|(_, v)| v.as_str())
    }

    fn push(&mut self, keyword: &str, value: String) -> Result<()> {
        let entry = KEYWORDS.iter().find(|(k, _, _)| *k == keyword);
        match entry {
            Some((k, _, _)) => {
                self.0.push((k, value));
                Ok(())
            }
            None => Err(
                Error::config(format!("invalid connection option \"{keyword}\"")).with_hint(
                    "check the spelling; the options are those of libpq, \
                 see https://www.postgresql.org/docs/current/\
                 libpq-connect.html#LIBPQ-PARAMKEYWORDS",
                ),
            ),
        }
    }
}

fn strip_scheme(s: &str) -> Option<&str> {
    s.strip_prefix("postgresql://")
        .or_else(|| s.strip_prefix("postgres://"))
}

/// `key = value ...` with single-quoted values; `\` escapes the next
/// character inside and outside quotes, as in libpq's conninfo_parse.
fn parse_keywords(s: &str) -> Result<Params> {
    let mut params = Params::default();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(params);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(Error::config(format!(
                "missing \"=\" after \"{key}\" in connection info string"
            ))
            .with_hint("write options as key=value, separated by spaces"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let value = keyword_value(&mut chars)?;
        params.push(&key, value)?;
    }
}

fn keyword_value(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<String> {
    let mut value = String::new();
    if chars.next_if_eq(&'\'').is_none() {
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            value.push(if c == '\\' {
                chars.next().unwrap_or(c)
            } else {
                c
            });
        }
        return Ok(value);
    }
    loop {
        match chars.next() {
            Some('\'') => return Ok(value),
            Some('\\') => value.extend(chars.next()),
            Some(c) => value.push(c),
            None => {
                return Err(
                    Error::config("unterminated quoted string in connection info string")
                        .with_hint("close the value with ' and escape a quote as \\'"),
                )
            }
        }
    }
}

/// `[user[:password]@][host[:port][,...]][/dbname][?key=value&...]`.
fn parse_uri(rest: &str) -> Result<Params> {
    let mut params = Params::default();
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match main.find('/') {
        Some(i) => (&main[..i], Some(&main[i + 1..])),
        None => (main, None),
    };
    let hostspec = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            parse_userinfo(userinfo, &mut params)?;
            hosts
        }
        None => authority,
    };
    parse_hostspec(hostspec, &mut params)?;
    if let Some(db) = path.filter(|p| !p.is_empty()) {
        params.push("dbname", decode(db, "database name")?)?;
    }
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        parse_query_pair(pair, &mut params)?;
    }
    Ok(params)
}

fn parse_userinfo(userinfo: &str, params: &mut Params) -> Result<()> {
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    if !user.is_empty() {
        params.push("user", decode(user, "user name")?)?;
    }
    if let Some(p) = password {
        params.push("password", decode(p, "password")?)?;
    }
    Ok(())
}

/// Comma-separated `host[:port]` entries; IPv6 addresses in brackets.
fn parse_hostspec(spec: &str, params: &mut Params) -> Result<()> {
    if spec.is_empty() {
        return Ok(());
    }
    let mut hosts = Vec::new();
    let mut ports = Vec::new();
    for entry in spec.split(',') {
        let (host, port) = split_host_port(entry)?;
        hosts.push(decode(host, "host name")?);
        ports.push(decode(port.unwrap_or(""), "port")?);
    }
    if hosts.iter().any(|h| !h.is_empty()) {
        params.push("host", hosts.join(","))?;
    }
    if ports.iter().any(|p| !p.is_empty()) {
        params.push("port", ports.join(","))?;
    }
    Ok(())
}

fn split_host_port(entry: &str) -> Result<(&str, Option<&str>)> {
    if let Some(inner) = entry.strip_prefix('[') {
        let Some((addr, after)) = inner.split_once(']') else {
            return Err(Error::config("missing \"]\" in IPv6 host address in URI")
                .with_hint("write IPv6 hosts as [::1]:5432"));
        };
        return match after.strip_prefix(':') {
            Some(port) => Ok((addr, Some(port))),
            None if after.is_empty() => Ok((addr, None)),
            None => Err(
                Error::config("unexpected character after IPv6 host address in URI")
                    .with_hint("write IPv6 hosts as [::1]:5432"),
            ),
        };
    }
    Ok(match entry.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (entry, None),
    })
}

fn parse_query_pair(pair: &str, params: &mut Params) -> Result<()> {
    if pair.is_empty() {
        return Ok(());
    }
    let Some((key, value)) = pair.split_once('=') else {
        // The text is not repeated: an unencoded "?" in a password lands
        // here.
        return Err(
            Error::config("missing key/value separator \"=\" in URI query parameter").with_hint(
                "write URI parameters as ?key=value&key=value, and encode \
             ? in a password as %3F",
            ),
        );
    };
    let key = decode(key, "query parameter")?;
    let value = decode(value, "query parameter value")?;
    // JDBC's ssl=true is accepted by libpq and means sslmode=require.
    if key == "ssl" && value == "true" {
        return params.push("sslmode", "require".into());
    }
    if !KEYWORDS.iter().any(|(k, _, _)| *k == key) {
        return Err(
            Error::config(format!("invalid URI query parameter: \"{key}\""))
                .with_hint("check the spelling; the parameters are libpq's keywords"),
        );
    }
    params.push(&key, value)
}

/// Percent-decodes one URI component. `what` names the component in the
/// error, because the text itself may be a password.
fn decode(s: &str, what: &str) -> Result<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        let Some(byte) = hex.filter(|b| *b != 0) else {
            return Err(bad_percent(what));
        };
        out.push(byte);
        i += 3;
    }
    String::from_utf8(out).map_err(|_| bad_percent(what))
}

fn bad_percent(what: &str) -> Error {
    Error::config(format!(
        "invalid percent-encoded token in the {what} of the URI"
    ))
    .with_hint("encode special characters as %XX, for example @ as %40 and / as %2F")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Params {
        Params::parse(s).unwrap()
    }

    #[test]
    fn uri_full() {
        let params = p("postgresql://app:p%40ss@db.example:6543/prod\
                        ?sslmode=verify-full&application_name=x");
        assert_eq!(params.get("user"), Some("app"));
        assert_eq!(params.get("password"), Some("p@ss"));
        assert_eq!(params.get("host"), Some("db.example"));
        assert_eq!(params.get("port"), Some("6543"));
        assert_eq!(params.get("dbname"), Some("prod"));
        assert_eq!(params.get("sslmode"), Some("verify-full"));
        assert_eq!(params.get("application_name"), Some("x"));
    }

    #[test]
    fn uri_multi_host_ipv6_and_socket() {
        let params = p("postgres://h1:1,[::1]:2,h3/db");
        assert_eq!(params.get("host"), Some("h1,::1,h3"));
        assert_eq!(params.get("port"), Some("1,2,"));
        let params = p("postgresql://%2Fvar%2Frun%2Fpostgresql/db");
        assert_eq!(params.get("host"), Some("/var/run/postgresql"));
        let params = p("postgresql:///db?host=/tmp&ssl=true");
        assert_eq!(params.get("host"), Some("/tmp"));
        assert_eq!(params.get("sslmode"), Some("require"));
        assert!(p("postgresql://").get("host").is_none());
    }

    #[test]
    fn keywords_quoting() {
        let params = p(r"host=h  port = 5 dbname='my \'db\' \\x' user=a\ b");
        assert_eq!(params.get("host"), Some("h"));
        assert_eq!(params.get("port"), Some("5"));
        assert_eq!(params.get("dbname"), Some(r"my 'db' \x"));
        assert_eq!(params.get("user"), Some("a b"));
        assert_eq!(p("password=''").get("password"), Some(""));
        assert_eq!(p("host=a host=b").get("host"), Some("b"));
    }

    #[test]
    fn errors_name_the_keyword_but_never_the_value() {
        let e = Params::parse("hots=x password=secret1").unwrap_err();
        assert_eq!(e.message(), "invalid connection option \"hots\"");
        let e = Params::parse("postgresql://u:se%zzcret2@h/d").unwrap_err();
        assert!(!e.message().contains("cret2"), "{e}");
        let e = Params::parse("postgresql://h/d?bogus=secret3").unwrap_err();
        assert_eq!(e.message(), "invalid URI query parameter: \"bogus\"");
        let e = Params::parse("password='secret4").unwrap_err();
        assert!(!e.message().contains("secret4"), "{e}");
        assert!(Params::parse("host").is_err());
        assert!(Params::parse("postgresql://[::1/d").is_err());
    }
}
