//! Header fields -> column names, and names -> SQL as people write it.
//!
//! Names are kept as the header spells them (case, spaces, accents) so
//! that the table says what the file says; they are quoted in SQL where
//! needed. They change only where PostgreSQL would not take them: an empty
//! (or NULL) field becomes `cN`, surrounding spaces are trimmed, a name
//! over 63 bytes is cut (PostgreSQL would cut it silently and then see a
//! duplicate), and duplicates get `_2`, `_3`... Each change is reported.

/// One column's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnName {
    /// The header field as read (`None`: no header, or a NULL field).
    pub source: Option<String>,
    /// The column name used.
    pub name: String,
}

impl ColumnName {
    /// Whether the name differs from the header field (a change to report).
    pub fn changed(&self) -> bool {
        self.source.as_deref() != Some(self.name.as_str())
    }
}

/// PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1).
pub const MAX_NAME_BYTES: usize = 63;

/// Names for `n` columns from the header fields (`None` without a header).
pub fn columns(header: Option<&[Option<String>]>, n: usize) -> Vec<ColumnName> {
    let mut out: Vec<ColumnName> = Vec::with_capacity(n);
    for i in 0..n {
        let source = header.and_then(|h| h.get(i).cloned().flatten());
        let base = match source.as_deref().map(str::trim) {
            Some(s) if !s.is_empty() && !s.contains('\0') => truncate(s, MAX_NAME_BYTES),
            _ => format!("c{}", i + 1),
        };
        let mut name = base.clone();
        let mut k = 2;
        while out.iter().any(|c| c.name == name) {
            let suffix = format!("_{k}");
            name = format!("{}{suffix}", truncate(&base, MAX_NAME_BYTES - suffix.len()));
            k += 1;
        }
        out.push(ColumnName { source, name });
    }
    out
}

/// `s` cut to at most `max` bytes at a character boundary.
fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Keywords that cannot be a column name unquoted (PostgreSQL's reserved
/// and type/function-name keywords, plus the column-name keywords that
/// read as types, quoted for clarity).
const KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "both",
    "case",
    "cast",
    "char",
    "character",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "dec",
    "decimal",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "exists",
    "false",
    "fetch",
    "float",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "int",
    "integer",
    "intersect",
    "interval",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "nchar",
    "none",
    "not",
    "notnull",
    "null",
    "numeric",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "precision",
    "primary",
    "real",
    "references",
    "returning",
    "right",
    "row",
    "select",
    "session_user",
    "similar",
    "smallint",
    "some",
    "symmetric",
    "system_user",
    "table",
    "tablesample",
    "then",
    "time",
    "timestamp",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "values",
    "varchar",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
];

/// `name` as SQL: bare when PostgreSQL reads it back unchanged (lower-case
/// ASCII letters, digits, `_`, not starting with a digit, not a keyword),
/// else double-quoted.
pub fn sql(name: &str) -> String {
    let bare = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !KEYWORDS.contains(&name);
    if bare {
        name.to_string()
    } else {
        crate::ident::quote(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(fields: &[Option<&str>]) -> Vec<Option<String>> {
        fields.iter().map(|f| f.map(String::from)).collect()
    }

    fn names(fields: &[Option<&str>]) -> Vec<String> {
        columns(Some(&header(fields)), fields.len())
            .into_iter()
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn kept_as_written() {
        assert_eq!(
            names(&[Some("id"), Some("Full Name"), Some("Ünïcode")]),
            ["id", "Full Name", "Ünïcode"]
        );
        assert!(!columns(Some(&header(&[Some("id")])), 1)[0].changed());
    }

    #[test]
    fn empty_null_and_missing_become_positional() {
        assert_eq!(names(&[Some(""), None, Some("  ")]), ["c1", "c2", "c3"]);
        let none = columns(None, 3);
        assert_eq!(
            none.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["c1", "c2", "c3"]
        );
        assert!(none[0].changed());
    }

    #[test]
    fn trimmed() {
        let c = columns(Some(&header(&[Some(" price ")])), 1);
        assert_eq!(c[0].name, "price");
        assert!(c[0].changed());
    }

    #[test]
    fn duplicates_made_unique() {
        assert_eq!(
            names(&[Some("a"), Some("a"), Some("a"), Some("a_2")]),
            ["a", "a_2", "a_3", "a_2_2"]
        );
        // Different case is a different quoted name.
        assert_eq!(names(&[Some("ID"), Some("id")]), ["ID", "id"]);
        // A generated name may collide with a header name.
        assert_eq!(names(&[Some("c2"), Some("")]), ["c2", "c2_2"]);
    }

    #[test]
    fn long_names_cut_at_a_character_boundary() {
        let long = "é".repeat(40); // 80 bytes
        let got = names(&[Some(&long), Some(&long)]);
        assert_eq!(got[0].len(), 62);
        assert_eq!(got[0], "é".repeat(31));
        assert!(got[1].ends_with("_2") && got[1].len() <= 63);
        assert_ne!(got[0], got[1]);
    }

    #[test]
    fn sql_quotes_where_needed() {
        assert_eq!(sql("dep_delay"), "dep_delay");
        assert_eq!(sql("_x1"), "_x1");
        assert_eq!(sql("Year"), "\"Year\"");
        assert_eq!(sql("year"), "year"); // unreserved
        assert_eq!(sql("order"), "\"order\"");
        assert_eq!(sql("time"), "\"time\"");
        assert_eq!(sql("1st"), "\"1st\"");
        assert_eq!(sql("full name"), "\"full name\"");
        assert_eq!(sql("a\"b"), "\"a\"\"b\"");
        assert_eq!(sql("été"), "\"été\"");
    }
}
