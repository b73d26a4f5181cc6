//! Screening a failed chunk for rows that are provably bad, so that
//! isolation (`--rejects`) sends each of them alone and the rows between
//! them as whole batches, instead of finding them one failed COPY at a
//! time (each costing the work before it, rolled back).
//!
//! A record is a suspect when the client can tell the server will refuse
//! it: it does not split into fields, has another number of fields than
//! columns loaded, has NULL for a NOT NULL column, or has a value that the
//! column type's encoder finds invalid (`Uncertain::Invalid`; a value it
//! merely does not convert is not a suspect). Suspects are still sent (on
//! their own), so a wrong guess costs a round trip, never a row; a row the
//! screen cannot judge (a CHECK, a unique key) is found as before.
//!
//! Screening runs only for a chunk that already failed, so clean loads
//! with `--rejects` pay nothing for it.

use copyfmt::convert::{Encoder, Uncertain};
use copyfmt::fields::{split_record, Fields};
use copyfmt::scan::{self, Format};

use super::spec::LoaderSpec;
use crate::chunk::Chunk;

/// Suspects beyond this share of a chunk's records are not worth sending
/// one by one: the screen is then probably wrong about the data (a format
/// it misreads) and isolation goes as without it.
pub(super) const MAX_SHARE: usize = 20;

/// The 0-based records of `chunk` the server will refuse, as far as the
/// client can tell (empty when it cannot tell, or when too many are).
/// `encoders`: the column types' encoders for the loader's session, when
/// every column has one.
pub(super) fn suspects(
    spec: &LoaderSpec,
    encoders: Option<&[Encoder]>,
    chunk: &Chunk,
) -> Vec<usize> {
    if spec.dialect.format == Format::Binary {
        return Vec::new();
    }
    let setup = &spec.setup;
    let mut fields = Fields::new();
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    for (i, span) in scan::records_with(&spec.dialect, chunk.eol, &chunk.data).enumerate() {
        let rec = &chunk.data[span.start..span.end];
        let bad = split_record(&spec.dialect, &setup.nulls, rec, &mut fields).is_err()
            || fields.len() != setup.columns.len()
            || setup
                .columns
                .iter()
                .enumerate()
                .any(|(c, col)| match fields.get(c) {
                    None => col.not_null,
                    Some(v) => encoders.is_some_and(|e| {
                        scratch.clear();
                        e[c].encode(v, &mut scratch) == Err(Uncertain::Invalid)
                    }),
                });
        if bad {
            out.push(i);
            if out.len() * MAX_SHARE > chunk.records as usize {
                return Vec::new();
            }
        }
    }
    out
}
