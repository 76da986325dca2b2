//! The merge engine shared by the tokenizer.json BPE model and the sentencepiece BPE segmenter.
//!
//! A word is a doubly linked list of symbols laid over a vector; candidate merges sit in a
//! binary heap keyed by (priority, position), lowest first. Stale heap entries are skipped when
//! popped instead of being removed, so each merge costs O(log n) and a whole word O(n log n),
//! whatever its length (a 1 MB word without spaces stays near-linear).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// "No neighbour" marker for `prev` / `next`.
pub const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
pub struct Symbol {
    /// The id used to look pairs up (and, after a merge, the merged id).
    pub id: u32,
    pub prev: u32,
    pub next: u32,
    /// Length in bytes; 0 marks a symbol absorbed by its left neighbour.
    pub len: u32,
}

/// A word being merged. Kept between calls as scratch space to avoid reallocations.
#[derive(Debug, Default)]
pub struct Word {
    pub symbols: Vec<Symbol>,
    heap: BinaryHeap<Reverse<Entry>>,
    skipped: Vec<Reverse<Entry>>,
    /// `merge_small`: each symbol's candidate with its right neighbour, (rank, merged id).
    cands: Vec<(u32, u32)>,
}

/// A queued candidate: (priority << 32 | position, merged id, byte length of the pair when
/// queued). Ordering on the first field alone decides; the others ride along.
type Entry = (u64, u32, u32);

#[inline]
fn key(rank: u32, pos: u32) -> u64 {
    (u64::from(rank) << 32) | u64::from(pos)
}

impl Word {
    pub fn clear(&mut self) {
        self.symbols.clear();
        self.heap.clear();
        self.skipped.clear();
        self.cands.clear();
    }

    /// Release the memory a very long word left behind in this (thread-local) scratch space.
    pub fn trim(&mut self) {
        const KEEP: usize = 1 << 16;
        if self.symbols.capacity() > KEEP {
            self.symbols = Vec::new();
        }
        if self.heap.capacity() > KEEP {
            self.heap = BinaryHeap::new();
        }
        if self.skipped.capacity() > KEEP {
            self.skipped = Vec::new();
        }
        if self.cands.capacity() > KEEP {
            self.cands = Vec::new();
        }
    }

    pub fn push(&mut self, id: u32, len: u32) {
        let n = self.symbols.len() as u32;
        let prev = match self.symbols.last_mut() {
            Some(last) => {
                last.next = n;
                n - 1
            }
            None => NONE,
        };
        self.symbols.push(Symbol {
            id,
            prev,
            next: NONE,
            len,
        });
    }

    /// Apply merges until none is possible. `lookup(left, right)` gives `(priority, merged_id)`
    /// of the pair, the lowest priority merging first and the leftmost among equals.
    /// `skip()` is asked before each merge and may veto it (BPE dropout); `queued` sees every
    /// candidate in the order it is queued (sentencepiece remembers the split of UNUSED
    /// pieces from the last queued candidate).
    ///
    /// A popped entry is applied when the pair now at its position still maps to the same
    /// merged id: exactly the staleness test of the reference, which matters only when two
    /// vocabulary entries share an id.
    pub fn merge_all<L, S, Q>(&mut self, lookup: L, mut skip: Option<S>, mut queued: Q)
    where
        L: Fn(u32, u32) -> Option<(u32, u32)>,
        S: FnMut() -> bool,
        Q: FnMut(u32, u32, u32),
    {
        self.skipped.clear();
        // Build the initial queue in one go (heapify is linear), reusing the allocation.
        let mut initial = std::mem::take(&mut self.heap).into_vec();
        initial.clear();
        for i in 1..self.symbols.len() {
            let (l, r) = (self.symbols[i - 1], self.symbols[i]);
            if let Some((rank, new_id)) = lookup(l.id, r.id) {
                queued(new_id, l.id, r.id);
                initial.push(Reverse((key(rank, (i - 1) as u32), new_id, l.len + r.len)));
            }
        }
        self.heap = BinaryHeap::from(initial);
        while let Some(top) = self.heap.pop() {
            if let Some(skip) = skip.as_mut() {
                if skip() {
                    self.skipped.push(top);
                    continue;
                }
                // A merge happens (or is found stale): the skipped candidates come back.
                self.heap.extend(self.skipped.drain(..));
            }
            let Reverse((k, new_id, size)) = top;
            let pos = (k & 0xffff_ffff) as usize;
            let Some(&cur) = self.symbols.get(pos) else {
                continue;
            };
            if cur.len == 0 || cur.next == NONE {
                continue;
            }
            let next_pos = cur.next as usize;
            let Some(&right) = self.symbols.get(next_pos) else {
                continue;
            };
            // Symbols only grow, so an unchanged total length means an unchanged pair: valid
            // without a lookup. Otherwise apply the reference's test (same merged id).
            if cur.len + right.len != size {
                match lookup(cur.id, right.id) {
                    Some((_, id)) if id == new_id => {}
                    _ => continue,
                }
            }
            // Merge `right` into `cur`.
            let merged = Symbol {
                id: new_id,
                prev: cur.prev,
                next: right.next,
                len: cur.len + right.len,
            };
            self.symbols[pos] = merged;
            self.symbols[next_pos].len = 0;
            if let Some(after) = self.symbols.get_mut(right.next as usize) {
                after.prev = pos as u32;
            }
            if let Some(&before) = self.symbols.get(merged.prev as usize) {
                if let Some((rank, id)) = lookup(before.id, new_id) {
                    queued(id, before.id, new_id);
                    self.heap.push(Reverse((
                        key(rank, merged.prev),
                        id,
                        before.len + merged.len,
                    )));
                }
            }
            if let Some(&after) = self.symbols.get(merged.next as usize) {
                if let Some((rank, id)) = lookup(new_id, after.id) {
                    queued(id, new_id, after.id);
                    self.heap
                        .push(Reverse((key(rank, pos as u32), id, merged.len + after.len)));
                }
            }
        }
    }

