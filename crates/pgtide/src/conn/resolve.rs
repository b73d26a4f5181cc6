//! From keyword/value pairs plus the environment to settled values.
//!
//! libpq's order for every option: the connection string, else its
//! environment variable, else the built-in default. An option pgtide cannot
//! honour is an error here, before any connection attempt, rather than
//! silently ignored (see `config::Support`).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::config::{Params, Support, KEYWORDS, PASSWORD_HINT};
use super::tls::{SslMode, TlsSettings};
use super::{Endpoint, Env, Session, Target};
use crate::{Error, Result};

/// libpq's default port.
const DEFAULT_PORT: u16 = 5432;

/// pgtide names itself in `pg_stat_activity` unless told otherwise, so a
/// DBA can tell its sessions apart.
const DEFAULT_APPLICATION_NAME: &str = "pgtide";

/// The lookup "string, else environment" for one connection string.
struct Lookup<'a> {
    params: &'a Params,
    env: &'a Env,
}

impl Lookup<'_> {
    fn get(&self, keyword: &str) -> Option<&str> {
        self.params.get(keyword).or_else(|| {
            let (_, var, _) = KEYWORDS.iter().find(|(k, _, _)| *k == keyword)?;
            self.env.var((*var)?)
        })
    }

    /// Where `keyword`'s value came from, for messages that must not
    /// quote it: a value in the string may be a piece of a password.
    fn origin(&self, keyword: &str) -> String {
        let var = KEYWORDS
            .iter()
            .find(|(k, _, _)| *k == keyword)
            .and_then(|(_, v, _)| *v);
        match var {
            Some(var) if self.params.get(keyword).is_none() => var.to_owned(),
            _ => format!("connection option \"{keyword}\""),
        }
    }

    /// An invalid value, named by where it came from; from the string,
    /// the hint says how a password breaks one.
    fn bad_value(&self, keyword: &str, allowed: &str) -> Error {
        let mut hint = format!("{keyword} takes {allowed}");
        if self.params.get(keyword).is_some() {
            hint.push_str("; ");
            hint.push_str(PASSWORD_HINT);
        }
        Error::config(format!("invalid value in {}", self.origin(keyword))).with_hint(hint)
    }

    /// Like `get`, but an empty value counts as absent (libpq falls back
    /// to the default for an empty host, port, user, dbname...).
    fn non_empty(&self, keyword: &str) -> Option<&str> {
        self.get(keyword).filter(|v| !v.is_empty())
    }
}

pub(crate) fn resolve(params: &Params, env: &Env) -> Result<Target> {
    let l = Lookup { params, env };
    reject_unsupported(&l)?;
    let user = match l.non_empty("user").or(env.user_name()) {
        Some(u) => u.to_owned(),
        None => {
            return Err(Error::config("could not determine the user name")
                .with_hint("set the user in --db or with PGUSER"))
        }
    };
    let home = env.home_dir();
    let in_home = |rel: &str| home.map(|h| h.join(rel));
    let path = |kw: &str, rel: &str| l.non_empty(kw).map(PathBuf::from).or_else(|| in_home(rel));
    let rootcert = path("sslrootcert", ".postgresql/root.crt");
    let tls = TlsSettings {
        mode: sslmode(&l, rootcert.as_deref())?,
        rootcert,
        cert: path("sslcert", ".postgresql/postgresql.crt"),
        key: path("sslkey", ".postgresql/postgresql.key"),
    };
    let session = session(&l, tls.mode)?;
    Ok(Target {
        endpoints: endpoints(&l, env)?,
        dbname: l.non_empty("dbname").unwrap_or(&user).to_owned(),
        user,
        password: l.non_empty("password").map(str::to_owned),
        passfile: path("passfile", ".pgpass"),
        tls,
        application_name: l
            .non_empty("application_name")
            .or(l.non_empty("fallback_application_name"))
            .unwrap_or(DEFAULT_APPLICATION_NAME)
            .to_owned(),
        options: options(l.non_empty("options"), env),
        connect_timeout: connect_timeout(&l)?,
        session,
    })
}

/// libpq sends these variables as settings of the session when they are
/// set (its `EnvironmentOptions`): psql follows them, so pgtide must, or
/// `03/04/2024` loads as another date than with psql.
const SESSION_VARIABLES: [(&str, &str); 3] = [
    ("PGDATESTYLE", "datestyle"),
    ("PGTZ", "timezone"),
    ("PGGEQO", "geqo"),
];

