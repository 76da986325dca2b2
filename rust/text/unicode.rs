//! Character classes the reference takes from Rust's `std`. Its wheel was compiled by an older
//! Rust than ours, so classes whose Unicode data changed since are read from tables measured
//! from the reference (`pre_tokenizers/tables.rs`) instead of our std.

use crate::pre_tokenizers::tables;

/// `char::is_whitespace` as the reference sees it (White_Space has not changed in the
/// versions concerned: the measured table equals std's).
#[inline]
pub fn is_whitespace(c: char) -> bool {
    c.is_whitespace()
}

/// `char::is_numeric` as the reference sees it.
#[inline]
pub fn is_numeric(c: char) -> bool {
    tables::is_std_numeric(c)
}

/// `char::to_lowercase` as the reference sees it (one or two chars).
#[inline]
pub fn to_lowercase(c: char) -> impl Iterator<Item = char> {
    let (a, b) = tables::std_lowercase(c);
    std::iter::once(a).chain(b)
}
