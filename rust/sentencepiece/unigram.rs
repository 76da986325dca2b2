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

use super::normalizer::{one_char_len, word_bytes, SpNormalizer};
use super::trie::ByteTrie;
use super::vocab::{PieceEntry, PieceType, Segmenter, SpPiece};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

const UNK_PENALTY: f32 = 10.0;

#[derive(Debug, Clone)]
pub struct SpUnigram {
    /// The matchable pieces (NORMAL and USER_DEFINED) → id.
    trie: ByteTrie,
    /// Per id: the score a match adds (a user-defined piece's length bonus already applied).
    match_scores: Vec<f32>,
    unk_id: u32,
    min_score: f32,
    /// No matchable piece has `▁` after its first character, so every `▁` of the text is a
    /// boundary of every segmentation and the word cache may be used (see `WordCache`).
    words_ok: bool,
    /// Where no piece can cross (see `Cuts`).
    cuts: Cuts,
    /// Identifies this model's entries in the per-thread word caches (clones share it: they
    /// segment alike).
    uid: u64,
}

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

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
        ByteTrie::sort_keep_last(&mut entries);
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
        let words_ok = entries
            .iter()
            .all(|(p, _)| p.get(1..).is_none_or(|rest| find_space(rest).is_none()));
        let mut cuts = Cuts::new(entries.iter().map(|&(p, _)| p));
        let trie = ByteTrie::build(entries);
        cuts.set_ascii_ids(&trie);
        Ok(SpUnigram {
            trie,
            cuts,
            match_scores,
            unk_id,
            min_score,
            words_ok,
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
        })
    }
}

/// Flags of a character in `Cuts`: it occurs in some matchable piece before that piece's last
/// character (`NOT_LAST`), after its first (`NOT_FIRST`), anywhere (`IN_PIECE`).
const NOT_LAST: u8 = 1;
const NOT_FIRST: u8 = 2;
const IN_PIECE: u8 = 4;
/// What an undecodable character gets: no cut on either side.
const ANY_PLACE: u8 = NOT_LAST | NOT_FIRST | IN_PIECE;
/// `Cuts::ascii_id` of a byte that is not a matchable piece.
const NONE_ID: u32 = u32::MAX;

/// The character boundaries of a text that no piece can cross: between characters `a` and
/// `b` when `a` never occurs before the last character of a matchable piece or `b` never
/// after the first (a piece crossing there would hold both so). Matches start at character
/// starts and are whole characters, and an unknown node is one character, so no lattice edge
/// spans a cut: as at a `▁` with `words_ok` (see `segment_words`), the reference's lattice up
/// to a cut is final there, what follows depends only on the score at the cut, and the
/// backtrack passes through it. A stretch between two cuts (a segment) is therefore segmented
/// on its own from the running score, whatever the tie rules. A segment of one character `c`
/// has one candidate: the piece `c` if there is one (a longer piece from `c` would cross the
/// cut after it), else the unknown character.
#[derive(Debug, Clone)]
struct Cuts {
    ascii: [u8; 128],
    /// The flags of the code points below U+10000, two a byte.
    bmp: std::sync::Arc<[u8]>,
    /// The characters above U+FFFF that occur in pieces, sorted, with their flags.
    astral: std::sync::Arc<[(u32, u8)]>,
    /// Per ASCII byte: the matchable piece of that one byte (`NONE_ID`: none).
    ascii_id: [u32; 128],
    /// The flags of `▁`.
    space_flags: u8,
}

impl Cuts {
    fn new<'a>(pieces: impl Iterator<Item = &'a [u8]>) -> Cuts {
        let mut ascii = [0u8; 128];
        let mut bmp = vec![0u8; 0x10000 / 2];
        let mut astral = std::collections::BTreeMap::<u32, u8>::new();
        for p in pieces {
            let Ok(p) = std::str::from_utf8(p) else {
                continue;
            };
            let last = p.chars().count().saturating_sub(1);
            for (i, c) in p.chars().enumerate() {
                let f = IN_PIECE
                    | if i > 0 { NOT_FIRST } else { 0 }
                    | if i < last { NOT_LAST } else { 0 };
                let cp = c as u32;
                if cp < 0x80 {
                    ascii[cp as usize] |= f;
                } else if cp < 0x10000 {
                    bmp[cp as usize >> 1] |= f << ((cp & 1) * 4);
                } else {
                    *astral.entry(cp).or_default() |= f;
                }
            }
        }
        let mut cuts = Cuts {
            ascii,
            bmp: bmp.into(),
            astral: astral.into_iter().collect::<Vec<_>>().into(),
            ascii_id: [NONE_ID; 128],
            space_flags: 0,
        };
        cuts.space_flags = cuts.bmp_flags(0x2581);
        cuts
    }

    fn set_ascii_ids(&mut self, trie: &ByteTrie) {
        for (b, id) in self.ascii_id.iter_mut().enumerate() {
            *id = trie.get(&[b as u8]).unwrap_or(NONE_ID);
        }
    }

    /// The length and flags of the character at `p` (`p < bytes.len()`, a character start).
    #[inline(always)]
    fn char_at(&self, bytes: &[u8], p: usize) -> (usize, u8) {
        let Some(&b0) = bytes.get(p) else {
            return (1, ANY_PLACE);
        };
        if b0 < 0x80 {
            return (1, self.ascii[usize::from(b0)]);
        }
        let len = one_char_len(b0);
        let t = |i: usize| bytes.get(p + i).map_or(0, |&b| u32::from(b & 0x3f));
        let flags = match (len, bytes.len() - p >= len) {
            (2, true) => self.bmp_flags((u32::from(b0 & 0x1f) << 6) | t(1)),
            (3, true) => self.bmp_flags((u32::from(b0 & 0x0f) << 12) | (t(1) << 6) | t(2)),
            (4, true) => {
                let cp = (u32::from(b0 & 0x07) << 18) | (t(1) << 12) | (t(2) << 6) | t(3);
                self.astral
                    .binary_search_by_key(&cp, |&(c, _)| c)
                    .map_or(0, |i| self.astral.get(i).map_or(ANY_PLACE, |e| e.1))
            }
            // A stray or cut-off sequence (not in a `str`): no cut around it.
            _ => ANY_PLACE,
        };
        (len.min(bytes.len() - p), flags)
    }

    #[inline(always)]
    fn bmp_flags(&self, cp: u32) -> u8 {
        self.bmp
            .get(cp as usize >> 1)
            .map_or(ANY_PLACE, |&q| (q >> ((cp & 1) * 4)) & 0xf)
    }

    /// The first cut at or after `p` in `bytes` (`bytes.len()` if none), `prev` being the
    /// flags of the character before `p`.
    #[inline]
    fn cut_from(&self, bytes: &[u8], mut p: usize, mut prev: u8) -> usize {
        while p < bytes.len() {
            let (len, f) = self.char_at(bytes, p);
            if prev & NOT_LAST == 0 || f & NOT_FIRST == 0 {
                return p;
            }
            prev = f;
            p += len;
        }
        bytes.len()
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
            let r = if self.words_ok {
                WORDS.with(|w| {
                    let mut caches = w.take();
                    let cache = cache_for(&mut caches, self.uid);
                    let r = self.segment_into(bytes, &mut best, out, Some(cache));
                    w.set(caches);
                    r
                })
            } else {
                self.segment_into(bytes, &mut best, out, None)
            };
            cell.set(kept_lattice(best, n));
            r
        })
    }
}

