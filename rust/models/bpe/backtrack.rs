//! An exact BPE encoder for long words: greedy longest token plus backtracking, driven by a
//! test of whether two adjacent tokens survive BPE of their concatenation (the idea of the
//! `bpe` crate of github/rust-gems; this is an independent implementation for rank-ordered
//! merges with the reference's tie rules). Linear-ish in the word, where the heap merge pays
//! a heap operation per merge with poor locality.
//!
//! Theory (merges ordered by a priority "rank", lowest first, leftmost first on equal rank):
//! - A token t is *reachable* when BPE of its own symbols alone gives [t]; the last merge of
//!   that run is its *split* (l, r), and `rank(t)` is that merge's rank (base symbols: −1).
//!   Any symbol that ever exists while a longer text is merged covers a region whose merges so
//!   far are exactly the standalone run of that region (a crossing merge would have made it
//!   part of a bigger symbol), so only reachable tokens and their splits ever appear.
//! - Precondition, checked at build: every reachable token ranks strictly after both parts of
//!   its split. Then the ranks fired by any run never decrease (a candidate created by a merge
//!   of rank r that fires makes a reachable token from the new one, so it ranks > r), and
//!   equal ranks fire left to right; "formed later" is "higher rank, the right one on ties".
//! - Pair validity: BPE(t1 t2) = [t1, t2] iff no crossing merge fires. While x (on t1's right
//!   spine) and y (on t2's left spine) are the symbols at the seam, the crossing (x, y) with
//!   rank m fires iff it beats the merge that ends that period: x's parent (rank px, to the
//!   left: wins ties) or y's parent (rank py, to the right: loses ties), i.e. m < px and
//!   m <= py. Walking back in time from (t1, t2) (parents ∞), the later formed of x, y is
//!   replaced by its child on the spine, until both are base symbols.
//! - A cover of the text by reachable tokens whose adjacent pairs are all valid is exactly
//!   the BPE output (which is one such cover), so a depth-first search finds it; see `encode`
//!   for why the dead-position memo keeps it near-linear.
//!
//! Models that break the precondition (or whose ids are not one per string) get no encoder
//! and keep the heap path.

use ahash::{AHashMap, AHashSet};
use std::sync::{Mutex, OnceLock};

const NONE: u32 = u32::MAX;
/// Parent rank of the top pair: no period end.
const INF: u32 = u32::MAX;

/// A reachable token. `rank` is the merge rank + 1 (0 for base symbols); `left`/`right` are
/// the dense indices of its split (NONE for base symbols); `prefix` is the longest reachable
/// token that is a proper prefix of its string (NONE if none).
#[derive(Debug, Clone, Copy)]
struct Tok {
    id: u32,
    len: u32,
    rank: u32,
    left: u32,
    right: u32,
    prefix: u32,
    /// Lower bounds for pruning `valid`: the smallest merge rank + 1 with a node of this
    /// token's right spine on the left (`rmin`), with a node of its left spine on the right
    /// (`lmin`); INF when there is none.
    rmin: u32,
    lmin: u32,
}

pub struct Backtrack {
    toks: Vec<Tok>,
    /// Merges between reachable tokens (no other pair is ever adjacent): rank + 1 by pair.
    pairs: PairTable,
    /// Byte trie over the reachable tokens' strings, laid out breadth first so that the
    /// children of a node are consecutive, sorted by their byte `label`: a node with few
    /// children is searched in `label`, one with many has a 256-entry block in `wide`.
    nodes: Vec<Node>,
    label: Vec<u8>,
    wide: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    first: u32,
    count: u32,
    /// Block index in `wide`, or NONE.
    wide: u32,
    /// The token (dense) whose string ends here, or NONE.
    tok: u32,
}

/// Nodes with more children than this get a `wide` block.
const NARROW: u32 = 8;

/// Scratch space of `encode`, kept between calls.
#[derive(Debug, Default)]
pub struct State {
    stack: Vec<u32>,
    /// One bit per text position: set once no valid encoding of the rest starts there.
    dead: Vec<u64>,
}

