//! Unigram: the highest-scoring segmentation of a piece into vocabulary pieces (Kudo 2018),
//! found in one forward pass that keeps, for every character boundary, the best path ending
//! there (the single-pass Viterbi of sentencepiece's `EncodeOptimized`). Behaviour follows
//! `tokenizers` 0.22.1:
//! - a character with no one-character piece gets an unknown node scored
//!   (min over all scores) − 10;
//! - a candidate replaces the best path at its end only when strictly better, and candidates
//!   arrive by increasing start, so ties keep the path whose last piece starts earliest;
//! - consecutive unknown nodes (and pieces whose id is `unk_id`) fuse; the covered text is then
//!   looked up in the vocabulary, then tried as byte pieces `<0xXX>` (byte fallback), and only
//!   then becomes `unk_id` carrying the covered text;
//! - without `unk_id`, an unknown node that would win its end position is an error.
//!
//! Cost: O(len × longest piece) trie steps; the per-position table is a reused thread-local
//! buffer, so a call allocates only the output (and the text of a fused unknown run).

use super::trie::Trie;
use super::{Model, Token};
use crate::error::{Error, Result};
use ahash::AHashMap;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;

const UNK_PENALTY: f64 = 10.0;
const NO_START: u32 = u32::MAX;

pub struct Unigram {
    /// Boxed so the model enum stays small.
    d: Box<UnigramData>,
}

struct UnigramData {
    pieces: Vec<(Box<str>, f64)>,
    /// Scores by id, apart from the strings for cache locality in the forward pass.
    scores: Vec<f64>,
    token_to_id: AHashMap<Box<str>, u32>,
    /// Piece → id of its last occurrence (the id lookups and matching use).
    trie: Trie,
    min_score: f64,
    unk_id: Option<u32>,
    byte_fallback: bool,
    /// Ids of `<0x00>`..`<0xFF>` when byte fallback is on (`u32::MAX` when absent).
    byte_ids: Box<[u32; 256]>,
}

/// Best path ending at one byte position.
#[derive(Clone, Copy)]
struct Best {
    score: f64,
    /// Start of the last piece of the path, `NO_START` when no path ends here yet.
    start: u32,
    id: u32,
}

thread_local! {
    static SCRATCH: RefCell<Vec<Best>> = const { RefCell::new(Vec::new()) };
}

#[inline]
fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

impl Unigram {
    /// Build from `[piece, score]` entries (the id is the position). `unk_id` must be a
    /// position in the list when given.
    pub fn new(
        vocab: Vec<(String, f64)>,
        unk_id: Option<usize>,
        byte_fallback: bool,
    ) -> Result<Self> {
        if let Some(unk) = unk_id {
            if vocab.is_empty() {
                return Err(Error::invalid(
                    "model.vocab: the vocabulary is empty but unk_id needs an entry",
                ));
            }
            if unk >= vocab.len() {
                return Err(Error::invalid(format!(
                    "model.unk_id: {unk} is not below the vocabulary size {}",
                    vocab.len()
                )));
            }
        }
        if vocab.len() > u32::MAX as usize {
            return Err(Error::invalid("model.vocab: too many pieces"));
        }
        let mut token_to_id = AHashMap::with_capacity(vocab.len());
        let mut min_score = f64::INFINITY;
        let pieces: Vec<(Box<str>, f64)> = vocab
            .into_iter()
            .map(|(p, s)| (p.into_boxed_str(), s))
            .collect();
        for (id, (piece, score)) in pieces.iter().enumerate() {
            token_to_id.insert(piece.clone(), id as u32);
            if *score < min_score {
                min_score = *score;
            }
        }
        let trie = Trie::from_pairs(token_to_id.iter().map(|(p, &id)| (p.as_bytes(), id)));
        let mut byte_ids = Box::new([u32::MAX; 256]);
        if byte_fallback {
            for (b, slot) in byte_ids.iter_mut().enumerate() {
                if let Some(&id) = token_to_id.get(format!("<0x{b:02X}>").as_str()) {
                    *slot = id;
                }
            }
        }
        Ok(Unigram {
            d: Box::new(UnigramData {
                scores: pieces.iter().map(|p| p.1).collect(),
                pieces,
                token_to_id,
                trie,
                min_score,
                unk_id: unk_id.map(|u| u as u32),
                byte_fallback,
                byte_ids,
            }),
        })
    }

