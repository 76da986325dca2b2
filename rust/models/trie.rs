//! A static byte trie for prefix search over a vocabulary, shared by WordPiece (longest match),
//! both Unigram segmenters (every piece that starts at a position) and the SentencePiece
//! normalizer (user-defined pieces).
//!
//! Layout: a double array. Every node is one 12-byte unit (base, check, value); the child of
//! node `n` by byte `b` sits at `base(n) + b` and is genuine when its `check` is `n`. A search
//! step is therefore one load and one compare, whatever the branching (the wide node after `▁`
//! in a SentencePiece vocabulary costs the same as a chain), and the value of the node reached
//! comes in the same load. Searching allocates nothing. The array is padded with 256 free units
//! so `base + b` never leaves it.

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Unit {
    /// Children of this node are at `base + byte`.
    base: u32,
    /// The parent's index (`NONE` for free units and the root, so no lookup matches them).
    check: u32,
    /// The value stored at this node (a key ends here), or `NONE`.
    value: u32,
}

const FREE: Unit = Unit {
    base: 0,
    check: NONE,
    value: NONE,
};

/// An immutable byte trie mapping keys to `u32` values.
#[derive(Clone, Debug)]
pub struct Trie {
    units: Box<[Unit]>,
}

/// Collects keys, then builds a [`Trie`]. Inserting a key twice keeps the last value.
#[derive(Default)]
pub struct TrieBuilder {
    keys: Vec<(Vec<u8>, u32)>,
}

impl TrieBuilder {
    pub fn new() -> Self {
        TrieBuilder::default()
    }

    pub fn insert(&mut self, key: &[u8], value: u32) {
        self.keys.push((key.to_vec(), value));
    }

    pub fn build(self) -> Trie {
        Trie::build(self.keys.iter().map(|(k, v)| (k.as_slice(), *v)).collect())
    }
}

impl Default for Trie {
    fn default() -> Self {
        Trie::build(Vec::new())
    }
}

/// Placement state while building: which units are taken, and a list of free units to try
/// as the first child's slot. A free unit that fails too often as a candidate is dropped from
/// the list (left unused), which bounds the build at O(units × MAX_TRIES + edges).
struct Placer {
    units: Vec<Unit>,
    used: Vec<bool>,
    /// Free candidate positions, in increasing order, with their failure counts.
    free: std::collections::VecDeque<(u32, u8)>,
}

const MAX_TRIES: u8 = 16;

impl Placer {
    fn grow(&mut self, to: usize) {
        while self.units.len() < to {
            let i = self.units.len() as u32;
            self.units.push(FREE);
            self.used.push(false);
            self.free.push_back((i, 0));
        }
    }

    /// A base such that `base + l` is free for every label in `labels` (sorted, non-empty).
    fn place(&mut self, labels: &[u8]) -> u32 {
        let first = labels[0] as usize;
        let mut k = 0;
        loop {
            if k >= self.free.len() {
                let len = self.units.len();
                self.grow(len + 256);
                continue;
            }
            let (pos, _) = self.free[k];
            let pos = pos as usize;
            if self.used[pos] {
                self.free.remove(k);
                continue;
            }
            if pos >= first {
                let base = pos - first;
                let top = base + *labels.last().unwrap_or(&0) as usize;
                if top >= self.units.len() {
                    self.grow(top + 1);
                }
                if labels.iter().all(|&l| !self.used[base + l as usize]) {
                    return base as u32;
                }
            }
            let tries = &mut self.free[k].1;
            *tries += 1;
            if *tries >= MAX_TRIES {
                self.free.remove(k);
            } else {
                k += 1;
            }
        }
    }
}

