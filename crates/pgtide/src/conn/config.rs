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
//! but never repeat any text of the string, keys included: a password
//! typed without quoting or percent-encoding is cut into pieces that land
//! in other keys and values (`postgresql://u:Wr/x@h` makes "Wr" a port).
//! They name the known keyword, the option's number and the character
//! position instead.

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

    /// Adds a pair; `place` says where the key is in the string, for the
    /// error, because the key itself may be a piece of a password.
    fn push(&mut self, keyword: &str, value: String, place: &str) -> Result<()> {
        match KEYWORDS.iter().find(|(k, _, _)| *k == keyword) {
            Some((k, _, _)) => {
                self.0.push((k, value));
                Ok(())
            }
            None => Err(unknown_keyword(keyword, place)),
        }
    }

    /// Adds a pair whose keyword is one of ours (URI parts).
    fn push_known(&mut self, keyword: &'static str, value: String) {
        self.0.push((keyword, value));
    }
}

/// An unknown key, described by position; a close known keyword is
/// suggested (it is ours, so naming it reveals nothing).
fn unknown_keyword(keyword: &str, place: &str) -> Error {
    let suggestion = KEYWORDS
        .iter()
        .map(|(k, _, _)| *k)
        .find(|k| edit_distance(k, keyword) <= 2)
        .map(|k| format!("did you mean \"{k}\"? "))
        .unwrap_or_default();
    Error::config(format!("invalid connection option: unknown key in {place}")).with_hint(format!(
        "{suggestion}the options are those of libpq, see https://www.postgresql.org/docs/\
         current/libpq-connect.html#LIBPQ-PARAMKEYWORDS; {PASSWORD_HINT}"
    ))
}

/// Every parse error ends with this: the usual cause of a string that
/// falls apart is a password with special characters in it.
pub(crate) const PASSWORD_HINT: &str =
    "if the string holds a password, quote it in key=value form (password='a b\\'c') or \
     percent-encode : / ? # @ % in a URI (%3A %2F %3F %23 %40 %25), or better leave it out \
     of --db (visible in ps) and set PGPASSWORD or use ~/.pgpass";

/// Levenshtein distance, for "did you mean" on short keywords.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn strip_scheme(s: &str) -> Option<&str> {
    s.strip_prefix("postgresql://")
        .or_else(|| s.strip_prefix("postgres://"))
}

/// `key = value ...` with single-quoted values; `\\` escapes the next
/// character inside and outside quotes, as in libpq's conninfo_parse.
fn parse_keywords(s: &str) -> Result<Params> {
    let mut params = Params::default();
    let mut chars = s.chars().peekable();
    let mut pos = 0; // characters consumed, for messages
    for n in 1.. {
        skip_space(&mut chars, &mut pos);
        if chars.peek().is_none() {
            break;
        }
        let place = format!("the {} (at character {})", ordinal(n), pos + 1);
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
            pos += 1;
        }
        skip_space(&mut chars, &mut pos);
        if chars.next() != Some('=') {
            return Err(Error::config(format!(
                "missing \"=\" after the key of {place} in the connection info string"
            ))
            .with_hint(format!(
                "write options as key=value, separated by spaces; {PASSWORD_HINT}"
            )));
        }
        pos += 1;
        skip_space(&mut chars, &mut pos);
        let value = keyword_value(&mut chars, &mut pos)?;
        params.push(&key, value, &place)?;
    }
    Ok(params)
}

fn skip_space(chars: &mut Chars<'_>, pos: &mut usize) {
    while chars.next_if(|c| c.is_whitespace()).is_some() {
        *pos += 1;
    }
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// "1st", "2nd", ... option, for messages that cannot quote the text.
pub(super) fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix} option")
}

