//! sentencepiece BPE segmentation (see `spec/BPE-NOTES.md` part A), run on the whole
//! normalized, ▁-escaped string: user-defined pieces are matched first (longest prefix, left to
//! right) and frozen; every other character is a symbol; then the adjacent pair whose
//! concatenation is a NORMAL / USER_DEFINED / UNUSED piece with the highest score merges,
//! leftmost on equal scores, until none is left. UNUSED results are split back into the two
//! symbols that made them; unknown symbols fall back to bytes or fuse into one unk piece.
//!
//! The merge candidates are precomputed as a pair table (left symbol, right symbol) → merged
//! piece from every two-way split of every mergeable piece (its score rank looked up by id).
//! Short spans are merged over stack arrays (`bpe_tables::merge_short`), long ones by the
//! shared heap engine (`models::bpe::engine`) in O(n log n).

use super::bpe_tables::{
    merge_short, with_span_table, CharKeys, PairTable, SpanTable, CACHE_MAX_SPAN, DEAD,
    LONG_MAX_SPAN, SHORT,
};
use super::simple::PieceLookup;
use super::vocab::{PieceEntry, PieceType, Segmenter, SpPiece};
use crate::error::{Error, Result};
use crate::models::bpe::backtrack::{Backtrack, Lazy};
use crate::models::bpe::engine::Word;
use ahash::AHashMap;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// A byte trie over the user-defined pieces, for longest-prefix matching.
#[derive(Default)]
struct PrefixMatcher {
    /// (node, byte) → child node.
    edges: AHashMap<(u32, u8), u32>,
    /// Whether a node ends a piece.
    terminal: Vec<bool>,
}

impl PrefixMatcher {
    fn new<'a>(pieces: impl Iterator<Item = &'a str>) -> Self {
        let mut m = PrefixMatcher {
            edges: AHashMap::new(),
            terminal: vec![false],
        };
        for p in pieces {
            let mut node = 0u32;
            for b in p.bytes() {
                let next = m.terminal.len() as u32;
                node = *m.edges.entry((node, b)).or_insert_with(|| next);
                if node == next {
                    m.terminal.push(false);
                }
            }
            m.terminal[node as usize] = true;
        }
        m
    }

    fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// Length of the longest piece that is a prefix of `s`, if any.
    fn longest(&self, s: &[u8]) -> Option<usize> {
        let mut node = 0u32;
        let mut best = None;
        for (i, &b) in s.iter().enumerate() {
            match self.edges.get(&(node, b)) {
                Some(&n) => node = n,
                None => break,
            }
            if self.terminal[node as usize] {
                best = Some(i + 1);
            }
        }
        best
    }
}

pub struct SpBpe {
    /// String → id: `normal` holds every NORMAL / USER_DEFINED / UNUSED piece (the merge
    /// targets), `reserved` the CONTROL / UNKNOWN / BYTE ones, which win when mapping a
    /// string to an id. Shared with the processor (`with_lookup`), `normal` holds every
    /// piece and `reserved` none: no string repeats there, so the answers are the same, and
    /// a merge target is a `normal` entry of a mergeable kind (`mergeable_id`).
    lookup: Arc<PieceLookup>,
    kinds: Vec<PieceType>,
    /// Byte length of each piece.
    lens: Vec<u32>,
    unk_id: u32,
    byte_fallback: bool,
    byte_ids: [u32; 256],
    user_defined: PrefixMatcher,
    /// Lookup key of each single character that takes part in some merge: its piece id, or a
    /// "virtual" key `>= kinds.len()` for a character that is not itself a piece.
    chars: CharKeys,
    /// Output id of each key below `DEAD`: for a piece, itself unless a reserved piece has
    /// the same string (reserved wins, as in `piece_to_id`); for a virtual key, the id its
    /// character gets (reserved piece or unk).
    key_out: Vec<u32>,
    /// Whether every `DEAD` symbol is unknown: no user-defined pieces, and no reserved piece
    /// is a single character (so `piece_to_id` of a dead character is always unk).
    dead_is_unk: bool,
    /// (left key, right key) → merged piece id.
    pairs: PairTable,
    /// Rank of each piece's score (0 = highest); only merged pieces are asked.
    ranks: Vec<u32>,
    has_unused: bool,
    /// Where the normalized string may be cut into independent spans (see `Cut`).
    cut: Cut,
    /// Key of this model's per-thread span caches (`bpe_tables::with_span_table`).
    uid: u64,
    /// The character of each virtual key (`kinds.len() + i`).
    virtual_chars: Vec<char>,
    /// The encoder for long spans (see `merge_long`), built on first use.
    backtrack: Lazy,
    /// Short spans missed by the span cache while `backtrack` was not built yet (see
    /// `short_backtracker`).
    short_misses: AtomicU32,
    /// Every multi-character mergeable piece containing `▁▁` is all `▁` and ranks after
    /// every other one (Llama's whitespace runs; see `merge_space_run`).
    space_runs_last: bool,
    /// Lookup key of `▁` (`DEAD` if no piece has it).
    space_key: u32,
    /// By byte: an ASCII character with a live key (not `DEAD`). A byte table, not a bit
    /// mask: one load per byte where a 128-bit shift costs several instructions.
    ascii_live: [bool; 256],
    /// Bits `2k` / `2k + 1`: some mergeable piece has the character of key `k` followed /
    /// preceded by another character (see `joinable`).
    glue: Box<[u64]>,
    /// Whether a span may be cut further where no merge can join (`joinable`): the string is
    /// cut into spans, and no user-defined or UNUSED piece is there (see `merge_missed`).
    chunks: bool,
}

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Where no merge and no user-defined match can ever cross, so that the string may be cut
/// there and each span segmented on its own (and cached).
///
/// Why this is exact: the first merge that would cross a cut joins a symbol ending at the cut
/// with one starting there, so its pair-table entry has a left part ending with the character
/// before the cut and a right part starting with the one after it; a user-defined match across
/// a cut contains both characters. The detector (`SpBpe::new`) allows a cut kind only when no
/// pair-table entry and no user-defined piece has that shape, so whole-string merging never
/// crosses a cut: every candidate, and hence the heap order restricted to a span, is the same
/// as for the span alone (ties go leftmost, and positions keep their order). User-defined
/// longest-prefix matching starting inside a span never reaches past it, so it matches the
/// same. Unknown fusion and byte fallback run afterwards over the whole string, as before.
/// UNUSED resegmentation uses the split of the last queued candidate for that piece, which
/// is global state; the cut is allowed only when every UNUSED piece has at most one split in
/// the pair table, so that state cannot depend on other spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Merges may cross ▁ boundaries: segment the whole string.
    Never,
    /// Cut before a ▁ that follows a non-▁ character ("word▁|▁next" → "…d", "▁▁next").
    BeforeSpace,
    /// Cut after a ▁ that precedes a non-▁ character (treat_whitespace_as_suffix models).
    AfterSpace,
}

/// Spans longer than this many symbols (or any span of a vocabulary with UNUSED pieces) go
/// to the heap engine.
const _: () = assert!(SHORT >= 2);

/// Short spans that take the merge loop before the backtracking encoder is built for them
/// (see `SpBpe::short_backtracker`).
const WARM_MISSES: u32 = 4096;

/// `▁` in UTF-8.
const SPACE: &[u8] = "\u{2581}".as_bytes();

/// Whether `▁` starts at byte `i` (byte by byte: a slice comparison would call memcmp).
#[inline]
fn is_space_at(bytes: &[u8], i: usize) -> bool {
    bytes.get(i) == Some(&0xE2)
        && bytes.get(i + 1) == Some(&0x96)
        && bytes.get(i + 2) == Some(&0x81)
}

/// The first byte at or after `i` where `▁` starts, or `bytes.len()`. Eight bytes at a time:
/// `(x - 0x01…) & !x & 0x80…` flags the zero bytes of `x` (the word XOR `0xE2…`), exactly up
/// to and including the first one (a borrow can only flag bytes after it), so its lowest set
/// bit is the first `0xE2` of the word.
#[inline]
fn next_space(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const LEAD: u64 = 0xE2E2_E2E2_E2E2_E2E2;
    let n = bytes.len();
    loop {
        let word = bytes
            .get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes);
        let Some(word) = word else {
            // Fewer than eight bytes left.
            while i < n {
                if is_space_at(bytes, i) {
                    return i;
                }
                i += 1;
            }
            return n;
        };
        let x = word ^ LEAD;
        let hit = x.wrapping_sub(ONES) & !x & HIGH;
        if hit == 0 {
            i += 8;
            continue;
        }
        let j = i + (hit.trailing_zeros() / 8) as usize;
        if is_space_at(bytes, j) {
            return j;
        }
        i = j + 1;
    }
}

fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

#[derive(Default)]
struct Scratch {
    word: Word,
    /// Merged UNUSED piece → the (left, right) symbols of its last queued candidate.
    rev: AHashMap<u32, (u32, u32)>,
    stack: Vec<(u32, usize, usize)>,
    out_ids: Vec<(u32, usize, usize)>,
    /// `merge_long`: the byte ranges of a span's `DEAD` symbols.
    dead: Vec<(usize, usize)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Each piece's score rank: how many distinct scores (in `f32::total_cmp`'s order, -0.0
/// counted as 0.0) are higher. One sort of (score key, id) integers, then one pass.
fn score_ranks(pieces: &[PieceEntry]) -> Vec<u32> {
    // `total_cmp`'s order as an unsigned integer (the standard transform), inverted so
    // that the highest score sorts first.
    let key = |s: f32| {
        let bits = if s == 0.0 { 0 } else { s.to_bits() };
        let ascending = if bits >> 31 == 1 {
            !bits
        } else {
            bits | 1 << 31
        };
        !ascending
    };
    let mut order: Vec<u64> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| (u64::from(key(p.score)) << 32) | i as u64)
        .collect();
    order.sort_unstable();
    let mut ranks = vec![0u32; pieces.len()];
    let mut rank = 0u32;
    let mut prev = None;
    for &k in &order {
        let score = (k >> 32) as u32;
        if prev.is_some_and(|p| p != score) {
            rank += 1;
        }
        prev = Some(score);
        if let Some(r) = ranks.get_mut((k & u64::from(u32::MAX)) as usize) {
            *r = rank;
        }
    }
    ranks
}

