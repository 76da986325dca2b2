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
//! Cost: O(len × longest piece) trie steps (one load each, double-array trie); the
//! per-position table is a reused thread-local buffer, so a call allocates only the output (and
//! the text of a fused unknown run).
//!
//! Words are cached, as the reference caches them: the result is a pure function of the word
//! (the reference, too, runs Viterbi on each pre-tokenized word alone), so replaying a cached
//! segmentation is exact. Only results without a carried value are cached (a fused unknown
//! run carries its text); the tokens are stored as (id, start, end), so byte-fallback tokens
//! keep their shared span.

use super::trie::Trie;
use super::wordpiece::{WordCache as ShortWords, WordKey};
use super::{Model, Token};
use crate::error::{Error, Result};
use ahash::AHashMap;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

const UNK_PENALTY: f64 = 10.0;
const NO_START: u32 = u32::MAX;

/// Words shorter than this (in bytes) are cached; offsets then fit in a byte.
const CACHE_MAX_WORD: usize = 256;
/// Entries of a thread's long-word map; a full map is emptied before it takes the next word,
/// so memory stays bounded and the cache follows the text when its vocabulary shifts.
const LONG_ENTRIES: usize = 1 << 15;
/// Slots of a thread's short-word cache (32 bytes each): the distinct words of a few MB of
/// prose (some 40,000) fit.
const SHORT_SLOTS: usize = 1 << 16;
/// Models whose caches a thread keeps at once.
const CACHE_MODELS: usize = 4;

/// Source of `UnigramData::uid`.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// One cached token: id and its byte span inside the word.
#[derive(Clone, Copy)]
struct Cached {
    id: u32,
    start: u8,
    end: u8,
}

/// Where one word's key bytes and tokens sit in the slabs.
#[derive(Clone, Copy)]
struct Entry {
    key: u32,
    key_len: u32,
    toks: u32,
    toks_len: u32,
    /// Some token carried a value (a fused unknown run), which `get` cannot rebuild: the
    /// entry serves `get_ids` only.
    ids_only: bool,
}

/// Words of any form (below `CACHE_MAX_WORD` bytes) → their tokens: a map from the word's
/// 64-bit hash to its entry; keys and tokens live in two growing slabs rather than in two
/// small heap blocks per word, which (kept alive among the pipeline's short-lived blocks)
/// fragmented the allocator. A lookup compares the stored key bytes, so a hash collision is
/// a miss, never a wrong hit.
#[derive(Default)]
struct LongWords {
    index: AHashMap<u64, u32>,
    entries: Vec<Entry>,
    keys: Vec<u8>,
    toks: Vec<Cached>,
}

impl LongWords {
    fn entry(&self, h: u64, word: &str) -> Option<&Entry> {
        let e = self.entries.get(*self.index.get(&h)? as usize)?;
        let key = self
            .keys
            .get(e.key as usize..(e.key + e.key_len) as usize)?;
        (key == word.as_bytes()).then_some(e)
    }

    fn tokens(&self, e: &Entry) -> Option<&[Cached]> {
        self.toks
            .get(e.toks as usize..(e.toks + e.toks_len) as usize)
    }

    fn get(&self, h: u64, word: &str, out: &mut Vec<Token>) -> bool {
        let Some(e) = self.entry(h, word).filter(|e| !e.ids_only) else {
            return false;
        };
        let Some(toks) = self.tokens(e) else {
            return false;
        };
        out.extend(
            toks.iter()
                .map(|c| Token::new(c.id, c.start as usize, c.end as usize)),
        );
        true
    }

    /// As `get`, pushing only the ids.
    fn get_ids(&self, h: u64, word: &str, out: &mut Vec<u32>) -> bool {
        let Some(toks) = self.entry(h, word).and_then(|e| self.tokens(e)) else {
            return false;
        };
        out.extend(toks.iter().map(|c| c.id));
        true
    }

