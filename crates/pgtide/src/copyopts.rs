//! What a `COPY ... FROM STDIN` statement says: format and options, with
//! PostgreSQL's meanings.
//!
//! The options are passed through to the server unchanged, so that the
//! server parses each chunk exactly as it would parse the whole file.
//! The one exception is `HEADER`: pgtide consumes the header line once per
//! file on the client (a chunk must never lose its first row to it) and
//! checks `HEADER MATCH` itself against the column names.

use copyfmt::scan::Dialect;

use crate::error::{Error, Result};
use crate::ident::{quote, quote_literal};

/// Input format, with COPY's names: [`copyfmt::scan::Format`], the one
/// format enum of the workspace (its `Display` is COPY's own name, as in
/// `FORMAT csv`). The scanner, below the library, needs it, so it lives
/// there; the library and the CLI use it under this name.
pub use copyfmt::scan::Format as CopyFormat;

/// The header line's treatment, as COPY's `HEADER` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Header {
    /// No header line.
    #[default]
    None,
    /// The first line of each file is a header and is skipped.
    Skip,
    /// Skipped, but must name the loaded columns in order.
    Match,
}

/// COPY options as the user gave them (`None` = the server's default).
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// FORMAT.
    pub format: CopyFormat,
    /// HEADER, handled client-side.
    pub header: Header,
    /// DELIMITER (one byte).
    pub delimiter: Option<u8>,
    /// QUOTE (CSV only, one byte).
    pub quote: Option<u8>,
    /// ESCAPE (CSV only, one byte).
    pub escape: Option<u8>,
    /// NULL string.
    pub null: Option<String>,
    /// FORCE_NULL columns (CSV only).
    pub force_null: Vec<String>,
    /// FORCE_NOT_NULL columns (CSV only).
    pub force_not_null: Vec<String>,
    /// ENCODING of the input.
    pub encoding: Option<String>,
}

impl CopyOptions {
    /// Defaults for `format`.
    pub fn new(format: CopyFormat) -> Self {
        CopyOptions {
            format,
            header: Header::None,
            delimiter: None,
            quote: None,
            escape: None,
            null: None,
            force_null: Vec::new(),
            force_not_null: Vec::new(),
            encoding: None,
        }
    }

    /// These options with PostgreSQL 17's `FORCE_NULL *` / `FORCE_NOT_NULL
    /// *` spelled out as `columns` (every loaded column), so that every
    /// server version gets a column list. A column named `*` stays itself.
    pub fn with_every_column(&self, columns: &[String]) -> CopyOptions {
        let spell = |list: &[String]| every_column(list, columns).unwrap_or_else(|| list.to_vec());
        CopyOptions {
            force_null: spell(&self.force_null),
            force_not_null: spell(&self.force_not_null),
            ..self.clone()
        }
    }

    /// Rejects combinations that COPY would reject, before connecting.
    pub fn validate(&self) -> Result<()> {
        let csv_only = self.quote.is_some()
            || self.escape.is_some()
            || !self.force_null.is_empty()
            || !self.force_not_null.is_empty();
        if self.format != CopyFormat::Csv && csv_only {
            return Err(Error::config(
                "--quote, --escape, --force-null and --force-not-null need --format csv",
            ));
        }
        if self.format == CopyFormat::Binary
            && (self.delimiter.is_some() || self.null.is_some() || self.header != Header::None)
        {
            return Err(Error::config(
                "--delimiter, --null and --header do not apply to --format binary",
            ));
        }
        for b in [self.delimiter, self.quote, self.escape]
            .into_iter()
            .flatten()
        {
            if b == b'\n' || b == b'\r' || !b.is_ascii() {
                return Err(Error::config(
                    "delimiter, quote and escape must be single ASCII characters other than newline",
                ));
            }
        }
        self.check_separators()?;
        match &self.encoding {
            Some(e) => check_encoding(e),
            None => Ok(()),
        }
    }