/// The one character of `s`, if it has exactly one.
#[inline]
fn single_char(s: &str) -> Option<char> {
    let mut cs = s.chars();
    match (cs.next(), cs.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    }
}

fn is_mergeable(kind: PieceType) -> bool {
    matches!(
        kind,
        PieceType::Normal | PieceType::UserDefined | PieceType::Unused
    )
}

impl SpBpe {
    /// The segmenter of `pieces` with its own string maps (a string may be both a mergeable
    /// piece and a reserved one; reserved wins, as in `piece_to_id`).
    pub fn new(pieces: &[PieceEntry], unk_id: u32, byte_fallback: bool) -> Result<SpBpe> {
        let mut normal: AHashMap<String, u32> = AHashMap::with_capacity(pieces.len());
        let mut reserved: AHashMap<String, u32> = AHashMap::new();
        for (i, p) in pieces.iter().enumerate() {
            if p.piece.is_empty() {
                return Err(Error::invalid(format!(
                    "sentencepiece BPE: piece {i} must not be empty"
                )));
            }
            let map = if is_mergeable(p.kind) {
                &mut normal
            } else {
                &mut reserved
            };
            if map.insert(p.piece.clone(), i as u32).is_some() {
                return Err(Error::invalid(format!(
                    "sentencepiece BPE: piece `{}` is already defined",
                    p.piece
                )));
            }
        }
        let lookup = PieceLookup {
            reserved,
            normal,
            unused: Default::default(),
            unk_id,
        };
        Self::build(pieces, unk_id, byte_fallback, Arc::new(lookup))
    }

    /// The segmenter of `pieces` over the processor's lookup, which must hold every piece
    /// once in `normal` (`SentencePiece::from_data` for BPE: one map, no string twice, no
    /// empty piece) with `unk_id`: no second set of string maps is built. Anything else
    /// (a `reserved` map, a skipped NUL placeholder, another unknown id) goes to `new`.
    pub(crate) fn with_lookup(
        pieces: &[PieceEntry],
        unk_id: u32,
        byte_fallback: bool,
        lookup: &Arc<PieceLookup>,
    ) -> Result<SpBpe> {
        let complete = lookup.reserved.is_empty()
            && lookup.unk_id == unk_id
            && lookup.normal.len() == pieces.len()
            && !pieces.iter().any(|p| p.piece.is_empty());
        if !complete {
            return Self::new(pieces, unk_id, byte_fallback);
        }
        Self::build(pieces, unk_id, byte_fallback, Arc::clone(lookup))
    }

    /// Whether `s` is a merge target, and its id.
    #[inline]
    fn mergeable_id(lookup: &PieceLookup, kinds: &[PieceType], s: &str) -> Option<u32> {
        let &id = lookup.normal.get(s)?;
        kinds
            .get(id as usize)
            .is_some_and(|&k| is_mergeable(k))
            .then_some(id)
    }

    fn build(
        pieces: &[PieceEntry],
        unk_id: u32,
        byte_fallback: bool,
        lookup: Arc<PieceLookup>,
    ) -> Result<SpBpe> {
        let n = u32::try_from(pieces.len())
            .map_err(|_| Error::invalid("sentencepiece BPE: too many pieces"))?;
        let kinds: Vec<PieceType> = pieces.iter().map(|p| p.kind).collect();
        if kinds.get(unk_id as usize) != Some(&PieceType::Unknown) {
            return Err(Error::invalid(format!(
                "sentencepiece BPE: unk id {unk_id} is not an UNKNOWN piece"
            )));
        }
        let mut byte_ids = [unk_id; 256];
        if byte_fallback {
            for (b, slot) in byte_ids.iter_mut().enumerate() {
                let s = byte_piece(b as u8);
                match lookup.get(&s).as_ref() {
                    Some(&id) if kinds[id as usize] == PieceType::Byte => *slot = id,
                    _ => {
                        return Err(Error::invalid(
                            "sentencepiece BPE: there are not 256 byte pieces although \
                             `byte_fallback` is true",
                        ))
                    }
                }
            }
        }
        let user_defined = PrefixMatcher::new(
            pieces
                .iter()
                .filter(|p| p.kind == PieceType::UserDefined)
                .map(|p| p.piece.as_str()),
        );

        // Scores → ranks: equal float32 scores share a rank, so ties go to the leftmost pair.
        // (-0.0 and 0.0 compare equal in sentencepiece's float comparison.)
        let ranks = score_ranks(pieces);

        let mut sb = SpBpe {
            lookup,
            lens: pieces.iter().map(|p| p.piece.len() as u32).collect(),
            kinds,
            unk_id,
            byte_fallback,
            byte_ids,
            user_defined,
            chars: CharKeys::new(&AHashMap::new()),
            key_out: Vec::new(),
            dead_is_unk: false,
            pairs: PairTable::new(&[], 0, &[]),
            ranks,
            has_unused: false,
            cut: Cut::Never,
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            virtual_chars: Vec::new(),
            backtrack: Lazy::default(),
            short_misses: AtomicU32::new(0),
            space_runs_last: false,
            space_key: DEAD,
            ascii_live: [false; 256],
            glue: Box::default(),
            chunks: false,
        };
        let mut char_ids: AHashMap<char, u32> = AHashMap::new();
        let mut virtual_out: Vec<u32> = Vec::new();
        let mut pairs: Vec<(u32, u32, u32)> = Vec::new();
        let mut unused_splits: AHashMap<u32, u32> = AHashMap::new();
        let (mut cross_before, mut cross_after) = (false, false);
        // Every single-character mergeable piece is its character's key (the one string
        // `normal` gives that id); other characters get virtual keys as splits meet them.
        for (i, p) in pieces.iter().enumerate() {
            if let (true, Some(c)) = (is_mergeable(p.kind), single_char(&p.piece)) {
                if sb.lookup.normal.get(&p.piece) == Some(&(i as u32)) {
                    char_ids.insert(c, i as u32);
                }
            }
        }
        // The lookup id of a symbol string, if it can be a symbol: any single character (a
        // mergeable piece's key, or a virtual one), or a mergeable piece.
        let mut symbol_id = |s: &str, sb: &SpBpe| -> Option<u32> {
            let Some(c) = single_char(s) else {
                return Self::mergeable_id(&sb.lookup, &sb.kinds, s);
            };
            Some(*char_ids.entry(c).or_insert_with(|| {
                virtual_out.push(sb.piece_to_id(s));
                n + virtual_out.len() as u32 - 1
            }))
        };
        for (i, p) in pieces.iter().enumerate() {
            if !matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            ) {
                continue;
            }
            if p.kind == PieceType::Unused {
                sb.has_unused = true;
            }
            for (b, _) in p.piece.char_indices().skip(1) {
                let (l, r) = p.piece.split_at(b);
                // A right part is looked up even when the left one is no symbol if it is a
                // single character (which then gets its key); a longer one only matters in
                // a pair.
                let lid = symbol_id(l, &sb);
                let rid = if lid.is_some() || single_char(r).is_some() {
                    symbol_id(r, &sb)
                } else {
                    None
                };
                let (Some(lid), Some(rid)) = (lid, rid) else {
                    continue;
                };
                pairs.push((lid, rid, i as u32));
                if p.kind == PieceType::Unused {
                    *unused_splits.entry(i as u32).or_insert(0) += 1;
                }
                cross_before |= !l.ends_with('\u{2581}') && r.starts_with('\u{2581}');
                cross_after |= l.ends_with('\u{2581}') && !r.starts_with('\u{2581}');
            }
        }
        for p in pieces.iter().filter(|p| p.kind == PieceType::UserDefined) {
            for (b, _) in p.piece.char_indices().skip(1) {
                let (l, r) = p.piece.split_at(b);
                cross_before |= !l.ends_with('\u{2581}') && r.starts_with('\u{2581}');
                cross_after |= l.ends_with('\u{2581}') && !r.starts_with('\u{2581}');
            }
        }
        if virtual_out.len() as u64 + u64::from(n) >= u64::from(DEAD) {
            return Err(Error::invalid("sentencepiece BPE: too many pieces"));
        }
        sb.cut = if unused_splits.values().any(|&c| c > 1) {
            Cut::Never
        } else if !cross_before {
            Cut::BeforeSpace
        } else if !cross_after {
            Cut::AfterSpace
        } else {
            Cut::Never
        };
        // Keys and merged ids are below n + virtual_out.len() (< DEAD, checked above).
        sb.pairs = PairTable::new(&pairs, n + virtual_out.len() as u32, &sb.ranks);
        sb.chars = CharKeys::new(&char_ids);
        sb.space_key = sb.chars.at(SPACE, 0).0;
        for b in 0..128u8 {
            sb.ascii_live[usize::from(b)] = sb.chars.at(&[b], 0).0 != DEAD;
        }
        sb.virtual_chars = vec!['\0'; virtual_out.len()];
        for (&c, &k) in &char_ids {
            if let Some(slot) = k
                .checked_sub(n)
                .and_then(|i| sb.virtual_chars.get_mut(i as usize))
            {
                *slot = c;
            }
        }
        sb.key_out = (0..n)
            .map(|k| match sb.kinds.get(k as usize) {
                Some(PieceType::Normal | PieceType::UserDefined | PieceType::Unused) => pieces
                    .get(k as usize)
                    .and_then(|p| sb.lookup.reserved.get(&p.piece))
                    .copied()
                    .unwrap_or(k),
                // Not a key (keys below n are mergeable pieces).
                _ => sb.unk_id,
            })
            .chain(virtual_out)
            .collect();
        // The best (lowest) rank of a whitespace-run piece against the worst of the others.
        let (mut runs_best, mut others_worst) = (u32::MAX, 0u32);
        let mut runs_pure = true;
        for (p, &rank) in pieces.iter().zip(&sb.ranks) {
            let mergeable = matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            );
            if !mergeable || p.piece.chars().nth(1).is_none() {
                continue;
            }
            if p.piece.contains("\u{2581}\u{2581}") {
                runs_pure &= p.piece.chars().all(|c| c == '\u{2581}');
                runs_best = runs_best.min(rank);
            } else {
                others_worst = others_worst.max(rank);
            }
        }
        sb.space_runs_last = runs_pure && (runs_best == u32::MAX || runs_best > others_worst);
        sb.chunks = sb.cut != Cut::Never && sb.user_defined.is_empty() && !sb.has_unused;
        if sb.chunks {
            sb.glue = sb.glue_bits(pieces);
        }
        // No reserved piece (CONTROL / UNKNOWN / BYTE) is a single character.
        sb.dead_is_unk = sb.user_defined.is_empty()
            && !pieces
                .iter()
                .any(|p| !is_mergeable(p.kind) && p.piece.chars().nth(1).is_none());
        Ok(sb)
    }

    /// sentencepiece's PieceToId: reserved pieces first, then the others, else unk.
    fn piece_to_id(&self, s: &str) -> u32 {
        self.lookup.get(s).unwrap_or(self.unk_id)
    }

    /// The output id of a live symbol with lookup key `key` and text `text`: what
    /// `piece_to_id(text)` gives (a symbol with a key below `DEAD` has that key's string as
    /// its text, so `key_out` holds the answer).
    #[inline]
    fn output_id(&self, key: u32, text: &[u8]) -> u32 {
        if key == DEAD {
            if self.dead_is_unk {
                self.unk_id
            } else {
                // `text` lies between character boundaries of a `str`, so it is UTF-8.
                std::str::from_utf8(text).map_or(self.unk_id, |s| self.piece_to_id(s))
            }
        } else {
            self.key_out
                .get(key as usize)
                .copied()
                .unwrap_or(self.unk_id)
        }
    }

    fn kind(&self, id: u32) -> Option<PieceType> {
        self.kinds.get(id as usize).copied()
    }

    /// `glue` from the mergeable pieces (with `chars` built): for every two adjacent
    /// characters of a piece, the first is followed and the second preceded. A character
    /// without a key never merges, so it marks nothing.
    fn glue_bits(&self, pieces: &[PieceEntry]) -> Box<[u64]> {
        let keys = self.key_out.len();
        let mut glue = vec![0u64; (keys * 2).div_ceil(64)].into_boxed_slice();
        let mut mark = |k: u32, side: usize| {
            let bit = k as usize * 2 + side;
            if let Some(w) = glue.get_mut(bit / 64) {
                *w |= 1 << (bit % 64);
            }
        };
        for p in pieces.iter().filter(|p| {
            matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            )
        }) {
            let bytes = p.piece.as_bytes();
            let mut prev = DEAD;
            for (i, _) in p.piece.char_indices() {
                let key = self.chars.at(bytes, i).0;
                if prev != DEAD && key != DEAD {
                    mark(prev, 0);
                    mark(key, 1);
                }
                prev = key;
            }
        }
        glue
    }

    /// Whether some merge could join a symbol ending with the character of key `a` to one
    /// starting with the character of key `b`: such a merge makes a piece that holds the two
    /// characters side by side, so when no piece continues `a` or none leads into `b`, no
    /// merge crosses between them, and the two sides segment independently (the argument of
    /// `Cut`, at a finer place). `DEAD` joins nothing.
    #[inline]
    fn joinable(&self, a: u32, b: u32) -> bool {
        let bit = |k: u32, side: usize| {
            let i = k as usize * 2 + side;
            self.glue
                .get(i / 64)
                .is_some_and(|w| (w >> (i % 64)) & 1 == 1)
        };
        bit(a, 0) && bit(b, 1)
    }
}