fn keyword_value(chars: &mut Chars<'_>, pos: &mut usize) -> Result<String> {
    let mut value = String::new();
    let start = *pos + 1;
    let mut next = |chars: &mut Chars<'_>| {
        let c = chars.next();
        *pos += usize::from(c.is_some());
        c
    };
    if chars.peek() != Some(&'\'') {
        while chars.peek().is_some_and(|c| !c.is_whitespace()) {
            let c = next(chars).unwrap_or_default();
            value.push(if c == '\\' {
                next(chars).unwrap_or(c)
            } else {
                c
            });
        }
        return Ok(value);
    }
    next(chars);
    loop {
        match next(chars) {
            Some('\'') => return Ok(value),
            Some('\\') => value.extend(next(chars)),
            Some(c) => value.push(c),
            None => {
                return Err(Error::config(format!(
                    "unterminated quoted string in connection info string (the quote at \
                     character {start})"
                ))
                .with_hint(format!(
                    "close the value with ' and escape a quote in it as \\'; {PASSWORD_HINT}"
                )))
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
        if db.contains('@') {
            return Err(at_after_host());
        }
        params.push_known("dbname", decode(db, "database name")?);
    }
    for (n, pair) in query.into_iter().flat_map(|q| q.split('&')).enumerate() {
        parse_query_pair(pair, n + 1, &mut params)?;
    }
    Ok(params)
}

/// An `@` in the database part is what an unencoded `/` in a password
/// leaves behind (`postgresql://u:a/b@h/db` has host `u`, port `a` and
/// database `b@h/db`), so it is refused rather than sent to a server as
/// a database name (or quoted in a message as a port).
fn at_after_host() -> Error {
    Error::config("unexpected \"@\" after the host part of the URI").with_hint(format!(
        "write @ in a database name as %40; {PASSWORD_HINT}"
    ))
}

fn parse_userinfo(userinfo: &str, params: &mut Params) -> Result<()> {
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    if !user.is_empty() {
        params.push_known("user", decode(user, "user name")?);
    }
    if let Some(p) = password {
        params.push_known("password", decode(p, "password")?);
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
        params.push_known("host", hosts.join(","));
    }
    if ports.iter().any(|p| !p.is_empty()) {
        params.push_known("port", ports.join(","));
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

/// The `n`th `key=value` of the query. Neither key nor value is ever
/// repeated: an unencoded "?" in a password puts the rest of the URI here.
fn parse_query_pair(pair: &str, n: usize, params: &mut Params) -> Result<()> {
    if pair.is_empty() {
        return Ok(());
    }
    let place = format!("URI query parameter {n}");
    let Some((key, value)) = pair.split_once('=') else {
        return Err(
            Error::config(format!("missing key/value separator \"=\" in {place}")).with_hint(
                format!("write URI parameters as ?key=value&key=value; {PASSWORD_HINT}"),
            ),
        );
    };
    let key = decode(key, "query parameter")?;
    let value = decode(value, "query parameter value")?;
    // JDBC's ssl=true is accepted by libpq and means sslmode=require.
    if key == "ssl" && value == "true" {
        params.push_known("sslmode", "require".into());
        return Ok(());
    }
    params.push(&key, value, &place)
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
    .with_hint(format!(
        "encode special characters as %XX, for example @ as %40 and / as %2F; {PASSWORD_HINT}"
    ))
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
    fn errors_name_the_position_but_never_the_text() {
        let e = Params::parse("hots=x password=secret1").unwrap_err();
        assert_eq!(
            e.message(),
            "invalid connection option: unknown key in the 1st option (at character 1)"
        );
        assert!(
            e.hint().unwrap().starts_with("did you mean \"host\"?"),
            "{e:?}"
        );
        let e = Params::parse("host=h password=Se cRet1=x").unwrap_err();
        assert!(e.message().contains("3rd option (at character 20)"), "{e}");
        assert!(!e.message().contains("cRet1"), "{e}");
        let e = Params::parse("host=h password=Se cRet1 user=x").unwrap_err();
        assert!(
            e.message()
                .starts_with("missing \"=\" after the key of the 3rd option (at character 20)"),
            "{e}"
        );
        let e = Params::parse("postgresql://u:se%zzcret2@h/d").unwrap_err();
        assert!(!e.message().contains("cret2"), "{e}");
        let e = Params::parse("postgresql://h/d?sslmode=x&bogus=secret3").unwrap_err();
        assert_eq!(
            e.message(),
            "invalid connection option: unknown key in URI query parameter 2"
        );
        let e = Params::parse("postgresql://u:Wr/secret5@h/d").unwrap_err();
        assert_eq!(
            e.message(),
            "unexpected \"@\" after the host part of the URI"
        );
        let e = Params::parse("postgresql://u:Wr?secret6@h/d").unwrap_err();
        assert!(!e.message().contains("cret6"), "{e}");
        let e = Params::parse("password='secret4").unwrap_err();
        assert!(!e.message().contains("secret4"), "{e}");
        assert!(e.message().contains("character 10"), "{e}");
        assert!(Params::parse("host").is_err());
        assert!(Params::parse("postgresql://[::1/d").is_err());
    }

    #[test]
    fn ordinals_and_distances() {
        let o: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).into();
        assert_eq!(
            o.join(" "),
            "1st option 2nd option 3rd option 4th option 11th option 12th option \
             13th option 21st option 22nd option 101st option"
        );
        assert_eq!(edit_distance("hots", "host"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("sslmode", "sslmode"), 0);
    }
}