    /// What the server's `ProcessCopyOptions` refuses of the delimiter,
    /// quote and NULL string: checked here so that every method refuses
    /// it before anything is sent (the methods that do not COPY would
    /// load the rows; COPY itself would fail every row).
    fn check_separators(&self) -> Result<()> {
        let delimiter = self.delimiter.unwrap_or(match self.format {
            CopyFormat::Csv => b',',
            _ => b'\t',
        });
        let quote = self.quote.unwrap_or(b'"');
        let bad = |why: &str| Err(Error::config(why.to_owned()));
        if self.format == CopyFormat::Text
            && (delimiter == b'\\'
                || b"\\.abcdefghijklmnopqrstuvwxyz0123456789".contains(&delimiter))
        {
            return bad("--delimiter cannot be a backslash, a period, a lower-case letter or a digit in text format");
        }
        if self.format == CopyFormat::Csv && delimiter == quote {
            return bad("--delimiter and --quote must be different");
        }
        let Some(null) = &self.null else {
            return Ok(());
        };
        if null.contains(['\n', '\r']) {
            return bad("--null cannot contain a newline or carriage return");
        }
        if null.as_bytes().contains(&delimiter) {
            return bad("--null must not contain the delimiter");
        }
        if self.format == CopyFormat::Csv && null.as_bytes().contains(&quote) {
            return bad("--null must not contain the CSV quote character");
        }
        Ok(())
    }

    /// The scanner dialect that finds row boundaries as the server would.
    /// `server_major` matters because PostgreSQL 18 stopped treating `\.`
    /// as an end-of-data marker in CSV, and in text rejects a `\.` in the
    /// middle of a row instead of ending the data there.
    pub fn dialect(&self, server_major: u32) -> Dialect {
        let mut d = match self.format {
            CopyFormat::Text => Dialect::text(),
            CopyFormat::Csv => Dialect::csv(),
            CopyFormat::Binary => return Dialect::binary(),
        };
        if let Some(b) = self.delimiter {
            d.delimiter = b;
        }
        if self.format == CopyFormat::Csv {
            d.quote = self.quote.unwrap_or(b'"');
            d.escape = self.escape.unwrap_or(d.quote);
            d.end_marker = server_major < 18;
        }
        d.mid_record_marker = server_major < 18;
        d.escape_whole_char = server_major >= 14;
        if let Some(e) = &self.encoding {
            d.lead_bytes = copyfmt::scan::LeadBytes::of_encoding(e);
        }
        d
    }

    /// `COPY <table> (<cols>) FROM STDIN WITH (...)`. Names are quoted by
    /// `ident`; option values are literals because COPY takes no bound
    /// parameters.
    pub fn copy_from_sql(&self, table: &str, columns: Option<&str>) -> String {
        self.copy_from_sql_with(table, columns, &[])
    }

    /// [`CopyOptions::copy_from_sql`] with `extra` options appended (such
    /// as `ON_ERROR ignore`).
    pub fn copy_from_sql_with(&self, table: &str, columns: Option<&str>, extra: &[&str]) -> String {
        let mut opts = self.option_list();
        let list = |cols: &[String]| cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ");
        if !self.force_null.is_empty() {
            opts.push(format!("FORCE_NULL ({})", list(&self.force_null)));
        }
        if !self.force_not_null.is_empty() {
            opts.push(format!("FORCE_NOT_NULL ({})", list(&self.force_not_null)));
        }
        if let Some(e) = &self.encoding {
            opts.push(format!("ENCODING {}", quote_literal(e)));
        }
        opts.extend(extra.iter().map(|e| e.to_string()));
        let cols = columns.map(|c| format!(" ({c})")).unwrap_or_default();
        format!("COPY {table}{cols} FROM STDIN WITH ({})", opts.join(", "))
    }

