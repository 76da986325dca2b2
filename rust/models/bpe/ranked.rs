//! The exact BPE merge of a long word with its candidates queued by rank in buckets: one
//! bucket (a linked list) per rank and a two-level bitmap of the non-empty ones, so a merge
//! costs a few array accesses and two pair lookups, whatever the word's length, with no
//! per-model build (the backtracking encoder first walks the whole vocabulary).
//!
//! It fires the candidates in the order of the reference's heap (lowest rank, leftmost first
//! on equal ranks) for models whose merges are *monotone*: every candidate a merge creates
//! ranks after that merge. Then the buckets are emptied in rank order and new candidates only
//! go to later buckets. Within a bucket, order matters only between candidates that overlap
//! (share a symbol) or touch (the pair made by one firing holds a symbol of the other): those
//! form chains, fired from the left end rightwards as the heap does. A candidate created at
//! or before the rank being fired (a non-monotone model: the heap would fire it next) makes
//! the merge give up (`merge` returns false), and the caller takes the heap path. Models whose
//! every reachable token ranks after the two parts of its split (the backtracking encoder's
//! precondition; gpt2, cl100k and codellama meet it) are monotone.
//!
//! Staleness: each symbol holds the rank of its candidate with its right neighbour, and a
//! queued entry is live exactly while its symbol holds its rank. With one string per id a
//! symbol's pair never comes back once changed (symbols only grow), so this is the
//! reference's test (same merged id for the pair now at that position).

/// No neighbour / no candidate / empty bucket.
const NONE: u32 = u32::MAX;
/// Ranks at or past this give up (the bucket heads are a table by rank).
const MAX_RANK: u32 = 1 << 24;

/// Whether a word looks repetitive, by windows spread over it: most bytes equal one of the
/// four before them (one byte repeated, or a short period). Random letters score about 15 %,
/// prose without spaces about a fifth. Only a choice of exact encoder rests on it.
pub fn repetitive(w: &[u8]) -> bool {
    const WINDOWS: usize = 8;
    const WIDTH: usize = 64;
    let (mut same, mut all) = (0usize, 0usize);
    let step = (w.len() / WINDOWS).max(1);
    for k in 0..WINDOWS {
        let Some(win) = w.get(k * step..(k * step + WIDTH).min(w.len())) else {
            break;
        };
        for i in 4..win.len() {
            let b = win[i];
            all += 1;
            same += usize::from(win[i - 4..i].contains(&b));
        }
    }
    2 * same > all
}

/// A symbol of the word, by its index among the initial symbols (the first one it covers).
#[derive(Debug, Clone, Copy)]
struct Sym {
    id: u32,
    prev: u32,
    next: u32,
    /// Rank of the candidate (this, next), NONE if none (or absorbed).
    rank: u32,
    /// The id that candidate makes.
    merged: u32,
}

/// Scratch space of `merge`, kept between calls (per thread). Between calls every bucket is
/// empty and every bit clear.
#[derive(Debug, Default)]
pub struct Ranked {
    syms: Vec<Sym>,
    /// Queued candidates: `symbol | next entry of the bucket << 32`.
    entries: Vec<u64>,
    /// Latest entry of each rank's bucket, NONE when empty.
    head: Vec<u32>,
    /// One bit per rank with a non-empty bucket, and one per non-zero word of `bits`.
    bits: Vec<u64>,
    summary: Vec<u64>,
    /// Direct-mapped memo of `lookup` for the model `owner`: (pair key, rank << 32 | merged
    /// id or `NO_MERGE`), key `EMPTY` when empty. A word asks the same few pairs of base
    /// symbols again and again (random letters: 26² pairs), and one symbol repeated asks one
    /// pair per rank.
    memo: Vec<(u64, u64)>,
    owner: u64,
}

const MEMO_SLOTS: usize = 1 << 13;
const EMPTY: u64 = u64::MAX;
const NO_MERGE: u64 = u64::MAX;

