//! The tokenizer.json BPE model, with the behaviour of `tokenizers` 0.22.1 (see
//! `spec/BPE-NOTES.md` part B): merges ranked by their position in `merges`, leftmost first on
//! equal rank, one merge at a time; continuing_subword_prefix / end_of_word_suffix decoration;
//! unk (optionally fused), byte fallback, ignore_merges and dropout.

pub(crate) mod backtrack;
mod chars;
pub mod engine;
pub(crate) mod ids_cache;

use super::{Model, Token};
use crate::error::{Error, Result};
use ahash::AHashMap;
use engine::Word;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Words shorter than this (in bytes) are cached, as in the reference.
const CACHE_MAX_WORD: usize = 256;
const CACHE_SHARDS: usize = 16;
/// Bounded: once a shard is full, new words are computed but no longer stored.
const CACHE_PER_SHARD: usize = 4096;

const NO_SPAN: (u32, u32) = (u32::MAX, 0);

/// Reverse vocabulary: dense when ids are compact, a map otherwise (ids need not be
/// contiguous).
enum IdToToken {
    /// Every token in one string (`spans[id]` = its start and end there, `NO_SPAN` when the
    /// id has none): one allocation for the vocabulary instead of one per token.
    Dense {
        text: String,
        spans: Vec<(u32, u32)>,
    },
    Sparse(AHashMap<u32, Box<str>>),
}

impl IdToToken {
    /// The map, and whether every id has one token only. Several tokens may share an id:
    /// the smallest string is kept, so the choice is stable. One pass, no sort (a 100k
    /// vocabulary sorted by id cost ~25M instructions of the load).
    fn build(vocab: &AHashMap<String, u32>) -> (Self, bool) {
        let max = vocab.values().copied().max().unwrap_or(0) as usize;
        let mut unique = true;
        let total: usize = vocab.keys().map(String::len).sum();
        let map = if max <= vocab.len().saturating_mul(2) + 1024 && total < u32::MAX as usize {
            let mut v: Vec<Option<&str>> = vec![None; max + 1];
            for (k, &id) in vocab {
                if let Some(slot) = v.get_mut(id as usize) {
                    match slot {
                        Some(old) => {
                            unique = false;
                            if k.as_str() < *old {
                                *old = k.as_str();
                            }
                        }
                        None => *slot = Some(k.as_str()),
                    }
                }
            }
            let mut text = String::with_capacity(total);
            let spans = v
                .into_iter()
                .map(|t| match t {
                    Some(t) => {
                        let start = text.len() as u32;
                        text.push_str(t);
                        (start, text.len() as u32)
                    }
                    None => NO_SPAN,
                })
                .collect();
            IdToToken::Dense { text, spans }
        } else {
            let mut m: AHashMap<u32, Box<str>> = AHashMap::with_capacity(vocab.len());
            for (k, &id) in vocab {
                match m.entry(id) {
                    std::collections::hash_map::Entry::Occupied(mut e) => {
                        unique = false;
                        if k.as_str() < &**e.get() {
                            e.insert(k.as_str().into());
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(k.as_str().into());
                    }
                }
            }
            IdToToken::Sparse(m)
        };
        (map, unique)
    }
    fn get(&self, id: u32) -> Option<&str> {
        match self {
            IdToToken::Dense { text, spans } => match spans.get(id as usize) {
                Some(&(start, end)) if (start, end) != NO_SPAN => {
                    text.get(start as usize..end as usize)
                }
                _ => None,
            },
            IdToToken::Sparse(m) => m.get(&id).map(|x| &**x),
        }
    }
}

/// The merges as strings, in rank order (`Bpe::merges`, serialization).
enum MergeList {
    /// As loaded.
    Listed(Vec<(String, String)>),
    /// Not kept at load (a `.tiktoken` file has 567k merges: ~1.1M strings, most of its load
    /// time): written from the pair map on first use, ordered by rank, then by the length of
    /// the left token. That is the order `formats::tiktoken` derives them in (tokens by rank,
    /// each one's splits left to right), where all the splits of a token share its rank.
    Derived(OnceLock<Vec<(String, String)>>),
}

/// A bounded cache of merged words. Sharded, and `try_lock` only: under contention a thread
/// simply recomputes instead of waiting.
type Shard = Mutex<AHashMap<Box<str>, Box<[(u32, u32)]>>>;

struct Cache {
    shards: Vec<Shard>,
}

impl Cache {
    fn new() -> Self {
        Cache {
            shards: (0..CACHE_SHARDS)
                .map(|_| Mutex::new(AHashMap::new()))
                .collect(),
        }
    }
    fn shard(&self, word: &str) -> &Shard {
        // A cheap spread (the map hashes the word again anyway).
        let b = word.as_bytes();
        let h = b.len()
            ^ b.first().map_or(0, |&x| x as usize)
            ^ (b.last().map_or(0, |&x| x as usize) << 1)
            ^ b.get(1).map_or(0, |&x| x as usize);
        &self.shards[h % CACHE_SHARDS]
    }
    fn get(&self, word: &str, out: &mut Vec<Token>) -> bool {
        let Ok(map) = self.shard(word).try_lock() else {
            return false;
        };
        let Some(hit) = map.get(word) else {
            return false;
        };
        let mut pos = 0usize;
        for &(id, len) in hit.iter() {
            out.push(Token::new(id, pos, pos + len as usize));
            pos += len as usize;
        }
        true
    }
    fn set(&self, word: &str, tokens: &[Token]) {
        let Ok(mut map) = self.shard(word).try_lock() else {
            return;
        };
        if map.len() >= CACHE_PER_SHARD {
            return;
        }
        let v: Box<[(u32, u32)]> = tokens
            .iter()
            .map(|t| (t.id, (t.offsets.1 - t.offsets.0) as u32))
            .collect();
        map.insert(word.into(), v);
    }
}

pub struct Bpe {
    vocab: AHashMap<String, u32>,
    vocab_r: IdToToken,
    /// (left id, right id) packed in a u64 → (rank, merged id).
    merges: AHashMap<u64, (u32, u32)>,
    /// The same pairs as `merges`, for lookups (see `Pairs`): built on first use (a tiktoken
    /// load re-ranks the merges right after building, and most models never need it), reset
    /// whenever `merges` changes.
    pairs: OnceLock<Pairs>,
    /// Ordered (left, right) merge strings (for serialization by others).
    merge_list: MergeList,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    fuse_unk: bool,
    byte_fallback: bool,
    ignore_merges: bool,
    dropout: Option<f32>,
    /// Id of `<0xXX>` for each byte, when present.
    byte_ids: Box<[Option<u32>; 256]>,
    cache: Option<Cache>,
    /// Id of the byte-level character of each byte (`byte_level::byte_to_char`), when all 256
    /// are in the vocabulary and no decoration applies: the ByteLevel ids path then merges raw
    /// bytes directly.
    byte_level_syms: Option<Box<[u32; 256]>>,
    /// Whether no merge joins a symbol ending in another character with one starting with
    /// `▁`, and `▁` is in the vocabulary (see `has_meta_words`).
    meta_words: bool,
    /// Whether no two tokens share an id. Then a merged id names one string, so a queued
    /// merge is stale exactly when its pair changed, and `Word::merge_small` (a scan) gives
    /// the heap merge's result.
    unique_ids: bool,
    /// Identity of this model in the per-thread id caches.
    uid: u64,
    /// The encoder for long words, when the model allows one (see `backtrack`).
    backtrack: backtrack::Lazy,
    /// Byte-level words that are one token, built on first use (see `single_words`).
    singles: LazySingles,
    /// Character → id of the one-character tokens, built on first use (see `char_ids`).
    char_ids: OnceLock<Option<chars::CharIds>>,
}

/// The merge table for lookups: open addressing, linear probing at a load of at most 5/8,
/// one multiply to hash. When every id and rank is below 2^16 (GPT-2, Llama 2 sized models) a
/// slot is one u64 `left | right | rank | merged id` (16 bits each), so the table of 50k merges
/// is 512 KB and mostly stays in the CPU cache while new words merge; otherwise a slot is 16
/// bytes (key, rank, merged id). A lookup reads one slot most of the time, where the general
/// hash map hashes the key and probes a control group first (several times the instructions,
/// and the pair lookup is the inner loop of merging). The slots hold exactly the entries of
/// the map they are built from, so a lookup answers as the map would.
struct Pairs {
    /// 16-bit form: `left << 48 | right << 32 | rank << 16 | id`, `u64::MAX` when empty
    /// (that would be the pair (0xFFFF, 0xFFFF), and ids stay below 0xFFFF in this form).
    packed: Box<[u64]>,
    slots: Box<[PairSlot]>,
    shift: u32,
    /// Whether every rank is below u32::MAX, which `merge_array` takes for "no merge".
    ranks_fit: bool,
    /// In the 16-bit form, for a byte-level model: `get_packed_bits` of the symbols of
    /// every byte pair, at `first << 8 | second` (`NO_PACKED` where a symbol is 0xffff or
    /// more, which that form never looks up). A new word's first pairs are then one load
    /// each, with no branch on what the probe finds: the pair table is larger than the CPU's
    /// L2, and a mispredicted probe waits for its load before the next pair's load can start.
    bytes: Option<Box<[u32; 1 << 16]>>,
    /// In the general form, for a byte-level model: `rank << 32 | merged id` of the symbols
    /// of every byte pair at `first << 8 | second` (`u64::MAX` where they are no merge), so a
    /// long word's first pairs (`merge_tree`) are one load each instead of a probe each.
    /// Read only where every rank is below u32::MAX (`ranks_fit`), so no merge's entry is
    /// `u64::MAX`. Built by `wide_bytes` once `WIDE_AFTER` bytes of tree words have merged
    /// without it, from `wide_syms` (the byte-level symbols; None: no table).
    wide_bytes: OnceLock<Box<[u64; 1 << 16]>>,
    wide_syms: Option<Box<[u32; 256]>>,
    /// Tree-word bytes still to merge before `wide_bytes` is built.
    wide_due: AtomicUsize,
}

/// Bytes of tree words merged before `Pairs::wide_bytes` is built: its build (~3M
/// instructions, the 65,536 probes) saves ~17 instructions a byte of tree word (cl100k), so
/// prose, whose few tree words are runs of spaces, goes without it.
const WIDE_AFTER: usize = 1 << 16;

#[derive(Clone, Copy)]
struct PairSlot {
    key: u64,
    rank: u32,
    id: u32,
}

/// An empty slot's key: the pair (u32::MAX, u32::MAX), which `Pairs::new` keeps out of the
/// table (such a model keeps an empty table and looks pairs up in the map).
const NO_PAIR: u64 = u64::MAX;
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// The hash of a pair key (`pair_key`) in both forms: the 16-bit form hashes the same key.
#[inline(always)]
fn pair_start(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(MIX) >> shift) as usize
}

/// `Pairs::bytes` being filled from the merges: the bytes of each symbol (a byte-level
/// model's 256 bytes have distinct symbols, but nothing here needs that), as lists.
struct ByteSyms {
    /// First byte whose symbol is the index (`NO_BYTE`: none), over the symbols' range.
    first: Vec<u16>,
    /// The next byte of the same symbol, per byte.
    next: [u16; 256],
    pairs: Box<[u32; 1 << 16]>,
}

const NO_BYTE: u16 = u16::MAX;

/// A table of one entry per byte pair (`first << 8 | second`), every entry `fill`, built on
/// the heap (an array literal of this size would pass through the stack).
fn byte_pair_table<T: Copy>(fill: T) -> Box<[T; 1 << 16]> {
    vec![fill; 1 << 16]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| Box::new([fill; 1 << 16]))
}

impl ByteSyms {
    fn new(syms: &[u32; 256]) -> ByteSyms {
        let span = syms.iter().max().map_or(0, |&m| m as usize + 1);
        let mut first = vec![NO_BYTE; span];
        let mut next = [NO_BYTE; 256];
        for b in (0..256u16).rev() {
            if let Some(f) = first.get_mut(syms[usize::from(b)] as usize) {
                next[usize::from(b)] = *f;
                *f = b;
            }
        }
        ByteSyms {
            first,
            next,
            pairs: byte_pair_table(NO_PACKED),
        }
    }

    /// `value` for every byte pair whose symbols are the pair key `key`.
    fn set(&mut self, key: u64, value: u32) {
        let (first, next) = (&self.first, &self.next);
        // The bytes of `sym`, each below 256 (`NO_BYTE` ends the list).
        let bytes_of = |sym: u64| {
            let mut b = usize::try_from(sym)
                .ok()
                .and_then(|s| first.get(s).copied())
                .unwrap_or(NO_BYTE);
            std::iter::from_fn(move || {
                let this = b;
                b = *next.get(usize::from(this))?;
                Some(usize::from(this))
            })
        };
        for b0 in bytes_of(key >> 32) {
            for b1 in bytes_of(key & 0xffff_ffff) {
                if let Some(p) = self.pairs.get_mut(b0 << 8 | b1) {
                    *p = value;
                }
            }
        }
    }
}

