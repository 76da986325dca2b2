//! Text with alignment to the original input.
pub mod normalized;
pub mod pretokenized;

pub use normalized::{
    matches_from_ranges, CharPredicate, NormalizedString, Pattern, SplitBehavior,
};
pub use pretokenized::{ByteToCharOffsets, PreTokenizedString, Split};