impl Segmenter for SpBpe {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        let bytes = normalized.as_bytes();
        self.with_runs(bytes, |sc| self.emit(bytes, out, sc))
    }
}

/// Run `f` on this thread's scratch space, or on fresh space when it is unavailable (a
/// re-entrant call, or a thread being torn down) instead of a panic; big leftovers are freed.
fn with_scratch<R>(mut f: impl FnMut(&mut Scratch) -> R) -> R {
    let mut run = |sc: &mut Scratch| {
        let r = f(sc);
        sc.word.trim();
        if sc.out_ids.capacity() > 1 << 16 {
            sc.out_ids = Vec::new();
        }
        if sc.dead.capacity() > 1 << 16 {
            sc.dead = Vec::new();
        }
        r
    };
    SCRATCH
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut sc) => run(&mut sc),
            Err(_) => run(&mut Scratch::default()),
        })
        .unwrap_or_else(|_| run(&mut Scratch::default()))
}

impl SpBpe {
    /// The runs of `normalized` in this thread's scratch space, then `f` on them; nothing for
    /// an empty input.
    fn with_runs(
        &self,
        normalized: &[u8],
        mut f: impl FnMut(&mut Scratch) -> Result<()>,
    ) -> Result<()> {
        if normalized.is_empty() {
            return Ok(());
        }
        if u32::try_from(normalized.len()).is_err() {
            return Err(Error::invalid("sentencepiece BPE: input longer than 4 GiB"));
        }
        with_scratch(|sc| {
            self.runs(normalized, sc);
            f(sc)
        })
    }

    /// Segment `normalized` and append only the output ids (what `segment` gives, without the
    /// spans): the same runs, then the same unknown fusion and byte fallback as `emit`.
    /// `normalized` is the bytes of a normalized `str` (the segmenter reads bytes only, so a
    /// caller may build them without a UTF-8 check; see `SpNormalizer::normalize_bytes`).
    pub fn segment_ids(&self, normalized: &[u8], out: &mut Vec<u32>) -> Result<()> {
        self.with_runs(normalized, |sc| {
            let mut prev_unk = false;
            for &(id, s, e) in &sc.out_ids {
                // As in `emit`: a CONTROL symbol is unknown.
                let id = if self.kind(id) == Some(PieceType::Control) {
                    self.unk_id
                } else {
                    id
                };
                if id == self.unk_id {
                    if self.byte_fallback {
                        let piece = normalized.get(s..e).unwrap_or_default();
                        out.extend(piece.iter().map(|&b| self.byte_ids[usize::from(b)]));
                    } else if !prev_unk {
                        out.push(id);
                    }
                    prev_unk = true;
                } else {
                    out.push(id);
                    prev_unk = false;
                }
            }
            Ok(())
        })
    }

    /// The final symbols of `bytes` as (output id, start, end) in `sc.out_ids`, before unknown
    /// fusion and byte fallback: span by span through this thread's cache when the string
    /// may be cut, else as one sequence.
    fn runs(&self, bytes: &[u8], sc: &mut Scratch) {
        sc.out_ids.clear();
        if self.cut == Cut::Never {
            self.merge_span(bytes, 0, sc);
            return;
        }
        with_span_table(self.uid, |mut table| {
            let mut start = 0;
            while start < bytes.len() {
                let end = self.span_end(bytes, start);
                let span = bytes.get(start..end).unwrap_or_default();
                match table.as_deref_mut() {
                    // A long indented span is not kept whole: its two sides are short spans
                    // (found in the cache), and the long-span table's room is for the others.
                    Some(t) if span.len() > CACHE_MAX_SPAN && self.split_indented(span) => {
                        self.merge_indented(t, span, start, sc)
                    }
                    Some(t) if span.len() <= LONG_MAX_SPAN => {
                        if !t.get(span, start, &mut sc.out_ids) {
                            self.merge_and_keep(t, span, start, sc);
                        }
                    }
                    Some(t) => self.merge_missed(t, span, start, sc),
                    None => self.merge_span(span, start, sc),
                }
                start = end;
            }
        });
    }

    /// A span (or a piece of one) of at most `LONG_MAX_SPAN` bytes from the cache, else
    /// merged and remembered.
    fn merge_cached(&self, t: &mut SpanTable, span: &[u8], base: usize, sc: &mut Scratch) {
        if !t.get(span, base, &mut sc.out_ids) {
            self.merge_and_keep(t, span, base, sc);
        }
    }

    /// `merge_missed`, then the result remembered. Not inlined: the hit path of the span
    /// loop stays small.
    #[inline(never)]
    fn merge_and_keep(&self, t: &mut SpanTable, span: &[u8], base: usize, sc: &mut Scratch) {
        let from = sc.out_ids.len();
        self.merge_missed(t, span, base, sc);
        if let Some(runs) = sc.out_ids.get(from..) {
            t.set(span, runs);
        }
    }

    /// A span the cache does not hold. With `chunks`, it is cut where no merge can join
    /// (`joinable`: mostly around characters no piece continues, such as a newline, and
    /// between CJK characters that no piece holds side by side), and each part goes through
    /// the cache on its own, as does the word of an indented span (see `merge_space_run`):
    /// in a stream of new texts those parts recur far more often than the spans do. A single
    /// character needs no cache.
    fn merge_missed(&self, t: &mut SpanTable, span: &[u8], base: usize, sc: &mut Scratch) {
        if !self.chunks {
            return self.merge_span(span, base, sc);
        }
        // An ASCII word has no such cut worth the search; `merge_span` would test it again.
        if self.plain_ascii(span) {
            if span.len() <= 4 * SHORT && self.backtrack_span(span, base, sc) {
                return;
            }
            return self.merge_span(span, base, sc);
        }
        if self.split_indented(span) {
            return self.merge_indented(t, span, base, sc);
        }
        let (mut from, mut i, mut prev, mut count) = (0usize, 0usize, DEAD, 0usize);
        while i < span.len() {
            let (key, len) = self.chars.at(span, i);
            if i > 0 && !self.joinable(prev, key) {
                let part = span.get(from..i).unwrap_or_default();
                self.merge_part(t, part, base + from, prev, count, sc);
                (from, count) = (i, 0);
            }
            prev = key;
            count += 1;
            i += len;
        }
        if from == 0 {
            return self.merge_span(span, base, sc);
        }
        let part = span.get(from..).unwrap_or_default();
        self.merge_part(t, part, base + from, prev, count, sc);
    }

    /// One part of a cut span: `count` characters, the last of key `last`.
    #[inline]
    fn merge_part(
        &self,
        t: &mut SpanTable,
        part: &[u8],
        base: usize,
        last: u32,
        count: usize,
        sc: &mut Scratch,
    ) {
        if count == 1 {
            let id = self.output_id(last, part);
            sc.out_ids.push((id, base, base + part.len()));
        } else if part.len() <= LONG_MAX_SPAN {
            self.merge_cached(t, part, base, sc);
        } else {
            self.merge_span(part, base, sc);
        }
    }

    /// Whether `merge_space_run` splits `span` (a `BeforeSpace` span or a part of one: no
    /// `▁` after its leading run): at least two `▁`, then something else (so that neither
    /// side of the split is split again).
    #[inline]
    fn split_indented(&self, span: &[u8]) -> bool {
        self.chunks
            && self.cut == Cut::BeforeSpace
            && self.space_runs_last
            && self.user_defined.is_empty()
            && is_space_at(span, 0)
            && is_space_at(span, 3)
            && !span.ends_with(SPACE)
    }

