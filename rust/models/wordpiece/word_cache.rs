//! A per-thread cache of short words → WordPiece ids.
//!
//! Exact because WordPiece splits each word on its own: the ids of a word depend only on its
//! bytes and the model, and a cache belongs to one model (keyed by its `uid`). Words of up to
//! 16 bytes are keys held inline as two zero-padded integers plus the length, so a lookup is
//! one multiply-shift hash and integer compares, and a hit copies at most `MAX_IDS` ids kept
//! in the slot itself (16 bits each, or half as many of 32 bits) (one 32-byte slot, half a cache line). The table is 4-way set
//! associative: a word lives in one of the 4 slots of its bucket (128 bytes), and a new word
//! in a full bucket replaces one of them. So the frequent words stay (a rare word evicts one
//! word, where starting the table over would evict all of them) and a lookup reads two
//! cache lines at most.

/// Longest cached word, in bytes.
pub(crate) const MAX_WORD: usize = 16;
/// Most ids a cached word may have: six when they all fit 16 bits (any vocabulary of up to
/// 65536 entries), else three.
const MAX_IDS: usize = 6;
/// Most ids of a word whose ids need 32 bits.
const MAX_WIDE_IDS: usize = 3;
/// Set in `Slot::n` when the ids are stored as pairs of 16-bit halves.
const WIDE: u8 = 0x80;
const SLOTS: usize = 1 << 14;
/// Slots per bucket.
const WAYS: usize = 4;
/// Models whose caches a thread keeps at once.
const MODELS: usize = 4;

/// A word of 1..=`MAX_WORD` bytes: its bytes little-endian in two integers, zero-padded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct WordKey {
    k0: u64,
    k1: u64,
    len: u8,
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// ASCII lowercase of eight bytes at once: the bytes from `A` to `Z` get bit 5 set (exactly
/// `u8::to_ascii_lowercase` on each byte). Each byte's low seven bits plus a constant stay
/// below 256, so no carry crosses into the next byte.
#[inline]
fn ascii_lower(x: u64) -> u64 {
    let low7 = x & (0x7f * ONES);
    let ge_a = low7 + (0x80 - u64::from(b'A')) * ONES;
    let gt_z = low7 + (0x80 - u64::from(b'Z') - 1) * ONES;
    let upper = ge_a & !gt_z & !x & (0x80 * ONES);
    x | (upper >> 2)
}

/// Eight bytes of `s` from `at`, little-endian.
#[inline]
fn load8(s: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(s.get(at..at + 8)?.try_into().ok()?))
}

/// The mask of the low `n` bytes of a `u64`, `n` in 1..=8.
#[inline]
fn low_bytes(n: usize) -> u64 {
    u64::MAX >> (64 - 8 * n.clamp(1, 8))
}

/// Four bytes of `s` from `at`, little-endian.
#[inline]
fn load4(s: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(s.get(at..at + 4)?.try_into().ok()?))
}

impl WordKey {
    /// The key of `word`, if it has 1..=`MAX_WORD` bytes.
    ///
    /// Built from two overlapping loads (no variable-length copy, which costs a call and a
    /// store-forwarding stall): the bytes both loads cover are the same bytes of `word` at the
    /// same positions, so OR-ing the loads gives the word exactly.
    #[inline]
    pub(crate) fn of(word: &[u8]) -> Option<WordKey> {
        let len = word.len();
        let (k0, k1) = match len {
            9..=MAX_WORD => (load8(word, 0)?, load8(word, len - 8)? >> (8 * (16 - len))),
            8 => (load8(word, 0)?, 0),
            4..=7 => {
                let lo = u64::from(load4(word, 0)?);
                let hi = u64::from(load4(word, len - 4)?);
                (lo | hi << (8 * (len - 4)), 0)
            }
            1..=3 => {
                let b = |i: usize| word.get(i).map_or(0, |&b| u64::from(b));
                (b(0) | b(1) << 8 | b(2) << 16, 0)
            }
            _ => return None,
        };
        Some(WordKey {
            k0,
            k1,
            len: len as u8,
        })
    }