    /// `merge_all` without dropout, by scanning the candidates instead of keeping a heap:
    /// O(n²) but allocation-free and much cheaper for words of a few symbols.
    ///
    /// Same result as `merge_all` when a merged id identifies the concatenation of its two
    /// symbols (sentencepiece: pieces are distinct strings). Then a queued heap entry is
    /// valid exactly while its pair is unchanged, so `merge_all` applies the minimum of
    /// (rank, position) over the current adjacent pairs, which is what the scan picks
    /// (strict `<`, left to right: the leftmost among equal ranks). `queued` sees the same
    /// candidates in the same order.
    pub fn merge_small<L, Q>(&mut self, lookup: L, mut queued: Q)
    where
        L: Fn(u32, u32) -> Option<(u32, u32)>,
        Q: FnMut(u32, u32, u32),
    {
        const NO_RANK: u32 = u32::MAX;
        let mut cand = |l: u32, r: u32| match lookup(l, r) {
            Some((rank, id)) => {
                queued(id, l, r);
                (rank, id)
            }
            None => (NO_RANK, 0),
        };
        self.cands.clear();
        for w in self.symbols.windows(2) {
            self.cands.push(cand(w[0].id, w[1].id));
        }
        self.cands.push((NO_RANK, 0));
        loop {
            // Symbol 0 is never absorbed (merges absorb the right symbol), so the live
            // symbols are the chain from 0.
            let (mut best, mut best_rank) = (NONE, NO_RANK);
            let mut i = 0u32;
            while let (Some(s), Some(&(rank, _))) =
                (self.symbols.get(i as usize), self.cands.get(i as usize))
            {
                if rank < best_rank {
                    best_rank = rank;
                    best = i;
                }
                i = s.next;
            }
            let pos = best as usize;
            let (Some(&cur), Some(&(_, new_id))) = (self.symbols.get(pos), self.cands.get(pos))
            else {
                break;
            };
            let next_pos = cur.next as usize;
            let Some(&right) = self.symbols.get(next_pos) else {
                break;
            };
            let merged = Symbol {
                id: new_id,
                prev: cur.prev,
                next: right.next,
                len: cur.len + right.len,
            };
            self.symbols[pos] = merged;
            self.symbols[next_pos].len = 0;
            if let Some(after) = self.symbols.get_mut(right.next as usize) {
                after.prev = pos as u32;
            }
            if let Some(&before) = self.symbols.get(merged.prev as usize) {
                let c = cand(before.id, new_id);
                if let Some(slot) = self.cands.get_mut(merged.prev as usize) {
                    *slot = c;
                }
            }
            let c = match self.symbols.get(merged.next as usize) {
                Some(&after) => cand(new_id, after.id),
                None => (NO_RANK, 0),
            };
            if let Some(slot) = self.cands.get_mut(pos) {
                *slot = c;
            }
        }
    }

