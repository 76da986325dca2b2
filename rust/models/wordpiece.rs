//! WordPiece: greedy longest-match-first segmentation of one word (Schuster & Nakajima 2012,
//! BERT). Behaviour follows `tokenizers` 0.22.1:
//! - a word of more than `max_input_chars_per_word` scalar values is one unknown token;
//! - otherwise, from each start, the longest vocabulary entry matching there is taken (with the
//!   continuing-subword prefix in front of it when the start is not 0);
//! - if some start has no match, the whole word is one unknown token `(0, len)`;
//! - when the unknown token is needed but absent from the vocabulary, it is an error.
//!
//! Two tries make each step one walk: `first` holds every entry (matched at the word start),
//! `rest` holds the entries that begin with the prefix, prefix removed (matched after it). A
//! walk is bounded by the longest entry, so a word costs O(len × longest entry) with no
//! allocation unless an entry shares its id with another entry.

mod word_cache;

use super::trie::Trie;
use super::{Model, Token};
use crate::error::{Error, Result};
use ahash::{AHashMap, AHashSet};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
pub(crate) use word_cache::{WordCache, WordKey};

/// Source of `WordPieceData::uid`.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

pub struct WordPiece {
    /// Boxed so the model enum stays small.
    d: Box<WordPieceData>,
}

struct WordPieceData {
    vocab: AHashMap<String, u32>,
    /// The entry each id decodes to: among the entries with that id, the last one given.
    vocab_r: AHashMap<u32, Box<str>>,
    /// `vocab_r` as a table indexed by id, when the ids are dense enough (the usual case):
    /// `id_to_token` runs once per token when an encoding is built.
    dense_r: Vec<Option<Box<str>>>,
    /// Ids carried by more than one entry; only for these can a token's text differ from
    /// `id_to_token(id)`.
    shared_ids: AHashSet<u32>,
    first: Trie,
    rest: Trie,
    /// The short keys of `first`, for checking a whole word in one probe.
    first_short: ShortMap,
    unk_token: String,
    /// The unknown token's id, if it is in the vocabulary.
    unk_id: Option<u32>,
    continuing_subword_prefix: String,
    max_input_chars_per_word: usize,
    /// Names this model's per-thread word caches.
    uid: u64,
    /// The id of each one-byte word (ASCII) that is one token, else `NO_ID`: punctuation and
    /// one-letter words are about a quarter of prose words and half of code's.
    ascii_ids: [u32; 128],
}

/// `ascii_ids` marks a word that is not one token (or whose id is this value) with it.
const NO_ID: u32 = u32::MAX;

/// entry → id, id → entry, and the ids carried by several entries.
pub(super) type VocabTables = (
    AHashMap<String, u32>,
    AHashMap<u32, Box<str>>,
    AHashSet<u32>,
);

/// Turn (entry, id) pairs, in order, into the lookup tables: a repeated entry keeps its last id,
/// and an id shared by several entries decodes to the one that came last.
pub(super) fn build_vocab(pairs: Vec<(String, u32)>) -> VocabTables {
    let mut last: AHashMap<String, (u32, usize)> = AHashMap::with_capacity(pairs.len());
    for (pos, (token, id)) in pairs.into_iter().enumerate() {
        last.insert(token, (id, pos));
    }
    let mut by_id: AHashMap<u32, (usize, &str)> = AHashMap::with_capacity(last.len());
    let mut shared = AHashSet::new();
    for (token, &(id, pos)) in &last {
        match by_id.get_mut(&id) {
            Some(slot) => {
                shared.insert(id);
                if pos > slot.0 {
                    *slot = (pos, token.as_str());
                }
            }
            None => {
                by_id.insert(id, (pos, token.as_str()));
            }
        }
    }
    let vocab_r = by_id
        .into_iter()
        .map(|(id, (_, t))| (id, Box::from(t)))
        .collect();
    let vocab = last.into_iter().map(|(t, (id, _))| (t, id)).collect();
    (vocab, vocab_r, shared)
}

