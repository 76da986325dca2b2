//! Character classes the reference takes from Rust's `std`. Its wheel was compiled by an older
//! Rust than ours, so classes whose Unicode data changed since are read from tables measured
//! from the reference (`pre_tokenizers/tables.rs`) instead of our std.

use crate::pre_tokenizers::tables;
use std::cmp::Ordering;

/// Whether `c` falls in one of the sorted, disjoint, inclusive code point ranges of a generated
/// class table.
#[inline]
pub fn in_ranges(table: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    table
        .binary_search_by(|&(a, b)| {
            if b < c {
                Ordering::Less
            } else if a > c {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        })
        .is_ok()
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicode_17_additions_are_unassigned_for_the_reference() {
        // U+11DE0..U+11DE9 (Tolong Siki digits) and U+A7CE/U+16EA0 (new case pairs) arrived in
        // Unicode 17; the reference's std (Unicode 16) sees unassigned code points.
        assert!(!is_numeric('\u{11DE0}'));
        assert_eq!(to_lowercase('\u{A7CE}').collect::<String>(), "\u{A7CE}");
        assert_eq!(to_lowercase('\u{16EA0}').collect::<String>(), "\u{16EA0}");
        // Long-standing data is unchanged.
        assert!(is_numeric('٣') && is_numeric('½') && is_numeric('Ⅻ'));
        assert_eq!(to_lowercase('İ').collect::<String>(), "i\u{307}");
        assert_eq!(to_lowercase('Σ').collect::<String>(), "σ");
    }
}
