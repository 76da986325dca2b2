//! A per-thread cache of short words → ids for the byte-level fast path.
//!
//! Words of up to 16 bytes are keys held inline as two integers, so a lookup is one
//! multiply-shift hash and two integer compares instead of hashing and comparing a byte string.
//! The table is set-associative: a word has one set of four slots, each half a cache line, and
//! the slots are compared by key directly (a word's first eight bytes differ from another's as
//! often as a tag would, and no separate tag array is read or kept in step).

/// Longest cached word, in bytes.
pub const MAX_WORD: usize = 16;
/// Ways per set: a word lives in one of the `WAYS` slots of its set.
const WAYS: usize = 4;
/// 64K words in 2 MB: a multilingual stream has tens of thousands of distinct words, and
/// every conflict miss costs a merge (about 15 hits' worth).
const SETS: usize = 1 << 14;
const SET_BITS: u32 = SETS.trailing_zeros();
/// Ids kept in the slot itself (most words have one to three); longer results go to
/// `overflow`.
const INLINE: usize = 3;
/// Overflow ids kept before the whole table starts over (rare: only words of more than
/// `INLINE` tokens use it).
const MAX_OVERFLOW: usize = 1 << 20;

/// Half a cache line: the key, a hit count that decides which way a new word evicts, and the
/// ids inline (or, past `INLINE`, their offset in `overflow` in `ids[0]`). `len` 0 marks an
/// empty slot (words are never empty, so no key matches it).
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    k0: u64,
    k1: u64,
    len: u8,
    n: u8,
    hits: u8,
    ids: [u32; INLINE],
}

const EMPTY: Slot = Slot {
    k0: 0,
    k1: 0,
    len: 0,
    n: 0,
    hits: 0,
    ids: [0; INLINE],
};

// Two slots per cache line.
const _: () = assert!(std::mem::size_of::<Slot>() == 32);

/// Set-associative rather than cleared when full: the frequent words of a corpus larger than
/// the table stay.
pub struct IdsTable {
    /// A fixed-size array, so that indexing by `set_of` needs no bounds check.
    sets: Box<[[Slot; WAYS]; SETS]>,
    overflow: Vec<u32>,
    /// Words of `MAX_WORD + 1..=MAX_LONG_WORD` bytes, allocated on first use.
    long: Option<LongIds>,
}