/// The id → entry map as a table, or an empty one when the ids are too sparse for it.
pub(super) fn dense_table(vocab_r: &AHashMap<u32, Box<str>>) -> Vec<Option<Box<str>>> {
    let Some(&max) = vocab_r.keys().max() else {
        return Vec::new();
    };
    if max as usize > 2 * vocab_r.len() + 1024 {
        return Vec::new();
    }
    let mut t = vec![None; max as usize + 1];
    for (&id, tok) in vocab_r {
        t[id as usize] = Some(tok.clone());
    }
    t
}

/// Read a tokenizer.json vocabulary object `{entry: id}` (in the order serde_json gives).
pub(super) fn vocab_from_json(v: &Value, field: &str) -> Result<Vec<(String, u32)>> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::invalid(format!("{field}: expected an object {{token: id}}")))?;
    let mut pairs = Vec::with_capacity(obj.len());
    for (token, id) in obj {
        let id = id
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{field}[{token:?}]: expected an id (an integer from 0 to 4294967295), got {id}"
                ))
            })?;
        pairs.push((token.clone(), id));
    }
    Ok(pairs)
}

/// The `model` object, checking that a `type`, when present, is `expected`.
pub(super) fn model_object<'a>(
    v: &'a Value,
    expected: &str,
) -> Result<&'a serde_json::Map<String, Value>> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::invalid("model: expected an object"))?;
    if let Some(t) = obj.get("type") {
        if t.as_str() != Some(expected) {
            return Err(Error::invalid(format!(
                "model.type: expected \"{expected}\", got {t}"
            )));
        }
    }
    Ok(obj)
}

/// A required string field of the model object.
pub(super) fn required_str<'a>(
    obj: &'a serde_json::Map<String, Value>,
    name: &str,
) -> Result<&'a str> {
    match obj.get(name) {
        None => Err(Error::invalid(format!("model.{name}: missing field"))),
        Some(v) => v
            .as_str()
            .ok_or_else(|| Error::invalid(format!("model.{name}: expected a string, got {v}"))),
    }
}

impl WordPiece {
    /// Build from (entry, id) pairs in order; see [`build_vocab`] for repeats.
    pub fn new(
        vocab: Vec<(String, u32)>,
        unk_token: impl Into<String>,
        continuing_subword_prefix: impl Into<String>,
        max_input_chars_per_word: usize,
    ) -> Self {
        let (vocab, vocab_r, shared_ids) = build_vocab(vocab);
        let prefix: String = continuing_subword_prefix.into();
        // Keys go in sorted, so the trie's nodes are numbered in depth-first order: a walk
        // along a word reads nearby memory instead of nodes scattered in hash order. The
        // content (each key and its id) is the same in any order, keys being distinct.
        let mut keys: Vec<(&str, u32)> = vocab.iter().map(|(t, &id)| (t.as_str(), id)).collect();
        keys.sort_unstable();
        let rest_keys: Vec<(&[u8], u32)> = keys
            .iter()
            .filter_map(|&(t, id)| {
                t.strip_prefix(prefix.as_str())
                    .map(|suffix| (suffix.as_bytes(), id))
            })
            .collect();
        let first = Trie::from_pairs(keys.iter().map(|&(t, id)| (t.as_bytes(), id)));
        let first_short = ShortMap::new(keys.iter().map(|&(t, id)| (t.as_bytes(), id)));
        let rest = Trie::from_pairs(rest_keys.iter().copied());
        let dense_r = dense_table(&vocab_r);
        let unk_token: String = unk_token.into();
        let unk_id = vocab.get(&unk_token).copied();
        let mut wp = WordPiece {
            d: Box::new(WordPieceData {
                vocab,
                vocab_r,
                dense_r,
                shared_ids,
                first,
                rest,
                first_short,
                unk_token,
                unk_id,
                continuing_subword_prefix: prefix,
                max_input_chars_per_word,
                uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
                ascii_ids: [NO_ID; 128],
            }),
        };
        // Each one-byte word through `word_ids` itself, so the table holds exactly its answer.
        let mut table = [NO_ID; 128];
        let mut ids = Vec::new();
        for (b, slot) in (0u8..).zip(table.iter_mut()) {
            ids.clear();
            if wp.word_ids(&[b], &mut ids).is_ok() {
                if let [id] = ids[..] {
                    *slot = id;
                }
            }
        }
        wp.d.ascii_ids = table;
        wp
    }