impl State {
    pub fn trim(&mut self) {
        const KEEP: usize = 1 << 16;
        if self.stack.capacity() > KEEP {
            self.stack = Vec::new();
        }
        if self.dead.capacity() > KEEP {
            self.dead = Vec::new();
        }
    }
}

/// A model's encoder, built on first use (building walks the whole vocabulary, which short
/// words never need). Never blocks: while one thread builds, the others keep the heap path;
/// `set` runs only under the `try_lock`, so a process forked in the middle of it finds the
/// lock taken and keeps the heap path instead of waiting forever.
#[derive(Default)]
pub struct Lazy {
    cell: OnceLock<Option<Backtrack>>,
    building: Mutex<()>,
}

impl Lazy {
    pub fn get_or_build(&self, build: impl FnOnce() -> Option<Backtrack>) -> Option<&Backtrack> {
        if let Some(b) = self.cell.get() {
            return b.as_ref();
        }
        let _guard = self.building.try_lock().ok()?;
        if self.cell.get().is_none() {
            let _ = self.cell.set(build());
        }
        self.cell.get().and_then(Option::as_ref)
    }
}

/// Open addressing over one u64 per slot, `left (20 bits) | right (20) | rank + 1 (24)`, so a
/// probe costs one cache line (the pair test is the hot loop). Zero marks an empty slot (a
/// stored rank + 1 is never 0). Most pairs looked up are not merges: a blocked Bloom filter
/// (two bits in one word, about 16 bits per merge) small enough to stay in cache answers
/// those without touching the table.
struct PairTable {
    slots: Vec<u64>,
    mask: usize,
    bloom: Vec<u64>,
    bloom_shift: u32,
}

const PAIR_BITS: u32 = 20;
const RANK_BITS: u32 = 24;

impl PairTable {
    fn new(entries: &[(u32, u32, u32)]) -> Option<PairTable> {
        let size = (entries.len() * 2).next_power_of_two().max(16);
        let words = (entries.len() / 4).next_power_of_two().max(16);
        let mut t = PairTable {
            slots: vec![0; size],
            mask: size - 1,
            bloom: vec![0; words],
            bloom_shift: 64 - words.trailing_zeros(),
        };
        for &(a, b, r) in entries {
            if a >> PAIR_BITS != 0 || b >> PAIR_BITS != 0 || r >> RANK_BITS != 0 || r == 0 {
                return None;
            }
            let k = (u64::from(a) << PAIR_BITS) | u64::from(b);
            let (w, bits) = t.bloom_bits(k);
            *t.bloom.get_mut(w)? |= bits;
            let mut i = Self::slot(k) & t.mask;
            loop {
                let s = *t.slots.get(i)?;
                if s == 0 || s >> RANK_BITS == k {
                    // A pair listed twice keeps its last rank, as in the model's table.
                    *t.slots.get_mut(i)? = (k << RANK_BITS) | u64::from(r);
                    break;
                }
                i = (i + 1) & t.mask;
            }
        }
        Some(t)
    }

    #[inline]
    fn slot(k: u64) -> usize {
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize
    }

    #[inline]
    fn bloom_bits(&self, k: u64) -> (usize, u64) {
        let h = k.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        let w = (h >> self.bloom_shift) as usize;
        (w, (1 << ((h >> 20) & 63)) | (1 << ((h >> 26) & 63)))
    }

