//! pgtide: move rows into, out of and between PostgreSQL servers.
//!
//! The library never prints; the `pgtide` binary (crate `pgtide-cli`)
//! renders what it returns. See `docs/ARCHITECTURE.md` for the map.

#![deny(missing_docs)]

pub mod error;

pub use error::{Error, ErrorKind, Result};
