//! Unigram segmentation exactly as sentencepiece's optimized encoder runs it: one left-to-right
//! pass keeping, for every byte position, the best path ending there.
//!
//! The arithmetic follows the reference bit for bit, because ties are common (equal scores,
//! user-defined pieces): a candidate is computed in double precision (piece score widened, or
//! the user-defined bonus `len_bytes * max_score - 0.1`), compared against the stored best, and
//! stored as float32. The unknown node uses float32 arithmetic. Strict `>` keeps the earliest
//! start on ties. UNUSED pieces are never matched; the trie holds NORMAL, USER_DEFINED and
//! UNUSED pieces, as the reference's does.

use super::normalizer::one_char_len;
use super::trie::ByteTrie;
use super::vocab::{PieceEntry, PieceType, Segmenter, SpPiece};
use crate::error::{Error, Result};

const UNK_PENALTY: f32 = 10.0;

#[derive(Debug, Clone)]
pub struct SpUnigram {
    trie: ByteTrie,
    /// Per id: score and kind flags.
    scores: Vec<f32>,
    kinds: Vec<PieceType>,
    unk_id: u32,
    min_score: f32,
    max_score: f32,
}

impl SpUnigram {
    pub fn new(pieces: &[PieceEntry], unk_id: u32) -> Result<SpUnigram> {
        let mut min_score = f32::MAX;
        // The reference starts from FLT_MIN (the smallest positive float), so with only
        // negative scores the user-defined bonus is about -0.1.
        let mut max_score = f32::MIN_POSITIVE;
        let mut entries = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            if p.kind == PieceType::Normal {
                // std::min / std::max semantics: a NaN score never replaces the bound.
                if p.score < min_score {
                    min_score = p.score;
                }
                if max_score < p.score {
                    max_score = p.score;
                }
            }
            if matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            ) {
                entries.push((p.piece.as_bytes(), i as u32));
            }
        }
        if entries.is_empty() {
            return Err(Error::invalid(
                "sentencepiece Unigram model: no pieces are loaded",
            ));
        }
        Ok(SpUnigram {
            trie: ByteTrie::build(entries),
            scores: pieces.iter().map(|p| p.score).collect(),
            kinds: pieces.iter().map(|p| p.kind).collect(),
            unk_id,
            min_score,
            max_score,
        })
    }
}

#[derive(Clone, Copy)]
struct Best {
    id: u32,
    score: f32,
    /// `usize::MAX` until a path reaches this position.
    start: usize,
}

impl Segmenter for SpUnigram {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        let bytes = normalized.as_bytes();
        let n = bytes.len();
        if n == 0 {
            return Ok(());
        }
        let unk_score = self.min_score - UNK_PENALTY;
        let mut best = vec![
            Best {
                id: self.unk_id,
                score: 0.0,
                start: usize::MAX,
            };
            n + 1
        ];
        let mut s = 0usize;
        while s < n {
            let till = best[s].score;
            let mblen = one_char_len(bytes[s]).min(n - s);
            let mut has_single = false;
            self.trie.for_each_prefix(&bytes[s..], |len, id| {
                let kind = self.kinds[id as usize];
                if kind == PieceType::Unused {
                    return;
                }
                let score: f64 = if kind == PieceType::UserDefined {
                    f64::from(len as f32 * self.max_score) - 0.1
                } else {
                    f64::from(self.scores[id as usize])
                };
                let cand = score + f64::from(till);
                let t = &mut best[s + len];
                if t.start == usize::MAX || cand > f64::from(t.score) {
                    t.score = cand as f32;
                    t.start = s;
                    t.id = id;
                }
                if len == mblen {
                    has_single = true;
                }
            });
            if !has_single {
                let cand = unk_score + till;
                let t = &mut best[s + mblen];
                if t.start == usize::MAX || cand > t.score {
                    t.score = cand;
                    t.start = s;
                    t.id = self.unk_id;
                }
            }
            s += mblen;
        }
        let first = out.len();
        let mut end = n;
        while end > 0 {
            let b = best[end];
            if b.start >= end {
                return Err(Error::invalid(
                    "sentencepiece Unigram: unreachable position in the lattice",
                ));
            }
            out.push(SpPiece {
                id: b.id,
                start: b.start,
                end,
            });
            end = b.start;
        }
        out[first..].reverse();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(v: &[(&str, f32, PieceType)]) -> SpUnigram {
        let mut pieces = vec![PieceEntry {
            piece: "<unk>".into(),
            score: 0.0,
            kind: PieceType::Unknown,
        }];
        pieces.extend(v.iter().map(|&(p, s, k)| PieceEntry {
            piece: p.into(),
            score: s,
            kind: k,
        }));
        SpUnigram::new(&pieces, 0).unwrap()
    }