thread_local! {
    /// The per-position best paths, reused across calls on a thread.
    static LATTICE: std::cell::Cell<Vec<Best>> = const { std::cell::Cell::new(Vec::new()) };
    /// Word caches of the models used last on this thread (most recent first).
    static WORDS: std::cell::Cell<Vec<WordCache>> = const { std::cell::Cell::new(Vec::new()) };
    /// The word ranges of `encode_plain_words`, and the words it writes out.
    #[allow(clippy::type_complexity)]
    static SPANS: std::cell::Cell<(Vec<(u32, u32)>, Vec<u8>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// Models whose word caches a thread keeps at once.
const CACHES_PER_THREAD: usize = 4;

/// The cache of model `uid`, moved to the front (created, evicting the oldest, if absent).
fn cache_for(caches: &mut Vec<WordCache>, uid: u64) -> &mut WordCache {
    match caches.iter().position(|c| c.owner == uid) {
        Some(i) => caches[..=i].rotate_right(1),
        None => {
            if caches.len() >= CACHES_PER_THREAD {
                caches.pop();
            }
            caches.insert(0, WordCache::new(uid));
        }
    }
    &mut caches[0]
}

const SPACE: &[u8] = "\u{2581}".as_bytes();

/// Offset of the first `▁` in `bytes`.
fn find_space(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(k) = bytes
        .get(i..)
        .and_then(|r| r.iter().position(|&b| b == SPACE[0]))
    {
        let at = i + k;
        if bytes.get(at..at + SPACE.len()) == Some(SPACE) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

impl SpUnigram {
    fn segment_into(
        &self,
        bytes: &[u8],
        best: &mut Vec<Best>,
        out: &mut Vec<SpPiece>,
        cache: Option<&mut WordCache>,
    ) -> Result<()> {
        match cache {
            None => {
                let unk_score = self.min_score - UNK_PENALTY;
                // The furthest position any candidate has reached (what re-centring must
                // cover).
                let mut frontier = 0usize;
                let mut s = 0usize;
                self.start_lattice(best, bytes.len(), 0.0);
                while s < bytes.len() {
                    s += self.step(bytes, best, s, &mut frontier, unk_score);
                }
                backtrack(best, bytes.len(), 0, out)
            }
            Some(cache) => self.segment_words(bytes, best, out, cache),
        }
    }

    /// A lattice for `n` bytes whose position 0 holds `x`, every other one unreached.
    fn start_lattice(&self, best: &mut Vec<Best>, n: usize, x: f32) {
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
            b.score = x;
        }
    }

    /// The segmentation word by word (`words_ok`). A word is 0 or a `▁` up to the next `▁`:
    /// no piece (nor unknown character) crosses a `▁`, so the reference's lattice up to a
    /// word start `s` is final there, the word's part of it depends only on `x = best[s]`,
    /// and the backtrack from the end passes through `s`. So each word gets its own lattice
    /// from `x` (re-centred at `s` exactly as the reference does at that position; nothing
    /// past `s` is reached yet, so only `x` itself changes), is backtracked at once, and hands
    /// the score at its end to the next word: the same float32 operations in the same order
    /// as one lattice over the whole text, and the same pieces. Words are cut further where
    /// `Cuts` allows (by the same argument), and a cache hit needs no lattice: its pieces are
    /// pushed directly and the running score summed along them.
    fn segment_words<S: Sink>(
        &self,
        bytes: &[u8],
        best: &mut Vec<Best>,
        out: &mut S,
        cache: &mut WordCache,
    ) -> Result<()> {
        let n = bytes.len();
        let word_end = |s: usize| {
            bytes
                .get(s + 1..)
                .and_then(find_space)
                .map_or(n, |k| s + 1 + k)
        };
        // A word as `word` takes it: whether it starts with `▁`, and what follows.
        fn split(w: &[u8]) -> (bool, &[u8]) {
            match w.strip_prefix(SPACE) {
                Some(rest) => (true, rest),
                None => (false, w),
            }
        }
        // The best score at the current word start.
        let mut x = 0f32;
        let mut s = 0usize;
        // The next word is found (and its first segment's cache line requested) one word
        // ahead, so the table's memory latency overlaps the current word's work.
        let mut q = word_end(0);
        let mut key = WordKey::new(bytes.get(..q).unwrap_or_default());
        while s < n {
            let q2 = if q < n { word_end(q) } else { n };
            let key2 = WordKey::new(bytes.get(q..q2).unwrap_or_default());
            if let Some(k) = &key2 {
                cache.prefetch(k);
            }
            let key = std::mem::replace(&mut key, key2);
            let (sp, raw) = split(bytes.get(s..q).unwrap_or_default());
            x = self.word(sp, raw, key, s, x, best, cache, out)?;
            s = std::mem::replace(&mut q, q2);
        }
        Ok(())
    }

    /// The first segment of the word `▁` + `raw` (`raw` alone when not `spaced`).
    // (Inlined, as `next_segment`: a call per segment, and its `Seg` returned through
    // memory, cost more than the larger loop: multi-lines 166.5 → 161.7 instructions/byte.)
    #[inline(always)]
    fn first_segment(&self, spaced: bool, raw: &[u8]) -> Seg {
        if spaced {
            let end = self.cuts.cut_from(raw, 0, self.cuts.space_flags);
            let key = if end > 0 {
                raw.get(..end).and_then(WordKey::spaced)
            } else {
                None
            };
            Seg {
                end,
                key,
                one: end == 0,
                unknown: false,
            }
        } else {
            self.next_segment(raw, 0)
        }
    }

    /// The segment of `raw` that starts at `a` (a cut, `a < raw.len()`).
    #[inline(always)]
    fn next_segment(&self, raw: &[u8], a: usize) -> Seg {
        let (len, f) = self.cuts.char_at(raw, a);
        let end = self.cuts.cut_from(raw, a + len, f);
        let one = end <= a + len;
        Seg {
            end,
            key: if one {
                None
            } else {
                raw.get(a..end).and_then(WordKey::new)
            },
            one,
            unknown: f & IN_PIECE == 0,
        }
    }

    /// The piece of the one character `c`, and its score; the unknown character when `c` is
    /// no matchable piece.
    #[inline]
    fn single(&self, c: &[u8], unk_score: f32) -> (u32, f32) {
        let id = match c {
            [b] if *b < 0x80 => self.cuts.ascii_id.get(usize::from(*b)).copied(),
            _ => self.trie.get(c),
        };
        match id.filter(|&id| id != NONE_ID) {
            Some(id) => (
                id,
                self.match_scores.get(id as usize).copied().unwrap_or(0.0),
            ),
            None => (self.unk_id, unk_score),
        }
    }

    /// The word `▁` + `raw` (`raw` alone when not `spaced`) at `s`, from score `x`: its
    /// pieces, and the score at its end. `whole`: the word's cache key. The word's entry
    /// serves when it applies to `x` (a miss makes it from the word's exact lattice, as
    /// `word_slow`); else the word is taken segment by segment (`segments`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn word<S: Sink>(
        &self,
        spaced: bool,
        raw: &[u8],
        whole: Option<WordKey>,
        s: usize,
        mut x: f32,
        best: &mut Vec<Best>,
        cache: &mut WordCache,
        out: &mut S,
    ) -> Result<f32> {
        // Re-centred at the word start as the reference does at that position (nothing past
        // it is reached yet, so only `x` itself changes).
        if !(-SCORE_RESET_THRESHOLD..=SCORE_RESET_THRESHOLD).contains(&x) {
            x = 0.0;
        }
        let unk_score = self.min_score - UNK_PENALTY;
        if let Some(key) = &whole {
            // (The entry by reference, not a copy of its slot: prose-docs 100.2 → 96.3
            // instructions per byte.)
            if let Some(e) = find_slot(&cache.slots, key) {
                if x.abs() <= e.xmax {
                    // Exact by `WordCache`'s argument: the reference's best path over the
                    // word from `x`, and the float32 scores it stores along it.
                    cache.hits += 1;
                    return Ok(self.replay(e, s, x, unk_score, out));
                }
            } else if self.first_segment(spaced, raw).end < raw.len() {
                // A word with cuts inside is taken by segments, each with its own entry
                // (fewer distinct keys, and no exact lattice over the whole word); their
                // paths, when every one is an entry's, make the word's own entry (see
                // `Compose`), for its next sighting.
                cache.insert(key, Slot::REFUSED);
                cache.comp.start();
                let r = self.segments(spaced, raw, s, x, best, cache, out);
                if let (Some(e), Ok(_)) = (cache.comp.finish(), &r) {
                    cache.put(key, e);
                    cache.composed += 1;
                }
                return r;
            } else {
                let e = self.whole_entry(spaced, raw, unk_score, cache);
                cache.insert(key, e);
                if x.abs() <= e.xmax {
                    // As a hit, with the new entry.
                    cache.hits += 1;
                    return Ok(self.replay(&e, s, x, unk_score, out));
                }
            }
        }
        // No whole-word key, or `x` out of its entry's range: segment by segment.
        self.segments(spaced, raw, s, x, best, cache, out)
    }

    /// The cache entry of the word `▁` + `raw` (`raw` alone when not `spaced`): as
    /// `word_slow`, the word's exact lattice alone decides it.
    fn whole_entry(&self, spaced: bool, raw: &[u8], unk_score: f32, cache: &mut WordCache) -> Slot {
        let mut word = std::mem::take(&mut cache.word);
        word.clear();
        if spaced {
            word.extend_from_slice(SPACE);
        }
        word.extend_from_slice(raw);
        let e = self.exact_word(&word, unk_score, &mut cache.scratch);
        cache.word = word;
        e
    }

    /// `word` segment by segment (see `Cuts`), re-centring at each start as the reference
    /// does there: one character has its one candidate (a run of characters in no piece is a
    /// run of unknown nodes), a cache entry that applies is replayed, anything else takes
    /// `word_slow`.
    #[allow(clippy::too_many_arguments)]
    fn segments<S: Sink>(
        &self,
        spaced: bool,
        raw: &[u8],
        s: usize,
        mut x: f32,
        best: &mut Vec<Best>,
        cache: &mut WordCache,
        out: &mut S,
    ) -> Result<f32> {
        if !spaced && raw.is_empty() {
            return Ok(x);
        }
        let unk_score = self.min_score - UNK_PENALTY;
        let mut seg = self.first_segment(spaced, raw);
        let mut a = 0usize;
        let mut at = s;
        let mut lead = spaced;
        loop {
            if !(-SCORE_RESET_THRESHOLD..=SCORE_RESET_THRESHOLD).contains(&x) {
                x = 0.0;
            }
            let mut b = seg.end;
            let bytes = raw.get(a..b).unwrap_or_default();
            if seg.one && !lead && seg.unknown {
                // Each character is an unknown node between two cuts, the only candidate
                // there: the score goes down by `unk_score` per character, re-centred before
                // each as at any position.
                x += unk_score;
                while b < raw.len() {
                    let (len, f) = self.cuts.char_at(raw, b);
                    if f & IN_PIECE != 0 {
                        break;
                    }
                    if !(-SCORE_RESET_THRESHOLD..=SCORE_RESET_THRESHOLD).contains(&x) {
                        x = 0.0;
                    }
                    x += unk_score;
                    b += len;
                }
                if cache.comp.on {
                    cache
                        .comp
                        .unknowns(self.unk_id, raw.get(a..b).unwrap_or_default(), unk_score);
                }
                out.unknowns(self.unk_id, at, raw.get(a..b).unwrap_or_default());
                at += b - a;
            } else if seg.one {
                let (id, score) = self.single(if lead { SPACE } else { bytes }, unk_score);
                x += score; // the reference's `score + till`
                let len = bytes.len() + if lead { SPACE.len() } else { 0 };
                if cache.comp.on {
                    cache.comp.one(id, id == self.unk_id, len, score);
                }
                out.piece(id, at, at + len);
                at += len;
            } else {
                // (The entry by reference, not a copy of its slot: multi-docs 144.7 → 142.5
                // instructions per byte.)
                let slot = seg.key.as_ref().and_then(|k| find_slot(&cache.slots, k));
                let cached = slot.is_some();
                let len = bytes.len() + if lead { SPACE.len() } else { 0 };
                if let Some(e) = slot.filter(|e| x.abs() <= e.xmax) {
                    // Exact by `WordCache`'s argument: the reference's best path over the
                    // segment from `x`, and the float32 scores it stores along it.
                    x = self.replay(e, at, x, unk_score, out);
                    if cache.comp.on {
                        cache.comp.entry(e, unk_score, &self.match_scores);
                    }
                    cache.hits += 1;
                } else if lead {
                    let mut word = std::mem::take(&mut cache.word);
                    word.clear();
                    word.extend_from_slice(SPACE);
                    word.extend_from_slice(bytes);
                    let r = self.word_slow(&word, seg.key, cached, x, at, best, cache, out);
                    cache.word = word;
                    x = r?;
                } else {
                    x = self.word_slow(bytes, seg.key, cached, x, at, best, cache, out)?;
                }
                at += len;
            }
            a = b;
            lead = false;
            if a >= raw.len() {
                return Ok(x);
            }
            seg = self.next_segment(raw, a);
        }
    }

    /// A word at `s` (from score `x`) that no cache entry served: its pieces, and the score
    /// at its end. `cached`: the cache holds an entry for it (which does not apply to `x`).
    #[allow(clippy::too_many_arguments)]
    fn word_slow<S: Sink>(
        &self,
        word: &[u8],
        key: Option<WordKey>,
        cached: bool,
        x: f32,
        s: usize,
        best: &mut Vec<Best>,
        cache: &mut WordCache,
        out: &mut S,
    ) -> Result<f32> {
        let unk_score = self.min_score - UNK_PENALTY;
        if let (Some(key), false) = (key, cached) {
            // A miss: the word's exact lattice alone decides its entry; when the entry
            // applies to `x` its path is the reference's (the same argument as a hit), so
            // the float32 lattice is not run at all.
            let entry = self.exact_word(word, unk_score, &mut cache.scratch);
            cache.insert(&key, entry);
            if x.abs() <= entry.xmax {
                if cache.comp.on {
                    cache.comp.entry(&entry, unk_score, &self.match_scores);
                }
                return Ok(self.replay(&entry, s, x, unk_score, out));
            }
        }
        // A path no entry gives: no word entry can be composed.
        cache.comp.on = false;
        self.start_lattice(best, word.len(), x);
        let mut frontier = 0usize;
        let mut p = 0usize;
        while p < word.len() {
            p += self.step(word, best, p, &mut frontier, unk_score);
        }
        backtrack(best, word.len(), s, out)?;
        Ok(best.get(word.len()).map_or(0.0, |b| b.score))
    }

    /// `encode_ids` from the words of the normalization of `text` (the normalization is `▁`
    /// followed by its words joined with `▁`; `SpNormalizer::plain_words` gives them, as
    /// ranges of `text` or of the words it wrote out): `segment_words` over that string,
    /// word by word in the same order with the same running score, without writing the
    /// string (a word's `▁`-prefixed bytes are assembled only when no cache entry serves it)
    /// and keeping only the ids. `None` (nothing appended) when the shortcut does not apply: the model has
    /// pieces across `▁`, the normalizer's options are not those `plain_words` serves, or
    /// an unknown piece occurs with `byte_fallback`. Unknown pieces are fused as the facade's
    /// token loop fuses them: an unknown id right after another is dropped (only unknown
    /// pieces have the unknown id).
    pub(crate) fn encode_plain_words(
        &self,
        normalizer: &SpNormalizer,
        byte_fallback: bool,
        text: &str,
        out: &mut Vec<u32>,
    ) -> Option<Result<()>> {
        if !self.words_ok {
            return None;
        }
        SPANS.with(|cell| {
            let (mut words, mut buf) = cell.take();
            let r = if normalizer.plain_words(text, &mut words, &mut buf) {
                self.ids_with_cache(text.len(), byte_fallback, out, |best, cache, sink| {
                    self.plain_words_into(text.as_bytes(), &buf, &words, best, cache, sink)
                })
            } else {
                None
            };
            cell.set((words, buf));
            r
        })
    }

    /// `encode_ids` of an already normalized string: `segment_words` keeping only the ids
    /// (no spans for the facade's token loop, whose only effects on ids with these pieces
    /// are the unknown-run fusion and byte fallback; see `ids_with_cache`). `None` (nothing
    /// appended) when the model has pieces across `▁` or an unknown piece occurs with
    /// `byte_fallback`.
    pub(crate) fn encode_normalized_ids(
        &self,
        normalized: &str,
        byte_fallback: bool,
        out: &mut Vec<u32>,
    ) -> Option<Result<()>> {
        let bytes = normalized.as_bytes();
        if !self.words_ok || bytes.len() >= u32::MAX as usize {
            return None;
        }
        self.ids_with_cache(bytes.len(), byte_fallback, out, |best, cache, sink| {
            self.segment_words(bytes, best, sink, cache)
        })
    }

    /// Run `f` (on an input of `len` bytes) with this thread's lattice and this model's word
    /// cache into ids appended to `out`, then fuse unknown runs as the facade's token loop
    /// does (an unknown id right after another is dropped; only unknown pieces have the unknown id, and no CONTROL
    /// piece is matchable). `None`, with nothing appended, when an unknown piece occurred
    /// with `byte_fallback` (the token loop's byte pieces need the spans); on an error
    /// nothing is appended either.
    fn ids_with_cache(
        &self,
        len: usize,
        byte_fallback: bool,
        out: &mut Vec<u32>,
        f: impl FnOnce(&mut Vec<Best>, &mut WordCache, &mut IdSink<'_>) -> Result<()>,
    ) -> Option<Result<()>> {
        let before = out.len();
        let mut sink = IdSink {
            ids: out,
            unk: self.unk_id,
            saw_unk: false,
        };
        let r = LATTICE.with(|lc| {
            let mut best = lc.take();
            let r = WORDS.with(|w| {
                let mut caches = w.take();
                let cache = cache_for(&mut caches, self.uid);
                let r = f(&mut best, cache, &mut sink);
                w.set(caches);
                r
            });
            lc.set(kept_lattice(best, len));
            r
        });
        let saw_unk = sink.saw_unk;
        if r.is_err() || saw_unk && byte_fallback {
            out.truncate(before);
        } else if saw_unk {
            fuse_unknown_runs(out, before, self.unk_id);
        }
        (!(saw_unk && byte_fallback)).then_some(r)
    }

    /// The loop of `encode_plain_words` (`words`: byte ranges of `text` or `buf`, see
    /// `word_bytes`).
    fn plain_words_into<S: Sink>(
        &self,
        text: &[u8],
        buf: &[u8],
        words: &[(u32, u32)],
        best: &mut Vec<Best>,
        cache: &mut WordCache,
        out: &mut S,
    ) -> Result<()> {
        let word_at = |i: usize| words.get(i).map(|&w| word_bytes(text, buf, w));
        // The best score at the current word start, and the word's offset in the normalized
        // string (what `segment_words` would pass on).
        let mut x = 0f32;
        let mut s = 0usize;
        let mut key = word_at(0).and_then(WordKey::spaced);
        for i in 0..words.len() {
            let w = word_at(i).unwrap_or_default();
            // As `segment_words`: the next word's cache line is requested one word ahead.
            let key2 = word_at(i + 1).and_then(WordKey::spaced);
            if let Some(k) = &key2 {
                cache.prefetch(k);
            }
            let key = std::mem::replace(&mut key, key2);
            x = self.word(true, w, key, s, x, best, cache, out)?;
            s += SPACE.len() + w.len();
        }
        Ok(())
    }

    /// Push the path of entry `e` for the word at `s`, starting from score `x`; returns the
    /// score at the word's end, summed in the reference's order.
    #[inline]
    fn replay<S: Sink>(&self, e: &Slot, s: usize, mut x: f32, unk_score: f32, out: &mut S) -> f32 {
        let n = usize::from(e.n).min(MAX_STEPS);
        let (ids, lens) = (&e.ids[..n], &e.lens[..n]);
        let mut unk = false;
        for (&id, &len) in ids.iter().zip(lens) {
            let score = if len & UNK_STEP != 0 {
                unk = true;
                unk_score
            } else {
                self.match_scores.get(id as usize).copied().unwrap_or(0.0)
            };
            x += score; // as the reference's `score + till` (commutative)
        }
        out.path(e, n, s, unk);
        x
    }

    /// The cache entry of `word` (at most `MAX_WORD` bytes) from its exact (double precision)
    /// lattice: the same candidates the reference's loop offers, from a start score of 0.
    fn exact_word(&self, word: &[u8], unk_score: f32, sc: &mut Vec<Exact>) -> Slot {
        let n = word.len();
        sc.clear();
        sc.resize(n + 1, Exact::UNREACHED);
        if let Some(c) = sc.first_mut() {
            c.v = 0.0;
        }
        let scores = &self.match_scores[..];
        let (root, root_base) = self.trie.root();
        let mut biggest = 0f64;
        let mut chars = 0usize;
        let mut p = 0usize;
        while let Some(&b0) = word.get(p) {
            let till = sc.get(p).map_or(f64::NEG_INFINITY, |c| c.v);
            let mblen = one_char_len(b0).min(n - p);
            // The end of the shortest piece from `p`: pieces are whole characters, so the
            // character at `p` is a piece when it is `p + mblen` (one `min` a candidate).
            let mut first_end = usize::MAX;
            // Every piece that starts at `p` (the trie walk of `for_each_prefix`, kept here so
            // that the loop's state stays in registers), offered where it ends.
            let (mut node, mut base) = (root, root_base);
            let mut end = p;
            while let Some(&b) = word.get(end) {
                let Some((next, next_base, id)) = self.trie.child(node, base, b) else {
                    break;
                };
                end += 1;
                (node, base) = (next, next_base);
                if id == u32::MAX {
                    continue;
                }
                let cand = till + f64::from(scores.get(id as usize).copied().unwrap_or(0.0));
                offer_exact(sc, &mut biggest, end, cand, p, id, false);
                first_end = first_end.min(end);
            }
            if first_end != p + mblen {
                let cand = till + f64::from(unk_score);
                offer_exact(sc, &mut biggest, p + mblen, cand, p, self.unk_id, true);
            }
            p += mblen;
            chars += 1;
        }
        exact_entry(sc, chars, biggest).unwrap_or(Slot::REFUSED)
    }

    /// One position of the reference's loop: re-centre if needed, then offer every piece
    /// starting at `s` (or the unknown character) to the position where it ends. Returns the
    /// length of the character at `s`.
    #[inline(always)]
    fn step(
        &self,
        bytes: &[u8],
        best: &mut [Best],
        s: usize,
        frontier: &mut usize,
        unk_score: f32,
    ) -> usize {
        let n = bytes.len();
        let till = recentre(best, s, *frontier);
        let Some(row) = best.get_mut(s..) else {
            return n - s;
        };
        let scores = &self.match_scores[..];
        let mblen = one_char_len(bytes[s]).min(n - s);
        let mut has_single = false;
        let mut longest = 0usize;
        let mut offer = |len: usize, id: u32, score: f32| {
            let cand = score + till;
            if let Some(t) = row.get_mut(len) {
                if cand > t.score {
                    *t = Best {
                        score: cand,
                        start: s as u32,
                        id,
                    };
                }
            }
        };
        self.trie.for_each_prefix(&bytes[s..], |len, id| {
            offer(len, id, scores.get(id as usize).copied().unwrap_or(0.0));
            has_single |= len == mblen;
            longest = len;
        });
        if !has_single {
            longest = longest.max(mblen);
            offer(mblen, self.unk_id, unk_score);
        }
        *frontier = (*frontier).max(s + longest);
        mblen
    }
}

/// Push the best path ending at `n` (positions offset by `base`), in text order.
fn backtrack<S: Sink>(best: &[Best], n: usize, base: usize, out: &mut S) -> Result<()> {
    let first = out.mark();
    let mut end = n;
    while end > 0 {
        let b = best.get(end).copied().ok_or_else(|| {
            Error::invalid("sentencepiece Unigram: lattice shorter than the text")
        })?;
        let start = b.start as usize;
        if start >= end {
            return Err(Error::invalid(
                "sentencepiece Unigram: unreachable position in the lattice",
            ));
        }
        out.piece(b.id, base + start, base + end);
        end = start;
    }
    out.reverse_from(first);
    Ok(())
}

/// Drop every `unk` id of `ids[first..]` that follows another.
fn fuse_unknown_runs(ids: &mut Vec<u32>, first: usize, unk: u32) {
    let mut prev_unk = false;
    let mut k = first;
    for i in first..ids.len() {
        let id = ids[i];
        let is_unk = id == unk;
        if !(is_unk && prev_unk) {
            ids[k] = id;
            k += 1;
        }
        prev_unk = is_unk;
    }
    ids.truncate(k);
}

/// Where segmented pieces go: spans of the normalized string, or ids alone.
trait Sink {
    /// The current end (for `reverse_from`).
    fn mark(&self) -> usize;
    fn piece(&mut self, id: u32, start: usize, end: usize);
    /// Reverse what was pushed since `mark` gave `first` (a backtrack pushes from the end).
    fn reverse_from(&mut self, first: usize);
    /// One piece `id` per character of `chars`, the first at `start` (unknown characters).
    fn unknowns(&mut self, id: u32, start: usize, chars: &[u8]);
    /// The first `n` steps (`n <= MAX_STEPS`) of the path of `e` from `start` (`unk`: some
    /// step is an unknown character).
    #[inline]
    fn path(&mut self, e: &Slot, n: usize, start: usize, _unk: bool) {
        let mut at = start;
        for (&id, &len) in e.ids.iter().zip(&e.lens).take(n) {
            let end = at + usize::from(len & !UNK_STEP);
            self.piece(id, at, end);
            at = end;
        }
    }
}

impl Sink for Vec<SpPiece> {
    #[inline]
    fn mark(&self) -> usize {
        self.len()
    }
    #[inline]
    fn piece(&mut self, id: u32, start: usize, end: usize) {
        self.push(SpPiece { id, start, end });
    }
    fn reverse_from(&mut self, first: usize) {
        if let Some(t) = self.get_mut(first..) {
            t.reverse();
        }
    }
    fn unknowns(&mut self, id: u32, start: usize, chars: &[u8]) {
        let mut q = 0;
        while let Some(&c) = chars.get(q) {
            // As the lattice steps over characters.
            let len = one_char_len(c).min(chars.len() - q);
            self.push(SpPiece {
                id,
                start: start + q,
                end: start + q + len,
            });
            q += len;
        }
    }
}

/// The ids of the pieces, noting whether an unknown piece was among them.
struct IdSink<'a> {
    ids: &'a mut Vec<u32>,
    unk: u32,
    saw_unk: bool,
}

impl Sink for IdSink<'_> {
    #[inline]
    fn mark(&self) -> usize {
        self.ids.len()
    }
    #[inline]
    fn piece(&mut self, id: u32, _: usize, _: usize) {
        self.saw_unk |= id == self.unk;
        self.ids.push(id);
    }
    fn reverse_from(&mut self, first: usize) {
        if let Some(t) = self.ids.get_mut(first..) {
            t.reverse();
        }
    }
    fn unknowns(&mut self, id: u32, _: usize, chars: &[u8]) {
        // One id stands for the run: the caller fuses runs of unknown ids anyway (and only
        // unknown pieces have the unknown id).
        if !chars.is_empty() {
            self.piece(id, 0, 0);
        }
    }
    #[inline]
    fn path(&mut self, e: &Slot, n: usize, _: usize, unk: bool) {
        // An unknown step holds the unknown id, and only unknown steps do (no matchable
        // piece has it), so `unk` is what `piece` would note.
        self.saw_unk |= unk;
        // All `MAX_STEPS` ids in one fixed-size copy, then the extra ones dropped: a copy of
        // `n` ids was a `memcpy` call per path.
        let len = self.ids.len() + n.min(MAX_STEPS);
        self.ids.extend_from_slice(&e.ids);
        self.ids.truncate(len);
    }
}

/// `exact_word`'s offer of the piece `id` from `start` to `end` with path score `cand`,
/// keeping `biggest`, the largest magnitude offered. (Every value there is finite: every
/// character start is reached, so a plain compare is `f64::max` without its NaN handling.)
#[inline(always)]
fn offer_exact(
    sc: &mut [Exact],
    biggest: &mut f64,
    end: usize,
    cand: f64,
    start: usize,
    id: u32,
    unk: bool,
) {
    let a = cand.abs();
    if a > *biggest {
        *biggest = a;
    }
    if let Some(t) = sc.get_mut(end) {
        t.offer(cand, start as u8, id, unk);
    }
}

/// Re-centre path scores on `best[s]` when it has left ±1e5, as the reference does at every
/// position; returns the (new) score at `s`.
#[inline]
fn recentre(best: &mut [Best], s: usize, frontier: usize) -> f32 {
    let Some(till) = best.get(s).map(|b| b.score) else {
        return 0.0;
    };
    if (-SCORE_RESET_THRESHOLD..=SCORE_RESET_THRESHOLD).contains(&till) {
        return till;
    }
    // Unreached positions stay -inf, as the reference leaves them untouched.
    let hi = frontier.max(s);
    if let Some(row) = best.get_mut(s..=hi) {
        for b in row {
            b.score -= till;
        }
    }
    0.0
}

/// Whether the lattice's best path from `q` back to `s` is the entry's.
#[cfg(test)]
fn path_matches(best: &[Best], s: usize, q: usize, e: &Slot) -> bool {
    let mut end = q;
    for k in (0..usize::from(e.n).min(MAX_STEPS)).rev() {
        let Some(b) = best.get(end) else {
            return false;
        };
        let len = usize::from(e.lens[k] & !UNK_STEP);
        if b.id != e.ids[k] || b.start as usize + len != end {
            return false;
        }
        end = b.start as usize;
    }
    end == s
}

/// The cache entry for a word from its exact lattice (`chars` characters, candidates within
/// `biggest` of the start): its best path and the bound on `|x|` that makes it exact; `None`
/// when the path is too long to store or no bound works.
fn exact_entry(sc: &[Exact], chars: usize, biggest: f64) -> Option<Slot> {
    let mut e = Slot::REFUSED;
    let mut min_gap = f64::INFINITY;
    let mut end = sc.len() - 1;
    let mut k = 0usize;
    while end > 0 {
        let c = sc.get(end)?;
        let start = usize::from(c.start);
        if start >= end || k >= MAX_STEPS {
            return None;
        }
        min_gap = min_gap.min(c.gap);
        e.ids[k] = c.id;
        e.lens[k] = (end - start) as u8 | if c.unk { UNK_STEP } else { 0 };
        k += 1;
        end = start;
    }
    e.n = k as u8;
    e.ids[..k].reverse();
    e.lens[..k].reverse();
    e.xmax = robust_xmax(min_gap, biggest, chars)?;
    Some(e)
}

/// The largest `|x|` (as a float32 bound, rounded down) for which a word whose exact best
/// path wins every decision along it by at least `min_gap`, whose candidates all lie within
/// `biggest` of the start, and which has `chars` characters, is segmented by the float32 loop
/// exactly as in exact arithmetic and without re-centring inside it. See `WordCache`.
fn robust_xmax(min_gap: f64, biggest: f64, chars: usize) -> Option<f32> {
    let limit = f64::from(SCORE_RESET_THRESHOLD);
    // Every magnitude involved is below 2^k; try the widest range first.
    for k in (0..=17u32).rev() {
        let pow = f64::from(1u32 << k);
        // `e` is a whole float32 spacing below 2^k: twice the rounding error of one sum.
        let e = pow / f64::from(1u32 << 24);
        let err = chars as f64 * e;
        if err >= 0.5 || min_gap <= 2.0 * err + 1e-6 {
            continue;
        }
        // |x| + biggest + err < 2^k keeps every value below 2^k; |x| + biggest + err below
        // the threshold keeps every position inside the word from re-centring.
        let xmax = (pow - biggest - err - 1.0).min(limit - biggest - err - 1.0);
        if xmax >= 0.0 {
            return Some(xmax as f32);
        }
    }
    None
}

/// A position of a word's lattice in double precision (offsets from the word start).
#[derive(Clone, Copy)]
struct Exact {
    v: f64,
    /// Best minus runner-up candidate (+inf with one candidate, 0 on a tie).
    gap: f64,
    start: u8,
    id: u32,
    /// The unknown-character candidate (scored `unk_score`).
    unk: bool,
}

impl Exact {
    const UNREACHED: Exact = Exact {
        v: f64::NEG_INFINITY,
        gap: f64::INFINITY,
        start: 0,
        id: 0,
        unk: false,
    };

    #[inline]
    fn offer(&mut self, cand: f64, start: u8, id: u32, unk: bool) {
        if cand > self.v {
            self.gap = cand - self.v; // +inf when unreached
            self.v = cand;
            self.start = start;
            self.id = id;
            self.unk = unk;
        } else if self.v - cand < self.gap {
            // (`f64::min` without NaN handling: both are non-NaN here.)
            self.gap = self.v - cand;
        }
    }
}

/// Longest cached word, in bytes (so the key fits the slot).
const MAX_WORD: usize = 24;
/// Longest cached path, in pieces.
const MAX_STEPS: usize = 6;
/// Marks a path step that is an unknown character (in `Slot::lens`).
const UNK_STEP: u8 = 0x80;
/// Sets of the word cache: 64K slots of 64 bytes, 4 MB per model and thread. (Half of it
/// held too few of a corpus's words: on 0.5 MB of new prose after 0.5 MB of warm-up, 16K sets
/// cost 7 % more instructions, mostly exact lattices of evicted words.)
const SETS: usize = 1 << 15;

/// The lattice buffer to keep for the thread after an input of `n` bytes: not a huge one
/// that an earlier outsized input left behind.
fn kept_lattice(best: Vec<Best>, n: usize) -> Vec<Best> {
    if best.capacity() > (1 << 20) && n < (1 << 16) {
        Vec::new()
    } else {
        best
    }
}

/// A segment of a word (see `Cuts`), as `SpUnigram::word` takes it.
struct Seg {
    /// Where it ends in the word's bytes after the `▁`.
    end: usize,
    /// Its cache key (`None` for one character, or when too long).
    key: Option<WordKey>,
    /// It is one character.
    one: bool,
    /// Its first character occurs in no piece.
    unknown: bool,
}

/// A word padded with zeros, and its length.
#[derive(Clone, Copy, PartialEq)]
struct WordKey {
    k: [u64; 3],
    len: u8,
}

impl WordKey {
    #[inline]
    fn new(word: &[u8]) -> Option<WordKey> {
        if word.is_empty() || word.len() > MAX_WORD {
            return None;
        }
        Some(WordKey {
            k: padded_words(word),
            len: word.len() as u8,
        })
    }

    /// The key of `▁` followed by `word` (as `new` gives it).
    #[inline]
    fn spaced(word: &[u8]) -> Option<WordKey> {
        let len = SPACE.len() + word.len();
        if len > MAX_WORD {
            return None;
        }
        // The word's padded words moved up by the `▁`'s three bytes.
        let [a, b, c] = padded_words(word);
        let space = u64::from(SPACE[0]) | u64::from(SPACE[1]) << 8 | u64::from(SPACE[2]) << 16;
        Some(WordKey {
            k: [space | a << 24, a >> 40 | b << 24, b >> 40 | c << 24],
            len: len as u8,
        })
    }

    #[inline]
    fn set(&self) -> usize {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let h = (self.k[0] ^ self.k[1].rotate_left(21) ^ self.k[2].rotate_left(42))
            .wrapping_add(u64::from(self.len))
            .wrapping_mul(K);
        (h >> 40) as usize & (SETS - 1)
    }
}

/// `w` (at most `MAX_WORD` bytes) padded with zeros to 24 bytes, as three little-endian
/// words, read as whole words from `w` alone (no copy to a zeroed buffer, which cost a
/// `memcpy` call per key): overlapping reads of the first and last bytes, the overlap
/// dropped by a shift (or OR-ed with itself: the same bytes at the same places).
#[inline(always)]
fn padded_words(w: &[u8]) -> [u64; 3] {
    let n = w.len();
    let at = |i: usize, k: usize| -> u64 {
        // `k` bytes at `i`, little-endian (callers stay inside `w`).
        let mut v = 0u64;
        if let Some(b) = w.get(i..i + k) {
            let mut t = [0u8; 8];
            t[..k].copy_from_slice(b);
            v = u64::from_le_bytes(t);
        }
        v
    };
    // The last 8 bytes of `w[..end]` (`end >= 8`) moved down to start at `from`.
    let tail = |end: usize, from: usize| at(end - 8, 8) >> (8 * (from + 8 - end));
    match n {
        0 => [0; 3],
        1..=3 => [
            at(0, 1) | at(n / 2, 1) << (8 * (n / 2)) | at(n - 1, 1) << (8 * (n - 1)),
            0,
            0,
        ],
        4..=7 => [at(0, 4) | at(n - 4, 4) << (8 * (n - 4)), 0, 0],
        8 => [at(0, 8), 0, 0],
        9..=16 => [at(0, 8), tail(n, 8), 0],
        _ => [at(0, 8), at(8, 8), tail(n.min(MAX_WORD), 16)],
    }
}

/// One cached word in one cache line (60 bytes): key, bound and path (piece ids, and byte
/// lengths with `UNK_STEP` marking unknown characters; scores are looked up).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Slot {
    k: [u64; 3],
    /// The entry applies when `|best[word start]| <= xmax` (-1: never).
    xmax: f32,
    ids: [u32; MAX_STEPS],
    /// Key length; 0 for an empty slot.
    key_len: u8,
    /// Pieces in the path.
    n: u8,
    lens: [u8; MAX_STEPS],
}

