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

/// `s` (1..=`8 * N` bytes) as `N` integers for a cache key, read with overlapping loads
/// instead of a variable-length copy (which compiles to a `memcpy` call). With the length,
/// which a cache entry also compares, they determine the bytes: from 8 bytes on, the loads
/// start at evenly spread offsets `0 ..= len - 8`, at most 8 apart, so they leave no gap, and
/// overlapping only repeats bytes. `None` for an empty or longer `s`.
#[inline]
pub(crate) fn overlap_key<const N: usize>(s: &[u8]) -> Option<[u64; N]> {
    let n = s.len();
    if n == 0 || n > 8 * N {
        return None;
    }
    let u64_at = |i: usize| {
        s.get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let u32_at = |i: usize| {
        s.get(i..i + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    };
    let byte = |i: usize| s.get(i).copied().map_or(0, u64::from);
    let mut k = [0u64; N];
    match n {
        1..=3 => k[0] = byte(0) | byte(n / 2) << 8 | byte(n - 1) << 16,
        4..=7 => k[0] = u64::from(u32_at(0)) | u64::from(u32_at(n - 4)) << 32,
        _ => {
            let gaps = N.saturating_sub(1).max(1);
            for (i, w) in k.iter_mut().enumerate() {
                *w = u64_at(i * (n - 8) / gaps);
            }
        }
    }
    Some(k)
}
