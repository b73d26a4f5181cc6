//! What the methods other than `copy` need about the target table and the
//! COPY options: the loaded columns with their types, how NULL is spelled
//! (so fields are read exactly as COPY reads them), `--sql` and
//! `--batch-rows`.

use copyfmt::fields::NullSpec;
use copyfmt::scan::Dialect;

use crate::catalog::{self, Column};
use crate::copyopts::{CopyFormat, CopyOptions};

/// What the methods other than `copy` need to know about the target,
/// resolved once per load from the catalog and the COPY options.
#[derive(Debug, Clone)]
pub struct MethodSetup {
    /// The table, quoted for SQL.
    pub table: String,
    /// The loaded columns, in file order.
    pub columns: Vec<Column>,
    /// How NULL is spelled (COPY's NULL, FORCE_NULL, FORCE_NOT_NULL).
    pub nulls: NullSpec,
    /// The input format.
    pub format: CopyFormat,
    /// COPY ENCODING, when given.
    pub encoding: Option<String>,
    /// `--sql`: the statement run per row, columns bound as `$1..$n`.
    pub sql: Option<String>,
    /// `--batch-rows` for `values`.
    pub batch_rows: Option<usize>,
}

impl Default for MethodSetup {
    fn default() -> Self {
        MethodSetup {
            table: String::new(),
            columns: Vec::new(),
            nulls: NullSpec::text(),
            format: CopyFormat::Text,
            encoding: None,
            sql: None,
            batch_rows: None,
        }
    }
}

impl MethodSetup {
    /// The setup for loading `columns` (file order) of `table` (quoted)
    /// with `copy`'s options read by `dialect`.
    pub fn new(table: String, columns: &[&Column], copy: &CopyOptions, dialect: &Dialect) -> Self {
        let mut nulls = NullSpec::for_dialect(dialect);
        if let Some(null) = &copy.null {
            nulls.null = null.as_bytes().to_vec();
        }
        nulls.force_null = columns
            .iter()
            .map(|c| copy.force_null.contains(&c.name))
            .collect();
        nulls.force_not_null = columns
            .iter()
            .map(|c| copy.force_not_null.contains(&c.name))
            .collect();
        MethodSetup {
            table,
            columns: columns.iter().map(|c| (*c).clone()).collect(),
            nulls,
            format: copy.format,
            encoding: copy.encoding.clone(),
            sql: None,
            batch_rows: None,
        }
    }

    /// `"a", "b"` for statements.
    pub fn column_list(&self) -> String {
        catalog::column_list(&self.columns.iter().collect::<Vec<_>>())
    }

    /// The input is in UTF-8 (no ENCODING option, or a UTF-8 one).
    pub(super) fn utf8_input(&self) -> bool {
        self.encoding.as_deref().is_none_or(is_utf8_name)
    }
}

/// `UTF8`, `utf-8`, `Unicode`: PostgreSQL's names for UTF-8.
pub(super) fn is_utf8_name(name: &str) -> bool {
    let n: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    n == "utf8" || n == "unicode"
}
