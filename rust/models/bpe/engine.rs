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
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    skipped: Vec<Reverse<(u64, u32)>>,
}

#[inline]
fn key(rank: u32, pos: u32) -> u64 {
    (u64::from(rank) << 32) | u64::from(pos)
}

impl Word {
    pub fn clear(&mut self) {
        self.symbols.clear();
        self.heap.clear();
        self.skipped.clear();
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
        self.heap.clear();
        self.skipped.clear();
        for i in 1..self.symbols.len() {
            let (a, b) = (self.symbols[i - 1].id, self.symbols[i].id);
            if let Some((rank, new_id)) = lookup(a, b) {
                queued(new_id, a, b);
                self.heap.push(Reverse((key(rank, (i - 1) as u32), new_id)));
            }
        }
        while let Some(top) = self.heap.pop() {
            if let Some(skip) = skip.as_mut() {
                if skip() {
                    self.skipped.push(top);
                    continue;
                }
                // A merge happens (or is found stale): the skipped candidates come back.
                self.heap.extend(self.skipped.drain(..));
            }
            let Reverse((k, new_id)) = top;
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
            match lookup(cur.id, right.id) {
                Some((_, id)) if id == new_id => {}
                _ => continue,
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
                    self.heap.push(Reverse((key(rank, merged.prev), id)));
                }
            }
            if let Some(&after) = self.symbols.get(merged.next as usize) {
                if let Some((rank, id)) = lookup(new_id, after.id) {
                    queued(id, new_id, after.id);
                    self.heap.push(Reverse((key(rank, pos as u32), id)));
                }
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