impl Trie {
    /// Build from (key, value) pairs; a repeated key keeps its last value.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], u32)>) -> Trie {
        Trie::build(pairs.into_iter().collect())
    }

    /// Sort (key, value) pairs by key, a repeated key keeping its last value (as `build`).
    pub fn sort_keep_last(entries: &mut Vec<(&[u8], u32)>) {
        // Stable sort: equal keys keep their input order, so the last one is kept below.
        // Already sorted (as `build` gets them from a caller that sorted): no sort.
        if !entries.windows(2).all(|w| w[0].0 <= w[1].0) {
            // By the first eight bytes as one big-endian integer (zero-padded) first: where
            // two keys differ there, the first differing byte decides both orders (a padding
            // zero only stands where the shorter key, equal so far, has ended, which puts
            // it first in both), so the order is the slices' own, for one integer compare
            // instead of a `memcmp` call on most comparisons.
            let head = |k: &[u8]| {
                let mut b = [0u8; 8];
                let n = k.len().min(8);
                b[..n].copy_from_slice(&k[..n]);
                u64::from_be_bytes(b)
            };
            // The stable order is the order by (key, position): sort (head, position) pairs
            // without a comparison callback, then put each run of equal heads (rare: keys
            // sharing their first eight bytes, or differing only in trailing zero bytes and
            // length) in that order by the whole keys.
            let mut keyed: Vec<(u64, u32)> = entries
                .iter()
                .enumerate()
                .map(|(i, &(k, _))| (head(k), i as u32))
                .collect();
            keyed.sort_unstable();
            let key = |i: u32| entries.get(i as usize).map_or(&[][..], |e| e.0);
            let mut from = 0;
            while from < keyed.len() {
                let h = keyed[from].0;
                let mut to = from + 1;
                while to < keyed.len() && keyed[to].0 == h {
                    to += 1;
                }
                if to - from > 1 {
                    keyed[from..to]
                        .sort_unstable_by(|a, b| key(a.1).cmp(key(b.1)).then(a.1.cmp(&b.1)));
                }
                from = to;
            }
            let sorted: Vec<(&[u8], u32)> = keyed
                .iter()
                .filter_map(|&(_, i)| entries.get(i as usize).copied())
                .collect();
            *entries = sorted;
        }
        entries.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
    }

    /// Build from (key, value) pairs; a repeated key keeps its last value.
    pub fn build(mut entries: Vec<(&[u8], u32)>) -> Trie {
        Trie::sort_keep_last(&mut entries);
        let mut p = Placer {
            units: Vec::new(),
            used: Vec::new(),
            free: Default::default(),
        };
        p.grow(1);
        p.used[0] = true;
        // Depth first over (node, depth, range of sorted keys sharing the node's prefix), so
        // a node's children are placed right after it (locality for the walk).
        let mut stack = vec![(0usize, 0usize, 0usize, entries.len())];
        let mut labels: Vec<u8> = Vec::new();
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        while let Some((node, depth, mut lo, hi)) = stack.pop() {
            if lo < hi && entries[lo].0.len() == depth {
                p.units[node].value = entries[lo].1;
                lo += 1;
            }
            labels.clear();
            ranges.clear();
            let mut i = lo;
            while i < hi {
                let b = entries[i].0[depth];
                let mut j = i + 1;
                while j < hi && entries[j].0[depth] == b {
                    j += 1;
                }
                labels.push(b);
                ranges.push((i, j));
                i = j;
            }
            if labels.is_empty() {
                continue;
            }
            let base = p.place(&labels);
            p.units[node].base = base;
            for (&l, &(i, j)) in labels.iter().zip(&ranges).rev() {
                let c = base as usize + l as usize;
                p.used[c] = true;
                p.units[c].check = node as u32;
                stack.push((c, depth + 1, i, j));
            }
        }
        // Padding: every `base + byte` of a placed node stays inside the array.
        let len = p.units.len();
        p.units.resize(len + 256, FREE);
        Trie {
            units: p.units.into_boxed_slice(),
        }
    }

    /// The root's `(node, base)`, where a walk by [`Trie::child`] starts.
    #[inline(always)]
    pub(crate) fn root(&self) -> (u32, u32) {
        (0, self.units.first().map_or(0, |u| u.base))
    }

    /// The child of `node` (whose base is `base`) by `b`: its `(node, base, value)`, the value
    /// `u32::MAX` when no key ends there. A walk for callers that keep the loop themselves.
    #[inline(always)]
    pub(crate) fn child(&self, node: u32, base: u32, b: u8) -> Option<(u32, u32, u32)> {
        let (n, u) = self.step(node, base, b)?;
        Some((n, u.base, u.value))
    }

    /// The node reached from `node` by `b`, with its unit.
    #[inline(always)]
    fn step(&self, node: u32, base: u32, b: u8) -> Option<(u32, Unit)> {
        let next = base as usize + b as usize;
        let u = *self.units.get(next)?;
        (u.check == node).then_some((next as u32, u))
    }

    /// The value of `key`, if it was inserted.
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let mut u = *self.units.first()?;
        let mut node = 0u32;
        for &b in key {
            (node, u) = self.step(node, u.base, b)?;
        }
        (u.value != NONE).then_some(u.value)
    }

    /// Call `f(len, value)` for every non-empty key that is a prefix of `text`, shortest
    /// first.
    #[inline]
    pub fn for_each_prefix(&self, text: &[u8], mut f: impl FnMut(usize, u32)) {
        let Some(root) = self.units.first() else {
            return;
        };
        let mut base = root.base;
        let mut node = 0u32;
        for (i, &b) in text.iter().enumerate() {
            let Some((n, u)) = self.step(node, base, b) else {
                return;
            };
            if u.value != NONE {
                f(i + 1, u.value);
            }
            node = n;
            base = u.base;
        }
    }

    /// Every non-empty key that is a prefix of `text`, shortest first, as (byte length, value).
    pub fn common_prefixes<'a>(&'a self, text: &'a [u8]) -> CommonPrefixes<'a> {
        CommonPrefixes {
            trie: self,
            text,
            pos: 0,
            node: 0,
            base: self.units.first().map_or(0, |u| u.base),
        }
    }

    /// The longest non-empty key that is a prefix of `text`, as (byte length, value).
    #[inline]
    pub fn longest_prefix(&self, text: &[u8]) -> Option<(usize, u32)> {
        let mut best = None;
        self.for_each_prefix(text, |l, v| best = Some((l, v)));
        best
    }

    /// For keys starting with byte `b`: whether `[b]` itself is a key, and whether a longer
    /// key starts with `b`.
    pub fn keys_starting_with(&self, b: u8) -> (bool, bool) {
        let Some(root) = self.units.first() else {
            return (false, false);
        };
        let Some((n, u)) = self.step(0, root.base, b) else {
            return (false, false);
        };
        let longer = (0..=255u8).any(|c| self.step(n, u.base, c).is_some());
        (u.value != NONE, longer)
    }

    /// No key at all (not even the empty one).
    pub fn is_empty(&self) -> bool {
        self.units.iter().all(|u| u.value == NONE)
    }
}