/// The word as two integers: its bytes little-endian, zero-padded to 16 (the length, kept
/// beside the key, tells apart words that differ only by trailing NULs). An empty word (never
/// cached) is (0, 0). Overlapping loads, so that no copy is needed; `key_at` gives the same key
/// from two plain loads where the text goes on past the word.
#[inline]
fn key(word: &[u8]) -> (u64, u64) {
    let n = word.len();
    let u64_at = |i: usize| {
        word.get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let u32_at = |i: usize| {
        word.get(i..i + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
    };
    let byte = |i: usize| word.get(i).copied().map_or(0, u64::from);
    match n {
        0 => (0, 0),
        1..=3 => (
            byte(0) | byte(n / 2) << (8 * (n / 2)) | byte(n - 1) << (8 * (n - 1)),
            0,
        ),
        // The high load's first bytes repeat the low one's; the shift drops them.
        4..=7 => (u32_at(0) | (u32_at(n - 4) >> (8 * (8 - n))) << 32, 0),
        8 => (u64_at(0), 0),
        9..=MAX_WORD => (u64_at(0), u64_at(n - 8) >> (8 * (16 - n))),
        _ => (0, 0),
    }
}

/// Masks of the bytes of a word of `len` bytes in the two words of its key.
static KEY_MASKS: [(u64, u64); MAX_WORD + 1] = {
    let mut t = [(0u64, 0u64); MAX_WORD + 1];
    let mut len = 1;
    while len <= MAX_WORD {
        t[len] = if len <= 8 {
            (u64::MAX >> (8 * (8 - len)), 0)
        } else {
            (u64::MAX, u64::MAX >> (8 * (16 - len)))
        };
        len += 1;
    }
    t
};

/// `key(&text[pos..pos + len])` (`len` of 1..=MAX_WORD) from two loads and two masks, when
/// sixteen bytes of `text` start at `pos`; else None. The byte-level scanner calls it on every
/// word, so that a cache hit never handles the word's bytes one by one.
#[inline(always)]
pub fn key_at(text: &[u8], pos: usize, len: usize) -> Option<(u64, u64)> {
    let sixteen: &[u8; 16] = text.get(pos..pos + 16)?.try_into().ok()?;
    let [lo, hi] = window_words(sixteen);
    window_key(lo, hi, len)
}

/// Sixteen bytes as two little-endian words.
#[inline(always)]
pub fn window_words(w: &[u8; 16]) -> [u64; 2] {
    let (a, b) = w.split_at(8);
    [a, b].map(|h| <[u8; 8]>::try_from(h).map_or(0, u64::from_le_bytes))
}

/// `key(&w[..len])` (`len` of 1..=MAX_WORD; else None) from the two words (`window_words`)
/// of sixteen bytes `w`, by two masks.
#[inline(always)]
pub fn window_key(lo: u64, hi: u64, len: usize) -> Option<(u64, u64)> {
    let (m0, m1) = *KEY_MASKS.get(len)?;
    Some((lo & m0, hi & m1))
}

/// The set of a key: the top bits of a multiply-shift hash. The length is left out: words
/// with equal keys differ only by trailing NULs, and share a set.
#[inline(always)]
fn set_of(k0: u64, k1: u64) -> usize {
    ((k0 ^ k1.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SET_BITS)) as usize
}

impl Default for IdsTable {
    fn default() -> Self {
        IdsTable {
            // Built on the heap (a 2 MB array is not built on the stack first); the length is
            // SETS, so the conversion does not fail.
            sets: vec![[EMPTY; WAYS]; SETS]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| Box::new([[EMPTY; WAYS]; SETS])),
            overflow: Vec::new(),
            long: None,
        }
    }
}

impl IdsTable {
    /// Append the cached ids of `word` (1..=MAX_WORD bytes) to `out`; false when absent.
    #[inline(always)]
    pub fn get(&mut self, word: &[u8], out: &mut Vec<u32>) -> bool {
        let (k0, k1) = key(word);
        self.get_keyed(k0, k1, word.len(), out)
    }

    /// `get` of the word of `len` bytes whose key (`key`, `key_at`) is (k0, k1). Always
    /// inline: it is the per-word step of the byte-level scanner's loop.
    #[inline(always)]
    pub fn get_keyed(&mut self, k0: u64, k1: u64, len: usize, out: &mut Vec<u32>) -> bool {
        let Some(set) = self.sets.get_mut(set_of(k0, k1)) else {
            return false;
        };
        for slot in set.iter_mut() {
            if slot.k0 != k0 || slot.k1 != k1 || usize::from(slot.len) != len {
                continue;
            }
            // Branch-free (a test for saturation mispredicts on the words not yet saturated).
            slot.hits = slot.hits.saturating_add(1);
            if slot.n == 1 {
                // Most words: a push, not a variable-length copy.
                out.push(slot.ids[0]);
                return true;
            }
            let n = usize::from(slot.n);
            if let Some(ids) = slot.ids.get(..n) {
                // A few pushes: cheaper than a call to memcpy for two or three ids.
                for &id in ids {
                    out.push(id);
                }
                return true;
            }
            let a = slot.ids[0] as usize;
            return match self.overflow.get(a..a + n) {
                Some(ids) => {
                    out.extend_from_slice(ids);
                    true
                }
                None => false,
            };
        }
        false
    }

    /// Remember the ids of `word` (1..=MAX_WORD bytes, not yet present), evicting the least
    /// hit word of its set when the set is full.
    pub fn insert(&mut self, word: &[u8], ids: &[u32]) {
        let (k0, k1) = key(word);
        self.insert_keyed(k0, k1, word.len(), ids);
    }

    /// `insert` of the word of `len` bytes whose key is (k0, k1).
    pub fn insert_keyed(&mut self, k0: u64, k1: u64, len: usize, ids: &[u32]) {
        if len == 0 || len > MAX_WORD || ids.len() > usize::from(u8::MAX) {
            return;
        }
        if ids.len() > INLINE && self.overflow.len() + ids.len() > MAX_OVERFLOW {
            self.sets.fill([EMPTY; WAYS]);
            self.overflow.clear();
        }
        let Some(set) = self.sets.get_mut(set_of(k0, k1)) else {
            return;
        };
        let w = match set.iter().position(|s| s.len == 0) {
            Some(w) => w,
            None => {
                // Age the set so that words hit long ago give way in time.
                let mut w = 0;
                for i in 0..WAYS {
                    if set[i].hits < set[w].hits {
                        w = i;
                    }
                    set[i].hits /= 2;
                }
                w
            }
        };
        let Some(slot) = set.get_mut(w) else {
            return;
        };
        *slot = Slot {
            k0,
            k1,
            len: len as u8,
            n: ids.len() as u8,
            hits: 0,
            ids: [0; INLINE],
        };
        if let Some(inline) = slot.ids.get_mut(..ids.len()) {
            inline.copy_from_slice(ids);
        } else {
            slot.ids[0] = self.overflow.len() as u32;
            self.overflow.extend_from_slice(ids);
        }
    }
}

/// Longest word of the long-word part of `IdsTable`, in bytes.
pub const MAX_LONG_WORD: usize = 128;
const LONG_SLOTS: usize = 1 << 14;
/// Probes per lookup: a word lives in one of this many slots from its start slot.
const LONG_PROBES: usize = 4;
/// Bytes of keys kept (ids are bounded alike) before the long-word table starts over.
const LONG_MAX_BYTES: usize = 1 << 20;

/// The long words of `IdsTable`: the word's bytes and ids in two arenas, and open addressing
/// over small entries that point into them. A lookup hashes the word once and compares the
/// bytes of the (almost always one) entry with the same hash and length, so a hit is exact.
/// An insert into a full probe window overwrites its first entry (the arenas keep the dead
/// bytes until the whole table starts over, when they reach `LONG_MAX_BYTES`).
struct LongIds {
    slots: Box<[LongSlot]>,
    keys: Vec<u8>,
    ids: Vec<u32>,
}

#[derive(Clone, Copy, Default)]
struct LongSlot {
    /// The word's hash; 0 marks an empty slot (`long_hash` is never 0).
    hash: u64,
    key_off: u32,
    ids_off: u32,
    key_len: u8,
    n: u8,
}

/// A hash of a word of 1..=MAX_LONG_WORD bytes, never 0.
#[inline]
fn long_hash(word: &[u8]) -> u64 {
    const M: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (word.len() as u64).wrapping_mul(M);
    let mut chunks = word.chunks_exact(8);
    for c in &mut chunks {
        let w = c.try_into().map_or(0, u64::from_le_bytes);
        h = (h ^ w).wrapping_mul(M).rotate_left(29);
    }
    let mut t = 0u64;
    for (i, &b) in chunks.remainder().iter().enumerate() {
        t |= u64::from(b) << (8 * i);
    }
    h = (h ^ t).wrapping_mul(M);
    (h ^ (h >> 32)) | 1
}

impl LongIds {
    fn new() -> LongIds {
        LongIds {
            slots: vec![LongSlot::default(); LONG_SLOTS].into_boxed_slice(),
            keys: Vec::new(),
            ids: Vec::new(),
        }
    }

    #[inline]
    fn start(h: u64) -> usize {
        (h >> 48) as usize & (LONG_SLOTS - 1)
    }

    #[inline]
    fn get(&self, word: &[u8], out: &mut Vec<u32>) -> bool {
        let h = long_hash(word);
        let mut i = Self::start(h);
        for _ in 0..LONG_PROBES {
            let Some(s) = self.slots.get(i) else {
                return false;
            };
            if s.hash == 0 {
                return false;
            }
            if s.hash == h && usize::from(s.key_len) == word.len() {
                let k = s.key_off as usize;
                if self.keys.get(k..k + word.len()) == Some(word) {
                    let a = s.ids_off as usize;
                    return match self.ids.get(a..a + usize::from(s.n)) {
                        Some(ids) => {
                            out.extend_from_slice(ids);
                            true
                        }
                        None => false,
                    };
                }
            }
            i = (i + 1) & (LONG_SLOTS - 1);
        }
        false
    }

    fn insert(&mut self, word: &[u8], ids: &[u32]) {
        if word.len() <= MAX_WORD || word.len() > MAX_LONG_WORD || ids.len() > usize::from(u8::MAX)
        {
            return;
        }
        if self.keys.len() + word.len() > LONG_MAX_BYTES
            || self.ids.len() + ids.len() > LONG_MAX_BYTES
        {
            self.slots.fill(LongSlot::default());
            self.keys.clear();
            self.ids.clear();
        }
        let h = long_hash(word);
        let first = Self::start(h);
        let mut at = first;
        let mut i = first;
        for _ in 0..LONG_PROBES {
            match self.slots.get(i) {
                Some(s) if s.hash != 0 => i = (i + 1) & (LONG_SLOTS - 1),
                _ => {
                    at = i;
                    break;
                }
            }
        }
        let (Ok(key_off), Ok(ids_off)) = (
            u32::try_from(self.keys.len()),
            u32::try_from(self.ids.len()),
        ) else {
            return;
        };
        let Some(slot) = self.slots.get_mut(at) else {
            return;
        };
        *slot = LongSlot {
            hash: h,
            key_off,
            ids_off,
            key_len: word.len() as u8,
            n: ids.len() as u8,
        };
        self.keys.extend_from_slice(word);
        self.ids.extend_from_slice(ids);
    }
}

impl IdsTable {
    /// Append the cached ids of a word of `MAX_WORD + 1..=MAX_LONG_WORD` bytes to `out`;
    /// false when absent.
    #[inline]
    pub fn get_long(&self, word: &[u8], out: &mut Vec<u32>) -> bool {
        self.long.as_ref().is_some_and(|l| l.get(word, out))
    }

    /// Remember the ids of a word of `MAX_WORD + 1..=MAX_LONG_WORD` bytes (not yet present).
    pub fn insert_long(&mut self, word: &[u8], ids: &[u32]) {
        self.long.get_or_insert_with(LongIds::new).insert(word, ids);
    }
}

/// Byte-level words that are one token, shared read-only by every thread: open addressing
/// over the same inline keys as `IdsTable` (24-byte slots, load at most 1/2). Filled from a
/// model's vocabulary once (`Bpe::single_words`), so a word never seen before that is a token
/// costs one probe instead of a merge, and the per-thread table keeps its room for the words
/// of several tokens.
pub struct Singles {
    slots: Box<[Single]>,
    shift: u32,
}

#[derive(Clone, Copy)]
struct Single {
    k0: u64,
    k1: u64,
    /// Word length in bytes; 0 marks an empty slot (words are never empty).
    len: u32,
    id: u32,
}

/// Start slot of a key (the top bits of a multiply-shift hash of the key and length).
#[inline]
fn single_start(k0: u64, k1: u64, len: usize, shift: u32) -> usize {
    let h = (k0 ^ k1.rotate_left(29) ^ (len as u64).wrapping_mul(0x9E37_79B9))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> shift) as usize
}

