//! A per-thread cache of short words → ids for the byte-level fast path.
//!
//! Words of up to 16 bytes are keys held inline as two integers, so a lookup is one
//! multiply-shift hash and two integer compares instead of hashing and comparing a byte string.
//! The table is set-associative: a word has one set of four slots, each a cache line, and a
//! compact tag array tells which slot (if any) to read.

/// Longest cached word, in bytes.
pub const MAX_WORD: usize = 16;
/// Ways per set: a word lives in one of the `WAYS` slots of its set.
const WAYS: usize = 4;
const SETS: usize = 1 << 13;
const SET_BITS: u32 = SETS.trailing_zeros();
/// Ids kept in the slot itself; longer results go to `overflow`.
const INLINE: usize = 11;
/// Overflow ids kept before the whole table starts over (rare: only words of more than
/// `INLINE` tokens use it).
const MAX_OVERFLOW: usize = 1 << 20;

/// One cache line: the key, and the ids inline (or, past `INLINE`, their offset in
/// `overflow` in `ids[0]`).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Slot {
    k0: u64,
    k1: u64,
    len: u8,
    n: u8,
    ids: [u32; INLINE],
}

/// The compact part of a set, checked before any slot is read: a 16-bit tag per way (0 when
/// empty) and a hit count that decides which way a new word evicts.
#[derive(Clone, Copy, Default)]
struct Set {
    tags: [u16; WAYS],
    hits: [u8; WAYS],
}

/// Set-associative rather than cleared when full: the frequent words of a corpus larger than
/// the table stay, and a miss reads only the small tag array.
pub struct IdsTable {
    sets: Vec<Set>,
    slots: Vec<Slot>,
    overflow: Vec<u32>,
}

/// The word as two integers (`text::overlap_key`); an empty word (never cached) is (0, 0).
#[inline]
fn key(word: &[u8]) -> (u64, u64) {
    let [k0, k1] = crate::text::overlap_key::<2>(word).unwrap_or_default();
    (k0, k1)
}

/// (set index, tag) of a key: the set from the top bits of a multiply-shift hash, the tag
/// from the bits below them, never 0.
#[inline]
fn place(k0: u64, k1: u64, len: usize) -> (usize, u16) {
    let h = (k0 ^ k1.rotate_left(29) ^ (len as u64).wrapping_mul(0x9E37_79B9))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let set = (h >> (64 - SET_BITS)) as usize;
    let tag = (h >> (48 - SET_BITS)) as u16 | 1;
    (set, tag)
}

impl Default for IdsTable {
    fn default() -> Self {
        const EMPTY: Slot = Slot {
            k0: 0,
            k1: 0,
            len: 0,
            n: 0,
            ids: [0; INLINE],
        };
        IdsTable {
            sets: vec![Set::default(); SETS],
            slots: vec![EMPTY; SETS * WAYS],
            overflow: Vec::new(),
        }
    }
}

impl IdsTable {
    /// Append the cached ids of `word` (1..=MAX_WORD bytes) to `out`; false when absent.
    #[inline]
    pub fn get(&mut self, word: &[u8], out: &mut Vec<u32>) -> bool {
        let (k0, k1) = key(word);
        let (s, tag) = place(k0, k1, word.len());
        let Some(set) = self.sets.get_mut(s) else {
            return false;
        };
        for w in 0..WAYS {
            if set.tags[w] != tag {
                continue;
            }
            let Some(slot) = self.slots.get(s * WAYS + w) else {
                return false;
            };
            if slot.k0 != k0 || slot.k1 != k1 || usize::from(slot.len) != word.len() {
                continue;
            }
            set.hits[w] = set.hits[w].saturating_add(1);
            if slot.n == 1 {
                // Most words: a push, not a variable-length copy.
                out.push(slot.ids[0]);
                return true;
            }
            let n = usize::from(slot.n);
            if let Some(ids) = slot.ids.get(..n) {
                out.extend_from_slice(ids);
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
        if word.is_empty() || word.len() > MAX_WORD || ids.len() > usize::from(u8::MAX) {
            return;
        }
        if ids.len() > INLINE && self.overflow.len() + ids.len() > MAX_OVERFLOW {
            self.sets.fill(Set::default());
            self.overflow.clear();
        }
        let (k0, k1) = key(word);
        let (s, tag) = place(k0, k1, word.len());
        let Some(set) = self.sets.get_mut(s) else {
            return;
        };
        let w = match set.tags.iter().position(|&t| t == 0) {
            Some(w) => w,
            None => {
                // Age the set so that words hit long ago give way in time.
                let mut w = 0;
                for i in 0..WAYS {
                    if set.hits[i] < set.hits[w] {
                        w = i;
                    }
                    set.hits[i] /= 2;
                }
                w
            }
        };
        let Some(slot) = self.slots.get_mut(s * WAYS + w) else {
            return;
        };
        set.tags[w] = tag;
        set.hits[w] = 0;
        slot.k0 = k0;
        slot.k1 = k1;
        slot.len = word.len() as u8;
        slot.n = ids.len() as u8;
        if let Some(inline) = slot.ids.get_mut(..ids.len()) {
            inline.copy_from_slice(ids);
        } else {
            slot.ids[0] = self.overflow.len() as u32;
            self.overflow.extend_from_slice(ids);
        }
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

/// Start slot of a key (the top bits of the same multiply-shift hash as `place`).
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

    /// Words with the same set and tag are told apart by their full keys: pairs found by
    /// search (same first 8 bytes, so only `k1` differs, or different lengths).
    #[test]
    fn colliding_tags_compare_whole_keys() {
        use std::collections::HashMap;
        let mut by_place: HashMap<(usize, u16), Vec<u8>> = HashMap::new();
        let mut pairs = Vec::new();
        let mut next = crate::test_rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..200_000u32 {
            let r = next();
            let len = 9 + (r % 8) as usize;
            let tail = next().to_le_bytes();
            let mut w = b"prefix__".to_vec();
            w.extend(tail.iter().map(|b| b'a' + b % 26).take(len - 8));
            let (k0, k1) = key(&w);
            match by_place.entry(place(k0, k1, w.len())) {
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
        assert!(pairs.len() >= 5, "only {} colliding pairs", pairs.len());
        for (a, b) in &pairs {
            let mut t = IdsTable::default();
            t.insert(a, &[1]);
            let mut out = Vec::new();
            assert!(!t.get(b, &mut out), "{b:?} found as {a:?}");
            t.insert(b, &[2, 3]);
            assert!(t.get(a, &mut out) && t.get(b, &mut out));
            assert_eq!(out, [1, 2, 3]);
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
}