/// Iterator of [`Trie::common_prefixes`].
pub struct CommonPrefixes<'a> {
    trie: &'a Trie,
    text: &'a [u8],
    pos: usize,
    node: u32,
    base: u32,
}

impl Iterator for CommonPrefixes<'_> {
    type Item = (usize, u32);

    #[inline]
    fn next(&mut self) -> Option<(usize, u32)> {
        while self.node != NONE {
            let &b = self.text.get(self.pos)?;
            let Some((n, u)) = self.trie.step(self.node, self.base, b) else {
                self.node = NONE;
                return None;
            };
            self.node = n;
            self.base = u.base;
            self.pos += 1;
            if u.value != NONE {
                return Some((self.pos, u.value));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_keep_last_is_a_stable_sort_by_key() {
        // Keys with zero bytes, common prefixes of 8+ bytes and repeats, against a plain
        // stable sort by the slices (the last value of a repeated key kept).
        let mut next = crate::test_rng(0x0050_47ED_2025_1203);
        for _ in 0..300 {
            let keys: Vec<Vec<u8>> = (0..1 + next() % 200)
                .map(|_| {
                    let len = (next() % 14) as usize;
                    let base = [b'a', 0, b'a', b'b', 0xff, b'a', b'a', b'a', b'a', b'a'];
                    (0..len)
                        .map(|i| match next() % 5 {
                            0 => next() as u8 % 3,
                            _ => base[i % base.len()],
                        })
                        .collect()
                })
                .collect();
            let mut got: Vec<(&[u8], u32)> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (&k[..], i as u32))
                .collect();
            let mut want = got.clone();
            Trie::sort_keep_last(&mut got);
            want.sort_by(|a, b| a.0.cmp(b.0));
            want.dedup_by(|later, earlier| {
                let same = later.0 == earlier.0;
                if same {
                    earlier.1 = later.1;
                }
                same
            });
            assert_eq!(got, want);
        }
    }

    fn trie(keys: &[(&str, u32)]) -> Trie {
        Trie::from_pairs(keys.iter().map(|(k, v)| (k.as_bytes(), *v)))
    }

    #[test]
    fn prefixes_shortest_first() {
        let t = trie(&[("a", 1), ("abc", 3), ("ab", 2), ("b", 4), ("abd", 5)]);
        let got: Vec<_> = t.common_prefixes(b"abcd").collect();
        assert_eq!(got, vec![(1, 1), (2, 2), (3, 3)]);
        assert_eq!(t.longest_prefix(b"abde"), Some((3, 5)));
        assert_eq!(t.longest_prefix(b"x"), None);
        assert_eq!(t.longest_prefix(b""), None);
        assert_eq!(t.common_prefixes(b"").count(), 0);
        assert!(!t.is_empty());
        assert!(Trie::default().is_empty());
        assert_eq!(Trie::default().get(b""), None);
        assert_eq!(Trie::default().longest_prefix(b"a"), None);
    }

    #[test]
    fn empty_key_is_never_reported() {
        let t = trie(&[("", 9), ("a", 1)]);
        assert_eq!(t.get(b""), Some(9));
        assert_eq!(t.common_prefixes(b"a").collect::<Vec<_>>(), vec![(1, 1)]);
        assert_eq!(t.longest_prefix(b"b"), None);
    }

    #[test]
    fn repeated_key_keeps_last_value() {
        let t = trie(&[("ab", 1), ("ab", 7), ("ab", 3)]);
        assert_eq!(t.get(b"ab"), Some(3));
        assert_eq!(t.get(b"a"), None);
        let mut b = TrieBuilder::new();
        b.insert(b"x", 1);
        b.insert(b"x", 2);
        assert_eq!(b.build().get(b"x"), Some(2));
    }

    #[test]
    fn wide_nodes_and_byte_zero() {
        // Every byte below a non-root node and at the root, including 0x00 and 0xFF.
        let keys: Vec<Vec<u8>> = (0..=255u8)
            .flat_map(|c| [vec![c], vec![b'x', c], vec![0, c, 0]])
            .collect();
        let t = Trie::from_pairs(keys.iter().enumerate().map(|(i, k)| (&k[..], i as u32)));
        let mut want: std::collections::HashMap<&[u8], u32> = Default::default();
        for (i, k) in keys.iter().enumerate() {
            want.insert(k, i as u32);
        }
        for (k, v) in &want {
            assert_eq!(t.get(k), Some(*v));
        }
        assert_eq!(t.get(&[1, 1]), None);
    }

    #[test]
    fn keys_starting_with_a_byte() {
        let t = trie(&[("a", 1), ("bc", 2), ("d", 3), ("de", 4)]);
        assert_eq!(t.keys_starting_with(b'a'), (true, false));
        assert_eq!(t.keys_starting_with(b'b'), (false, true));
        assert_eq!(t.keys_starting_with(b'd'), (true, true));
        assert_eq!(t.keys_starting_with(b'c'), (false, false));
        assert_eq!(Trie::default().keys_starting_with(b'a'), (false, false));
    }

    #[test]
    fn multibyte_keys() {
        let t = trie(&[("é", 1), ("éa", 2), ("𝔸", 3)]);
        assert_eq!(t.longest_prefix("éab".as_bytes()), Some((3, 2)));
        assert_eq!(t.longest_prefix("𝔸".as_bytes()), Some((4, 3)));
        // A prefix of a multi-byte character's encoding is not a key.
        assert_eq!(t.longest_prefix(&"𝔸".as_bytes()[..2]), None);
    }

    #[test]
    fn agrees_with_a_naive_search() {
        let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
        for alphabet in [3u64, 20, 200] {
            // Short keys over a small alphabet overlap heavily; a large one makes wide nodes.
            let keys: Vec<Vec<u8>> = (0..3000)
                .map(|_| {
                    (0..(next() % 6 + 1))
                        .map(|_| (next() % alphabet) as u8 + 1)
                        .collect()
                })
                .collect();
            let mut want: std::collections::BTreeMap<Vec<u8>, u32> = Default::default();
            for (i, k) in keys.iter().enumerate() {
                want.insert(k.clone(), i as u32);
            }
            let t = Trie::from_pairs(keys.iter().enumerate().map(|(i, k)| (&k[..], i as u32)));
            for _ in 0..3000 {
                let q: Vec<u8> = (0..(next() % 8))
                    .map(|_| (next() % (alphabet + 1)) as u8)
                    .collect();
                let got: Vec<_> = t.common_prefixes(&q).collect();
                let mut got2 = vec![];
                t.for_each_prefix(&q, |l, v| got2.push((l, v)));
                let naive: Vec<(usize, u32)> = (1..=q.len())
                    .filter_map(|l| want.get(&q[..l]).map(|&v| (l, v)))
                    .collect();
                assert_eq!(got, naive);
                assert_eq!(got2, naive);
                assert_eq!(t.longest_prefix(&q), naive.last().copied());
                assert_eq!(t.get(&q), want.get(&q).copied());
            }
        }
    }
}
