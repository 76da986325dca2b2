//! Lookup tables of the sentencepiece BPE segmenter (`bpe.rs`) built for speed: character →
//! symbol key without hashing, a packed open-addressing pair table (one 8-byte word per
//! entry, so the table is half the size of a general hash map and a probe is one load), a
//! small-span merger over stack arrays, and the per-thread cache of merged spans.

use ahash::AHashMap;
use std::cell::RefCell;

/// Lookup key of a symbol that can never merge (a frozen user-defined match, or a character
/// that no piece starts or ends with).
pub(super) const DEAD: u32 = u32::MAX - 1;

// ---- characters → symbol keys ----

/// Characters per page of the two-level table.
const PAGE: usize = 128;

/// The symbol key of every character: ASCII directly, the others through a page table
/// (code point / 128 → a block of 128 keys; block 0 is all `DEAD`).
pub(super) struct CharKeys {
    ascii: [u32; 128],
    pages: Box<[u16]>,
    blocks: Vec<u32>,
}

impl CharKeys {
    pub(super) fn new(keys: &AHashMap<char, u32>) -> CharKeys {
        let mut ascii = [DEAD; 128];
        let mut pages = vec![0u16; (char::MAX as usize >> 7) + 1].into_boxed_slice();
        let mut blocks = vec![DEAD; PAGE];
        let mut sorted: Vec<(char, u32)> = keys.iter().map(|(&c, &k)| (c, k)).collect();
        sorted.sort_unstable();
        for (c, k) in sorted {
            let cp = c as usize;
            if cp < 128 {
                ascii[cp] = k;
                continue;
            }
            let Some(page) = pages.get_mut(cp >> 7) else {
                continue;
            };
            if *page == 0 {
                // At most 0x110000 / 128 pages: the index fits in u16.
                *page = (blocks.len() / PAGE) as u16;
                blocks.extend(std::iter::repeat_n(DEAD, PAGE));
            }
            if let Some(slot) = blocks.get_mut(usize::from(*page) * PAGE + (cp & (PAGE - 1))) {
                *slot = k;
            }
        }
        CharKeys {
            ascii,
            pages,
            blocks,
        }
    }

