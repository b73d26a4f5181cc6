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
    /// unquoted parts fold to lower case, quoted parts keep their case and
    /// may contain dots.
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

/// Splits on unquoted dots; `None` on empty parts or an unclosed quote.
fn split_parts(input: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut chars = input.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    '"' => break,
                    c => part.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                part.extend(c.to_lowercase());
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

#[cfg(test)]
mod tests {
    use super::*;

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
