//! sentencepiece BPE segmentation (see `spec/BPE-NOTES.md` part A), run on the whole
//! normalized, ▁-escaped string: user-defined pieces are matched first (longest prefix, left to
//! right) and frozen; every other character is a symbol; then the adjacent pair whose
//! concatenation is a NORMAL / USER_DEFINED / UNUSED piece with the highest score merges,
//! leftmost on equal scores, until none is left. UNUSED results are split back into the two
//! symbols that made them; unknown symbols fall back to bytes or fuse into one unk piece.
//!
//! The merge candidates are precomputed as a pair table (left symbol, right symbol) →
//! (score rank, merged piece) from every two-way split of every mergeable piece, so the shared
//! heap engine (`models::bpe::engine`) does the work in O(n log n).

use super::vocab::{PieceEntry, PieceType, Segmenter, SpPiece};
use crate::error::{Error, Result};
use crate::models::bpe::engine::Word;
use ahash::AHashMap;
use std::cell::RefCell;

/// Lookup id of a symbol that can never merge (frozen user-defined match, or a character that
/// no piece starts or ends with).
const DEAD: u32 = u32::MAX - 1;

/// A byte trie over the user-defined pieces, for longest-prefix matching.
#[derive(Default)]
struct PrefixMatcher {
    /// (node, byte) → child node.
    edges: AHashMap<(u32, u8), u32>,
    /// Whether a node ends a piece.
    terminal: Vec<bool>,
}

impl PrefixMatcher {
    fn new<'a>(pieces: impl Iterator<Item = &'a str>) -> Self {
        let mut m = PrefixMatcher {
            edges: AHashMap::new(),
            terminal: vec![false],
        };
        for p in pieces {
            let mut node = 0u32;
            for b in p.bytes() {
                let next = m.terminal.len() as u32;
                node = *m.edges.entry((node, b)).or_insert_with(|| next);
                if node == next {
                    m.terminal.push(false);
                }
            }
            m.terminal[node as usize] = true;
        }
        m
    }

    fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// Length of the longest piece that is a prefix of `s`, if any.
    fn longest(&self, s: &[u8]) -> Option<usize> {
        let mut node = 0u32;
        let mut best = None;
        for (i, &b) in s.iter().enumerate() {
            match self.edges.get(&(node, b)) {
                Some(&n) => node = n,
                None => break,
            }
            if self.terminal[node as usize] {
                best = Some(i + 1);
            }
        }
        best
    }
}

pub struct SpBpe {
    /// NORMAL / USER_DEFINED / UNUSED pieces (the merge targets).
    pieces: AHashMap<String, u32>,
    /// CONTROL / UNKNOWN / BYTE pieces; they win over `pieces` when mapping a string to an id.
    reserved: AHashMap<String, u32>,
    kinds: Vec<PieceType>,
    /// Byte length of each piece.
    lens: Vec<u32>,
    unk_id: u32,
    byte_fallback: bool,
    byte_ids: [u32; 256],
    user_defined: PrefixMatcher,
    /// Lookup id of each single character that takes part in some merge: its piece id, or a
    /// "virtual" id `>= kinds.len()` for a character that is not itself a piece.
    char_ids: AHashMap<char, u32>,
    /// For each virtual id, the id the character gets in the output (reserved piece or unk).
    virtual_out: Vec<u32>,
    /// (left, right) packed → (rank of the merged piece's score, merged piece id).
    pairs: AHashMap<u64, (u32, u32)>,
    has_unused: bool,
}

#[inline]
fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

