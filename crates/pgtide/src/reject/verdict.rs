//! What a server error says about the row it names: whether it is
//! certainly that row's, whether it clashes with another row, whether it
//! holds wherever the row goes (`isolate.rs` decides by these).

use crate::batch::BatchError;

/// Whether the row the server named is certainly the bad one. Encoding
/// errors (22021, 22P05) are raised while converting a block of raw input,
/// which can be before the row is parsed, so the line in the context may
/// be an earlier row (seen: a NUL byte reported on the line before); every
/// other error is raised while that very row is processed.
pub(super) fn located_exactly(e: &BatchError) -> bool {
    !matches!(e.error.code().map(|c| c.code()), Some("22021" | "22P05"))
}

/// A unique or exclusion violation: the row clashes with another.
pub(super) fn clashes(e: &BatchError) -> bool {
    matches!(e.error.code().map(|c| c.code()), Some("23505" | "23P01"))
}

/// Whether a row's error is its own whatever was loaded before it: a bad
/// value (class 22: input syntax, range, length, encoding, column count)
/// or a NULL in a NOT NULL column.
pub(crate) fn regardless_of_order(e: &BatchError) -> bool {
    e.error
        .code()
        .is_some_and(|c| c.code().starts_with("22") || c.code() == "23502")
}