impl Slot {
    const EMPTY: Slot = Slot {
        k: [0; 3],
        xmax: -1.0,
        ids: [0; MAX_STEPS],
        key_len: 0,
        n: 0,
        lens: [0; MAX_STEPS],
    };
    /// A word known to need the general loop.
    const REFUSED: Slot = Slot::EMPTY;
    #[inline]
    fn is(&self, key: &WordKey) -> bool {
        self.k == key.k && self.key_len == key.len
    }
}

/// The entry of a word with cuts, composed from what `segments` does with its segments:
/// the steps of every segment (a one-character piece, each character of an unknown run, an
/// entry's path), in order, and the largest start score for which they are what `segments`
/// would do again.
///
/// Why it is exact. `segments` takes the segments one after the other from the running
/// float32 score: at segment `k` (start score `x_k`) a one-character step or an unknown
/// character adds its score, and an entry `e` adds its steps' scores, the same float32
/// additions as replaying the composed steps, provided `segments` takes the same branch
/// again and nothing is re-centred: `|x_k| <= 1e5` before every character step, and
/// `|x_k| <= e.xmax` (which also keeps the entry's own positions from re-centring) before
/// every entry. Every partial sum then stays below 1e5 < 2^17 in magnitude, so each
/// float32 addition errs by at most 2^-8, and after `m` steps whose scores have absolute
/// sum `A`, `|x_k| <= |x_0| + A + m * 2^-8`. So the composed entry applies to every `|x_0|`
/// below the least `bound - A - m * 2^-8` over those checkpoints (and the word's end, with
/// `1e5`), with a little slack for the f64 sums and the float32 rounding of the bound.
/// `segments` gives up (no entry) when a segment takes the lattice, or the steps do not fit.
#[derive(Clone, Copy)]
struct Compose {
    on: bool,
    slot: Slot,
    /// The absolute sum of the steps' scores so far.
    abs: f64,
    /// The least bound on `|x_0|` so far.
    xmax: f64,
}