    /// The key of `text[start..end]` (1..=`MAX_WORD` bytes), ASCII-lowercased when asked.
    /// Reads whole 8-byte blocks when the text has them and masks off the bytes past the word
    /// (one load for a word of up to 8 bytes, most words of prose and code); near the end of
    /// the text it takes the word's own bytes.
    #[inline]
    pub(crate) fn in_text(text: &[u8], start: usize, end: usize, lower: bool) -> Option<WordKey> {
        let len = end.checked_sub(start)?;
        if len == 0 || len > MAX_WORD {
            return None;
        }
        let loaded = if len <= 8 {
            load8(text, start).map(|k0| (k0 & low_bytes(len), 0))
        } else {
            load8(text, start)
                .zip(load8(text, start + 8))
                .map(|(k0, k1)| (k0, k1 & low_bytes(len - 8)))
        };
        let (k0, k1) = match loaded {
            Some(k) => k,
            None => {
                let k = WordKey::of(text.get(start..end)?)?;
                (k.k0, k.k1)
            }
        };
        let (k0, k1) = if lower {
            (ascii_lower(k0), ascii_lower(k1))
        } else {
            (k0, k1)
        };
        Some(WordKey {
            k0,
            k1,
            len: len as u8,
        })
    }

    #[cfg(test)]
    fn from_buf(buf: [u8; MAX_WORD], len: usize) -> Option<WordKey> {
        if len == 0 || len > MAX_WORD {
            return None;
        }
        let v = u128::from_le_bytes(buf);
        let v = if len == MAX_WORD {
            v
        } else {
            v & ((1u128 << (8 * len)) - 1)
        };
        Some(WordKey {
            k0: v as u64,
            k1: (v >> 64) as u64,
            len: len as u8,
        })
    }

    /// The word's bytes: `buf[..len]`.
    #[inline]
    pub(crate) fn bytes(&self) -> ([u8; MAX_WORD], usize) {
        let v = u128::from(self.k0) | (u128::from(self.k1) << 64);
        (v.to_le_bytes(), usize::from(self.len))
    }

    /// The first slot of the key's bucket among `slots` (a power of two), and which slot of
    /// it a new word replaces.
    #[inline]
    fn bucket(&self, slots: usize) -> (usize, usize) {
        let h = (self.k0 ^ self.k1.rotate_left(29) ^ u64::from(self.len).wrapping_mul(0x9E37_79B9))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (
            (h >> 48) as usize & (slots - WAYS),
            (h >> 40) as usize % WAYS,
        )
    }
}

#[derive(Clone, Copy, Default)]
struct Slot {
    k0: u64,
    k1: u64,
    /// Key length; 0 marks an empty slot (keys are never empty).
    len: u8,
    /// The number of ids, with `WIDE` set when each id takes two entries of `ids` (low half
    /// first).
    n: u8,
    ids: [u16; MAX_IDS],
}

// One slot is half a cache line.
const _: () = assert!(std::mem::size_of::<Slot>() == 32);

pub(crate) struct WordCache {
    /// A power of two of slots, at least `WAYS` and at most 2^16 (the bucket comes from the
    /// hash's top 16 bits).
    slots: Vec<Slot>,
}

impl Default for WordCache {
    fn default() -> Self {
        WordCache::with_slots(SLOTS)
    }
}

impl WordCache {
    /// A cache of `slots` slots (rounded up to a power of two, at least one bucket).
    pub(crate) fn with_slots(slots: usize) -> Self {
        WordCache {
            slots: vec![Slot::default(); slots.clamp(WAYS, 1 << 16).next_power_of_two()],
        }
    }