impl Ranked {
    /// Release what a very long word left behind.
    pub fn trim(&mut self) {
        const KEEP: usize = 1 << 16;
        if self.syms.capacity() > KEEP {
            self.syms = Vec::new();
        }
        if self.entries.capacity() > 2 * KEEP {
            self.entries = Vec::new();
        }
    }

    /// Merge the symbols `ids` (fewer than 2^30) by `lookup(left, right) -> (rank, merged
    /// id)`; the result is then read by `tokens`. False when the model is found not monotone
    /// or a rank is out of range.
    /// `model` identifies the model of `lookup` (never 0), for the memo.
    pub fn merge<L>(&mut self, ids: impl Iterator<Item = u32>, model: u64, lookup: L) -> bool
    where
        L: Fn(u32, u32) -> Option<(u32, u32)>,
    {
        if self.owner != model || self.memo.len() != MEMO_SLOTS {
            self.memo.clear();
            self.memo.resize(MEMO_SLOTS, (EMPTY, 0));
            self.owner = model;
        }
        if self.run(ids, &lookup).is_some() {
            return true;
        }
        self.reset();
        self.syms.clear();
        false
    }

    /// The final symbols of the last `merge`, in order: (id, first, end), the range of initial
    /// symbols each covers.
    pub fn tokens(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        let n = self.syms.len() as u32;
        let mut i = if n == 0 { NONE } else { 0 };
        std::iter::from_fn(move || {
            let s = self.syms.get(i as usize)?;
            let first = i;
            i = s.next;
            Some((s.id, first, if s.next == NONE { n } else { s.next }))
        })
    }

    /// Empty every bucket after giving up half way.
    fn reset(&mut self) {
        self.head.fill(NONE);
        self.bits.fill(0);
        self.summary.fill(0);
        self.entries.clear();
    }

