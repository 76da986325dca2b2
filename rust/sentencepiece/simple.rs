//! The WORD and CHAR models, and the piece → id lookup both share with the processor.

use super::normalizer::{one_char_len, SPACE_SYMBOL};
use super::trie::ByteTrie;
use super::vocab::{Segmenter, SpPiece};
use crate::error::Result;
use ahash::AHashMap;
use std::sync::Arc;

/// sentencepiece's `PieceToId`: CONTROL, UNKNOWN and BYTE pieces are looked up first, then
/// NORMAL, USER_DEFINED and UNUSED ones; anything else is the unknown id.
#[derive(Debug, Clone, Default)]
pub struct PieceLookup {
    pub(crate) reserved: AHashMap<String, u32>,
    pub(crate) normal: AHashMap<String, u32>,
    pub(crate) unused: ahash::AHashSet<u32>,
    pub(crate) unk_id: u32,
}

impl PieceLookup {
    #[inline]
    pub fn get(&self, piece: &str) -> Option<u32> {
        self.reserved
            .get(piece)
            .or_else(|| self.normal.get(piece))
            .copied()
    }

    #[inline]
    pub fn piece_to_id(&self, piece: &str) -> u32 {
        self.get(piece).unwrap_or(self.unk_id)
    }

    /// What the WORD and CHAR models look up: NORMAL, USER_DEFINED and UNUSED pieces only,
    /// an UNUSED one counting as unknown.
    #[inline]
    pub fn segment_id(&self, piece: &str) -> u32 {
        match self.normal.get(piece) {
            Some(&id) if !self.unused.contains(&id) => id,
            _ => self.unk_id,
        }
    }
}

/// WORD: the normalized text is cut before every ▁ and each word looked up whole (the
/// reference calls its word splitter with the prefix convention whatever the model's
/// `treat_whitespace_as_suffix` says).
pub struct SpWord {
    pub(crate) lookup: Arc<PieceLookup>,
}

impl Segmenter for SpWord {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        let mut start = 0;
        for (i, _) in normalized.match_indices(SPACE_SYMBOL) {
            if i > start {
                let w = &normalized[start..i];
                out.push(SpPiece {
                    id: self.lookup.segment_id(w),
                    start,
                    end: i,
                });
                start = i;
            }
        }
        if start < normalized.len() {
            out.push(SpPiece {
                id: self.lookup.segment_id(&normalized[start..]),
                start,
                end: normalized.len(),
            });
        }
        Ok(())
    }
}

/// CHAR: one piece per character, except that the longest user-defined piece at a position
/// is taken whole.
pub struct SpChar {
    pub(crate) lookup: Arc<PieceLookup>,
    pub(crate) user_defined: Option<ByteTrie>,
}

impl Segmenter for SpChar {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        let bytes = normalized.as_bytes();
        let mut s = 0;
        while s < bytes.len() {
            let len = self
                .user_defined
                .as_ref()
                .and_then(|t| t.longest_prefix(&bytes[s..]))
                .map(|(l, _)| l)
                .unwrap_or_else(|| one_char_len(bytes[s]).min(bytes.len() - s));
            let w = normalized.get(s..s + len).unwrap_or_default();
            out.push(SpPiece {
                id: self.lookup.segment_id(w),
                start: s,
                end: s + len,
            });
            s += len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup() -> Arc<PieceLookup> {
        let mut l = PieceLookup {
            unk_id: 0,
            ..Default::default()
        };
        l.reserved.insert("<unk>".into(), 0);
        l.reserved.insert("<s>".into(), 1);
        for (i, p) in ["▁a", "b", "▁", "xy", "zz"].iter().enumerate() {
            l.normal.insert(p.to_string(), i as u32 + 2);
        }
        l.unused.insert(6);
        Arc::new(l)
    }

    #[test]
    fn word_cuts_before_each_space_symbol() {
        let m = SpWord { lookup: lookup() };
        let mut out = vec![];
        m.segment("b▁a▁▁c<s>zz", &mut out).unwrap();
        let got: Vec<_> = out.iter().map(|p| (p.id, p.start, p.end)).collect();
        // "b" | "▁a" | "▁" | "▁c<s>zz": unknown (a control or UNUSED string is never a word)
        assert_eq!(got, vec![(3, 0, 1), (2, 1, 5), (4, 5, 8), (0, 8, 17)]);
        out.clear();
        m.segment("<s>", &mut out).unwrap();
        assert_eq!(out[0].id, 0);
    }

    #[test]
    fn char_takes_user_defined_pieces_whole() {
        let m = SpChar {
            lookup: lookup(),
            user_defined: Some(ByteTrie::build(vec![(b"xy", 5)])),
        };
        let mut out = vec![];
        m.segment("bxyé", &mut out).unwrap();
        let got: Vec<_> = out.iter().map(|p| (p.id, p.start, p.end)).collect();
        assert_eq!(got, vec![(3, 0, 1), (5, 1, 3), (0, 3, 5)]);
    }
}
