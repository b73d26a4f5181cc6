//! The byte-level truth of PostgreSQL's COPY formats, without I/O.
//!
//! Callers own every buffer (in the manner of `csv-core`), so each piece
//! can be tested at every split point, fuzzed and benchmarked without files
//! or servers.

#![deny(missing_docs)]

pub mod binary;
pub mod convert;
pub mod fields;
pub mod scan;