    fn seg(m: &SpUnigram, s: &str) -> Vec<(u32, usize, usize)> {
        let mut out = vec![];
        m.segment(s, &mut out).unwrap();
        out.iter().map(|p| (p.id, p.start, p.end)).collect()
    }

    use PieceType::*;

    #[test]
    fn best_path_and_earliest_start_on_ties() {
        // a b c d at -1, ab bc cd at -2: `ab cd` (-4) ties `a bc d` (-4); at the end position
        // the path whose last piece starts earliest wins.
        let m = model(&[
            ("a", -1.0, Normal),
            ("b", -1.0, Normal),
            ("c", -1.0, Normal),
            ("d", -1.0, Normal),
            ("ab", -2.0, Normal),
            ("bc", -2.0, Normal),
            ("cd", -2.0, Normal),
        ]);
        assert_eq!(seg(&m, "abcd"), vec![(5, 0, 2), (7, 2, 4)]);
    }

    #[test]
    fn unknown_characters_score_min_normal_minus_ten() {
        // The minimum over NORMAL pieces is xa's -20 (the unk piece's 0.0 does not count), so
        // an unknown `x` scores -30 and `x a` totals -30 + score(a) against xa's -20.
        let with_a = |s: f32| model(&[("a", s, Normal), ("xa", -20.0, Normal)]);
        assert_eq!(seg(&with_a(9.5), "xa"), vec![(2, 0, 2)]);
        assert_eq!(seg(&with_a(10.5), "xa"), vec![(0, 0, 1), (1, 1, 2)]);
        // A tie keeps the path whose last piece starts first: `xa`.
        assert_eq!(seg(&with_a(10.0), "xa"), vec![(2, 0, 2)]);
        // A multi-byte unknown character is one node.
        assert_eq!(seg(&with_a(10.0), "éa"), vec![(0, 0, 2), (1, 2, 3)]);
    }

    #[test]
    fn user_defined_and_unused() {
        // User-defined scores len * max_score - 0.1 = 3 * 1.0 - 0.1 beats ab (2.5) + c (0).
        let m = model(&[
            ("a", 0.0, Normal),
            ("b", 0.0, Normal),
            ("c", 0.0, Normal),
            ("ab", 1.0, Normal),
            ("abc", -50.0, UserDefined),
        ]);
        assert_eq!(seg(&m, "abc"), vec![(5, 0, 3)]);
        // An UNUSED piece is never matched, even as the only single-character piece.
        let m = model(&[("a", -1.0, Unused), ("b", -1.0, Normal)]);
        assert_eq!(seg(&m, "ab"), vec![(0, 0, 1), (2, 1, 2)]);
    }

    #[test]
    fn float32_storage_decides_ties() {
        // Exactly, a+b+c (-1e8 - 0.75) beats a+bc (-1e8 - 1). But the path to each position
        // is stored as f32 (spacing 8 near 1e8): a+bc is stored as -1e8 when it arrives first
        // at the end; a+b is stored as -1e8 too, so a+b+c = -1e8 - 0.25 does not beat it.
        let m = model(&[
            ("a", -1e8, Normal),
            ("b", -0.5, Normal),
            ("c", -0.25, Normal),
            ("bc", -1.0, Normal),
        ]);
        assert_eq!(seg(&m, "abc"), vec![(1, 0, 1), (4, 1, 3)]);
    }
}
