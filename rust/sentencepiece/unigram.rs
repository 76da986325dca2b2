//! Unigram segmentation exactly as sentencepiece's optimized encoder runs it: one left-to-right
//! pass keeping, for every byte position, the best path ending there.
//!
//! The arithmetic follows the reference (sentencepiece 0.2.3) bit for bit, because exact ties
//! are common (`g`+`gg` against `gg`+`g`): every path score is float32, a candidate is the
//! float32 sum of the best score at its start and the piece's score (a user-defined piece
//! scores `0.1 * (len_bytes - 1)`), and strict `>` keeps the earliest start on ties. Scores are
//! re-centred when they pass ±1e5. (0.2.1 computed candidates in double and gave user-defined
//! pieces `len * max_score - 0.1`; the installed 0.2.3 oracle does neither.) UNUSED pieces are never matched; the trie holds NORMAL, USER_DEFINED and
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
}

impl SpUnigram {
    pub fn new(pieces: &[PieceEntry], unk_id: u32) -> Result<SpUnigram> {
        let mut min_score = f32::MAX;
        let mut entries = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            if !p.score.is_finite() {
                return Err(Error::invalid(format!(
                    "piece {i}: score is NaN or Inf (sentencepiece refuses the model)"
                )));
            }
            if p.kind == PieceType::Normal && p.score < min_score {
                min_score = p.score;
            }
            // A lone NUL UNUSED piece is a placeholder the reference skips.
            if matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            ) && !(p.kind == PieceType::Unused && p.piece == "\0")
            {
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

/// Path scores are re-centred on the current one when it leaves ±1e5, as the reference
/// does, which changes float32 rounding on long inputs.
const SCORE_RESET_THRESHOLD: f32 = 100_000.0;

/// Marks an unknown node in a model without an UNKNOWN piece (allowed with byte fallback).
pub const NO_UNK: u32 = u32::MAX;

impl Segmenter for SpUnigram {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        let bytes = normalized.as_bytes();
        let n = bytes.len();
        if n == 0 {
            return Ok(());
        }
        LATTICE.with(|cell| {
            let mut best = cell.take();
            let r = self.segment_into(bytes, &mut best, out);
            cell.set(best);
            r
        })
    }
}

thread_local! {
    /// The per-position best paths, reused across calls on a thread.
    static LATTICE: std::cell::Cell<Vec<Best>> = const { std::cell::Cell::new(Vec::new()) };
}

impl SpUnigram {
    fn segment_into(
        &self,
        bytes: &[u8],
        best: &mut Vec<Best>,
        out: &mut Vec<SpPiece>,
    ) -> Result<()> {
        let n = bytes.len();
        let unk_score = self.min_score - UNK_PENALTY;
        best.clear();
        best.resize(
            n + 1,
            Best {
                id: self.unk_id,
                score: 0.0,
                start: usize::MAX,
            },
        );
        let mut max_frontier = 0usize;
        let mut s = 0usize;
        while s < n {
            let mut till = best[s].score;
            if !(-SCORE_RESET_THRESHOLD..=SCORE_RESET_THRESHOLD).contains(&till) {
                let offset = till;
                let hi = max_frontier.max(s);
                for (k, b) in best[s..=hi].iter_mut().enumerate() {
                    if k == 0 || b.start != usize::MAX {
                        b.score -= offset;
                    }
                }
                till = 0.0;
            }
            let mblen = one_char_len(bytes[s]).min(n - s);
            let mut has_single = false;
            self.trie.for_each_prefix(&bytes[s..], |len, id| {
                let kind = self.kinds[id as usize];
                if kind == PieceType::Unused {
                    return;
                }
                max_frontier = max_frontier.max(s + len);
                // A user-defined piece scores 0.1 per byte beyond the first (computed in
                // double, stored as float), whatever its own score.
                let score = if kind == PieceType::UserDefined {
                    (0.1f64 * (len as f64 - 1.0)) as f32
                } else {
                    self.scores[id as usize]
                };
                let cand = score + till;
                let t = &mut best[s + len];
                if t.start == usize::MAX || cand > t.score {
                    t.score = cand;
                    t.start = s;
                    t.id = id;
                }
                if len == mblen {
                    has_single = true;
                }
            });
            if !has_single {
                max_frontier = max_frontier.max(s + mblen);
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
        // A user-defined piece scores 0.1 per byte after the first: `bc` scores 0.1, so with
        // a, b, c at 0, `ab` at 0.2 gives `ab c` (0.2) over `a bc` (0.1), and `ab` at 0.05
        // gives `a bc`.
        let with_ab = |s: f32| {
            model(&[
                ("a", 0.0, Normal),
                ("b", 0.0, Normal),
                ("c", 0.0, Normal),
                ("bc", -50.0, UserDefined),
                ("ab", s, Normal),
            ])
        };
        assert_eq!(seg(&with_ab(0.2), "abc"), vec![(5, 0, 2), (3, 2, 3)]);
        assert_eq!(seg(&with_ab(0.05), "abc"), vec![(1, 0, 1), (4, 1, 3)]);
        // An UNUSED piece is never matched, even as the only single-character piece.
        let m = model(&[("a", -1.0, Unused), ("b", -1.0, Normal)]);
        assert_eq!(seg(&m, "ab"), vec![(0, 0, 1), (2, 1, 2)]);
    }

    #[test]
    fn scores_are_recentred_past_1e5() {
        // "aab" with a = -60000, ab = -60000, b = +0.003. After `a a` the path score is
        // -120000, past -1e5, so it is re-centred to 0 (and `a ab`'s -120000 to 0 as well):
        // `b` then adds 0.003 > 0 and `a a b` wins. Without re-centring -120000 + 0.003
        // rounds back to -120000 in float32 (spacing 0.0078) and the tie would keep `a ab`.
        let m = model(&[
            ("a", -60000.0, Normal),
            ("b", 0.003, Normal),
            ("ab", -60000.0, Normal),
        ]);
        assert_eq!(seg(&m, "aab"), vec![(1, 0, 1), (1, 1, 2), (2, 2, 3)]);
    }

    #[test]
    fn float32_storage_decides_ties() {
        // Exactly, a+b+c (-50000.001) beats a+bc (-50000.0015). In float32 (spacing 0.0039
        // near 5e4) a+bc is stored as -50000 when it reaches the end first, a+b is stored as
        // -50000 too, and a+b+c = -50000 does not beat it: the earlier start keeps `a bc`.
        let m = model(&[
            ("a", -50000.0, Normal),
            ("b", -0.0005, Normal),
            ("c", -0.0005, Normal),
            ("bc", -0.0015, Normal),
        ]);
        assert_eq!(seg(&m, "abc"), vec![(1, 0, 1), (4, 1, 3)]);
    }
}
