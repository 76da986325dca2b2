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
    /// Number of ids, stored at `ids[off..off + n]`.
    n: u8,
    off: u32,
}

pub struct IdsTable {
    slots: Vec<Slot>,
    ids: Vec<u32>,
    entries: usize,
}

#[inline]
fn key(word: &[u8]) -> (u64, u64) {
    let mut buf = [0u8; MAX_WORD];
    buf[..word.len()].copy_from_slice(word);
    let (a, b) = buf.split_at(8);
    let k0 = u64::from_le_bytes(a.try_into().unwrap_or_default());
    let k1 = u64::from_le_bytes(b.try_into().unwrap_or_default());
    (k0, k1)
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
            *s = Slot {
                k0,
                k1,
                len: word.len() as u8,
                n: ids.len() as u8,
                off: self.ids.len() as u32,
            };
            self.ids.extend_from_slice(ids);
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