impl Compose {
    const OFF: Compose = Compose {
        on: false,
        slot: Slot::EMPTY,
        abs: 0.0,
        xmax: f64::INFINITY,
    };

    fn start(&mut self) {
        *self = Compose {
            on: true,
            ..Compose::OFF
        };
    }

    /// Before the next step, where `|x| <= bound` must hold.
    #[inline]
    fn check(&mut self, bound: f32) {
        let m = f64::from(bound) - self.abs - f64::from(self.slot.n) / 256.0;
        self.xmax = self.xmax.min(m);
    }

    #[inline]
    fn step(&mut self, id: u32, len: usize, unk: bool, score: f32) {
        let n = usize::from(self.slot.n);
        if n >= MAX_STEPS || len == 0 || len >= usize::from(UNK_STEP) {
            self.on = false;
            return;
        }
        self.slot.ids[n] = id;
        self.slot.lens[n] = len as u8 | if unk { UNK_STEP } else { 0 };
        self.slot.n += 1;
        self.abs += f64::from(score).abs();
    }

    /// A one-character step (`unk`: the unknown character).
    fn one(&mut self, id: u32, unk: bool, len: usize, score: f32) {
        self.check(SCORE_RESET_THRESHOLD);
        self.step(id, len, unk, score);
    }

    /// A run of unknown characters.
    fn unknowns(&mut self, unk_id: u32, chars: &[u8], unk_score: f32) {
        let mut q = 0;
        while let Some(&c) = chars.get(q) {
            if !self.on {
                return;
            }
            let len = one_char_len(c).min(chars.len() - q);
            self.one(unk_id, true, len, unk_score);
            q += len;
        }
    }