    /// `merge_space_run`'s split of an indented span, each side through the cache.
    fn merge_indented(&self, t: &mut SpanTable, span: &[u8], base: usize, sc: &mut Scratch) {
        let tail = (space_run_len(span) * 3).saturating_sub(3);
        self.merge_run_sides(span, tail, base, sc, |side, at, sc| {
            self.merge_cached(t, side, at, sc)
        });
    }

    /// The two sides of an indented span `▁^k B` split at `tail` (before its last leading
    /// `▁`), each by `merge`: the word with one `▁` (`▁B`), then the other spaces (with that
    /// `▁` when `▁B`'s result leaves it alone), whose runs go first (see `merge_space_run`).
    fn merge_run_sides(
        &self,
        span: &[u8],
        tail: usize,
        base: usize,
        sc: &mut Scratch,
        mut merge: impl FnMut(&[u8], usize, &mut Scratch),
    ) {
        let head = span.get(..tail).unwrap_or_default();
        let word = span.get(tail..).unwrap_or_default();
        let from = sc.out_ids.len();
        merge(word, base + tail, sc);
        let head = match sc.out_ids.get(from) {
            Some(&(_, s, e)) if e - s == SPACE.len() => {
                sc.out_ids.remove(from);
                span.get(..tail + 3).unwrap_or(head)
            }
            _ => head,
        };
        let mid = sc.out_ids.len();
        merge(head, base, sc);
        if let Some(runs) = sc.out_ids.get_mut(from..) {
            runs.rotate_left(mid - from);
        }
    }

    /// The whole-string path through the heap engine, whatever `cut` says and however short
    /// the text (the reference the span and short paths are tested against).
    #[cfg(test)]
    fn segment_whole(&self, text: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        let mut sc = Scratch::default();
        sc.out_ids.clear();
        self.merge_span_heap(text.as_bytes(), 0, &mut sc);
        self.emit(text.as_bytes(), out, &mut sc)
    }

    /// End of the span that starts at `start` (a char boundary): the next cut, or the end.
    /// ▁ is three bytes that occur in UTF-8 only as that character, so byte matching is exact.
    fn span_end(&self, bytes: &[u8], start: usize) -> usize {
        let n = bytes.len();
        let mut i = start;
        match self.cut {
            Cut::BeforeSpace => {
                // Skip the leading ▁ run, then cut at the next ▁.
                while is_space_at(bytes, i) {
                    i += 3;
                }
                next_space(bytes, i)
            }
            Cut::AfterSpace => {
                // Skip to the first ▁, then past its run: the cut is after the run.
                i = next_space(bytes, i);
                if i == n {
                    return n;
                }
                while is_space_at(bytes, i) {
                    i += 3;
                }
                i
            }
            Cut::Never => n,
        }
    }

    /// The initial symbol at byte `i`: a user-defined match (frozen), else one character.
    #[inline]
    fn symbol_at(&self, bytes: &[u8], i: usize) -> (u32, usize) {
        if !self.user_defined.is_empty() {
            if let Some(len) = bytes.get(i..).and_then(|b| self.user_defined.longest(b)) {
                return (DEAD, len);
            }
        }
        self.chars.at(bytes, i)
    }

    /// Merge `bytes` (a span starting at byte `base` of the normalized string) as one
    /// sequence and append its final symbols, UNUSED pieces split back, to `sc.out_ids`.
    /// Short spans of vocabularies without UNUSED pieces take `merge_short`, which applies
    /// the same rule as the heap engine (see there); the others take the heap engine.
    fn merge_span(&self, bytes: &[u8], base: usize, sc: &mut Scratch) {
        if self.has_unused {
            return self.merge_span_heap(bytes, base, sc);
        }
        let plain = self.user_defined.is_empty();
        // Without user-defined pieces a symbol is one character of at most 4 bytes: a span
        // longer than this has more than `SHORT` symbols, so skip reading them here.
        if plain && bytes.len() > 4 * SHORT {
            return self.merge_long(bytes, base, sc);
        }
        // What the loop below finds for most words, seen without reading each symbol's key:
        // an optional `▁` (live) and live ASCII characters have no `DEAD` symbol, no `▁▁` and
        // no other multi-byte character. Such a span of more than `SHORT` symbols would go to
        // `merge_long`, which gives it whole to the same encoder (a stretch without `DEAD`).
        if plain && self.plain_ascii(bytes) && self.backtrack_span(bytes, base, sc) {
            return;
        }
        let mut keys = [0u32; SHORT];
        let mut lens = [0u32; SHORT];
        let mut n = 0;
        let mut i = 0;
        // Whether some symbol is `DEAD`, or two `▁` follow each other, or is a character of
        // more than one byte other than `▁`.
        let (mut dead, mut spaces, mut wide, mut prev) = (false, false, false, DEAD);
        while i < bytes.len() && n < SHORT {
            let (key, len) = if plain {
                self.chars.at(bytes, i)
            } else {
                self.symbol_at(bytes, i)
            };
            keys[n] = key;
            lens[n] = len as u32;
            dead |= key == DEAD;
            spaces |= key == self.space_key && prev == key;
            wide |= len > 1 && key != self.space_key;
            prev = key;
            n += 1;
            i += len;
        }
        if i < bytes.len() {
            return self.merge_long(bytes, base, sc);
        }
        // A stretch of live symbols without `▁▁`: the backtracking encoder gives the same run
        // (see `backtracker`), for fewer instructions than the merge loop on ASCII words (on
        // words of multi-byte characters the merge loop is the cheaper one).
        if plain && !dead && !spaces && !wide && self.backtrack_span(bytes, base, sc) {
            return;
        }
        let m = merge_short(&mut keys, &mut lens, n, &self.pairs, &self.ranks);
        let mut pos = 0usize;
        for (&key, &len) in keys.iter().zip(&lens).take(m) {
            let end = pos + len as usize;
            let id = self.output_id(key, bytes.get(pos..end).unwrap_or_default());
            sc.out_ids.push((id, base + pos, base + end));
            pos = end;
        }
    }

    /// Whether `bytes` is an optional leading `▁` with a live key, then only ASCII characters
    /// with live keys.
    #[inline]
    fn plain_ascii(&self, bytes: &[u8]) -> bool {
        let rest = match bytes.strip_prefix(SPACE) {
            Some(rest) if self.space_key != DEAD => rest,
            Some(_) => return false,
            None => bytes,
        };
        rest.iter().all(|&b| self.ascii_live[usize::from(b)])
    }

