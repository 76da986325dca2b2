//! The sentencepiece normalizer: the model's compiled charsmap applied longest-match first,
//! user-defined pieces copied through unnormalized, whitespace escaped to U+2581, the dummy
//! prefix, and removal of extra spaces, with a map from every normalized byte back to the
//! byte of the original text its chunk started at (`norm_to_orig`, one entry longer than the
//! normalized string).

use super::trie::ByteTrie;
use crate::charsmap::CharsMap;
use crate::error::{Error, Result};

pub(crate) const SPACE_SYMBOL: &str = "\u{2581}";
const REPLACEMENT: &str = "\u{FFFD}";
const MAX_TRIE_RESULTS: usize = 32;

#[derive(Debug, Clone, Default)]
pub struct SpNormalizer {
    pub(crate) charsmap: CharsMap,
    /// Longest-match table of the user-defined pieces (matched on the raw text).
    pub(crate) user_defined: Option<ByteTrie>,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    pub escape_whitespaces: bool,
    pub treat_whitespace_as_suffix: bool,
    /// Bit `b` set: ASCII byte `b` is its own normalization (no charsmap rule and no
    /// user-defined piece starts with it, or `[b]` is the only user-defined piece starting
    /// with it). Filled by `prepare`; 0 (the default) only turns the fast path off.
    pub(crate) ascii_plain: u128,
    /// Bit `b` set: ASCII byte `b` is its own normalization when the next byte is ASCII or
    /// the input ends there: no user-defined piece starts with it, the charsmap has no rule
    /// for `[b]` alone, and every longer rule starting with `b` continues with a non-ASCII
    /// byte (NFKC's letter + combining mark rules). Filled by `prepare`.
    pub(crate) ascii_plain_before_ascii: u128,
    /// Bit `b` set: no user-defined piece starts with byte `b`, so a non-ASCII character
    /// starting with `b` may take `simple_char`. Filled by `prepare`; 0 (the default) only
    /// turns that path off.
    pub(crate) ud_free_lead: [u64; 4],
    /// Bit `c` set (for a code point `c` below U+10000): no charsmap rule matches at a
    /// character `c`, whatever follows it (the rules' trie has no node for `c`'s bytes and
    /// no rule key ends inside them), so `simple_char` copies it without the charsmap walk.
    /// Filled by `prepare`; empty (the default) only turns that shortcut off.
    pub(crate) bmp_plain: std::sync::Arc<[u64]>,
    /// Per byte, what `plain_words` does with it (`WORD_*`). Filled by `prepare`; empty (the
    /// default) only turns `plain_words` off.
    pub(crate) word_class: std::sync::Arc<[u8]>,
    /// Bit `c - 128` set: some rule key continues a `WORD_*_BEFORE_ASCII` byte with byte `c`
    /// (NFKC's combining marks). Before any other byte such a byte has only its own rule, if
    /// any. Filled by `prepare`.
    pub(crate) word_weak_next: u128,
}

/// `word_class` values. A byte that is its own normalization (`ascii_plain`).
const WORD_COPY: u8 = 0;
/// An ASCII byte that is its own normalization before an ASCII byte, the end, or a byte
/// outside `word_weak_next` (`ascii_plain_before_ascii`, or a rule giving the byte itself).
const WORD_COPY_BEFORE_ASCII: u8 = 1;
/// A space the ASCII loop handles as such (a plain `' '`).
const WORD_SPACE: u8 = 2;
/// An ASCII byte normalized to `" "` where a `WORD_COPY_BEFORE_ASCII` byte is copied (`\n`,
/// `\t` in NFKC).
const WORD_SPACE_BEFORE_ASCII: u8 = 3;
/// The lead byte of a 2- or 3-byte character that no user-defined piece starts with: it is
/// copied when `bmp_plain` says no rule matches there.
const WORD_LEAD: u8 = 4;
/// Added to a class: some user-defined piece starts with the byte. Where one matches, its
/// bytes are copied raw as one chunk (a word's bytes, when it has no space and no `▁`);
/// where none does, the byte is of the class without this flag.
const WORD_UD: u8 = 8;
/// Anything else: `plain_words` declines the text.
const WORD_OTHER: u8 = 5;

/// Set on the start of a word range of `plain_words` that lies in its `buf`.
pub(crate) const WORD_IN_BUF: u32 = 1 << 31;

/// The bytes of a word range of `plain_words` (`WORD_IN_BUF`: in `buf`, else in `text`).
#[inline]
pub(crate) fn word_bytes<'a>(text: &'a [u8], buf: &'a [u8], (a, b): (u32, u32)) -> &'a [u8] {
    let src = if a & WORD_IN_BUF != 0 { buf } else { text };
    src.get((a & !WORD_IN_BUF) as usize..b as usize)
        .unwrap_or_default()
}

/// Where `plain_words` puts the words it has found. The current word is `buf[bstart..]`
/// (when `bstart` is set: some chunk of it was not a copy) followed by `input[start..i]`
/// (when `start` is set: its chunks since then were copies, which stay in place); with
/// neither, there is none (`is_prev_space`: the output ends with a space's `▁`). `bstart`
/// and `start` are the caller's loop variables, passed in and returned.
struct Words<'a> {
    words: &'a mut Vec<(u32, u32)>,
    buf: &'a mut Vec<u8>,
}

impl Words<'_> {
    /// The current word (at `i` of `bytes`) as one in `buf`, to append to: its `bstart`.
    fn move_to_buf(
        &mut self,
        bytes: &[u8],
        i: usize,
        bstart: Option<usize>,
        start: Option<usize>,
    ) -> usize {
        let b = bstart.unwrap_or(self.buf.len());
        if let Some(a) = start {
            self.buf
                .extend_from_slice(bytes.get(a..i).unwrap_or_default());
        }
        b
    }

    /// End the current word (there is one, possibly empty) at `i` of `bytes`, where a `▁` is
    /// written.
    fn end_word(&mut self, bytes: &[u8], i: usize, bstart: Option<usize>, start: Option<usize>) {
        let w = match (bstart, start) {
            (None, Some(a)) => (a as u32, i as u32),
            (Some(_), _) | (None, None) => {
                let b = self.move_to_buf(bytes, i, bstart, start);
                (b as u32 | WORD_IN_BUF, self.buf.len() as u32)
            }
        };
        self.words.push(w);
    }

    /// A chunk at `i` of `bytes` whose normalization is `sp`, as `normalize_with`'s main loop
    /// takes it: leading spaces trimmed when `is_prev_space`; every space of what is left
    /// writes `▁` (ending the current word, even an empty one), the rest is appended;
    /// `is_prev_space` is then whether `sp` ends with a space (no current word) — or stays
    /// as it was when nothing is left. A literal `▁` in the rest ends a word too (for the
    /// segmenter, every `▁` does). A word continues across a chunk that writes nothing, so
    /// its part so far moves to `buf` then. Returns the new `bstart` (`start` is `None`).
    fn general_chunk(
        &mut self,
        bytes: &[u8],
        i: usize,
        sp: &str,
        bstart: Option<usize>,
        start: Option<usize>,
    ) -> Option<usize> {
        let prev_space = start.is_none() && bstart.is_none();
        let sp = if prev_space {
            sp.trim_start_matches(' ')
        } else {
            sp
        };
        if sp.is_empty() {
            return (!prev_space).then(|| self.move_to_buf(bytes, i, bstart, start));
        }
        let (mut bstart, mut start) = (bstart, start);
        for part in sp.split_inclusive(' ') {
            let (text, spaced) = match part.strip_suffix(' ') {
                Some(t) => (t, true),
                None => (part, false),
            };
            if !text.is_empty() {
                let mut b = self.move_to_buf(bytes, i, bstart, start.take());
                for (k, piece) in text.split(SPACE_SYMBOL).enumerate() {
                    if k > 0 {
                        self.end_word(bytes, i, Some(b), None);
                        b = self.buf.len();
                    }
                    self.buf.extend_from_slice(piece.as_bytes());
                }
                bstart = Some(b);
            }
            if spaced {
                self.end_word(bytes, i, bstart.take(), start.take());
            }
        }
        bstart
    }

    /// The end of the input: the current word if it is not empty, then the trailing empty
    /// words dropped (the trailing `▁`s the reference trims).
    fn finish(&mut self, bytes: &[u8], bstart: Option<usize>, start: Option<usize>) {
        if start.is_some() || bstart.is_some() {
            self.end_word(bytes, bytes.len(), bstart, start);
        }
        while self
            .words
            .last()
            .is_some_and(|&(a, b)| a & !WORD_IN_BUF == b)
        {
            self.words.pop();
        }
    }
}

