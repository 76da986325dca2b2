//! The merge engine shared by the tokenizer.json BPE model and the sentencepiece BPE segmenter.
//!
//! A word is a doubly linked list of symbols laid over a vector; candidate merges sit in a
//! binary heap keyed by (priority, position), lowest first. Stale heap entries are skipped when
//! popped instead of being removed, so each merge costs O(log n) and a whole word O(n log n),
//! whatever its length (a 1 MB word without spaces stays near-linear).

use ahash::AHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

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
    /// The queue for long words.
    ranks: RankQueue,
    /// Scratch space of the backtracking encoder (long words).
    pub bt: super::backtrack::State,
}

/// Words with at least this many symbols queue their candidates by rank.
const RANK_QUEUE_MIN: usize = 4096;

/// Where `merge_all` keeps its candidates: popped smallest `Entry` first (the whole tuple
/// decides, as in the heap).
trait CandidateQueue {
    fn push(&mut self, e: Entry);
    fn pop(&mut self) -> Option<Entry>;
}

impl CandidateQueue for BinaryHeap<Reverse<Entry>> {
    fn push(&mut self, e: Entry) {
        BinaryHeap::push(self, Reverse(e));
    }
    fn pop(&mut self) -> Option<Entry> {
        BinaryHeap::pop(self).map(|Reverse(e)| e)
    }
}

/// The candidates of one rank, (position, merged id, size): a run kept in order by appending,
/// and a heap for those that arrive out of order.
#[derive(Debug, Default)]
struct Bucket {
    run: VecDeque<(u32, u32, u32)>,
    rest: BinaryHeap<Reverse<(u32, u32, u32)>>,
    /// Whether its rank is in `RankQueue::ranks`.
    listed: bool,
}

/// Candidates grouped by rank; the smallest rank with candidates is found in a small heap of
/// ranks, and within a rank the smaller of the run's front and the heap's top is next.
#[derive(Debug, Default)]
struct RankQueue {
    index: AHashMap<u32, usize>,
    buckets: Vec<Bucket>,
    used: usize,
    ranks: BinaryHeap<Reverse<u32>>,
}

impl RankQueue {
    fn clear(&mut self) {
        for b in self.buckets.iter_mut().take(self.used) {
            b.run.clear();
            b.rest.clear();
            b.listed = false;
        }
        self.index.clear();
        self.used = 0;
        self.ranks.clear();
        if self.buckets.len() > 1 << 16 {
            self.buckets = Vec::new();
        }
    }
}

impl CandidateQueue for RankQueue {
    fn push(&mut self, (k, id, size): Entry) {
        let rank = (k >> 32) as u32;
        let e = ((k & 0xffff_ffff) as u32, id, size);
        let bi = match self.index.get(&rank) {
            Some(&bi) => bi,
            None => {
                if self.used == self.buckets.len() {
                    self.buckets.push(Bucket::default());
                }
                self.used += 1;
                self.index.insert(rank, self.used - 1);
                self.used - 1
            }
        };
        let Some(b) = self.buckets.get_mut(bi) else {
            return;
        };
        if b.run.back().is_none_or(|&last| e >= last) {
            b.run.push_back(e);
        } else {
            b.rest.push(Reverse(e));
        }
        if !b.listed {
            b.listed = true;
            self.ranks.push(Reverse(rank));
        }
    }