    /// Keep the ids alone of `word` (an `ids_only` entry).
    fn set_ids(&mut self, h: u64, word: &str, ids: &[u32]) {
        if word.len() >= CACHE_MAX_WORD || self.index.contains_key(&h) {
            return;
        }
        let toks = ids.iter().map(|&id| Cached {
            id,
            start: 0,
            end: 0,
        });
        self.insert(h, word, true, toks);
    }

    /// Append `word`'s entry (its key bytes and tokens in the slabs), emptying a full map first.
    fn insert(
        &mut self,
        h: u64,
        word: &str,
        ids_only: bool,
        toks: impl ExactSizeIterator<Item = Cached>,
    ) {
        self.make_room();
        let e = Entry {
            key: self.keys.len() as u32,
            key_len: word.len() as u32,
            toks: self.toks.len() as u32,
            toks_len: toks.len() as u32,
            ids_only,
        };
        self.keys.extend_from_slice(word.as_bytes());
        self.toks.extend(toks);
        let i = self.entries.len() as u32;
        self.entries.push(e);
        self.index.insert(h, i);
    }

    /// Start over when full.
    fn make_room(&mut self) {
        if self.entries.len() >= LONG_ENTRIES {
            self.index.clear();
            self.entries.clear();
            self.keys.clear();
            self.toks.clear();
        }
    }

    fn set(&mut self, h: u64, word: &str, tokens: &[Token]) {
        // (The ids of a word are a pure function of it, values or not.) An ids-only entry of
        // the same word is replaced, unless the tokens cannot be rebuilt from the entry.
        if tokens.iter().any(|t| t.offsets.1 > 255)
            || self.index.contains_key(&h)
                && (self.entry(h, word).is_none_or(|e| !e.ids_only)
                    || tokens.iter().any(|t| t.value.is_some()))
        {
            return;
        }
        let ids_only = tokens.iter().any(|t| t.value.is_some());
        let toks = tokens.iter().map(|t| Cached {
            id: t.id,
            start: t.offsets.0 as u8,
            end: t.offsets.1 as u8,
        });
        self.insert(h, word, ids_only, toks);
    }
}

/// A thread's caches for one model. Per thread, so a lookup takes no lock and threads never
/// wait on each other. Exact because the reference, too, runs Viterbi on each pre-tokenized
/// word alone: a word's tokens are a pure function of the word and the model.
pub(crate) struct WordCache {
    /// `▁` + 1..=16 bytes (the Metaspace words of most text) → ids, keyed by the bytes after
    /// the `▁`, inline: a lookup is a multiply-shift hash and integer compares.
    short: ShortWords,
    long: LongWords,
    hasher: ahash::RandomState,
}

impl WordCache {
    fn new() -> Self {
        WordCache {
            short: ShortWords::with_slots(SHORT_SLOTS),
            long: LongWords::default(),
            hasher: ahash::RandomState::new(),
        }
    }

    fn hash(&self, word: &str) -> u64 {
        self.hasher.hash_one(word.as_bytes())
    }
}

thread_local! {
    static CACHES: RefCell<Vec<(u64, WordCache)>> = const { RefCell::new(Vec::new()) };
}

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
    /// Names this model's per-thread word caches.
    uid: u64,
    /// Every score, and the unknown score, is within ±1e290: a sum of fewer than 2^32 of them
    /// (a path) is finite, so a reached position always scores above -inf.
    bounded: bool,
}

/// Best path ending at one byte position.
#[derive(Clone, Copy)]
struct Best {
    score: f64,
    /// Start of the last piece of the path, `NO_START` when no path ends here yet.
    start: u32,
    id: u32,
}