impl Pairs {
    /// The table of `merges`, or an empty one when some pair's key is `NO_PAIR`.
    fn new(merges: &AHashMap<u64, (u32, u32)>, syms: Option<&[u32; 256]>) -> Pairs {
        let none = Pairs {
            packed: Box::new([]),
            slots: Box::new([]),
            shift: 63,
            ranks_fit: false,
            bytes: None,
            wide_bytes: OnceLock::new(),
            wide_syms: None,
            wide_due: AtomicUsize::new(WIDE_AFTER),
        };
        if merges.is_empty() || merges.contains_key(&NO_PAIR) {
            return none;
        }
        let cap = (merges.len() * 8 / 5 + 1).next_power_of_two().max(16);
        let shift = 64 - cap.trailing_zeros();
        let mask = cap - 1;
        let ranks_fit = merges.values().all(|&(rank, _)| rank < u32::MAX);
        let small = merges.iter().all(|(&k, &(rank, id))| {
            let (l, r) = (k >> 32, k & 0xffff_ffff);
            l < 0xffff && r < 0xffff && rank < 0xffff && id < 0xffff
        });
        if small {
            let mut packed = vec![u64::MAX; cap].into_boxed_slice();
            let mut bytes = syms.map(ByteSyms::new);
            for (&key, &(rank, id)) in merges {
                let v = ((key >> 32) << 48)
                    | ((key & 0xffff) << 32)
                    | (u64::from(rank) << 16)
                    | u64::from(id);
                if let Some(b) = bytes.as_mut() {
                    // What `get_packed_bits` answers for this pair.
                    b.set(key, v as u32);
                }
                let mut i = pair_start(key, shift);
                // Keys are distinct (they come from a map): each takes the first empty slot.
                while let Some(s) = packed.get_mut(i) {
                    if *s == u64::MAX {
                        *s = v;
                        break;
                    }
                    i = (i + 1) & mask;
                }
            }
            return Pairs {
                packed,
                shift,
                ranks_fit,
                bytes: bytes.map(|b| b.pairs),
                ..none
            };
        }
        let empty = PairSlot {
            key: NO_PAIR,
            rank: 0,
            id: 0,
        };
        let mut slots = vec![empty; cap].into_boxed_slice();
        for (&key, &(rank, id)) in merges {
            let mut i = pair_start(key, shift);
            while let Some(s) = slots.get_mut(i) {
                if s.key == NO_PAIR {
                    *s = PairSlot { key, rank, id };
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        Pairs {
            slots,
            shift,
            ranks_fit,
            wide_syms: syms.map(|s| Box::new(*s)),
            ..none
        }
    }

    /// `wide_bytes` for a tree word of `len` bytes: None while fewer than `WIDE_AFTER` bytes
    /// have asked (or the model has no table), then built once.
    fn wide_bytes(&self, len: usize) -> Option<&[u64; 1 << 16]> {
        if let Some(w) = self.wide_bytes.get() {
            return Some(w);
        }
        let syms = self.wide_syms.as_deref()?;
        // Threads racing here only move the build a few words earlier or later.
        let due = self.wide_due.load(Ordering::Relaxed);
        if due > len {
            self.wide_due.store(due - len, Ordering::Relaxed);
            return None;
        }
        let wide = self.wide_bytes.get_or_init(|| {
            let mut wide = byte_pair_table(u64::MAX);
            // By probing the 65,536 byte pairs: fewer steps than a test per merge (233k on
            // cl100k).
            for (at, slot) in wide.iter_mut().enumerate() {
                let key = pair_key(syms[at >> 8], syms[at & 0xff]);
                if let Some((rank, id)) = self.get_slots(key) {
                    *slot = (u64::from(rank) << 32) | u64::from(id);
                }
            }
            wide
        });
        Some(wide)
    }

    /// Whether the table is in the 16-bit form (`get_packed` applies).
    fn is_packed(&self) -> bool {
        !self.packed.is_empty()
    }

    /// `get(pair_key(l, r))` in the 16-bit form (`is_packed`) for `l` and `r` below 0xffff,
    /// which the caller has checked (then `want` below is exact, and no empty slot, whose
    /// value is u64::MAX, matches it).
    #[inline(always)]
    fn get_packed(&self, l: u32, r: u32) -> Option<(u32, u32)> {
        let mut i = pair_start(pair_key(l, r), self.shift);
        let want = (u64::from(l) << 16) | u64::from(r);
        let mask = self.packed.len().wrapping_sub(1);
        loop {
            let s = *self.packed.get(i)?;
            if s >> 32 == want {
                return Some((((s >> 16) & 0xffff) as u32, (s & 0xffff) as u32));
            }
            if s == u64::MAX {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// `get_packed` as the slot's low half, `rank << 16 | id`, or `NO_PACKED` (rank 0xffff,
    /// above every rank of this form) when the pair is no merge; same preconditions.
    #[inline(always)]
    fn get_packed_bits(&self, l: u32, r: u32) -> u32 {
        let mut i = pair_start(pair_key(l, r), self.shift);
        let want = (u64::from(l) << 16) | u64::from(r);
        let mask = self.packed.len().wrapping_sub(1);
        loop {
            let Some(&s) = self.packed.get(i) else {
                return NO_PACKED;
            };
            if s >> 32 == want {
                return s as u32;
            }
            if s == u64::MAX {
                return NO_PACKED;
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether the table holds the merges (else lookups go to the map).
    fn is_built(&self) -> bool {
        self.is_packed() || !self.slots.is_empty()
    }

    #[inline(always)]
    fn get(&self, key: u64) -> Option<(u32, u32)> {
        if self.is_packed() {
            // Ids of 16 bits or more are in no entry of this form.
            let (l, r) = ((key >> 32) as u32, key as u32);
            if l >= 0xffff || r >= 0xffff {
                return None;
            }
            return self.get_packed(l, r);
        }
        self.get_slots(key)
    }

    /// `get` in the general form (the table is built and not packed).
    #[inline(always)]
    fn get_slots(&self, key: u64) -> Option<(u32, u32)> {
        let mut i = pair_start(key, self.shift);
        let mask = self.slots.len().wrapping_sub(1);
        loop {
            let s = self.slots.get(i)?;
            if s.key == key {
                return Some((s.rank, s.id));
            }
            if s.key == NO_PAIR {
                return None;
            }
            i = (i + 1) & mask;
        }
    }
}

/// Words of at most this many symbols merge by scanning when `unique_ids` allows it.
const SMALL_WORD: usize = 16;

/// Byte-level words of at most this many bytes merge in stack arrays (`merge_array`) when
/// `unique_ids` allows it; longer ones in the tree, which is cheaper from about 17 bytes on
/// (the 17–24-byte words of squeezed prose: gpt2 16.1M → 14.8M, cl100k 21.6M → 15.3M).
const ARRAY_WORD: usize = 16;

/// `Bpe::singles`, built on first use. Never blocks: while one thread builds, the others go
/// without it; `set` runs only under the `try_lock`, so a process forked in the middle of it
/// finds the lock taken and goes without the table.
#[derive(Default)]
struct LazySingles {
    cell: OnceLock<ids_cache::Singles>,
    building: Mutex<()>,
}

impl LazySingles {
    fn get_or_build(
        &self,
        build: impl FnOnce() -> ids_cache::Singles,
    ) -> Option<&ids_cache::Singles> {
        if let Some(t) = self.cell.get() {
            return Some(t);
        }
        let _guard = self.building.try_lock().ok()?;
        if self.cell.get().is_none() {
            let _ = self.cell.set(build());
        }
        self.cell.get()
    }
}

/// Words of undecorated models with at most this many first symbols merge in stack arrays
/// (`Bpe::undecorated_word_ids`).
const META_ARRAY: usize = 32;

/// Words of at least this many bytes go to the backtracking encoder when the model has one
/// (byte-level words only past `TREE_WORD`): shorter ones are cached, and merge quickly on
/// the heap anyway.
const BACKTRACK_MIN: usize = 256;

/// SentencePiece's whitespace mark.
const META: char = '\u{2581}';

/// Calls `f(start, end)` for the pieces of `text` cut before every `▁` that follows another
/// character: where `has_meta_words` allows the model to see them one by one. A byte scan:
/// `E2 96 81` is `▁`, and a lead byte such as `E2` always starts a character in UTF-8, so the
/// match is the character and every cut is a char boundary.
pub(crate) fn for_each_meta_word(
    text: &str,
    mut f: impl FnMut(usize, usize) -> Result<()>,
) -> Result<()> {
    let b = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    let mut prev_meta = true;
    while let Some(&x) = b.get(i) {
        if x == 0xE2 && b.get(i + 1) == Some(&0x96) && b.get(i + 2) == Some(&0x81) {
            if !prev_meta {
                f(start, i)?;
                start = i;
            }
            prev_meta = true;
            i += 3;
        } else {
            prev_meta = false;
            i += 1;
        }
    }
    f(start, text.len())
}

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Models whose id caches a thread keeps at once.
const IDS_CACHE_MODELS: usize = 4;

thread_local! {
    /// Per thread, so lookups take no lock and threads never wait on each other; keyed by
    /// model `uid`.
    static IDS_CACHES: RefCell<Vec<(u64, ids_cache::IdsTable)>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` on this thread's scratch space, or on fresh space when it is unavailable (a
/// re-entrant call, or a thread being torn down) instead of a panic; big leftovers are freed.
fn with_scratch(f: impl FnOnce(&mut Word, &mut String) -> Result<()>) -> Result<()> {
    let mut f = Some(f);
    let r = SCRATCH.try_with(|cell| {
        let mut sc = cell.try_borrow_mut().ok()?;
        let (w, b) = &mut *sc;
        let r = f.take().map(|f| f(w, b));
        w.trim();
        r
    });
    match (r, f) {
        (Ok(Some(r)), _) => r,
        (_, Some(f)) => f(&mut Word::default(), &mut String::new()),
        (_, None) => Err(Error::other("BPE: scratch space unavailable")),
    }
}

/// Appends the byte-level string of `raw` to `buf`: printable ASCII bytes are their own
/// characters, so runs of them (most of a long word) are copied whole, the other bytes go
/// through the table one by one (a word of spaces or newlines costs as the plain loop).
fn push_byte_level(raw: &[u8], buf: &mut String) {
    buf.reserve(raw.len() * 2);
    let mut rest = raw;
    while let Some((&b, tail)) = rest.split_first() {
        if b.is_ascii_graphic() {
            let run = rest
                .iter()
                .position(|&b| !b.is_ascii_graphic())
                .unwrap_or(rest.len());
            let (ascii, tail) = rest.split_at(run);
            // ASCII is valid UTF-8: the conversion cannot fail.
            buf.push_str(std::str::from_utf8(ascii).unwrap_or_default());
            rest = tail;
        } else {
            buf.push(crate::byte_level::byte_to_char(b));
            rest = tail;
        }
    }
}

/// Fills `ids` with a word's symbols (`sym(b)` per byte of `raw`, as many as fit): their
/// count, and whether the 16-bit pair lookups apply to the whole merge. They do when the
/// table is in that form and every symbol is below 0xffff, since every merged id then is too:
/// the table's range check and form test are decided once for the word.
#[inline(always)]
fn word_symbols(
    ids: &mut [u32],
    raw: &[u8],
    sym: impl Fn(u8) -> u32,
    pairs: &Pairs,
) -> (usize, bool) {
    let mut small = true;
    for (slot, &b) in ids.iter_mut().zip(raw) {
        *slot = sym(b);
        small &= *slot < 0xffff;
    }
    (raw.len().min(ids.len()), small && pairs.is_packed())
}

/// `Pairs::get_packed_bits` of a pair that is no merge: rank 0xffff (every rank of the 16-bit
/// form is below it), id 0xffff.
const NO_PACKED: u32 = u32::MAX;

/// `merge_in_array_by` over the 16-bit pair table (`pairs.is_packed()`, every id of `ids[..n]`
/// below 0xffff, so every merged id is too; `n` at most 32): the same choice, each step
/// merging the adjacent pair of lowest rank, the leftmost among equals (strict `<`, left to
/// right). Symbols keep their first positions (a merged-away one leaves `live`, nothing
/// shifts), and the pair that starts at position `i` is `pair[i] = rank << 16 | merged id`
/// (`NO_PACKED` when there is none, or position `i` is gone), so a step scans one array up to
/// the last symbol that starts a pair.
#[inline(always)]
fn merge_in_array_packed<const N: usize>(
    pairs: &Pairs,
    ids: &mut [u32; N],
    n: usize,
    raw: Option<&[u8]>,
) -> usize {
    // `live` has a bit per symbol.
    const { assert!(N <= 32) };
    let n = n.min(N);
    let mut pair = [NO_PACKED; N];
    match (raw, pairs.bytes.as_deref()) {
        // The symbols are `raw`'s bytes' (the caller's promise): their pairs by byte.
        (Some(raw), Some(bytes)) => {
            for (p, w) in pair
                .iter_mut()
                .zip(raw.get(..n).unwrap_or_default().windows(2))
            {
                *p = bytes[usize::from(w[0]) << 8 | usize::from(w[1])];
            }
        }
        _ => {
            for i in 1..n {
                pair[i - 1] = pairs.get_packed_bits(ids[i - 1], ids[i]);
            }
        }
    }
    // Bit i: symbol i is still there.
    let mut live: u32 = if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
    // Pairs start before the last live symbol.
    let mut end = n.saturating_sub(1);
    loop {
        let (mut best, mut best_pair) = (0, NO_PACKED);
        for (i, &p) in pair[..end].iter().enumerate() {
            if p < best_pair {
                best_pair = p;
                best = i;
            }
        }
        if best_pair == NO_PACKED {
            break;
        }
        let merged = best_pair & 0xffff;
        // The symbol after `best` (a pair starts at `best`, so there is one) joins it.
        let above = !((2u32 << best).wrapping_sub(1));
        let after = live & above;
        if after == 0 {
            break;
        }
        let gone = after.trailing_zeros() as usize;
        live &= !(1u32 << gone);
        if let Some(p) = pair.get_mut(gone) {
            *p = NO_PACKED;
        }
        ids[best] = merged;
        let next = live & above;
        pair[best] = if next != 0 {
            let k = next.trailing_zeros() as usize;
            pairs.get_packed_bits(merged, ids.get(k).copied().unwrap_or(0))
        } else {
            end = best;
            NO_PACKED
        };
        let before = live & ((1u32 << best) - 1);
        if before != 0 {
            let p = (31 - before.leading_zeros()) as usize;
            if let Some(slot) = pair.get_mut(p) {
                *slot = pairs.get_packed_bits(ids.get(p).copied().unwrap_or(0), merged);
            }
        }
    }
    let mut k = 0;
    while live != 0 {
        let i = live.trailing_zeros() as usize;
        live &= live - 1;
        if let Some(&id) = ids.get(i) {
            ids[k] = id;
            k += 1;
        }
    }
    k
}

/// Byte-level words longer than `ARRAY_WORD` and of at most this many bytes merge in a
/// tournament tree (`merge_in_tree`) when `unique_ids` allows it: a scan per step costs
/// O(n²) over a word and the heap's pops cost ~200 instructions each. Longer words go to the
/// backtracking encoder, whose one-time build (~100M instructions for GPT-2, ~230M for
/// cl100k) a text of long words but no huge one would otherwise pay for.
const TREE_WORD: usize = 2048;

/// The merges of the first `n` symbols of `ids` (`n <= N`, `N` a power of two, `T = 2N`
/// tree nodes), in place; returns how many are left. The same choice as `merge_in_array_by`: each step merges the
/// adjacent pair of lowest rank, the leftmost among equals. Symbols keep their first
/// positions, linked both ways, and the pair that starts at position `i` is leaf `i` of a
/// tournament tree over `rank << 32 | i` (`u64::MAX`: none), so a step reads the root and
/// updates three leaves, O(log n) each, without a branch per level. `first(ids, i)` is
/// `lookup(ids[i], ids[i + 1])` of the first symbols (a byte-pair table can answer it).
#[inline(always)]
fn merge_in_tree<const N: usize, const T: usize>(
    ids: &mut [u32; N],
    n: usize,
    first: impl Fn(&[u32; N], usize) -> Option<(u32, u32)>,
    lookup: impl Fn(u32, u32) -> Option<(u32, u32)>,
) -> usize {
    const { assert!(N.is_power_of_two() && N <= 1 << 15 && T == 2 * N) };
    const NONE: u64 = u64::MAX;
    let n = n.min(N);
    // Node k's children are 2k and 2k + 1; leaf i is node N + i; node 0 is unused.
    let mut tree = [NONE; T];
    let tree = &mut tree[..];
    let mut merged = [0u32; N];
    // Links as positions; `N` (past every position) stands for none.
    let mut next = [0u16; N];
    let mut prev = [0u16; N];
    let key = |rank: u32, i: usize| (u64::from(rank) << 32) | i as u64;
    for i in 0..n {
        next[i] = (i + 1) as u16;
        prev[i] = if i == 0 { N as u16 } else { (i - 1) as u16 };
        if i + 1 < n {
            if let Some((rank, id)) = first(ids, i) {
                tree[N + i] = key(rank, i);
                merged[i] = id;
            }
        }
    }
    for k in (1..N).rev() {
        tree[k] = tree[2 * k].min(tree[2 * k + 1]);
    }
    // Ancestors change only up to the first one whose minimum stays: most updates stop
    // within a level or two. The new minimum of a parent is the child's with its sibling's
    // (one load a level).
    let set = |tree: &mut [u64], i: usize, mut v: u64| {
        let mut k = N + i;
        tree[k] = v;
        while k > 1 {
            v = v.min(tree[k ^ 1]);
            k /= 2;
            if tree[k] == v {
                break;
            }
            tree[k] = v;
        }
    };
    loop {
        let top = tree[1];
        if top == NONE {
            break;
        }
        let p = (top & 0xffff_ffff) as usize % N;
        let q = next[p] as usize % N;
        // Symbol q joins p; the pair after q now starts at p.
        ids[p] = merged[p];
        let r = next[q] as usize;
        next[p] = r as u16;
        // q's climb stops at the latest where it meets p's path (which still holds p's old
        // key, the minimum); p's climb below then redoes that path.
        set(tree, q, NONE);
        let after = match ids
            .get(r)
            .filter(|_| r < n)
            .and_then(|&x| lookup(ids[p], x))
        {
            Some((rank, id)) => {
                merged[p] = id;
                key(rank, p)
            }
            None => NONE,
        };
        if r < n {
            prev[r] = p as u16;
        }
        // p held the root's minimum, so every ancestor of it changes: no test a level, and
        // a fixed count of levels (log2 N, unrolled).
        let mut k = N + p;
        let mut v = after;
        tree[k] = v;
        for _ in 0..N.trailing_zeros() {
            v = v.min(tree[k ^ 1]);
            k /= 2;
            tree[k] = v;
        }
        let o = prev[p] as usize;
        if o < N {
            let before = match lookup(ids[o], ids[p]) {
                Some((rank, id)) => {
                    merged[o] = id;
                    key(rank, o)
                }
                None => NONE,
            };
            set(tree, o, before);
        }
    }
    let (mut k, mut i) = (0, 0);
    while i < n {
        ids[k] = ids[i];
        k += 1;
        i = next[i] as usize;
    }
    k
}

/// `Bpe::merge_in_array` with the pairs from `lookup` ((rank, merged id) of a pair, None when
/// it is no merge).
#[inline(always)]
fn merge_in_array_by<const N: usize>(
    ids: &mut [u32; N],
    n: usize,
    lookup: impl Fn(u32, u32) -> Option<(u32, u32)>,
) -> usize {
    // cands[i]: the pair (ids[i], ids[i + 1]) as rank << 32 | merged id; NONE_PAIR (the
    // largest rank) when it is no merge. The scan compares ranks only, so ties go left.
    const NONE_PAIR: u64 = u64::MAX;
    let mut n = n.min(N);
    let mut cands = [NONE_PAIR; N];
    let pair = |l: u32, r: u32| match lookup(l, r) {
        Some((rank, id)) => (u64::from(rank) << 32) | u64::from(id),
        None => NONE_PAIR,
    };
    for i in 1..n {
        cands[i - 1] = pair(ids[i - 1], ids[i]);
    }
    while n > 1 {
        let (mut best, mut best_rank) = (0, u32::MAX);
        for (i, &c) in cands[..n - 1].iter().enumerate() {
            let rank = (c >> 32) as u32;
            if rank < best_rank {
                best_rank = rank;
                best = i;
            }
        }
        let Some(&c) = cands.get(best).filter(|&&c| c != NONE_PAIR) else {
            break;
        };
        // Symbol best + 1 joins symbol best; the later symbols and pairs move down one
        // (element by element: a call to memmove costs more for a few elements).
        ids[best] = c as u32;
        for i in best + 1..n - 1 {
            ids[i] = ids[i + 1];
            cands[i] = cands[i + 1];
        }
        n -= 1;
        cands[best] = if best + 1 < n {
            pair(ids[best], ids[best + 1])
        } else {
            NONE_PAIR
        };
        if best > 0 {
            cands[best - 1] = pair(ids[best - 1], ids[best]);
        }
    }
    n
}

#[inline]
fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

thread_local! {
    static SCRATCH: RefCell<(Word, String)> = RefCell::new((Word::default(), String::new()));
}

/// A small xorshift generator for BPE dropout (no dependency needed; quality is ample for
/// skipping merges at random).
fn random_f32() -> f32 {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEED: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            (SEED.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ t) | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        // 24 random bits → [0, 1).
        (x >> 40) as f32 / (1u64 << 24) as f32
    })
}

fn opt_string(m: &serde_json::Map<String, Value>, field: &str) -> Result<Option<String>> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!(
            "BPE model: `{field}` must be a string or null"
        ))),
    }
}

fn opt_bool(m: &serde_json::Map<String, Value>, field: &str) -> Result<bool> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Error::invalid(format!(
            "BPE model: `{field}` must be a boolean or null"
        ))),
    }
}

/// The `merges` field: a list of `"a b"` strings or a list of `["a", "b"]` pairs, not a mix.
fn parse_merges(v: &Value) -> Result<Vec<(String, String)>> {
    let list = v
        .as_array()
        .ok_or_else(|| Error::invalid("BPE model: `merges` must be a list"))?;
    let as_pairs: Option<Vec<(String, String)>> = list
        .iter()
        .map(|m| match m.as_array().map(Vec::as_slice) {
            Some([Value::String(a), Value::String(b)]) => Some((a.clone(), b.clone())),
            _ => None,
        })
        .collect();
    if let Some(p) = as_pairs {
        return Ok(p);
    }
    let strings: Option<Vec<&str>> = list.iter().map(Value::as_str).collect();
    let Some(strings) = strings else {
        return Err(Error::invalid(
            "BPE model: `merges` must be all \"a b\" strings or all [a, b] pairs",
        ));
    };
    let mut out = Vec::with_capacity(strings.len());
    for (rank, line) in strings
        .into_iter()
        .filter(|l| !l.starts_with("#version"))
        .enumerate()
    {
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(a), Some(b), None) => out.push((a.to_owned(), b.to_owned())),
            _ => {
                return Err(Error::invalid(format!(
                    "BPE model: `merges`: Merges text file invalid at line {}",
                    rank + 1
                )))
            }
        }
    }
    Ok(out)
}

impl Bpe {
    /// Build from the tokenizer.json `model` object.
    pub fn from_json(v: &Value) -> Result<Self> {
        let m = v
            .as_object()
            .ok_or_else(|| Error::invalid("BPE model: `model` must be an object"))?;
        if let Some(t) = m.get("type") {
            if t.as_str() != Some("BPE") {
                return Err(Error::invalid(format!(
                    "BPE model: `type` must be \"BPE\", got {t}"
                )));
            }
        }
        let dropout = match m.get("dropout") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => {
                let p = n.as_f64().unwrap_or(f64::NAN) as f32;
                if !(0.0..=1.0).contains(&p) {
                    return Err(Error::invalid(
                        "BPE model: `dropout` should be between 0 and 1, inclusive",
                    ));
                }
                Some(p)
            }
            Some(_) => {
                return Err(Error::invalid(
                    "BPE model: `dropout` must be a number or null",
                ))
            }
        };
        let vocab_v = m
            .get("vocab")
            .ok_or_else(|| Error::invalid("BPE model: missing `vocab`"))?;
        let vocab_o = vocab_v
            .as_object()
            .ok_or_else(|| Error::invalid("BPE model: `vocab` must be an object"))?;
        let mut vocab = AHashMap::with_capacity(vocab_o.len());
        for (k, id) in vocab_o {
            let id = id
                .as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "BPE model: `vocab`: id of `{k}` must be an integer in 0..2^32"
                    ))
                })?;
            vocab.insert(k.clone(), id);
        }
        let merges_v = m
            .get("merges")
            .ok_or_else(|| Error::invalid("BPE model: missing `merges`"))?;
        let merge_list = parse_merges(merges_v)?;
        let mut bpe = Bpe::build(
            vocab,
            merge_list,
            opt_string(m, "continuing_subword_prefix")?,
            opt_string(m, "end_of_word_suffix")?,
        )?;
        bpe.unk_token = opt_string(m, "unk_token")?;
        bpe.fuse_unk = opt_bool(m, "fuse_unk")?;
        bpe.byte_fallback = opt_bool(m, "byte_fallback")?;
        bpe.ignore_merges = opt_bool(m, "ignore_merges")?;
        bpe.dropout = dropout;
        Ok(bpe)
    }

    /// Validate the merges against the vocabulary and build the pair table.
    pub fn build(
        vocab: AHashMap<String, u32>,
        merge_list: Vec<(String, String)>,
        continuing_subword_prefix: Option<String>,
        end_of_word_suffix: Option<String>,
    ) -> Result<Self> {
        let prefix_len = continuing_subword_prefix.as_ref().map_or(0, String::len);
        let mut merges = AHashMap::with_capacity(merge_list.len());
        let mut merged = String::new();
        for (rank, (a, b)) in merge_list.iter().enumerate() {
            let oov = |t: &str| {
                Error::invalid(format!(
                    "BPE model: `merges`: Token `{t}` out of vocabulary"
                ))
            };
            let a_id = *vocab.get(a).ok_or_else(|| oov(a))?;
            let b_id = *vocab.get(b).ok_or_else(|| oov(b))?;
            // The reference drops the first `prefix_len` bytes of the right part whether or
            // not it starts with the prefix.
            let rest = b.get(prefix_len..).ok_or_else(|| {
                Error::invalid(format!(
                    "BPE model: `merges`: token `{b}` is shorter than continuing_subword_prefix"
                ))
            })?;
            merged.clear();
            merged.push_str(a);
            merged.push_str(rest);
            let new_id = *vocab.get(&merged).ok_or_else(|| oov(&merged))?;
            let rank = u32::try_from(rank)
                .map_err(|_| Error::invalid("BPE model: `merges`: too many merges"))?;
            // A duplicate pair keeps the later rank, as the reference's map insert does.
            merges.insert(pair_key(a_id, b_id), (rank, new_id));
        }
        let undecorated = continuing_subword_prefix
            .as_deref()
            .unwrap_or("")
            .is_empty()
            && end_of_word_suffix.as_deref().unwrap_or("").is_empty();
        let meta_words = undecorated
            && vocab.contains_key("\u{2581}")
            && !merge_list
                .iter()
                .any(|(a, b)| !a.ends_with(META) && b.starts_with(META));
        Ok(Bpe::assemble(
            vocab,
            merges,
            MergeList::Listed(merge_list),
            meta_words,
            continuing_subword_prefix,
            end_of_word_suffix,
        ))
    }

    /// An undecorated model whose merges are given as the pair map itself, ranks included:
    /// `formats::tiktoken`, which checked every pair and merged id against its vocabulary.
    /// The merge strings are written only when asked for (see `MergeList::Derived`).
    pub(crate) fn from_pair_map(
        vocab: AHashMap<String, u32>,
        merges: AHashMap<u64, (u32, u32)>,
    ) -> Self {
        let mut bpe = Bpe::assemble(
            vocab,
            merges,
            MergeList::Derived(OnceLock::new()),
            false,
            None,
            None,
        );
        // As `build` decides it, from the merges' strings (looked up only when `▁` is a
        // token, which no byte-level vocabulary has).
        bpe.meta_words = bpe.vocab.contains_key("\u{2581}")
            && !bpe.merges.keys().any(|&k| {
                let (a, b) = (bpe.vocab_r.get((k >> 32) as u32), bpe.vocab_r.get(k as u32));
                !a.unwrap_or("").ends_with(META) && b.unwrap_or("").starts_with(META)
            });
        bpe
    }

    /// The model of a validated vocabulary and merge map.
    fn assemble(
        vocab: AHashMap<String, u32>,
        merges: AHashMap<u64, (u32, u32)>,
        merge_list: MergeList,
        meta_words: bool,
        continuing_subword_prefix: Option<String>,
        end_of_word_suffix: Option<String>,
    ) -> Self {
        let mut byte_ids = Box::new([None; 256]);
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = vocab.get(&format!("<0x{b:02X}>")).copied();
        }
        let undecorated = continuing_subword_prefix
            .as_deref()
            .unwrap_or("")
            .is_empty()
            && end_of_word_suffix.as_deref().unwrap_or("").is_empty();
        let mut syms = Box::new([0u32; 256]);
        let mut all_bytes = undecorated;
        for (b, slot) in syms.iter_mut().enumerate() {
            let c = crate::byte_level::byte_to_char(b as u8);
            match vocab.get(c.encode_utf8(&mut [0; 4]) as &str) {
                Some(&id) => *slot = id,
                None => all_bytes = false,
            }
        }
        let (vocab_r, unique_ids) = IdToToken::build(&vocab);
        Bpe {
            vocab_r,
            unique_ids,
            vocab,
            pairs: OnceLock::new(),
            merges,
            merge_list,
            unk_token: None,
            continuing_subword_prefix,
            end_of_word_suffix,
            fuse_unk: false,
            byte_fallback: false,
            ignore_merges: false,
            dropout: None,
            byte_ids,
            cache: Some(Cache::new()),
            byte_level_syms: all_bytes.then_some(syms),
            meta_words,
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            backtrack: backtrack::Lazy::default(),
            singles: LazySingles::default(),
            char_ids: OnceLock::new(),
        }
    }

    /// Give every merge the rank of the token it makes, tiktoken's order: the splits of one
    /// token tie, and the engine breaks ties by position as tiktoken does.
    pub(crate) fn rank_merges_by_result(&mut self) {
        for v in self.merges.values_mut() {
            v.0 = v.1;
        }
        self.pairs = OnceLock::new();
        self.singles = LazySingles::default();
    }

    /// Bytes spelled by a byte-level token: one per character of its string.
    pub(crate) fn token_byte_len(&self, id: u32) -> Option<usize> {
        self.vocab_r.get(id).map(|t| t.chars().count())
    }

    pub(crate) fn set_ignore_merges(&mut self, on: bool) {
        self.ignore_merges = on;
        self.singles = LazySingles::default();
    }

    /// Install the table `single_words` would build, made by a loader that has the tokens'
    /// bytes at hand (cheaper than decoding every vocabulary string on first use). The
    /// caller guarantees it holds exactly the words `single_words` takes; a no-op unless
    /// `ignore_merges` is on (set it first: the setters clear the table).
    pub(crate) fn set_single_words(&mut self, table: ids_cache::Singles) {
        if self.ignore_merges {
            let _ = self.singles.cell.set(table);
        }
    }

    /// The tokenizer.json `model` object (vocabulary in id order, merges in rank order).
    pub(crate) fn to_json(&self) -> Value {
        let mut vocab: Vec<(&String, u32)> = self.vocab.iter().map(|(k, &v)| (k, v)).collect();
        vocab.sort_unstable_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        let vocab: serde_json::Map<String, Value> = vocab
            .into_iter()
            .map(|(k, v)| (k.clone(), Value::from(v)))
            .collect();
        let merges: Vec<Value> = self
            .merges()
            .iter()
            .map(|(a, b)| Value::from(vec![a.as_str(), b.as_str()]))
            .collect();
        serde_json::json!({
            "type": "BPE",
            "dropout": self.dropout,
            "unk_token": self.unk_token,
            "continuing_subword_prefix": self.continuing_subword_prefix,
            "end_of_word_suffix": self.end_of_word_suffix,
            "fuse_unk": self.fuse_unk,
            "byte_fallback": self.byte_fallback,
            "ignore_merges": self.ignore_merges,
            "vocab": vocab,
            "merges": merges,
        })
    }

    /// The pair map, sorted (for tests comparing two constructions).
    #[cfg(test)]
    pub(crate) fn pair_map(&self) -> Vec<(u64, (u32, u32))> {
        let mut v: Vec<_> = self.merges.iter().map(|(&k, &v)| (k, v)).collect();
        v.sort_unstable();
        v
    }

    pub fn merges(&self) -> &[(String, String)] {
        match &self.merge_list {
            MergeList::Listed(list) => list,
            MergeList::Derived(list) => list.get_or_init(|| {
                let mut order: Vec<(u32, usize, u64)> = self
                    .merges
                    .iter()
                    .map(|(&k, &(rank, _))| {
                        let left = self.vocab_r.get((k >> 32) as u32).map_or(0, str::len);
                        (rank, left, k)
                    })
                    .collect();
                order.sort_unstable();
                order
                    .into_iter()
                    .map(|(_, _, k)| {
                        let token = |id: u64| self.vocab_r.get(id as u32).unwrap_or("").to_owned();
                        (token(k >> 32), token(k & 0xffff_ffff))
                    })
                    .collect()
            }),
        }
    }
    pub fn unk_token(&self) -> Option<&str> {
        self.unk_token.as_deref()
    }
    pub fn continuing_subword_prefix(&self) -> Option<&str> {
        self.continuing_subword_prefix.as_deref()
    }
    pub fn end_of_word_suffix(&self) -> Option<&str> {
        self.end_of_word_suffix.as_deref()
    }
    pub fn dropout(&self) -> Option<f32> {
        self.dropout
    }
    pub fn fuse_unk(&self) -> bool {
        self.fuse_unk
    }
    pub fn byte_fallback(&self) -> bool {
        self.byte_fallback
    }
    pub fn ignore_merges(&self) -> bool {
        self.ignore_merges
    }

    fn unk_id(&self, unk: &str) -> Result<u32> {
        self.vocab
            .get(unk)
            .copied()
            .ok_or_else(|| Error::invalid(format!("Unk token `{unk}` not found in the vocabulary")))
    }

    #[inline]
    fn lookup(&self, a: u32, b: u32) -> Option<(u32, u32)> {
        self.merges.get(&pair_key(a, b)).copied()
    }

    fn pairs(&self) -> &Pairs {
        self.pairs
            .get_or_init(|| Pairs::new(&self.merges, self.byte_level_syms.as_deref()))
    }

    /// `lookup` through the pair table, for `merge_array` (the byte-level path, whose new
    /// words merge while the small table stays cached); the other paths keep the map, which
    /// inlines into their merge loops.
    #[inline(always)]
    fn lookup_table(&self, pairs: &Pairs, a: u32, b: u32) -> Option<(u32, u32)> {
        if pairs.is_built() {
            pairs.get(pair_key(a, b))
        } else {
            self.lookup(a, b)
        }
    }

    /// The backtracking encoder, for undecorated models (a word's symbols are then its
    /// characters' vocabulary ids, whenever each character is in the vocabulary; unknown
    /// characters make `encode` fail and the word takes the heap path). Unk, byte fallback
    /// and ignore_merges act before or outside the merges, so they need no check here;
    /// dropout is checked by the callers.
    fn backtracker(&self) -> Option<&backtrack::Backtrack> {
        self.backtrack.get_or_build(|| {
            let decorated = self
                .continuing_subword_prefix
                .as_deref()
                .is_some_and(|p| !p.is_empty())
                || self
                    .end_of_word_suffix
                    .as_deref()
                    .is_some_and(|s| !s.is_empty());
            if decorated {
                return None;
            }
            backtrack::Backtrack::build(
                self.vocab.iter().map(|(s, &id)| (s.as_str(), id)),
                |c| self.vocab.get(c.encode_utf8(&mut [0; 4]) as &str).copied(),
                |a, b| self.lookup(a, b),
                self.merges
                    .iter()
                    .map(|(&k, &(rank, new))| ((k >> 32) as u32, k as u32, rank, new)),
            )
        })
    }

    /// Tokens of a long word by the backtracking encoder, as the word's symbols; false when
    /// it does not apply (the word is then untouched).
    fn backtrack_word(&self, text: &[u8], word: &mut Word) -> bool {
        if text.len() < BACKTRACK_MIN {
            return false;
        }
        let Some(bt) = self.backtracker() else {
            return false;
        };
        word.clear();
        let mut st = std::mem::take(&mut word.bt);
        let ok = bt.encode(text, &mut st, |id, len| word.push(id, len));
        word.bt = st;
        ok
    }

    /// `backtrack_word` straight into ids, appended to `out` (untouched when false: the
    /// encoder emits only once it has the whole cover); `word` only lends its scratch state.
    fn backtrack_ids(&self, text: &[u8], word: &mut Word, out: &mut Vec<u32>) -> bool {
        if text.len() < BACKTRACK_MIN {
            return false;
        }
        let Some(bt) = self.backtracker() else {
            return false;
        };
        let mut st = std::mem::take(&mut word.bt);
        let ok = bt.encode(text, &mut st, |id, _| out.push(id));
        word.bt = st;
        ok
    }

    /// The initial symbols of `w` (one per character, decorated), then the merges.
    /// A character with no token: it joins the pending unknown run `unk` (fused) or flushes
    /// it and starts its own; without an unk token it is dropped (the run stays as it is).
    fn unknown_char(
        &self,
        word: &mut Word,
        unk: Option<(u32, u32)>,
        byte_len: u32,
    ) -> Result<Option<(u32, u32)>> {
        let Some(unk_token) = &self.unk_token else {
            return Ok(unk);
        };
        Ok(match (unk, self.fuse_unk) {
            (Some((uid, ulen)), true) => Some((uid, ulen + byte_len)),
            (Some((uid, ulen)), false) => {
                word.push(uid, ulen);
                Some((self.unk_id(unk_token)?, byte_len))
            }
            (None, _) => Some((self.unk_id(unk_token)?, byte_len)),
        })
    }

    fn merge_word(&self, w: &str, word: &mut Word, buf: &mut String, random: bool) -> Result<()> {
        if !random && self.backtrack_word(w.as_bytes(), word) {
            return Ok(());
        }
        word.clear();
        // A pending unknown run: (unk id, byte length).
        let mut unk: Option<(u32, u32)> = None;
        let mut chars = w.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let is_first = i == 0;
            let is_last = chars.peek().is_none();
            let byte_len = c.len_utf8() as u32;
            buf.clear();
            if !is_first {
                if let Some(p) = &self.continuing_subword_prefix {
                    buf.push_str(p);
                }
            }
            buf.push(c);
            if is_last {
                if let Some(s) = &self.end_of_word_suffix {
                    buf.push_str(s);
                }
            }
            if let Some(&id) = self.vocab.get(buf.as_str()) {
                if let Some((uid, ulen)) = unk.take() {
                    word.push(uid, ulen);
                }
                word.push(id, byte_len);
                continue;
            }
            if self.byte_fallback {
                // The bytes come from the decorated string (a reference quirk), one symbol
                // of length 1 each; a pending unknown run is *not* flushed first.
                if buf.bytes().all(|b| self.byte_ids[b as usize].is_some()) {
                    for b in buf.bytes() {
                        if let Some(id) = self.byte_ids[b as usize] {
                            word.push(id, 1);
                        }
                    }
                    continue;
                }
            }
            unk = self.unknown_char(word, unk, byte_len)?;
            // No unk token: the character is dropped.
        }
        if let Some((uid, ulen)) = unk {
            word.push(uid, ulen);
        }
        let lookup = |a, b| self.lookup(a, b);
        if random {
            let p = self.dropout.unwrap_or(0.0);
            word.merge_all(lookup, Some(|| random_f32() < p), |_, _, _| {});
        } else {
            self.merge_deterministic(word);
        }
        Ok(())
    }

    /// All merges of `word`, without dropout.
    #[inline]
    fn merge_deterministic(&self, word: &mut Word) {
        let lookup = |a, b| self.lookup(a, b);
        if self.unique_ids && word.symbols.len() <= SMALL_WORD {
            word.merge_small(lookup, |_, _, _| {});
        } else {
            word.merge_all(lookup, None::<fn() -> bool>, |_, _, _| {});
        }
    }
}

impl Bpe {
    /// Whether `byte_level_ids` applies: deterministic merges over undecorated byte-level
    /// symbols, every byte known (so no unknown or byte-fallback handling is needed).
    pub(crate) fn has_byte_level_ids(&self) -> bool {
        self.byte_level_syms.is_some() && matches!(self.dropout, None | Some(0.0))
    }

    /// Ids of one word given as raw bytes, equal to `tokenize` of its byte-level string (the
    /// caller checked `has_byte_level_ids`). Each raw byte is one symbol of that string, and
    /// merges depend only on symbol ids, so merging raw bytes gives the same ids.
    pub(crate) fn byte_level_ids(&self, raw: &[u8], out: &mut Vec<u32>) -> Result<()> {
        self.with_byte_level_words(|w| w.ids(raw, out))
    }

    /// Run `f` with this thread's id cache of the model taken once, for many `byte_level_ids`
    /// calls (one per word of a text) without a thread-local lookup each.
    pub(crate) fn with_byte_level_words(
        &self,
        f: impl FnOnce(&mut ByteLevelWords<'_>) -> Result<()>,
    ) -> Result<()> {
        let Some(syms) = self.byte_level_syms.as_deref() else {
            return Err(Error::other(
                "BPE: byte-level ids path used without its table",
            ));
        };
        let singles = self.single_words();
        self.with_ids_table(|table| {
            f(&mut ByteLevelWords {
                bpe: self,
                syms,
                singles,
                table,
            })
        })
    }

    /// Under `ignore_merges` (tiktoken's files), the table of byte-level words of at most
    /// `ids_cache::MAX_WORD` bytes whose ids are one token: every vocabulary string of
    /// byte-level characters that short, with its id. That is what `byte_level_merge` gives
    /// such a word: under `ignore_merges` it looks the word's byte-level string up in the
    /// vocabulary first, and that string is the vocabulary string itself (`char_to_byte` and
    /// `byte_to_char` are inverse), so the entry stands exactly for the path it replaces
    /// (built on first use; the setters that change merge results start it afresh). Without
    /// `ignore_merges` there is none: building it would merge every token, more than a few
    /// megabytes of new text cost to merge.
    pub(crate) fn single_words(&self) -> Option<&ids_cache::Singles> {
        if !self.ignore_merges {
            return None;
        }
        self.singles.get_or_build(|| {
            // `char_to_byte` of the characters below U+0144 (the byte-level ones), at hand.
            let mut to_byte = [None; 0x144];
            for (c, slot) in (0u32..).zip(to_byte.iter_mut()) {
                *slot = char::from_u32(c).and_then(crate::byte_level::char_to_byte);
            }
            // The words one after another in `bytes`, (end, id) each.
            let (mut bytes, mut ends) = (Vec::new(), Vec::new());
            'words: for (s, &id) in &self.vocab {
                // Byte-level characters take at most two bytes each.
                if s.is_empty() || s.len() > 2 * ids_cache::MAX_WORD {
                    continue;
                }
                let start = bytes.len();
                for c in s.chars() {
                    match to_byte.get(c as usize).copied().flatten() {
                        Some(b) if bytes.len() - start < ids_cache::MAX_WORD => bytes.push(b),
                        _ => {
                            bytes.truncate(start);
                            continue 'words;
                        }
                    }
                }
                ends.push((bytes.len(), id));
            }
            let mut start = 0;
            let words = ends.iter().map(|&(end, id)| {
                let w = bytes.get(start..end).unwrap_or_default();
                start = end;
                (w, id)
            });
            ids_cache::Singles::new(ends.len(), words)
        })
    }

    /// The ids of one byte-level word. `short_not_token`: the caller knows that a word of at
    /// most `ids_cache::MAX_WORD` bytes is not a vocabulary token (it missed `single_words`,
    /// which holds every such token when `ignore_merges` is on), so that lookup is skipped.
    fn byte_level_merge(
        &self,
        syms: &[u32; 256],
        raw: &[u8],
        word: &mut Word,
        buf: &mut String,
        out: &mut Vec<u32>,
        short_not_token: bool,
    ) -> Result<()> {
        let check_vocab =
            self.ignore_merges && !(short_not_token && raw.len() <= ids_cache::MAX_WORD);
        if !check_vocab && self.merge_fixed(raw, syms, out) {
            return Ok(());
        }
        if check_vocab || raw.len() >= BACKTRACK_MIN {
            // The byte-level string: its characters are the symbols merged here.
            buf.clear();
            if raw.len() >= BACKTRACK_MIN {
                push_byte_level(raw, buf);
            } else {
                // Short words: the plain loop has less set-up.
                buf.extend(raw.iter().map(|&b| crate::byte_level::byte_to_char(b)));
            }
        }
        if check_vocab {
            // A word that is a token is that token, merges or not (as `tokenize`).
            if let Some(&id) = self.vocab.get(buf.as_str()) {
                out.push(id);
                return Ok(());
            }
            if self.merge_fixed(raw, syms, out) {
                return Ok(());
            }
        }
        if raw.len() >= BACKTRACK_MIN {
            if self.backtrack_ids(buf.as_bytes(), word, out) {
                return Ok(());
            }
            word.clear();
        }
        for &b in raw {
            word.push(syms[b as usize], 1);
        }
        self.merge_deterministic(word);
        out.extend(word.iter().map(|(id, _, _)| id));
        Ok(())
    }

    /// Whether a byte-level word of `len` bytes merges in stack arrays (`merge_array`), once
    /// `ignore_merges` has had its say.
    #[inline]
    fn merges_in_array(&self, len: usize) -> bool {
        self.unique_ids && self.pairs().ranks_fit && len <= ARRAY_WORD
    }

    /// The merges of a byte-level word, once `ignore_merges` has had its say, by stack arrays
    /// (`merge_array`) or the tree (`merge_tree`) where its length and the model allow one;
    /// `false` (nothing appended) where neither applies.
    #[inline]
    fn merge_fixed(&self, raw: &[u8], syms: &[u32; 256], out: &mut Vec<u32>) -> bool {
        if !(self.unique_ids && self.pairs().ranks_fit) || raw.len() > TREE_WORD {
            return false;
        }
        let sym = |b: u8| syms[usize::from(b)];
        if raw.len() <= ARRAY_WORD {
            self.merge_array(raw, sym, self.is_byte_syms(syms), out);
        } else {
            self.merge_tree(raw, sym, self.is_byte_syms(syms), out);
        }
        true
    }

    /// Whether `syms` is the model's own byte-level table (`byte_level_syms`), whose byte
    /// pairs `Pairs::bytes` holds.
    #[inline]
    fn is_byte_syms(&self, syms: &[u32; 256]) -> bool {
        self.byte_level_syms
            .as_deref()
            .is_some_and(|own| std::ptr::eq(own, syms))
    }

    /// The merges of a short word (`raw.len() <= ARRAY_WORD`, symbol `sym(b)` per byte) over
    /// stack arrays, ids appended to `out` (see `merge_in_array`). `byte_syms`: `sym` is
    /// `byte_level_syms`, so the first pairs may come from `Pairs::bytes`.
    fn merge_array(
        &self,
        raw: &[u8],
        sym: impl Fn(u8) -> u32,
        byte_syms: bool,
        out: &mut Vec<u32>,
    ) {
        let mut ids = [0u32; ARRAY_WORD];
        let pairs = self.pairs();
        let (n, packed) = word_symbols(&mut ids, raw, sym, pairs);
        let n = if packed {
            merge_in_array_packed(pairs, &mut ids, n, byte_syms.then_some(raw))
        } else if !pairs.slots.is_empty() {
            // The general form's lookup inlined (through `lookup_table` it was a call).
            merge_in_array_by(&mut ids, n, |l, r| pairs.get_slots(pair_key(l, r)))
        } else {
            self.merge_in_array(pairs, &mut ids, n)
        };
        out.extend_from_slice(ids.get(..n).unwrap_or_default());
    }

    /// The merges of a word of `ARRAY_WORD` to `TREE_WORD` bytes (symbol `sym(b)` per byte)
    /// in a tournament tree (`merge_in_tree`), ids appended to `out`. `byte_syms`: `sym` is
    /// `byte_level_syms`, so the first pairs may come from `Pairs::bytes` or `wide_bytes`.
    fn merge_tree(&self, raw: &[u8], sym: impl Fn(u8) -> u32, byte_syms: bool, out: &mut Vec<u32>) {
        let pairs = self.pairs();
        fn run<const N: usize, const T: usize>(
            raw: &[u8],
            sym: impl Fn(u8) -> u32,
            byte_syms: bool,
            bpe: &Bpe,
            pairs: &Pairs,
            out: &mut Vec<u32>,
        ) {
            let mut ids = [0u32; N];
            // The 16-bit lookups skip the form test and range check (~10 % of the tree
            // merge's instructions); the general form's skip the form test.
            let (n, packed) = word_symbols(&mut ids, raw, sym, pairs);
            let byte_pair = |i: usize| {
                let at = |j: usize| raw.get(j).map_or(0, |&b| usize::from(b));
                at(i) << 8 | at(i + 1)
            };
            let n = match (packed, byte_syms, pairs.bytes.as_deref()) {
                (true, true, Some(bytes)) => {
                    let first = |_: &[u32; N], i: usize| {
                        let v = bytes[byte_pair(i)];
                        (v != NO_PACKED).then_some((v >> 16, v & 0xffff))
                    };
                    merge_in_tree::<N, T>(&mut ids, n, first, |l, r| pairs.get_packed(l, r))
                }
                (false, _, _) if !pairs.slots.is_empty() => {
                    let lookup = |l, r| pairs.get_slots(pair_key(l, r));
                    // An instance each: a test per first pair cost more than the second
                    // instance (~3 % of cl100k's squeezed prose).
                    match pairs.wide_bytes(raw.len()).filter(|_| byte_syms) {
                        Some(wide) => {
                            let first = |_: &[u32; N], i: usize| {
                                let v = wide[byte_pair(i)];
                                (v != u64::MAX).then_some(((v >> 32) as u32, v as u32))
                            };
                            merge_in_tree::<N, T>(&mut ids, n, first, lookup)
                        }
                        None => {
                            let first = |ids: &[u32; N], i: usize| lookup(ids[i], *ids.get(i + 1)?);
                            merge_in_tree::<N, T>(&mut ids, n, first, lookup)
                        }
                    }
                }
                _ => {
                    let lookup = |l, r| {
                        if packed {
                            pairs.get_packed(l, r)
                        } else {
                            bpe.lookup_table(pairs, l, r)
                        }
                    };
                    let first = |ids: &[u32; N], i: usize| lookup(ids[i], *ids.get(i + 1)?);
                    merge_in_tree::<N, T>(&mut ids, n, first, lookup)
                }
            };
            out.extend_from_slice(ids.get(..n).unwrap_or_default());
        }
        // The smallest tree that holds the word: its set-up is linear in its size. All of it
        // is on the stack (56 KB for the largest).
        const { assert!(TREE_WORD <= 2048) };
        match raw.len() {
            0..=32 => run::<32, 64>(raw, sym, byte_syms, self, pairs, out),
            33..=64 => run::<64, 128>(raw, sym, byte_syms, self, pairs, out),
            65..=128 => run::<128, 256>(raw, sym, byte_syms, self, pairs, out),
            129..=256 => run::<256, 512>(raw, sym, byte_syms, self, pairs, out),
            257..=512 => run::<512, 1024>(raw, sym, byte_syms, self, pairs, out),
            513..=1024 => run::<1024, 2048>(raw, sym, byte_syms, self, pairs, out),
            _ => run::<2048, 4096>(raw, sym, byte_syms, self, pairs, out),
        }
    }

    /// The merges of the first `n` symbols of `ids`, in place; returns how many are left.
    /// The same choice as `Word::merge_small` (so the heap merge's result when `unique_ids`
    /// holds, which the callers check, with `ranks_fit`): each step merges the adjacent pair
    /// of lowest rank, the leftmost among equals (strict `<`, left to right), with the merged
    /// id found when the pair was formed. Only the arrays differ: the pairs are kept
    /// contiguous (the merged-away symbol is shifted out) so the scan is a plain loop.
    #[inline(always)]
    fn merge_in_array<const N: usize>(&self, pairs: &Pairs, ids: &mut [u32; N], n: usize) -> usize {
        merge_in_array_by(ids, n, |l, r| self.lookup_table(pairs, l, r))
    }

    /// Whether `meta_text_ids` applies: the text may be cut before every `▁` that follows
    /// another character, because no merge joins a symbol ending in another character with
    /// one starting with `▁` (symbols only grow by merges, so no symbol ever spans such a
    /// cut), `▁` is a known symbol (so no unknown run or byte fallback spans it), and nothing
    /// looks at the whole piece (ignore_merges, decorations, dropout).
    pub(crate) fn has_meta_words(&self) -> bool {
        self.meta_words && matches!(self.dropout, None | Some(0.0)) && !self.ignore_merges
    }

    /// Ids of a `▁`-escaped piece, equal to `tokenize(text)` (the caller checked
    /// `has_meta_words`): word by word, through the per-thread cache.
    pub(crate) fn meta_text_ids(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        self.with_ids_table(|mut table| {
            for_each_meta_word(text, |s, e| {
                let w = &text[s..e];
                self.cached_ids(table.as_deref_mut(), w.as_bytes(), out, |word, buf, out| {
                    if w.len() < BACKTRACK_MIN {
                        if let Some(chars) = self.char_ids() {
                            return self.undecorated_word_ids(chars, w, word, out);
                        }
                    }
                    self.merge_word(w, word, buf, false)?;
                    out.extend(word.iter().map(|(id, _, _)| id));
                    Ok(())
                })
            })
        })
    }

    /// The one-character token table, for undecorated models (built on first use).
    fn char_ids(&self) -> Option<&chars::CharIds> {
        self.char_ids
            .get_or_init(|| {
                let decorated = [&self.continuing_subword_prefix, &self.end_of_word_suffix]
                    .iter()
                    .any(|d| d.as_deref().is_some_and(|d| !d.is_empty()));
                if decorated {
                    return None;
                }
                chars::CharIds::new(self.vocab.iter().map(|(s, &id)| (s.as_str(), id)))
            })
            .as_ref()
    }

    /// `merge_word(w, …, random: false)`'s ids for an undecorated model whose word goes to no
    /// backtracking (`w` under `BACKTRACK_MIN` bytes): the same first symbols (a character's
    /// token, its byte tokens, or unk, fused or not, in the same order), found through
    /// `chars` instead of the vocabulary map; then the same merges, over stack arrays when
    /// the word has at most `META_ARRAY` symbols and `merge_in_array` applies, else on the
    /// heap, with pairs looked up in the pair table (which holds exactly the map's entries).
    fn undecorated_word_ids(
        &self,
        chars: &chars::CharIds,
        w: &str,
        word: &mut Word,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        word.clear();
        // A pending unknown run: (unk id, byte length).
        let mut unk: Option<(u32, u32)> = None;
        for c in w.chars() {
            let byte_len = c.len_utf8() as u32;
            if let Some(id) = chars.get(c) {
                if let Some((uid, ulen)) = unk.take() {
                    word.push(uid, ulen);
                }
                word.push(id, byte_len);
                continue;
            }
            let mut utf8 = [0u8; 4];
            let bytes = c.encode_utf8(&mut utf8).as_bytes();
            if self.byte_fallback && bytes.iter().all(|&b| self.byte_ids[b as usize].is_some()) {
                // As `merge_word`: a pending unknown run is not flushed first.
                for id in bytes.iter().filter_map(|&b| self.byte_ids[b as usize]) {
                    word.push(id, 1);
                }
                continue;
            }
            unk = self.unknown_char(word, unk, byte_len)?;
        }
        if let Some((uid, ulen)) = unk {
            word.push(uid, ulen);
        }
        let pairs = self.pairs();
        if self.unique_ids && pairs.ranks_fit && word.symbols.len() <= META_ARRAY {
            let mut ids = [0u32; META_ARRAY];
            for (slot, s) in ids.iter_mut().zip(&word.symbols) {
                *slot = s.id;
            }
            let n = self.merge_in_array(pairs, &mut ids, word.symbols.len());
            out.extend_from_slice(ids.get(..n).unwrap_or_default());
            return Ok(());
        }
        let lookup = |a, b| self.lookup_table(pairs, a, b);
        word.merge_all(lookup, None::<fn() -> bool>, |_, _, _| {});
        out.extend(word.iter().map(|(id, _, _)| id));
        Ok(())
    }

    /// Run `f` with this thread's id cache of this model (created on first use), or with none
    /// when it is unavailable (a re-entrant call, or a thread being torn down).
    fn with_ids_table(
        &self,
        f: impl FnOnce(Option<&mut ids_cache::IdsTable>) -> Result<()>,
    ) -> Result<()> {
        let mut f = Some(f);
        let r = IDS_CACHES.try_with(|c| {
            let mut caches = c.try_borrow_mut().ok()?;
            let table = crate::parallel::model_cache(
                &mut caches,
                self.uid,
                IDS_CACHE_MODELS,
                ids_cache::IdsTable::default,
            );
            f.take().map(|f| f(Some(table)))
        });
        match (r, f) {
            (Ok(Some(r)), _) => r,
            (_, Some(f)) => f(None),
            (_, None) => Err(Error::other("BPE: id cache unavailable")),
        }
    }

    /// The ids of `key` from `table`, or computed by `merge` (given cleared scratch space)
    /// and remembered.
    #[inline]
    fn cached_ids(
        &self,
        mut table: Option<&mut ids_cache::IdsTable>,
        key: &[u8],
        out: &mut Vec<u32>,
        merge: impl FnOnce(&mut Word, &mut String, &mut Vec<u32>) -> Result<()>,
    ) -> Result<()> {
        if key.is_empty() {
            return Ok(());
        }
        if u32::try_from(key.len()).is_err() {
            return Err(Error::invalid("BPE: word longer than 4 GiB"));
        }
        let short = key.len() <= ids_cache::MAX_WORD;
        let long = !short && key.len() <= ids_cache::MAX_LONG_WORD;
        if let Some(t) = table.as_deref_mut() {
            if (short && t.get(key, out)) || (long && t.get_long(key, out)) {
                return Ok(());
            }
        }
        self.merge_and_remember(table, key, out, merge)
    }

    /// The miss path of `cached_ids` (`key` is 1..=u32::MAX bytes and not in `table`): the
    /// ids computed by `merge` (given cleared scratch space) and remembered.
    fn merge_and_remember(
        &self,
        table: Option<&mut ids_cache::IdsTable>,
        key: &[u8],
        out: &mut Vec<u32>,
        merge: impl FnOnce(&mut Word, &mut String, &mut Vec<u32>) -> Result<()>,
    ) -> Result<()> {
        let short = key.len() <= ids_cache::MAX_WORD;
        let long = !short && key.len() <= ids_cache::MAX_LONG_WORD;
        let start = out.len();
        with_scratch(|word, buf| {
            word.clear();
            merge(word, buf, out)
        })?;
        if let (Some(t), Some(ids)) = (table, out.get(start..)) {
            if short {
                t.insert(key, ids);
            } else if long {
                t.insert_long(key, ids);
            }
        }
        Ok(())
    }
}

/// `Bpe::byte_level_ids` for the words of a text, with the thread's id cache held.
pub(crate) struct ByteLevelWords<'a> {
    bpe: &'a Bpe,
    syms: &'a [u32; 256],
    singles: Option<&'a ids_cache::Singles>,
    table: Option<&'a mut ids_cache::IdsTable>,
}

impl ByteLevelWords<'_> {
    /// Append the ids of one word (raw bytes) to `out`: from the thread's cache, else a word
    /// that is one token from the shared table, else merged. The thread's cache comes first:
    /// frequent words stay in its few hot lines, where the shared table is larger than the
    /// CPU caches, so it serves the words the thread has not met lately.
    /// Only a hit on a short word is inline (it inlines into the scanner's loop over the
    /// words); everything else is `ids_after_short_miss`.
    #[inline(always)]
    pub(crate) fn ids(&mut self, raw: &[u8], out: &mut Vec<u32>) -> Result<()> {
        let short = !raw.is_empty() && raw.len() <= ids_cache::MAX_WORD;
        if short {
            if let Some(t) = self.table.as_deref_mut() {
                if t.get(raw, out) {
                    return Ok(());
                }
            }
        }
        self.ids_after_short_miss(raw, short, out)
    }

    /// `ids` of the word `text[pos..end]` (a non-empty range): the cache key comes from two
    /// loads of `text` where sixteen bytes follow `pos`, not from the word's bytes one by one.
    #[inline(always)]
    pub(crate) fn ids_at(
        &mut self,
        text: &[u8],
        pos: usize,
        end: usize,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let raw = text.get(pos..end).unwrap_or_default();
        let len = raw.len();
        if let [b] = raw {
            // One symbol, no pair to merge: the byte's own token, without the cache.
            out.push(self.syms[usize::from(*b)]);
            return Ok(());
        }
        if len <= ids_cache::MAX_WORD {
            if let Some((k0, k1)) = ids_cache::key_at(text, pos, len) {
                if let Some(t) = self.table.as_deref_mut() {
                    if t.get_keyed(k0, k1, len, out) {
                        return Ok(());
                    }
                }
                return self.ids_after_short_miss(raw, len > 0, out);
            }
        }
        self.ids(raw, out)
    }

    /// `ids` of the word `text[pos..pos + len]` (`len` of 1..=15) whose bytes begin the
    /// sixteen of `text` from `pos`, given as two little-endian words: key and word from the
    /// scanner's own loads.
    #[inline(always)]
    pub(crate) fn ids_window(
        &mut self,
        text: &[u8],
        pos: usize,
        [lo, hi]: [u64; 2],
        len: usize,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        if len == 1 {
            // One symbol, no pair to merge: the byte's own token, without the cache.
            out.push(self.syms[usize::from(lo as u8)]);
            return Ok(());
        }
        if let (Some(t), Some((k0, k1))) = (
            self.table.as_deref_mut(),
            ids_cache::window_key(lo, hi, len),
        ) {
            if t.get_keyed(k0, k1, len, out) {
                return Ok(());
            }
        }
        let raw = text.get(pos..pos + len).unwrap_or_default();
        self.ids_after_short_miss(raw, len > 0, out)
    }

    /// `ids` past the inline lookup (`short`: `raw` is a short word the table lacks, so it is
    /// not looked up again).
    #[inline(never)]
    fn ids_after_short_miss(&mut self, raw: &[u8], short: bool, out: &mut Vec<u32>) -> Result<()> {
        let (bpe, syms, singles) = (self.bpe, self.syms, self.singles);
        if short && singles.is_none() && !bpe.ignore_merges && bpe.merges_in_array(raw.len()) {
            // What `byte_level_merge` does with such a word, without the scratch space it
            // does not use.
            let start = out.len();
            bpe.merge_array(raw, |b| syms[b as usize], bpe.is_byte_syms(syms), out);
            if let (Some(t), Some(ids)) = (self.table.as_deref_mut(), out.get(start..)) {
                t.insert(raw, ids);
            }
            return Ok(());
        }
        let merge = |word: &mut Word, buf: &mut String, out: &mut Vec<u32>| {
            if let Some(t) = singles {
                if let Some(id) = t.get(raw) {
                    out.push(id);
                    return Ok(());
                }
            }
            bpe.byte_level_merge(syms, raw, word, buf, out, singles.is_some())
        };
        let table = self.table.as_deref_mut();
        if short {
            bpe.merge_and_remember(table, raw, out, merge)
        } else {
            bpe.cached_ids(table, raw, out, merge)
        }
    }
}

impl Model for Bpe {
    fn tokenize(&self, piece: &str, out: &mut Vec<Token>) -> Result<()> {
        if piece.is_empty() {
            return Ok(());
        }
        if u32::try_from(piece.len()).is_err() {
            return Err(Error::invalid("BPE: word longer than 4 GiB"));
        }
        let random = !matches!(self.dropout, None | Some(0.0));
        if !random {
            if self.ignore_merges {
                if let Some(&id) = self.vocab.get(piece) {
                    out.push(if self.vocab_r.get(id) == Some(piece) {
                        Token::new(id, 0, piece.len())
                    } else {
                        Token::with_value(id, piece, 0, piece.len())
                    });
                    return Ok(());
                }
            }
            if piece.len() < CACHE_MAX_WORD {
                if let Some(cache) = &self.cache {
                    if cache.get(piece, out) {
                        return Ok(());
                    }
                }
            }
        }
        let start = out.len();
        with_scratch(|word, buf| {
            self.merge_word(piece, word, buf, random)?;
            out.extend(word.iter().map(|(id, s, e)| Token::new(id, s, e)));
            Ok(())
        })?;
        if !random && piece.len() < CACHE_MAX_WORD {
            if let Some(cache) = &self.cache {
                cache.set(piece, &out[start..]);
            }
        }
        Ok(())
    }
    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }
    fn id_to_token(&self, id: u32) -> Option<&str> {
        self.vocab_r.get(id)
    }
    fn vocab_size(&self) -> usize {
        self.vocab.len()
    }
    fn vocab(&self) -> HashMap<String, u32> {
        self.vocab.iter().map(|(k, &v)| (k.clone(), v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Vocabulary from a token list (ids in order).
    fn vocab(tokens: &[&str]) -> Value {
        let m: serde_json::Map<String, Value> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), json!(i)))
            .collect();
        Value::Object(m)
    }

    fn model(tokens: &[&str], merges: Value, extra: Value) -> Bpe {
        let mut m = json!({"type": "BPE", "vocab": vocab(tokens), "merges": merges});
        if let (Some(o), Some(e)) = (m.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                o.insert(k.clone(), v.clone());
            }
        }
        Bpe::from_json(&m).unwrap()
    }

    /// With one token per id, the scan merge gives the heap merge's result, though different
    /// pairs make the same token (`ab`+`c` and `a`+`bc`): random string-built merge tables,
    /// shared ranks included (tiktoken order), random words.
    /// Tokens in id order, the vocabulary and the merges of a generated model.
    type MergeTable = (Vec<String>, AHashMap<String, u32>, Vec<(String, String)>);

    /// A random merge table over `seeds`: `tries` draws of two known tokens whose joined
    /// length is at most `max_len`, each new pair a merge (its result a new token unless the
    /// string is already one). Returns the tokens in id order, the vocabulary and the merges.
    fn random_merges(
        next: &mut impl FnMut() -> u64,
        seeds: &[&str],
        tries: usize,
        max_len: usize,
    ) -> MergeTable {
        let mut tokens: Vec<String> = seeds.iter().map(|t| t.to_string()).collect();
        let mut vocab: AHashMap<String, u32> = AHashMap::new();
        for (i, t) in tokens.iter().enumerate() {
            vocab.insert(t.clone(), i as u32);
        }
        let mut merges = Vec::new();
        for _ in 0..tries {
            let a = tokens[(next() % tokens.len() as u64) as usize].clone();
            let b = tokens[(next() % tokens.len() as u64) as usize].clone();
            if a.len() + b.len() > max_len || merges.contains(&(a.clone(), b.clone())) {
                continue;
            }
            let ab = format!("{a}{b}");
            if !vocab.contains_key(&ab) {
                vocab.insert(ab.clone(), tokens.len() as u32);
                tokens.push(ab);
            }
            merges.push((a, b));
        }
        (tokens, vocab, merges)
    }

    #[test]
    fn small_merge_matches_heap_merge_on_string_tables() {
        let mut next = crate::test_rng(0x5EED_0F5C_A7E5_0001);
        let mut shared_tables = 0;
        for round in 0..60 {
            let (_, vocab, merges) = random_merges(&mut next, &["a", "b", "c"], 40, 6);
            let results: std::collections::HashSet<String> =
                merges.iter().map(|(a, b)| format!("{a}{b}")).collect();
            shared_tables += usize::from(results.len() < merges.len());
            let mut bpe = Bpe::build(vocab, merges, None, None).unwrap();
            assert!(bpe.unique_ids);
            if round % 2 == 1 {
                bpe.rank_merges_by_result();
            }
            for _ in 0..200 {
                let n = 1 + (next() % SMALL_WORD as u64) as usize;
                let word: String = (0..n)
                    .map(|_| ['a', 'b', 'c'][(next() % 3) as usize])
                    .collect();
                let (mut heap, mut small) = (Word::default(), Word::default());
                for c in word.chars() {
                    let id = bpe.vocab[c.encode_utf8(&mut [0; 4]) as &str];
                    heap.push(id, 1);
                    small.push(id, 1);
                }
                heap.merge_all(|a, b| bpe.lookup(a, b), None::<fn() -> bool>, |_, _, _| {});
                small.merge_small(|a, b| bpe.lookup(a, b), |_, _, _| {});
                assert_eq!(
                    heap.iter().collect::<Vec<_>>(),
                    small.iter().collect::<Vec<_>>(),
                    "{word}"
                );
            }
        }
        // Most tables make some token from several pairs.
        assert!(shared_tables > 15, "{shared_tables}");
    }

    /// Token strings and byte offsets.
    fn tok(b: &Bpe, s: &str) -> Vec<(String, (usize, usize))> {
        let mut out = Vec::new();
        b.tokenize(s, &mut out).unwrap();
        out.iter()
            .map(|t| {
                let text = match &t.value {
                    Some(v) => v.to_string(),
                    None => b.id_to_token(t.id).unwrap().to_string(),
                };
                (text, t.offsets)
            })
            .collect()
    }

    fn strs(b: &Bpe, s: &str) -> Vec<String> {
        tok(b, s).into_iter().map(|x| x.0).collect()
    }

    #[test]
    fn rank_order_not_ids() {
        let v = ["a", "b", "c", "ab", "bc"];
        let m = model(&v, json!(["b c", "a b"]), json!({}));
        assert_eq!(strs(&m, "abc"), ["a", "bc"]);
        let m = model(&v, json!(["a b", "b c"]), json!({}));
        assert_eq!(strs(&m, "abc"), ["ab", "c"]);
        // ab with a higher id than bc changes nothing.
        let m = model(
            &["a", "b", "c", "bc", "ab"],
            json!(["a b", "b c"]),
            json!({}),
        );
        assert_eq!(strs(&m, "abc"), ["ab", "c"]);
    }

    #[test]
    fn same_pair_leftmost() {
        let m = model(&["a", "aa"], json!(["a a"]), json!({}));
        assert_eq!(strs(&m, "aaaaa"), ["aa", "aa", "a"]);
    }

    #[test]
    fn duplicate_merge_takes_later_rank() {
        let v = ["a", "b", "c", "ab", "bc"];
        let m = model(&v, json!(["a b", "b c", "a b"]), json!({}));
        assert_eq!(strs(&m, "abc"), ["a", "bc"]);
    }

    #[test]
    fn one_merge_at_a_time() {
        // [ab a, a b]: "abab" → aba b (the GPT-2 loop would give ab ab).
        let m = model(&["a", "b", "ab", "aba"], json!(["ab a", "a b"]), json!({}));
        assert_eq!(strs(&m, "abab"), ["aba", "b"]);
    }

    #[test]
    fn merges_formats() {
        let v = ["a", "b", "c", "ab", "bc"];
        let s = model(&v, json!(["#version: 0.2", "a b", "b c"]), json!({}));
        let p = model(&v, json!([["a", "b"], ["b", "c"]]), json!({}));
        assert_eq!(strs(&s, "abc"), strs(&p, "abc"));
        // Pairs may hold spaces.
        let m = model(&["a", "b c", "ab c"], json!([["a", "b c"]]), json!({}));
        assert_eq!(m.merges().len(), 1);
        let bad = |merges: Value| {
            Bpe::from_json(&json!({"vocab": vocab(&v), "merges": merges}))
                .err()
                .unwrap()
        };
        assert!(bad(json!(["a b", ["b", "c"]])).message.contains("merges"));
        assert!(bad(json!(["a b c"]))
            .message
            .contains("Merges text file invalid"));
        assert!(bad(json!(["ab"]))
            .message
            .contains("Merges text file invalid"));
        let e = Bpe::from_json(&json!({"vocab": vocab(&v)})).err().unwrap();
        assert!(e.message.contains("merges"));
        assert_eq!(e.kind, crate::error::ErrorKind::InvalidData);
    }

    #[test]
    fn validation() {
        let e = Bpe::from_json(&json!({"vocab": vocab(&["a", "b"]), "merges": ["a b"]}))
            .err()
            .unwrap();
        assert!(
            e.message.contains("Token `ab` out of vocabulary"),
            "{}",
            e.message
        );
        let e = Bpe::from_json(&json!({"vocab": vocab(&["a", "ab"]), "merges": ["a b"]}))
            .err()
            .unwrap();
        assert!(e.message.contains("Token `b` out of vocabulary"));
        // With a prefix, the merged token drops the right part's prefix.
        let m = model(
            &["a", "##b", "ab"],
            json!(["a ##b"]),
            json!({"continuing_subword_prefix": "##"}),
        );
        assert_eq!(strs(&m, "ab"), ["ab"]);
        // Reachability: abc in the vocab but no merge path.
        let m = model(&["a", "b", "c", "abc"], json!([]), json!({}));
        assert_eq!(strs(&m, "abc"), ["a", "b", "c"]);
        // Non-contiguous ids are fine.
        let m = Bpe::from_json(&json!({"vocab": {"a": 7, "b": 1000, "ab": 3}, "merges": ["a b"]}))
            .unwrap();
        assert_eq!(strs(&m, "ab"), ["ab"]);
        assert_eq!(m.vocab_size(), 3);
        // Wrong type, bad dropout.
        assert!(Bpe::from_json(&json!({"type": "WordPiece", "vocab": {}, "merges": []})).is_err());
        let e = Bpe::from_json(&json!({"vocab": {}, "merges": [], "dropout": 1.5}))
            .err()
            .unwrap();
        assert!(e.message.contains("dropout"));
    }

    #[test]
    fn ignore_merges() {
        let v = ["a", "b", "c", "ab", "abc", "<unk>"];
        let off = model(&v, json!(["a b"]), json!({}));
        assert_eq!(strs(&off, "abc"), ["ab", "c"]);
        let on = model(
            &v,
            json!(["a b"]),
            json!({"ignore_merges": true, "unk_token": "<unk>"}),
        );
        assert_eq!(strs(&on, "abc"), ["abc"]);
        assert_eq!(strs(&on, "abcabc"), ["ab", "c", "ab", "c"]);
        // Even the unk string itself.
        assert_eq!(tok(&on, "<unk>"), [("<unk>".to_string(), (0, 5))]);
        // The lookup ignores the suffix.
        let m = model(
            &["a", "b", "c</w>", "abc", "abc</w>"],
            json!([]),
            json!({"ignore_merges": true, "end_of_word_suffix": "</w>"}),
        );
        assert_eq!(strs(&m, "abc"), ["abc"]);
    }

    #[test]
    fn unk_and_fuse() {
        let v = ["<unk>", "a", "b"];
        let m = model(&v, json!([]), json!({"unk_token": "<unk>"}));
        assert_eq!(
            tok(&m, "aééb"),
            [
                ("a".into(), (0, 1)),
                ("<unk>".into(), (1, 3)),
                ("<unk>".into(), (3, 5)),
                ("b".into(), (5, 6))
            ]
        );
        let m = model(
            &v,
            json!([]),
            json!({"unk_token": "<unk>", "fuse_unk": true}),
        );
        assert_eq!(
            tok(&m, "aééb"),
            [
                ("a".into(), (0, 1)),
                ("<unk>".into(), (1, 5)),
                ("b".into(), (5, 6))
            ]
        );
        // unk_token null: dropped, later offsets shift.
        let m = model(&v, json!([]), json!({"unk_token": null}));
        assert_eq!(tok(&m, "éab"), [("a".into(), (0, 1)), ("b".into(), (1, 2))]);
        // unk not in the vocabulary: an encode-time error.
        let m = model(&["a"], json!([]), json!({"unk_token": "<unk>"}));
        let mut out = Vec::new();
        assert!(m.tokenize("é", &mut out).is_err());
        assert!(m.tokenize("a", &mut out).is_ok());
        // The unk id can merge when a merge lists it.
        let m = model(
            &["<unk>", "a", "<unk>a"],
            json!([["<unk>", "a"]]),
            json!({"unk_token": "<unk>"}),
        );
        assert_eq!(strs(&m, "éa"), ["<unk>a"]);
    }

    fn with_bytes(extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        v.extend((0..256).map(|b| format!("<0x{b:02X}>")));
        v
    }

    #[test]
    fn byte_fallback() {
        let v = with_bytes(&["<unk>", "a", "b"]);
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        let m = model(
            &refs,
            json!([]),
            json!({"unk_token": "<unk>", "byte_fallback": true}),
        );
        assert_eq!(
            tok(&m, "aéb"),
            [
                ("a".into(), (0, 1)),
                ("<0xC3>".into(), (1, 2)),
                ("<0xA9>".into(), (2, 3)),
                ("b".into(), (3, 4))
            ]
        );
        // Byte tokens merge only when a merge lists them.
        let mut v2 = v.clone();
        v2.push("<0xC3><0xA9>".into());
        let refs: Vec<&str> = v2.iter().map(String::as_str).collect();
        let m = model(
            &refs,
            json!([["<0xC3>", "<0xA9>"]]),
            json!({"byte_fallback": true}),
        );
        assert_eq!(strs(&m, "é"), ["<0xC3><0xA9>"]);
        // Lowercase spelling is not recognised.
        let m = model(
            &["<unk>", "<0xc3>", "<0xa9>"],
            json!([]),
            json!({"unk_token": "<unk>", "byte_fallback": true}),
        );
        assert_eq!(strs(&m, "é"), ["<unk>"]);
        // Decorated-string quirk: with prefix "##", "aé" gives the bytes of "##é".
        let v = with_bytes(&["a"]);
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        let m = model(
            &refs,
            json!([]),
            json!({"byte_fallback": true, "continuing_subword_prefix": "##"}),
        );
        assert_eq!(
            tok(&m, "aé"),
            [
                ("a".into(), (0, 1)),
                ("<0x23>".into(), (1, 2)),
                ("<0x23>".into(), (2, 3)),
                ("<0xC3>".into(), (3, 4)),
                ("<0xA9>".into(), (4, 5))
            ]
        );
        let m = model(
            &refs,
            json!([]),
            json!({"byte_fallback": true, "end_of_word_suffix": "</w>"}),
        );
        assert_eq!(
            strs(&m, "a"),
            ["<0x61>", "<0x3C>", "<0x2F>", "<0x77>", "<0x3E>"]
        );
    }

    #[test]
    fn pending_unk_is_not_flushed_by_byte_fallback() {
        // The reference keeps an unknown run pending while a later character falls back to
        // bytes, so the unk comes out after those bytes (offsets are running sums).
        let v = ["<unk>", "a", "<0xC3>", "<0xA9>"];
        let m = model(
            &v,
            json!([]),
            json!({"unk_token": "<unk>", "byte_fallback": true}),
        );
        // ü = C3 BC has no <0xBC>: unk; é = C3 A9 falls back.
        assert_eq!(
            tok(&m, "üéa"),
            [
                ("<0xC3>".into(), (0, 1)),
                ("<0xA9>".into(), (1, 2)),
                ("<unk>".into(), (2, 4)),
                ("a".into(), (4, 5))
            ]
        );
        let m = model(
            &v,
            json!([]),
            json!({"unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true}),
        );
        assert_eq!(
            tok(&m, "üüéü"),
            [
                ("<0xC3>".into(), (0, 1)),
                ("<0xA9>".into(), (1, 2)),
                ("<unk>".into(), (2, 8))
            ]
        );
    }

    #[test]
    fn prefix_and_suffix() {
        let m = model(
            &["a", "##b", "##c", "ab", "##bc"],
            json!(["##b ##c"]),
            json!({"continuing_subword_prefix": "##"}),
        );
        assert_eq!(strs(&m, "abc"), ["a", "##bc"]);
        let m = model(
            &["a", "b", "c</w>", "bc</w>", "a</w>", "<unk>"],
            json!(["b c</w>"]),
            json!({"end_of_word_suffix": "</w>", "unk_token": "<unk>"}),
        );
        assert_eq!(strs(&m, "abc"), ["a", "bc</w>"]);
        assert_eq!(strs(&m, "a"), ["a</w>"]);
        assert_eq!(strs(&m, "ab"), ["a", "<unk>"]);
        // Empty-string prefix and suffix act as none.
        let m = model(
            &["a", "b", "ab"],
            json!(["a b"]),
            json!({"continuing_subword_prefix": "", "end_of_word_suffix": ""}),
        );
        assert_eq!(strs(&m, "ab"), ["ab"]);
    }

    #[test]
    fn dropout() {
        let v = ["a", "b", "c", "ab", "abc"];
        let m = model(&v, json!(["a b", "ab c"]), json!({"dropout": 1.0}));
        assert_eq!(strs(&m, "abc"), ["a", "b", "c"]);
        let m = model(&v, json!(["a b", "ab c"]), json!({"dropout": 0.0}));
        assert_eq!(strs(&m, "abc"), ["abc"]);
        let m = model(&v, json!(["a b", "ab c"]), json!({"dropout": null}));
        assert_eq!(strs(&m, "abc"), ["abc"]);
        // In between: both outcomes show up over many calls.
        let m = model(&v, json!(["a b", "ab c"]), json!({"dropout": 0.5}));
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            seen.insert(strs(&m, "abc").len());
        }
        assert!(seen.contains(&1) && seen.contains(&3), "{seen:?}");
    }

    /// The backtracking encoder against the heap merge on the real byte-level (gpt2) and
    /// character-level (codellama) files: long runs, periodic and random words, random bytes.
    #[test]
    fn backtrack_matches_heap_on_real_models() {
        let mut rng = crate::test_rng(0x0DDB_1A5E_5BAD_5EEDu64);
        let mut next = move |m: u64| rng() % m;
        for name in ["gpt2", "codellama"] {
            let path = format!("{}/{name}/tokenizer.json", crate::test_data_dir());
            let Ok(text) = std::fs::read_to_string(&path) else {
                eprintln!("skipped: {path} not found");
                continue;
            };
            let v: Value = serde_json::from_str(&text).unwrap();
            let m = Bpe::from_json(&v["model"]).unwrap();
            let bt = m.backtracker().expect("the model meets the preconditions");
            let alphabets = [
                "a",
                "ab",
                "abc",
                "ba",
                "e\u{e9}",
                "xyz\u{4e00}",
                "abcdefghijklmnopqrstuvwxyz",
            ];
            for round in 0..400 {
                let n = 1 + next(if round % 10 == 0 { 5000 } else { 600 }) as usize;
                let word: Vec<u8> = if name == "gpt2" && round % 4 == 3 {
                    // Raw bytes through the byte-level alphabet.
                    (0..n).map(|_| next(256) as u8).collect()
                } else {
                    let chars: Vec<char> = alphabets[round % alphabets.len()].chars().collect();
                    let mut s = String::new();
                    let period = 1 + next(6) as usize;
                    let pat: Vec<char> = (0..period)
                        .map(|_| chars[next(chars.len() as u64) as usize])
                        .collect();
                    while s.len() < n {
                        match round % 3 {
                            0 => s.push(chars[next(chars.len() as u64) as usize]),
                            1 => s.extend(pat.iter()),
                            _ => {
                                let c = chars[next(chars.len() as u64) as usize];
                                s.extend(std::iter::repeat_n(c, 1 + next(12) as usize));
                            }
                        }
                    }
                    s.into_bytes()
                };
                let text: String = if name == "gpt2" {
                    word.iter()
                        .map(|&b| crate::byte_level::byte_to_char(b))
                        .collect()
                } else {
                    String::from_utf8(word).unwrap()
                };
                let mut heap = Word::default();
                for c in text.chars() {
                    let id = m.vocab[c.encode_utf8(&mut [0; 4]) as &str];
                    heap.push(id, c.len_utf8() as u32);
                }
                heap.merge_all(|a, b| m.lookup(a, b), None::<fn() -> bool>, |_, _, _| {});
                let want: Vec<_> = heap.iter().collect();
                let mut got = Word::default();
                let mut st = super::backtrack::State::default();
                assert!(bt.encode(text.as_bytes(), &mut st, |id, len| got.push(id, len)));
                assert_eq!(got.iter().collect::<Vec<_>>(), want, "{name} {text:?}");
                // And through the model's own entry points.
                let mut out = Vec::new();
                m.tokenize(&text, &mut out).unwrap();
                let ids: Vec<u32> = out.iter().map(|t| t.id).collect();
                assert_eq!(ids, want.iter().map(|w| w.0).collect::<Vec<_>>());
            }
        }
    }

    /// The ids of `word` (symbol `sym(b)` per byte) by the heap merge over `bpe`'s merge map.
    fn heap_merge_ids(bpe: &Bpe, word: &[u8], sym: impl Fn(u8) -> u32) -> Vec<u32> {
        let mut heap = Word::default();
        for &b in word {
            heap.push(sym(b), 1);
        }
        let map = |a, b| bpe.merges.get(&pair_key(a, b)).copied();
        heap.merge_all(map, None::<fn() -> bool>, |_, _, _| {});
        heap.iter().map(|(id, _, _)| id).collect()
    }

    /// The stack-array merge gives the heap merge's result on random string-built tables
    /// (shared ranks included, tiktoken order) for words up to `ARRAY_WORD` symbols, and the
    /// pair table answers as the map.
    #[test]
    fn array_merge_matches_heap_merge_on_string_tables() {
        let mut next = crate::test_rng(0x5EED_0F5C_A7E5_0002);
        for round in 0..60 {
            let (tokens, vocab, merges) = random_merges(&mut next, &["a", "b", "c"], 40, 8);
            let mut bpe = Bpe::build(vocab, merges, None, None).unwrap();
            if round % 2 == 1 {
                bpe.rank_merges_by_result();
            }
            assert!(bpe.unique_ids && bpe.pairs().is_built());
            for a in 0..tokens.len() as u32 + 2 {
                for b in 0..tokens.len() as u32 + 2 {
                    let want = bpe.merges.get(&pair_key(a, b)).copied();
                    assert_eq!(bpe.lookup_table(bpe.pairs(), a, b), want);
                }
            }
            let sym = |b: u8| u32::from(b - b'a');
            for _ in 0..300 {
                let n = 1 + (next() % ARRAY_WORD as u64) as usize;
                let word: Vec<u8> = (0..n).map(|_| b"abc"[(next() % 3) as usize]).collect();
                let want = heap_merge_ids(&bpe, &word, sym);
                let mut got = Vec::new();
                bpe.merge_array(&word, sym, false, &mut got);
                assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&word));
            }
        }
    }

    /// `Pairs::bytes` holds `get_packed_bits` of every byte pair's symbols: random merge
    /// tables over symbols that several bytes share, one byte's symbol out of the 16-bit
    /// range (no merge has it: the table stays in the 16-bit form).
    #[test]
    fn byte_pairs_equal_packed_lookups() {
        let mut next = crate::test_rng(0x000B_17E5_9A1E_0001);
        for round in 0..20 {
            let mut syms = [0u32; 256];
            for (b, s) in syms.iter_mut().enumerate() {
                *s = (b as u32 * 7 + round) % 61;
            }
            syms[200] = 0x1_0000 + round;
            let mut merges: AHashMap<u64, (u32, u32)> = AHashMap::new();
            for rank in 0..400u32 {
                let (l, r) = ((next() % 90) as u32, (next() % 90) as u32);
                merges.entry(pair_key(l, r)).or_insert((rank, 1000 + rank));
            }
            let pairs = Pairs::new(&merges, Some(&syms));
            assert!(pairs.is_packed());
            let bytes = pairs.bytes.as_deref().unwrap();
            let mut hits = 0;
            for (i, &got) in bytes.iter().enumerate() {
                let (l, r) = (syms[i >> 8], syms[i & 0xff]);
                let want = if l < 0xffff && r < 0xffff {
                    pairs.get_packed_bits(l, r)
                } else {
                    NO_PACKED
                };
                assert_eq!(got, want, "round {round} bytes {:#06x}", i);
                hits += usize::from(got != NO_PACKED);
            }
            assert!(hits > 1000, "{hits}");
        }
    }

    /// `Pairs::wide_bytes` holds `get_slots` of every byte pair's symbols in the general form
    /// (ids past the 16-bit range): random merge tables over symbols that several bytes share.
    #[test]
    fn byte_pairs_equal_general_lookups() {
        let mut next = crate::test_rng(0x000B_17E5_9A1E_0002);
        for round in 0..20 {
            let mut syms = [0u32; 256];
            for (b, s) in syms.iter_mut().enumerate() {
                *s = 0x1_0000 + (b as u32 * 7 + round) % 61;
            }
            let mut merges: AHashMap<u64, (u32, u32)> = AHashMap::new();
            for rank in 0..400u32 {
                let (l, r) = (
                    0x1_0000 + (next() % 90) as u32,
                    0x1_0000 + (next() % 90) as u32,
                );
                merges
                    .entry(pair_key(l, r))
                    .or_insert((rank, 0x2_0000 + rank));
            }
            let pairs = Pairs::new(&merges, Some(&syms));
            assert!(!pairs.is_packed() && pairs.is_built());
            assert!(pairs.wide_bytes(1).is_none());
            let wide = pairs.wide_bytes(WIDE_AFTER).unwrap();
            let mut hits = 0;
            for (i, &got) in wide.iter().enumerate() {
                let want = pairs
                    .get_slots(pair_key(syms[i >> 8], syms[i & 0xff]))
                    .map_or(u64::MAX, |(rank, id)| u64::from(rank) << 32 | u64::from(id));
                assert_eq!(got, want, "round {round} bytes {:#06x}", i);
                hits += usize::from(got != u64::MAX);
            }
            assert!(hits > 1000, "{hits}");
        }
    }

    /// The tournament-tree merge gives the heap merge's result on random string-built tables
    /// (shared ranks included, tiktoken order) for words of every length it takes, each tree
    /// size included.
    #[test]
    fn tree_merge_matches_heap_merge_on_string_tables() {
        let mut next = crate::test_rng(0x5EED_0F5C_A7E5_0003);
        for round in 0..40 {
            let (_, vocab, merges) = random_merges(&mut next, &["a", "b", "c"], 60, 10);
            let mut bpe = Bpe::build(vocab, merges, None, None).unwrap();
            if round % 2 == 1 {
                bpe.rank_merges_by_result();
            }
            assert!(bpe.unique_ids && bpe.pairs().is_built());
            let sym = |b: u8| u32::from(b - b'a');
            for k in 0..120 {
                // Every length once in a while, the bounds of each tree size often.
                let n = match k % 4 {
                    0 => [1, 2, 32, 33, 128, 129, 255, 256, 1025, TREE_WORD][(k / 4) % 10],
                    _ => 1 + (next() % TREE_WORD as u64) as usize,
                };
                // Few letters make long runs of one pair (ties by rank, leftmost first).
                let letters = 1 + (next() % 3) as usize;
                let word: Vec<u8> = (0..n)
                    .map(|_| b"abc"[(next() % letters as u64) as usize])
                    .collect();
                let want = heap_merge_ids(&bpe, &word, sym);
                let mut got = Vec::new();
                bpe.merge_tree(&word, sym, false, &mut got);
                assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&word));
            }
        }
    }

    /// The run-copying byte-level conversion gives the character-by-character string, on
    /// random bytes with ASCII runs of every length, and appends to what `buf` holds.
    #[test]
    fn push_byte_level_matches_the_table() {
        let mut next = crate::test_rng(0x5EED_B17E_1E7E_0001);
        for round in 0..2000 {
            let len = (next() % 300) as usize;
            let raw: Vec<u8> = (0..len)
                .map(|_| match (next() % 4, round % 3) {
                    (0, _) | (_, 0) => next() as u8,
                    _ => b'!' + (next() % 94) as u8,
                })
                .collect();
            let mut buf = String::from("x");
            push_byte_level(&raw, &mut buf);
            let want: String = std::iter::once('x')
                .chain(raw.iter().map(|&b| crate::byte_level::byte_to_char(b)))
                .collect();
            assert_eq!(buf, want);
        }
    }

    /// Both forms of the pair table answer every lookup as the map: present pairs, absent
    /// pairs, ids at and past the 16-bit form's limit.
    #[test]
    fn pair_table_answers_as_the_map() {
        let mut next = crate::test_rng(0x9A1B_7AB1_E000_0001);
        for (round, top) in [(0, 300u64), (1, 0xffff), (2, 0x2_0000), (3, 1 << 31)] {
            let mut merges: AHashMap<u64, (u32, u32)> = AHashMap::new();
            for _ in 0..3000 {
                let (l, r) = ((next() % top) as u32, (next() % top) as u32);
                let v = ((next() % top) as u32, (next() % top) as u32);
                merges.insert(pair_key(l, r), v);
            }
            let pairs = Pairs::new(&merges, None);
            assert!(pairs.is_built());
            assert_eq!(!pairs.packed.is_empty(), round < 2, "round {round}");
            for (&k, &v) in &merges {
                assert_eq!(pairs.get(k), Some(v));
                for probe in [k ^ 1, k ^ (1 << 32), k.wrapping_add(0xffff)] {
                    assert_eq!(pairs.get(probe), merges.get(&probe).copied());
                }
            }
            for _ in 0..3000 {
                let k = pair_key((next() % (top + 2)) as u32, (next() % (top + 2)) as u32);
                assert_eq!(pairs.get(k), merges.get(&k).copied());
            }
        }
    }

    /// Random short words for the byte-level tests: tokens, joined tokens, prose-like words
    /// with a leading space, and random bytes.
    fn byte_level_words(m: &Bpe, seed: u64, count: usize) -> Vec<Vec<u8>> {
        let mut next = crate::test_rng(seed);
        let tokens: Vec<Vec<u8>> = m
            .vocab
            .keys()
            .filter_map(|s| s.chars().map(crate::byte_level::char_to_byte).collect())
            .collect();
        let mut tokens = tokens;
        tokens.sort();
        let pick = |r: u64| tokens[(r % tokens.len() as u64) as usize].clone();
        (0..count)
            .map(|i| match i % 5 {
                0 => pick(next()),
                1 => [pick(next()), pick(next())].concat(),
                2 => [pick(next()), pick(next()), pick(next())].concat(),
                3 => {
                    let n = 1 + (next() % 14) as usize;
                    let mut w = vec![b' '];
                    w.extend((0..n).map(|_| b"etaoinshrdlucmfw"[(next() % 16) as usize]));
                    w
                }
                _ => (0..1 + next() % 30).map(|_| next() as u8).collect(),
            })
            .collect()
    }

    /// The byte-level ids path (one-token table, id cache, stack-array merge) against the
    /// plain merge on the real gpt2 file, and against the plain path with ignore_merges on
    /// the tiktoken-built cl100k model: each word twice (cold, then from the caches).
    #[test]
    fn byte_level_ids_match_plain_merge_on_real_models() {
        let dir = crate::test_data_dir();
        let mut models = Vec::new();
        match std::fs::read_to_string(format!("{dir}/gpt2/tokenizer.json")) {
            Ok(text) => {
                let v: Value = serde_json::from_str(&text).unwrap();
                models.push(("gpt2", Bpe::from_json(&v["model"]).unwrap()));
            }
            Err(_) => eprintln!("skipped: gpt2 not found"),
        }
        match std::fs::read(format!("{dir}/cl100k-tiktoken/cl100k_base.tiktoken")) {
            Ok(bytes) => {
                let (_, m) = crate::formats::tiktoken::pipeline(&bytes, "x", &[]).unwrap();
                models.push(("cl100k", m));
            }
            Err(_) => eprintln!("skipped: cl100k not found"),
        }
        for (name, m) in &models {
            assert!(m.has_byte_level_ids());
            let syms = m.byte_level_syms.as_deref().unwrap();
            let singles = m.single_words();
            assert_eq!(singles.is_some(), m.ignore_merges);
            let mut singles_hit = 0;
            for (i, raw) in byte_level_words(m, 0xB17E_1E5E_1D5C_0001, 6000)
                .iter()
                .enumerate()
            {
                // Plain: the vocabulary first under ignore_merges, else the heap merge over
                // the map.
                let s: String = raw
                    .iter()
                    .map(|&b| crate::byte_level::byte_to_char(b))
                    .collect();
                let want: Vec<u32> = match m.vocab.get(&s) {
                    Some(&id) if m.ignore_merges => vec![id],
                    _ => {
                        let mut heap = Word::default();
                        for &b in raw {
                            heap.push(syms[b as usize], 1);
                        }
                        let map = |a, b| m.merges.get(&pair_key(a, b)).copied();
                        heap.merge_all(map, None::<fn() -> bool>, |_, _, _| {});
                        heap.iter().map(|(id, _, _)| id).collect()
                    }
                };
                singles_hit += usize::from(singles.is_some_and(|t| t.get(raw).is_some()));
                for _ in 0..2 {
                    let mut got = Vec::new();
                    m.byte_level_ids(raw, &mut got).unwrap();
                    assert_eq!(got, want, "{name} word {i} {s:?}");
                }
            }
            assert!(
                singles.is_none() || singles_hit > 1000,
                "{name}: {singles_hit}"
            );
        }
    }

    /// Long words (past `BACKTRACK_MIN`: ASCII runs copied whole, the backtracker's ids
    /// straight to the output) through the byte-level ids path against the plain heap merge,
    /// on the real gpt2 and cl100k models: random letters, digits, mixed case, ASCII with
    /// high bytes and spaces mixed in, and one repeated byte; appended to ids already there.
    #[test]
    fn byte_level_long_words_match_plain_merge_on_real_models() {
        let dir = crate::test_data_dir();
        let mut models = Vec::new();
        if let Ok(text) = std::fs::read_to_string(format!("{dir}/gpt2/tokenizer.json")) {
            let v: Value = serde_json::from_str(&text).unwrap();
            models.push(("gpt2", Bpe::from_json(&v["model"]).unwrap()));
        }
        if let Ok(bytes) = std::fs::read(format!("{dir}/cl100k-tiktoken/cl100k_base.tiktoken")) {
            models.push((
                "cl100k",
                crate::formats::tiktoken::pipeline(&bytes, "x", &[])
                    .unwrap()
                    .1,
            ));
        }
        if models.is_empty() {
            eprintln!("skipped: gpt2 and cl100k not found");
        }
        let mut next = crate::test_rng(0x10E6_B17E_1E7E_0003);
        for (name, m) in &models {
            let syms = m.byte_level_syms.as_deref().unwrap();
            for i in 0..60 {
                let n = BACKTRACK_MIN + (next() % 3000) as usize;
                let alphabet: &[u8] = match i % 5 {
                    0 => b"abcdefghijklmnopqrstuvwxyz",
                    1 => b"0123456789",
                    2 => b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                    3 => b"abc xyz!~\n\x00\x7f\x80\xc3\xa9\xe4\xb8\xad\xff",
                    _ => b"a",
                };
                let raw: Vec<u8> = (0..n)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                let mut heap = Word::default();
                for &b in &raw {
                    heap.push(syms[b as usize], 1);
                }
                let map = |a, b| m.merges.get(&pair_key(a, b)).copied();
                heap.merge_all(map, None::<fn() -> bool>, |_, _, _| {});
                let want: Vec<u32> = [7]
                    .into_iter()
                    .chain(heap.iter().map(|(id, _, _)| id))
                    .collect();
                let mut got = vec![7];
                m.byte_level_ids(&raw, &mut got).unwrap();
                assert_eq!(got, want, "{name} word {i}");
            }
            // Tree-sized words (`ARRAY_WORD` to `TREE_WORD` bytes, the tree's byte-pair
            // tables) made of vocabulary tokens, as text without spaces is.
            let tokens: Vec<Vec<u8>> = byte_level_words(m, 0x10E6_B17E_1E7E_0004, 3000)
                .into_iter()
                .step_by(5)
                .collect();
            for i in 0..300 {
                let n = ARRAY_WORD + 1 + (next() % [40, 200, 2100][i % 3]) as usize;
                let mut raw = Vec::new();
                while raw.len() < n {
                    raw.extend_from_slice(&tokens[(next() % tokens.len() as u64) as usize]);
                }
                raw.truncate(n.min(TREE_WORD));
                let mut heap = Word::default();
                for &b in &raw {
                    heap.push(syms[b as usize], 1);
                }
                let map = |a, b| m.merges.get(&pair_key(a, b)).copied();
                heap.merge_all(map, None::<fn() -> bool>, |_, _, _| {});
                let want: Vec<u32> = heap.iter().map(|(id, _, _)| id).collect();
                let mut got = Vec::new();
                m.merge_tree(&raw, |b| syms[usize::from(b)], true, &mut got);
                assert_eq!(got, want, "{name} tree word {i}");
            }
        }
    }

    #[test]
    fn cache_gives_same_result() {
        let m = model(&["a", "aa"], json!(["a a"]), json!({}));
        for _ in 0..3 {
            assert_eq!(
                tok(&m, "aaa"),
                [("aa".into(), (0, 2)), ("a".into(), (2, 3))]
            );
        }
    }

    /// The undecorated ids path (character table, stack-array or pair-table heap merge)
    /// against `merge_word` on random string-built models: with and without byte fallback
    /// (`é` has its byte tokens, `火` not), unk fused or not, no unk (dropped characters), two
    /// tokens sharing an id (the heap path), and words of up to 80 symbols (past the arrays).
    #[test]
    fn undecorated_word_ids_match_merge_word() {
        let mut next = crate::test_rng(0x5EED_0F5C_A7E5_0002);
        let alphabet = ['a', 'b', '▁', 'c', 'é', '火', 'z'];
        let (mut arrays, mut heaps) = (0, 0);
        for round in 0..48 {
            let seeds = ["a", "b", "▁", "c", "<unk>", "<0xC3>", "<0xA9>"];
            let (_, mut vocab, merges) = random_merges(&mut next, &seeds, 60, 12);
            if round % 4 == 3 {
                // A second string for an existing id: no array merge.
                vocab.insert("shared".into(), 3);
            }
            let mut bpe = Bpe::build(vocab, merges, None, None).unwrap();
            bpe.byte_fallback = round % 2 == 0;
            bpe.fuse_unk = round % 3 == 0;
            bpe.unk_token = (round % 5 != 4).then(|| "<unk>".to_string());
            let chars = bpe.char_ids().unwrap();
            for _ in 0..150 {
                let n = 1 + (next() % 80) as usize;
                let w: String = (0..n)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                let (mut word, mut buf) = (Word::default(), String::new());
                bpe.merge_word(&w, &mut word, &mut buf, false).unwrap();
                let want: Vec<u32> = word.iter().map(|(id, _, _)| id).collect();
                let mut got = Vec::new();
                bpe.undecorated_word_ids(chars, &w, &mut word, &mut got)
                    .unwrap();
                assert_eq!(got, want, "{w}");
                if bpe.unique_ids && word.symbols.len() <= META_ARRAY {
                    arrays += 1;
                } else {
                    heaps += 1;
                }
            }
        }
        assert!(arrays > 1000 && heaps > 1000, "{arrays} {heaps}");
    }

    /// The cached meta-word path (short and long ids caches) gives `tokenize`'s ids, twice
    /// over the same texts (the second time from the caches).
    #[test]
    fn meta_text_ids_match_tokenize_with_caches() {
        let mut next = crate::test_rng(0x5EED_0F5C_A7E5_0003);
        let tokens = [
            "a",
            "b",
            "▁",
            "<unk>",
            "ab",
            "▁a",
            "▁▁",
            "ba",
            "▁ab",
            "▁▁▁▁",
        ];
        let m = model(
            &tokens,
            json!(["a b", "▁ a", "▁ ▁", "b a", "▁ ab", "▁▁ ▁▁"]),
            json!({"unk_token": "<unk>", "fuse_unk": true}),
        );
        assert!(m.has_meta_words());
        let texts: Vec<String> = (0..300)
            .map(|_| {
                let n = 1 + (next() % 150) as usize;
                (0..n)
                    .map(|_| ['a', 'b', '▁', '▁', 'x'][(next() % 5) as usize])
                    .collect()
            })
            .collect();
        for _ in 0..2 {
            for t in &texts {
                let mut toks = Vec::new();
                m.tokenize(t, &mut toks).unwrap();
                let want: Vec<u32> = toks.iter().map(|t| t.id).collect();
                let mut got = Vec::new();
                m.meta_text_ids(t, &mut got).unwrap();
                assert_eq!(got, want, "{t}");
            }
        }
    }

    /// The byte scans of the Meta path against character-by-character definitions, on random
    /// texts with `▁`, spaces and characters that share `▁`'s lead byte (`ⅰ`, `▂`).
    #[test]
    fn meta_scans_match_char_definitions() {
        let mut next = crate::test_rng(0x5EED_0F5C_A7E5_0005);
        let alphabet = ['a', ' ', '▁', 'ⅰ', '▂', 'é', '火', '😀'];
        for _ in 0..3000 {
            let n = (next() % 40) as usize;
            let t: String = (0..n)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let mut want = Vec::new();
            let (mut start, mut prev_meta) = (0, true);
            for (i, c) in t.char_indices() {
                if c == META && !prev_meta {
                    want.push((start, i));
                    start = i;
                }
                prev_meta = c == META;
            }
            want.push((start, t.len()));
            let mut got = Vec::new();
            for_each_meta_word(&t, |s, e| {
                got.push((s, e));
                Ok(())
            })
            .unwrap();
            assert_eq!(got, want, "{t:?}");
            for prepend in [false, true] {
                let mut buf = String::from("left over");
                crate::fast::meta_escape(&t, prepend, &mut buf);
                let want = format!("{}{}", if prepend { "▁" } else { "" }, t.replace(' ', "▁"));
                assert_eq!(buf, want);
            }
        }
    }
}
