//! PostgreSQL's binary COPY format: the file header, one row at a time,
//! and the trailer.
//!
//! Why a writer of our own: `COPY ... FROM STDIN (FORMAT binary)` lets the
//! server skip text parsing, which is the expensive half of a load. The
//! layout (documented under "Binary Format" in PostgreSQL's COPY page, and
//! read by `CopyReadBinaryTupleData` in `copyfromparse.c`) is:
//!
//! ```text
//! header   "PGCOPY\n\xff\r\n\0"  int32 flags = 0  int32 extension length = 0
//! row      int16 field count, then per field: int32 length (-1 = NULL), bytes
//! trailer  int16 -1
//! ```
//!
//! All integers are big-endian. Values inside a field are each type's
//! *send* format, produced by [`crate::convert`].
//!
//! This module owns framing only: it never looks at a value, never does
//! I/O and never allocates beyond the caller's buffer. A row that cannot be
//! completed (a field's encoder said it was unsure) is cut back out of the
//! buffer by [`RowWriter::abandon`], or by dropping the writer, so the
//! caller can send that row by text COPY instead.
//!
//! ```
//! use pgtide_copyfmt::binary::{write_header, write_trailer, RowWriter};
//! use pgtide_copyfmt::convert::{Encoder, Session};
//!
//! let int4 = Encoder::for_type(23, -1, &Session::default()).unwrap();
//! let mut out = Vec::new();
//! write_header(&mut out);
//! let mut row = RowWriter::begin_row(&mut out, 2);
//! row.field(|buf| int4.encode(b"42", buf)).unwrap();
//! row.null();
//! row.finish().unwrap();
//! write_trailer(&mut out);
//! assert_eq!(out.len(), 19 + 2 + 8 + 4 + 2);
//! ```

use std::fmt;

/// The 11-byte signature that starts every binary COPY stream.
pub const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// Length of the whole header written by [`write_header`]: signature,
/// flags and header-extension length.
pub const HEADER_LEN: usize = 19;

/// Appends the binary COPY header: signature, flags (0: no OIDs) and an
/// empty header extension.
pub fn write_header(out: &mut Vec<u8>) {
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
}

/// The 2-byte trailer that ends binary COPY data: a field count of -1.
pub const TRAILER: &[u8; 2] = &[0xff, 0xff];

/// Appends the trailer: a field count of -1, which ends the COPY data.
pub fn write_trailer(out: &mut Vec<u8>) {
    out.extend_from_slice(TRAILER);
}

/// A field's encoded bytes did not fit the format's int32 length.
///
/// PostgreSQL cannot hold a field over 1 GB anyway; the encoders in
/// [`crate::convert`] refuse such values before they get here, so this is
/// a guard, not an expected path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldTooLarge;

impl fmt::Display for FieldTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("binary COPY field longer than 2^31-1 bytes")
    }
}

impl std::error::Error for FieldTooLarge {}

/// A row was finished with a different number of fields than announced.
///
/// The server would reject the whole COPY ("row field count is N,
/// expected M"), so [`RowWriter::finish`] removes the row and reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldCountMismatch {
    /// The count given to [`RowWriter::begin_row`].
    pub expected: u16,
    /// The number of fields (values and NULLs) actually written.
    pub written: u16,
}

impl fmt::Display for FieldCountMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "binary COPY row has {} fields, expected {}",
            self.written, self.expected
        )
    }
}

impl std::error::Error for FieldCountMismatch {}

/// Writes one row into a caller-owned buffer.
///
/// Created by [`RowWriter::begin_row`], which writes the field count. Each
/// [`field`](RowWriter::field) writes a length placeholder, lets an encoder
/// append the value, then patches the length. The row is only kept if
/// [`finish`](RowWriter::finish) is called with the right number of fields;
/// dropping the writer or calling [`abandon`](RowWriter::abandon) truncates
/// the buffer back to where the row began, as if it had never been started.
#[derive(Debug)]
pub struct RowWriter<'a> {
    out: &'a mut Vec<u8>,
    row_start: usize,
    expected: u16,
    written: u16,
    done: bool,
}