    /// The id of the one-byte word `b`, when it is a single token whose id is not `NO_ID`
    /// (`None` otherwise: the caller takes the word path, which then also raises any error).
    #[inline]
    pub(crate) fn ascii_byte_id(&self, b: u8) -> Option<u32> {
        self.d
            .ascii_ids
            .get(usize::from(b))
            .copied()
            .filter(|&id| id != NO_ID)
    }

    /// Build from the tokenizer.json `model` object. `unk_token`, `continuing_subword_prefix`,
    /// `max_input_chars_per_word` and `vocab` are all required there (as in `tokenizers`).
    pub fn from_json(v: &Value) -> Result<Self> {
        let obj = model_object(v, "WordPiece")?;
        let vocab = match obj.get("vocab") {
            Some(vocab) => vocab_from_json(vocab, "model.vocab")?,
            None => return Err(Error::invalid("model.vocab: missing field")),
        };
        let unk = required_str(obj, "unk_token")?;
        let prefix = required_str(obj, "continuing_subword_prefix")?;
        let max = match obj.get("max_input_chars_per_word") {
            None => {
                return Err(Error::invalid(
                    "model.max_input_chars_per_word: missing field",
                ))
            }
            Some(m) => m
                .as_u64()
                .and_then(|m| usize::try_from(m).ok())
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "model.max_input_chars_per_word: expected a non-negative integer, got {m}"
                    ))
                })?,
        };
        Ok(WordPiece::new(vocab, unk, prefix, max))
    }

    pub fn unk_token(&self) -> &str {
        &self.d.unk_token
    }
    pub fn continuing_subword_prefix(&self) -> &str {
        &self.d.continuing_subword_prefix
    }
    pub fn max_input_chars_per_word(&self) -> usize {
        self.d.max_input_chars_per_word
    }

    fn push_unk(&self, len: usize, out: &mut Vec<Token>) -> Result<()> {
        let id = self.unk_id()?;
        out.push(self.token(id, || self.d.unk_token.clone(), 0, len));
        Ok(())
    }

    /// A token whose text is `text()`, carrying that text only when it is not what `id`
    /// decodes to (possible only for an id shared by several entries).
    #[inline]
    fn token(&self, id: u32, text: impl FnOnce() -> String, start: usize, end: usize) -> Token {
        if self.d.shared_ids.is_empty() || !self.d.shared_ids.contains(&id) {
            return Token::new(id, start, end);
        }
        let text = text();
        if self.d.vocab_r.get(&id).map(|t| &**t) == Some(text.as_str()) {
            Token::new(id, start, end)
        } else {
            Token::with_value(id, &text, start, end)
        }
    }
}

/// Longest key a [`ShortMap`] holds inline.
const SHORT_MAX: usize = 27;

/// One slot: the key's bytes inline (`len` 0 marks an empty slot; keys are never empty), so
/// a probe reads one 32-byte line-aligned slot.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    key: [u8; SHORT_MAX],
    len: u8,
    id: u32,
}

const EMPTY: Slot = Slot {
    key: [0; SHORT_MAX],
    len: 0,
    id: 0,
};

/// An open-addressing hash table (linear probing, at most half full) of the keys of at most
/// `SHORT_MAX` bytes. Longer keys are simply not in it; callers fall back to the trie.
/// A 1-byte tag per slot (0 when empty) is checked first: the tags of a 30k vocabulary take
/// 64 KB and stay in cache, so a word that is not an entry rarely costs a slot load.
struct ShortMap {
    tags: Vec<u8>,
    slots: Vec<Slot>,
    mask: usize,
}