#[derive(Default)]
struct Scratch {
    word: Word,
    /// Merged UNUSED piece → the (left, right) symbols of its last queued candidate.
    rev: AHashMap<u32, (u32, u32)>,
    stack: Vec<(u32, usize, usize)>,
    out_ids: Vec<(u32, usize, usize)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl SpBpe {
    pub fn new(pieces: &[PieceEntry], unk_id: u32, byte_fallback: bool) -> Result<SpBpe> {
        let n = u32::try_from(pieces.len())
            .map_err(|_| Error::invalid("sentencepiece BPE: too many pieces"))?;
        let mut normal: AHashMap<String, u32> = AHashMap::with_capacity(pieces.len());
        let mut reserved: AHashMap<String, u32> = AHashMap::new();
        let mut kinds = Vec::with_capacity(pieces.len());
        for (i, p) in pieces.iter().enumerate() {
            if p.piece.is_empty() {
                return Err(Error::invalid(format!(
                    "sentencepiece BPE: piece {i} must not be empty"
                )));
            }
            let map = match p.kind {
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused => &mut normal,
                _ => &mut reserved,
            };
            if map.insert(p.piece.clone(), i as u32).is_some() {
                return Err(Error::invalid(format!(
                    "sentencepiece BPE: piece `{}` is already defined",
                    p.piece
                )));
            }
            kinds.push(p.kind);
        }
        if kinds.get(unk_id as usize) != Some(&PieceType::Unknown) {
            return Err(Error::invalid(format!(
                "sentencepiece BPE: unk id {unk_id} is not an UNKNOWN piece"
            )));
        }
        let mut byte_ids = [unk_id; 256];
        if byte_fallback {
            for (b, slot) in byte_ids.iter_mut().enumerate() {
                let s = byte_piece(b as u8);
                match reserved.get(&s).or_else(|| normal.get(&s)) {
                    Some(&id) if kinds[id as usize] == PieceType::Byte => *slot = id,
                    _ => {
                        return Err(Error::invalid(
                            "sentencepiece BPE: there are not 256 byte pieces although \
                             `byte_fallback` is true",
                        ))
                    }
                }
            }
        }
        let user_defined = PrefixMatcher::new(
            pieces
                .iter()
                .filter(|p| p.kind == PieceType::UserDefined)
                .map(|p| p.piece.as_str()),
        );

        // Scores → ranks: equal float32 scores share a rank, so ties go to the leftmost pair.
        // (-0.0 and 0.0 compare equal in sentencepiece's float comparison.)
        let norm = |s: f32| if s == 0.0 { 0.0 } else { s };
        let mut scores: Vec<f32> = pieces.iter().map(|p| norm(p.score)).collect();
        scores.sort_unstable_by(|a, b| b.total_cmp(a));
        scores.dedup_by(|a, b| a.total_cmp(b).is_eq());
        let rank_of = |s: f32| -> u32 {
            let s = norm(s);
            scores.binary_search_by(|x| s.total_cmp(x)).unwrap_or(0) as u32
        };

        let mut sb = SpBpe {
            pieces: AHashMap::new(),
            reserved,
            lens: pieces.iter().map(|p| p.piece.len() as u32).collect(),
            kinds,
            unk_id,
            byte_fallback,
            byte_ids,
            user_defined,
            char_ids: AHashMap::new(),
            virtual_out: Vec::new(),
            pairs: AHashMap::new(),
            has_unused: false,
        };
        let mut char_ids: AHashMap<char, u32> = AHashMap::new();
        let mut virtual_out: Vec<u32> = Vec::new();
        let mut pairs: AHashMap<u64, (u32, u32)> = AHashMap::new();
        // The lookup id of a symbol string, if it can be a symbol: a mergeable piece, or any
        // single character.
        let mut symbol_id = |s: &str, sb: &SpBpe| -> Option<u32> {
            if let Some(&id) = normal.get(s) {
                let mut cs = s.chars();
                if let (Some(c), None) = (cs.next(), cs.next()) {
                    char_ids.insert(c, id);
                }
                return Some(id);
            }
            let mut cs = s.chars();
            let (Some(c), None) = (cs.next(), cs.next()) else {
                return None;
            };
            Some(*char_ids.entry(c).or_insert_with(|| {
                virtual_out.push(sb.piece_to_id(s));
                n + virtual_out.len() as u32 - 1
            }))
        };
        for (i, p) in pieces.iter().enumerate() {
            if !matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            ) {
                continue;
            }
            if p.kind == PieceType::Unused {
                sb.has_unused = true;
            }
            let rank = rank_of(p.score);
            for (b, _) in p.piece.char_indices().skip(1) {
                let (l, r) = p.piece.split_at(b);
                let (Some(lid), Some(rid)) = (symbol_id(l, &sb), symbol_id(r, &sb)) else {
                    continue;
                };
                pairs.insert(pair_key(lid, rid), (rank, i as u32));
            }
        }
        // Single-character mergeable pieces that no split mentions still need their id.
        for (s, &id) in &normal {
            let mut cs = s.chars();
            if let (Some(c), None) = (cs.next(), cs.next()) {
                char_ids.entry(c).or_insert(id);
            }
        }
        if virtual_out.len() as u64 + u64::from(n) >= u64::from(DEAD) {
            return Err(Error::invalid("sentencepiece BPE: too many pieces"));
        }
        sb.pieces = normal;
        sb.char_ids = char_ids;
        sb.virtual_out = virtual_out;
        sb.pairs = pairs;
        Ok(sb)
    }