impl<'a> RowWriter<'a> {
    /// Starts a row of `ncols` fields at the end of `out`.
    ///
    /// `ncols` must match the column list of the COPY statement
    /// (PostgreSQL allows at most 1664 columns, far below `i16::MAX`).
    pub fn begin_row(out: &'a mut Vec<u8>, ncols: u16) -> RowWriter<'a> {
        let row_start = out.len();
        // A count above i16::MAX would read as negative, and -1 is the
        // trailer; clamp so such a row is rejected by the count check
        // instead of silently ending the stream.
        let count = i16::try_from(ncols).unwrap_or(i16::MAX);
        out.extend_from_slice(&count.to_be_bytes());
        RowWriter {
            out,
            row_start,
            expected: ncols,
            written: 0,
            done: false,
        }
    }

    /// Writes a NULL field (length -1, no bytes).
    pub fn null(&mut self) {
        self.out.extend_from_slice(&(-1i32).to_be_bytes());
        self.written = self.written.saturating_add(1);
    }

    /// Writes a field whose bytes `encode` appends to the buffer it is
    /// given.
    ///
    /// On error nothing of this field stays in the buffer and the field is
    /// not counted; the row stays open, and the caller usually abandons it.
    pub fn field<E, F>(&mut self, encode: F) -> Result<(), E>
    where
        F: FnOnce(&mut Vec<u8>) -> Result<(), E>,
        E: From<FieldTooLarge>,
    {
        let at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        if let Err(e) = encode(self.out) {
            self.out.truncate(at);
            return Err(e);
        }
        let len = self.out.len() - at - 4;
        let Ok(len) = i32::try_from(len) else {
            self.out.truncate(at);
            return Err(FieldTooLarge.into());
        };
        self.out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        self.written = self.written.saturating_add(1);
        Ok(())
    }

    /// Writes a field whose send-format bytes are already known.
    pub fn value(&mut self, bytes: &[u8]) -> Result<(), FieldTooLarge> {
        self.field(|buf| {
            buf.extend_from_slice(bytes);
            Ok(())
        })
    }

    /// The number of fields (values and NULLs) written so far.
    pub fn fields_written(&self) -> u16 {
        self.written
    }

    /// Keeps the row, if it has exactly the announced number of fields;
    /// otherwise removes it and says so.
    pub fn finish(mut self) -> Result<(), FieldCountMismatch> {
        if self.written != self.expected || self.expected > i16::MAX as u16 {
            // Drop truncates the row.
            return Err(FieldCountMismatch {
                expected: self.expected,
                written: self.written,
            });
        }
        self.done = true;
        Ok(())
    }

    /// Removes everything written for this row from the buffer.
    pub fn abandon(self) {
        // Drop does the work.
    }
}

impl Drop for RowWriter<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.out.truncate(self.row_start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_trailer_bytes() {
        let mut out = Vec::new();
        write_header(&mut out);
        assert_eq!(out.len(), HEADER_LEN);
        assert_eq!(&out[..11], b"PGCOPY\n\xff\r\n\0");
        assert_eq!(&out[11..], &[0; 8]);
        write_trailer(&mut out);
        assert_eq!(&out[HEADER_LEN..], &[0xff, 0xff]);
    }

    #[test]
    fn row_with_value_and_null() {
        let mut out = vec![9];
        let mut row = RowWriter::begin_row(&mut out, 3);
        row.value(&[0, 0, 0, 42]).unwrap();
        row.null();
        row.field(|b| {
            b.extend_from_slice(b"hi");
            Ok::<(), FieldTooLarge>(())
        })
        .unwrap();
        assert_eq!(row.fields_written(), 3);
        row.finish().unwrap();
        let want: &[u8] = &[
            9, 0, 3, 0, 0, 0, 4, 0, 0, 0, 42, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2, b'h', b'i',
        ];
        assert_eq!(out, want);
    }

    #[test]
    fn failed_field_leaves_no_bytes() {
        let mut out = Vec::new();
        let mut row = RowWriter::begin_row(&mut out, 1);
        let r = row.field(|b| {
            b.extend_from_slice(b"partial");
            Err(FieldTooLarge)
        });
        assert_eq!(r, Err(FieldTooLarge));
        assert_eq!(row.fields_written(), 0);
        row.value(b"x").unwrap();
        row.finish().unwrap();
        assert_eq!(out, [0, 1, 0, 0, 0, 1, b'x']);
    }

    #[test]
    fn abandon_and_drop_remove_the_row() {
        let mut out = b"keep".to_vec();
        let mut row = RowWriter::begin_row(&mut out, 2);
        row.value(b"abc").unwrap();
        row.abandon();
        assert_eq!(out, b"keep");
        {
            let mut row = RowWriter::begin_row(&mut out, 1);
            row.null();
        }
        assert_eq!(out, b"keep");
    }

    #[test]
    fn wrong_field_count_is_reported_and_removed() {
        let mut out = Vec::new();
        let mut row = RowWriter::begin_row(&mut out, 2);
        row.null();
        assert_eq!(
            row.finish(),
            Err(FieldCountMismatch {
                expected: 2,
                written: 1
            })
        );
        assert!(out.is_empty());
    }
}