    /// The path of entry `e`.
    fn entry(&mut self, e: &Slot, unk_score: f32, scores: &[f32]) {
        self.check(e.xmax);
        let n = usize::from(e.n).min(MAX_STEPS);
        for (&id, &len) in e.ids.iter().zip(&e.lens).take(n) {
            let unk = len & UNK_STEP != 0;
            let score = if unk {
                unk_score
            } else {
                scores.get(id as usize).copied().unwrap_or(0.0)
            };
            self.step(id, usize::from(len & !UNK_STEP), unk, score);
        }
    }

    /// The composed entry, if every segment gave one and some start score is allowed.
    fn finish(&mut self) -> Option<Slot> {
        let on = std::mem::replace(&mut self.on, false);
        if !on {
            return None;
        }
        self.check(SCORE_RESET_THRESHOLD);
        let xmax = self.xmax - 0.02;
        (xmax >= 0.0).then_some(Slot {
            xmax: xmax as f32,
            ..self.slot
        })
    }
}

/// A per-thread, per-model cache: word (a `▁` and what follows up to the next `▁`) → its best
/// path, for the starting scores it is provably exact for.
///
/// Why it is exact. When no matchable piece has `▁` after its first character, no piece (and
/// no unknown character) crosses a `▁`, so the reference's lattice over a word starting at `p`
/// depends only on `x = best[p]` (after the re-centring at `p`), and the word's best path is
/// found by backtracking from the word's end. In exact arithmetic that path does not depend
/// on `x` (shifting every candidate by `x` changes no comparison). In float32 each stored
/// score is a rounded sum; while every magnitude stays below `2^k`, one rounding errs by at
/// most `e/2` with `e = 2^(k-24)`, and the stored best at a position is within `c * e/2` of
/// the exact best there, `c` being the number of characters before it in the word (each
/// candidate adds one rounding to a start's error, and a max of values each within `d` of
/// exact values is within `d` of their max). So at a position where the exact winner beats
/// every other candidate by more than `2 * chars * e`, the float32 winner is the same
/// candidate, whatever the order and ties. `exact_entry` checks this margin at every position
/// of the exact path (only those are read by the backtrack), and bounds `|x|` so that every
/// value stays below `2^k` and inside ±1e5 (no re-centring inside the word). Under that bound
/// the reference backtracks along the cached path, and the scores it stores along it are the
/// float32 running sums from `x`, which a hit recomputes in the same order. Words with exact
/// ties (`g`+`gg` against `gg`+`g`) or too-close scores are stored as refused and take the
/// general loop. (The exact lattice is kept in f64: its own rounding, ~1e-12 here, is covered
/// by the 1e-6 slack.)
///
/// Two-way sets, one cache line per word: a lookup reads one line, an insert replaces the
/// older entry of the set (no clearing, no probing).
pub(crate) struct WordCache {
    owner: u64,
    slots: Vec<Slot>,
    /// Hits, for the tests.
    hits: u64,
    /// Entries composed by `segments` (`Compose`), for the tests.
    composed: u64,
    scratch: Vec<Exact>,
    /// A `▁`-prefixed word of `encode_plain_words` that needs the lattice.
    word: Vec<u8>,
    /// The entry of the word `segments` is taking, when one is being composed.
    comp: Compose,
}