/// Length of the UTF-8 sequence a lead byte announces, as the reference's table gives it
/// (a stray continuation byte counts as one).
#[inline]
pub(crate) fn one_char_len(b: u8) -> usize {
    const T: [u8; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    T[(b >> 4) as usize] as usize
}

/// Decode one character the way the reference does: `Some(len)` for a valid scalar value
/// encoded in shortest form, `None` for anything else (the caller consumes one byte).
pub(crate) fn valid_char_len(s: &[u8]) -> Option<usize> {
    let b0 = *s.first()?;
    if b0 < 0x80 {
        return Some(1);
    }
    let trail = |i: usize| s.get(i).is_some_and(|&b| (b & 0xc0) == 0x80);
    let ok = |cp: u32| cp < 0xd800 || (0xe000..=0x10ffff).contains(&cp);
    if (b0 & 0xe0) == 0xc0 && s.len() >= 2 {
        let cp = (u32::from(b0 & 0x1f) << 6) | u32::from(s[1] & 0x3f);
        if trail(1) && cp >= 0x80 && ok(cp) {
            return Some(2);
        }
    } else if (b0 & 0xf0) == 0xe0 && s.len() >= 3 {
        let cp =
            (u32::from(b0 & 0x0f) << 12) | (u32::from(s[1] & 0x3f) << 6) | u32::from(s[2] & 0x3f);
        if trail(1) && trail(2) && cp >= 0x800 && ok(cp) {
            return Some(3);
        }
    } else if (b0 & 0xf8) == 0xf0 && s.len() >= 4 {
        let cp = (u32::from(b0 & 0x07) << 18)
            | (u32::from(s[1] & 0x3f) << 12)
            | (u32::from(s[2] & 0x3f) << 6)
            | u32::from(s[3] & 0x3f);
        if trail(1) && trail(2) && trail(3) && cp >= 0x10000 && ok(cp) {
            return Some(4);
        }
    }
    None
}

/// Append `input` to `out` with every space as `▁`, eight bytes at a time: a word without
/// a space is copied as one fixed-size store; one with a space is stored whole, cut back to
/// the space and followed by `▁` (`push_str` of each space-free run paid a `memcpy` call a
/// word). Chunks may end inside a character: bytes are copied as they are, so the result is
/// the input with its spaces replaced, UTF-8 when the input is.
fn escape_spaces(input: &[u8], out: &mut Vec<u8>) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const SPACES: u64 = 0x2020_2020_2020_2020;
    let space = SPACE_SYMBOL.as_bytes();
    let mut i = 0;
    while let Some(chunk) = input
        .get(i..i + 8)
        .and_then(|c| <[u8; 8]>::try_from(c).ok())
    {
        out.extend_from_slice(&chunk);
        let x = u64::from_le_bytes(chunk) ^ SPACES;
        // Flags the zero bytes of `x` exactly up to and including the first (a borrow only
        // flags bytes above a zero byte): its lowest flag is the first space.
        let hit = x.wrapping_sub(ONES) & !x & HIGH;
        if hit == 0 {
            i += 8;
            continue;
        }
        let j = (hit.trailing_zeros() / 8) as usize;
        out.truncate(out.len() - (8 - j));
        out.extend_from_slice(space);
        i += j + 1;
    }
    for &b in input.get(i..).unwrap_or_default() {
        if b == b' ' {
            out.extend_from_slice(space);
        } else {
            out.push(b);
        }
    }
}

/// Whether the byte at `i` of `bytes` continues no rule key of the byte before it: the end of
/// the text, an ASCII byte, or one whose bit in `weak_next` is clear (see `word_weak_next`).
#[inline(always)]
fn stands_alone(bytes: &[u8], weak_next: u128, i: usize) -> bool {
    bytes
        .get(i)
        .is_none_or(|&c| c < 0x80 || (weak_next >> (c - 128)) & 1 == 0)
}

/// The code point of the 2- or 3-byte character at the start of `s` when it is valid (as
/// `valid_char_len` decides), else `None`.
#[inline]
fn bmp_code_point(s: &[u8]) -> Option<u32> {
    let n = valid_char_len(s)?;
    let t = |i: usize| s.get(i).map_or(0, |&b| u32::from(b & 0x3f));
    let b0 = u32::from(*s.first()?);
    match n {
        2 => Some(((b0 & 0x1f) << 6) | t(1)),
        3 => Some(((b0 & 0x0f) << 12) | (t(1) << 6) | t(2)),
        _ => None,
    }
}

/// The code point of the character at the start of `s` when its lead byte is one of a 2- or
/// 3-byte character (`0xc2..=0xef`). `s` must be a suffix of a `str`: such a byte there starts
/// a character, and its sequence is valid, so it is decoded without `valid_char_len`'s checks
/// (the same code point `bmp_code_point` gives; that call per character was ~4 instructions
/// per byte of multilingual text).
#[inline(always)]
fn str_lead_code_point(s: &[u8]) -> Option<u32> {
    let b0 = u32::from(*s.first()?);
    let t = |i: usize| s.get(i).map_or(0, |&b| u32::from(b & 0x3f));
    match b0 {
        0xc2..=0xdf => Some(((b0 & 0x1f) << 6) | t(1)),
        0xe0..=0xef => Some(((b0 & 0x0f) << 12) | (t(1) << 6) | t(2)),
        _ => None,
    }
}