    /// Build from the tokenizer.json `model` object: `vocab` (list of `[piece, score]`) is
    /// required, `unk_id` (integer or null) and `byte_fallback` (default false) are optional.
    pub fn from_json(v: &Value) -> Result<Self> {
        let obj = super::wordpiece::model_object(v, "Unigram")?;
        let list = match obj.get("vocab") {
            None => return Err(Error::invalid("model.vocab: missing field")),
            Some(l) => l.as_array().ok_or_else(|| {
                Error::invalid("model.vocab: expected a list of [piece, score] pairs")
            })?,
        };
        let mut vocab = Vec::with_capacity(list.len());
        for (i, entry) in list.iter().enumerate() {
            let pair = match entry.as_array().map(|a| a.as_slice()) {
                Some([piece, score]) => piece.as_str().zip(score.as_f64()),
                _ => None,
            };
            let (piece, score) = pair.ok_or_else(|| {
                Error::invalid(format!(
                    "model.vocab[{i}]: expected a [piece, score] pair, got {entry}"
                ))
            })?;
            vocab.push((piece.to_owned(), score));
        }
        let unk_id = match obj.get("unk_id") {
            None | Some(Value::Null) => None,
            Some(u) => Some(
                u.as_u64()
                    .and_then(|u| usize::try_from(u).ok())
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "model.unk_id: expected a non-negative integer or null, got {u}"
                        ))
                    })?,
            ),
        };
        let byte_fallback = match obj.get("byte_fallback") {
            None => false,
            Some(b) => b.as_bool().ok_or_else(|| {
                Error::invalid(format!("model.byte_fallback: expected a boolean, got {b}"))
            })?,
        };
        Unigram::new(vocab, unk_id, byte_fallback)
    }

    pub fn unk_id(&self) -> Option<u32> {
        self.d.unk_id
    }
    pub fn byte_fallback(&self) -> bool {
        self.d.byte_fallback
    }
    /// The `[piece, score]` entries in id order.
    pub fn pieces(&self) -> impl Iterator<Item = (&str, f64)> {
        self.d.pieces.iter().map(|(p, s)| (&**p, *s))
    }

    /// Fill `best` with the best path ending at each byte position of `piece`.
    fn forward(&self, piece: &str, best: &mut Vec<Best>) -> Result<()> {
        let bytes = piece.as_bytes();
        let n = bytes.len();
        best.clear();
        best.resize(
            n + 1,
            Best {
                score: 0.0,
                start: NO_START,
                id: 0,
            },
        );
        let unk_score = self.d.min_score - UNK_PENALTY;
        let mut pos = 0;
        while pos < n {
            // Every character boundary before `pos` has been given a path (or an error was
            // returned), so `best[pos]` is final here.
            let here = best[pos].score;
            let char_len = utf8_len(bytes[pos]);
            let mut has_single = false;
            for (len, id) in self.d.trie.common_prefixes(&bytes[pos..]) {
                let score = self.d.scores.get(id as usize).copied().unwrap_or(0.0);
                let cand = here + score;
                let slot = &mut best[pos + len];
                if slot.start == NO_START || cand > slot.score {
                    *slot = Best {
                        score: cand,
                        start: pos as u32,
                        id,
                    };
                }
                has_single |= len == char_len;
            }
            if !has_single {
                let cand = here + unk_score;
                let end = (pos + char_len).min(n);
                let slot = &mut best[end];
                if slot.start == NO_START || cand > slot.score {
                    let id = self.d.unk_id.ok_or_else(|| {
                        Error::invalid(format!(
                            "Unigram: cannot tokenize {:?}: the vocabulary has no piece for it and no unk_id",
                            &piece[pos..end]
                        ))
                    })?;
                    *slot = Best {
                        score: cand,
                        start: pos as u32,
                        id,
                    };
                }
            }
            pos += char_len;
        }
        Ok(())
    }

    /// Push (in reverse order: the caller reverses) the tokens of a fused unknown run.
    fn push_unknown_run(&self, piece: &str, start: usize, end: usize, out: &mut Vec<Token>) {
        let text = &piece[start..end];
        if let Some(&id) = self.d.token_to_id.get(text) {
            out.push(Token::new(id, start, end));
            return;
        }
        if self.d.byte_fallback
            && text
                .bytes()
                .all(|b| self.d.byte_ids[b as usize] != u32::MAX)
        {
            for b in text.bytes().rev() {
                out.push(Token::new(self.d.byte_ids[b as usize], start, end));
            }
            return;
        }
        // A run exists only when some node carried unk_id, so unk_id is set here.
        let unk = self.d.unk_id.unwrap_or(0);
        out.push(Token::with_value(unk, text, start, end));
    }
}

