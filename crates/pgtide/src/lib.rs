//! pgtide: move rows into, out of and between PostgreSQL servers.
//!
//! The library never prints; the `pgtide` binary (crate `pgtide-cli`)
//! renders what it returns. See `docs/ARCHITECTURE.md` for the map.

#![deny(missing_docs)]

pub mod batch;
pub mod catalog;
pub mod chunk;
pub mod cluster;
pub mod conn;
pub mod copyopts;
pub mod copyout;
pub mod error;
pub mod export;
pub mod failure;
pub mod ident;
pub mod infer;
pub mod load;
pub mod progress;
pub mod reject;
mod settle;
pub mod shard;
pub mod snapshot;
pub mod source;
pub mod transfer;
pub mod witness;

pub use error::{Error, ErrorKind, Result};