    fn pop(&mut self) -> Option<Entry> {
        let &Reverse(rank) = self.ranks.peek()?;
        let b = self
            .index
            .get(&rank)
            .and_then(|&bi| self.buckets.get_mut(bi))?;
        let from_run = match (b.run.front(), b.rest.peek()) {
            (Some(a), Some(Reverse(h))) => a <= h,
            (a, _) => a.is_some(),
        };
        let e = if from_run {
            b.run.pop_front()
        } else {
            b.rest.pop().map(|Reverse(e)| e)
        };
        if b.run.is_empty() && b.rest.is_empty() {
            b.listed = false;
            self.ranks.pop();
        }
        e.map(|(pos, id, size)| (key(rank, pos), id, size))
    }
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
        self.bt.trim();
    }

    /// Merge `right` (at `next_pos`) into `cur` (at `pos`) as `new_id`, relinking the list.
    fn absorb(
        &mut self,
        pos: usize,
        cur: Symbol,
        right: Symbol,
        next_pos: usize,
        new_id: u32,
    ) -> Symbol {
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
        merged
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
    pub fn merge_all<L, S, Q>(&mut self, lookup: L, skip: Option<S>, queued: Q)
    where
        L: Fn(u32, u32) -> Option<(u32, u32)>,
        S: FnMut() -> bool,
        Q: FnMut(u32, u32, u32),
    {
        let by_rank = skip.is_none() && self.symbols.len() >= RANK_QUEUE_MIN;
        self.merge_with(lookup, skip, queued, by_rank);
    }

    fn merge_with<L, S, Q>(&mut self, lookup: L, skip: Option<S>, mut queued: Q, by_rank: bool)
    where
        L: Fn(u32, u32) -> Option<(u32, u32)>,
        S: FnMut() -> bool,
        Q: FnMut(u32, u32, u32),
    {
        self.skipped.clear();
        // The initial candidates, in position order.
        let mut initial = std::mem::take(&mut self.heap).into_vec();
        initial.clear();
        for i in 1..self.symbols.len() {
            let (l, r) = (self.symbols[i - 1], self.symbols[i]);
            if let Some((rank, new_id)) = lookup(l.id, r.id) {
                queued(new_id, l.id, r.id);
                initial.push(Reverse((key(rank, (i - 1) as u32), new_id, l.len + r.len)));
            }
        }
        if by_rank && skip.is_none() {
            // A long word: candidates of one rank mostly arrive left to right, so per-rank
            // runs avoid a cache miss per level of a huge heap.
            let mut q = std::mem::take(&mut self.ranks);
            q.clear();
            for Reverse(e) in initial.drain(..) {
                q.push(e);
            }
            self.heap = BinaryHeap::from(initial);
            self.run(&mut q, lookup, skip, queued);
            // Keep the buckets for the next long word, unless one grew very large.
            const KEEP: usize = 1 << 16;
            if !q
                .buckets
                .iter()
                .any(|b| b.run.capacity() > KEEP || b.rest.capacity() > KEEP)
            {
                self.ranks = q;
            }
        } else {
            // Heapify is linear, and reuses the allocation.
            let mut q = BinaryHeap::from(initial);
            self.run(&mut q, lookup, skip, queued);
            self.heap = q;
        }
    }

    fn run<C, L, S, Q>(&mut self, q: &mut C, lookup: L, mut skip: Option<S>, mut queued: Q)
    where
        C: CandidateQueue,
        L: Fn(u32, u32) -> Option<(u32, u32)>,
        S: FnMut() -> bool,
        Q: FnMut(u32, u32, u32),
    {
        while let Some(top) = q.pop() {
            if let Some(skip) = skip.as_mut() {
                if skip() {
                    self.skipped.push(Reverse(top));
                    continue;
                }
                // A merge happens (or is found stale): the skipped candidates come back.
                for Reverse(e) in self.skipped.drain(..) {
                    q.push(e);
                }
            }
            let (k, new_id, size) = top;
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
            let merged = self.absorb(pos, cur, right, next_pos, new_id);
            if let Some(&before) = self.symbols.get(merged.prev as usize) {
                if let Some((rank, id)) = lookup(before.id, new_id) {
                    queued(id, before.id, new_id);
                    q.push((key(rank, merged.prev), id, before.len + merged.len));
                }
            }
            if let Some(&after) = self.symbols.get(merged.next as usize) {
                if let Some((rank, id)) = lookup(new_id, after.id) {
                    queued(id, new_id, after.id);
                    q.push((key(rank, pos as u32), id, merged.len + after.len));
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
            let merged = self.absorb(pos, cur, right, next_pos, new_id);
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
        let mut next = crate::test_rng(0x1234_5678_9ABC_DEF1u64);
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

    #[test]
    fn rank_queue_gives_the_heap_order() {
        // Random long words over a few symbols, random pair tables with repeated ranks and
        // merged ids shared by several pairs: both queues must merge alike, queueing alike.
        let mut rng = crate::test_rng(0x9E37_79B9_7F4A_7C15u64);
        let mut next = move |m: u64| rng() % m;
        for round in 0..40 {
            let syms = 2 + next(5) as u32;
            let ids = syms + 12;
            let mut table = std::collections::HashMap::new();
            for a in 0..ids {
                for b in 0..ids {
                    if next(3) == 0 {
                        table.insert((a, b), (next(8) as u32, syms + next(12) as u32));
                    }
                }
            }
            let n = if round % 2 == 0 { 5000 } else { 300 };
            let word: Vec<(u32, u32)> = (0..n)
                .map(|_| (next(syms as u64) as u32, 1 + next(3) as u32))
                .collect();
            let look = |a: u32, b: u32| table.get(&(a, b)).copied();
            let mut outs = Vec::new();
            for by_rank in [false, true] {
                let mut w = Word::default();
                for &(id, len) in &word {
                    w.push(id, len);
                }
                let mut q = Vec::new();
                w.merge_with(
                    look,
                    None::<fn() -> bool>,
                    |x, l, r| q.push((x, l, r)),
                    by_rank,
                );
                outs.push((w.iter().collect::<Vec<_>>(), q));
            }
            assert_eq!(outs[0], outs[1], "round {round}");
        }
    }
}