/// Where `normalize` writes the byte map: a `Vec<usize>`, or nothing (`NoAlign`).
trait Align {
    /// Whether the map is kept at all.
    const KEEP: bool;
    fn push(&mut self, v: usize);
    fn repeat(&mut self, v: usize, n: usize);
    /// Push `lo..hi`.
    fn range(&mut self, lo: usize, hi: usize);
    fn get(&self, i: usize) -> Option<usize>;
    fn truncate(&mut self, n: usize);
    fn clear(&mut self);
    fn reserve(&mut self, n: usize);
}

impl Align for Vec<usize> {
    const KEEP: bool = true;
    #[inline(always)]
    fn push(&mut self, v: usize) {
        Vec::push(self, v);
    }
    #[inline(always)]
    fn repeat(&mut self, v: usize, n: usize) {
        self.extend(std::iter::repeat_n(v, n));
    }
    #[inline(always)]
    fn range(&mut self, lo: usize, hi: usize) {
        self.extend(lo..hi);
    }
    #[inline(always)]
    fn get(&self, i: usize) -> Option<usize> {
        <[usize]>::get(self, i).copied()
    }
    #[inline(always)]
    fn truncate(&mut self, n: usize) {
        Vec::truncate(self, n);
    }
    #[inline(always)]
    fn clear(&mut self) {
        Vec::clear(self);
    }
    #[inline(always)]
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }
}

/// Drops the byte map (ids-only callers).
struct NoAlign;

impl Align for NoAlign {
    const KEEP: bool = false;
    #[inline(always)]
    fn push(&mut self, _: usize) {}
    #[inline(always)]
    fn repeat(&mut self, _: usize, _: usize) {}
    #[inline(always)]
    fn range(&mut self, _: usize, _: usize) {}
    #[inline(always)]
    fn get(&self, _: usize) -> Option<usize> {
        None
    }
    #[inline(always)]
    fn truncate(&mut self, _: usize) {}
    #[inline(always)]
    fn clear(&mut self) {}
    #[inline(always)]
    fn reserve(&mut self, _: usize) {}
}

