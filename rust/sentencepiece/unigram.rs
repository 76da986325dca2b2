//! Unigram segmentation exactly as sentencepiece's optimized encoder runs it: one left-to-right
//! pass keeping, for every byte position, the best path ending there.
//!
//! The arithmetic follows the reference (sentencepiece 0.2.3) bit for bit, because exact ties
//! are common (`g`+`gg` against `gg`+`g`): every path score is float32, a candidate is the
//! float32 sum of the best score at its start and the piece's score (a user-defined piece
//! scores `0.1 * (len_bytes - 1)`), and strict `>` keeps the earliest start on ties. Scores are
//! re-centred when they pass ±1e5. (0.2.1 computed candidates in double and gave user-defined
//! pieces `len * max_score - 0.1`; the installed 0.2.3 oracle does neither.) UNUSED pieces are
//! never matched.
//!
//! Speed without changing a bit of that: the prefix search is the crate's double-array trie
//! (one load per byte), a match costs one score load and one compare (`-inf` marks unreached
//! positions), and the lattice is a reused per-thread buffer of 12-byte cells.

use super::normalizer::one_char_len;
use super::trie::ByteTrie;
use super::vocab::{PieceEntry, PieceType, Segmenter, SpPiece};
use crate::error::{Error, Result};

const UNK_PENALTY: f32 = 10.0;

#[derive(Debug, Clone)]
pub struct SpUnigram {
    /// The matchable pieces (NORMAL and USER_DEFINED) → id.
    trie: ByteTrie,
    /// Per id: the score a match adds (a user-defined piece's length bonus already applied).
    match_scores: Vec<f32>,
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
        // The reference's trie holds UNUSED pieces too but skips them when they match. Resolve
        // repeated keys first (the last id wins, as in the trie), then leave the UNUSED ones
        // out: the walk still passes through their nodes to longer keys, so the matches it
        // reports are exactly the reference's minus the skipped ones.
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
        entries.retain(|&(_, id)| {
            pieces
                .get(id as usize)
                .is_some_and(|p| p.kind != PieceType::Unused)
        });
        // A user-defined piece scores 0.1 per byte beyond the first (computed in double,
        // stored as float), whatever its own score.
        let match_scores = pieces
            .iter()
            .map(|p| match p.kind {
                PieceType::UserDefined => (0.1f64 * (p.piece.len() as f64 - 1.0)) as f32,
                _ => p.score,
            })
            .collect();
        Ok(SpUnigram {
            trie: ByteTrie::build(entries),
            match_scores,
            unk_id,
            min_score,
        })
    }
}