    /// Rank + 1 of the merge (a, b), if any.
    #[inline]
    fn get(&self, a: u32, b: u32) -> Option<u32> {
        let k = (u64::from(a) << PAIR_BITS) | u64::from(b);
        let (w, bits) = self.bloom_bits(k);
        if self.bloom.get(w).is_none_or(|&x| x & bits != bits) {
            return None;
        }
        let mut i = Self::slot(k) & self.mask;
        loop {
            let s = *self.slots.get(i)?;
            if s == 0 {
                return None;
            }
            if s >> RANK_BITS == k {
                return Some((s & ((1 << RANK_BITS) - 1)) as u32);
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// The standalone BPE run of `syms` (ids), in place: the lowest rank first, leftmost among
/// equals (strict `<` while scanning left to right). Returns the last merge applied.
fn standalone<L>(syms: &mut Vec<u32>, lookup: &L) -> Option<(u32, u32)>
where
    L: Fn(u32, u32) -> Option<(u32, u32)>,
{
    let mut last = None;
    loop {
        let mut best: Option<(u32, usize, u32)> = None;
        for (i, w) in syms.windows(2).enumerate() {
            if let Some((rank, new)) = lookup(w[0], w[1]) {
                if best.is_none_or(|(r, _, _)| rank < r) {
                    best = Some((rank, i, new));
                }
            }
        }
        let Some((_, i, new)) = best else {
            return last;
        };
        last = syms.get(i).copied().zip(syms.get(i + 1).copied());
        syms[i] = new;
        syms.remove(i + 1);
    }
}

impl Backtrack {
    /// Build from every (string, id) of the vocabulary, the base symbol id of a character,
    /// the merge table `lookup(left, right) -> (rank, merged id)` and its entries
    /// `(left, right, rank)`. None when the model does not meet the preconditions.
    pub fn build<'a, V, B, L, M>(vocab: V, base: B, lookup: L, merges: M) -> Option<Backtrack>
    where
        V: Iterator<Item = (&'a str, u32)>,
        B: Fn(char) -> Option<u32>,
        L: Fn(u32, u32) -> Option<(u32, u32)>,
        M: Iterator<Item = (u32, u32, u32)>,
    {
        let mut vocab: Vec<(&str, u32)> = vocab.collect();
        // Dense indices in breadth-first trie order (by length, then bytes): the tokens a
        // text uses together sit close in memory, as do their trie nodes.
        vocab.sort_unstable_by(|x, y| (x.0.len(), x.0).cmp(&(y.0.len(), y.0)));
        // One string per id: then an id stands for its string and a merge's result is the
        // concatenation of its parts.
        let mut seen = AHashSet::with_capacity(vocab.len());
        if !vocab.iter().all(|&(_, id)| seen.insert(id)) {
            return None;
        }
        // Reachability and splits. Ranks must fit `rank + 1` below INF.
        let mut dense: AHashMap<u32, u32> = AHashMap::with_capacity(vocab.len());
        let mut toks: Vec<Tok> = Vec::with_capacity(vocab.len());
        let mut strs: Vec<&str> = Vec::with_capacity(vocab.len());
        let mut splits: Vec<(u32, u32)> = Vec::with_capacity(vocab.len());
        let mut syms = Vec::new();
        for &(s, id) in &vocab {
            syms.clear();
            for c in s.chars() {
                match base(c) {
                    Some(b) => syms.push(b),
                    None => break,
                }
            }
            if syms.is_empty() || syms.len() != s.chars().count() {
                continue;
            }
            let (rank, split) = if syms.len() == 1 {
                if syms[0] != id {
                    continue;
                }
                (0, (NONE, NONE))
            } else {
                let last = standalone(&mut syms, &lookup);
                match (syms.as_slice(), last) {
                    (&[t], Some((l, r))) if t == id => {
                        let (rank, _) = lookup(l, r)?;
                        (rank.checked_add(1).filter(|&r| r < INF)?, (l, r))
                    }
                    _ => continue,
                }
            };
            dense.insert(id, toks.len() as u32);
            toks.push(Tok {
                id,
                len: u32::try_from(s.len()).ok()?,
                rank,
                left: NONE,
                right: NONE,
                prefix: NONE,
                rmin: INF,
                lmin: INF,
            });
            strs.push(s);
            splits.push(split);
        }
        // Splits in dense indices, and the precondition: a token ranks after its parts.
        for i in 0..toks.len() {
            let (l, r) = splits[i];
            if l == NONE {
                continue;
            }
            let (&dl, &dr) = (dense.get(&l)?, dense.get(&r)?);
            let rank = toks[i].rank;
            if toks[dl as usize].rank >= rank || toks[dr as usize].rank >= rank {
                return None;
            }
            toks[i].left = dl;
            toks[i].right = dr;
        }
        // Merges in rank order, so that a pair listed twice keeps its last rank.
        let mut list = Vec::new();
        for (a, b, rank) in merges {
            if let (Some(&da), Some(&db)) = (dense.get(&a), dense.get(&b)) {
                list.push((da, db, rank.checked_add(1).filter(|&r| r < INF)?));
            }
        }
        list.sort_unstable_by_key(|e| e.2);
        // Pruning bounds: per token the smallest rank as a left / right part, then the
        // minimum along its right / left spine (parts come before the token in rank order,
        // so one pass in rank order sees them done).
        let (mut as_left, mut as_right) = (vec![INF; toks.len()], vec![INF; toks.len()]);
        for &(a, b, r) in &list {
            let l = as_left.get_mut(a as usize)?;
            *l = (*l).min(r);
            let rr = as_right.get_mut(b as usize)?;
            *rr = (*rr).min(r);
        }
        let mut by_rank: Vec<u32> = (0..toks.len() as u32).collect();
        by_rank.sort_unstable_by_key(|&t| toks[t as usize].rank);
        for &t in &by_rank {
            let tok = *toks.get(t as usize)?;
            let (mut rmin, mut lmin) = (as_left[t as usize], as_right[t as usize]);
            if tok.left != NONE {
                rmin = rmin.min(toks.get(tok.right as usize)?.rmin);
                lmin = lmin.min(toks.get(tok.left as usize)?.lmin);
            }
            let tok = toks.get_mut(t as usize)?;
            tok.rmin = rmin;
            tok.lmin = lmin;
        }
        let pairs = PairTable::new(&list)?;
        // The trie, first with hashed edges, then laid out breadth first.
        let mut edges: AHashMap<(u32, u8), u32> = AHashMap::new();
        let mut ends = vec![NONE];
        for (t, s) in strs.iter().enumerate() {
            let mut node = 0u32;
            for &b in s.as_bytes() {
                let fresh = ends.len() as u32;
                node = *edges.entry((node, b)).or_insert(fresh);
                if node == fresh {
                    ends.push(NONE);
                }
            }
            *ends.get_mut(node as usize)? = t as u32;
        }
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new(); ends.len()];
        for (&(node, b), &child) in &edges {
            children.get_mut(node as usize)?.push((b, child));
        }
        let n = ends.len();
        let empty = Node {
            first: 0,
            count: 0,
            wide: NONE,
            tok: NONE,
        };
        let (mut nodes, mut label, mut wide) = (vec![empty; n], vec![0u8; n], Vec::new());
        // BFS: `order[k]` is the old node placed at new index k.
        let mut order = vec![0u32];
        let mut k = 0;
        while let Some(&old) = order.get(k) {
            let kids = children.get_mut(old as usize)?;
            kids.sort_unstable();
            let node = nodes.get_mut(k)?;
            node.tok = *ends.get(old as usize)?;
            node.first = order.len() as u32;
            node.count = kids.len() as u32;
            if node.count > NARROW {
                node.wide = (wide.len() / 256) as u32;
                wide.resize(wide.len() + 256, NONE);
            }
            let block = wide.len().saturating_sub(256);
            for &(b, child) in kids.iter() {
                if node.wide != NONE {
                    *wide.get_mut(block + b as usize)? = order.len() as u32;
                }
                *label.get_mut(order.len())? = b;
                order.push(child);
            }
            k += 1;
        }
        let mut bt = Backtrack {
            toks,
            pairs,
            nodes,
            label,
            wide,
        };
        for (t, s) in strs.iter().enumerate() {
            let s = s.as_bytes();
            let p = bt.longest(s.get(..s.len() - 1)?);
            bt.toks[t].prefix = p;
        }
        Some(bt)
    }

    #[inline]
    fn child(&self, node: &Node, b: u8) -> u32 {
        if node.wide != NONE {
            let at = node.wide as usize * 256 + b as usize;
            return self.wide.get(at).copied().unwrap_or(NONE);
        }
        let f = node.first as usize;
        let Some(labels) = self.label.get(f..f + node.count as usize) else {
            return NONE;
        };
        labels
            .iter()
            .position(|&l| l == b)
            .map_or(NONE, |i| node.first + i as u32)
    }

    /// The longest reachable token that is a prefix of `s` (dense), or NONE.
    #[inline]
    fn longest(&self, s: &[u8]) -> u32 {
        let Some(mut node) = self.nodes.first() else {
            return NONE;
        };
        let mut best = NONE;
        for &b in s {
            let Some(next) = self.nodes.get(self.child(node, b) as usize) else {
                break;
            };
            node = next;
            if node.tok != NONE {
                best = node.tok;
            }
        }
        best
    }

    /// Whether BPE of the two tokens' concatenation gives them back (see the module notes).
    #[inline]
    fn valid(&self, t1: u32, t2: u32) -> bool {
        let (mut x, mut y) = (t1, t2);
        let (mut px, mut py) = (INF, INF);
        loop {
            let (Some(&tx), Some(&ty)) = (self.toks.get(x as usize), self.toks.get(y as usize))
            else {
                return false;
            };
            // Every check left (this one included) has a rank of at least `floor`, against
            // bounds that only decrease (a child ranks before its parent): none can fail.
            let floor = tx.rmin.max(ty.lmin);
            if floor >= px || floor > py {
                return true;
            }
            if let Some(m) = self.pairs.get(x, y) {
                if m < px && m <= py {
                    return false;
                }
            }
            if tx.rank == 0 && ty.rank == 0 {
                return true;
            }
            // The later formed: higher rank, y on ties.
            if ty.rank >= tx.rank {
                py = ty.rank;
                y = ty.left;
            } else {
                px = tx.rank;
                x = tx.right;
            }
        }
    }

    /// Encode `text` (the concatenation of base symbols' strings), calling `emit(id, len)`
    /// for each token in order. False when no encoding was found (a character without a base
    /// symbol): the caller then uses the heap path; nothing is emitted in that case.
    ///
    /// Depth-first search: at each position try the reachable tokens that start there,
    /// longest first, keeping one whose end is not dead and whose pair with the previous
    /// token is valid; when none is left, mark the position dead and go back one token.
    /// The memo is exact because the tokens on the stack at a position p are a valid cover
    /// of text[..p], and valid covers are unique (each is the BPE output of text[..p]): the
    /// search reaches p only ever with that one stack, so "nothing works from p" does not
    /// depend on how p was reached. Each position is thus left for good at most once, after
    /// trying at most its (bounded) number of prefix tokens.
    pub fn encode(&self, text: &[u8], st: &mut State, mut emit: impl FnMut(u32, u32)) -> bool {
        let n = text.len();
        st.stack.clear();
        st.dead.clear();
        st.dead.resize(n / 64 + 1, 0);
        let is_dead =
            |dead: &[u64], p: usize| dead.get(p / 64).is_some_and(|w| w >> (p % 64) & 1 == 1);
        let mut pos = 0usize;
        let mut next = self.longest(text);
        while pos < n {
            let mut token = next;
            loop {
                let Some(&t) = self.toks.get(token as usize) else {
                    // Nothing left at `pos`: dead, back one token.
                    if let Some(w) = st.dead.get_mut(pos / 64) {
                        *w |= 1 << (pos % 64);
                    }
                    let Some(last) = st.stack.pop() else {
                        return false;
                    };
                    let Some(lt) = self.toks.get(last as usize) else {
                        return false;
                    };
                    pos -= lt.len as usize;
                    // Retrying `last` fails on its dead end and moves on to shorter ones.
                    next = last;
                    break;
                };
                let end = pos + t.len as usize;
                if !is_dead(&st.dead, end)
                    && st.stack.last().is_none_or(|&last| self.valid(last, token))
                {
                    st.stack.push(token);
                    pos = end;
                    next = self.longest(text.get(end..).unwrap_or_default());
                    break;
                }
                token = t.prefix;
            }
        }
        for &t in &st.stack {
            if let Some(t) = self.toks.get(t as usize) {
                emit(t.id, t.len);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bpe::engine::Word;

    fn key(a: u32, b: u32) -> u64 {
        (u64::from(a) << 32) | u64::from(b)
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self, m: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % m
        }
    }

    /// A random model over `k` letters: merges made "training style" (parts already exist)
    /// with ranks in order, plus merges into existing tokens, merges listed twice, rank
    /// swaps (a merge ranked before its parts' merges) and tokens no merge makes.
    struct Table {
        strs: Vec<String>,
        ids: AHashMap<String, u32>,
        merges: AHashMap<u64, (u32, u32)>,
    }

    fn table(rng: &mut Rng, k: u8) -> Table {
        let mut t = Table {
            strs: Vec::new(),
            ids: AHashMap::new(),
            merges: AHashMap::new(),
        };
        let add = |t: &mut Table, s: String| -> u32 {
            if let Some(&id) = t.ids.get(&s) {
                return id;
            }
            let id = t.strs.len() as u32 * 3 + 7; // sparse ids
            t.ids.insert(s.clone(), id);
            t.strs.push(s);
            id
        };
        for c in 0..k {
            add(&mut t, ((b'a' + c) as char).to_string());
        }
        let n = 3 + rng.next(40);
        let mut list: Vec<(u32, u32, u32)> = Vec::new();
        for _ in 0..n {
            let a = rng.next(t.strs.len() as u64) as usize;
            let b = rng.next(t.strs.len() as u64) as usize;
            let s = format!("{}{}", t.strs[a], t.strs[b]);
            if s.len() > 12 {
                continue;
            }
            let (ia, ib) = (t.ids[&t.strs[a]], t.ids[&t.strs[b]]);
            let new = add(&mut t, s);
            list.push((ia, ib, new));
            if rng.next(8) == 0 {
                // Listed again later: the later rank counts.
                list.push((ia, ib, new));
            }
        }
        if rng.next(3) == 0 && list.len() > 2 {
            let i = rng.next(list.len() as u64) as usize;
            let j = rng.next(list.len() as u64) as usize;
            list.swap(i, j);
        }
        for _ in 0..rng.next(3) {
            let len = 2 + rng.next(4);
            let s: String = (0..len)
                .map(|_| (b'a' + rng.next(u64::from(k)) as u8) as char)
                .collect();
            add(&mut t, s);
        }
        for (rank, &(a, b, new)) in list.iter().enumerate() {
            t.merges.insert(key(a, b), (rank as u32, new));
        }
        t
    }

    fn word(rng: &mut Rng, k: u8) -> String {
        let n = 1 + rng.next(300) as usize;
        let letter = |rng: &mut Rng| (b'a' + rng.next(u64::from(k)) as u8) as char;
        match rng.next(4) {
            0 => (0..n).map(|_| letter(rng)).collect(),
            1 => std::iter::repeat_n(letter(rng), n).collect(),
            2 => {
                let p: String = (0..1 + rng.next(5)).map(|_| letter(rng)).collect();
                p.repeat(n / p.len() + 1)
            }
            _ => {
                let mut s = String::new();
                while s.len() < n {
                    let c = letter(rng);
                    for _ in 0..1 + rng.next(9) {
                        s.push(c);
                    }
                }
                s
            }
        }
    }

    /// The heap engine's tokens (id, byte length).
    pub(crate) fn heap<L: Fn(u32, u32) -> Option<(u32, u32)>>(
        syms: impl Iterator<Item = (u32, u32)>,
        lookup: L,
    ) -> Vec<(u32, u32)> {
        let mut w = Word::default();
        for (id, len) in syms {
            w.push(id, len);
        }
        w.merge_all(lookup, None::<fn() -> bool>, |_, _, _| {});
        w.iter().map(|(id, s, e)| (id, (e - s) as u32)).collect()
    }

    #[test]
    fn matches_the_heap_on_random_tables() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let (mut built, mut words) = (0, 0);
        for round in 0..3000 {
            let k = 2 + (round % 3) as u8;
            let t = table(&mut rng, k);
            let lookup = |a: u32, b: u32| t.merges.get(&key(a, b)).copied();
            let bt = Backtrack::build(
                t.ids.iter().map(|(s, &id)| (s.as_str(), id)),
                |c| t.ids.get(c.encode_utf8(&mut [0; 4]) as &str).copied(),
                lookup,
                t.merges
                    .iter()
                    .map(|(&k, &(r, _))| ((k >> 32) as u32, k as u32, r)),
            );
            let Some(bt) = bt else {
                continue;
            };
            built += 1;
            let mut st = State::default();
            for _ in 0..20 {
                let w = word(&mut rng, k);
                let want = heap(w.chars().map(|c| (t.ids[&c.to_string()], 1)), lookup);
                let mut got = Vec::new();
                assert!(bt.encode(w.as_bytes(), &mut st, |id, len| got.push((id, len))));
                assert_eq!(got, want, "word {w:?}, merges {:?}", t.merges);
                words += 1;
            }
        }
        // Most tables qualify; the others must be refused, not mis-encoded.
        assert!(built > 1500, "{built}");
        assert!(words > 30000);
    }

    #[test]
    fn refuses_a_merge_ranked_before_its_parts() {
        // ab is made at rank 1, abc = (ab, c) at rank 0: "abcd" with (c, d) at rank 2 would
        // fool the rank-only pair test, so no encoder is built.
        let ids: AHashMap<&str, u32> = [
            ("a", 0),
            ("b", 1),
            ("c", 2),
            ("d", 3),
            ("ab", 4),
            ("abc", 5),
            ("cd", 6),
        ]
        .into_iter()
        .collect();
        let merges: AHashMap<u64, (u32, u32)> = [
            (key(4, 2), (0, 5)),
            (key(0, 1), (1, 4)),
            (key(2, 3), (2, 6)),
        ]
        .into_iter()
        .collect();
        let bt = Backtrack::build(
            ids.iter().map(|(s, &id)| (*s, id)),
            |c| ids.get(c.encode_utf8(&mut [0; 4]) as &str).copied(),
            |a, b| merges.get(&key(a, b)).copied(),
            merges
                .iter()
                .map(|(&k, &(r, _))| ((k >> 32) as u32, k as u32, r)),
        );
        assert!(bt.is_none());
    }

    #[test]
    fn long_runs_stay_fast() {
        // a, aa, aaaa, ...: one endless word costs a few steps per token.
        let mut ids = AHashMap::new();
        let mut merges = AHashMap::new();
        let mut s = "a".to_string();
        ids.insert(s.clone(), 0u32);
        for r in 0..6u32 {
            let t = s.repeat(2);
            ids.insert(t.clone(), r + 1);
            merges.insert(key(r, r), (r, r + 1));
            s = t;
        }
        let bt = Backtrack::build(
            ids.iter().map(|(s, &id)| (s.as_str(), id)),
            |c| ids.get(c.encode_utf8(&mut [0; 4]) as &str).copied(),
            |a, b| merges.get(&key(a, b)).copied(),
            merges
                .iter()
                .map(|(&k, &(r, _))| ((k >> 32) as u32, k as u32, r)),
        )
        .unwrap();
        let text = "a".repeat(1_000_003);
        let mut got = Vec::new();
        let mut st = State::default();
        assert!(bt.encode(text.as_bytes(), &mut st, |id, len| got.push((id, len))));
        let want = heap(std::iter::repeat_n((0, 1), text.len()), |a, b| {
            merges.get(&key(a, b)).copied()
        });
        assert_eq!(got, want);
    }
}