    /// `COPY (<query>) TO STDOUT WITH (...)` for an export: `HEADER true`
    /// when `header` is not [`Header::None`] (the server writes it), then
    /// `extra` (such as `FORCE_QUOTE *`). FORCE_NULL and FORCE_NOT_NULL
    /// are input options and are not written.
    pub fn copy_to_sql(&self, query: &str, extra: &[String]) -> String {
        let mut opts = self.option_list();
        if self.header != Header::None {
            opts.insert(1, "HEADER true".to_owned());
        }
        opts.extend(extra.iter().cloned());
        if let Some(e) = &self.encoding {
            opts.push(format!("ENCODING {}", quote_literal(e)));
        }
        // A query ending in a `--` comment would comment out the `)`.
        let end = if query.contains("--") { "\n" } else { "" };
        format!("COPY ({query}{end}) TO STDOUT WITH ({})", opts.join(", "))
    }

    /// FORMAT, DELIMITER, QUOTE, ESCAPE and NULL, as COPY spells them.
    fn option_list(&self) -> Vec<String> {
        let mut opts = vec![format!("FORMAT {}", self.format)];
        let byte = |b: u8| quote_literal(&(b as char).to_string());
        if let Some(b) = self.delimiter {
            opts.push(format!("DELIMITER {}", byte(b)));
        }
        if let Some(b) = self.quote {
            opts.push(format!("QUOTE {}", byte(b)));
        }
        if let Some(b) = self.escape {
            opts.push(format!("ESCAPE {}", byte(b)));
        }
        if let Some(n) = &self.null {
            opts.push(format!("NULL {}", quote_literal(n)));
        }
        opts
    }
}

/// Every name PostgreSQL's `pg_char_to_encoding` knows (the table in
/// src/common/encnames.c, the same in PostgreSQL 12 to 17), as it compares
/// them: ASCII letters and digits only, lower case. COPY's ENCODING takes
/// any of them.
const ENCODING_NAMES: &[&str] = &[
    "abc",
    "alt",
    "big5",
    "euccn",
    "eucjis2004",
    "eucjp",
    "euckr",
    "euctw",
    "gb18030",
    "gbk",
    "iso88591",
    "iso885910",
    "iso885913",
    "iso885914",
    "iso885915",
    "iso885916",
    "iso88592",
    "iso88593",
    "iso88594",
    "iso88595",
    "iso88596",
    "iso88597",
    "iso88598",
    "iso88599",
    "johab",
    "koi8",
    "koi8r",
    "koi8u",
    "latin1",
    "latin10",
    "latin2",
    "latin3",
    "latin4",
    "latin5",
    "latin6",
    "latin7",
    "latin8",
    "latin9",
    "mskanji",
    "muleinternal",
    "shiftjis",
    "shiftjis2004",
    "sjis",
    "sqlascii",
    "tcvn",
    "tcvn5712",
    "uhc",
    "unicode",
    "utf8",
    "vscii",
    "win",
    "win1250",
    "win1251",
    "win1252",
    "win1253",
    "win1254",
    "win1255",
    "win1256",
    "win1257",
    "win1258",
    "win866",
    "win874",
    "win932",
    "win936",
    "win949",
    "win950",
    "windows1250",
    "windows1251",
    "windows1252",
    "windows1253",
    "windows1254",
    "windows1255",
    "windows1256",
    "windows1257",
    "windows1258",
    "windows866",
    "windows874",
    "windows932",
    "windows936",
    "windows949",
    "windows950",
];

/// `columns` when `list` is `*` alone (FORCE_NULL's "every column") and
/// no column is named `*`; `None` when `list` names columns.
pub fn every_column(list: &[String], columns: &[String]) -> Option<Vec<String>> {
    let star = matches!(list, [only] if only == "*");
    (star && !columns.iter().any(|c| c == "*")).then(|| columns.to_vec())
}

/// An encoding the server does not know is an option error here: sent
/// along, it would fail the first COPY with class 22 (invalid parameter
/// value), which a load takes for a bad row.
fn check_encoding(name: &str) -> Result<()> {
    // pg_char_to_encoding: names of NAMEDATALEN (64) bytes or more are
    // unknown; others are compared without punctuation, in lower case.
    let cleaned = copyfmt::scan::encoding_key(name);
    if name.len() < 64 && ENCODING_NAMES.contains(&cleaned.as_str()) {
        return Ok(());
    }
    Err(Error::config(format!(
        "--encoding {name:?} is not an encoding PostgreSQL knows"
    ))
    .with_hint(
        "use a PostgreSQL encoding name such as UTF8, LATIN1, WIN1252, SJIS or EUC_JP \
             (see https://www.postgresql.org/docs/current/multibyte.html)",
    ))
}