    /// The key and byte length of the character starting at `i` (a char boundary of a
    /// `str`); `(DEAD, 1)` past the end, which callers never ask for.
    #[inline(always)]
    pub(super) fn at(&self, bytes: &[u8], i: usize) -> (u32, usize) {
        let Some(&b0) = bytes.get(i) else {
            return (DEAD, 1);
        };
        if b0 < 0x80 {
            return (self.ascii[usize::from(b0)], 1);
        }
        let cont = |k: usize| u32::from(bytes.get(i + k).copied().unwrap_or(0x80) & 0x3f);
        let (cp, len) = if b0 < 0xE0 {
            ((u32::from(b0 & 0x1f) << 6) | cont(1), 2)
        } else if b0 < 0xF0 {
            ((u32::from(b0 & 0x0f) << 12) | (cont(1) << 6) | cont(2), 3)
        } else {
            (
                (u32::from(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
                4,
            )
        };
        let cp = cp as usize;
        let key = self
            .pages
            .get(cp >> 7)
            .and_then(|&p| self.blocks.get(usize::from(p) * PAGE + (cp & (PAGE - 1))))
            .copied()
            .unwrap_or(DEAD);
        (key, len)
    }
}

// ---- (left, right) → merged piece ----

/// Pair table: (left key, right key) → merged piece id, and that piece's score rank. Packed:
/// each slot is one `u64` `left << (2b + q) | right << (b + q) | rank << b | merged` when
/// every key fits in `b <= 21` bits and every rank in `q` bits with `3b + q <= 64` (else
/// `q = 0`: no rank in the slot, and the top bit is always clear); `u64::MAX` marks an empty
/// slot (no entry packs to it: checked when building). The rank in the slot spares the
/// merge loops a dependent load per candidate. Larger vocabularies use a hash map.
pub(super) enum PairTable {
    Packed {
        slots: Box<[u64]>,
        bits: u32,
        /// `q` above: bits of the rank field, 0 when ranks are not stored.
        rbits: u32,
        shift: u32,
        /// Bits `2k` and `2k + 1`: whether key `k` is the left / right part of any entry.
        /// Small enough to stay cached, they turn lookups that must fail (a character no
        /// piece continues) into no table access.
        sides: Box<[u64]>,
    },
    Wide(AHashMap<u64, u32>),
}

const EMPTY: u64 = u64::MAX;
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl PairTable {
    /// `max_key`: an upper bound (exclusive) of every key and merged id; `ranks`: the rank
    /// of each merged id (ids it does not cover get no rank in the slots).
    pub(super) fn new(entries: &[(u32, u32, u32)], max_key: u32, ranks: &[u32]) -> PairTable {
        let bits = 32 - max_key.leading_zeros();
        if bits == 0 || bits > 21 {
            return PairTable::Wide(
                entries
                    .iter()
                    .map(|&(l, r, id)| ((u64::from(l) << 32) | u64::from(r), id))
                    .collect(),
            );
        }
        let entry_ranks: Option<Vec<u32>> = entries
            .iter()
            .map(|&(_, _, id)| ranks.get(id as usize).copied())
            .collect();
        let rbits = match &entry_ranks {
            Some(rs) => {
                let q = 32 - rs.iter().copied().max().unwrap_or(0).leading_zeros();
                // At least one bit, so that `rbits > 0` means "ranks stored".
                let q = q.max(1);
                let fits = 3 * bits + q <= 64
                    && entries
                        .iter()
                        .zip(rs)
                        .all(|(&(l, r, id), &rank)| pack(l, r, rank, id, bits, q) != EMPTY);
                if fits {
                    q
                } else {
                    0
                }
            }
            None => 0,
        };
        // Load factor at most 3/4 (linear probing, 8 slots per cache line).
        let mut cap = 16usize;
        while cap * 3 < entries.len() * 4 {
            cap *= 2;
        }
        let mut slots = vec![EMPTY; cap].into_boxed_slice();
        let shift = 64 - cap.trailing_zeros();
        let mask = cap - 1;
        let mut sides = vec![0u64; (max_key as usize * 2).div_ceil(64)].into_boxed_slice();
        let mut mark = |k: u32, side: u32| {
            let bit = k as usize * 2 + side as usize;
            if let Some(w) = sides.get_mut(bit / 64) {
                *w |= 1 << (bit % 64);
            }
        };
        for &(l, r, _) in entries {
            mark(l, 0);
            mark(r, 1);
        }
        for (k, &(l, r, id)) in entries.iter().enumerate() {
            let rank = match (&entry_ranks, rbits) {
                (Some(rs), 1..) => rs.get(k).copied().unwrap_or(0),
                _ => 0,
            };
            let key = (u64::from(l) << bits) | u64::from(r);
            let mut i = (key.wrapping_mul(MIX) >> shift) as usize;
            // The last entry for a pair wins, as a map insert would.
            while let Some(s) = slots.get_mut(i) {
                if *s == EMPTY || *s >> (bits + rbits) == key {
                    *s = pack(l, r, rank, id, bits, rbits);
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        PairTable::Packed {
            slots,
            bits,
            rbits,
            shift,
            sides,
        }
    }

    /// Every entry as (left key, right key, merged id), in no particular order.
    pub(super) fn entries(&self) -> Vec<(u32, u32, u32)> {
        match self {
            PairTable::Packed {
                slots, bits, rbits, ..
            } => {
                let mask = (1u64 << bits) - 1;
                slots
                    .iter()
                    .filter(|&&s| s != EMPTY)
                    .map(|&s| {
                        let id = (s & mask) as u32;
                        let key = s >> (bits + rbits);
                        let r = (key & mask) as u32;
                        let l = (key >> bits) as u32;
                        (l, r, id)
                    })
                    .collect()
            }
            PairTable::Wide(m) => m
                .iter()
                .map(|(&k, &id)| ((k >> 32) as u32, k as u32, id))
                .collect(),
        }
    }

    /// The merged piece of `(l, r)`, if the pair is a merge candidate (the tests' view:
    /// the segmenter asks `get_ranked`).
    #[cfg(test)]
    pub(super) fn get(&self, l: u32, r: u32) -> Option<u32> {
        match self {
            PairTable::Packed { bits, .. } => {
                let s = self.slot(l, r)?;
                Some((s & ((1u64 << *bits) - 1)) as u32)
            }
            PairTable::Wide(m) => m.get(&((u64::from(l) << 32) | u64::from(r))).copied(),
        }
    }

    /// The (rank, merged piece) of `(l, r)`, if the pair is a merge candidate: the rank from
    /// the slot when the table stores ranks, else `ranks[merged]` (which must then exist).
    #[inline(always)]
    pub(super) fn get_ranked(&self, l: u32, r: u32, ranks: &[u32]) -> Option<(u32, u32)> {
        match self {
            PairTable::Packed { bits, rbits, .. } => {
                let s = self.slot(l, r)?;
                let id = (s & ((1u64 << *bits) - 1)) as u32;
                if *rbits > 0 {
                    let rank = ((s >> *bits) & ((1u64 << *rbits) - 1)) as u32;
                    Some((rank, id))
                } else {
                    Some((*ranks.get(id as usize)?, id))
                }
            }
            PairTable::Wide(m) => {
                let id = *m.get(&((u64::from(l) << 32) | u64::from(r)))?;
                Some((*ranks.get(id as usize)?, id))
            }
        }
    }

    /// The packed slot of `(l, r)` (a `Packed` table's only).
    #[inline(always)]
    fn slot(&self, l: u32, r: u32) -> Option<u64> {
        let PairTable::Packed {
            slots,
            bits,
            rbits,
            shift,
            sides,
        } = self
        else {
            return None;
        };
        let bits = *bits;
        // Keys are below 2^bits; anything else (DEAD) is in no entry.
        if (l | r) >> bits != 0 {
            return None;
        }
        let side = |k: u32, s: usize| {
            let bit = k as usize * 2 + s;
            sides
                .get(bit / 64)
                .is_some_and(|w| (w >> (bit % 64)) & 1 == 1)
        };
        if !side(l, 0) || !side(r, 1) {
            return None;
        }
        let key = (u64::from(l) << bits) | u64::from(r);
        let kshift = bits + *rbits;
        let mask = slots.len() - 1;
        let mut i = (key.wrapping_mul(MIX) >> shift) as usize;
        loop {
            let s = *slots.get(i)?;
            if s == EMPTY {
                return None;
            }
            // kshift < 64: bits >= 1 and 3 * bits + rbits <= 64.
            if s >> kshift == key {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }
}

/// One packed slot (see `PairTable`); `rank` must fit in `rbits` bits (0: not stored).
#[inline]
fn pack(l: u32, r: u32, rank: u32, id: u32, bits: u32, rbits: u32) -> u64 {
    let key = (u64::from(l) << bits) | u64::from(r);
    let rank = if rbits == 0 { 0 } else { u64::from(rank) };
    (key << (bits + rbits)) | (rank << bits) | u64::from(id)
}

// ---- merging a short span ----

/// Spans of at most this many symbols are merged by `merge_short`.
pub(super) const SHORT: usize = 32;
const NO_RANK: u32 = u32::MAX;

/// Merge the symbols `keys` / `lens` (at most `SHORT`, lengths in bytes) in place and return
/// how many are left: repeatedly the pair of lowest `rank` merges, the leftmost among equals
/// (sentencepiece's heap order: score, then position), and the merged symbol's candidates
/// with its two neighbours are looked up again. That is the rule `Word::merge_all` applies
/// with a heap; here candidates sit in an array that is scanned, and merged symbols are
/// removed by shifting, which is cheaper for a few dozen symbols. The order in which
/// candidates are looked up is not sentencepiece's, so callers use it only for vocabularies
/// without UNUSED pieces (whose resegmentation depends on that order).
#[inline]
pub(super) fn merge_short(
    keys: &mut [u32; SHORT],
    lens: &mut [u32; SHORT],
    n: usize,
    pairs: &PairTable,
    ranks: &[u32],
) -> usize {
    let mut n = n.min(SHORT);
    // cand[i]: (rank, merged id) of symbols i and i + 1.
    let mut rank = [NO_RANK; SHORT];
    let mut merged = [0u32; SHORT];
    let lookup =
        |l: u32, r: u32| -> (u32, u32) { pairs.get_ranked(l, r, ranks).unwrap_or((NO_RANK, 0)) };
    for i in 0..n.saturating_sub(1) {
        (rank[i], merged[i]) = lookup(keys[i], keys[i + 1]);
    }
    loop {
        let (mut best, mut best_rank) = (0usize, NO_RANK);
        for (i, &r) in rank.iter().enumerate().take(n.saturating_sub(1)) {
            if r < best_rank {
                best_rank = r;
                best = i;
            }
        }
        if best_rank == NO_RANK {
            return n;
        }
        // Symbol `best + 1` joins symbol `best`.
        keys[best] = merged[best];
        lens[best] += lens[best + 1];
        // Element by element: `copy_within` would call memmove for a few words.
        for j in best + 1..n - 1 {
            keys[j] = keys[j + 1];
            lens[j] = lens[j + 1];
            rank[j] = rank[j + 1];
            merged[j] = merged[j + 1];
        }
        n -= 1;
        if best > 0 {
            (rank[best - 1], merged[best - 1]) = lookup(keys[best - 1], keys[best]);
        }
        if best + 1 < n {
            (rank[best], merged[best]) = lookup(keys[best], keys[best + 1]);
        } else {
            rank[best] = NO_RANK;
        }
    }
}

// ---- per-thread cache of merged spans ----

/// Spans longer than this (in bytes) are not cached.
pub(super) const CACHE_MAX_SPAN: usize = 24;
/// Spans with more runs than this keep them in the long-span table (a short slot with `n ==
/// MANY` says so): numbers, whose digits are one piece each, and the like.
pub(super) const CACHE_MAX_RUNS: usize = 6;
const MANY: u8 = u8::MAX;
/// Slots per table (a power of two): 2^16 × 64 bytes = 4 MiB per thread and model.
const CACHE_SLOTS: usize = 1 << 16;
/// Models whose span cache a thread keeps at once.
const CACHE_MODELS: usize = 4;

/// One cached span on one cache line: its text (as `span_key` packs it) and its
/// (output id, byte length) runs. `key_len == 0` marks an empty slot (spans are never empty).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Slot {
    key: [u64; 3],
    ids: [u32; CACHE_MAX_RUNS],
    lens: [u8; CACHE_MAX_RUNS],
    key_len: u8,
    n: u8,
}

const EMPTY_SLOT: Slot = Slot {
    key: [0; 3],
    ids: [0; CACHE_MAX_RUNS],
    lens: [0; CACHE_MAX_RUNS],
    key_len: 0,
    n: 0,
};

/// A span of 1..=24 bytes as three integers (`text::overlap_key`).
#[inline]
fn span_key(s: &[u8]) -> Option<[u64; 3]> {
    crate::text::overlap_key::<3>(s)
}

/// The first slot of the two-slot set of a span (its slots are `set` and `set + 1`).
#[inline]
fn set_of(k: &[u64; 3], len: usize) -> usize {
    let h = (k[0] ^ k[1].rotate_left(21) ^ k[2].rotate_left(42) ^ len as u64).wrapping_mul(MIX);
    let h = h ^ (h >> 31);
    (h.wrapping_mul(MIX) >> (64 - CACHE_SLOTS.trailing_zeros())) as usize & (CACHE_SLOTS - 2)
}

/// Longest span (in bytes) the cache keeps: longer than `CACHE_MAX_SPAN` goes to the
/// long-span table (CJK text without spaces, code indentation runs with their word).
pub(super) const LONG_MAX_SPAN: usize = 255;
const LONG_MAX_RUNS: usize = 96;
const LONG_SLOTS: usize = 1 << 14;
const LONG_MAX_ENTRIES: usize = LONG_SLOTS / 2;
const LONG_MAX_BYTES: usize = 1 << 20;

/// An entry of the long-span table: the span's bytes at `keys[key_off..]`, its runs at
/// `ids[run_off..]` / `lens[run_off..]`. `key_len == 0` marks an empty slot.
#[derive(Clone, Copy, Default)]
struct LongEntry {
    hash: u32,
    key_off: u32,
    run_off: u32,
    key_len: u8,
    n: u8,
}

/// Spans of `CACHE_MAX_SPAN + 1 ..= LONG_MAX_SPAN` bytes: open addressing over entries whose
/// keys and runs live in arenas; everything starts over when the table is half full or the
/// arena holds `LONG_MAX_BYTES`, which bounds memory. A hit compares the whole span.
struct LongSpans {
    slots: Box<[LongEntry]>,
    keys: Vec<u8>,
    ids: Vec<u32>,
    lens: Vec<u8>,
    entries: usize,
}

#[inline]
fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = (b.len() as u64).wrapping_mul(MIX);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let w = c.try_into().map_or(0, u64::from_le_bytes);
        h = (h.rotate_left(23) ^ w).wrapping_mul(MIX);
    }
    let mut t = 0u64;
    for (i, &x) in chunks.remainder().iter().enumerate() {
        t |= u64::from(x) << (8 * i);
    }
    h = (h.rotate_left(23) ^ t).wrapping_mul(MIX);
    h ^ (h >> 29)
}

impl LongSpans {
    fn new() -> LongSpans {
        LongSpans {
            slots: vec![LongEntry::default(); LONG_SLOTS].into_boxed_slice(),
            keys: Vec::new(),
            ids: Vec::new(),
            lens: Vec::new(),
            entries: 0,
        }
    }

    /// The slot holding `span`, or the empty slot where it would go.
    #[inline]
    fn find(&self, span: &[u8], h: u64) -> usize {
        let tag = h as u32;
        let mut i = (h >> 40) as usize & (LONG_SLOTS - 1);
        for _ in 0..LONG_SLOTS {
            let Some(e) = self.slots.get(i) else {
                break;
            };
            if e.key_len == 0 {
                return i;
            }
            if e.hash == tag && usize::from(e.key_len) == span.len() {
                let off = e.key_off as usize;
                if self.keys.get(off..off + span.len()) == Some(span) {
                    return i;
                }
            }
            i = (i + 1) & (LONG_SLOTS - 1);
        }
        // Never full (at most half the slots are used).
        LONG_SLOTS
    }

    #[inline]
    fn get(&self, span: &[u8], base: usize, out: &mut Vec<(u32, usize, usize)>) -> bool {
        let i = self.find(span, hash_bytes(span));
        let Some(e) = self.slots.get(i).filter(|e| e.key_len != 0) else {
            return false;
        };
        let (off, n) = (e.run_off as usize, usize::from(e.n));
        let (Some(ids), Some(lens)) = (self.ids.get(off..off + n), self.lens.get(off..off + n))
        else {
            return false;
        };
        let mut pos = base;
        for (&id, &len) in ids.iter().zip(lens) {
            out.push((id, pos, pos + usize::from(len)));
            pos += usize::from(len);
        }
        true
    }

    fn set(&mut self, span: &[u8], runs: &[(u32, usize, usize)]) {
        if span.is_empty() || span.len() > LONG_MAX_SPAN || runs.len() > LONG_MAX_RUNS {
            return;
        }
        if self.entries >= LONG_MAX_ENTRIES || self.keys.len() + span.len() > LONG_MAX_BYTES {
            self.slots.fill(LongEntry::default());
            self.keys.clear();
            self.ids.clear();
            self.lens.clear();
            self.entries = 0;
        }
        let h = hash_bytes(span);
        let i = self.find(span, h);
        let Some(e) = self.slots.get_mut(i) else {
            return;
        };
        if e.key_len == 0 {
            self.entries += 1;
        }
        *e = LongEntry {
            hash: h as u32,
            key_off: self.keys.len() as u32,
            run_off: self.ids.len() as u32,
            key_len: span.len() as u8,
            n: runs.len() as u8,
        };
        self.keys.extend_from_slice(span);
        for &(id, s, end) in runs {
            self.ids.push(id);
            // A run lies inside a span of at most LONG_MAX_SPAN bytes.
            self.lens.push(end.saturating_sub(s) as u8);
        }
    }
}

/// One model's span cache in one thread. Short spans: sets of two slots of one cache line
/// each, least recently used first out (a new span takes the first slot and moves its
/// occupant to the second; a hit in the second swaps them), so memory is bounded and two
/// common spans that hash alike both stay; longer ones: `LongSpans`. A hit compares the
/// whole key, so it is exact whatever the hash does.
pub(super) struct SpanTable {
    slots: Box<[Slot]>,
    long: LongSpans,
}

impl SpanTable {
    fn new() -> SpanTable {
        SpanTable {
            slots: vec![EMPTY_SLOT; CACHE_SLOTS].into_boxed_slice(),
            long: LongSpans::new(),
        }
    }

    /// Append the cached runs of `span` (starting at byte `base`) to `out`; false on a miss.
    #[inline]
    pub(super) fn get(
        &mut self,
        span: &[u8],
        base: usize,
        out: &mut Vec<(u32, usize, usize)>,
    ) -> bool {
        if span.len() > CACHE_MAX_SPAN {
            return self.long.get(span, base, out);
        }
        let Some(key) = span_key(span) else {
            return false;
        };
        let set = set_of(&key, span.len());
        let Some(ways) = self.slots.get_mut(set..set + 2) else {
            return false;
        };
        let hit = |s: &Slot| usize::from(s.key_len) == span.len() && s.key == key;
        let slot = match ways {
            [first, _] if hit(first) => first,
            [first, second] if hit(second) => {
                std::mem::swap(first, second);
                first
            }
            _ => return false,
        };
        if slot.n == MANY {
            return self.long.get(span, base, out);
        }
        let mut pos = base;
        for (&id, &len) in slot.ids.iter().zip(&slot.lens).take(usize::from(slot.n)) {
            out.push((id, pos, pos + usize::from(len)));
            pos += usize::from(len);
        }
        true
    }

    /// Remember the runs of `span` (absolute byte ranges inside it).
    pub(super) fn set(&mut self, span: &[u8], runs: &[(u32, usize, usize)]) {
        if span.len() > CACHE_MAX_SPAN {
            return self.long.set(span, runs);
        }
        let Some(key) = span_key(span) else {
            return;
        };
        let many = runs.len() > CACHE_MAX_RUNS;
        if many {
            self.long.set(span, runs);
        }
        let mut slot = Slot {
            key,
            key_len: span.len() as u8,
            n: if many { MANY } else { runs.len() as u8 },
            ..EMPTY_SLOT
        };
        let inline = if many { &[][..] } else { runs };
        for ((dst_id, dst_len), &(id, s, e)) in slot.ids.iter_mut().zip(&mut slot.lens).zip(inline)
        {
            *dst_id = id;
            // A run lies inside a span of at most CACHE_MAX_SPAN bytes.
            *dst_len = e.saturating_sub(s) as u8;
        }
        let set = set_of(&key, span.len());
        if let Some([first, second]) = self.slots.get_mut(set..set + 2) {
            *second = *first;
            *first = slot;
        }
    }
}

thread_local! {
    /// Per thread, so lookups take no lock and threads never wait on each other; keyed by
    /// the model's uid (a thread that forks keeps its tables, which stay valid in the child).
    static SPAN_TABLES: RefCell<Vec<(u64, SpanTable)>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` with this thread's span cache of model `uid` (created on first use; the oldest of
/// `CACHE_MODELS` goes), or with `None` when it is unavailable (a re-entrant call, or a thread
/// being torn down). `f` runs exactly once.
pub(super) fn with_span_table<R>(uid: u64, mut f: impl FnMut(Option<&mut SpanTable>) -> R) -> R {
    SPAN_TABLES
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut tables) => f(Some(crate::parallel::model_cache(
                &mut tables,
                uid,
                CACHE_MODELS,
                SpanTable::new,
            ))),
            Err(_) => f(None),
        })
        .unwrap_or_else(|_| f(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_keys_match_the_map() {
        let mut m = AHashMap::new();
        let chars = [
            'a',
            'é',
            '▁',
            '中',
            '😀',
            '\u{7f}',
            '\u{80}',
            '\u{10FFFF}',
            'ÿ',
        ];
        for (i, &c) in chars.iter().enumerate() {
            m.insert(c, i as u32 * 7 + 1);
        }
        let t = CharKeys::new(&m);
        let text: String = chars.iter().chain(['b', 'ê', '中'].iter()).collect();
        let bytes = text.as_bytes();
        let mut i = 0;
        for c in text.chars() {
            let (k, len) = t.at(bytes, i);
            assert_eq!(len, c.len_utf8());
            assert_eq!(k, m.get(&c).copied().unwrap_or(DEAD), "{c:?}");
            i += len;
        }
    }

    #[test]
    fn pair_table_finds_every_entry_and_nothing_else() {
        let mut next = crate::test_rng(0x5151_7a7a);
        for max_key in [5u32, 1000, 1 << 21, 1 << 22] {
            let mut want: AHashMap<(u32, u32), u32> = AHashMap::new();
            let mut entries = Vec::new();
            for _ in 0..3000 {
                let (l, r) = (
                    (next() % max_key as u64) as u32,
                    (next() % max_key as u64) as u32,
                );
                let id = (next() % max_key as u64) as u32;
                entries.push((l, r, id));
                want.insert((l, r), id);
            }
            // Without ranks, with ranks that fit beside the keys, and with ranks too wide
            // for them (then looked up in `ranks`).
            let narrow: Vec<u32> = (0..max_key).map(|i| i % 1000).collect();
            let wide: Vec<u32> = (0..max_key).map(|i| u32::MAX - i).collect();
            for ranks in [&[][..], &narrow, &wide] {
                let t = PairTable::new(&entries, max_key, ranks);
                assert_eq!(matches!(t, PairTable::Packed { .. }), max_key <= 1 << 20);
                if let PairTable::Packed { rbits, .. } = t {
                    let bits = 32 - max_key.leading_zeros();
                    let top = entries.iter().filter_map(|e| ranks.get(e.2 as usize)).max();
                    let q = top.map_or(0, |&m| (32 - m.leading_zeros()).max(1));
                    let stored = !ranks.is_empty() && 3 * bits + q <= 64;
                    assert_eq!(rbits > 0, stored, "{max_key}");
                }
                let ranked = |id: u32| ranks.get(id as usize).map(|&rank| (rank, id));
                for (&(l, r), &id) in &want {
                    assert_eq!(t.get(l, r), Some(id));
                    assert_eq!(t.get_ranked(l, r, ranks), ranked(id));
                }
                for _ in 0..3000 {
                    let (l, r) = (
                        (next() % max_key as u64) as u32,
                        (next() % max_key as u64) as u32,
                    );
                    let id = want.get(&(l, r)).copied();
                    assert_eq!(t.get(l, r), id);
                    assert_eq!(t.get_ranked(l, r, ranks), id.and_then(ranked));
                }
                let mut listed: Vec<_> = t.entries();
                listed.sort_unstable();
                let mut expect: Vec<_> = want.iter().map(|(&(l, r), &id)| (l, r, id)).collect();
                expect.sort_unstable();
                assert_eq!(listed, expect);
                assert_eq!(t.get(DEAD, 0), None);
                assert_eq!(t.get(0, DEAD), None);
                assert_eq!(t.get_ranked(DEAD, 0, ranks), None);
            }
        }
    }

    #[test]
    fn span_keys_are_unique_per_length() {
        use std::collections::HashMap;
        let mut next = crate::test_rng(0x2545_F491_4F6C_DD1D);
        let mut seen: HashMap<(usize, [u64; 3]), Vec<u8>> = HashMap::new();
        for _ in 0..50_000 {
            let len = 1 + (next() % CACHE_MAX_SPAN as u64) as usize;
            let w: Vec<u8> = (0..len).map(|_| b"ab\0z"[(next() % 4) as usize]).collect();
            let k = span_key(&w).unwrap();
            if let Some(prev) = seen.insert((len, k), w.clone()) {
                assert_eq!(prev, w, "two spans share a key");
            }
        }
        assert!(span_key(&[0u8; CACHE_MAX_SPAN + 1]).is_none());
        assert!(span_key(&[]).is_none());
    }

    #[test]
    fn span_table_round_trip() {
        let mut t = SpanTable::new();
        let runs = [(5u32, 10usize, 12usize), (7, 12, 15)];
        t.set(b"hello", &runs);
        let mut out = Vec::new();
        assert!(t.get(b"hello", 100, &mut out));
        assert_eq!(out, [(5, 100, 102), (7, 102, 105)]);
        assert!(!t.get(b"hellp", 0, &mut out));
        assert!(!t.get(b"hell", 0, &mut out));
        // More runs than a slot holds: kept in the long-span table, found through the slot.
        let many: Vec<_> = (0..7).map(|i| (i, i as usize, i as usize + 1)).collect();
        t.set(b"abcdefg", &many);
        out.clear();
        assert!(t.get(b"abcdefg", 0, &mut out));
        assert_eq!(out, many);
        out.clear();
        assert!(!t.get(b"abcdefh", 0, &mut out));
        // The long-span table starting over drops it: a miss, not a wrong answer.
        t.long = LongSpans::new();
        assert!(!t.get(b"abcdefg", 0, &mut out));
        assert!(out.is_empty());
    }

    /// Spans whose keys share a set: the two most recently used stay, the third goes.
    #[test]
    fn span_sets_keep_the_two_most_recent() {
        let span = |i: u32| format!("w{i}").into_bytes();
        let set = |i: u32| {
            let s = span(i);
            set_of(&span_key(&s).unwrap(), s.len())
        };
        let target = set(0);
        let same: Vec<u32> = (1..2_000_000)
            .filter(|&i| set(i) == target)
            .take(2)
            .collect();
        assert_eq!(same.len(), 2);
        let (a, b, c) = (0, same[0], same[1]);
        let runs = |i: u32| [(i, 0usize, span(i).len())];
        let mut t = SpanTable::new();
        let mut out = Vec::new();
        t.set(&span(a), &runs(a));
        t.set(&span(b), &runs(b));
        // `a` is in the second slot; a hit moves it first, so `b` is the one `c` evicts.
        assert!(t.get(&span(a), 0, &mut out));
        t.set(&span(c), &runs(c));
        out.clear();
        assert!(t.get(&span(a), 0, &mut out));
        assert!(t.get(&span(c), 0, &mut out));
        assert!(!t.get(&span(b), 0, &mut out));
        assert_eq!(out, [runs(a)[0], runs(c)[0]]);
    }

    #[test]
    fn long_spans_round_trip_and_start_over() {
        let mut t = SpanTable::new();
        let span = |i: usize| format!("{i:0>width$}", width = 25 + i % 200).into_bytes();
        let runs = |i: usize| vec![(i as u32, 0usize, 3usize), (7, 3, 25 + i % 200)];
        let total = LONG_MAX_ENTRIES + 100;
        for i in 0..total {
            let mut out = Vec::new();
            assert!(!t.get(&span(i), 0, &mut out));
            t.set(&span(i), &runs(i));
            assert!(t.get(&span(i), 10, &mut out), "{i}");
            let want: Vec<_> = runs(i)
                .iter()
                .map(|&(id, s, e)| (id, s + 10, e + 10))
                .collect();
            assert_eq!(out, want);
        }
        // The table started over: early spans are gone, late ones are there.
        let mut out = Vec::new();
        assert!(!t.get(&span(0), 0, &mut out));
        assert!(t.get(&span(total - 1), 0, &mut out));
        // Same length, one byte different: a miss.
        let mut s = span(total - 1);
        s[3] ^= 1;
        assert!(!t.get(&s, 0, &mut out));
        assert!(!t.get(&[b'x'; LONG_MAX_SPAN + 1], 0, &mut out));
    }
}