fn broken_table() -> Error {
    Error::other("Unigram: broken best-path table")
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
        const BOUND: f64 = 1e290;
        let bounded = pieces
            .iter()
            .map(|p| p.1)
            .chain([min_score - UNK_PENALTY])
            .all(|s| s.abs() <= BOUND);
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
                uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
                bounded,
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
        if self.d.bounded {
            self.forward_with::<true>(piece, best)
        } else {
            self.forward_with::<false>(piece, best)
        }
    }

    /// `forward`; `BOUNDED`: every path score is finite (see `UnigramData::bounded`), so an
    /// unreached position (score -inf) needs no test of its own.
    #[inline(always)]
    fn forward_with<const BOUNDED: bool>(&self, piece: &str, best: &mut Vec<Best>) -> Result<()> {
        let bytes = piece.as_bytes();
        let n = bytes.len();
        best.clear();
        best.resize(
            n + 1,
            Best {
                score: f64::NEG_INFINITY,
                start: NO_START,
                id: 0,
            },
        );
        if let Some(first) = best.first_mut() {
            first.score = 0.0;
        }
        let unk_score = self.d.min_score - UNK_PENALTY;
        let scores = &self.d.scores[..];
        let mut pos = 0;
        while pos < n {
            let Some(row) = best.get_mut(pos..) else {
                break;
            };
            // Every character boundary before `pos` has been given a path (or an error was
            // returned), so `row[0]` is final here.
            let here = row[0].score;
            let char_len = utf8_len(bytes[pos]);
            let mut has_single = false;
            self.d.trie.for_each_prefix(&bytes[pos..], |len, id| {
                let cand = here + scores.get(id as usize).copied().unwrap_or(0.0);
                if let Some(slot) = row.get_mut(len) {
                    // The `start` test stays unless bounded: an f64 sum may reach -inf on
                    // absurd scores.
                    if cand > slot.score || (!BOUNDED && slot.start == NO_START) {
                        *slot = Best {
                            score: cand,
                            start: pos as u32,
                            id,
                        };
                    }
                }
                has_single |= len == char_len;
            });
            if !has_single {
                let cand = here + unk_score;
                let end = (pos + char_len).min(n);
                if let Some(slot) = row.get_mut(end - pos) {
                    if cand > slot.score || (!BOUNDED && slot.start == NO_START) {
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
        if piece.len() >= CACHE_MAX_WORD {
            return self.tokenize_uncached(piece, out);
        }
        self.with_cache(|cache| {
            let Some(c) = cache else {
                return self.tokenize_uncached(piece, out);
            };
            let h = c.hash(piece);
            if c.long.get(h, piece, out) {
                return Ok(());
            }
            let base = out.len();
            self.tokenize_uncached(piece, out)?;
            c.long.set(h, piece, out.get(base..).unwrap_or_default());
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

impl Unigram {
    /// Run `f` with this thread's word cache of this model (made on first use), or with none
    /// when it is unavailable (a re-entrant call, or a thread being torn down).
    pub(crate) fn with_cache<T>(
        &self,
        f: impl FnOnce(Option<&mut WordCache>) -> Result<T>,
    ) -> Result<T> {
        let mut f = Some(f);
        let r = CACHES.try_with(|c| {
            let mut caches = c.try_borrow_mut().ok()?;
            let cache =
                crate::parallel::model_cache(&mut caches, self.d.uid, CACHE_MODELS, WordCache::new);
            f.take().map(|f| f(Some(cache)))
        });
        match (r, f) {
            (Ok(Some(r)), _) => r,
            (_, Some(f)) => f(None),
            // (`f` ran, so its result came back through `r`.)
            (_, None) => Err(Error::other("Unigram: word cache unavailable")),
        }
    }

    /// The ids `tokenize` gives for `word`, appended to `out` (the same segmentation; a hit
    /// copies ids without building tokens).
    pub fn word_ids(&self, word: &str, out: &mut Vec<u32>) -> Result<()> {
        self.with_cache(|cache| match word.strip_prefix('\u{2581}') {
            Some(rest) => {
                let mut buf = String::new();
                self.meta_word_ids(cache, rest, &mut buf, out)
            }
            None => self.long_word_ids(cache, word, out),
        })
    }

    /// The ids of the word `▁` + `rest`, appended to `out`, through `cache`; `buf` is scratch
    /// space (the word is spelled out there only on a miss).
    #[inline]
    pub(crate) fn meta_word_ids(
        &self,
        mut cache: Option<&mut WordCache>,
        rest: &str,
        buf: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let key = WordKey::of(rest.as_bytes());
        if let (Some(c), Some(k)) = (cache.as_deref_mut(), &key) {
            if c.short.get(k, out) {
                return Ok(());
            }
        }
        buf.clear();
        buf.push('\u{2581}');
        buf.push_str(rest);
        let Some(k) = &key else {
            return self.long_word_ids(cache, buf, out);
        };
        // A short word goes to the long map only when its ids do not fit a slot.
        let base = out.len();
        self.ids_uncached(buf, out)?;
        let Some(c) = cache else {
            return Ok(());
        };
        let ids = out.get(base..).unwrap_or_default();
        if !c.short.insert(k, ids) {
            c.long.set_ids(c.hash(buf), buf, ids);
        }
        Ok(())
    }

    /// The ids of any word through the long-word map of `cache`.
    fn long_word_ids(
        &self,
        cache: Option<&mut WordCache>,
        word: &str,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let cache = cache.filter(|_| word.len() < CACHE_MAX_WORD);
        let h = cache.as_ref().map_or(0, |c| c.hash(word));
        if let Some(c) = cache.as_ref() {
            if c.long.get_ids(h, word, out) {
                return Ok(());
            }
        }
        // The entry (ids only) is made whole when the token path meets the word.
        let base = out.len();
        self.ids_uncached(word, out)?;
        if let Some(c) = cache {
            c.long.set_ids(h, word, out.get(base..).unwrap_or_default());
        }
        Ok(())
    }

    /// The best-path table of `piece` (this thread's scratch buffer, filled by `forward`),
    /// handed to `walk`; nothing for an empty piece.
    fn with_best_path(&self, piece: &str, walk: impl FnOnce(&[Best]) -> Result<()>) -> Result<()> {
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
            let r = walk(best);
            if best.capacity() > (1 << 20) && best.len() < (1 << 16) {
                // Do not keep a huge buffer alive for one outsized piece.
                *best = Vec::new();
            }
            r
        })
    }

    /// The best path of a piece of `len` bytes walked back from its end, in reverse order:
    /// `emit(Some(id), start, end)` for a piece, `emit(None, start, end)` for a run of unknown
    /// pieces fused into one.
    fn walk_back(
        &self,
        best: &[Best],
        len: usize,
        mut emit: impl FnMut(Option<u32>, usize, usize),
    ) -> Result<()> {
        let mut end = len;
        // The unknown run being fused, as (start, end).
        let mut run: Option<(usize, usize)> = None;
        while end > 0 {
            let node = best.get(end).copied().ok_or_else(broken_table)?;
            let start = node.start as usize;
            if node.start == NO_START || start >= end {
                return Err(broken_table());
            }
            if Some(node.id) == self.d.unk_id {
                run = Some((start, run.map_or(end, |r| r.1)));
            } else {
                if let Some((s, e)) = run.take() {
                    emit(None, s, e);
                }
                emit(Some(node.id), start, end);
            }
            end = start;
        }
        if let Some((s, e)) = run {
            emit(None, s, e);
        }
        Ok(())
    }

    /// The ids of `piece`'s segmentation (`tokenize_uncached`'s ids), appended to `out`,
    /// without building tokens.
    fn ids_uncached(&self, piece: &str, out: &mut Vec<u32>) -> Result<()> {
        self.with_best_path(piece, |best| {
            let base = out.len();
            self.walk_back(best, piece.len(), |id, s, e| match id {
                Some(id) => out.push(id),
                None => self.push_unknown_run_ids(piece.get(s..e).unwrap_or_default(), out),
            })?;
            if let Some(ids) = out.get_mut(base..) {
                ids.reverse();
            }
            Ok(())
        })
    }

    /// `push_unknown_run`'s ids (in reverse order: the caller reverses).
    fn push_unknown_run_ids(&self, text: &str, out: &mut Vec<u32>) {
        if let Some(&id) = self.d.token_to_id.get(text) {
            out.push(id);
        } else if self.d.byte_fallback
            && text
                .bytes()
                .all(|b| self.d.byte_ids[b as usize] != u32::MAX)
        {
            out.extend(text.bytes().rev().map(|b| self.d.byte_ids[b as usize]));
        } else {
            out.push(self.d.unk_id.unwrap_or(0));
        }
    }

    /// The segmentation itself, without the cache.
    fn tokenize_uncached(&self, piece: &str, out: &mut Vec<Token>) -> Result<()> {
        self.with_best_path(piece, |best| {
            let base = out.len();
            self.walk_back(best, piece.len(), |id, s, e| match id {
                Some(id) => out.push(Token::new(id, s, e)),
                None => self.push_unknown_run(piece, s, e, out),
            })?;
            if let Some(toks) = out.get_mut(base..) {
                toks.reverse();
            }
            Ok(())
        })
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

    /// The forward pass as it was before the speed work: a naive prefix search (every length,
    /// looked up in a map holding the last id of each piece) and the same update rules.
    fn reference_forward(m: &Unigram, piece: &str) -> Result<Vec<(u64, u32, u32)>> {
        let bytes = piece.as_bytes();
        let n = bytes.len();
        // (Unreached positions read -inf, as `forward` leaves them.)
        let mut best = vec![(f64::NEG_INFINITY, NO_START, 0u32); n + 1];
        best[0].0 = 0.0;
        let unk_score = m.d.min_score - UNK_PENALTY;
        let max_len = m.d.token_to_id.keys().map(|k| k.len()).max().unwrap_or(0);
        let mut pos = 0;
        while pos < n {
            let here = best[pos].0;
            let char_len = utf8_len(bytes[pos]);
            let mut has_single = false;
            for len in 1..=(n - pos).min(max_len) {
                let Ok(sub) = std::str::from_utf8(&bytes[pos..pos + len]) else {
                    continue;
                };
                let Some(&id) = m.d.token_to_id.get(sub) else {
                    continue;
                };
                let cand = here + m.d.scores[id as usize];
                let slot = &mut best[pos + len];
                if slot.1 == NO_START || cand > slot.0 {
                    *slot = (cand, pos as u32, id);
                }
                has_single |= len == char_len;
            }
            if !has_single {
                let cand = here + unk_score;
                let end = (pos + char_len).min(n);
                let slot = &mut best[end];
                if slot.1 == NO_START || cand > slot.0 {
                    let id = m.d.unk_id.ok_or_else(|| Error::invalid("no unk_id"))?;
                    *slot = (cand, pos as u32, id);
                }
            }
            pos += char_len;
        }
        Ok(best.iter().map(|b| (b.0.to_bits(), b.1, b.2)).collect())
    }

    #[test]
    fn a_full_long_word_map_empties_and_keeps_taking_new_words() {
        let mut cache = WordCache::new();
        let tok = [Token::new(7, 0, 1)];
        let words: Vec<String> = (0..LONG_ENTRIES * 3 + 5).map(|i| format!("w{i}")).collect();
        for w in &words {
            let h = cache.hash(w);
            cache.long.set(h, w, &tok);
            assert!(cache.long.entries.len() <= LONG_ENTRIES);
            assert_eq!(cache.long.index.len(), cache.long.entries.len());
        }
        // The last word went in although the map had filled up long before.
        let mut out = Vec::new();
        let last = words.last().unwrap();
        assert!(cache.long.get_ids(cache.hash(last), last, &mut out));
        assert_eq!(out, vec![7]);
        // An ids-only entry serves ids but not tokens.
        let h = cache.hash("ids");
        cache.long.set_ids(h, "ids", &[1, 2]);
        let mut toks = Vec::new();
        assert!(!cache.long.get(h, "ids", &mut toks));
        out.clear();
        assert!(cache.long.get_ids(h, "ids", &mut out));
        assert_eq!(out, vec![1, 2]);
        // A colliding hash with other bytes is a miss.
        out.clear();
        assert!(!cache.long.get_ids(h, "idz", &mut out));
        // Tokens of another word under that hash do not replace the entry; the word's own
        // tokens do, unless they carry a value.
        cache.long.set(h, "idz", &[Token::new(5, 0, 3)]);
        cache.long.set(
            h,
            "ids",
            &[Token::with_value(1, "i", 0, 1), Token::new(2, 1, 3)],
        );
        assert!(!cache.long.get(h, "ids", &mut toks));
        cache
            .long
            .set(h, "ids", &[Token::new(1, 0, 1), Token::new(2, 1, 3)]);
        assert!(cache.long.get(h, "ids", &mut toks));
        assert_eq!(toks, vec![Token::new(1, 0, 1), Token::new(2, 1, 3)]);
        out.clear();
        assert!(cache.long.get_ids(h, "ids", &mut out));
        assert_eq!(out, vec![1, 2]);
    }

    /// `meta_word_ids` (the fast path's entry: the text after `▁`) against the uncached
    /// segmentation, with and without a cache, for short and long words and words of many
    /// ids, each looked up several times (miss, then hits).
    #[test]
    fn meta_word_ids_equal_uncached_segmentation() {
        let mut next = crate::test_rng(0x005e_ed0f_4a11_u64);
        let mut vocab = vec![("<unk>".to_string(), -9.0)];
        for p in [
            "a",
            "b",
            "c",
            "ab",
            "abc",
            "ba",
            "\u{2581}",
            "\u{2581}a",
            "\u{2581}ab",
            "é",
        ] {
            vocab.push((p.to_string(), -((next() % 7) as f64) - 0.5));
        }
        let m = Unigram::new(vocab, Some(0), false).unwrap();
        let alphabet = ["a", "b", "c", "é", "z", "\u{2581}", "<unk>"];
        let mut buf = String::new();
        for round in 0..3000 {
            let len = (next() % 40) as usize;
            let rest: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let word = format!("\u{2581}{rest}");
            let mut toks = Vec::new();
            m.tokenize_uncached(&word, &mut toks).unwrap();
            let want: Vec<u32> = toks.iter().map(|t| t.id).collect();
            for _ in 0..3 {
                let mut got = vec![99];
                m.with_cache(|c| m.meta_word_ids(c, &rest, &mut buf, &mut got))
                    .unwrap();
                assert_eq!(&got[1..], &want[..], "round {round} {word:?}");
                let mut got = vec![99];
                m.meta_word_ids(None, &rest, &mut buf, &mut got).unwrap();
                assert_eq!(&got[1..], &want[..], "round {round} {word:?}");
                let mut got = Vec::new();
                m.word_ids(&word, &mut got).unwrap();
                assert_eq!(got, want, "round {round} {word:?}");
                let mut t = Vec::new();
                m.tokenize(&word, &mut t).unwrap();
                assert_eq!(t, toks, "round {round} {word:?}");
            }
        }
    }

    #[test]
    fn forward_and_cache_agree_with_the_reference_on_generated_vocabularies() {
        let mut rng = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
        let mut next = move |m: u64| rng() % m;
        // `z` and `𝔸` never are single pieces (unknown nodes); scores from a short list make
        // exact ties frequent; some vocabularies have byte pieces, some no unk_id (errors).
        let alphabet = ["a", "b", "c", "▁", "é", "z", "𝔸", "ab", "<unk>"];
        let score_list = [-1.0f64, -2.0, -3.0, -0.5, -1.5, -4.25, 0.0, -1e-12];
        for round in 0..80 {
            let mut vocab = vec![("<unk>".to_string(), -2.0)];
            for _ in 0..(next(40) + 5) {
                let piece: String = (0..next(4) + 1)
                    .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                    .collect();
                if piece == "z" || piece == "𝔸" {
                    continue;
                }
                // Every fifth vocabulary has scores whose sums reach -inf (the unbounded
                // forward pass).
                let score = if round % 5 == 4 && next(4) == 0 {
                    -1e308
                } else {
                    score_list[next(score_list.len() as u64) as usize]
                };
                vocab.push((piece, score));
            }
            let byte_fallback = round % 3 == 1;
            if byte_fallback {
                for b in 0..=255u32 {
                    if next(8) != 0 {
                        vocab.push((format!("<0x{b:02X}>"), -7.0));
                    }
                }
            }
            let unk = (round % 4 != 3).then_some(0);
            let m = Unigram::new(vocab, unk, byte_fallback).unwrap();
            assert_eq!(m.d.bounded, m.d.min_score > -1e300, "round {round}");
            for t in 0..60 {
                let chars = if t == 0 { 400 } else { next(12) };
                let word: String = (0..chars)
                    .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                    .collect();
                // The forward table, position by position and bit for bit.
                let mut best = Vec::new();
                let got = m.forward(&word, &mut best).map(|()| {
                    best.iter()
                        .map(|b| (b.score.to_bits(), b.start, b.id))
                        .collect::<Vec<_>>()
                });
                let want = reference_forward(&m, &word);
                assert_eq!(got.is_ok(), want.is_ok(), "round {round} {word:?}");
                if let (Ok(g), Ok(w)) = (&got, &want) {
                    assert_eq!(g, w, "round {round} {word:?}");
                }
                // Cached (first call fills, second replays) against uncached.
                let mut plain = Vec::new();
                let plain_r = m.tokenize_uncached(&word, &mut plain);
                // The ids-only backtrack (fused unknown runs, byte fallback included).
                let mut ids = vec![7];
                let ids_r = m.ids_uncached(&word, &mut ids);
                assert_eq!(ids_r.is_ok(), plain_r.is_ok(), "round {round} {word:?}");
                if ids_r.is_ok() {
                    let want: Vec<u32> =
                        [7].into_iter().chain(plain.iter().map(|t| t.id)).collect();
                    assert_eq!(ids, want, "round {round} {word:?}");
                }
                for _ in 0..2 {
                    let mut cached = vec![Token::new(7, 0, 0)];
                    let r = m.tokenize(&word, &mut cached);
                    assert_eq!(r.is_ok(), plain_r.is_ok());
                    if r.is_ok() {
                        assert_eq!(cached[0], Token::new(7, 0, 0));
                        assert_eq!(&cached[1..], &plain[..], "round {round} {word:?}");
                    }
                }
                // Ids alone (words with fused unknown runs are cached for ids only), before
                // and after the token path, each twice: miss, then hit.
                let plain_ids: Vec<u32> = plain.iter().map(|t| t.id).collect();
                for w in [format!("{word}z"), word.clone()] {
                    let mut p = Vec::new();
                    let want = m
                        .tokenize_uncached(&w, &mut p)
                        .map(|()| p.iter().map(|t| t.id).collect::<Vec<_>>());
                    for _ in 0..2 {
                        let mut ids = vec![7];
                        let r = m.word_ids(&w, &mut ids);
                        assert_eq!(r.is_ok(), want.is_ok(), "round {round} {w:?}");
                        if let Ok(want) = &want {
                            assert_eq!(&ids[1..], &want[..], "round {round} {w:?}");
                        }
                        let mut toks = Vec::new();
                        if m.tokenize(&w, &mut toks).is_ok() {
                            assert_eq!(toks, p, "round {round} {w:?}");
                        }
                    }
                }
                if plain_r.is_ok() {
                    let mut ids = Vec::new();
                    m.word_ids(&word, &mut ids).unwrap();
                    assert_eq!(ids, plain_ids);
                }
            }
        }
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
