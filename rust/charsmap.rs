//! The SentencePiece precompiled charsmap: a darts-clone double-array trie over source byte
//! strings, followed by a blob of NUL-terminated replacement strings. Shared by the
//! `Precompiled` normalizer of tokenizer.json and by the sentencepiece normalizer.
//!
//! Layout: `u32 LE trie_size_in_bytes`, then `trie_size/4` little-endian `u32` units, then the
//! replacement blob. A unit packs `has_leaf` (bit 8), `label` (low byte, or bit 31 set for a
//! non-label), `offset` (bits 10.. shifted by 8 when bit 9 is set) and, for leaf units, `value`
//! (the low 31 bits: a byte index into the blob).

use crate::error::{Error, Result};

#[derive(Debug, Clone, Default)]
pub struct CharsMap {
    units: Vec<u32>,
    blob: Vec<u8>,
}

#[inline]
fn has_leaf(u: u32) -> bool {
    (u >> 8) & 1 == 1
}
#[inline]
fn value(u: u32) -> u32 {
    u & 0x7fff_ffff
}
#[inline]
fn label(u: u32) -> u32 {
    u & 0x8000_00ff
}
#[inline]
fn offset(u: u32) -> usize {
    ((u >> 10) << ((u & (1 << 9)) >> 6)) as usize
}

impl CharsMap {
    /// Parse the `precompiled_charsmap` bytes. An empty input is an empty map (no rules).
    pub fn parse(bytes: &[u8]) -> Result<CharsMap> {
        if bytes.is_empty() {
            return Ok(CharsMap::default());
        }
        let head: [u8; 4] = bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                Error::invalid("precompiled_charsmap: shorter than its 4-byte header")
            })?;
        let trie_size = u32::from_le_bytes(head) as usize;
        if trie_size % 4 != 0 || trie_size > bytes.len() - 4 {
            return Err(Error::invalid(format!(
                "precompiled_charsmap: trie size {trie_size} does not fit the {} bytes given",
                bytes.len()
            )));
        }
        let units = bytes[4..4 + trie_size]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(CharsMap {
            units,
            blob: bytes[4 + trie_size..].to_vec(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Call `f(match_len, value)` for every prefix of `key` that has a rule, shortest first.
    /// The search stops at a NUL byte, as the reference does.
    pub fn common_prefix_search(&self, key: &[u8], mut f: impl FnMut(usize, u32)) {
        let Some(&root) = self.units.first() else {
            return;
        };
        let mut pos = offset(root);
        for (i, &c) in key.iter().enumerate() {
            if c == 0 {
                break;
            }
            pos ^= c as usize;
            let Some(&u) = self.units.get(pos) else {
                return;
            };
            if label(u) != c as u32 {
                return;
            }
            pos ^= offset(u);
            if has_leaf(u) {
                match self.units.get(pos) {
                    Some(&leaf) => f(i + 1, value(leaf)),
                    None => return,
                }
            }
        }
    }

    /// Whether some rule's key starts with `prefix` (the walk reaches a node for it). A NUL
    /// byte ends every search, as in `common_prefix_search`, so no key continues past one.
    pub fn has_prefix(&self, prefix: &[u8]) -> bool {
        let Some(&root) = self.units.first() else {
            return false;
        };
        let mut pos = offset(root);
        for &c in prefix {
            if c == 0 {
                return false;
            }
            pos ^= c as usize;
            match self.units.get(pos) {
                Some(&u) if label(u) == c as u32 => pos ^= offset(u),
                _ => return false,
            }
        }
        true
    }

    /// Whether some rule's key may start with byte `b` (the root has an edge for it).
    pub fn may_start_with(&self, b: u8) -> bool {
        let Some(&root) = self.units.first() else {
            return false;
        };
        b != 0
            && self
                .units
                .get(offset(root) ^ b as usize)
                .is_some_and(|&u| label(u) == b as u32)
    }

    /// The longest prefix of `key` with a rule: `(bytes matched, replacement)`.
    pub fn longest_match(&self, key: &[u8]) -> Option<(usize, &str)> {
        let mut best = None;
        self.common_prefix_search(key, |len, v| best = Some((len, v)));
        let (len, v) = best?;
        Some((len, self.replacement(v)?))
    }

    /// The shortest prefix of `key` with a rule: `(bytes matched, replacement)`.
    pub fn shortest_match(&self, key: &[u8]) -> Option<(usize, &str)> {
        let mut best = None;
        self.common_prefix_search(key, |len, v| {
            if best.is_none() {
                best = Some((len, v))
            }
        });
        let (len, v) = best?;
        Some((len, self.replacement(v)?))
    }

    /// The NUL-terminated replacement string at byte `value` of the blob (`None` when it is
    /// out of range or not UTF-8).
    pub fn replacement(&self, value: u32) -> Option<&str> {
        let start = value as usize;
        let rest = self.blob.get(start..)?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_truncated_header_and_oversized_trie() {
        assert!(CharsMap::parse(&[1, 0]).is_err());
        assert!(CharsMap::parse(&[8, 0, 0, 0, 1, 2]).is_err());
        assert!(CharsMap::parse(&[]).unwrap().is_empty());
    }

    #[test]
    fn replacement_stops_at_nul() {
        let m = CharsMap {
            units: vec![],
            blob: b"ab\0cd\0".to_vec(),
        };
        assert_eq!(m.replacement(0), Some("ab"));
        assert_eq!(m.replacement(3), Some("cd"));
        assert_eq!(m.replacement(99), None);
    }
}