/// The slot of `key` in a cache's `slots` (a function of the field, so that a caller may
/// hold the entry while it updates the cache's other fields).
#[inline(always)]
fn find_slot<'a>(slots: &'a [Slot], key: &WordKey) -> Option<&'a Slot> {
    let i = 2 * key.set();
    slots.get(i..i + 2)?.iter().find(|s| s.is(key))
}

impl WordCache {
    fn new(owner: u64) -> Self {
        WordCache {
            owner,
            slots: vec![Slot::EMPTY; 2 * SETS],
            hits: 0,
            composed: 0,
            scratch: Vec::new(),
            word: Vec::new(),
            comp: Compose::OFF,
        }
    }

    /// Ask for the cache line of `key`'s set (a hint: reads and writes nothing).
    #[inline(always)]
    fn prefetch(&self, key: &WordKey) {
        #[cfg(target_arch = "x86_64")]
        if let Some(slot) = self.slots.get(2 * key.set()) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: SSE is part of the x86_64 baseline, and a prefetch is only a hint: it
            // neither reads nor writes memory as the program sees it.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    /// Remember `entry` for `key`: in place of its entry if it has one, else as `insert`.
    fn put(&mut self, key: &WordKey, entry: Slot) {
        let i = 2 * key.set();
        match self
            .slots
            .get_mut(i..i + 2)
            .and_then(|set| set.iter_mut().find(|s| s.is(key)))
        {
            Some(s) => {
                *s = Slot {
                    k: key.k,
                    key_len: key.len,
                    ..entry
                }
            }
            None => self.insert(key, entry),
        }
    }

    /// Remember `entry` for `key` (absent), replacing the older of its set.
    fn insert(&mut self, key: &WordKey, entry: Slot) {
        let i = 2 * key.set();
        if let Some(set) = self.slots.get_mut(i..i + 2) {
            set[1] = set[0];
            set[0] = Slot {
                k: key.k,
                key_len: key.len,
                ..entry
            };
        }
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
    /// A random vocabulary over the first four of `letters`: `<unk>`, then up to 54 distinct
    /// pieces of 1–3 letters (half with a leading `▁`; one in `lone_space` is `▁` alone), each
    /// of a kind drawn by `kind` and a score from `scores`.
    fn random_pieces(
        next: &mut impl FnMut(u64) -> u64,
        letters: &[&str],
        scores: &[f32],
        lone_space: u64,
        kind: impl Fn(u64) -> PieceType,
    ) -> Vec<PieceEntry> {
        let mut pieces = vec![PieceEntry {
            piece: "<unk>".into(),
            score: 0.0,
            kind: Unknown,
        }];
        let mut seen = std::collections::HashSet::new();
        for _ in 0..(next(50) + 5) {
            let len = next(3) + 1;
            let mut piece: String = if next(2) == 0 {
                "▁".into()
            } else {
                String::new()
            };
            piece.extend((0..len).map(|_| letters[next(4) as usize]));
            if next(lone_space) == 0 {
                piece = "▁".into();
            }
            if !seen.insert(piece.clone()) {
                continue;
            }
            let kind = kind(next(1 << 20));
            pieces.push(PieceEntry {
                piece,
                score: scores[next(scores.len() as u64) as usize],
                kind,
            });
        }
        pieces
    }

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
        let mut rng = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        let mut next = move |m: u64| rng() % m;
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
    fn word_cache_agrees_with_the_reference_loop() {
        let mut rng = crate::test_rng(0x9E37_79B9_7F4A_7C15u64);
        let mut next = move |m: u64| rng() % m;
        // `z` and `𝔸` are never single pieces: unknown characters at min - 10 push the running
        // score by ~6e4, so words start at every magnitude up to 1e5 and re-centring happens.
        // Scores include exact ties and gaps of a few thousandths (below a float32 spacing
        // near 1e5), which the cache must refuse or restrict to small starting scores.
        let letters = ["a", "b", "c", "é", "z", "𝔸"];
        let score_list = [
            -1.0f32,
            -2.0,
            -3.0,
            -3.003,
            -1.0039,
            -2.0000002,
            -0.99999994,
            -1.5,
            -4.25,
            0.003,
            -7.25,
            -60000.0,
        ];
        let (mut hits, mut refused, mut kept) = (0u64, 0usize, 0usize);
        for round in 0..80 {
            let k = if round % 2 == 0 { score_list.len() } else { 11 };
            let kind = |r: u64| match r % 12 {
                0 => UserDefined,
                1 => Unused,
                _ => Normal,
            };
            let pieces = random_pieces(&mut next, &letters, &score_list[..k], 8, kind);
            let m = SpUnigram::new(&pieces, 0).unwrap();
            assert!(m.words_ok);
            let words: Vec<String> = (0..12)
                .map(|_| {
                    let mut w = String::from("▁");
                    w.extend((0..next(7)).map(|_| letters[next(6) as usize]));
                    w
                })
                .collect();
            let mut cache = WordCache::new(0);
            let mut best = Vec::new();
            for t in 0..30 {
                let count = if t % 10 == 0 { 3000 } else { next(40) };
                let mut text: String = if next(3) == 0 {
                    "ab".into()
                } else {
                    String::new()
                };
                for _ in 0..count {
                    text.push_str(&words[next(words.len() as u64) as usize]);
                }
                let mut out = vec![];
                if text.is_empty() {
                    continue;
                }
                m.segment_into(text.as_bytes(), &mut best, &mut out, Some(&mut cache))
                    .unwrap();
                let got: Vec<_> = out.iter().map(|p| (p.id, p.start, p.end)).collect();
                assert_eq!(got, reference(&pieces, 0, &text), "round {round} {text:?}");
            }
            hits += cache.hits;
            refused += cache
                .slots
                .iter()
                .filter(|s| s.key_len != 0 && s.xmax < 0.0)
                .count();
            kept += cache
                .slots
                .iter()
                .filter(|s| s.key_len != 0 && s.xmax >= 0.0)
                .count();
        }
        // The cache did serve most words, and refused some.
        assert!(
            hits > 100_000 && refused > 50 && kept > 200,
            "{hits} {refused} {kept}"
        );
    }

    #[test]
    fn an_entry_is_the_float32_path_for_every_start_it_allows() {
        // The miss path replays `exact_word`'s entry instead of running the float32 lattice:
        // for starting scores within the entry's bound (and just past it, where the entry must
        // not be used) the float32 lattice from `x` must take exactly the entry's path.
        let mut rng = crate::test_rng(0x51ED_2701_4F6C_DD1Du64);
        let mut next = move |m: u64| rng() % m;
        let letters = ["a", "b", "c", "é", "z"];
        let score_list = [
            -1.0f32,
            -2.0,
            -3.0,
            -3.003,
            -1.0039,
            -0.99999994,
            -1.5,
            0.003,
        ];
        let (mut applied, mut refused) = (0usize, 0usize);
        for _ in 0..200 {
            let mut pieces = vec![PieceEntry {
                piece: "<unk>".into(),
                score: 0.0,
                kind: Unknown,
            }];
            let mut seen = std::collections::HashSet::new();
            for _ in 0..(next(30) + 5) {
                let mut piece: String = if next(2) == 0 {
                    "▁".into()
                } else {
                    String::new()
                };
                piece.extend((0..next(3) + 1).map(|_| letters[next(4) as usize]));
                if seen.insert(piece.clone()) {
                    pieces.push(PieceEntry {
                        piece,
                        score: score_list[next(score_list.len() as u64) as usize],
                        kind: Normal,
                    });
                }
            }
            let m = SpUnigram::new(&pieces, 0).unwrap();
            let unk_score = m.min_score - UNK_PENALTY;
            let mut sc = Vec::new();
            let mut best = Vec::new();
            for _ in 0..20 {
                let mut w = String::from("▁");
                w.extend((0..next(6) + 1).map(|_| letters[next(5) as usize]));
                let word = w.as_bytes();
                if word.len() > MAX_WORD {
                    continue;
                }
                let e = m.exact_word(word, unk_score, &mut sc);
                if e.xmax < 0.0 {
                    refused += 1;
                    continue;
                }
                for x in [
                    0.0f32,
                    1.0,
                    -7.5,
                    e.xmax,
                    -e.xmax,
                    e.xmax * 0.37,
                    -e.xmax * 0.91,
                ] {
                    m.start_lattice(&mut best, word.len(), x);
                    let (mut frontier, mut p) = (0usize, 0usize);
                    while p < word.len() {
                        p += m.step(word, &mut best, p, &mut frontier, unk_score);
                    }
                    assert!(path_matches(&best, 0, word.len(), &e), "{w:?} {x}");
                    // And the scores it stores along the path are the replayed sums.
                    let mut out = vec![];
                    let end = m.replay(&e, 0, x, unk_score, &mut out);
                    assert_eq!(end.to_bits(), best[word.len()].score.to_bits(), "{w:?} {x}");
                    applied += 1;
                }
            }
        }
        assert!(applied > 1000 && refused > 20, "{applied} {refused}");
    }

    /// Scores for random vocabularies: near-ties within float32 rounding, exact ties, and one
    /// large enough to push path scores past the re-centring bound.
    const TIE_SCORES: [f32; 9] = [
        -1.0,
        -2.0,
        -3.0,
        -3.003,
        -1.0039,
        -0.99999994,
        -1.5,
        0.003,
        -60000.0,
    ];

    /// The normalizer `plain_words` serves: dummy prefix, extra whitespace removed, escaped.
    fn plain_words_normalizer() -> SpNormalizer {
        let mut norm = SpNormalizer {
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
            ..Default::default()
        };
        norm.prepare();
        norm
    }

    #[test]
    fn plain_words_ids_agree_with_the_reference_loop() {
        // The ids shortcut over the raw text (words between spaces, each read as `▁` + word)
        // gives the reference loop's ids over the normalized string, unknown runs fused; with
        // byte fallback it declines any text with an unknown piece.
        let mut rng = crate::test_rng(0x2545_F491_9E37_79B9u64);
        let mut next = move |m: u64| rng() % m;
        // `z` and `日` are never single pieces (unknown characters).
        let letters = ["a", "b", "c", "é", "z", "日"];
        let score_list = TIE_SCORES;
        let norm = plain_words_normalizer();
        let (mut checked, mut declined) = (0usize, 0usize);
        for round in 0..60 {
            let k = if round % 2 == 0 { score_list.len() } else { 8 };
            let kind = |r: u64| if r % 10 == 0 { UserDefined } else { Normal };
            let pieces = random_pieces(&mut next, &letters, &score_list[..k], 10, kind);
            let m = SpUnigram::new(&pieces, 0).unwrap();
            assert!(m.words_ok);
            for t in 0..30 {
                let count = if t % 10 == 0 { 2000 } else { next(30) };
                let mut text = String::new();
                for _ in 0..count {
                    text.extend((0..next(3)).map(|_| ' '));
                    // Long words too (past the cache's key length).
                    let len = if next(20) == 0 { 30 } else { next(7) + 1 };
                    text.extend((0..len).map(|_| letters[next(6) as usize]));
                }
                let mut normalized = String::new();
                norm.normalize_text(&text, &mut normalized).unwrap();
                let mut want: Vec<u32> = vec![];
                for (id, _, _) in reference(&pieces, 0, &normalized) {
                    if !(id == 0 && want.last() == Some(&0)) {
                        want.push(id);
                    }
                }
                let mut ids = vec![7u32];
                m.encode_plain_words(&norm, false, &text, &mut ids)
                    .expect("plain text")
                    .unwrap();
                assert_eq!(ids[1..], want[..], "round {round} {text:?}");
                let mut ids = vec![7u32];
                match m.encode_plain_words(&norm, true, &text, &mut ids) {
                    Some(r) => {
                        r.unwrap();
                        assert!(!want.contains(&0));
                        assert_eq!(ids[1..], want[..], "round {round} {text:?}");
                    }
                    None => {
                        assert!(want.contains(&0));
                        assert_eq!(ids, [7]);
                        declined += 1;
                    }
                }
                checked += 1;
            }
        }
        assert!(checked == 1800 && declined > 100, "{declined}");
    }

    #[test]
    fn cut_segments_agree_with_the_reference_loop() {
        // Vocabularies where characters keep to places in pieces, so that texts have cuts of
        // every kind: `p` and `𝔸` only begin pieces, `q` only ends them, `(` and `日` are
        // pieces alone, `ж` and `z` are in none (unknown), `a`, `b` and `é` go anywhere.
        // Words run past the key length and past `MAX_STEPS` pieces, scores tie and push
        // the running score past ±1e5. Both the pieces of `segment` and the ids of
        // `encode_plain_words` are checked against the reference loop.
        let mut rng = crate::test_rng(0x7F4A_7C15_2545_F491u64);
        let mut next = move |m: u64| rng() % m;
        let free = ["a", "b", "é"];
        let letters = ["a", "b", "é", "p", "q", "(", "日", "ж", "z", "𝔸"];
        let score_list = TIE_SCORES;
        let norm = plain_words_normalizer();
        let (mut cut_words, mut checked) = (0usize, 0usize);
        for round in 0..80 {
            let k = if round % 2 == 0 { score_list.len() } else { 8 };
            let mut pieces = vec![PieceEntry {
                piece: "<unk>".into(),
                score: 0.0,
                kind: Unknown,
            }];
            let mut seen = std::collections::HashSet::new();
            for _ in 0..(next(60) + 5) {
                let piece: String = match next(8) {
                    0 => "(".into(),
                    1 => "日".into(),
                    2 => "▁".into(),
                    r => {
                        let mut p = String::new();
                        if r == 3 {
                            p.push_str(if next(2) == 0 { "p" } else { "𝔸" });
                        } else if next(2) == 0 {
                            p.push('▁');
                        }
                        p.extend((0..next(3)).map(|_| free[next(3) as usize]));
                        if r == 4 || p.is_empty() {
                            p.push('q');
                        }
                        p
                    }
                };
                if !seen.insert(piece.clone()) {
                    continue;
                }
                let kind = match next(12) {
                    0 => UserDefined,
                    1 => Unused,
                    _ => Normal,
                };
                pieces.push(PieceEntry {
                    piece,
                    score: score_list[next(k as u64) as usize],
                    kind,
                });
            }
            let Ok(m) = SpUnigram::new(&pieces, 0) else {
                continue;
            };
            assert!(m.words_ok);
            for t in 0..25 {
                let count = if t % 8 == 0 { 600 } else { next(30) };
                // (`plain_words` takes no 4-byte character: `𝔸` in a third of the texts.)
                let nl = if t % 3 == 0 {
                    letters.len()
                } else {
                    letters.len() - 1
                };
                let mut text = String::new();
                for _ in 0..count {
                    text.extend((0..next(3)).map(|_| ' '));
                    let len = if next(12) == 0 { 40 } else { next(9) + 1 };
                    text.extend((0..len).map(|_| letters[next(nl as u64) as usize]));
                }
                let mut normalized = String::new();
                norm.normalize_text(&text, &mut normalized).unwrap();
                let want = reference(&pieces, 0, &normalized);
                cut_words += want
                    .windows(2)
                    .filter(|w| w[0].0 == 0 && w[1].0 == 0)
                    .count();
                let mut out = vec![];
                m.segment(&normalized, &mut out).unwrap();
                let got: Vec<_> = out.iter().map(|p| (p.id, p.start, p.end)).collect();
                assert_eq!(got, want, "round {round} {normalized:?}");
                let mut fused: Vec<u32> = vec![];
                for &(id, _, _) in &want {
                    if !(id == 0 && fused.last() == Some(&0)) {
                        fused.push(id);
                    }
                }
                let mut ids = vec![7u32];
                match m.encode_plain_words(&norm, false, &text, &mut ids) {
                    Some(r) => {
                        r.unwrap();
                        assert_eq!(ids[1..], fused[..], "round {round} {text:?}");
                        checked += 1;
                    }
                    None => assert!(text.contains('𝔸')),
                }
            }
        }
        // Runs of unknown characters did occur.
        assert!(checked > 1200 && cut_words > 1000, "{checked} {cut_words}");
    }

    #[test]
    fn composed_entries_agree_with_the_reference_loop() {
        // Words with cuts inside (`p` only begins pieces, `q` only ends them, `(` and `日`
        // are pieces alone, `ж` and `z` are in none), repeated, so that their second sighting
        // replays the entry `segments` composed on the first; scores tie, and one pushes the
        // running score past ±1e5 (where a composed bound must refuse).
        let mut rng = crate::test_rng(0x2545_F491_4F6C_DD1Du64);
        let mut next = move |m: u64| rng() % m;
        let free = ["a", "b", "é"];
        let letters = ["a", "b", "é", "p", "q", "(", "日", "ж", "z"];
        let (mut composed, mut hits) = (0u64, 0u64);
        for round in 0..60 {
            let k = if round % 2 == 0 { TIE_SCORES.len() } else { 8 };
            let mut pieces = vec![PieceEntry {
                piece: "<unk>".into(),
                score: 0.0,
                kind: Unknown,
            }];
            let mut seen = std::collections::HashSet::new();
            for _ in 0..(next(60) + 5) {
                let piece: String = match next(8) {
                    0 => "(".into(),
                    1 => "日".into(),
                    2 => "▁".into(),
                    r => {
                        let mut p = String::new();
                        if r == 3 {
                            p.push('p');
                        } else if next(2) == 0 {
                            p.push('▁');
                        }
                        p.extend((0..next(3)).map(|_| free[next(3) as usize]));
                        if r == 4 || p.is_empty() {
                            p.push('q');
                        }
                        p
                    }
                };
                if seen.insert(piece.clone()) {
                    let kind = if next(12) == 0 { UserDefined } else { Normal };
                    pieces.push(PieceEntry {
                        piece,
                        score: TIE_SCORES[next(k as u64) as usize],
                        kind,
                    });
                }
            }
            let Ok(m) = SpUnigram::new(&pieces, 0) else {
                continue;
            };
            let words: Vec<String> = (0..10)
                .map(|_| {
                    let mut w = String::from("▁");
                    w.extend((0..next(6) + 2).map(|_| letters[next(9) as usize]));
                    w
                })
                .collect();
            let mut cache = WordCache::new(0);
            let mut best = Vec::new();
            for t in 0..30 {
                let count = if t % 10 == 0 { 2000 } else { next(40) + 1 };
                let mut text = String::new();
                for _ in 0..count {
                    text.push_str(&words[next(words.len() as u64) as usize]);
                }
                let mut out = vec![];
                m.segment_into(text.as_bytes(), &mut best, &mut out, Some(&mut cache))
                    .unwrap();
                let got: Vec<_> = out.iter().map(|p| (p.id, p.start, p.end)).collect();
                assert_eq!(got, reference(&pieces, 0, &text), "round {round} text {t}");
            }
            composed += cache.composed;
            hits += cache.hits;
        }
        assert!(composed > 300 && hits > 100_000, "{composed} {hits}");
    }

    #[test]
    fn word_keys_are_the_zero_padded_bytes() {
        let mut rng = crate::test_rng(0x9E37_79B9_7F4A_7C15u64);
        for len in 0..=30usize {
            for _ in 0..50 {
                let w: Vec<u8> = (0..len).map(|_| (rng() % 256) as u8).collect();
                let pad = |b: &[u8]| {
                    let mut buf = [0u8; MAX_WORD];
                    buf[..b.len()].copy_from_slice(b);
                    let r = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().unwrap());
                    [r(0), r(8), r(16)]
                };
                let want = (1..=MAX_WORD).contains(&len).then(|| pad(&w));
                assert_eq!(WordKey::new(&w).map(|k| k.k), want, "{w:?}");
                let sw = [SPACE, &w[..]].concat();
                let want = (sw.len() <= MAX_WORD).then(|| pad(&sw));
                assert_eq!(WordKey::spaced(&w).map(|k| k.k), want, "{w:?}");
                assert!(WordKey::spaced(&w).is_none_or(|k| usize::from(k.len) == sw.len()));
            }
        }
    }

    #[test]
    fn slot_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    #[test]
    fn robust_bound() {
        // Exact ties are never cached; a wide gap allows any start; a gap of 0.003 (below the
        // float32 spacing 0.0078 near 1e5) only small ones.
        assert_eq!(robust_xmax(0.0, 10.0, 3), None);
        assert!(robust_xmax(1.0, 10.0, 3).unwrap() > 99_000.0);
        let x = robust_xmax(0.003, 10.0, 3).unwrap();
        assert!(x < 32_768.0 && x > 1000.0, "{x}");
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
