//! Text with alignment to the original input.
pub mod normalized;
pub mod pretokenized;
pub mod regex;
pub mod unicode;

pub use normalized::{
    matches_from_ranges, CharPredicate, NormalizedString, Pattern, SplitBehavior,
};
pub use pretokenized::{ByteToCharOffsets, PreTokenizedString, Split};
pub use regex::{Invert, SysRegex};