impl Singles {
    /// The table of `words` (`count` of them, distinct, 1..=MAX_WORD bytes each; others are
    /// left out).
    pub fn new<'a>(count: usize, words: impl Iterator<Item = (&'a [u8], u32)>) -> Singles {
        let cap = (count * 2).next_power_of_two().max(16);
        let shift = 64 - cap.trailing_zeros();
        let mask = cap - 1;
        let empty = Single {
            k0: 0,
            k1: 0,
            len: 0,
            id: 0,
        };
        let mut slots = vec![empty; cap].into_boxed_slice();
        let mut left = cap / 2;
        for (w, id) in words {
            if w.is_empty() || w.len() > MAX_WORD || left == 0 {
                continue;
            }
            left -= 1;
            let (k0, k1) = key(w);
            let mut i = single_start(k0, k1, w.len(), shift);
            while let Some(s) = slots.get_mut(i) {
                if s.len == 0 {
                    *s = Single {
                        k0,
                        k1,
                        len: w.len() as u32,
                        id,
                    };
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        Singles { slots, shift }
    }

    /// The token of `word`, when it is one of the table's words.
    #[inline]
    pub fn get(&self, word: &[u8]) -> Option<u32> {
        if word.is_empty() || word.len() > MAX_WORD {
            return None;
        }
        let (k0, k1) = key(word);
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = single_start(k0, k1, word.len(), self.shift);
        loop {
            let s = self.slots.get(i)?;
            if s.len == 0 {
                return None;
            }
            if s.k0 == k0 && s.k1 == k1 && s.len as usize == word.len() {
                return Some(s.id);
            }
            i = (i + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_by_length_and_content() {
        let mut t = IdsTable::default();
        t.insert(b"a", &[1]);
        t.insert(b"a\0", &[2, 3]);
        t.insert(b"abcdefghijklmnop", &[4]);
        let mut out = Vec::new();
        assert!(t.get(b"a", &mut out));
        assert!(t.get(b"a\0", &mut out));
        assert!(t.get(b"abcdefghijklmnop", &mut out));
        assert!(!t.get(b"abcdefghijklmnoq", &mut out));
        assert!(!t.get(b"b", &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
    }

    /// Every word over the alphabet {a, b, NUL} of 1 to 5 bytes.
    fn small_words() -> Vec<Vec<u8>> {
        let mut words: Vec<Vec<u8>> = vec![Vec::new()];
        let mut all = Vec::new();
        for _ in 0..5 {
            words = words
                .iter()
                .flat_map(|w| {
                    b"ab\0".iter().map(move |&c| {
                        let mut w = w.clone();
                        w.push(c);
                        w
                    })
                })
                .collect();
            all.extend(words.iter().cloned());
        }
        all
    }

    /// Every word of every length must get its own key (the overlapping loads must not lose a
    /// byte): all words over a 3-letter alphabet up to 5 bytes, then random words up to 16.
    #[test]
    fn keys_are_unique_per_length() {
        use std::collections::HashMap;
        let mut all = small_words();
        let mut next = crate::test_rng(0x2545_F491_4F6C_DD1Du64);
        for _ in 0..20_000 {
            let state = next();
            let len = 1 + (state % 16) as usize;
            all.push(
                (0..len)
                    .map(|i| b"ab\0z"[(state >> (8 + 2 * i)) as usize % 4])
                    .collect(),
            );
        }
        let mut seen: HashMap<(usize, u64, u64), &[u8]> = HashMap::new();
        let mut t = IdsTable::default();
        // What the table must give for each word: the ids of its latest insertion (a word
        // evicted and met again is inserted again).
        let mut expect: HashMap<&[u8], Vec<u32>> = HashMap::new();
        for (i, w) in all.iter().enumerate() {
            let (k0, k1) = key(w);
            if let Some(prev) = seen.insert((w.len(), k0, k1), w) {
                assert_eq!(prev, &w[..], "two words share a key");
            }
            let mut out = Vec::new();
            if t.get(w, &mut out) {
                assert_eq!(out, expect[&w[..]]);
            } else {
                let ids = [i as u32, (i % 3) as u32][..1 + i % 2].to_vec();
                t.insert(w, &ids);
                expect.insert(w, ids);
            }
        }
        // Sets that overflowed evicted some words; those still present must be intact.
        let mut present = 0;
        for w in &all {
            let mut out = Vec::new();
            if t.get(w, &mut out) {
                present += 1;
                assert_eq!(out, expect[&w[..]]);
            }
        }
        assert!(present * 10 > all.len() * 9, "{present} of {}", all.len());
    }

    /// Words of one set are told apart by their whole keys and lengths: pairs found by search
    /// (same first 8 bytes, so only `k1` differs), and words that differ only by trailing NULs
    /// (same key, other length).
    #[test]
    fn words_of_one_set_compare_whole_keys() {
        use std::collections::HashMap;
        let mut by_set: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut pairs = vec![
            (b"a".to_vec(), b"a\0".to_vec()),
            (b"abcdefgh".to_vec(), b"abcdefgh\0".to_vec()),
            (b"abcdefghij\0".to_vec(), b"abcdefghij".to_vec()),
        ];
        let mut next = crate::test_rng(0x9E37_79B9_7F4A_7C15);
        while pairs.len() < 40 {
            let r = next();
            let len = 9 + (r % 8) as usize;
            let tail = next().to_le_bytes();
            let mut w = b"prefix__".to_vec();
            w.extend(tail.iter().map(|b| b'a' + b % 26).take(len - 8));
            let (k0, k1) = key(&w);
            match by_set.entry(set_of(k0, k1)) {
                std::collections::hash_map::Entry::Occupied(o) => {
                    if *o.get() != w {
                        pairs.push((o.get().clone(), w));
                    }
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(w);
                }
            }
        }
        let mut t = IdsTable::default();
        for (a, b) in &pairs {
            t.sets.fill([EMPTY; WAYS]);
            t.insert(a, &[1]);
            let mut out = Vec::new();
            assert!(!t.get(b, &mut out), "{b:?} found as {a:?}");
            t.insert(b, &[2, 3]);
            assert!(t.get(a, &mut out) && t.get(b, &mut out));
            assert_eq!(out, [1, 2, 3]);
        }
    }

    /// `key_at` gives `key` of the word at every position and length where it applies, and
    /// nothing where fewer than sixteen bytes follow.
    #[test]
    fn key_at_equals_key() {
        let mut next = crate::test_rng(0x4B45_595F_4154_0001);
        let text: Vec<u8> = (0..200)
            .map(|_| b"ab\0\xff z"[(next() % 6) as usize])
            .collect();
        for pos in 0..text.len() {
            for len in 1..=MAX_WORD.min(text.len() - pos) {
                let got = key_at(&text, pos, len);
                if pos + 16 <= text.len() {
                    assert_eq!(got, Some(key(&text[pos..pos + len])), "{pos} {len}");
                } else {
                    assert_eq!(got, None);
                }
            }
        }
    }

    /// The shared table finds exactly its words: every word over a small alphabet up to 5
    /// bytes and random longer ones, half of them in the table.
    #[test]
    fn singles_find_exactly_their_words() {
        let mut all = small_words();
        let mut next = crate::test_rng(0x51B6_1E5E_ED00_0001);
        for _ in 0..5000 {
            let len = 6 + (next() % 11) as usize;
            all.push((0..len).map(|_| b"ab\0z"[(next() % 4) as usize]).collect());
        }
        all.sort();
        all.dedup();
        let kept: Vec<(Vec<u8>, u32)> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(i, w)| (w.clone(), i as u32))
            .collect();
        let t = Singles::new(kept.len(), kept.iter().map(|(w, id)| (&w[..], *id)));
        for (i, w) in all.iter().enumerate() {
            let want = (i % 2 == 0).then_some(i as u32);
            assert_eq!(t.get(w), want, "{w:?}");
        }
        assert_eq!(t.get(b""), None);
        assert_eq!(t.get(&[b'a'; MAX_WORD + 1]), None);
        assert_eq!(Singles::new(0, std::iter::empty()).get(b"a"), None);
    }

    /// A corpus larger than the table: a word hit often survives a stream of one-off words
    /// through its set, and words with more ids than fit inline come back intact.
    #[test]
    fn frequent_words_survive_eviction() {
        let mut t = IdsTable::default();
        let long: Vec<u32> = (100..100 + INLINE as u32 + 3).collect();
        t.insert(b"frequent", &[7, 8]);
        t.insert(b"many ids here", &long);
        let mut out = Vec::new();
        for i in 0..(4 * SETS * WAYS) as u32 {
            if i % 64 == 0 {
                assert!(t.get(b"frequent", &mut out));
            }
            let w = format!("w{i}");
            if !t.get(w.as_bytes(), &mut out) {
                t.insert(w.as_bytes(), &[i]);
            }
        }
        out.clear();
        assert!(t.get(b"frequent", &mut out));
        assert_eq!(out, [7, 8]);
        let last = format!("w{}", 4 * SETS * WAYS - 1);
        out.clear();
        assert!(t.get(last.as_bytes(), &mut out));
        assert_eq!(out, [(4 * SETS * WAYS - 1) as u32]);
        // The long entry may have been evicted; when present it must be whole.
        out.clear();
        if t.get(b"many ids here", &mut out) {
            assert_eq!(out, long);
        }
        let mut fresh = IdsTable::default();
        fresh.insert(b"many ids here", &long);
        out.clear();
        assert!(fresh.get(b"many ids here", &mut out));
        assert_eq!(out, long);
    }

    /// The long-word part answers a word with its own ids or not at all: many random words
    /// of 17..=MAX_LONG_WORD bytes over two letters (so many share a length and most
    /// bytes), far more than its slots, with the arena reset on the way.
    #[test]
    fn long_words_get_their_own_ids_or_none() {
        let mut next = crate::test_rng(0x5EED_0F5C_A7E5_0004);
        let mut t = IdsTable::default();
        let mut out = Vec::new();
        let words: Vec<Vec<u8>> = (0..60_000)
            .map(|_| {
                let n = MAX_WORD + 1 + (next() % (MAX_LONG_WORD - MAX_WORD) as u64) as usize;
                (0..n).map(|_| b"ab"[(next() % 2) as usize]).collect()
            })
            .collect();
        let ids_of = |w: &[u8]| -> Vec<u32> {
            w.chunks(9)
                .map(|c| c.iter().map(|&b| u32::from(b)).sum::<u32>() + c.len() as u32)
                .collect()
        };
        let mut hits = 0;
        for (i, w) in words.iter().enumerate() {
            out.clear();
            if t.get_long(w, &mut out) {
                assert_eq!(out, ids_of(w));
                hits += 1;
            } else {
                t.insert_long(w, &ids_of(w));
            }
            // A word inserted just before is found.
            let prev = &words[i.saturating_sub(1)];
            out.clear();
            if t.get_long(prev, &mut out) {
                assert_eq!(out, ids_of(prev));
            }
            out.clear();
            assert!(t.get_long(w, &mut out));
        }
        // Short words never go to the long part.
        t.insert_long(b"short", &[1]);
        assert!(!t.get_long(b"short", &mut out));
        assert!(hits < words.len());
    }
}
