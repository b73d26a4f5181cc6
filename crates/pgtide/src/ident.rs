//! Identifier quoting: the only place that formats a name into SQL.
//!
//! Values are always bound as parameters; names cannot be, so they are
//! quoted here with PostgreSQL's rules (`"a""b"`), every time, even when
//! quoting is not needed, so that case and reserved words never surprise.

use std::fmt;

use crate::error::{Error, Result};

/// Quotes one identifier: `my "col"` becomes `"my ""col"""`.
pub fn quote(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A table name as the user wrote it, split into schema and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QualifiedName {
    /// The schema, when given; otherwise the server's search_path decides.
    pub schema: Option<String>,
    /// The relation name.
    pub name: String,
}

impl QualifiedName {
    /// Parses `name`, `schema.name`, `"Mixed Case"."x.y"` with SQL's rules:
    /// unquoted parts fold to lower case (ASCII letters only, as
    /// PostgreSQL does: `ÜNÏ` means `"ÜnÏ"`), quoted parts keep their case
    /// and may contain dots.
    pub fn parse(input: &str) -> Result<QualifiedName> {
        let parts = split_parts(input).ok_or_else(|| {
            Error::config(format!("invalid table name {input:?}")).with_hint(
                "write name or schema.name; quote parts with \"\" to keep \
                 case or special characters",
            )
        })?;
        match parts.as_slice() {
            [name] => Ok(QualifiedName {
                schema: None,
                name: name.clone(),
            }),
            [schema, name] => Ok(QualifiedName {
                schema: Some(schema.clone()),
                name: name.clone(),
            }),
            _ => Err(Error::config(format!(
                "invalid table name {input:?}: expected name or schema.name"
            ))),
        }
    }

    /// The name quoted for SQL.
    pub fn quoted(&self) -> String {
        match &self.schema {
            Some(s) => format!("{}.{}", quote(s), quote(&self.name)),
            None => quote(&self.name),
        }
    }
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(s) => write!(f, "{s}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// One name, e.g. a schema's, by SQL's rules as [`QualifiedName::parse`]
/// takes each part: unquoted folds to lower case (ASCII), quoted keeps
/// case, spaces and dots.
pub fn parse_name(input: &str) -> Result<String> {
    match split_parts(input).as_deref() {
        Some([name]) => Ok(name.clone()),
        _ => Err(Error::config(format!("invalid name {input:?}")).with_hint(
            "write one name; quote it with \"\" to keep case, spaces or dots: \
             --schema '\"My Schema\"'",
        )),
    }
}

/// Splits on unquoted dots; `None` on empty parts or an unclosed quote.
fn split_parts(input: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut chars = input.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.next_if_eq(&'"').is_some() {
            part = quoted_rest(&mut chars)?;
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                part.push(c.to_ascii_lowercase());
                chars.next();
            }
        }
        if part.is_empty() {
            return None;
        }
        parts.push(part);
        match chars.next() {
            None => return Some(parts),
            Some('.') => continue,
            Some(_) => return None,
        }
    }
}

/// Parses a column list the way psql's `\copy t (a, "B c")` and COPY's
/// FORCE_NULL take it: names separated by commas, optionally in
/// parentheses; unquoted names fold to lower case (ASCII only, as in
/// [`QualifiedName::parse`]); quoted names keep case, spaces, commas and
/// `""` for a quote. A plain split on commas cannot name such columns.
pub fn parse_column_list(input: &str) -> Result<Vec<String>> {
    let bad = |why: &str| {
        Error::config(format!("invalid column list {input:?}: {why}")).with_hint(
            "separate names by commas; unquoted names fold to lower case, quote a name to keep \
             case, spaces or commas: --columns 'id, \"Full Name\"'",
        )
    };
    let trimmed = input.trim();
    let inner = match trimmed.strip_prefix('(') {
        Some(rest) => rest
            .strip_suffix(')')
            .ok_or_else(|| bad("unclosed parenthesis"))?,
        None => trimmed,
    };
    let mut chars = inner.chars().peekable();
    let mut names = Vec::new();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let name = if chars.next_if_eq(&'"').is_some() {
            quoted_rest(&mut chars).ok_or_else(|| bad("unclosed quote"))?
        } else {
            let mut name = String::new();
            while let Some(c) = chars.next_if(|c| !matches!(c, ',' | '"') && !c.is_whitespace()) {
                name.push(c.to_ascii_lowercase());
            }
            name
        };
        if name.is_empty() {
            return Err(bad("empty name"));
        }
        names.push(name);
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.next() {
            None => return Ok(names),
            Some(',') => {}
            Some(_) => return Err(bad("expected a comma between names")),
        }
    }
}

