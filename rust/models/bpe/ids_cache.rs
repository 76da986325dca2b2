//! A per-thread cache of short words → ids for the byte-level fast path.
//!
//! Words of up to 16 bytes are keys held inline as two integers, so a lookup is one
//! multiply-shift hash and two integer compares instead of hashing and comparing a byte string.
//! The table is open addressing with linear probing, and starts over when half full.

/// Longest cached word, in bytes.
pub const MAX_WORD: usize = 16;
const SLOTS: usize = 1 << 16;
const MAX_ENTRIES: usize = SLOTS / 2;

#[derive(Clone, Copy, Default)]
struct Slot {
    k0: u64,
    k1: u64,
    /// Key length in bytes; 0 marks an empty slot (empty words are never cached).
    len: u8,
    /// Number of ids, stored at `ids[off..off + n]`, or in `off` itself when there is one
    /// (most words), which saves a second cache miss.
    n: u8,
    off: u32,
}

pub struct IdsTable {
    slots: Vec<Slot>,
    ids: Vec<u32>,
    entries: usize,
}

/// The word as two integers, read with overlapping loads instead of a variable-length copy
/// (which compiles to a `memcpy` call). Together with the length, which the slot also
/// compares, the pair determines the bytes: overlapping halves only repeat bytes.
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
            .map_or(0, u32::from_le_bytes)
    };
    let byte = |i: usize| word.get(i).copied().map_or(0, u64::from);
    match n {
        0 => (0, 0),
        1..=3 => (byte(0) | byte(n / 2) << 8 | byte(n - 1) << 16, 0),
        4..=7 => (u64::from(u32_at(0)) | u64::from(u32_at(n - 4)) << 32, 0),
        8 => (u64_at(0), 0),
        _ => (u64_at(0), u64_at(n - 8)),
    }
}

#[inline]
fn slot_of(k0: u64, k1: u64, len: usize) -> usize {
    let h = (k0 ^ k1.rotate_left(29) ^ (len as u64).wrapping_mul(0x9E37_79B9))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 48) as usize & (SLOTS - 1)
}

impl Default for IdsTable {
    fn default() -> Self {
        IdsTable {
            slots: vec![Slot::default(); SLOTS],
            ids: Vec::new(),
            entries: 0,
        }
    }
}

impl IdsTable {
    /// Append the cached ids of `word` (1..=MAX_WORD bytes) to `out`; false when absent.
    #[inline]
    pub fn get(&self, word: &[u8], out: &mut Vec<u32>) -> bool {
        let (k0, k1) = key(word);
        let mut i = slot_of(k0, k1, word.len());
        loop {
            let Some(s) = self.slots.get(i) else {
                return false;
            };
            if s.len == 0 {
                return false;
            }
            if s.k0 == k0 && s.k1 == k1 && usize::from(s.len) == word.len() {
                if s.n == 1 {
                    out.push(s.off);
                    return true;
                }
                let (a, n) = (s.off as usize, usize::from(s.n));
                return match self.ids.get(a..a + n) {
                    Some(ids) => {
                        out.extend_from_slice(ids);
                        true
                    }
                    None => false,
                };
            }
            i = (i + 1) & (SLOTS - 1);
        }
    }

    /// Remember the ids of `word` (1..=MAX_WORD bytes, not yet present).
    pub fn insert(&mut self, word: &[u8], ids: &[u32]) {
        if word.is_empty() || word.len() > MAX_WORD || ids.len() > usize::from(u8::MAX) {
            return;
        }
        if self.entries >= MAX_ENTRIES || self.ids.len() > u32::MAX as usize / 2 {
            self.slots.fill(Slot::default());
            self.ids.clear();
            self.entries = 0;
        }
        let (k0, k1) = key(word);
        let mut i = slot_of(k0, k1, word.len());
        while self.slots.get(i).is_some_and(|s| s.len != 0) {
            i = (i + 1) & (SLOTS - 1);
        }
        if let Some(s) = self.slots.get_mut(i) {
            let off = match ids {
                [one] => *one,
                _ => {
                    let off = self.ids.len() as u32;
                    self.ids.extend_from_slice(ids);
                    off
                }
            };
            *s = Slot {
                k0,
                k1,
                len: word.len() as u8,
                n: ids.len() as u8,
                off,
            };
            self.entries += 1;
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

    /// Every word of every length must get its own key (the overlapping loads must not lose a
    /// byte): all words over a 3-letter alphabet up to 5 bytes, then random words up to 16.
    #[test]
    fn keys_are_unique_per_length() {
        use std::collections::HashMap;
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
        for (i, w) in all.iter().enumerate() {
            let (k0, k1) = key(w);
            if let Some(prev) = seen.insert((w.len(), k0, k1), w) {
                assert_eq!(prev, &w[..], "two words share a key");
            }
            let mut out = Vec::new();
            if !t.get(w, &mut out) {
                t.insert(w, &[i as u32, (i % 3) as u32][..1 + i % 2]);
            }
        }
        let mut first_at: HashMap<&[u8], usize> = HashMap::new();
        for (i, w) in all.iter().enumerate() {
            first_at.entry(w).or_insert(i);
        }
        for w in &all {
            let mut out = Vec::new();
            assert!(t.get(w, &mut out));
            let first = first_at[&w[..]];
            assert_eq!(out, [first as u32, (first % 3) as u32][..1 + first % 2]);
        }
    }

    #[test]
    fn starts_over_when_full() {
        let mut t = IdsTable::default();
        for i in 0..(MAX_ENTRIES as u32 + 10) {
            t.insert(&i.to_le_bytes(), &[i]);
        }
        let mut out = Vec::new();
        let last = MAX_ENTRIES as u32 + 9;
        assert!(t.get(&last.to_le_bytes(), &mut out));
        assert!(!t.get(&0u32.to_le_bytes(), &mut out));
        assert_eq!(out, [last]);
    }
}