    /// The backtracking encoder (`models::bpe::backtrack`) over the pieces a stretch of live
    /// symbols without `▁▁` can contain, when the model meets its preconditions.
    ///
    /// Why that vocabulary suffices: the merges of a stretch only ever form pieces whose
    /// strings occur in it. A stretch between `DEAD` symbols holds no user-defined piece's
    /// string (user-defined matching is tried at every one of its character boundaries), and
    /// leaving out the pieces containing `▁▁` drops the whitespace runs that Llama-style
    /// models score all alike (a piece tied with its own part breaks the encoder's
    /// precondition, and the build would refuse the whole model). Both sets are closed under
    /// taking substrings, so for a stretch without `▁▁` every merge candidate, and hence
    /// the whole run, is the same with the smaller vocabulary. Ranks are the score ranks:
    /// a pair's rank is its merged piece's, ties leftmost, which is the encoder's model of a
    /// merge order. UNUSED pieces (resegmented from the merge history) get no encoder.
    fn backtracker(&self) -> Option<&Backtrack> {
        if self.has_unused {
            return None;
        }
        self.backtrack.get_or_build(|| {
            let n = self.kinds.len() as u32;
            let chars: Vec<String> = self.virtual_chars.iter().map(|c| c.to_string()).collect();
            // The NORMAL pieces (no UNUSED ones here), in no particular order.
            let vocab = self
                .lookup
                .normal
                .iter()
                .filter(|&(s, &id)| {
                    self.kind(id) == Some(PieceType::Normal) && !s.contains("\u{2581}\u{2581}")
                })
                .map(|(s, &id)| (s.as_str(), id))
                .chain(
                    chars
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (s.as_str(), n + i as u32)),
                );
            let rank = |m: u32| self.ranks.get(m as usize).copied().unwrap_or(u32::MAX);
            Backtrack::build(
                vocab,
                |c| {
                    let mut buf = [0u8; 4];
                    let (key, _) = self.chars.at(c.encode_utf8(&mut buf).as_bytes(), 0);
                    (key != DEAD).then_some(key)
                },
                |a, b| self.pairs.get_ranked(a, b, &self.ranks),
                self.pairs
                    .entries()
                    .into_iter()
                    .map(|(l, r, m)| (l, r, rank(m), m)),
            )
        })
    }

    /// The backtracking encoder for a short span (at most `4 * SHORT` bytes), which the
    /// merge loop segments alike (the encoder only saves instructions there): the encoder
    /// once it is built, else `None` until it has been asked `WARM_MISSES` times (a missed
    /// span asks up to three times on its way to the merge loop), then built.
    /// Building walks the whole vocabulary (~70M instructions for Llama 2, more than the
    /// load), which a tokenizer loaded to encode a few texts should not pay on its first
    /// word; a span of more than `SHORT` symbols still builds it at once (`merge_long`).
    #[inline]
    fn short_backtracker(&self) -> Option<&Backtrack> {
        if let Some(bt) = self.backtrack.get() {
            return Some(bt);
        }
        if self.short_misses.fetch_add(1, Ordering::Relaxed) < WARM_MISSES {
            return None;
        }
        self.backtracker()
    }

    /// A span of live symbols without `▁▁` by the backtracking encoder (`short_backtracker`),
    /// its pieces pushed from `base` on; false (and nothing pushed) when there is none, it
    /// is not built yet, or it gives up.
    #[inline]
    fn backtrack_span(&self, bytes: &[u8], base: usize, sc: &mut Scratch) -> bool {
        let Some(bt) = self.short_backtracker() else {
            return false;
        };
        let start = sc.out_ids.len();
        let mut pos = base;
        let out = &mut sc.out_ids;
        let ok = bt.encode(bytes, &mut sc.word.bt, |key, len| {
            let end = pos + len as usize;
            out.push((self.output_id(key, &[]), pos, end));
            pos = end;
        });
        if !ok {
            sc.out_ids.truncate(start);
        }
        ok
    }

    /// Merge a span of more than `SHORT` symbols. No merge involves a `DEAD` symbol, so the
    /// stretches of live symbols between them merge independently (without UNUSED pieces the
    /// order of merges across stretches changes no result): each goes to the backtracking
    /// encoder, unless the span holds `▁▁` or the model has no encoder (then the heap).
    fn merge_long(&self, bytes: &[u8], base: usize, sc: &mut Scratch) {
        if self.backtracker().is_none() {
            return self.merge_span_heap(bytes, base, sc);
        }
        sc.dead.clear();
        let plain = self.user_defined.is_empty();
        let mut i = 0;
        let mut prev_space = false;
        while i < bytes.len() {
            let (key, len) = if plain {
                self.chars.at(bytes, i)
            } else {
                self.symbol_at(bytes, i)
            };
            let len = len.max(1);
            if key == DEAD {
                sc.dead.push((i, i + len));
                prev_space = false;
            } else {
                let space = is_space_at(bytes, i);
                if space && prev_space {
                    return self.merge_space_run(bytes, base, sc);
                }
                prev_space = space;
            }
            i += len;
        }
        let mut from = 0;
        let mut k = 0;
        loop {
            let (s, e) = sc
                .dead
                .get(k)
                .copied()
                .unwrap_or((bytes.len(), bytes.len()));
            if from < s {
                let seg = bytes.get(from..s).unwrap_or_default();
                if !self.backtrack_span(seg, base + from, sc) {
                    self.merge_span_heap(seg, base + from, sc);
                }
            }
            if k >= sc.dead.len() {
                break;
            }
            let piece = bytes.get(s..e).unwrap_or_default();
            sc.out_ids
                .push((self.output_id(DEAD, piece), base + s, base + e));
            from = e;
            k += 1;
        }
    }

    /// Merge a long span that holds `▁▁`. A span cut before spaces is `▁^k B` with `B` free
    /// of `▁`; with `space_runs_last` (and no user-defined pieces) its run is, exactly:
    /// first every merge that makes no piece containing `▁▁` (they all rank before those
    /// that do); none of them can touch the first k - 1 spaces (a piece `▁` + something
    /// starting with `▁` contains `▁▁`), so they are the standalone run of `▁B`. Then only
    /// whitespace-run pieces merge, among the first k - 1 spaces and the first symbol of
    /// `▁B`'s result if that is a lone `▁` (nothing else there starts with `▁`): the
    /// standalone run of those spaces. Anything else goes to the heap.
    fn merge_space_run(&self, bytes: &[u8], base: usize, sc: &mut Scratch) {
        let k = space_run_len(bytes);
        let rest = bytes.get(k * 3..).unwrap_or_default();
        let simple = self.cut == Cut::BeforeSpace
            && self.space_runs_last
            && self.user_defined.is_empty()
            && k >= 2
            && !rest.is_empty()
            && !rest.windows(3).any(|w| w == SPACE);
        if !simple {
            return self.merge_span_heap(bytes, base, sc);
        }
        // `▁B` has no `▁▁`, and a run of spaces alone goes to the heap: no deeper recursion.
        self.merge_run_sides(bytes, (k - 1) * 3, base, sc, |side, at, sc| {
            self.merge_span(side, at, sc)
        });
    }

    /// `merge_span` through the heap engine (`Word::merge_all`), for any length and with
    /// UNUSED resegmentation.
    fn merge_span_heap(&self, bytes: &[u8], base: usize, sc: &mut Scratch) {
        let word = &mut sc.word;
        word.clear();
        sc.rev.clear();
        let mut i = 0;
        while i < bytes.len() {
            let (key, len) = self.symbol_at(bytes, i);
            word.push(key, len.max(1) as u32);
            i += len.max(1);
        }
        let lookup = |a: u32, b: u32| self.pairs.get_ranked(a, b, &self.ranks);
        if self.has_unused {
            let rev = &mut sc.rev;
            let kinds = &self.kinds;
            word.merge_all(lookup, None::<fn() -> bool>, |new, l, r| {
                if kinds.get(new as usize) == Some(&PieceType::Unused) {
                    rev.insert(new, (l, r));
                }
            });
        } else {
            word.merge_all(lookup, None::<fn() -> bool>, |_, _, _| {});
        }

        // Final symbols, with UNUSED pieces split back recursively.
        for (key, start, end) in word.iter() {
            sc.stack.clear();
            sc.stack.push((key, start, end));
            while let Some((key, s, e)) = sc.stack.pop() {
                let piece = bytes.get(s..e).unwrap_or_default();
                let id = self.output_id(key, piece);
                if self.has_unused && self.kind(id) == Some(PieceType::Unused) {
                    if let Some(&(l, r)) = sc.rev.get(&id) {
                        let left_len = self.symbol_len(l, piece);
                        // Right first: the stack pops the left part next.
                        sc.stack.push((r, s + left_len, e));
                        sc.stack.push((l, s, s + left_len));
                        continue;
                    }
                }
                sc.out_ids.push((id, base + s, base + e));
            }
        }
    }

    /// Turn the final symbols into pieces: unknown runs fuse, or fall back to bytes.
    fn emit(&self, text: &[u8], out: &mut Vec<SpPiece>, sc: &mut Scratch) -> Result<()> {
        let mut prev_unk = false;
        for &(id, s, e) in &sc.out_ids {
            // A symbol whose text is a CONTROL piece (a character typed CONTROL) is unknown in
            // sentencepiece 0.2.3: unk id, fused with neighbouring unknowns or byte fallback.
            // (0.2.1 emitted a zero-width control piece and failed; BPE-NOTES describes that.)
            let id = if self.kind(id) == Some(PieceType::Control) {
                self.unk_id
            } else {
                id
            };
            match self.kind(id) {
                _ if id == self.unk_id => {
                    if self.byte_fallback {
                        let piece = text.get(s..e).unwrap_or_default();
                        let nb = piece.len();
                        for (k, &b) in piece.iter().enumerate() {
                            let end = if k + 1 == nb { e } else { s };
                            out.push(SpPiece {
                                id: self.byte_ids[b as usize],
                                start: s,
                                end,
                            });
                        }
                    } else if prev_unk {
                        if let Some(last) = out.last_mut() {
                            last.end = e;
                        }
                    } else {
                        out.push(SpPiece {
                            id,
                            start: s,
                            end: e,
                        });
                    }
                    prev_unk = true;
                }
                _ => {
                    out.push(SpPiece {
                        id,
                        start: s,
                        end: e,
                    });
                    prev_unk = false;
                }
            }
        }
        Ok(())
    }

    /// Byte length of the symbol with lookup id `key` that starts `piece`.
    fn symbol_len(&self, key: u32, piece: &[u8]) -> usize {
        let n = self.kinds.len() as u32;
        if key >= n {
            // A single character.
            if piece.is_empty() {
                0
            } else {
                self.chars.at(piece, 0).1
            }
        } else {
            self.lens.get(key as usize).map_or(0, |&l| l as usize)
        }
    }
}