/// Parses a one-character option such as `--delimiter`, accepting the
/// escapes people type in shells (`\t`).
pub fn option_byte(name: &str, value: &str) -> Result<u8> {
    let b = match value {
        "\\t" | "tab" => b'\t',
        v if v.len() == 1 => v.as_bytes()[0],
        _ => {
            return Err(Error::config(format!(
                "--{name} must be a single one-byte character, got {value:?}"
            ))
            .with_hint("for a tab, pass --delimiter '\\t'"))
        }
    };
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The NULL string and separators the server's COPY refuses are option
    /// errors for every method (outside testing: COPY rejected every row,
    /// the other methods loaded them).
    #[test]
    fn separators_the_server_refuses_are_option_errors() {
        let with = |format, delimiter: Option<u8>, quote: Option<u8>, null: Option<&str>| {
            let mut o = CopyOptions::new(format);
            o.delimiter = delimiter;
            o.quote = quote;
            o.null = null.map(str::to_owned);
            o.validate()
        };
        use CopyFormat::{Csv, Text};
        for (format, delimiter, quote, null) in [
            (Csv, None, None, Some(",")),
            (Csv, Some(b';'), None, Some("a;b")),
            (Csv, None, None, Some("a\nb")),
            (Text, None, None, Some("x\ty")),
            (Text, None, None, Some("\r")),
            (Csv, None, None, Some("\"\"")),
            (Csv, Some(b'|'), Some(b'|'), None),
            (Text, Some(b'\\'), None, None),
            (Text, Some(b'a'), None, None),
            (Text, Some(b'.'), None, None),
        ] {
            assert!(
                with(format, delimiter, quote, null).is_err(),
                "{format:?} {delimiter:?} {quote:?} {null:?}"
            );
        }
        for (format, delimiter, quote, null) in [
            (Csv, None, None, Some("NULL")),
            (Csv, Some(b';'), None, Some("a,b")),
            (Text, None, None, Some("\\N")),
            (Text, Some(b','), None, Some("x\ty")),
            (Text, Some(b'|'), None, None),
            (Csv, Some(b'|'), Some(b'\''), Some("")),
        ] {
            with(format, delimiter, quote, null).expect("accepted");
        }
    }

    #[test]
    fn encodings_are_checked_as_postgresql_names_them() {
        for ok in [
            "UTF8",
            "utf-8",
            "Latin1",
            "ISO-8859-1",
            "win_1252",
            "EUC_JIS_2004",
        ] {
            check_encoding(ok).expect(ok);
        }
        for bad in ["", "utf-9", "klingon", "ütf8", &"utf8".repeat(16)] {
            let e = check_encoding(bad).expect_err(bad);
            assert!(e.hint().is_some());
        }
        let mut o = CopyOptions::new(CopyFormat::Csv);
        o.encoding = Some("bogus".into());
        assert!(o.validate().is_err());
    }

    #[test]
    fn builds_copy_with_quoted_options() {
        let mut o = CopyOptions::new(CopyFormat::Csv);
        o.delimiter = Some(b';');
        o.null = Some("it's".into());
        o.force_null = vec!["A b".into()];
        let sql = o.copy_from_sql("\"public\".\"t\"", Some("\"A b\""));
        assert_eq!(
            sql,
            "COPY \"public\".\"t\" (\"A b\") FROM STDIN WITH (FORMAT csv, \
             DELIMITER E';', NULL E'it''s', FORCE_NULL (\"A b\"))"
        );
    }

    #[test]
    fn csv_only_options_need_csv() {
        let mut o = CopyOptions::new(CopyFormat::Text);
        o.quote = Some(b'\'');
        assert!(o.validate().is_err());
    }
}