    /// `lookup` through the memo.
    #[inline(always)]
    fn look<L>(&mut self, lookup: &L, a: u32, b: u32) -> Option<(u32, u32)>
    where
        L: Fn(u32, u32) -> Option<(u32, u32)>,
    {
        let key = (u64::from(a) << 32) | u64::from(b);
        let at = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 51) as usize;
        let unpack = |v: u64| (v != NO_MERGE).then_some(((v >> 32) as u32, v as u32));
        match self.memo.get(at) {
            Some(&(k, v)) if k == key && key != EMPTY => unpack(v),
            _ => {
                let c = lookup(a, b);
                if let Some(slot) = self.memo.get_mut(at) {
                    let v = c.map_or(NO_MERGE, |(r, m)| (u64::from(r) << 32) | u64::from(m));
                    *slot = (key, v);
                }
                c
            }
        }
    }

    fn run<L>(&mut self, ids: impl Iterator<Item = u32>, lookup: &L) -> Option<()>
    where
        L: Fn(u32, u32) -> Option<(u32, u32)>,
    {
        self.syms.clear();
        self.entries.clear();
        for (i, id) in ids.enumerate() {
            let i = u32::try_from(i).ok().filter(|&i| i < 1 << 30)?;
            self.syms.push(Sym {
                id,
                prev: i.wrapping_sub(1),
                next: i + 1,
                rank: NONE,
                merged: 0,
            });
        }
        let n = self.syms.len();
        let Some(last) = self.syms.last_mut() else {
            return Some(());
        };
        last.next = NONE;
        for i in 1..n {
            let (Some(&a), Some(&b)) = (self.syms.get(i - 1), self.syms.get(i)) else {
                return None;
            };
            if let Some((rank, merged)) = self.look(lookup, a.id, b.id) {
                self.push(rank, (i - 1) as u32)?;
                let s = self.syms.get_mut(i - 1)?;
                s.rank = rank;
                s.merged = merged;
            }
        }
        let mut cur = 0u32;
        while let Some(r) = self.next_rank(cur) {
            cur = r;
            let pos = self.pop(r)?;
            if self.syms.get(pos as usize)?.rank != r {
                continue;
            }
            // The chain of candidates of rank r that overlap or touch (no symbol between)
            // fires from its left end rightwards, in the heap's order; chains apart commute
            // (each lookup a firing makes sees the same pair whichever fires first), so a
            // non-monotone candidate is seen whatever the order of the chains.
            let mut s = pos;
            loop {
                let p = self.syms.get(s as usize)?.prev;
                let Some(&ps) = self.syms.get(p as usize) else {
                    break;
                };
                if ps.rank == r {
                    s = p;
                } else if self.syms.get(ps.prev as usize).is_some_and(|t| t.rank == r) {
                    s = ps.prev;
                } else {
                    break;
                }
            }
            loop {
                let a = *self.syms.get(s as usize)?;
                let b = *self.syms.get(a.next as usize)?;
                // Absorb b into a.
                self.syms.get_mut(a.next as usize)?.rank = NONE;
                if let Some(after) = self.syms.get_mut(b.next as usize) {
                    after.prev = s;
                }
                if let Some(&before) = self.syms.get(a.prev as usize) {
                    let c = self.look(lookup, before.id, a.merged);
                    self.candidate(a.prev, c, r, true)?;
                }
                let after = self.syms.get(b.next as usize).copied();
                let c = after.and_then(|t| self.look(lookup, a.merged, t.id));
                let sym = self.syms.get_mut(s as usize)?;
                sym.id = a.merged;
                sym.next = b.next;
                // The next candidate of the chain touches the new symbol: when it fires, this
                // candidate is replaced, so it is checked but not queued.
                let more = after.is_some_and(|t| t.rank == r);
                self.candidate(s, c, r, !more)?;
                if !more {
                    break;
                }
                s = b.next;
            }
        }
        Some(())
    }

    /// Set symbol `s`'s candidate to `c` (made by firing rank `r`) and queue it (with
    /// `queue`, else none is left); None when it does not rank after `r` (not monotone).
    #[inline(always)]
    fn candidate(&mut self, s: u32, c: Option<(u32, u32)>, r: u32, queue: bool) -> Option<()> {
        let rank = match c {
            Some((rank, _)) if !queue => {
                if rank <= r {
                    return None;
                }
                NONE
            }
            Some((rank, merged)) => {
                if rank <= r {
                    return None;
                }
                self.push(rank, s)?;
                self.syms.get_mut(s as usize)?.merged = merged;
                rank
            }
            None => NONE,
        };
        self.syms.get_mut(s as usize)?.rank = rank;
        Some(())
    }

    #[inline(always)]
    fn push(&mut self, rank: u32, s: u32) -> Option<()> {
        if rank >= MAX_RANK {
            return None;
        }
        let r = rank as usize;
        if r >= self.head.len() {
            // Whole summary words, so `bits` and `summary` stay in step.
            let len = (r + 1).next_multiple_of(1 << 12);
            self.head.resize(len, NONE);
            self.bits.resize(len / 64, 0);
            self.summary.resize(len / 4096, 0);
        }
        let e = u32::try_from(self.entries.len()).ok()?;
        let h = self.head.get_mut(r)?;
        let old = std::mem::replace(h, e);
        self.entries.push(u64::from(s) | (u64::from(old) << 32));
        if old == NONE {
            let w = self.bits.get_mut(r / 64)?;
            if *w == 0 {
                *self.summary.get_mut(r / 4096)? |= 1 << (r / 64 % 64);
            }
            *w |= 1 << (r % 64);
        }
        Some(())
    }

    /// The latest entry of rank `r`'s (non-empty) bucket, taken off.
    #[inline(always)]
    fn pop(&mut self, rank: u32) -> Option<u32> {
        let r = rank as usize;
        let h = self.head.get_mut(r)?;
        let e = *self.entries.get(*h as usize)?;
        *h = (e >> 32) as u32;
        if *h == NONE {
            let w = self.bits.get_mut(r / 64)?;
            *w &= !(1 << (r % 64));
            if *w == 0 {
                *self.summary.get_mut(r / 4096)? &= !(1 << (r / 64 % 64));
            }
        }
        Some(e as u32)
    }

    /// The lowest rank at or after `from` with a non-empty bucket.
    #[inline(always)]
    fn next_rank(&self, from: u32) -> Option<u32> {
        let w = from as usize / 64;
        let here = self.bits.get(w)? & (u64::MAX << (from % 64));
        if here != 0 {
            return Some((w * 64) as u32 + here.trailing_zeros());
        }
        let w = w + 1;
        let mut sw = w / 64;
        let mut m = self.summary.get(sw)? & (u64::MAX << (w % 64));
        loop {
            if m != 0 {
                let bw = sw * 64 + m.trailing_zeros() as usize;
                let b = *self.bits.get(bw)?;
                return Some((bw * 64) as u32 + b.trailing_zeros());
            }
            sw += 1;
            m = *self.summary.get(sw)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bpe::engine::Word;
    use ahash::AHashMap;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self, m: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % m
        }
    }

    fn key(a: u32, b: u32) -> u64 {
        (u64::from(a) << 32) | u64::from(b)
    }

    /// A random model over `k` letters (ids 0..k), merges made "training style" (parts
    /// exist first). `by_string`: ranks as tiktoken's, one per merged string, so several
    /// pairs making one token share its rank; `swaps` ranks swapped at random (models that
    /// may not be monotone).
    fn table(rng: &mut Rng, k: u32, by_string: bool, swaps: u64) -> AHashMap<u64, (u32, u32)> {
        let mut strs: Vec<String> = (0..k)
            .map(|c| ((b'a' + c as u8) as char).to_string())
            .collect();
        let mut ids: AHashMap<String, u32> = strs.iter().cloned().zip(0..).collect();
        let mut list: Vec<(u32, u32, u32)> = Vec::new();
        for _ in 0..3 + rng.next(60) {
            let a = rng.next(strs.len() as u64) as u32;
            let b = rng.next(strs.len() as u64) as u32;
            let s = format!("{}{}", strs[a as usize], strs[b as usize]);
            if s.len() > 10 {
                continue;
            }
            let new = *ids.entry(s.clone()).or_insert_with(|| {
                strs.push(s);
                strs.len() as u32 - 1
            });
            list.push((a, b, new));
        }
        if by_string {
            // Every split of each token into two tokens merges, ranked by the token.
            let mut more = Vec::new();
            for (t, s) in strs.iter().enumerate().skip(k as usize) {
                for j in 1..s.len() {
                    if let (Some(&l), Some(&r)) = (ids.get(&s[..j]), ids.get(&s[j..])) {
                        more.push((l, r, t as u32));
                    }
                }
            }
            list = more;
        }
        for _ in 0..swaps {
            let (i, j) = (rng.next(list.len() as u64), rng.next(list.len() as u64));
            list.swap(i as usize, j as usize);
        }
        let mut merges = AHashMap::new();
        for (rank, &(a, b, new)) in list.iter().enumerate() {
            let rank = if by_string { new } else { rank as u32 };
            merges.entry(key(a, b)).or_insert((rank, new));
        }
        merges
    }

    fn word(rng: &mut Rng, k: u32, n: usize) -> Vec<u32> {
        let mut w = Vec::new();
        while w.len() < n {
            let c = rng.next(u64::from(k)) as u32;
            match rng.next(3) {
                0 => w.push(c),
                1 => w.extend(std::iter::repeat_n(c, 1 + rng.next(20) as usize)),
                _ => {
                    let p: Vec<u32> = (0..1 + rng.next(4))
                        .map(|_| rng.next(u64::from(k)) as u32)
                        .collect();
                    for _ in 0..1 + rng.next(8) {
                        w.extend_from_slice(&p);
                    }
                }
            }
        }
        w
    }

    fn heap(ids: &[u32], merges: &AHashMap<u64, (u32, u32)>) -> Vec<(u32, usize, usize)> {
        let mut w = Word::default();
        for &id in ids {
            w.push(id, 1);
        }
        w.merge_all(
            |a, b| merges.get(&key(a, b)).copied(),
            None::<fn() -> bool>,
            |_, _, _| {},
        );
        w.iter().collect()
    }

    fn check(rng: &mut Rng, by_string: bool, swaps: u64, rounds: usize) -> (usize, usize) {
        let (mut done, mut refused) = (0, 0);
        let mut st = Ranked::default();
        for round in 0..rounds {
            let k = 2 + (round % 3) as u32;
            let merges = table(rng, k, by_string, swaps);
            for _ in 0..8 {
                let most = if rng.next(4) == 0 { 5000 } else { 300 };
                let n = 2 + rng.next(most) as usize;
                let w = word(rng, k, n);
                let want = heap(&w, &merges);
                let lookup = |a, b| merges.get(&key(a, b)).copied();
                let ok = st.merge(w.iter().copied(), round as u64 + 1, lookup);
                let got: Vec<_> = st
                    .tokens()
                    .map(|(id, s, e)| (id, s as usize, e as usize))
                    .collect();
                if ok {
                    assert_eq!(got, want, "word {w:?}, merges {merges:?}");
                    done += 1;
                } else {
                    assert!(got.is_empty());
                    refused += 1;
                }
                // The scratch space is clean again, refused or not.
                assert!(st.head.iter().all(|&h| h == NONE));
                assert!(st.bits.iter().chain(&st.summary).all(|&b| b == 0));
            }
        }
        (done, refused)
    }

    #[test]
    fn matches_the_heap_on_training_style_tables() {
        // Mostly monotone (merges into a token that another merge already makes may not be).
        let (done, refused) = check(&mut Rng(0x2545_F491_4F6C_DD1D), false, 0, 2000);
        assert!(done > 15000, "{done} {refused}");
    }

    #[test]
    fn matches_the_heap_with_ranks_by_string() {
        // tiktoken-style ranks: (ab, a) and (a, ba) both make "aba" at one rank, so chains
        // of one rank need not repeat a symbol.
        let (done, refused) = check(&mut Rng(0x9E37_79B9_7F4A_7C15), true, 0, 2000);
        assert!(done > 15000, "{done} {refused}");
    }

    #[test]
    fn matches_or_refuses_on_shuffled_ranks() {
        let (done, refused) = check(&mut Rng(0xD1B5_4A32_D192_ED03), false, 4, 2000);
        assert!(done > 1000 && refused > 100, "{done} {refused}");
        let (done, refused) = check(&mut Rng(0x8CB9_2BA7_2F3D_8DD7), true, 4, 2000);
        assert!(done > 1000 && refused > 100, "{done} {refused}");
    }

    #[test]
    fn ranks_far_apart_and_a_long_run() {
        // Ranks across several summary words, and one symbol repeated a million times (one
        // chain per rank).
        let mut merges = AHashMap::new();
        for r in 0..6u32 {
            merges.insert(key(r, r), (r * 70_000 + 5, r + 1));
        }
        let w = vec![0u32; 1_000_003];
        let want = heap(&w, &merges);
        let mut st = Ranked::default();
        let lookup = |a, b| merges.get(&key(a, b)).copied();
        assert!(st.merge(w.iter().copied(), 1, lookup));
        let got: Vec<_> = st
            .tokens()
            .map(|(id, s, e)| (id, s as usize, e as usize))
            .collect();
        assert_eq!(got, want);
        // Out of range ranks give up; one symbol or none is the word itself.
        merges.insert(key(0, 1), (MAX_RANK, 9));
        assert!(!st.merge([0, 1, 0].into_iter(), 2, |a, b| merges
            .get(&key(a, b))
            .copied()));
        assert!(st.merge([7].into_iter(), 3, |_, _| None));
        assert_eq!(st.tokens().collect::<Vec<_>>(), [(7, 0, 1)]);
        assert!(st.merge(std::iter::empty(), 3, |_, _| None));
        assert_eq!(st.tokens().count(), 0);
    }
}