/// How many `▁` begin `bytes`.
fn space_run_len(bytes: &[u8]) -> usize {
    let mut k = 0;
    while is_space_at(bytes, k * 3) {
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model from `piece:score:TYPE` specs (TYPE omitted = NORMAL), with `<unk>` at id 0 and
    /// every character of `chars` as a NORMAL piece scored -100 (unless listed in the specs).
    fn model_bf(specs: &[&str], chars: &str, byte_fallback: bool) -> (SpBpe, Vec<PieceEntry>) {
        let mut pieces = vec![PieceEntry {
            piece: "<unk>".into(),
            score: 0.0,
            kind: PieceType::Unknown,
        }];
        for spec in specs {
            let mut parts = spec.rsplitn(3, ':').collect::<Vec<_>>();
            parts.reverse();
            let (piece, score, kind) = match parts.as_slice() {
                [p, s, t] => (
                    *p,
                    s.parse().unwrap(),
                    match *t {
                        "CONTROL" => PieceType::Control,
                        "UNKNOWN" => PieceType::Unknown,
                        "USER_DEFINED" => PieceType::UserDefined,
                        "UNUSED" => PieceType::Unused,
                        "BYTE" => PieceType::Byte,
                        _ => PieceType::Normal,
                    },
                ),
                [p, s] => (*p, s.parse().unwrap(), PieceType::Normal),
                _ => panic!("bad spec"),
            };
            pieces.push(PieceEntry {
                piece: piece.into(),
                score,
                kind,
            });
        }
        for c in chars.chars() {
            let s = c.to_string();
            if !pieces.iter().any(|p| p.piece == s) {
                pieces.push(PieceEntry {
                    piece: s,
                    score: -100.0,
                    kind: PieceType::Normal,
                });
            }
        }
        if byte_fallback {
            for b in 0..=255u8 {
                pieces.push(PieceEntry {
                    piece: byte_piece(b),
                    score: 0.0,
                    kind: PieceType::Byte,
                });
            }
        }
        (SpBpe::new(&pieces, 0, byte_fallback).unwrap(), pieces)
    }

    fn model(specs: &[&str], chars: &str) -> (SpBpe, Vec<PieceEntry>) {
        model_bf(specs, chars, false)
    }

    fn seg(m: &(SpBpe, Vec<PieceEntry>), text: &str) -> Vec<String> {
        let mut out = Vec::new();
        m.0.segment(text, &mut out).unwrap();
        // Each piece's text is the normalized range (or the piece itself for byte pieces).
        out.iter()
            .map(|p| {
                let e = &m.1[p.id as usize];
                if e.kind == PieceType::Byte || e.kind == PieceType::Unknown {
                    format!("{}[{},{}]", e.piece, p.start, p.end)
                } else {
                    assert_eq!(e.piece, text[p.start..p.end]);
                    e.piece.clone()
                }
            })
            .collect()
    }

    #[test]
    fn merged_score_decides() {
        assert_eq!(seg(&model(&["ab:-2", "bc:-1"], "abc"), "abc"), ["a", "bc"]);
        assert_eq!(seg(&model(&["ab:-1", "bc:-2"], "abc"), "abc"), ["ab", "c"]);
        // List order (ids) changes nothing.
        assert_eq!(seg(&model(&["bc:-2", "ab:-1"], "abc"), "abc"), ["ab", "c"]);
        // Only the merged piece's score matters.
        assert_eq!(seg(&model(&["a:5", "b:5", "ab:-1000"], "ab"), "ab"), ["ab"]);
    }

    #[test]
    fn ties_go_leftmost() {
        assert_eq!(seg(&model(&["ab:-1", "bc:-1"], "abc"), "abc"), ["ab", "c"]);
        assert_eq!(seg(&model(&["bc:-1", "ab:-1"], "abc"), "abc"), ["ab", "c"]);
        assert_eq!(seg(&model(&["aa:-1"], "a"), "aaaaa"), ["aa", "aa", "a"]);
        assert_eq!(seg(&model(&["aa:-1", "aaa:-1"], "a"), "aaaa"), ["aaa", "a"]);
        // float32: -1.00000001 rounds to -1.0 (a tie), -1.0000001 does not.
        assert_eq!(
            seg(&model(&["ab:-1.00000001", "bc:-1.0"], "abc"), "abc"),
            ["ab", "c"]
        );
        assert_eq!(
            seg(&model(&["ab:-1.0000001", "bc:-1.0"], "abc"), "abc"),
            ["a", "bc"]
        );
    }

    #[test]
    fn reachability_and_targets() {
        assert_eq!(seg(&model(&["abc:0"], "abc"), "abc"), ["a", "b", "c"]);
        assert_eq!(seg(&model(&["ab:-1:CONTROL"], "ab"), "ab"), ["a", "b"]);
        assert_eq!(seg(&model(&["ab:-1:UNKNOWN"], "ab"), "ab"), ["a", "b"]);
        // Merges cross ▁: there are no word boundaries.
        assert_eq!(
            seg(&model(&["▁b:-0.5", "a▁b:-1"], "a▁bx"), "xa▁b"),
            ["x", "a▁b"]
        );
    }

    #[test]
    fn unused_resegmentation() {
        let m = model(&["ab:-1:UNUSED", "abc:-2"], "abcd");
        assert_eq!(seg(&m, "abc"), ["abc"]);
        assert_eq!(seg(&m, "abd"), ["a", "b", "d"]);
        // UNUSED pieces block other merges.
        let m = model(&["ab:-1:UNUSED", "bc:-2"], "abcx");
        assert_eq!(seg(&m, "abc"), ["a", "b", "c"]);
        assert_eq!(seg(&m, "xbc"), ["x", "bc"]);
        // Nested.
        let m = model(&["ab:-1", "abc:-2:UNUSED", "abcd:-3"], "abcdx");
        assert_eq!(seg(&m, "abcd"), ["abcd"]);
        assert_eq!(seg(&m, "abcx"), ["ab", "c", "x"]);
        // A single-character UNUSED piece is emitted with its own id.
        let m = model(&["a:-1:UNUSED"], "b");
        assert_eq!(seg(&m, "ab"), ["a", "b"]);
    }

    #[test]
    fn user_defined() {
        assert_eq!(
            seg(
                &model(&["ab:0:USER_DEFINED", "abc:10", "bc:5"], "abc"),
                "abc"
            ),
            ["ab", "c"]
        );
        let m = model(
            &[
                "a:0:USER_DEFINED",
                "ab:0:USER_DEFINED",
                "abc:0:USER_DEFINED",
            ],
            "abc",
        );
        assert_eq!(seg(&m, "abcab"), ["abc", "ab"]);
        let m = model(&["ab:0:USER_DEFINED", "bcd:0:USER_DEFINED"], "abcdx");
        assert_eq!(seg(&m, "abcd"), ["ab", "c", "d"]);
        assert_eq!(seg(&m, "xbcd"), ["x", "bcd"]);
        let m = model(&["xa:-1", "ab:0:USER_DEFINED"], "xab");
        assert_eq!(seg(&m, "xab"), ["x", "ab"]);
        // A user-defined piece made of characters that are not pieces.
        let m = model(&["é:0:USER_DEFINED"], "ab");
        assert_eq!(seg(&m, "aéb"), ["a", "é", "b"]);
        // Whitespace-run user-defined pieces spelled with ▁ match and freeze.
        let m = model(
            &["▁▁:0:USER_DEFINED", "▁▁▁▁:0:USER_DEFINED", "▁b:-1"],
            "ab▁x",
        );
        assert_eq!(seg(&m, "a▁▁b"), ["a", "▁▁", "b"]);
        assert_eq!(seg(&m, "a▁▁▁▁▁b"), ["a", "▁▁▁▁", "▁b"]);
        assert_eq!(seg(&m, "▁▁▁▁▁x"), ["▁▁▁▁", "▁", "x"]);
    }

    #[test]
    fn byte_fallback_offsets() {
        let m = model_bf(&[], "ab", true);
        assert_eq!(seg(&m, "aéb"), ["a", "<0xC3>[1,1]", "<0xA9>[1,3]", "b"]);
        assert_eq!(
            seg(&m, "éé"),
            ["<0xC3>[0,0]", "<0xA9>[0,2]", "<0xC3>[2,2]", "<0xA9>[2,4]"]
        );
        assert_eq!(
            seg(&m, "😀"),
            ["<0xF0>[0,0]", "<0x9F>[0,0]", "<0x98>[0,0]", "<0x80>[0,4]"]
        );
        // An unknown character can still be merged into a piece first.
        let m = model_bf(&["éa:-1"], "a", true);
        assert_eq!(seg(&m, "éa"), ["éa"]);
        // Not all 256 byte pieces: loading fails.
        let mut pieces = m.1.clone();
        pieces.pop();
        assert!(SpBpe::new(&pieces, 0, true).is_err());
    }

    #[test]
    fn unknown_runs_fuse() {
        let m = model(&[], "ab");
        assert_eq!(seg(&m, "aééb"), ["a", "<unk>[1,5]", "b"]);
        // ▁ unknown too: one run.
        assert_eq!(seg(&m, "é▁é"), ["<unk>[0,7]"]);
        // The unk piece's own string maps to unk.
        let pieces = vec![
            PieceEntry {
                piece: "a".into(),
                score: 0.0,
                kind: PieceType::Unknown,
            },
            PieceEntry {
                piece: "b".into(),
                score: -1.0,
                kind: PieceType::Normal,
            },
        ];
        let m = (SpBpe::new(&pieces, 0, false).unwrap(), pieces);
        assert_eq!(seg(&m, "bab"), ["b", "a[1,2]", "b"]);
    }

    #[test]
    fn control_character_is_unknown() {
        // sentencepiece 0.2.3: "a" typed CONTROL is an unknown character.
        let m = model(&["a:0:CONTROL"], "b");
        assert_eq!(seg(&m, "abb"), ["<unk>[0,1]", "b", "b"]);
        assert_eq!(seg(&m, "aéb"), ["<unk>[0,3]", "b"]);
        let m = model_bf(&["a:0:CONTROL"], "b", true);
        assert_eq!(seg(&m, "ab"), ["<0x61>[0,1]", "b"]);
        // It still merges when a piece is made of it.
        let m = model(&["a:0:CONTROL", "ab:-1"], "b");
        assert_eq!(seg(&m, "abb"), ["ab", "b"]);
    }

    #[test]
    fn whitespace_runs_llama_like() {
        // ▁-runs all score -1e9, below ▁b: the last ▁ of a run goes with the word.
        let m = model(
            &[
                "▁a:-1",
                "▁b:-1",
                "▁▁:-1e9",
                "▁▁▁:-1e9",
                "▁▁▁▁:-1e9",
                "▁:-1e9",
            ],
            "ab",
        );
        assert_eq!(seg(&m, "▁a▁▁b"), ["▁a", "▁", "▁b"]);
        assert_eq!(seg(&m, "▁a▁▁▁b"), ["▁a", "▁▁", "▁b"]);
        assert_eq!(seg(&m, "▁a▁▁▁▁b"), ["▁a", "▁▁▁", "▁b"]);
    }

    /// Random texts over `alphabet` (characters picked uniformly, some ▁ runs).
    fn texts(alphabet: &str, n: usize, seed: u64) -> Vec<String> {
        let chars: Vec<char> = alphabet.chars().collect();
        let mut next = crate::test_rng(seed | 1);
        (0..n)
            .map(|_| {
                let len = (next() % 40) as usize;
                (0..len)
                    .map(|_| chars[(next() % chars.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    /// The span (cached) path against the whole-string path, twice (the second run hits the
    /// cache); returns how many texts were cut in more than one span.
    fn check_spans(m: &(SpBpe, Vec<PieceEntry>), alphabet: &str, expect: Cut) -> usize {
        assert_eq!(m.0.cut, expect);
        let mut multi = 0;
        for round in 0..2 {
            for t in texts(alphabet, 3000, 0x9E37_79B9 + round) {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                m.0.segment(&t, &mut a).unwrap();
                m.0.segment_whole(&t, &mut b).unwrap();
                assert_eq!(a, b, "{t:?}");
                let mut ids = Vec::new();
                m.0.segment_ids(t.as_bytes(), &mut ids).unwrap();
                assert!(ids.iter().eq(b.iter().map(|p| &p.id)), "{t:?}");
                let bytes = t.as_bytes();
                if !t.is_empty() && m.0.span_end(bytes, 0) < bytes.len() {
                    multi += 1;
                }
            }
        }
        multi
    }

    const LLAMA_LIKE: &[&str] = &[
        "▁a:-1",
        "▁b:-2",
        "ab:-3",
        "ba:-3",
        "▁ab:-4",
        "aa:-5",
        "abb:-6",
        "▁▁:-1e9",
        "▁▁▁:-1e9",
        "▁:-1e9",
        "▁ba:-7",
        "bé:-8",
    ];

    #[test]
    fn spans_match_whole_string() {
        let m = model(LLAMA_LIKE, "ab");
        assert!(check_spans(&m, "ab▁▁éx", Cut::BeforeSpace) > 1000);
        // ▁ not a piece: it is unknown and fuses with unknown neighbours across cuts.
        let m = model(&["ab:-1", "ba:-2", "aé:-3"], "ab");
        assert!(check_spans(&m, "ab▁éx", Cut::BeforeSpace) > 1000);
        // Byte fallback across cuts.
        let m = model_bf(&["▁a:-1", "ab:-2", "▁:-3"], "ab", true);
        assert!(check_spans(&m, "ab▁é😀", Cut::BeforeSpace) > 1000);
        // A character typed CONTROL.
        let m = model(&["a:0:CONTROL", "▁a:-1", "ab:-2", "▁:-3"], "b");
        assert!(check_spans(&m, "ab▁é", Cut::BeforeSpace) > 1000);
    }

    #[test]
    fn spans_with_user_defined_and_unused() {
        let m = model(
            &[
                "▁▁:0:USER_DEFINED",
                "ab:0:USER_DEFINED",
                "▁a:-1",
                "ba:-2",
                "bab:-3",
            ],
            "ab",
        );
        assert!(check_spans(&m, "ab▁é", Cut::BeforeSpace) > 1000);
        // One split per UNUSED piece: cut allowed.
        let m = model(&["▁a:-1:UNUSED", "▁ab:-2", "ab:-3:UNUSED", "abb:-4"], "ab▁");
        assert!(check_spans(&m, "ab▁", Cut::BeforeSpace) > 1000);
        // An UNUSED piece with two splits: the whole string.
        let m = model(&["ab:-1", "bb:-2", "abb:-3:UNUSED", "▁a:-4"], "ab▁");
        check_spans(&m, "ab▁", Cut::Never);
    }

    #[test]
    fn crossing_pieces_turn_cuts_off() {
        // "a▁" crosses a cut before ▁, "▁a" one after it: no cut at all.
        let m = model(&["▁a:-1", "a▁:-2", "ab:-3"], "ab▁");
        check_spans(&m, "ab▁", Cut::Never);
        // A user-defined piece across ▁ is enough.
        let m = model(&["▁a:-1", "ab:-3", "a▁b:0:USER_DEFINED"], "ab▁");
        check_spans(&m, "ab▁", Cut::Never);
        // Suffix-style vocabulary: cut after the ▁ run.
        let m = model(&["a▁:-1", "ab▁:-2", "ab:-3", "▁▁:-4", "b▁▁:-5"], "ab▁");
        assert!(check_spans(&m, "ab▁▁é", Cut::AfterSpace) > 1000);
        // The check above has teeth: forcing a cut on a crossing vocabulary is caught.
        let mut m = model(&["▁a:-1", "a▁:-2", "ab:-3"], "ab▁");
        m.0.cut = Cut::BeforeSpace;
        let differs = texts("ab▁", 500, 7).iter().any(|t| {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            m.0.segment(t, &mut a).unwrap();
            m.0.segment_whole(t, &mut b).unwrap();
            a != b
        });
        assert!(differs);
    }

    /// Long words (more than `SHORT` symbols, so the heap engine) and short ones against the
    /// whole-string heap path, with merges that chain far.
    #[test]
    fn short_and_long_spans_match_the_heap_engine() {
        let m = model(
            &[
                "ab:-1",
                "ba:-1",
                "aa:-2",
                "abab:-3",
                "aab:-3",
                "baa:-4",
                "bb:-5",
                "abb:-5",
                "▁a:-2",
                "▁b:-6",
                "▁ab:-7",
                "▁▁:-1e9",
            ],
            "ab",
        );
        let mut next = crate::test_rng(0xABCD_1234);
        for _ in 0..2000 {
            let len = (next() % 90) as usize;
            let t: String = (0..len)
                // 'x' is no piece: a DEAD ASCII character.
                .map(|_| ['a', 'b', 'a', 'b', '▁', 'é', 'x'][(next() % 7) as usize])
                .collect();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            m.0.segment(&t, &mut a).unwrap();
            m.0.segment_whole(&t, &mut b).unwrap();
            assert_eq!(a, b, "{t:?}");
        }
    }

    /// A random vocabulary grown "training style" (pieces made of two earlier ones) over
    /// `a b c ▁` and `é` (a character that is no piece, only part of some): scores mostly
    /// falling, with ties (between unrelated pieces, and sometimes a piece tied with its own
    /// part, which the encoder must refuse), some out of order, Llama-style ▁ runs all scored
    /// alike, sometimes user-defined pieces and byte fallback.
    fn random_model(next: &mut impl FnMut() -> u64) -> (SpBpe, Vec<PieceEntry>) {
        let mut strs: Vec<String> = ["a", "b", "c", "\u{2581}", "é"].map(String::from).to_vec();
        let mut specs: Vec<String> = Vec::new();
        let mut score = -1.0f32;
        let target = 5 + next() % 60;
        let mut tries = 0;
        while (specs.len() as u64) < target && tries < 500 {
            tries += 1;
            let l = &strs[(next() % strs.len() as u64) as usize];
            let r = &strs[(next() % strs.len() as u64) as usize];
            let t = format!("{l}{r}");
            if t.chars().count() > 9 || strs.contains(&t) || t.contains("\u{2581}\u{2581}") {
                continue;
            }
            match next() % 24 {
                0..=1 => {}
                2 => score = -((next() % 40) as f32),
                _ => score -= 1.0,
            }
            specs.push(format!("{t}:{score}"));
            strs.push(t);
        }
        if next() % 2 == 0 {
            for k in 2..=1 + next() % 5 {
                specs.push(format!("{}:-1e9", "\u{2581}".repeat(k as usize)));
            }
        }
        if next() % 4 == 0 && strs.len() > 5 {
            let t = &strs[5 + next() as usize % (strs.len() - 5)];
            if let Some(spec) = specs.iter_mut().find(|s| s.starts_with(&format!("{t}:"))) {
                *spec = format!("{t}:0:USER_DEFINED");
            }
        }
        let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
        model_bf(&refs, "abc\u{2581}", next() % 3 == 0)
    }

    /// Long spans (the backtracking encoder) against the whole-string heap path, on random
    /// vocabularies; most of them must get an encoder.
    #[test]
    fn long_spans_match_the_heap_on_random_vocabularies() {
        let mut next = crate::test_rng(0x51ED_2701_9F3C_11A5);
        let (mut built, mut long, mut runs) = (0, 0, 0);
        for round in 0..1500 {
            let m = random_model(&mut next);
            if m.0.backtracker().is_some() {
                built += 1;
            }
            for _ in 0..12 {
                let len = 20 + (next() % 200) as usize;
                let pattern: Vec<char> = (0..1 + next() % 6)
                    .map(|_| ['a', 'b', 'c', 'a', 'b', '\u{2581}', 'é', 'x'][(next() % 8) as usize])
                    .collect();
                let mut t: String = (0..len)
                    .map(|i| match next() % 4 {
                        0 => ['a', 'b', 'c', '\u{2581}', 'é', 'x', 'a', 'b'][(next() % 8) as usize],
                        _ => pattern[i % pattern.len()],
                    })
                    .collect();
                if next() % 3 == 0 {
                    // An indented long word: a run of spaces, then no space.
                    t = "\u{2581}".repeat(1 + (next() % 40) as usize) + &t.replace('\u{2581}', "");
                }
                let (mut a, mut b) = (Vec::new(), Vec::new());
                m.0.segment(&t, &mut a).unwrap();
                m.0.segment_whole(&t, &mut b).unwrap();
                assert_eq!(a, b, "round {round}, text {t:?}, pieces {:?}", m.1);
                let mut ids = Vec::new();
                m.0.segment_ids(t.as_bytes(), &mut ids).unwrap();
                assert!(ids.iter().eq(b.iter().map(|p| &p.id)), "{t:?}");
                long += usize::from(t.chars().count() > SHORT);
                runs += usize::from(
                    m.0.cut == Cut::BeforeSpace
                        && m.0.space_runs_last
                        && t.starts_with("\u{2581}\u{2581}")
                        && t.chars().count() > SHORT,
                );
            }
        }
        assert!(runs > 300, "{runs}");
        assert!(built > 500, "{built}");
        assert!(built < 1400, "{built}");
        assert!(long > 10_000, "{long}");
    }

    /// Short spans (`merge_short`) against the whole-string heap path on random
    /// vocabularies with score ties, chained merges and user-defined pieces.
    #[test]
    fn short_spans_match_the_heap_on_random_vocabularies() {
        let mut next = crate::test_rng(0x7A11_5EED_0BAD_F00D);
        let (mut short, mut warm_rounds) = (0, 0);
        for round in 0..1500 {
            let m = random_model(&mut next);
            // Every other model has its encoder built first, so that short ASCII spans take
            // it (`short_backtracker`); the others keep the merge loop, as a new model does.
            if round % 2 == 0 && m.0.backtracker().is_some() {
                warm_rounds += 1;
            }
            for _ in 0..12 {
                let len = 1 + (next() % 40) as usize;
                let t: String = (0..len)
                    .map(|_| ['a', 'b', 'c', 'a', 'b', '\u{2581}', 'é', 'x'][(next() % 8) as usize])
                    .collect();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                m.0.segment(&t, &mut a).unwrap();
                m.0.segment_whole(&t, &mut b).unwrap();
                assert_eq!(a, b, "round {round}, text {t:?}, pieces {:?}", m.1);
                short += usize::from(t.chars().count() <= SHORT);
            }
        }
        assert!(short > 10_000, "{short}");
        assert!(warm_rounds > 200, "{warm_rounds}");
    }

    #[test]
    fn score_ranks_count_the_higher_distinct_scores() {
        let mut next = crate::test_rng(0x0005_C0BE_5000_0001);
        let special = [
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-45,
        ];
        for _ in 0..200 {
            let pieces: Vec<PieceEntry> = (0..1 + next() % 300)
                .map(|_| PieceEntry {
                    piece: "x".into(),
                    score: match next() % 4 {
                        0 => special[(next() % 7) as usize],
                        1 => -((next() % 20) as f32),
                        _ => f32::from_bits(next() as u32),
                    },
                    kind: PieceType::Normal,
                })
                .collect();
            let norm = |s: f32| if s == 0.0 { 0.0 } else { s };
            let mut scores: Vec<f32> = pieces.iter().map(|p| norm(p.score)).collect();
            scores.sort_unstable_by(|a, b| b.total_cmp(a));
            scores.dedup_by(|a, b| a.total_cmp(b).is_eq());
            let want: Vec<u32> = pieces
                .iter()
                .map(|p| {
                    scores
                        .iter()
                        .filter(|&&x| x.total_cmp(&norm(p.score)).is_gt())
                        .count() as u32
                })
                .collect();
            assert_eq!(score_ranks(&pieces), want);
        }
    }

    /// Every table of two builds of one vocabulary, and their answers on `texts`, are equal.
    fn assert_same_build(a: &SpBpe, b: &SpBpe, pieces: &[PieceEntry], texts: &[String]) {
        assert_eq!(a.kinds, b.kinds);
        assert_eq!(a.lens, b.lens);
        assert_eq!((a.unk_id, a.byte_fallback), (b.unk_id, b.byte_fallback));
        assert_eq!(a.byte_ids, b.byte_ids);
        assert_eq!(a.key_out, b.key_out);
        assert_eq!(a.dead_is_unk, b.dead_is_unk);
        assert_eq!(a.ranks, b.ranks);
        assert_eq!(
            (a.has_unused, a.cut, a.chunks),
            (b.has_unused, b.cut, b.chunks)
        );
        assert_eq!(a.virtual_chars, b.virtual_chars);
        assert_eq!(
            (a.space_runs_last, a.space_key),
            (b.space_runs_last, b.space_key)
        );
        assert_eq!(a.ascii_live, b.ascii_live);
        assert_eq!(a.glue, b.glue);
        let sorted = |t: &PairTable| {
            let mut e = t.entries();
            e.sort_unstable();
            e
        };
        assert_eq!(sorted(&a.pairs), sorted(&b.pairs));
        for p in pieces {
            assert_eq!(
                a.piece_to_id(&p.piece),
                b.piece_to_id(&p.piece),
                "{:?}",
                p.piece
            );
            let bytes = p.piece.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                let (ka, len) = a.chars.at(bytes, i);
                assert_eq!(ka, b.chars.at(bytes, i).0);
                i += len;
            }
        }
        assert_eq!(a.backtracker().is_some(), b.backtracker().is_some());
        for t in texts {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            a.segment(t, &mut x).unwrap();
            b.segment(t, &mut y).unwrap();
            assert_eq!(x, y, "{t:?}");
        }
    }

    /// The processor's one map (`with_lookup`) builds the same segmenter as `new`'s own
    /// maps: on random vocabularies whose strings are all distinct, and on the real BPE
    /// models of the shared data.
    #[test]
    fn shared_lookup_builds_the_same_segmenter() {
        let mut next = crate::test_rng(0x5A4E_D100_C0C0_0001);
        let mut shared = 0;
        for _ in 0..400 {
            let (general, pieces) = random_model(&mut next);
            let mut normal = AHashMap::new();
            for (i, p) in pieces.iter().enumerate() {
                normal.entry(p.piece.clone()).or_insert(i as u32);
            }
            if normal.len() != pieces.len() {
                continue;
            }
            let lookup = Arc::new(PieceLookup {
                normal,
                unk_id: 0,
                ..Default::default()
            });
            let fast = SpBpe::with_lookup(&pieces, 0, general.byte_fallback, &lookup).unwrap();
            assert!(Arc::ptr_eq(&fast.lookup, &lookup));
            let texts: Vec<String> = (0..20)
                .map(|_| {
                    (0..1 + next() % 60)
                        .map(|_| ['a', 'b', 'c', '\u{2581}', 'é', 'x'][(next() % 6) as usize])
                        .collect()
                })
                .collect();
            assert_same_build(&fast, &general, &pieces, &texts);
            shared += 1;
        }
        assert!(shared > 300, "{shared}");
        let dir = crate::test_data_dir();
        let text = "Hello world, this is a test.\n\tfn main() { println!(\"x\"); } 日本語 ñ 😀";
        for file in [
            "llama2/tokenizer.model",
            "mistral-7b-v0.3/tokenizer.model.v3",
            "bpemb-en/en.wiki.bpe.vs100000.model",
            "hf-transformers-fixtures/test_sentencepiece_bpe.model",
        ] {
            let Ok(bytes) = std::fs::read(format!("{dir}/{file}")) else {
                eprintln!("skipped: {file} not found");
                continue;
            };
            let sp = crate::sentencepiece::SentencePiece::from_model_bytes(&bytes).unwrap();
            let fast = sp.bpe.as_ref().unwrap();
            assert!(Arc::ptr_eq(&fast.lookup, &sp.lookup), "{file}");
            let general = SpBpe::new(&sp.data.pieces, sp.unk_id, sp.data.byte_fallback).unwrap();
            let texts: Vec<String> = text.split(' ').map(|w| format!("\u{2581}{w}")).collect();
            assert_same_build(fast, &general, &sp.data.pieces, &texts);
        }
    }

    /// A new model segments short spans without building its encoder, and builds it once
    /// `WARM_MISSES` short spans have missed the cache; the results stay the heap's.
    #[test]
    fn short_spans_build_the_encoder_after_warm_up() {
        let m = model(&["ab:-1", "ba:-2", "aab:-3", "▁a:-4", "▁ab:-5"], "ab");
        assert!(m.0.backtrack.get().is_none());
        let mut next = crate::test_rng(0x5EED_0FC0_1D00);
        let mut texts = 0u32;
        while m.0.backtrack.get().is_none() && texts < 4 * WARM_MISSES {
            // Distinct words of up to 20 letters: almost every one misses the span cache.
            let len = 1 + (next() % 20) as usize;
            let w: String = (0..len)
                .map(|_| ['a', 'b'][(next() % 2) as usize])
                .collect();
            let t = format!("\u{2581}{w}");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            m.0.segment(&t, &mut a).unwrap();
            m.0.segment_whole(&t, &mut b).unwrap();
            assert_eq!(a, b, "{t:?}");
            texts += 1;
        }
        assert!(
            m.0.backtrack.get().is_some(),
            "not built after {texts} texts"
        );
        // A missed span asks up to three times (`merge_missed`, then `merge_span` twice).
        assert!(texts > WARM_MISSES / 3, "built after {texts} texts");
    }

    /// Spans cut where no merge can join (`joinable`), each part cached on its own: against
    /// the whole-string path on texts with characters that no piece continues (`\n`, `x`),
    /// CJK-like characters that only some pieces hold side by side, indented words, and
    /// spans longer than the short cache, the long cache and `SHORT` symbols; twice, so the
    /// second round reads the parts back from the cache.
    #[test]
    fn cut_parts_match_whole_string() {
        let specs = [
            "▁a:-1",
            "ab:-2",
            "▁ab:-3",
            "中文:-4",
            "▁中:-5",
            "文字:-6",
            "b中:-7",
            "▁▁:-1e9",
            "▁▁▁:-1e9",
            "▁:-8",
            "中:-9",
            "文:-10",
            "字:-11",
            "人:-12",
        ];
        for bf in [false, true] {
            let m = model_bf(&specs, "ab", bf);
            assert!(m.0.chunks);
            let key = |c: char| m.0.chars.at(c.to_string().as_bytes(), 0).0;
            // Pieces hold 中文 and 文字 but not 字中 or 人 next to anything.
            assert!(m.0.joinable(key('中'), key('文')));
            assert!(m.0.joinable(key('文'), key('字')));
            assert!(m.0.joinable(key('b'), key('中')));
            assert!(!m.0.joinable(key('字'), key('中')));
            assert!(!m.0.joinable(key('人'), key('中')));
            assert!(!m.0.joinable(key('a'), key('\n')));
            assert!(!m.0.joinable(key('\n'), key('a')));
            let alphabet: Vec<char> = "ab▁中文字人\nx".chars().collect();
            let mut next = crate::test_rng(0xC0FF_EE00 + u64::from(bf));
            let texts: Vec<String> = (0..3000)
                .map(|_| {
                    let len = match next() % 4 {
                        0 => 1 + next() % 8,
                        1 | 2 => 1 + next() % 40,
                        _ => 60 + next() % 200,
                    };
                    let mut t: String = (0..len)
                        .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                        .collect();
                    if next() % 4 == 0 {
                        t = "▁".repeat(2 + (next() % 12) as usize) + &t.replace('▁', "");
                    }
                    t
                })
                .collect();
            for _round in 0..2 {
                for t in &texts {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    m.0.segment(t, &mut a).unwrap();
                    m.0.segment_whole(t, &mut b).unwrap();
                    assert_eq!(a, b, "{t:?}");
                    let mut ids = Vec::new();
                    m.0.segment_ids(t.as_bytes(), &mut ids).unwrap();
                    assert!(ids.iter().eq(b.iter().map(|p| &p.id)), "{t:?}");
                }
            }
        }
    }

    /// `joinable` is true for every two adjacent characters of every mergeable piece of
    /// random vocabularies (the cuts' exactness rests on it), and false next to `DEAD`.
    #[test]
    fn joinable_covers_every_piece() {
        let mut next = crate::test_rng(0x6A09_E667_F3BC_C908);
        for _ in 0..300 {
            let m = random_model(&mut next);
            if !m.0.chunks {
                continue;
            }
            for p in m.1.iter().filter(|p| p.kind == PieceType::Normal) {
                let b = p.piece.as_bytes();
                let keys: Vec<u32> = p
                    .piece
                    .char_indices()
                    .map(|(i, _)| m.0.chars.at(b, i).0)
                    .collect();
                for w in keys.windows(2) {
                    if w[0] != DEAD && w[1] != DEAD {
                        assert!(m.0.joinable(w[0], w[1]), "{:?}", p.piece);
                    }
                }
            }
            assert!(!m.0.joinable(DEAD, DEAD));
        }
    }

    /// The word-at-a-time `▁` search against a byte-by-byte one.
    #[test]
    fn next_space_matches_a_plain_search() {
        let mut next = crate::test_rng(0x0E2E_2961_81AB_CDEF);
        for _ in 0..20_000 {
            let len = (next() % 40) as usize;
            let t: String = (0..len)
                .map(|_| {
                    ['a', '\u{2581}', 'â', '\u{2580}', '\u{2582}', 'ℂ', 'x'][(next() % 7) as usize]
                })
                .collect();
            let b = t.as_bytes();
            for from in 0..=b.len() {
                let want = (from..b.len())
                    .find(|&i| b[i..].starts_with("\u{2581}".as_bytes()))
                    .unwrap_or(b.len());
                assert_eq!(next_space(b, from), want, "{t:?} from {from}");
            }
        }
    }

    #[test]
    fn long_input_is_fast() {
        let m = model(&["aa:-1", "aaaa:-2"], "a");
        let text = "a".repeat(1 << 18);
        let mut out = Vec::new();
        m.0.segment(&text, &mut out).unwrap();
        assert_eq!(out.len(), 1 << 16);
    }
}