/// The rest of a quoted identifier after its opening quote; `""` is a
/// quote. `None` when the closing quote is missing.
fn quoted_rest(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
    let mut name = String::new();
    loop {
        match chars.next()? {
            '"' if chars.next_if_eq(&'"').is_some() => name.push('"'),
            '"' => return Some(name),
            c => name.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_ascii_only_as_postgresql_does() {
        let q = QualifiedName::parse("ÜNÏ.Çafé").unwrap();
        assert_eq!(q.schema.as_deref(), Some("ÜnÏ"));
        assert_eq!(q.name, "Çafé");
        assert_eq!(parse_column_list("ÜNÏ").unwrap(), ["ÜnÏ"]);
    }

    #[test]
    fn column_lists_take_sql_identifiers() {
        let l = |s: &str| parse_column_list(s).unwrap();
        assert_eq!(l("id,name"), ["id", "name"]);
        assert_eq!(l(" ID , Name "), ["id", "name"]);
        assert_eq!(
            l(r#"(a, "B c", "x,y", "q""t")"#),
            ["a", "B c", "x,y", r#"q"t"#]
        );
        assert_eq!(
            l(r#""Mixed"Case"#.replace("Case", ",case").as_str()),
            ["Mixed", "case"]
        );
        for bad in [
            "", "a,", ",a", "a b", r#""open"#, r#""""#, "(a", "a,,b", r#"a"b""#,
        ] {
            let e = parse_column_list(bad).expect_err(bad);
            assert!(e.hint().is_some(), "{bad}");
        }
    }

    #[test]
    fn quotes_embedded_quotes() {
        assert_eq!(quote(r#"my "col""#), r#""my ""col""""#);
        assert_eq!(
            quote("Robert'); DROP TABLE x;--"),
            "\"Robert'); DROP TABLE x;--\""
        );
    }

    #[test]
    fn parses_qualified_names_like_sql() {
        let q = QualifiedName::parse("Public.Events").unwrap();
        assert_eq!(q.schema.as_deref(), Some("public"));
        assert_eq!(q.name, "events");
        let q = QualifiedName::parse(r#""My Schema"."a.b""c""#).unwrap();
        assert_eq!(q.schema.as_deref(), Some("My Schema"));
        assert_eq!(q.name, r#"a.b"c"#);
        assert_eq!(q.quoted(), r#""My Schema"."a.b""c""#);
        assert!(QualifiedName::parse("a..b").is_err());
        assert!(QualifiedName::parse("\"open").is_err());
        assert!(QualifiedName::parse("a.b.c").is_err());
    }

    #[test]
    fn parses_one_name_like_sql() {
        assert_eq!(parse_name("App").unwrap(), "app");
        assert_eq!(parse_name(r#""My Schema""#).unwrap(), "My Schema");
        assert_eq!(parse_name(r#""a.b""#).unwrap(), "a.b");
        assert!(parse_name("a.b").is_err());
        assert!(parse_name("").is_err());
    }
}

/// Quotes a string literal for the few places SQL cannot take a bound
/// parameter (COPY's options are part of a utility statement). Uses the
/// `E''` form so the result means the same under any
/// `standard_conforming_strings` setting.
pub fn quote_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 3);
    out.push_str("E'");
    for c in value.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod literal_tests {
    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(super::quote_literal(r"a'b\c"), r"E'a''b\\c'");
    }
}