impl SpNormalizer {
    /// The normalization of the longest rule at the start of `input` and how many input bytes
    /// it consumes.
    fn normalize_prefix<'a>(&'a self, input: &'a str, at: usize) -> Result<(&'a str, usize)> {
        let bytes = input.as_bytes().get(at..).unwrap_or_default();
        if let Some(ud) = &self.user_defined {
            if let Some((len, _)) = ud.longest_prefix(bytes) {
                // A user-defined piece is UTF-8, so its match is too.
                let m = std::str::from_utf8(&bytes[..len]).map_err(|_| {
                    Error::invalid("sentencepiece normalizer produced invalid UTF-8")
                })?;
                return Ok((m, len));
            }
        }
        if !self.charsmap.is_empty() {
            // The reference keeps only the first 32 (shortest) matches and takes the longest
            // of them; a rule whose replacement lies outside the table counts as no rule.
            let mut best: Option<(usize, u32)> = None;
            let mut seen = 0;
            self.charsmap.common_prefix_search(bytes, |len, v| {
                if seen < MAX_TRIE_RESULTS {
                    best = Some((len, v));
                }
                seen += 1;
            });
            // (A replacement that is not UTF-8 is treated as no rule too: piecework's text is
            // always UTF-8.)
            if let Some(rep) = best.and_then(|(len, v)| Some((len, self.charsmap.replacement(v)?)))
            {
                return Ok((rep.1, rep.0));
            }
        }
        // `at` is a character boundary whenever the character there is valid.
        match valid_char_len(bytes).and_then(|n| Some((input.get(at..at + n)?, n))) {
            Some(r) => Ok(r),
            None => Ok((REPLACEMENT, 1)),
        }
    }

    /// The normalization at `at` when it is simple: the character there is non-ASCII, no
    /// user-defined piece starts with its first byte, and the result (the longest charsmap
    /// rule's replacement, else the character itself) is non-empty and has no space. Exactly
    /// what `normalize_prefix` returns then (the user-defined search cannot match, and the
    /// rest is the same search), and the caller's space handling has nothing to do.
    #[inline]
    fn simple_char<'a>(&'a self, input: &'a str, at: usize) -> Option<(&'a str, usize)> {
        let bytes = input.as_bytes().get(at..)?;
        let &b = bytes.first()?;
        if b < 0x80 || (self.ud_free_lead[usize::from(b >> 6)] >> (b & 63)) & 1 == 0 {
            return None;
        }
        if let Some(cp) = bmp_code_point(bytes) {
            let n = if cp < 0x800 { 2 } else { 3 };
            let bit = self
                .bmp_plain
                .get(cp as usize >> 6)
                .map(|w| (w >> (cp & 63)) & 1);
            if bit == Some(1) {
                // No rule can match here: the character itself, as the search below finds.
                return Some((input.get(at..at + n)?, n));
            }
        }
        let mut best: Option<(usize, u32)> = None;
        let mut seen = 0;
        self.charsmap.common_prefix_search(bytes, |len, v| {
            if seen < MAX_TRIE_RESULTS {
                best = Some((len, v));
            }
            seen += 1;
        });
        let (rep, n) = match best {
            Some((len, v)) => (self.charsmap.replacement(v)?, len),
            None => {
                let n = valid_char_len(bytes)?;
                (input.get(at..at + n)?, n)
            }
        };
        (!rep.is_empty() && !rep.as_bytes().contains(&b' ')).then_some((rep, n))
    }

    /// Compute `ascii_plain` and `ascii_plain_before_ascii`; call again whenever `charsmap`
    /// or `user_defined` change.
    pub fn prepare(&mut self) {
        self.ascii_plain = 0;
        self.ascii_plain_before_ascii = 0;
        self.ud_free_lead = [0; 4];
        let mut bmp_plain = vec![0u64; 0x10000 / 64];
        let mut buf = [0u8; 4];
        // A character is plain when no rule key is a prefix of its bytes and none starts
        // with them. The 64 characters of a word of `bmp_plain` (code point >> 6) share all
        // their bytes but the last (`head`), so when no rule key is a prefix of `head` and
        // none starts with it, no key can be a prefix of one of them or start with one: all
        // 64 are plain, without asking the charsmap per character (most words, and every one
        // of an identity normalizer). The surrogate words are no characters and stay clear.
        let plain = |key: &[u8]| {
            let mut leaf = false;
            self.charsmap.common_prefix_search(key, |_, _| leaf = true);
            !leaf && !self.charsmap.has_prefix(key)
        };
        for (w, word) in bmp_plain.iter_mut().enumerate().skip(0x80 >> 6) {
            let lo = (w as u32) << 6;
            let Some(c) = char::from_u32(lo) else {
                continue;
            };
            let key = c.encode_utf8(&mut buf).as_bytes();
            if plain(key.get(..key.len() - 1).unwrap_or_default()) {
                *word = u64::MAX;
                continue;
            }
            for cp in lo..lo + 64 {
                let Some(c) = char::from_u32(cp) else {
                    continue;
                };
                if plain(c.encode_utf8(&mut buf).as_bytes()) {
                    *word |= 1u64 << (cp & 63);
                }
            }
        }
        // Shared: the normalizer is cloned per call on some paths.
        self.bmp_plain = bmp_plain.into();
        for b in 0..=255u8 {
            let free = self
                .user_defined
                .as_ref()
                .is_none_or(|ud| ud.keys_starting_with(b) == (false, false));
            if free {
                self.ud_free_lead[usize::from(b >> 6)] |= 1u64 << (b & 63);
            }
        }
        for b in 0..128u8 {
            // The reference tries the user-defined pieces first (longest match, copied raw
            // as one chunk): a lone `[b]` piece gives `b` as a 1-byte chunk, exactly what the
            // plain copy gives; a longer one would make a multi-byte chunk.
            if let Some(ud) = &self.user_defined {
                match ud.keys_starting_with(b) {
                    (_, true) => continue,
                    (true, false) => {
                        self.ascii_plain |= 1u128 << b;
                        continue;
                    }
                    (false, false) => {}
                }
            }
            if !self.charsmap.may_start_with(b) {
                self.ascii_plain |= 1u128 << b;
                continue;
            }
            let mut alone = false;
            self.charsmap
                .common_prefix_search(&[b], |len, _| alone |= len == 1);
            // A rule `[b, c, ...]` with `c` ASCII could match inside an ASCII run.
            if !alone && !(0..128u8).any(|c| self.charsmap.has_prefix(&[b, c])) {
                self.ascii_plain_before_ascii |= 1u128 << b;
            }
        }
        let mut class = vec![WORD_OTHER; 256];
        self.word_weak_next = 0;
        for b in 0..=255u8 {
            let bit = |m: u128| b < 128 && (m >> b) & 1 == 1;
            let ud_free = (self.ud_free_lead[usize::from(b >> 6)] >> (b & 63)) & 1 == 1;
            class[usize::from(b)] = if b == b' ' && bit(self.ascii_plain) {
                WORD_SPACE
            } else if bit(self.ascii_plain) {
                WORD_COPY
            } else if b < 128 {
                let base = match self.lone_ascii_rule(b) {
                    Some(r) if r == b" " => WORD_SPACE_BEFORE_ASCII,
                    Some(r) if r == [b] => WORD_COPY_BEFORE_ASCII,
                    _ => WORD_OTHER,
                };
                let ud_start = self
                    .user_defined
                    .as_ref()
                    .is_some_and(|ud| ud.keys_starting_with(b) != (false, false));
                if ud_start {
                    base | WORD_UD
                } else {
                    base
                }
            } else if (0xc2..0xf0).contains(&b) {
                if ud_free {
                    WORD_LEAD
                } else {
                    WORD_LEAD | WORD_UD
                }
            } else {
                WORD_OTHER
            };
            if matches!(
                class[usize::from(b)] & !WORD_UD,
                WORD_COPY_BEFORE_ASCII | WORD_SPACE_BEFORE_ASCII
            ) {
                for c in 128..=255u8 {
                    if self.charsmap.has_prefix(&[b, c]) {
                        self.word_weak_next |= 1u128 << (c - 128);
                    }
                }
            }
        }
        self.word_class = class.into();
    }

    /// What `normalize_prefix` gives for ASCII byte `b` when no user-defined piece matches
    /// there and no rule key continues `b` with the next byte, if that does not depend on
    /// more: no rule key continues `b` with an ASCII byte (NUL ends every search), and then
    /// the charsmap can only match `[b]` alone: its rule's replacement, or `b` itself
    /// without one.
    fn lone_ascii_rule(&self, b: u8) -> Option<Vec<u8>> {
        if b == 0 || (1..128u8).any(|c| self.charsmap.has_prefix(&[b, c])) {
            return None;
        }
        let mut rule = None;
        self.charsmap
            .common_prefix_search(&[b], |len, v| rule = (len == 1).then_some(v));
        match rule {
            None => Some(vec![b]),
            Some(v) => self.charsmap.replacement(v).map(|r| r.as_bytes().to_vec()),
        }
    }

    /// The words of the normalization of `input` (with whitespace removal, escaping and a
    /// leading dummy prefix, and no suffix space): that normalization is empty when there
    /// are no words, else `▁` followed by the words joined with `▁`, where a word may be
    /// empty (a literal `▁` next to another). Each word is pushed to `words` as a byte range
    /// of `input`, or, with `WORD_IN_BUF` set on its start, of `buf` (a word some rule or
    /// user-defined piece changed, which is written out there). False when the options
    /// differ or the input or `buf` reach 2 GiB (`words` and `buf` then hold anything).
    ///
    /// Why it is `normalize_with`'s result. That loop reads `input` chunk by chunk, each
    /// chunk being `normalize_prefix`'s longest match at the end of the previous one, and its
    /// only state besides the output is `is_prev_space`. Its leading-space loop skips chunks
    /// that give exactly `" "`, which is what the main loop does with them while
    /// `is_prev_space` holds (the text trimmed to nothing), and the dummy `▁` that follows is
    /// trimmed again at the end when nothing else is written; so the whole is: `▁`, then the
    /// main loop from `is_prev_space`, then the trailing `▁`s trimmed. Here `i` is always a
    /// chunk boundary and `is_prev_space` is "no current word" (`start` and `bstart` both
    /// `None`: the output ends with the `▁` of a space). The common chunks are taken without
    /// the search: a byte that is its own normalization (`WORD_COPY`, or
    /// `WORD_COPY_BEFORE_ASCII` where no rule key continues it with the next byte, as
    /// `lone_ascii_rule` argues), a 2- or 3-byte character no rule matches (`WORD_LEAD`, by
    /// the `bmp_plain` shortcut or the rules' search; not `▁`), and a space (`WORD_SPACE*`),
    /// which writes `▁` unless `is_prev_space` (both where no user-defined piece matches).
    /// Every other chunk is `normalize_prefix`'s, handled as the main loop handles it (see
    /// `general_chunk`). A word stays a range of `input` while its chunks are copies, and
    /// its part so far moves to `buf` at its first other chunk (see `Words`). The trailing
    /// trim drops the trailing empty words (their `▁`s end the output). Before this took
    /// the other chunks too, one of them sent the whole text to `normalize_text` and the
    /// segmenter's scan for `▁` (every multilingual document did).
    // (Kept apart from its caller: inlined there, the loop below lost its registers.)
    #[inline(never)]
    pub(crate) fn plain_words(
        &self,
        input: &str,
        words: &mut Vec<(u32, u32)>,
        buf: &mut Vec<u8>,
    ) -> bool {
        words.clear();
        buf.clear();
        let class = &self.word_class[..];
        if class.len() != 256
            || !(self.add_dummy_prefix
                && self.remove_extra_whitespaces
                && self.escape_whitespaces
                && !self.treat_whitespace_as_suffix)
            || input.len() >= WORD_IN_BUF as usize
        {
            return false;
        }
        let bytes = input.as_bytes();
        let weak_next = self.word_weak_next;
        let alone_at = |i: usize| stands_alone(bytes, weak_next, i);
        let mut w = Words { words, buf };
        let (mut bstart, mut start) = (None::<usize>, None::<usize>);
        let mut i = 0usize;
        while let Some(&b) = bytes.get(i) {
            let c = class[usize::from(b)];
            // The common bytes first, without the general step's branches.
            if c == WORD_COPY || c == WORD_COPY_BEFORE_ASCII && alone_at(i + 1) {
                start.get_or_insert(i);
                i += 1;
                continue;
            }
            // (`WORD_SPACE` or `WORD_SPACE_BEFORE_ASCII`, tested so that the compiler does
            // not turn the tests into a jump table, which costs the copy test above.)
            if c | 1 == WORD_SPACE_BEFORE_ASCII && (c == WORD_SPACE || alone_at(i + 1)) {
                match (bstart, start) {
                    (None, Some(a)) => w.words.push((a as u32, i as u32)),
                    (Some(_), _) => w.end_word(bytes, i, bstart, start),
                    (None, None) => {}
                }
                (bstart, start) = (None, None);
                i += 1;
                continue;
            }
            match self.word_step(input, i, c, &mut w, bstart, start) {
                Some(r) => (i, bstart, start) = r,
                None => return false,
            }
        }
        w.finish(bytes, bstart, start);
        w.buf.len() < WORD_IN_BUF as usize
    }

    /// One chunk of `plain_words` at `i` (byte class `c`) other than its loop's common
    /// ones: the new `i`, `bstart` and `start`; `None` to decline the text. (Apart from the
    /// loop, so that the loop keeps its variables in registers.)
    #[inline(never)]
    fn word_step(
        &self,
        input: &str,
        i: usize,
        c: u8,
        w: &mut Words<'_>,
        bstart: Option<usize>,
        start: Option<usize>,
    ) -> Option<(usize, Option<usize>, Option<usize>)> {
        let bytes = input.as_bytes();
        let weak_next = self.word_weak_next;
        let alone_at = |i: usize| stands_alone(bytes, weak_next, i);
        let rest = bytes.get(i..).unwrap_or_default();
        let ud = c & WORD_UD != 0
            && self
                .user_defined
                .as_ref()
                .is_some_and(|ud| ud.longest_prefix(rest).is_some());
        // The length of a chunk that is its own normalization, `Some(0)` for a space,
        // `None` for a chunk of the general step.
        let n = match c & !WORD_UD {
            _ if ud => None,
            WORD_COPY => Some(1),
            WORD_COPY_BEFORE_ASCII if alone_at(i + 1) => Some(1),
            WORD_SPACE => Some(0),
            WORD_SPACE_BEFORE_ASCII if alone_at(i + 1) => Some(0),
            WORD_LEAD => self.plain_lead_len(rest).map(|n| {
                // The characters after it that are copied the same way are taken here: the
                // loop would bring each to this arm (its two tests fail on `WORD_LEAD`), and
                // the arm decides from the character and what follows alone, so the result
                // is the same without a call and a return per character.
                let class = &self.word_class[..];
                let mut j = i + n;
                while let Some(m) = bytes
                    .get(j..)
                    .filter(|r| {
                        r.first()
                            .is_some_and(|&b| class.get(usize::from(b)) == Some(&WORD_LEAD))
                    })
                    .and_then(|r| self.plain_lead_len(r))
                {
                    j += m;
                }
                j - i
            }),
            _ => None,
        };
        match n {
            Some(0) => {
                if start.is_some() || bstart.is_some() {
                    w.end_word(bytes, i, bstart, start);
                }
                Some((i + 1, None, None))
            }
            Some(n) => Some((i + n, bstart, start.or(Some(i)))),
            None => match self.normalize_prefix(input, i) {
                Ok((sp, n)) if n > 0 => {
                    let bstart = w.general_chunk(bytes, i, sp, bstart, start);
                    Some((i + n, bstart, None))
                }
                // (Not for a `str` and pieces that are not empty; the general path
                // handles it.)
                _ => None,
            },
        }
    }

    /// The length of the 2- or 3-byte character at the start of `rest` (a `WORD_LEAD` byte)
    /// when it is its own normalization there, else `None` (the general step takes it).
    #[inline(always)]
    fn plain_lead_len(&self, rest: &[u8]) -> Option<usize> {
        // (`rest` is a suffix of `plain_words`'s `str`.)
        match str_lead_code_point(rest) {
            // (A literal `▁` ends a word: the general step splits there.)
            Some(cp) if cp != 0x2581 => {
                let plain = self
                    .bmp_plain
                    .get(cp as usize >> 6)
                    .is_some_and(|w| (w >> (cp & 63)) & 1 == 1);
                // A character that only begins longer rules (NFKC's letter + combining
                // mark) is plain where none of them matches: with no rule (and no
                // user-defined piece) there, `normalize_prefix` gives the character itself.
                let mut rule = false;
                if !plain {
                    self.charsmap.common_prefix_search(rest, |_, _| rule = true);
                }
                match (rule, cp < 0x800) {
                    (true, _) => None,
                    (false, true) => Some(2),
                    (false, false) => Some(3),
                }
            }
            _ => None,
        }
    }

    /// Normalize `input` into `normalized`, filling `norm_to_orig` (original byte offset of the
    /// chunk each normalized byte came from, plus one final entry). Both are empty when the
    /// input normalizes to nothing.
    pub fn normalize(
        &self,
        input: &str,
        normalized: &mut String,
        norm_to_orig: &mut Vec<usize>,
    ) -> Result<()> {
        self.normalize_with(input, normalized, norm_to_orig)
    }

    /// `normalize` without the byte map, for callers that want only ids. The same code runs
    /// with a sink that drops the map (`NoAlign`): the map is only ever written, except at the
    /// trailing-space trim, where the value read back only feeds further map entries; so
    /// `normalized` comes out byte for byte as from `normalize`.
    pub fn normalize_text(&self, input: &str, normalized: &mut String) -> Result<()> {
        self.normalize_with(input, normalized, &mut NoAlign)
    }

    /// No rules, user-defined pieces or whitespace removal (Llama's "identity" normalizer).
    fn is_identity(&self) -> bool {
        self.charsmap.is_empty() && self.user_defined.is_none() && !self.remove_extra_whitespaces
    }

    /// What a space becomes.
    fn space(&self) -> &'static str {
        if self.escape_whitespaces {
            SPACE_SYMBOL
        } else {
            " "
        }
    }

    /// `normalize_text` without rules, user-defined pieces or whitespace removal (Llama's
    /// "identity" normalizer): every character is its own normalization (a `str` is valid
    /// UTF-8, so `normalize_prefix` would copy each character as it is) except the space,
    /// which is escaped; plus the dummy prefix. What the general loop gives, without its
    /// per-character steps.
    fn normalize_identity(&self, input: &str, out: &mut String) {
        let space = self.space();
        out.reserve(input.len() + input.len() / 2 + space.len());
        if self.add_dummy_prefix && !self.treat_whitespace_as_suffix {
            out.push_str(space);
        }
        if self.escape_whitespaces {
            let mut run = 0;
            for (k, &b) in input.as_bytes().iter().enumerate() {
                if b == b' ' {
                    // ASCII: `run` and `k` are character boundaries.
                    out.push_str(input.get(run..k).unwrap_or_default());
                    out.push_str(space);
                    run = k + 1;
                }
            }
            out.push_str(input.get(run..).unwrap_or_default());
        } else {
            out.push_str(input);
        }
        if self.add_dummy_prefix && self.treat_whitespace_as_suffix {
            out.push_str(space);
        }
    }

    /// `normalize_text`'s result as bytes, for the identity normalizer only (else false and
    /// `out` untouched): what `normalize_identity` writes, with the spaces escaped eight
    /// bytes at a time (see `escape_spaces`). Bytes, not a `String`, because the result
    /// would otherwise need a UTF-8 check to become one, which costs more than the escaping
    /// (every `▁` is a multi-byte character, off the check's ASCII fast path).
    pub fn normalize_bytes(&self, input: &str, out: &mut Vec<u8>) -> bool {
        if !self.is_identity() {
            return false;
        }
        out.clear();
        if input.is_empty() {
            return true;
        }
        let space = self.space().as_bytes();
        out.reserve(input.len() + input.len() / 2 + 16);
        if self.add_dummy_prefix && !self.treat_whitespace_as_suffix {
            out.extend_from_slice(space);
        }
        if self.escape_whitespaces {
            escape_spaces(input.as_bytes(), out);
        } else {
            out.extend_from_slice(input.as_bytes());
        }
        if self.add_dummy_prefix && self.treat_whitespace_as_suffix {
            out.extend_from_slice(space);
        }
        true
    }

    fn normalize_with<A: Align>(
        &self,
        input: &str,
        normalized: &mut String,
        norm_to_orig: &mut A,
    ) -> Result<()> {
        normalized.clear();
        norm_to_orig.clear();
        let mut inp = input.as_bytes();
        if inp.is_empty() {
            return Ok(());
        }
        if !A::KEEP && self.is_identity() {
            self.normalize_identity(input, normalized);
            return Ok(());
        }
        let mut consumed = 0usize;
        if self.remove_extra_whitespaces {
            // A plain space is its own normalization: `normalize_prefix` would give " ".
            let plain_space = (self.ascii_plain >> b' ') & 1 == 1;
            while !inp.is_empty() {
                if plain_space && inp.first() == Some(&b' ') {
                    inp = inp.get(1..).unwrap_or_default();
                    consumed += 1;
                    continue;
                }
                let (p, n) = self.normalize_prefix(input, consumed)?;
                if p != " " {
                    break;
                }
                inp = inp.get(n..).unwrap_or_default();
                consumed += n;
            }
        }
        if inp.is_empty() {
            return Ok(());
        }
        let out = normalized;
        out.reserve(inp.len() * 3);
        norm_to_orig.reserve(inp.len() * 3);
        let escape = self.escape_whitespaces;
        let space = if escape { SPACE_SYMBOL } else { " " };
        let add_ws = |out: &mut String, n2o: &mut A, consumed: usize| {
            out.push_str(space);
            n2o.repeat(consumed, space.len());
        };
        if !self.treat_whitespace_as_suffix && self.add_dummy_prefix {
            add_ws(out, norm_to_orig, consumed);
        }
        // A plain ASCII character is its own normalization (`normalize_prefix` would return
        // it unchanged), so it is copied as it is; a plain space is handled exactly as the
        // general loop below handles " ". A byte of `ascii_plain_before_ascii` followed by an
        // ASCII byte (or the end) has no rule that can match there, so it is plain at that
        // position too. The masks are split in two u64 halves (a u128 shift by a variable
        // costs several instructions, and this test runs once per byte).
        let plain = self.ascii_plain;
        let weak = self.ascii_plain_before_ascii;
        let halves = |m: u128| [m as u64, (m >> 64) as u64];
        let (plain2, weak2) = (halves(plain), halves(weak));
        let bit = |m: &[u64; 2], b: u8| (m[usize::from(b >> 6)] >> (b & 63)) & 1 == 1;
        let plain_at = |inp: &[u8], i: usize| {
            inp.get(i).is_some_and(|&b| {
                b < 0x80
                    && (bit(&plain2, b)
                        || bit(&weak2, b) && inp.get(i + 1).is_none_or(|&c| c < 0x80))
            })
        };
        let mut is_prev_space = self.remove_extra_whitespaces;
        while !inp.is_empty() {
            if plain | weak != 0 {
                // The plain prefix, one byte at a time (words are short: a run copy would
                // pay its setup per word).
                // Runs between spaces are copied whole (ASCII, so `input` has character
                // boundaries at both ends).
                let mut k = 0usize;
                let mut run = 0usize;
                let copy = |out: &mut String, n2o: &mut A, lo: usize, hi: usize| {
                    if lo < hi {
                        out.push_str(input.get(lo..hi).unwrap_or_default());
                        n2o.range(lo, hi);
                    }
                };
                while plain_at(inp, k) {
                    if inp[k] == b' ' {
                        copy(out, norm_to_orig, consumed + run, consumed + k);
                        if !is_prev_space {
                            add_ws(out, norm_to_orig, consumed + k);
                        }
                        is_prev_space = self.remove_extra_whitespaces;
                        run = k + 1;
                    } else {
                        is_prev_space = false;
                    }
                    k += 1;
                }
                copy(out, norm_to_orig, consumed + run, consumed + k);
                if k > 0 {
                    consumed += k;
                    inp = inp.get(k..).unwrap_or_default();
                    continue;
                }
            }
            if let Some((sp, n)) = self.simple_char(input, consumed) {
                // As the general step below: no space to trim or escape, and the result ends
                // in a non-space.
                out.push_str(sp);
                norm_to_orig.repeat(consumed, sp.len());
                is_prev_space = false;
                consumed += n;
                inp = inp.get(n..).unwrap_or_default();
                continue;
            }
            let (mut sp, n) = self.normalize_prefix(input, consumed)?;
            if is_prev_space {
                sp = sp.trim_start_matches(' ');
            }
            if !sp.is_empty() {
                for part in sp.split_inclusive(' ') {
                    match part.strip_suffix(' ') {
                        Some(text) => {
                            out.push_str(text);
                            norm_to_orig.repeat(consumed, text.len());
                            add_ws(out, norm_to_orig, consumed);
                        }
                        None => {
                            out.push_str(part);
                            norm_to_orig.repeat(consumed, part.len());
                        }
                    }
                }
                is_prev_space = sp.ends_with(' ');
            }
            consumed += n;
            inp = inp.get(n..).unwrap_or_default();
            if !self.remove_extra_whitespaces {
                is_prev_space = false;
            }
        }
        if self.remove_extra_whitespaces {
            while out.ends_with(space) {
                let len = out.len() - space.len();
                consumed = norm_to_orig.get(len).unwrap_or(consumed);
                out.truncate(len);
                norm_to_orig.truncate(len);
            }
        }
        if self.treat_whitespace_as_suffix && self.add_dummy_prefix {
            add_ws(out, norm_to_orig, consumed);
        }
        norm_to_orig.push(consumed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(n: &SpNormalizer, s: &str) -> (String, Vec<usize>) {
        let mut out = String::new();
        let mut map = vec![];
        n.normalize(s, &mut out, &mut map).unwrap();
        (out, map)
    }

    fn default_norm() -> SpNormalizer {
        SpNormalizer {
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
            ..Default::default()
        }
    }

    #[test]
    fn collapses_and_trims_spaces_with_dummy_prefix() {
        let n = default_norm();
        let (s, m) = norm(&n, "  a  b ");
        assert_eq!(s, "▁a▁b");
        // The dummy ▁ maps to where the text starts after the leading spaces; the ▁ between
        // the words maps to the first space of the run; the final entry is the trimmed end.
        assert_eq!(m, vec![2, 2, 2, 2, 3, 3, 3, 5, 6]);
        assert_eq!(norm(&n, "   ").0, "");
        assert_eq!(norm(&n, "").1, Vec::<usize>::new());
    }

    #[test]
    fn keeps_spaces_when_asked() {
        let n = SpNormalizer {
            add_dummy_prefix: false,
            remove_extra_whitespaces: false,
            escape_whitespaces: true,
            ..Default::default()
        };
        assert_eq!(norm(&n, "a  b ").0, "a▁▁b▁");
        let n = SpNormalizer {
            add_dummy_prefix: true,
            treat_whitespace_as_suffix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
            ..Default::default()
        };
        assert_eq!(norm(&n, "a b").0, "a▁b▁");
        let n = SpNormalizer {
            escape_whitespaces: false,
            ..default_norm()
        };
        assert_eq!(norm(&n, " a  b ").0, " a b");
    }

    #[test]
    fn user_defined_pieces_are_copied_raw_as_one_chunk() {
        let ud = ByteTrie::build(vec![("ＡＢ".as_bytes(), 7)]);
        let n = SpNormalizer {
            user_defined: Some(ud),
            ..default_norm()
        };
        let (s, m) = norm(&n, "xＡＢ");
        assert_eq!(s, "▁xＡＢ");
        // Every byte of the match maps to the match's start.
        assert_eq!(&m[4..], &[1, 1, 1, 1, 1, 1, 7]);
    }

    #[test]
    fn ascii_fast_path_matches_general_path() {
        // `prepare` turns the ASCII fast path on; without it the general path runs. Both
        // must agree on every setting.
        let alphabet: Vec<char> = "ab  \u{3000}é\t.\0😀\u{2581}".chars().collect();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for flags in 0..16u32 {
            let general = SpNormalizer {
                add_dummy_prefix: flags & 1 != 0,
                remove_extra_whitespaces: flags & 2 != 0,
                escape_whitespaces: flags & 4 != 0,
                treat_whitespace_as_suffix: flags & 8 != 0,
                ..Default::default()
            };
            let mut fast = general.clone();
            fast.prepare();
            assert_eq!(fast.ascii_plain, u128::MAX);
            agree(&fast, &general, &alphabet, 500, 12, &mut x, flags);
        }
    }

    #[test]
    fn normalize_bytes_matches_the_general_path() {
        // The aligned `normalize` never takes the identity shortcut: it is the reference.
        // Texts up to 40 characters, so spaces fall at every offset of the eight-byte words,
        // next to multi-byte characters cut by a word's end.
        let alphabet: Vec<char> = "ab    \u{3000}é\t.\0😀\u{2581}中".chars().collect();
        let mut next = crate::test_rng(0x0bad_cafe_1234_5678);
        let mut got = Vec::new();
        for flags in 0..16u32 {
            let n = SpNormalizer {
                add_dummy_prefix: flags & 1 != 0,
                remove_extra_whitespaces: flags & 2 != 0,
                escape_whitespaces: flags & 4 != 0,
                treat_whitespace_as_suffix: flags & 8 != 0,
                ..Default::default()
            };
            for _ in 0..400 {
                let len = (next() % 41) as usize;
                let text: String = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                got.push(0xAA);
                if !n.normalize_bytes(&text, &mut got) {
                    assert!(n.remove_extra_whitespaces, "{flags}");
                    continue;
                }
                assert_eq!(got, norm(&n, &text).0.as_bytes(), "{flags} {text:?}");
            }
        }
        let with_rules = SpNormalizer {
            user_defined: Some(ByteTrie::build(vec![("ab".as_bytes(), 7)])),
            remove_extra_whitespaces: false,
            ..default_norm()
        };
        assert!(!with_rules.normalize_bytes("a b", &mut got));
    }

    /// `n` generated texts (up to `max_len` characters of `alphabet`) normalize alike.
    fn agree(
        fast: &SpNormalizer,
        general: &SpNormalizer,
        alphabet: &[char],
        n: usize,
        max_len: u64,
        x: &mut u64,
        flags: u32,
    ) -> usize {
        let (mut words, mut buf) = (Vec::new(), Vec::new());
        let mut plain = 0;
        for _ in 0..n {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            let len = (*x % max_len) as usize;
            let text: String = (0..len)
                .map(|k| alphabet[((*x >> (4 * k)) % alphabet.len() as u64) as usize])
                .collect();
            let want = norm(general, &text);
            assert_eq!(norm(fast, &text), want, "{text:?} {flags}");
            // The map-free variant gives the same text.
            let mut s = String::from("stale");
            fast.normalize_text(&text, &mut s).unwrap();
            assert_eq!(s, want.0, "{text:?} {flags}");
            // When `plain_words` takes the text, its words make the same normalization.
            if fast.plain_words(&text, &mut words, &mut buf) {
                let mut joined = Vec::new();
                for &w in &words {
                    joined.extend_from_slice(SPACE_SYMBOL.as_bytes());
                    joined.extend_from_slice(word_bytes(text.as_bytes(), &buf, w));
                }
                let joined = String::from_utf8(joined).unwrap();
                assert_eq!(joined, want.0, "{text:?} {flags} {words:?}");
                plain += 1;
            }
        }
        plain
    }

    #[test]
    fn ascii_fast_path_with_a_real_charsmap() {
        // nmt_nfkc from real models (skipped without the shared data): the fast path must
        // agree with the general path on text mixing ASCII and characters NFKC changes.
        // (xlnet's also drops controls and makes U+200B and `▁` spaces.)
        for model in [
            "bpemb-en/en.wiki.bpe.vs100000.model",
            "xlnet-base-cased/spiece.model",
        ] {
            real_charsmap_agrees(model);
        }
    }

    fn real_charsmap_agrees(model: &str) {
        let dir = crate::test_data_dir();
        let path = format!("{dir}/{model}");
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("skipped: {path} not found");
            return;
        };
        let data = crate::formats::sentencepiece::parse_model(&bytes).unwrap();
        let charsmap = CharsMap::parse(&data.normalizer.precompiled_charsmap).unwrap();
        // (With NFKC: `¨` and `´` become a space and a combining mark, `½` and `㈜` several
        // characters.)
        let alphabet: Vec<char> =
            "aZ0 ~Q\t\r\n\u{7f}\u{1}.ﬁ…　Ａ\u{a0}é\u{301}\u{308}\u{338}=<e▁¨´½㈜\u{200b}𝔸"
                .chars()
                .collect();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for flags in 0..4u32 {
            let general = SpNormalizer {
                charsmap: charsmap.clone(),
                add_dummy_prefix: flags & 1 != 0,
                remove_extra_whitespaces: flags & 2 != 0,
                escape_whitespaces: true,
                ..Default::default()
            };
            let mut fast = general.clone();
            fast.prepare();
            // (NFKC has rules starting with most letters: combining sequences; those letters
            // are plain before an ASCII byte.)
            assert!(fast.ascii_plain & (1 << b' ') != 0 && fast.ascii_plain & (1 << b'0') != 0);
            assert!(fast.ascii_plain_before_ascii & (1 << b'a') != 0);
            let plain = agree(&fast, &general, &alphabet, 4000, 14, &mut x, flags);
            // Mostly characters `plain_words` takes, and a few it refuses or that change
            // what their neighbour does.
            let mostly_plain: Vec<char> = "aaZ0  \t\n\r.é=<e€–“日ﬁ\u{301}\u{338}▁¨\u{200b}"
                .chars()
                .collect();
            let plain = plain + agree(&fast, &general, &mostly_plain, 4000, 14, &mut x, flags);
            // (`plain_words` needs the dummy prefix and whitespace removal, and then takes
            // every text.)
            assert!(
                if flags == 3 {
                    plain == 8000
                } else {
                    plain == 0
                },
                "{plain}"
            );
            // User-defined pieces: lone ASCII ones stay plain, longer ones start chunks.
            for uds in [
                &["<eop>", ".", "(", "ab", "e\u{301}x"][..],
                &["<", "aZ", "Q"][..],
                // Non-ASCII leads: `simple_char` must leave these to the general path.
                &["é", "Ａ.", "("][..],
            ] {
                let general = SpNormalizer {
                    user_defined: Some(ByteTrie::from_pairs(
                        uds.iter()
                            .enumerate()
                            .map(|(i, p)| (p.as_bytes(), i as u32)),
                    )),
                    ..general.clone()
                };
                let mut fast = general.clone();
                fast.prepare();
                assert!(fast.ascii_plain & (1 << b'.') != 0 || uds.len() == 3);
                assert!(fast.ascii_plain & (1 << b'a') == 0);
                let alphabet: Vec<char> = "aZ0 Qb.(<eop>x\u{301}\u{a0}éＡ…ﬁ▁¨".chars().collect();
                let mut plain = agree(&fast, &general, &alphabet, 3000, 16, &mut x, flags);
                let mostly_plain: Vec<char> = "aaZ0  \n.(é<eop>Ａ€–▁".chars().collect();
                plain += agree(&fast, &general, &mostly_plain, 3000, 12, &mut x, flags);
                assert!(flags != 3 || plain == 6000, "{plain}");
            }
        }
    }

    #[test]
    fn bmp_shortcut_matches_the_charsmap_walk_for_every_character() {
        // Every character below U+10000, alone and before characters that start NFKC rules
        // (combining marks, a letter, a space), normalizes alike with `prepare`'s
        // character table and without it (the general path walks the charsmap each time).
        let dir = crate::test_data_dir();
        for file in [
            "bpemb-en/en.wiki.bpe.vs100000.model",
            "xlnet-base-cased/spiece.model",
        ] {
            let path = format!("{dir}/{file}");
            let Ok(bytes) = std::fs::read(&path) else {
                eprintln!("skipped: {path} not found");
                continue;
            };
            let data = crate::formats::sentencepiece::parse_model(&bytes).unwrap();
            let charsmap = CharsMap::parse(&data.normalizer.precompiled_charsmap).unwrap();
            let general = SpNormalizer {
                charsmap,
                ..default_norm()
            };
            let mut fast = general.clone();
            fast.prepare();
            let mut plain = 0usize;
            for cp in 0x80..0x10000u32 {
                let Some(c) = char::from_u32(cp) else {
                    continue;
                };
                plain += ((fast.bmp_plain[cp as usize >> 6] >> (cp & 63)) & 1) as usize;
                for text in [
                    format!("{c}"),
                    format!("a{c}\u{301}{c}{c}b"),
                    format!(" {c}\u{3099} {c}\u{ff9e}x\u{338}"),
                ] {
                    assert_eq!(
                        norm(&fast, &text),
                        norm(&general, &text),
                        "U+{cp:04X} {file}"
                    );
                }
            }
            // The table does take most characters (and leaves the NFKC ones to the walk).
            assert!(plain > 20_000 && plain < 63_000, "{plain} {file}");
        }
    }

    #[test]
    fn bmp_plain_by_words_is_the_per_character_rule() {
        // `prepare` decides 64 characters at once where it can: the table must be exactly
        // the per-character rule (no rule key is a prefix of the character's bytes, and none
        // starts with them), for the identity and for real charsmaps.
        let dir = crate::test_data_dir();
        let mut maps = vec![CharsMap::default()];
        for file in [
            "bpemb-en/en.wiki.bpe.vs100000.model",
            "xlnet-base-cased/spiece.model",
            "pegasus/pegasus.model",
        ] {
            match std::fs::read(format!("{dir}/{file}")) {
                Ok(bytes) => {
                    let data = crate::formats::sentencepiece::parse_model(&bytes).unwrap();
                    maps.push(CharsMap::parse(&data.normalizer.precompiled_charsmap).unwrap());
                }
                Err(_) => eprintln!("skipped: {file} not found"),
            }
        }
        for charsmap in maps {
            let mut n = SpNormalizer {
                charsmap,
                ..default_norm()
            };
            n.prepare();
            let mut buf = [0u8; 4];
            for cp in 0..0x10000u32 {
                let want = cp >= 0x80
                    && char::from_u32(cp).is_some_and(|c| {
                        let key = c.encode_utf8(&mut buf).as_bytes();
                        let mut leaf = false;
                        n.charsmap.common_prefix_search(key, |_, _| leaf = true);
                        !leaf && !n.charsmap.has_prefix(key)
                    });
                let got = (n.bmp_plain[cp as usize >> 6] >> (cp & 63)) & 1 == 1;
                assert_eq!(got, want, "U+{cp:04X}");
            }
        }
    }

    #[test]
    fn leading_plain_spaces_are_skipped_as_the_general_path_does() {
        let general = default_norm();
        let mut fast = general.clone();
        fast.prepare();
        for text in ["    x = 1", " ", "  \u{3000} a", "\t  b ", "   ▁c"] {
            assert_eq!(norm(&fast, text), norm(&general, text), "{text:?}");
        }
    }

    #[test]
    fn utf8_rules_match_the_reference() {
        assert_eq!(valid_char_len("é".as_bytes()), Some(2));
        assert_eq!(valid_char_len(&[0xc3]), None);
        assert_eq!(valid_char_len(&[0xe0, 0x80, 0x80]), None); // overlong
        assert_eq!(valid_char_len(&[0xed, 0xa0, 0x80]), None); // surrogate
        assert_eq!(valid_char_len(&[0xf4, 0x90, 0x80, 0x80]), None); // > U+10FFFF
        assert_eq!(valid_char_len("😀".as_bytes()), Some(4));
        assert_eq!(one_char_len(0x80), 1);
    }
}