/// The best path ending at one byte position.
#[derive(Clone, Copy)]
struct Best {
    /// `-inf` until a path reaches this position. Every candidate is finite (scores are
    /// finite and the running score stays within ±1e5 by re-centring), so `cand > score`
    /// alone says "unreached or strictly better", as the reference's two tests do.
    score: f32,
    /// Start of the last piece; `u32::MAX` while unreached.
    start: u32,
    id: u32,
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
        if n >= u32::MAX as usize {
            return Err(Error::invalid(
                "sentencepiece Unigram: input longer than 4 GiB",
            ));
        }
        LATTICE.with(|cell| {
            let mut best = cell.take();
            let r = self.segment_into(bytes, &mut best, out);
            if best.capacity() > (1 << 20) && n < (1 << 16) {
                // Do not keep a huge buffer alive for one outsized input.
                best = Vec::new();
            }
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
                score: f32::NEG_INFINITY,
                start: u32::MAX,
                id: self.unk_id,
            },
        );
        if let Some(b) = best.first_mut() {
            b.score = 0.0;
        }
        let scores = &self.match_scores[..];
        // The furthest position any candidate has reached (what re-centring must cover).
        let mut frontier = 0usize;
        let mut s = 0usize;
        while s < n {
            let Some(row) = best.get_mut(s..) else { break };
            let mut till = row[0].score;
            if !(-SCORE_RESET_THRESHOLD..=SCORE_RESET_THRESHOLD).contains(&till) {
                // Unreached positions stay -inf, as the reference leaves them untouched.
                let offset = till;
                let hi = frontier.max(s) - s;
                for b in row.iter_mut().take(hi + 1) {
                    b.score -= offset;
                }
                till = 0.0;
            }
            let mblen = one_char_len(bytes[s]).min(n - s);
            let mut has_single = false;
            let mut longest = 0usize;
            self.trie.for_each_prefix(&bytes[s..], |len, id| {
                let cand = scores.get(id as usize).copied().unwrap_or(0.0) + till;
                if let Some(t) = row.get_mut(len) {
                    if cand > t.score {
                        *t = Best {
                            score: cand,
                            start: s as u32,
                            id,
                        };
                    }
                }
                has_single |= len == mblen;
                longest = len;
            });
            if !has_single {
                longest = longest.max(mblen);
                let cand = unk_score + till;
                if let Some(t) = row.get_mut(mblen) {
                    if cand > t.score {
                        *t = Best {
                            score: cand,
                            start: s as u32,
                            id: self.unk_id,
                        };
                    }
                }
            }
            frontier = frontier.max(s + longest);
            s += mblen;
        }
        let first = out.len();
        let mut end = n;
        while end > 0 {
            let b = best[end];
            let start = b.start as usize;
            if start >= end {
                return Err(Error::invalid(
                    "sentencepiece Unigram: unreachable position in the lattice",
                ));
            }
            out.push(SpPiece {
                id: b.id,
                start,
                end,
            });
            end = start;
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

    /// The segmentation as it was written before the speed work (and as the reference reads):
    /// a naive prefix search over every piece, UNUSED matches skipped inside the loop, the
    /// unreached test on `start`, the frontier raised per match.
    fn reference(pieces: &[PieceEntry], unk_id: u32, text: &str) -> Vec<(u32, usize, usize)> {
        use std::collections::HashMap;
        let mut dict: HashMap<&[u8], u32> = HashMap::new();
        let mut min_score = f32::MAX;
        for (i, p) in pieces.iter().enumerate() {
            if p.kind == Normal && p.score < min_score {
                min_score = p.score;
            }
            if matches!(p.kind, Normal | UserDefined | Unused) {
                dict.insert(p.piece.as_bytes(), i as u32);
            }
        }
        let max_len = dict.keys().map(|k| k.len()).max().unwrap_or(0);
        let bytes = text.as_bytes();
        let n = bytes.len();
        #[derive(Clone, Copy)]
        struct B {
            id: u32,
            score: f32,
            start: usize,
        }
        let mut best = vec![
            B {
                id: unk_id,
                score: 0.0,
                start: usize::MAX
            };
            n + 1
        ];
        let mut max_frontier = 0usize;
        let mut s = 0;
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
            for len in 1..=(n - s).min(max_len) {
                let Some(&id) = dict.get(&bytes[s..s + len]) else {
                    continue;
                };
                let kind = pieces[id as usize].kind;
                if kind == Unused {
                    continue;
                }
                max_frontier = max_frontier.max(s + len);
                let score = if kind == UserDefined {
                    (0.1f64 * (len as f64 - 1.0)) as f32
                } else {
                    pieces[id as usize].score
                };
                let cand = score + till;
                let t = &mut best[s + len];
                if t.start == usize::MAX || cand > t.score {
                    *t = B {
                        id,
                        score: cand,
                        start: s,
                    };
                }
                has_single |= len == mblen;
            }
            if !has_single {
                max_frontier = max_frontier.max(s + mblen);
                let cand = min_score - UNK_PENALTY + till;
                let t = &mut best[s + mblen];
                if t.start == usize::MAX || cand > t.score {
                    *t = B {
                        id: unk_id,
                        score: cand,
                        start: s,
                    };
                }
            }
            s += mblen;
        }
        let mut out = vec![];
        let mut end = n;
        while end > 0 {
            let b = best[end];
            out.push((b.id, b.start, end));
            end = b.start;
        }
        out.reverse();
        out
    }

    #[test]
    fn agrees_with_the_reference_loop_on_generated_vocabularies() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        // A few characters (one to four bytes); `z` and `𝔸` are never single pieces, so
        // unknown nodes occur. Scores come from a short list so exact ties are frequent, and
        // the large ones push path scores past ±1e5 to exercise re-centring.
        let alphabet = ["a", "b", "c", "▁", "é", "z", "𝔸", "ab"];
        let score_list = [
            -1.0f32, -2.0, -3.0, -0.5, -1.5, -4.25, 0.0, -60000.0, -33333.3, 0.003,
        ];
        for round in 0..60 {
            let mut pieces = vec![PieceEntry {
                piece: "<unk>".into(),
                score: 0.0,
                kind: Unknown,
            }];
            let mut seen = std::collections::HashSet::new();
            let big = round % 3 == 0;
            for _ in 0..(next(40) + 5) {
                let len = next(4) + 1;
                let piece: String = (0..len)
                    .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                    .collect();
                if piece.starts_with('z') && piece.len() == 1
                    || piece == "𝔸"
                    || !seen.insert(piece.clone())
                {
                    continue;
                }
                let kind = match next(10) {
                    0 => UserDefined,
                    1 => Unused,
                    _ => Normal,
                };
                let k = if big { score_list.len() } else { 7 };
                pieces.push(PieceEntry {
                    piece,
                    score: score_list[next(k as u64) as usize],
                    kind,
                });
            }
            if !pieces.iter().any(|p| p.kind != Unknown && p.kind != Unused) {
                continue;
            }
            let m = SpUnigram::new(&pieces, 0).unwrap();
            for t in 0..40 {
                let chars = if t == 0 { 3000 } else { next(60) };
                let text: String = (0..chars)
                    .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                    .collect();
                let mut out = vec![];
                m.segment(&text, &mut out).unwrap();
                let got: Vec<_> = out.iter().map(|p| (p.id, p.start, p.end)).collect();
                assert_eq!(got, reference(&pieces, 0, &text), "round {round} {text:?}");
            }
        }
    }

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