/// The tag of a hash: never 0, and from other bits than the slot index.
#[inline]
fn tag_of(h: u64) -> u8 {
    ((h >> 57) as u8) | 0x80
}

impl ShortMap {
    /// A repeated key keeps its last id, as the trie does.
    fn new<'a>(pairs: impl Iterator<Item = (&'a [u8], u32)>) -> ShortMap {
        let pairs: Vec<(&[u8], u32)> = pairs
            .filter(|(k, _)| !k.is_empty() && k.len() <= SHORT_MAX)
            .collect();
        let size = (pairs.len() * 2).next_power_of_two().max(16);
        let mut m = ShortMap {
            tags: vec![0; size],
            slots: vec![EMPTY; size],
            mask: size - 1,
        };
        for (k, id) in pairs {
            let h = short_hash(k);
            let mut i = h as usize & m.mask;
            loop {
                let slot = &mut m.slots[i];
                if slot.len == 0 || &slot.key[..slot.len as usize] == k {
                    slot.key[..k.len()].copy_from_slice(k);
                    slot.len = k.len() as u8;
                    slot.id = id;
                    m.tags[i] = tag_of(h);
                    break;
                }
                i = (i + 1) & m.mask;
            }
        }
        m
    }

    /// The id of `k`, if it is one of the short keys.
    #[inline]
    fn get(&self, k: &[u8]) -> Option<u32> {
        if k.is_empty() || k.len() > SHORT_MAX {
            return None;
        }
        let h = short_hash(k);
        let tag = tag_of(h);
        let mut i = h as usize & self.mask;
        // At most half the slots are used, so an empty slot ends every probe sequence.
        loop {
            let t = *self.tags.get(i)?;
            if t == 0 {
                return None;
            }
            if t == tag {
                let slot = self.slots.get(i)?;
                if slot.len as usize == k.len() && slot.key.get(..k.len()) == Some(k) {
                    return Some(slot.id);
                }
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// A quick multiplicative hash over 8-byte chunks (keys are at most `SHORT_MAX` bytes).
#[inline]
fn short_hash(k: &[u8]) -> u64 {
    let mut h = (k.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for c in k.chunks(8) {
        let v = match <[u8; 8]>::try_from(c) {
            Ok(b) => u64::from_le_bytes(b),
            Err(_) => c
                .iter()
                .enumerate()
                .fold(0, |v, (j, &b)| v | u64::from(b) << (8 * j)),
        };
        h = (h.rotate_left(23) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 32)
}

/// Whether the UTF-8 `s` has more than `max` scalar values.
#[inline]
fn more_chars_than(s: &[u8], max: usize) -> bool {
    // Each scalar value takes at most 4 bytes and at least 1.
    if s.len() <= max {
        return false;
    }
    if s.len() / 4 > max {
        return true;
    }
    // Scalar values are the bytes that are not continuation bytes (0b10xx_xxxx).
    s.iter().filter(|&&b| (b as i8) >= -0x40).count() > max
}

impl WordPiece {
    /// Greedy longest match over `bytes` (a whole word, valid UTF-8), calling `f(id, start,
    /// end)` for each piece; false when the word is one unknown token instead (too long, or a
    /// start with no match; `f` may have been called for earlier pieces then).
    #[inline]
    fn pieces(&self, bytes: &[u8], mut f: impl FnMut(u32, usize, usize)) -> bool {
        if more_chars_than(bytes, self.d.max_input_chars_per_word) {
            return false;
        }
        // Entries are whole strings and `start` is a character boundary, so every match ends
        // on a character boundary: the longest match is what shortening one scalar value at a
        // time finds first. When the whole word is an entry (most words of prose), it is that
        // longest match, and one probe of the short-key table finds it; the table holds the
        // trie's own keys and ids, so both give the same answer. Only the first step probes:
        // after it, a word is one that splits, and its remainders rarely are entries (a miss
        // would cost a cache line for nothing).
        if let Some(id) = self.d.first_short.get(bytes) {
            f(id, 0, bytes.len());
            return true;
        }
        let mut start = 0;
        while let Some(rest) = bytes.get(start..).filter(|r| !r.is_empty()) {
            let trie = if start == 0 {
                &self.d.first
            } else {
                &self.d.rest
            };
            let Some((len, id)) = trie.longest_prefix(rest) else {
                return false;
            };
            f(id, start, start + len);
            start += len;
        }
        true
    }

    /// The ids of one word appended to `out`: the ids of `tokenize`, without building tokens.
    #[inline]
    pub(crate) fn word_ids(&self, word: &[u8], out: &mut Vec<u32>) -> Result<()> {
        if word.is_empty() {
            return Ok(());
        }
        let base = out.len();
        if self.pieces(word, |id, _, _| out.push(id)) {
            return Ok(());
        }
        out.truncate(base);
        out.push(self.unk_id()?);
        Ok(())
    }

    /// The ids of the word `key` holds, from `cache` or computed and remembered there.
    #[inline]
    pub(crate) fn key_ids(
        &self,
        cache: &mut WordCache,
        key: &WordKey,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        if cache.get(key, out) {
            return Ok(());
        }
        self.key_ids_missed(cache, key, out)
    }

    /// `key_ids` when the cache does not have the word.
    #[inline(never)]
    fn key_ids_missed(
        &self,
        cache: &mut WordCache,
        key: &WordKey,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let (buf, len) = key.bytes();
        let base = out.len();
        self.word_ids(buf.get(..len).unwrap_or_default(), out)?;
        // (A word of more ids than a slot holds is simply recomputed next time.)
        let _ = cache.insert(key, out.get(base..).unwrap_or_default());
        Ok(())
    }

    /// `word_ids` through `cache` for the words it can hold.
    #[inline]
    pub(crate) fn cached_word_ids(
        &self,
        cache: &mut WordCache,
        word: &[u8],
        out: &mut Vec<u32>,
    ) -> Result<()> {
        match WordKey::of(word) {
            Some(key) => self.key_ids(cache, &key, out),
            None => self.word_ids(word, out),
        }
    }

    /// This model's word cache among a thread's caches.
    pub(crate) fn cache_in<'a>(&self, caches: &'a mut Vec<(u64, WordCache)>) -> &'a mut WordCache {
        word_cache::cache_for(caches, self.d.uid)
    }

    fn unk_id(&self) -> Result<u32> {
        self.d.unk_id.ok_or_else(|| {
            Error::invalid(format!(
                "WordPiece: the unknown token {:?} is needed but missing from the vocabulary",
                self.d.unk_token
            ))
        })
    }
}

impl Model for WordPiece {
    fn tokenize(&self, piece: &str, out: &mut Vec<Token>) -> Result<()> {
        if piece.is_empty() {
            return Ok(());
        }
        let base = out.len();
        let whole = self.pieces(piece.as_bytes(), |id, start, end| {
            let tok = if start == 0 {
                self.token(id, || piece[..end].to_owned(), 0, end)
            } else {
                self.token(
                    id,
                    || format!("{}{}", self.d.continuing_subword_prefix, &piece[start..end]),
                    start,
                    end,
                )
            };
            out.push(tok);
        });
        if !whole {
            out.truncate(base);
            return self.push_unk(piece.len(), out);
        }
        Ok(())
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.d.vocab.get(token).copied()
    }

    fn id_to_token(&self, id: u32) -> Option<&str> {
        if !self.d.dense_r.is_empty() {
            return self.d.dense_r.get(id as usize).and_then(|t| t.as_deref());
        }
        self.d.vocab_r.get(&id).map(|t| &**t)
    }

    fn vocab_size(&self) -> usize {
        self.d.vocab.len()
    }

    fn vocab(&self) -> HashMap<String, u32> {
        self.d
            .vocab
            .iter()
            .map(|(t, &id)| (t.clone(), id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wp(entries: &[&str], max: usize) -> WordPiece {
        let v = entries
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .collect();
        WordPiece::new(v, "[UNK]", "##", max)
    }

    type Row = (u32, Option<String>, (usize, usize));

    fn run(m: &WordPiece, s: &str) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        m.tokenize(s, &mut out)?;
        Ok(out
            .into_iter()
            .map(|t| (t.id, t.value.map(String::from), t.offsets))
            .collect())
    }

    fn ids(m: &WordPiece, s: &str) -> Vec<(u32, (usize, usize))> {
        run(m, s)
            .unwrap()
            .into_iter()
            .map(|(id, _, o)| (id, o))
            .collect()
    }

    /// The one-byte table against `word_ids`, with entries missing, an id equal to `NO_ID`,
    /// no unknown token, and a zero length limit.
    #[test]
    fn ascii_byte_ids_equal_word_ids() {
        let mut entries: Vec<(String, u32)> = (0u8..128)
            .step_by(3)
            .map(|b| (char::from(b).to_string(), u32::from(b) * 7))
            .collect();
        entries.push(("x".into(), NO_ID));
        for (unk, max) in [("[UNK]", 100), ("none", 100), ("[UNK]", 0)] {
            let mut v = entries.clone();
            v.push(("[UNK]".into(), 5));
            let m = WordPiece::new(v, unk, "##", max);
            for b in 0u8..128 {
                let mut ids = Vec::new();
                let want = m
                    .word_ids(&[b], &mut ids)
                    .ok()
                    .and_then(|()| match ids[..] {
                        [id] if id != NO_ID => Some(id),
                        _ => None,
                    });
                assert_eq!(m.ascii_byte_id(b), want, "{b} {unk} {max}");
            }
            assert_eq!(m.ascii_byte_id(200), None);
        }
    }

    #[test]
    fn short_map_holds_exactly_the_short_keys() {
        let keys: Vec<String> = (0..3000u32)
            .map(|i| format!("{i:x}{}", "z".repeat((i % 31) as usize)))
            .collect();
        let m = ShortMap::new(keys.iter().zip(0..).map(|(k, i)| (k.as_bytes(), i)));
        for (i, k) in keys.iter().enumerate() {
            let want = (k.len() <= SHORT_MAX).then_some(i as u32);
            assert_eq!(m.get(k.as_bytes()), want, "{k}");
            assert_eq!(m.get(format!("{k}y").as_bytes()), None);
        }
        assert_eq!(m.get(b""), None);
    }

    /// The model against the reference algorithm written plainly (shorten the candidate one
    /// scalar value at a time, look it up in the vocabulary), on generated words.
    #[test]
    fn tokenize_equals_plain_greedy_longest_match() {
        let entries = [
            "[UNK]",
            "a",
            "ab",
            "abc",
            "b",
            "##a",
            "##b",
            "##bc",
            "##c",
            "é",
            "##é",
            "aé",
            "##aé",
            "c",
            "bca",
            "##cab",
            "abcabcabcabcabcabcabcabcabcab",
            "##abcabcabcabcabcabcabcabcabca",
        ];
        let m = wp(&entries, 40);
        let vocab: AHashMap<&str, u32> = entries.iter().zip(0..).map(|(&e, i)| (e, i)).collect();
        let plain = |w: &str| -> Vec<(u32, (usize, usize))> {
            let chars: Vec<(usize, char)> = w.char_indices().collect();
            let (mut out, mut s) = (Vec::new(), 0);
            while s < chars.len() {
                let b = chars[s].0;
                let hit = (s + 1..=chars.len()).rev().find_map(|e| {
                    let end = chars.get(e).map_or(w.len(), |x| x.0);
                    let cand = if s == 0 {
                        w[b..end].to_string()
                    } else {
                        format!("##{}", &w[b..end])
                    };
                    vocab.get(cand.as_str()).map(|&id| (id, (b, end), e))
                });
                let Some((id, off, e)) = hit else {
                    return vec![(0, (0, w.len()))];
                };
                out.push((id, off));
                s = e;
            }
            out
        };
        let alphabet = ['a', 'b', 'c', 'é', 'x'];
        let mut next = crate::test_rng(0x1234_5678_9abc_def1u64);
        for _ in 0..5000 {
            let state = next();
            let len = 1 + (state % 35) as usize;
            let w: String = (0..len)
                .map(|i| {
                    alphabet[((state >> (i % 50)) as usize + i * 7) % 4 + usize::from(i % 13 == 12)]
                })
                .collect();
            let want = if w.chars().count() > 40 {
                vec![(0, (0, w.len()))]
            } else {
                plain(&w)
            };
            assert_eq!(ids(&m, &w), want, "{w}");
        }
    }

    #[test]
    fn greedy_longest_match_with_prefix() {
        // 0 [UNK], 1 un, 2 ##aff, 3 ##able, 4 una, 5 ##ffable
        let m = wp(&["[UNK]", "un", "##aff", "##able", "una", "##ffable"], 100);
        // "una" is longer than "un", so it wins at start 0 even though "un ##aff ##able" exists.
        assert_eq!(ids(&m, "unaffable"), vec![(4, (0, 3)), (5, (3, 9))]);
        // An entry without the prefix is not matched after the start.
        assert_eq!(ids(&m, "unun"), vec![(0, (0, 4))]);
    }

    #[test]
    fn no_match_makes_whole_word_unknown() {
        let m = wp(&["[UNK]", "a", "##b"], 100);
        assert_eq!(ids(&m, "ab"), vec![(1, (0, 1)), (2, (1, 2))]);
        // "c" cannot be matched after "ab": pieces found so far are dropped.
        assert_eq!(ids(&m, "abc"), vec![(0, (0, 3))]);
        // Offsets are bytes of the piece: "ab𝔸x" is 7 bytes.
        assert_eq!(ids(&m, "ab𝔸x"), vec![(0, (0, 7))]);
    }

    #[test]
    fn limit_counts_scalar_values() {
        let m = wp(&["[UNK]", "𝔸", "##𝔸"], 3);
        // Three astral characters are 3 scalar values (6 UTF-16 units, 12 bytes): within limit.
        assert_eq!(ids(&m, "𝔸𝔸𝔸"), vec![(1, (0, 4)), (2, (4, 8)), (2, (8, 12))]);
        // Four exceed it: one unknown over the whole word.
        assert_eq!(ids(&m, "𝔸𝔸𝔸𝔸"), vec![(0, (0, 16))]);
        let m0 = wp(&["[UNK]", "a"], 0);
        assert_eq!(ids(&m0, "a"), vec![(0, (0, 1))]);
    }

    #[test]
    fn shortening_never_splits_a_character() {
        // "é" is two bytes; an entry equal to its first byte cannot exist (entries are strings),
        // so the longest match stops on character boundaries: "aé" then "##b".
        let m = wp(&["[UNK]", "a", "aé", "##é", "##b"], 100);
        assert_eq!(ids(&m, "aéb"), vec![(2, (0, 3)), (4, (3, 4))]);
        assert_eq!(ids(&m, "aéé"), vec![(2, (0, 3)), (3, (3, 5))]);
    }

    #[test]
    fn missing_unknown_is_an_error_only_when_needed() {
        let m = wp(&["a", "##b"], 2);
        assert_eq!(ids(&m, "ab"), vec![(0, (0, 1)), (1, (1, 2))]);
        let e = run(&m, "ac").unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::InvalidData);
        assert!(
            run(&m, "abb").is_err(),
            "over the limit needs the unknown too"
        );
    }

    #[test]
    fn repeated_ids_decode_to_last_entry() {
        // "x" and "y" share id 5; the last one given ("y") is what id 5 decodes to.
        let v = vec![
            ("[UNK]".to_string(), 0),
            ("x".to_string(), 5),
            ("y".to_string(), 5),
            ("##x".to_string(), 6),
        ];
        let m = WordPiece::new(v, "[UNK]", "##", 100);
        assert_eq!(m.id_to_token(5), Some("y"));
        assert_eq!(m.vocab_size(), 4);
        assert_eq!(run(&m, "y").unwrap(), vec![(5, None, (0, 1))]);
        assert_eq!(
            run(&m, "xx").unwrap(),
            vec![(5, Some("x".to_string()), (0, 1)), (6, None, (1, 2))]
        );
        // A repeated entry keeps its last id.
        let v = vec![("a".to_string(), 1), ("a".to_string(), 2)];
        let m = WordPiece::new(v, "[UNK]", "##", 100);
        assert_eq!(m.token_to_id("a"), Some(2));
        assert_eq!(m.id_to_token(1), None);
        assert_eq!(m.vocab_size(), 1);
    }

    #[test]
    fn shared_id_in_a_file_decodes_to_the_entry_written_last() {
        // File order, not key order: "y" comes first, "x" last.
        let v: Value = serde_json::from_str(
            r#"{"unk_token": "[UNK]", "continuing_subword_prefix": "@@",
                "max_input_chars_per_word": 100, "vocab": {"y": 5, "x": 5, "[UNK]": 0}}"#,
        )
        .unwrap();
        let m = WordPiece::from_json(&v).unwrap();
        assert_eq!(m.id_to_token(5), Some("x"));
        assert_eq!(
            run(&m, "y").unwrap(),
            vec![(5, Some("y".to_string()), (0, 1))]
        );
    }

    #[test]
    fn shared_unknown_id_carries_its_text() {
        let v = vec![("[UNK]".to_string(), 0), ("<unk>".to_string(), 0)];
        let m = WordPiece::new(v, "[UNK]", "##", 100);
        assert_eq!(m.id_to_token(0), Some("<unk>"));
        assert_eq!(
            run(&m, "q").unwrap(),
            vec![(0, Some("[UNK]".to_string()), (0, 1))]
        );
    }

    #[test]
    fn custom_and_empty_prefix() {
        let v = vec![("[UNK]", 0), ("a", 1), ("@@b", 2), ("b", 3)]
            .into_iter()
            .map(|(t, i)| (t.to_string(), i))
            .collect::<Vec<_>>();
        let m = WordPiece::new(v.clone(), "[UNK]", "@@", 100);
        assert_eq!(ids(&m, "ab"), vec![(1, (0, 1)), (2, (1, 2))]);
        let m = WordPiece::new(v, "[UNK]", "", 100);
        assert_eq!(ids(&m, "ab"), vec![(1, (0, 1)), (3, (1, 2))]);
    }

    #[test]
    fn from_json_requires_file_fields() {
        let ok = json!({"unk_token": "[UNK]", "continuing_subword_prefix": "##",
                        "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1}});
        let m = WordPiece::from_json(&ok).unwrap();
        assert_eq!(m.token_to_id("a"), Some(1));
        for field in [
            "unk_token",
            "continuing_subword_prefix",
            "max_input_chars_per_word",
            "vocab",
        ] {
            let mut v = ok.clone();
            v.as_object_mut().unwrap().remove(field);
            let e = WordPiece::from_json(&v).err().unwrap();
            assert!(e.message.contains(field), "{}", e.message);
        }
        let mut v = ok.clone();
        v["vocab"]["b"] = json!(-1);
        let e = WordPiece::from_json(&v).err().unwrap();
        assert!(e.message.starts_with("model.vocab[\"b\"]"), "{}", e.message);
        let mut v = ok.clone();
        v["type"] = json!("WordLevel");
        assert!(WordPiece::from_json(&v).is_err());
        v["type"] = json!("WordPiece");
        assert!(WordPiece::from_json(&v).is_ok());
    }
}