    /// Append the cached ids of `key` to `out`; false when absent.
    ///
    /// Inlined into the word loops: a hit is most of a word's cost there, and a call would
    /// spill the loop's registers for a few dozen instructions of work.
    #[inline(always)]
    pub(crate) fn get(&self, key: &WordKey, out: &mut Vec<u32>) -> bool {
        let (b, _) = key.bucket(self.slots.len());
        let Some(bucket) = self.slots.get(b..b + WAYS) else {
            return false;
        };
        // The differences OR-ed: one branch per slot instead of three.
        let Some(s) = bucket
            .iter()
            .find(|s| (s.k0 ^ key.k0) | (s.k1 ^ key.k1) | u64::from(s.len ^ key.len) == 0)
        else {
            return false;
        };
        let mut ids = [0u32; MAX_IDS];
        if s.n & WIDE == 0 {
            for (d, &id) in ids.iter_mut().zip(&s.ids) {
                *d = u32::from(id);
            }
        } else {
            for (d, h) in ids.iter_mut().zip(s.ids.chunks_exact(2)) {
                *d = u32::from(h[0]) | u32::from(h[1]) << 16;
            }
        }
        // All `MAX_IDS` go in (a fixed-size copy: a few moves, no call to memcpy), then the
        // ones past the word's `n` ids are cut off again.
        let n = usize::from(s.n & !WIDE).min(MAX_IDS);
        let base = out.len();
        out.extend_from_slice(&ids);
        out.truncate(base + n);
        true
    }

    /// Remember the ids of `key` (not yet present), in a free slot of its bucket or in place
    /// of one of its words; words of more ids than the slot holds are not kept (false).
    #[inline]
    pub(crate) fn insert(&mut self, key: &WordKey, ids: &[u32]) -> bool {
        let mut kept = [0u16; MAX_IDS];
        let n = if ids.len() <= MAX_IDS && ids.iter().all(|&id| id <= u32::from(u16::MAX)) {
            for (d, &id) in kept.iter_mut().zip(ids) {
                *d = id as u16;
            }
            ids.len() as u8
        } else if ids.len() <= MAX_WIDE_IDS {
            for (d, &id) in kept.chunks_exact_mut(2).zip(ids) {
                d[0] = id as u16;
                d[1] = (id >> 16) as u16;
            }
            ids.len() as u8 | WIDE
        } else {
            return false;
        };
        let (b, victim) = key.bucket(self.slots.len());
        let Some(bucket) = self.slots.get_mut(b..b + WAYS) else {
            return false;
        };
        let i = bucket.iter().position(|s| s.len == 0).unwrap_or(victim);
        if let Some(s) = bucket.get_mut(i) {
            *s = Slot {
                k0: key.k0,
                k1: key.k1,
                len: key.len,
                n,
                ids: kept,
            };
        }
        true
    }
}