    /// The live symbols in order, with their byte ranges (`(id, start, end)`), offsets being
    /// running sums of the symbol lengths as in the reference.
    pub fn iter(&self) -> impl Iterator<Item = (u32, usize, usize)> + '_ {
        let mut pos = 0usize;
        self.symbols.iter().filter(|s| s.len != 0).map(move |s| {
            let start = pos;
            pos += s.len as usize;
            (s.id, start, pos)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type PairTable = [((u32, u32), (u32, u32))];

    fn run(ids: &[u32], pairs: &PairTable) -> Vec<u32> {
        let mut w = Word::default();
        for &i in ids {
            w.push(i, 1);
        }
        let look = |a: u32, b: u32| pairs.iter().find(|(p, _)| *p == (a, b)).map(|&(_, v)| v);
        w.merge_all(look, None::<fn() -> bool>, |_, _, _| {});
        w.iter().map(|(id, _, _)| id).collect()
    }

    #[test]
    fn lowest_priority_first_then_leftmost() {
        // a=0 b=1 c=2 ab=3 bc=4
        assert_eq!(
            run(&[0, 1, 2], &[((1, 2), (0, 4)), ((0, 1), (1, 3))]),
            [0, 4]
        );
        assert_eq!(
            run(&[0, 1, 2], &[((0, 1), (0, 3)), ((1, 2), (1, 4))]),
            [3, 2]
        );
        // aa=5: "aaaaa" -> aa aa a
        assert_eq!(run(&[0; 5], &[((0, 0), (0, 5))]), [5, 5, 0]);
    }

    #[test]
    fn offsets_are_running_sums() {
        let mut w = Word::default();
        w.push(0, 1);
        w.push(1, 2);
        w.push(2, 3);
        w.merge_all(
            |a, b| ((a, b) == (1, 2)).then_some((0, 9)),
            None::<fn() -> bool>,
            |_, _, _| {},
        );
        let v: Vec<_> = w.iter().collect();
        assert_eq!(v, [(0, 0, 1), (9, 1, 6)]);
    }

    #[test]
    fn small_merge_matches_heap_merge() {
        // Random words over 4 symbols with a random pair table whose merged ids identify the
        // pair (id = 4 + 16 * ... fresh per pair), ranks with many ties.
        let mut x = 0x1234_5678_9ABC_DEF1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            let n = (next() % 14) as usize + 1;
            let ids: Vec<u32> = (0..n).map(|_| (next() % 3) as u32).collect();
            let ranks: Vec<u32> = (0..64).map(|_| (next() % 5) as u32).collect();
            let present = next();
            // A pair (a, b) merges into 100 + a * 1000 + b (distinct per pair) when its bit
            // in `present` is set; a, b < 1000 for the ids that occur here.
            let look = |a: u32, b: u32| {
                let h = (a.wrapping_mul(31) ^ b.wrapping_mul(17)) % 64;
                ((present >> h) & 1 == 1 && a < 1000 && b < 1000)
                    .then(|| (ranks[h as usize], 100 + a * 1000 + b))
            };
            let (mut w1, mut w2) = (Word::default(), Word::default());
            for (k, &i) in ids.iter().enumerate() {
                w1.push(i, 1 + k as u32 % 2);
                w2.push(i, 1 + k as u32 % 2);
            }
            let (mut q1, mut q2) = (Vec::new(), Vec::new());
            w1.merge_all(look, None::<fn() -> bool>, |n, l, r| q1.push((n, l, r)));
            w2.merge_small(look, |n, l, r| q2.push((n, l, r)));
            assert_eq!(w1.iter().collect::<Vec<_>>(), w2.iter().collect::<Vec<_>>());
            assert_eq!(q1, q2);
        }
    }

    #[test]
    fn long_word_is_fast() {
        let n = 200_000;
        let mut w = Word::default();
        for _ in 0..n {
            w.push(0, 1);
        }
        // 0+0 -> 1, 1+1 -> 2: "aaaa" tokens.
        w.merge_all(
            |a, b| match (a, b) {
                (0, 0) => Some((0, 1)),
                (1, 1) => Some((1, 2)),
                _ => None,
            },
            None::<fn() -> bool>,
            |_, _, _| {},
        );
        assert_eq!(w.iter().count(), n / 4);
        assert!(w.iter().all(|(id, s, e)| id == 2 && e - s == 4));
    }
}