impl Model for Unigram {
    fn tokenize(&self, piece: &str, out: &mut Vec<Token>) -> Result<()> {
        if piece.is_empty() {
            return Ok(());
        }
        if piece.len() >= NO_START as usize {
            return Err(Error::invalid("Unigram: piece longer than 4 GiB"));
        }
        let mut local = Vec::new();
        SCRATCH.with(|cell| {
            let mut guard = cell.try_borrow_mut();
            let best: &mut Vec<Best> = match guard.as_mut() {
                Ok(b) => b,
                Err(_) => &mut local,
            };
            self.forward(piece, best)?;
            let base = out.len();
            let mut end = piece.len();
            // The unknown run being fused, as (start, end), while walking back.
            let mut run: Option<(usize, usize)> = None;
            while end > 0 {
                let node = best[end];
                let start = node.start as usize;
                if node.start == NO_START || start >= end {
                    return Err(Error::other("Unigram: broken best-path table"));
                }
                if Some(node.id) == self.d.unk_id {
                    run = Some((start, run.map_or(end, |r| r.1)));
                } else {
                    if let Some((s, e)) = run.take() {
                        self.push_unknown_run(piece, s, e, out);
                    }
                    out.push(Token::new(node.id, start, end));
                }
                end = start;
            }
            if let Some((s, e)) = run {
                self.push_unknown_run(piece, s, e, out);
            }
            out[base..].reverse();
            if best.capacity() > (1 << 20) && best.len() < (1 << 16) {
                // Do not keep a huge buffer alive for one outsized piece.
                *best = Vec::new();
            }
            Ok(())
        })
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.d.token_to_id.get(token).copied()
    }

    fn id_to_token(&self, id: u32) -> Option<&str> {
        self.d.pieces.get(id as usize).map(|p| &*p.0)
    }

    fn vocab_size(&self) -> usize {
        self.d.pieces.len()
    }