/// This model's cache among a thread's caches (kept in the thread's scratch space, so lookups
/// take no lock and threads never wait on each other), made when missing; the oldest goes when
/// more than `MODELS` models are in use.
pub(crate) fn cache_for(caches: &mut Vec<(u64, WordCache)>, uid: u64) -> &mut WordCache {
    crate::parallel::model_cache(caches, uid, MODELS, WordCache::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `of` (overlapping loads) against the plain zero-padded copy, every length and offset.
    #[test]
    fn key_of_equals_zero_padded_copy() {
        let mut rng = crate::test_rng(7);
        let text: Vec<u8> = (0..200).map(|_| (rng() % 255 + 1) as u8).collect();
        for start in 0..40 {
            for len in 0..=MAX_WORD + 2 {
                let word = &text[start..start + len];
                let want = (1..=MAX_WORD).contains(&len).then(|| {
                    let mut buf = [0u8; MAX_WORD];
                    buf[..len].copy_from_slice(word);
                    WordKey::from_buf(buf, len).unwrap()
                });
                assert_eq!(WordKey::of(word), want, "{start} {len}");
                if let Some(k) = want {
                    let (b, n) = k.bytes();
                    assert_eq!(&b[..n], word);
                }
            }
        }
    }

    /// Every id list a slot can hold comes back as it went in (16-bit and 32-bit ids, up to
    /// the limits), and longer ones are not kept.
    #[test]
    fn ids_round_trip_narrow_and_wide() {
        let mut rng = crate::test_rng(11);
        let mut t = WordCache::default();
        for i in 0..3000u32 {
            let n = (rng() % 9) as usize;
            let wide = rng() % 3 == 0;
            let ids: Vec<u32> = (0..n)
                .map(|_| {
                    let id = rng() as u32;
                    if wide {
                        id
                    } else {
                        id & 0xFFFF
                    }
                })
                .collect();
            let key = WordKey::of(format!("w{i}").as_bytes()).unwrap();
            t.insert(&key, &ids);
            let mut out = vec![7];
            let fits = n <= MAX_WIDE_IDS || (n <= MAX_IDS && ids.iter().all(|&x| x <= 0xFFFF));
            assert_eq!(t.get(&key, &mut out), fits, "{ids:?}");
            if fits {
                assert_eq!(out[1..], ids[..]);
            } else {
                assert_eq!(out, [7]);
            }
        }
    }

    #[test]
    fn ascii_lower_equals_per_byte_lowercase() {
        for hi in 0..=255u8 {
            for lo in 0..=255u8 {
                let b = [lo, hi, b'A', b'Z', b'@', b'[', b'a', b'z'];
                let want = b.map(|c| c.to_ascii_lowercase());
                assert_eq!(
                    ascii_lower(u64::from_le_bytes(b)).to_le_bytes(),
                    want,
                    "{b:?}"
                );
            }
        }
    }

    #[test]
    fn keys_differ_by_length_and_content() {
        let mut t = WordCache::default();
        let k = |w: &[u8]| WordKey::of(w).unwrap();
        t.insert(&k(b"a"), &[1]);
        t.insert(&k(b"a\0"), &[2, 3]);
        t.insert(&k(b"abcdefghijklmnop"), &[4]);
        t.insert(&k(b"four"), &[1, 2, 3, 4]);
        let mut out = Vec::new();
        assert!(t.get(&k(b"a"), &mut out));
        assert!(t.get(&k(b"a\0"), &mut out));
        assert!(t.get(&k(b"abcdefghijklmnop"), &mut out));
        assert!(!t.get(&k(b"abcdefghijklmnoq"), &mut out));
        assert!(!t.get(&k(b"b"), &mut out));
        assert!(t.get(&k(b"four"), &mut out));
        assert_eq!(out, [1, 2, 3, 4, 1, 2, 3, 4]);
        assert_eq!(WordKey::of(b""), None);
        assert_eq!(WordKey::of(&[b'x'; 17]), None);
    }

    #[test]
    fn key_in_text_equals_key_of_the_word() {
        let text = b"Hello WORLD, abcdefghijklmnopQRS tail";
        for start in 0..text.len() {
            for end in start..=text.len() {
                let word = &text[start..end];
                let lower: Vec<u8> = word.to_ascii_lowercase();
                assert_eq!(WordKey::in_text(text, start, end, false), WordKey::of(word));
                let k = WordKey::in_text(text, start, end, true);
                assert_eq!(k, WordKey::of(&lower));
                if let Some(k) = k {
                    let (buf, len) = k.bytes();
                    assert_eq!(&buf[..len], &lower[..]);
                }
            }
        }
    }

    #[test]
    fn a_full_bucket_keeps_its_other_words() {
        let mut t = WordCache::default();
        let keys: Vec<WordKey> = (0..200_000u32)
            .map(|i| WordKey::of(&i.to_le_bytes()).unwrap())
            .collect();
        for (i, k) in (0u32..).zip(&keys) {
            t.insert(k, &[i]);
        }
        // Every slot is used, each holds the key it says, and the last word is there.
        let mut out = Vec::new();
        let mut hits = 0;
        for (i, k) in (0u32..).zip(&keys) {
            out.clear();
            if t.get(k, &mut out) {
                assert_eq!(out, [i]);
                hits += 1;
            }
        }
        assert_eq!(hits, SLOTS);
        assert!(t.get(keys.last().unwrap(), &mut out));
    }
}