    /// sentencepiece's PieceToId: reserved pieces first, then the others, else unk.
    fn piece_to_id(&self, s: &str) -> u32 {
        self.reserved
            .get(s)
            .or_else(|| self.pieces.get(s))
            .copied()
            .unwrap_or(self.unk_id)
    }

    /// The output id of a live symbol.
    fn output_id(&self, key: u32, text: &str) -> u32 {
        let n = self.kinds.len() as u32;
        if key == DEAD {
            self.piece_to_id(text)
        } else if key >= n {
            self.virtual_out
                .get((key - n) as usize)
                .copied()
                .unwrap_or(self.unk_id)
        } else if self.reserved.is_empty() {
            key
        } else {
            // A string may be both a mergeable and a reserved piece; reserved wins.
            self.piece_to_id(text)
        }
    }

    fn kind(&self, id: u32) -> Option<PieceType> {
        self.kinds.get(id as usize).copied()
    }
}

impl Segmenter for SpBpe {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        if normalized.is_empty() {
            return Ok(());
        }
        if u32::try_from(normalized.len()).is_err() {
            return Err(Error::invalid("sentencepiece BPE: input longer than 4 GiB"));
        }
        SCRATCH.with(|cell| {
            let mut fresh = None;
            let mut guard = cell.try_borrow_mut().ok();
            let sc = match guard.as_deref_mut() {
                Some(s) => s,
                None => fresh.insert(Scratch::default()),
            };
            self.segment_with(normalized, out, sc)
        })
    }
}

impl SpBpe {
    fn segment_with(&self, text: &str, out: &mut Vec<SpPiece>, sc: &mut Scratch) -> Result<()> {
        let bytes = text.as_bytes();
        let word = &mut sc.word;
        word.clear();
        sc.rev.clear();
        let mut i = 0;
        while i < bytes.len() {
            let ud = if self.user_defined.is_empty() {
                None
            } else {
                self.user_defined.longest(&bytes[i..])
            };
            let (key, len) = match ud {
                Some(len) => (DEAD, len),
                None => {
                    let c = text[i..].chars().next().unwrap_or('\0');
                    (
                        self.char_ids.get(&c).copied().unwrap_or(DEAD),
                        c.len_utf8().max(1),
                    )
                }
            };
            word.push(key, len as u32);
            i += len;
        }
        let lookup = |a: u32, b: u32| self.pairs.get(&pair_key(a, b)).copied();
        if self.has_unused {
            let rev = &mut sc.rev;
            let kinds = &self.kinds;
            word.merge_all(lookup, None::<fn() -> bool>, |new, l, r| {
                if kinds.get(new as usize) == Some(&PieceType::Unused) {
                    rev.insert(new, (l, r));
                }
            });
        } else {
            word.merge_all(lookup, None::<fn() -> bool>, |_, _, _| {});
        }

        // Final symbols, with UNUSED pieces split back recursively.
        sc.out_ids.clear();
        for (key, start, end) in word.iter() {
            sc.stack.clear();
            sc.stack.push((key, start, end));
            while let Some((key, s, e)) = sc.stack.pop() {
                let piece = text.get(s..e).unwrap_or("");
                let id = self.output_id(key, piece);
                if self.kind(id) == Some(PieceType::Unused) {
                    if let Some(&(l, r)) = sc.rev.get(&id) {
                        let left_len = self.symbol_len(l, piece);
                        // Right first: the stack pops the left part next.
                        sc.stack.push((r, s + left_len, e));
                        sc.stack.push((l, s, s + left_len));
                        continue;
                    }
                }
                sc.out_ids.push((id, s, e));
            }
        }

        let mut prev_unk = false;
        for &(id, s, e) in &sc.out_ids {
            match self.kind(id) {
                Some(PieceType::Control) => {
                    return Err(Error::invalid(format!(
                        "sentencepiece BPE: the input character `{}` is the CONTROL piece {id}, \
                         which sentencepiece cannot encode",
                        text.get(s..e).unwrap_or("")
                    )))
                }
                _ if id == self.unk_id => {
                    if self.byte_fallback {
                        let piece = text.get(s..e).unwrap_or("");
                        let nb = piece.len();
                        for (k, b) in piece.bytes().enumerate() {
                            let end = if k + 1 == nb { e } else { s };
                            out.push(SpPiece {
                                id: self.byte_ids[b as usize],
                                start: s,
                                end,
                            });
                        }
                    } else if prev_unk {
                        if let Some(last) = out.last_mut() {
                            last.end = e;
                        }
                    } else {
                        out.push(SpPiece {
                            id,
                            start: s,
                            end: e,
                        });
                    }
                    prev_unk = true;
                }
                _ => {
                    out.push(SpPiece {
                        id,
                        start: s,
                        end: e,
                    });
                    prev_unk = false;
                }
            }
        }
        Ok(())
    }