    fn vocab(&self) -> HashMap<String, u32> {
        self.d
            .token_to_id
            .iter()
            .map(|(t, &id)| (t.to_string(), id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model(v: &[(&str, f64)], unk: Option<usize>, bf: bool) -> Unigram {
        Unigram::new(
            v.iter().map(|(p, s)| (p.to_string(), *s)).collect(),
            unk,
            bf,
        )
        .unwrap()
    }

    fn run(m: &Unigram, s: &str) -> Result<Vec<Token>> {
        let mut out = Vec::new();
        m.tokenize(s, &mut out)?;
        Ok(out)
    }

    fn texts(m: &Unigram, s: &str) -> Vec<String> {
        run(m, s)
            .unwrap()
            .iter()
            .map(|t| s[t.offsets.0..t.offsets.1].to_string())
            .collect()
    }

    #[test]
    fn best_score_wins() {
        let m = model(
            &[("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -1.5)],
            Some(0),
            false,
        );
        assert_eq!(texts(&m, "abab"), vec!["ab", "ab"]);
        let toks = run(&m, "ab").unwrap();
        assert_eq!(toks, vec![Token::new(3, 0, 2)]);
    }

    #[test]
    fn ties_keep_earliest_start() {
        // a b c d at -1, ab bc cd at -2: "ab cd", "a bc d", "ab c d"... all score -4; at each end
        // the path whose last piece starts earliest wins, so "ab cd".
        let m = model(
            &[
                ("a", -1.0),
                ("b", -1.0),
                ("c", -1.0),
                ("d", -1.0),
                ("ab", -2.0),
                ("bc", -2.0),
                ("cd", -2.0),
            ],
            None,
            false,
        );
        assert_eq!(texts(&m, "abcd"), vec!["ab", "cd"]);
    }

    #[test]
    fn scores_are_64_bit() {
        // In f32, -1.000000000001 == -1.0 and "ab" would tie and win; in f64 "a b" is better.
        let m = model(
            &[("a", -0.5), ("b", -0.5), ("ab", -1.000000000001)],
            None,
            false,
        );
        assert_eq!(texts(&m, "ab"), vec!["a", "b"]);
    }

    #[test]
    fn unknown_score_is_min_over_all_minus_ten() {
        // min is -20 (the <unk> entry itself counts), so an unknown node scores -30, and
        // unknown "x" + "a" (15) scores -15. The piece "xa" wins above -15, keeps its place on
        // an exact tie (it is the first candidate at end 2), and loses below.
        let with_xa = |xa: f64| model(&[("<unk>", -20.0), ("a", 15.0), ("xa", xa)], Some(0), false);
        assert_eq!(texts(&with_xa(-15.0 + 1e-9), "xa"), vec!["xa"]);
        assert_eq!(texts(&with_xa(-15.0), "xa"), vec!["xa"]);
        assert_eq!(texts(&with_xa(-15.0 - 1e-9), "xa"), vec!["x", "a"]);
        // Byte pieces count towards the minimum too: with <0x00> at -40 an unknown scores -50,
        // so "x" + "a" is -45 and "xa" (-35) wins; were the minimum -20, "x a" (-25) would win.
        let m = model(
            &[
                ("<unk>", -20.0),
                ("<0x00>", -40.0),
                ("a", 5.0),
                ("xa", -35.0),
            ],
            Some(0),
            false,
        );
        assert_eq!(texts(&m, "xa"), vec!["xa"]);
    }

    #[test]
    fn consecutive_unknowns_fuse_with_covered_text() {
        let m = model(&[("<unk>", 0.0), ("a", -1.0)], Some(0), false);
        let toks = run(&m, "xy𝔸a").unwrap();
        assert_eq!(
            toks,
            vec![Token::with_value(0, "xy𝔸", 0, 6), Token::new(1, 6, 7)]
        );
        // A vocabulary piece carrying unk_id fuses too.
        let toks = run(&m, "x<unk>a").unwrap();
        assert_eq!(
            toks,
            vec![Token::with_value(0, "x<unk>", 0, 6), Token::new(1, 6, 7)]
        );
        // The piece alone stays the piece (the covered text is in the vocabulary).
        assert_eq!(run(&m, "<unk>").unwrap(), vec![Token::new(0, 0, 5)]);
    }

    #[test]
    fn fused_unknown_text_is_looked_up() {
        // ORACLE-NOTES example: <unk><unk> fuses into one run whose text is a piece: id 1.
        let m = model(
            &[("<unk>", 0.0), ("<unk><unk>", -1.0), ("a", -1.0)],
            Some(0),
            false,
        );
        assert_eq!(run(&m, "<unk><unk>").unwrap(), vec![Token::new(1, 0, 10)]);
    }

    #[test]
    fn no_unk_id_error_rule() {
        // ORACLE-NOTES: a -50, ab -1, bc -50; "abc" → error: "c" has no piece, and although
        // "bc" ends right after it, (min-10) + best(b..) beats a path through "bc".
        let m = model(&[("a", -50.0), ("ab", -1.0), ("bc", -50.0)], None, false);
        assert!(run(&m, "abc").is_err());
        // A missing character covered by a winning longer piece is fine...
        let m = model(&[("a", -1.0), ("ab", -1.0)], None, false);
        assert_eq!(texts(&m, "ab"), vec!["ab"]);
        // ...but not when no piece ends after it.
        assert_eq!(
            run(&m, "ac").unwrap_err().kind,
            crate::error::ErrorKind::InvalidData
        );
        // A character with no piece at all.
        assert!(run(&m, "z").is_err());
        // Empty input never errors.
        assert_eq!(run(&m, "").unwrap(), vec![]);
    }

    #[test]
    fn byte_fallback_offsets() {
        let mut v = vec![("<unk>".to_string(), 0.0), ("a".to_string(), -1.0)];
        for b in 0..=255u32 {
            v.push((format!("<0x{b:02X}>"), -5.0));
        }
        let m = Unigram::new(v, Some(0), true).unwrap();
        // "é" (C3 A9) + "x": one fused run of 3 bytes → three byte tokens, each (0, 3).
        let toks = run(&m, "éxa").unwrap();
        let id = |b: u32| 2 + b;
        assert_eq!(
            toks,
            vec![
                Token::new(id(0xC3), 0, 3),
                Token::new(id(0xA9), 0, 3),
                Token::new(id(b'x' as u32), 0, 3),
                Token::new(1, 3, 4),
            ]
        );
        // Byte pieces are ordinary pieces: the literal text <0x41> matches one.
        assert_eq!(run(&m, "<0x41>").unwrap(), vec![Token::new(id(0x41), 0, 6)]);
    }

    #[test]
    fn byte_fallback_incomplete_keeps_unknown() {
        let m = model(&[("<unk>", 0.0), ("<0xC3>", -1.0)], Some(0), true);
        assert_eq!(run(&m, "é").unwrap(), vec![Token::with_value(0, "é", 0, 2)]);
        // Without byte_fallback the pieces are unused.
        let m = model(
            &[("<unk>", 0.0), ("<0xC3>", -1.0), ("<0xA9>", -1.0)],
            Some(0),
            false,
        );
        assert_eq!(run(&m, "é").unwrap(), vec![Token::with_value(0, "é", 0, 2)]);
    }

    #[test]
    fn long_piece_then_short_piece_reuse_the_scratch() {
        let m = model(
            &[("<unk>", 0.0), ("ab", -1.0), ("a", -2.0), ("b", -2.0)],
            Some(0),
            false,
        );
        // 300k bytes: "ab" repeated with an unknown 𝔸 every 1000 characters.
        let mut long = String::new();
        for i in 0..100_000 {
            long.push_str(if i % 500 == 499 { "𝔸" } else { "ab" });
        }
        let toks = run(&m, &long).unwrap();
        assert_eq!(toks.len(), 100_000);
        assert_eq!(toks.last().map(|t| t.offsets.1), Some(long.len()));
        assert_eq!(texts(&m, "aba"), vec!["ab", "a"]);
        assert_eq!(texts(&m, "ab"), vec!["ab"]);
    }

    #[test]
    fn repeated_piece_keeps_last_id() {
        let m = model(
            &[("<unk>", 0.0), ("a", -1.0), ("a", -3.0), ("b", -1.0)],
            Some(0),
            false,
        );
        assert_eq!(m.token_to_id("a"), Some(2));
        assert_eq!(m.id_to_token(1), Some("a"));
        assert_eq!(m.vocab_size(), 4);
        assert_eq!(m.vocab().len(), 3);
        assert_eq!(run(&m, "a").unwrap(), vec![Token::new(2, 0, 1)]);
    }

    #[test]
    fn from_json_fields() {
        let v = json!({"vocab": [["<unk>", 0], ["a", -1.5]], "unk_id": 0});
        let m = Unigram::from_json(&v).unwrap();
        assert_eq!(m.unk_id(), Some(0));
        assert!(!m.byte_fallback());
        let v = json!({"type": "Unigram", "vocab": [["a", -1.5]], "unk_id": null});
        assert_eq!(Unigram::from_json(&v).unwrap().unk_id(), None);
        let v = json!({"vocab": [["a", -1.5], ["b"]]});
        let e = Unigram::from_json(&v).err().unwrap();
        assert!(e.message.starts_with("model.vocab[1]"), "{}", e.message);
        let v = json!({"vocab": [["a", -1.5]], "unk_id": 1});
        assert!(Unigram::from_json(&v).is_err());
        let v = json!({"vocab": [], "unk_id": 0});
        assert!(Unigram::from_json(&v).is_err());
        let v = json!({"vocab": [["a", 0.0]], "byte_fallback": "yes"});
        assert!(Unigram::from_json(&v).is_err());
        assert!(Unigram::from_json(&json!({"unk_id": 0})).is_err());
    }
}