/// The startup `options`: the connection's own (`options`, `PGOPTIONS`),
/// then a `-c name=value` for each of [`SESSION_VARIABLES`] that is set
/// (later ones win, as libpq's settings win over its `options`), with
/// spaces and backslashes escaped as the server splits `options`.
fn options(own: Option<&str>, env: &Env) -> Option<String> {
    let escape = |v: &str| v.replace('\\', "\\\\").replace(' ', "\\ ");
    let mut parts: Vec<String> = own.map(str::to_owned).into_iter().collect();
    for (var, setting) in SESSION_VARIABLES {
        if let Some(v) = env.var(var).filter(|v| !v.is_empty()) {
            parts.push(format!("-c {setting}={}", escape(v)));
        }
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

fn reject_unsupported(l: &Lookup<'_>) -> Result<()> {
    for (kw, var, support) in KEYWORDS {
        if *support != Support::No || l.non_empty(kw).is_none() {
            continue;
        }
        let source = match (l.params.get(kw), var) {
            (None, Some(var)) => format!("{var} (connection option \"{kw}\")"),
            _ => format!("connection option \"{kw}\""),
        };
        return Err(
            Error::config(format!("pgtide does not support {source}")).with_hint(
                if *kw == "service" {
                    "give the settings of the service in --db or PG* variables \
                 instead"
                } else {
                    "remove it, or connect with psql if you need it"
                },
            ),
        );
    }
    match l.non_empty("gssencmode") {
        None | Some("disable" | "prefer") => {}
        Some(_) => {
            return Err(Error::config("pgtide does not support GSSAPI encryption")
                .with_hint("use gssencmode=disable or prefer, and TLS instead"))
        }
    }
    match l.non_empty("client_encoding") {
        None => Ok(()),
        Some(e) if e.eq_ignore_ascii_case("utf8") || e == "auto" => Ok(()),
        Some(e) if e.eq_ignore_ascii_case("utf-8") => Ok(()),
        Some(_) => Err(Error::config(format!(
            "{} is not supported unless UTF8",
            l.origin("client_encoding")
        ))
        .with_hint("pgtide always talks UTF8 to the server; remove client_encoding")),
    }
}

fn sslmode(l: &Lookup<'_>, rootcert: Option<&std::path::Path>) -> Result<SslMode> {
    match l.non_empty("sslmode") {
        Some(m) => SslMode::parse(m).map_err(|_| {
            l.bad_value(
                "sslmode",
                "disable, allow, prefer, require, verify-ca or verify-full",
            )
        }),
        // libpq 16: sslrootcert=system makes verify-full the default.
        None if rootcert == Some(std::path::Path::new("system")) => Ok(SslMode::VerifyFull),
        None => Ok(SslMode::Prefer),
    }
}

/// Hosts, host addresses and ports, paired as libpq pairs them.
fn endpoints(l: &Lookup<'_>, env: &Env) -> Result<Vec<Endpoint>> {
    let list = |kw| {
        l.non_empty(kw)
            .map(|v| v.split(',').map(str::trim).collect::<Vec<_>>())
    };
    let addrs = list("hostaddr");
    let hosts = list("host").unwrap_or_else(|| vec![""; addrs.as_ref().map_or(1, Vec::len)]);
    let addrs = addrs.unwrap_or_else(|| vec![""; hosts.len()]);
    if addrs.len() != hosts.len() {
        return Err(Error::config(format!(
            "could not match {} host names to {} hostaddr values",
            hosts.len(),
            addrs.len()
        ))
        .with_hint("give one hostaddr per host, separated by commas"));
    }
    let ports = ports(l, hosts.len())?;
    let default_host = match env.default_socket_dir() {
        Some(dir) => dir.to_string_lossy().into_owned(),
        None => "localhost".to_owned(),
    };
    let mut out = Vec::new();
    for ((host, addr), port) in hosts.into_iter().zip(addrs).zip(ports) {
        let hostaddr = parse_hostaddr(l, addr)?;
        let host = match (host, hostaddr) {
            ("", None) => default_host.clone(),
            // libpq matches ~/.pgpass and checks certificates against
            // hostaddr when no host name is given.
            ("", Some(addr)) => addr.to_string(),
            (h, _) => h.to_owned(),
        };
        out.push(Endpoint {
            host,
            hostaddr,
            port,
        });
    }
    Ok(out)
}

fn parse_hostaddr(l: &Lookup<'_>, addr: &str) -> Result<Option<IpAddr>> {
    if addr.is_empty() {
        return Ok(None);
    }
    addr.parse()
        .map(Some)
        .map_err(|_| l.bad_value("hostaddr", "numeric IP addresses (use host for names)"))
}

fn ports(l: &Lookup<'_>, hosts: usize) -> Result<Vec<u16>> {
    let Some(value) = l.non_empty("port") else {
        return Ok(vec![DEFAULT_PORT; hosts]);
    };
    let ports = value
        .split(',')
        .enumerate()
        .map(|(i, p)| match p.trim() {
            "" => Ok(DEFAULT_PORT),
            p => p.parse::<u16>().ok().filter(|n| *n > 0).ok_or_else(|| {
                let e = l.bad_value("port", "a number from 1 to 65535, default 5432");
                // Which entry, never its text (a password typed in the
                // wrong place must not be echoed).
                Error::config(format!(
                    "invalid port number: the {} port in {} is not a number from 1 to 65535",
                    super::config::ordinal(i + 1).trim_end_matches(" option"),
                    l.origin("port")
                ))
                .with_hint(e.hint().unwrap_or_default().to_owned())
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    match ports.len() {
        1 => Ok(vec![ports[0]; hosts]),
        n if n == hosts => Ok(ports),
        n => Err(
            Error::config(format!("could not match {n} port numbers to {hosts} hosts"))
                .with_hint("give one port for all hosts, or one per host"),
        ),
    }
}

/// libpq: zero or negative waits forever; less than 2 seconds becomes 2.
fn connect_timeout(l: &Lookup<'_>) -> Result<Option<Duration>> {
    let Some(v) = l.non_empty("connect_timeout") else {
        return Ok(None);
    };
    let secs: i64 = v
        .trim()
        .parse()
        .map_err(|_| l.bad_value("connect_timeout", "whole seconds"))?;
    Ok((secs > 0).then(|| Duration::from_secs(secs.max(2) as u64)))
}

fn session(l: &Lookup<'_>, mode: SslMode) -> Result<Session> {
    use super::SessionAttrs;
    use tokio_postgres::config::{ChannelBinding, LoadBalanceHosts, SslNegotiation};
    let target_session_attrs = match l.non_empty("target_session_attrs") {
        None | Some("any") => SessionAttrs::Any,
        Some("read-write") => SessionAttrs::ReadWrite,
        Some("read-only") => SessionAttrs::ReadOnly,
        Some("primary") => SessionAttrs::Primary,
        Some("standby") => SessionAttrs::Standby,
        Some("prefer-standby") => SessionAttrs::PreferStandby,
        Some(_) => {
            return Err(l.bad_value(
                "target_session_attrs",
                "any, read-write, read-only, primary, standby, prefer-standby",
            ))
        }
    };
    let channel_binding = match l.non_empty("channel_binding") {
        None | Some("prefer") => ChannelBinding::Prefer,
        Some("disable") => ChannelBinding::Disable,
        Some("require") => ChannelBinding::Require,
        Some(_) => return Err(l.bad_value("channel_binding", "disable, prefer, require")),
    };
    let ssl_negotiation = match l.non_empty("sslnegotiation") {
        None | Some("postgres") => SslNegotiation::Postgres,
        Some("direct") if mode >= SslMode::Require => SslNegotiation::Direct,
        Some("direct") => {
            return Err(Error::config(format!(
                "weak sslmode \"{}\" may not be used with sslnegotiation=direct",
                mode.as_str()
            ))
            .with_hint("use sslmode=require, verify-ca or verify-full"))
        }
        Some(_) => return Err(l.bad_value("sslnegotiation", "postgres, direct")),
    };
    let load_balance = match l.non_empty("load_balance_hosts") {
        None | Some("disable") => LoadBalanceHosts::Disable,
        Some("random") => LoadBalanceHosts::Random,
        Some(_) => return Err(l.bad_value("load_balance_hosts", "disable, random")),
    };
    Ok(Session {
        target_session_attrs,
        channel_binding,
        ssl_negotiation,
        load_balance,
        keepalives: l.non_empty("keepalives") != Some("0"),
        keepalives_idle: integer(l, "keepalives_idle")?.map(Duration::from_secs),
        keepalives_interval: integer(l, "keepalives_interval")?.map(Duration::from_secs),
        keepalives_count: integer(l, "keepalives_count")?.map(|n| n.min(u32::MAX.into()) as u32),
        tcp_user_timeout: integer(l, "tcp_user_timeout")?.map(Duration::from_millis),
    })
}

/// A non-negative integer option (seconds, milliseconds or a count).
fn integer(l: &Lookup<'_>, kw: &str) -> Result<Option<u64>> {
    let Some(v) = l.non_empty(kw) else {
        return Ok(None);
    };
    let n = v
        .trim()
        .parse()
        .map_err(|_| l.bad_value(kw, "a non-negative integer"))?;
    Ok(Some(n))
}
