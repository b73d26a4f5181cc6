//! Checks of what the server and the source say against what pgtide
//! counted, so that a miscount can never pass as a quiet success.
//!
//! - [`check_count`]: every batch, the server's own row count (`COPY n`,
//!   the sum of `INSERT 0 n`) against the records pgtide sent. The one
//!   legitimate shortfall besides `ON_ERROR ignore` is a table that drops
//!   rows on purpose (a BEFORE row trigger returning NULL): those rows are
//!   "skipped by the table", counted and reported. Anything else is a bug.
//! - [`check_rows`]: at the end, rows read = loaded + rejected + skipped
//!   by the table.
//! - [`check_bytes`]: every input read to its end, the header's bytes plus
//!   the chunks' bytes (plus what follows an end-of-data marker) against
//!   the decompressed bytes the source produced: the chunker lost or
//!   duplicated nothing.
//!
//! A failed check is an [`ErrorKind::Bug`](crate::error::ErrorKind::Bug)
//! error (exit 2, "this is a bug").

use crate::error::{Error, Result};

/// Checks one batch's row count before its commit. `sent` records were
/// sent, the server says it inserted `server` rows, and `ON_ERROR ignore`
/// set aside `on_error` of them (its notices named each one). Returns how
/// many rows the table dropped on purpose.
///
/// The server never counts a row it did not insert, and it counts every
/// row it did; a BEFORE (or INSTEAD OF) row trigger that returns NULL is
/// the only way a sent row that raised no error is not inserted. So fewer
/// rows are "skipped by the table" exactly when `table_may_skip` (the
/// target has such a trigger); fewer rows without one, or more rows than
/// were sent, mean pgtide cut or counted records wrongly.
pub fn check_count(sent: u64, server: u64, on_error: u64, table_may_skip: bool) -> Result<u64> {
    let expected = sent.checked_sub(on_error);
    match expected {
        Some(e) if server == e => Ok(0),
        Some(e) if server < e && table_may_skip => Ok(e - server),
        _ => {
            let why = if expected.is_some_and(|e| server < e) {
                "fewer rows than were sent, and the table has no BEFORE INSERT row \
                 trigger that could drop rows"
            } else {
                "more rows than were sent"
            };
            Err(Error::bug(format!(
                "the server inserted {server} rows of a batch of {sent} records \
                 ({on_error} set aside by ON_ERROR): {why}"
            )))
        }
    }
}

/// Checks the ledger of a load that finished: every row read was loaded,
/// rejected or skipped by the table, none twice.
pub fn check_rows(read: u64, loaded: u64, rejected: u64, skipped_by_table: u64) -> Result<()> {
    if read == loaded + rejected + skipped_by_table {
        return Ok(());
    }
    Err(Error::bug(format!(
        "rows read ({read}) != rows loaded ({loaded}) + rows rejected ({rejected}) \
         + rows skipped by the table ({skipped_by_table})"
    )))
}

/// Checks an input read to its end: `header` bytes consumed as the
/// header, `chunks` bytes handed out in chunks and `after_end` bytes read
/// past an end-of-data marker (the marker included, never loaded) must be
/// the `read` bytes the decompressed source produced.
pub fn check_bytes(input: &str, header: u64, chunks: u64, after_end: u64, read: u64) -> Result<()> {
    if header + chunks + after_end == read {
        return Ok(());
    }
    Err(Error::bug(format!(
        "{input}: {read} bytes read, but the header ({header} bytes), the chunks \
         ({chunks} bytes) and what follows the end marker ({after_end} bytes) add up \
         to {}",
        header + chunks + after_end
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn an_exact_count_is_fine_with_or_without_triggers() {
        assert_eq!(check_count(10, 10, 0, false).unwrap(), 0);
        assert_eq!(check_count(10, 10, 0, true).unwrap(), 0);
        assert_eq!(check_count(0, 0, 0, false).unwrap(), 0);
        // ON_ERROR ignore skipped 3, its notices named them.
        assert_eq!(check_count(10, 7, 3, false).unwrap(), 0);
    }

    #[test]
    fn fewer_rows_are_skipped_by_the_table_only_when_it_has_a_trigger() {
        assert_eq!(check_count(10, 6, 0, true).unwrap(), 4);
        assert_eq!(check_count(10, 0, 0, true).unwrap(), 10);
        // Trigger skips on top of ON_ERROR skips.
        assert_eq!(check_count(10, 5, 3, true).unwrap(), 2);
        let e = check_count(10, 6, 0, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Bug);
        assert!(
            e.message().contains("inserted 6 rows of a batch of 10"),
            "{e}"
        );
        assert!(e.message().contains("no BEFORE INSERT row trigger"), "{e}");
        assert!(e.hint().unwrap().contains("this is a bug"));
    }

    #[test]
    fn more_rows_than_sent_is_always_a_bug() {
        for may_skip in [false, true] {
            let e = check_count(10, 11, 0, may_skip).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Bug);
            assert!(e.message().contains("more rows than were sent"), "{e}");
            // Counted against what ON_ERROR left: 8 expected, 9 inserted.
            let e = check_count(10, 9, 2, may_skip).unwrap_err();
            assert!(e.message().contains("more rows than were sent"), "{e}");
        }
        // ON_ERROR cannot set aside more records than were sent.
        assert!(check_count(2, 0, 3, true).is_err());
    }

    #[test]
    fn rows_read_are_loaded_rejected_or_skipped_by_the_table() {
        check_rows(10, 7, 2, 1).unwrap();
        check_rows(0, 0, 0, 0).unwrap();
        for (loaded, rejected, skipped) in [(7, 2, 0), (7, 2, 2), (10, 1, 0)] {
            let e = check_rows(10, loaded, rejected, skipped).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Bug);
            assert!(e.message().starts_with("rows read (10) != "), "{e}");
        }
    }

    #[test]
    fn bytes_must_add_up() {
        check_bytes("in", 6, 100, 0, 106).unwrap();
        check_bytes("in", 0, 100, 3, 103).unwrap();
        for read in [105, 107] {
            let e = check_bytes("in.csv", 6, 100, 0, read).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Bug);
            assert!(e.message().starts_with("in.csv: "), "{e}");
            assert!(e.message().contains("add up to 106"), "{e}");
        }
    }
}