    /// Byte length of the symbol with lookup id `key` that starts `piece`.
    fn symbol_len(&self, key: u32, piece: &str) -> usize {
        let n = self.kinds.len() as u32;
        if key >= n {
            // A single character.
            piece.chars().next().map_or(0, char::len_utf8)
        } else {
            self.lens.get(key as usize).map_or(0, |&l| l as usize)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model from `piece:score:TYPE` specs (TYPE omitted = NORMAL), with `<unk>` at id 0 and
    /// every character of `chars` as a NORMAL piece scored -100 (unless listed in the specs).
    fn model_bf(specs: &[&str], chars: &str, byte_fallback: bool) -> (SpBpe, Vec<PieceEntry>) {
        let mut pieces = vec![PieceEntry {
            piece: "<unk>".into(),
            score: 0.0,
            kind: PieceType::Unknown,
        }];
        for spec in specs {
            let mut parts = spec.rsplitn(3, ':').collect::<Vec<_>>();
            parts.reverse();
            let (piece, score, kind) = match parts.as_slice() {
                [p, s, t] => (
                    *p,
                    s.parse().unwrap(),
                    match *t {
                        "CONTROL" => PieceType::Control,
                        "UNKNOWN" => PieceType::Unknown,
                        "USER_DEFINED" => PieceType::UserDefined,
                        "UNUSED" => PieceType::Unused,
                        "BYTE" => PieceType::Byte,
                        _ => PieceType::Normal,
                    },
                ),
                [p, s] => (*p, s.parse().unwrap(), PieceType::Normal),
                _ => panic!("bad spec"),
            };
            pieces.push(PieceEntry {
                piece: piece.into(),
                score,
                kind,
            });
        }
        for c in chars.chars() {
            let s = c.to_string();
            if !pieces.iter().any(|p| p.piece == s) {
                pieces.push(PieceEntry {
                    piece: s,
                    score: -100.0,
                    kind: PieceType::Normal,
                });
            }
        }
        if byte_fallback {
            for b in 0..=255u8 {
                pieces.push(PieceEntry {
                    piece: byte_piece(b),
                    score: 0.0,
                    kind: PieceType::Byte,
                });
            }
        }
        (SpBpe::new(&pieces, 0, byte_fallback).unwrap(), pieces)
    }

    fn model(specs: &[&str], chars: &str) -> (SpBpe, Vec<PieceEntry>) {
        model_bf(specs, chars, false)
    }

    fn seg(m: &(SpBpe, Vec<PieceEntry>), text: &str) -> Vec<String> {
        let mut out = Vec::new();
        m.0.segment(text, &mut out).unwrap();
        // Each piece's text is the normalized range (or the piece itself for byte pieces).
        out.iter()
            .map(|p| {
                let e = &m.1[p.id as usize];
                if e.kind == PieceType::Byte || e.kind == PieceType::Unknown {
                    format!("{}[{},{}]", e.piece, p.start, p.end)
                } else {
                    assert_eq!(e.piece, text[p.start..p.end]);
                    e.piece.clone()
                }
            })
            .collect()
    }

    #[test]
    fn merged_score_decides() {
        assert_eq!(seg(&model(&["ab:-2", "bc:-1"], "abc"), "abc"), ["a", "bc"]);
        assert_eq!(seg(&model(&["ab:-1", "bc:-2"], "abc"), "abc"), ["ab", "c"]);
        // List order (ids) changes nothing.
        assert_eq!(seg(&model(&["bc:-2", "ab:-1"], "abc"), "abc"), ["ab", "c"]);
        // Only the merged piece's score matters.
        assert_eq!(seg(&model(&["a:5", "b:5", "ab:-1000"], "ab"), "ab"), ["ab"]);
    }

    #[test]
    fn ties_go_leftmost() {
        assert_eq!(seg(&model(&["ab:-1", "bc:-1"], "abc"), "abc"), ["ab", "c"]);
        assert_eq!(seg(&model(&["bc:-1", "ab:-1"], "abc"), "abc"), ["ab", "c"]);
        assert_eq!(seg(&model(&["aa:-1"], "a"), "aaaaa"), ["aa", "aa", "a"]);
        assert_eq!(seg(&model(&["aa:-1", "aaa:-1"], "a"), "aaaa"), ["aaa", "a"]);
        // float32: -1.00000001 rounds to -1.0 (a tie), -1.0000001 does not.
        assert_eq!(
            seg(&model(&["ab:-1.00000001", "bc:-1.0"], "abc"), "abc"),
            ["ab", "c"]
        );
        assert_eq!(
            seg(&model(&["ab:-1.0000001", "bc:-1.0"], "abc"), "abc"),
            ["a", "bc"]
        );
    }

    #[test]
    fn reachability_and_targets() {
        assert_eq!(seg(&model(&["abc:0"], "abc"), "abc"), ["a", "b", "c"]);
        assert_eq!(seg(&model(&["ab:-1:CONTROL"], "ab"), "ab"), ["a", "b"]);
        assert_eq!(seg(&model(&["ab:-1:UNKNOWN"], "ab"), "ab"), ["a", "b"]);
        // Merges cross ▁: there are no word boundaries.
        assert_eq!(
            seg(&model(&["▁b:-0.5", "a▁b:-1"], "a▁bx"), "xa▁b"),
            ["x", "a▁b"]
        );
    }

    #[test]
    fn unused_resegmentation() {
        let m = model(&["ab:-1:UNUSED", "abc:-2"], "abcd");
        assert_eq!(seg(&m, "abc"), ["abc"]);
        assert_eq!(seg(&m, "abd"), ["a", "b", "d"]);
        // UNUSED pieces block other merges.
        let m = model(&["ab:-1:UNUSED", "bc:-2"], "abcx");
        assert_eq!(seg(&m, "abc"), ["a", "b", "c"]);
        assert_eq!(seg(&m, "xbc"), ["x", "bc"]);
        // Nested.
        let m = model(&["ab:-1", "abc:-2:UNUSED", "abcd:-3"], "abcdx");
        assert_eq!(seg(&m, "abcd"), ["abcd"]);
        assert_eq!(seg(&m, "abcx"), ["ab", "c", "x"]);
        // A single-character UNUSED piece is emitted with its own id.
        let m = model(&["a:-1:UNUSED"], "b");
        assert_eq!(seg(&m, "ab"), ["a", "b"]);
    }

    #[test]
    fn user_defined() {
        assert_eq!(
            seg(
                &model(&["ab:0:USER_DEFINED", "abc:10", "bc:5"], "abc"),
                "abc"
            ),
            ["ab", "c"]
        );
        let m = model(
            &[
                "a:0:USER_DEFINED",
                "ab:0:USER_DEFINED",
                "abc:0:USER_DEFINED",
            ],
            "abc",
        );
        assert_eq!(seg(&m, "abcab"), ["abc", "ab"]);
        let m = model(&["ab:0:USER_DEFINED", "bcd:0:USER_DEFINED"], "abcdx");
        assert_eq!(seg(&m, "abcd"), ["ab", "c", "d"]);
        assert_eq!(seg(&m, "xbcd"), ["x", "bcd"]);
        let m = model(&["xa:-1", "ab:0:USER_DEFINED"], "xab");
        assert_eq!(seg(&m, "xab"), ["x", "ab"]);
        // A user-defined piece made of characters that are not pieces.
        let m = model(&["é:0:USER_DEFINED"], "ab");
        assert_eq!(seg(&m, "aéb"), ["a", "é", "b"]);
        // Whitespace-run user-defined pieces spelled with ▁ match and freeze.
        let m = model(
            &["▁▁:0:USER_DEFINED", "▁▁▁▁:0:USER_DEFINED", "▁b:-1"],
            "ab▁x",
        );
        assert_eq!(seg(&m, "a▁▁b"), ["a", "▁▁", "b"]);
        assert_eq!(seg(&m, "a▁▁▁▁▁b"), ["a", "▁▁▁▁", "▁b"]);
        assert_eq!(seg(&m, "▁▁▁▁▁x"), ["▁▁▁▁", "▁", "x"]);
    }

    #[test]
    fn byte_fallback_offsets() {
        let m = model_bf(&[], "ab", true);
        assert_eq!(seg(&m, "aéb"), ["a", "<0xC3>[1,1]", "<0xA9>[1,3]", "b"]);
        assert_eq!(
            seg(&m, "éé"),
            ["<0xC3>[0,0]", "<0xA9>[0,2]", "<0xC3>[2,2]", "<0xA9>[2,4]"]
        );
        assert_eq!(
            seg(&m, "😀"),
            ["<0xF0>[0,0]", "<0x9F>[0,0]", "<0x98>[0,0]", "<0x80>[0,4]"]
        );
        // An unknown character can still be merged into a piece first.
        let m = model_bf(&["éa:-1"], "a", true);
        assert_eq!(seg(&m, "éa"), ["éa"]);
        // Not all 256 byte pieces: loading fails.
        let mut pieces = m.1.clone();
        pieces.pop();
        assert!(SpBpe::new(&pieces, 0, true).is_err());
    }

    #[test]
    fn unknown_runs_fuse() {
        let m = model(&[], "ab");
        assert_eq!(seg(&m, "aééb"), ["a", "<unk>[1,5]", "b"]);
        // ▁ unknown too: one run.
        assert_eq!(seg(&m, "é▁é"), ["<unk>[0,7]"]);
        // The unk piece's own string maps to unk.
        let pieces = vec![
            PieceEntry {
                piece: "a".into(),
                score: 0.0,
                kind: PieceType::Unknown,
            },
            PieceEntry {
                piece: "b".into(),
                score: -1.0,
                kind: PieceType::Normal,
            },
        ];
        let m = (SpBpe::new(&pieces, 0, false).unwrap(), pieces);
        assert_eq!(seg(&m, "bab"), ["b", "a[1,2]", "b"]);
    }

    #[test]
    fn control_character_is_an_error() {
        let m = model(&["a:0:CONTROL"], "b");
        let mut out = Vec::new();
        let e = m.0.segment("abb", &mut out).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::InvalidData);
    }

    #[test]
    fn whitespace_runs_llama_like() {
        // ▁-runs all score -1e9, below ▁b: the last ▁ of a run goes with the word.
        let m = model(
            &[
                "▁a:-1",
                "▁b:-1",
                "▁▁:-1e9",
                "▁▁▁:-1e9",
                "▁▁▁▁:-1e9",
                "▁:-1e9",
            ],
            "ab",
        );
        assert_eq!(seg(&m, "▁a▁▁b"), ["▁a", "▁", "▁b"]);
        assert_eq!(seg(&m, "▁a▁▁▁b"), ["▁a", "▁▁", "▁b"]);
        assert_eq!(seg(&m, "▁a▁▁▁▁b"), ["▁a", "▁▁▁", "▁b"]);
    }

    #[test]
    fn long_input_is_fast() {
        let m = model(&["aa:-1", "aaaa:-2"], "a");
        let text = "a".repeat(1 << 18);
        let mut out = Vec::new();
        m.0.segment(&text, &mut out).unwrap();
        assert_eq!(out.len(), 1 << 16);
    }
}
