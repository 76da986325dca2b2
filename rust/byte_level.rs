//! ByteLevel: the GPT-2 byte↔unicode mapping, used as pre-tokenizer, normalizer, decoder and
//! post-processor (offset trimming), with the behaviour of `tokenizers` 0.22.1.
//!
//! The pre-tokenizer's GPT-2 regex
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` is run by a
//! hand-written scanner (no regex engine on the hot path) whose character classes come from
//! tables generated from Oniguruma itself (`byte_level/tables.rs`), so every code point is
//! classified as the reference classifies it.

pub(crate) mod cl100k;
pub(crate) mod o200k;
mod tables;

use crate::decoders::Decoder;
use crate::encoding::Encoding;
use crate::error::{Error, Result};
use crate::normalizers::Normalizer;
use crate::pre_tokenizers::PreTokenizer;
use crate::processors::PostProcessor;
use crate::text::unicode::in_ranges;
use crate::text::{NormalizedString, Pattern, PreTokenizedString, SplitBehavior};
use serde_json::Value;
use std::sync::OnceLock;

#[derive(Debug, Clone)]
pub struct ByteLevel {
    pub add_prefix_space: bool,
    pub trim_offsets: bool,
    pub use_regex: bool,
}

impl Default for ByteLevel {
    fn default() -> Self {
        ByteLevel {
            add_prefix_space: true,
            trim_offsets: true,
            use_regex: true,
        }
    }
}

/// The byte → char table of GPT-2: printable Latin-1 bytes map to themselves, the other 68
/// bytes to U+0100.. in byte order.
fn build_bytes_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut n = 0u32;
    for b in 0..=255u8 {
        table[b as usize] = if printable(b) {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or('\0')
        };
    }
    table
}

fn bytes_char() -> &'static [char; 256] {
    static T: OnceLock<[char; 256]> = OnceLock::new();
    T.get_or_init(build_bytes_char)
}

/// char → byte, for chars below U+0144 (the largest mapped char is U+0143).
fn char_bytes() -> &'static [Option<u8>; 0x144] {
    static T: OnceLock<[Option<u8>; 0x144]> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = [None; 0x144];
        for (b, &c) in bytes_char().iter().enumerate() {
            if let Some(slot) = t.get_mut(c as usize) {
                *slot = Some(b as u8);
            }
        }
        t
    })
}

/// The GPT-2 character of a byte.
pub fn byte_to_char(b: u8) -> char {
    bytes_char()[b as usize]
}

/// The byte a GPT-2 character stands for.
pub fn char_to_byte(c: char) -> Option<u8> {
    char_bytes().get(c as usize).copied().flatten()
}

/// The 256 characters of the byte-level alphabet.
pub fn alphabet() -> Vec<char> {
    bytes_char().to_vec()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

const fn ascii_class(b: u8) -> Class {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' => Class::Letter,
        b'0'..=b'9' => Class::Number,
        b'\t'..=b'\r' | b' ' => Class::Space,
        _ => Class::Other,
    }
}

static ASCII_CLASS: [Class; 128] = {
    let mut t = [Class::Other; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = ascii_class(i as u8);
        i += 1;
    }
    t
};

#[inline(always)]
fn class(c: char) -> Class {
    match ASCII_CLASS.get(c as usize) {
        Some(&k) => k,
        None => class_above_ascii(c),
    }
}

/// The class of every BMP code point, two bits each (`B_*` order: letter, number, space,
/// other), built at compile time from the same range tables as `class_by_ranges`: a
/// non-ASCII character is classified by one load instead of up to three binary searches
/// (the multilingual texts' cost). 16 KB, of which a text touches the few lines of its
/// scripts.
static BMP_CLASS: [u8; 0x4000] = {
    // Other everywhere, then space, number and letter written over it, so that a code point
    // in several tables (none is) would get the class `class_by_ranges` checks first.
    let mut t = [0xFFu8; 0x4000];
    let tables: [(&[(u32, u32)], u8); 3] = [
        (&tables::SPACE, B_SPACE),
        (&tables::NUMBER, B_NUMBER),
        (&tables::LETTER, B_LETTER),
    ];
    let mut k = 0;
    while k < tables.len() {
        let (ranges, class) = tables[k];
        let mut r = 0;
        while r < ranges.len() {
            let (a, b) = ranges[r];
            let mut c = a;
            while c <= b && c < 0x1_0000 {
                let (byte, shift) = ((c >> 2) as usize, (c & 3) * 2);
                t[byte] = (t[byte] & !(3 << shift)) | (class << shift);
                c += 1;
            }
            r += 1;
        }
        k += 1;
    }
    t
};

/// The `B_*` class of a BMP code point (`cp < 0x1_0000`).
#[inline(always)]
fn bmp_class(cp: u32) -> u8 {
    let byte = BMP_CLASS.get((cp >> 2) as usize).copied().unwrap_or(0xFF);
    (byte >> ((cp & 3) * 2)) & 3
}

const fn class_of_bits(k: u8) -> Class {
    match k {
        B_LETTER => Class::Letter,
        B_NUMBER => Class::Number,
        B_SPACE => Class::Space,
        _ => Class::Other,
    }
}

#[inline]
fn class_above_ascii(c: char) -> Class {
    let cp = c as u32;
    if cp < 0x1_0000 {
        class_of_bits(bmp_class(cp))
    } else {
        class_by_ranges(c)
    }
}

/// The class from the range tables (Oniguruma's, generated): the definition `BMP_CLASS`
/// is built from, and the classifier of the supplementary planes.
#[inline(never)]
fn class_by_ranges(c: char) -> Class {
    if in_ranges(&tables::LETTER, c) {
        Class::Letter
    } else if in_ranges(&tables::NUMBER, c) {
        Class::Number
    } else if in_ranges(&tables::SPACE, c) {
        Class::Space
    } else {
        Class::Other
    }
}

/// The `B_*` class and byte length of the character starting at byte `i` of `s` (a character
/// boundary below `s.len()`): ASCII by `BYTE_CLASS`, two- and three-byte characters decoded
/// here and looked up in `BMP_CLASS`, four-byte ones by `class_by_ranges`.
#[inline(always)]
fn char_class_at(s: &str, i: usize) -> (u8, usize) {
    let bytes = s.as_bytes();
    let b0 = bytes.get(i).copied().unwrap_or(0);
    if b0 < 0x80 {
        return (BYTE_CLASS[b0 as usize], 1);
    }
    // `s` is UTF-8 and `i` a boundary: the continuation bytes exist.
    let cont = |j: usize| u32::from(bytes.get(i + j).copied().unwrap_or(0x80) & 0x3F);
    if b0 < 0xE0 {
        return (bmp_class((u32::from(b0 & 0x1F) << 6) | cont(1)), 2);
    }
    if b0 < 0xF0 {
        let cp = (u32::from(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
        return (bmp_class(cp), 3);
    }
    match s.get(i..).and_then(|r| r.chars().next()) {
        Some(c) => (bits_of_class(class_by_ranges(c)), c.len_utf8()),
        None => (B_OTHER, 1),
    }
}

const fn bits_of_class(k: Class) -> u8 {
    match k {
        Class::Letter => B_LETTER,
        Class::Number => B_NUMBER,
        Class::Space => B_SPACE,
        Class::Other => B_OTHER,
    }
}

/// The end of the run of class `k` starting at byte `from` of `s` (a character boundary);
/// ASCII bytes are classified without decoding.
#[inline]
fn run_end(s: &str, from: usize, k: Class) -> usize {
    run_end_bits(s, from, bits_of_class(k))
}

/// `run_end` for the `B_*` class `k` (below `B_HIGH`).
#[inline]
fn run_end_bits(s: &str, from: usize, k: u8) -> usize {
    let bytes = s.as_bytes();
    let mut i = from;
    while let Some(&b) = bytes.get(i) {
        if b < 0x80 {
            if BYTE_CLASS[b as usize] != k {
                return i;
            }
            i += 1;
            continue;
        }
        let (c, len) = char_class_at(s, i);
        if c != k {
            return i;
        }
        i += len;
    }
    s.len()
}

/// The GPT-2 split, as a `Pattern`: every piece is a match (the regex matches everything).
pub struct Gpt2Split;

/// The end of the GPT-2 regex match starting at byte `pos` of `s` (`pos < s.len()`).
/// Not inlined: `gpt2_match_end_fast` inlines into the word loops and calls this for the
/// rarer matches.
#[inline(never)]
pub(crate) fn gpt2_match_end(s: &str, pos: usize) -> usize {
    let rest = &s[pos..];
    let mut it = rest.chars();
    let Some(c) = it.next() else {
        return s.len();
    };
    if c == '\'' {
        let after = &rest[1..];
        for k in ["s", "t", "re", "ve", "m", "ll", "d"] {
            if after.starts_with(k) {
                return pos + 1 + k.len();
            }
        }
    }
    // ` ?X+` for X in letters, numbers, others: the optional space is taken when the next
    // character is of the class.
    let (body, first) = if c == ' ' {
        match it.next() {
            Some(n) if class(n) != Class::Space => (pos + 1, n),
            _ => (pos, c),
        }
    } else {
        (pos, c)
    };
    let k = class(first);
    if k != Class::Space {
        return run_end(s, body, k);
    }
    // Whitespace: `\s+(?!\S)` leaves the last space of a run to the next word, else `\s+`.
    let mut last_start = pos;
    let mut end = s.len();
    for (i, ch) in rest.char_indices() {
        if class(ch) != Class::Space {
            end = pos + i;
            break;
        }
        last_start = pos + i;
    }
    if end < s.len() && last_start > pos {
        last_start
    } else {
        end
    }
}

/// Byte classes for `gpt2_match_end_fast`: the ASCII classes, `HIGH` for bytes of
/// non-ASCII characters (classified by decoding).
const B_LETTER: u8 = 0;
const B_NUMBER: u8 = 1;
const B_SPACE: u8 = 2;
const B_OTHER: u8 = 3;
const B_HIGH: u8 = 4;

static BYTE_CLASS: [u8; 256] = {
    let mut t = [B_HIGH; 256];
    let mut i = 0;
    while i < 128 {
        t[i] = match ascii_class(i as u8) {
            Class::Letter => B_LETTER,
            Class::Number => B_NUMBER,
            Class::Space => B_SPACE,
            Class::Other => B_OTHER,
        };
        i += 1;
    }
    t
};

/// `run_end` from a non-ASCII character, for the run of `B_*` class `c` (below `B_HIGH`).
#[inline(never)]
fn run_end_high(s: &str, from: usize, c: u8) -> usize {
    run_end_bits(s, from, c)
}

/// Bit 7 of each byte of `x` (eight bytes of text, little-endian) set where that byte is an
/// ASCII letter. `b | 0x20` is in `a..=z` exactly for the letters of either case; the two
/// additions set bit 7 where the folded byte reaches `a` and `{`, and no byte carries into
/// the next because bit 7 is cleared first.
#[inline(always)]
fn ascii_letter_bits(x: u64) -> u64 {
    const HI: u64 = 0x8080_8080_8080_8080;
    let y = (x | 0x2020_2020_2020_2020) & !HI;
    let from_a = y.wrapping_add(0x1f1f_1f1f_1f1f_1f1f);
    let past_z = y.wrapping_add(0x0505_0505_0505_0505);
    from_a & !past_z & !x & HI
}

/// The end of the run of `B_LETTER` bytes starting at `from` (`from` follows a letter), as
/// the byte loop of `gpt2_match_end_fast` ends it: eight bytes at a time while they are all
/// ASCII letters, then at the first byte that is not (through `run_end_high` when that
/// byte is not ASCII), the last few bytes one by one.
#[inline(always)]
fn letter_run_end(s: &str, from: usize) -> usize {
    let bytes = s.as_bytes();
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let Ok(eight) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let other = !ascii_letter_bits(u64::from_le_bytes(eight)) & 0x8080_8080_8080_8080;
        if other != 0 {
            i += (other.trailing_zeros() / 8) as usize;
            return match bytes.get(i) {
                Some(&c) if c >= 0x80 => run_end_high(s, i, B_LETTER),
                _ => i,
            };
        }
        i += 8;
    }
    while let Some(&c) = bytes.get(i) {
        let ck = BYTE_CLASS[c as usize];
        if ck != B_LETTER {
            return if ck == B_HIGH {
                run_end_high(s, i, B_LETTER)
            } else {
                i
            };
        }
        i += 1;
    }
    s.len()
}

/// `gpt2_match_end`, with the common matches scanned inline: an optional space, then an
/// ASCII letter, digit or other character (not `'`, which may start a contraction) begins
/// ` ?X+` for its class, exactly as the general scanner decides (the space is taken because
/// the next character is not whitespace). The run goes on over ASCII bytes of that class by
/// table; at the first non-ASCII byte (a character boundary, the bytes before being ASCII)
/// the general `run_end` continues it. A non-ASCII first character that is not whitespace
/// begins the run of its class likewise. Everything else takes `gpt2_match_end`.
#[inline(always)]
pub(crate) fn gpt2_match_end_fast(s: &str, pos: usize) -> usize {
    let bytes = s.as_bytes();
    if let Some(&b0) = bytes.get(pos) {
        let body = pos + usize::from(b0 == b' ');
        if let Some(&b) = bytes.get(body) {
            let k = BYTE_CLASS[b as usize];
            if k != B_SPACE && k != B_HIGH && b0 != b'\'' {
                if k == B_LETTER {
                    return letter_run_end(s, body + 1);
                }
                let mut i = body + 1;
                while let Some(&c) = bytes.get(i) {
                    let ck = BYTE_CLASS[c as usize];
                    if ck != k {
                        return if ck == B_HIGH {
                            run_end_high(s, i, k)
                        } else {
                            i
                        };
                    }
                    i += 1;
                }
                return s.len();
            }
            if k == B_HIGH {
                return high_match_end(s, pos, body);
            }
        }
    }
    gpt2_match_end(s, pos)
}

/// The end of the run of `B_*` class `k` (below `B_HIGH`) from byte
/// `from` (1 or 2) of the sixteen bytes `w` (also as two little-endian words, `lo` and `hi`):
/// the first byte of another class, when it is inside `w` and ASCII (so that neither the
/// bytes past `w` nor a non-ASCII character can go on with the run); else None. Letters go
/// eight at a time (`ascii_letter_bits`), the second word only when the first is all letters.
#[inline(always)]
fn window_run_end(w: &[u8; 16], lo: u64, hi: u64, from: usize, k: u8) -> Option<usize> {
    const HI: u64 = 0x8080_8080_8080_8080;
    let end = if k == B_LETTER {
        // Bytes from `from` on that are not letters.
        let other = !ascii_letter_bits(lo) & HI & (u64::MAX << (8 * from));
        if other != 0 {
            (other.trailing_zeros() / 8) as usize
        } else {
            let other = !ascii_letter_bits(hi) & HI;
            if other == 0 {
                return None;
            }
            8 + (other.trailing_zeros() / 8) as usize
        }
    } else {
        let mut i = from;
        while i < w.len() && BYTE_CLASS[w[i] as usize] == k {
            i += 1;
        }
        i
    };
    match w.get(end) {
        Some(&b) if b < 0x80 => Some(end),
        _ => None,
    }
}

/// The length of the GPT-2 match at the start of `w` (sixteen bytes of text from a match
/// start, also as the two little-endian words `lo` and `hi`) when it ends inside `w` before
/// an ASCII byte and is one of: an optional space, then a run of ASCII letters, digits or
/// other characters (not after a leading `'`, which may start a contraction), as
/// `gpt2_match_end_fast` scans it; or ASCII whitespace. Else None, for
/// `gpt2_match_end_fast`. The byte-level word loop takes the word and its cache key from
/// the same sixteen bytes.
#[inline(always)]
pub(crate) fn gpt2_window_word(w: &[u8; 16], lo: u64, hi: u64) -> Option<usize> {
    let b0 = lo as u8;
    let body = usize::from(b0 == b' ');
    let k = BYTE_CLASS[usize::from((lo >> (8 * body)) as u8)];
    if k == B_SPACE {
        // `w` starts a run of whitespace. Before an ASCII character that is not whitespace,
        // `\s+(?!\S)` leaves the run's last character to the next match (unless the run is
        // that one character, which `\s+` takes).
        let end = window_run_end(w, lo, hi, 1, B_SPACE)?;
        return Some(if end > 1 { end - 1 } else { 1 });
    }
    if k == B_HIGH || b0 == b'\'' {
        return None;
    }
    window_run_end(w, lo, hi, body + 1, k)
}

/// `gpt2_match_end(s, pos)` when the character at `body` (`pos`, or `pos + 1` after a space)
/// is not ASCII: not `'`, so no contraction; unless it is whitespace it begins ` ?X+` for its
/// class (the space taken), the run going on from the character after it. Out of line, so
/// that the ASCII scanner stays small enough to inline into the word loops.
#[inline(never)]
fn high_match_end(s: &str, pos: usize, body: usize) -> usize {
    let (c, len) = char_class_at(s, body);
    if c != B_SPACE {
        return run_end_bits(s, body + len, c);
    }
    gpt2_match_end(s, pos)
}

/// `cl100k::match_end`, with the common matches scanned inline. An ASCII letter, or an ASCII
/// lead that `[^\r\n\p{L}\p{N}]?+` takes (not a newline, digit or letter, and not `'`,
/// which may start a contraction) followed by an ASCII letter, begins `\p{L}++`, which the
/// general scanner returns as soon as it is not empty; the run goes on over ASCII letters by
/// table and through `run_end` from the first non-ASCII byte. An ASCII digit begins
/// `\p{N}{1,3}+`, taken here while the next two bytes are ASCII. Everything else takes
/// `cl100k::match_end`.
#[inline(always)]
pub(crate) fn cl100k_match_end_fast(s: &str, pos: usize) -> usize {
    cl100k_scan::<true>(s, pos)
}

/// `cl100k_match_end_fast` for Llama 3's split (`cl100k::match_end_with::<false>`): the
/// inline part scans no white space, where the two differ.
#[inline(always)]
pub(crate) fn llama3_match_end_fast(s: &str, pos: usize) -> usize {
    cl100k_scan::<false>(s, pos)
}

/// `cl100k_match_end_fast` with `cl100k::match_end_with::<END_RUN>` for the rest.
#[inline(always)]
fn cl100k_scan<const END_RUN: bool>(s: &str, pos: usize) -> usize {
    let bytes = s.as_bytes();
    if let Some(&b0) = bytes.get(pos) {
        let c0 = BYTE_CLASS[b0 as usize];
        let lead = match c0 {
            B_LETTER => Some(pos),
            B_OTHER if b0 != b'\'' => Some(pos + 1),
            B_SPACE if b0 != b'\r' && b0 != b'\n' => Some(pos + 1),
            _ => None,
        };
        if let Some(from) = lead {
            if bytes.get(from).map(|&b| BYTE_CLASS[b as usize]) == Some(B_LETTER) {
                return letter_run_end(s, from + 1);
            }
        }
        if c0 == B_NUMBER {
            let mut end = pos + 1;
            for _ in 0..2 {
                match bytes.get(end).map(|&b| BYTE_CLASS[b as usize]) {
                    Some(B_NUMBER) => end += 1,
                    Some(B_HIGH) => return cl100k_general::<END_RUN>(s, pos),
                    _ => break,
                }
            }
            return end;
        }
    }
    cl100k_general::<END_RUN>(s, pos)
}

/// `gpt2_window_word` for the cl100k split: the length of the match at the start of `w`
/// when `cl100k_match_end_fast` scans it inline and it ends inside `w`: `\p{L}++` after an
/// optional ASCII lead, ending before an ASCII byte, or `\p{N}{1,3}+` of ASCII digits that
/// ends at three digits or before an ASCII byte. Else None, for `cl100k_match_end_fast`.
#[inline(always)]
pub(crate) fn cl100k_window_word(w: &[u8; 16], lo: u64, hi: u64) -> Option<usize> {
    let b0 = lo as u8;
    let c0 = BYTE_CLASS[usize::from(b0)];
    let lead = match c0 {
        B_LETTER => 0,
        B_OTHER if b0 != b'\'' => 1,
        B_SPACE if b0 != b'\r' && b0 != b'\n' => 1,
        B_NUMBER => {
            let mut end = 1;
            while end < 3 {
                match BYTE_CLASS[usize::from(w[end])] {
                    B_NUMBER => end += 1,
                    B_HIGH => return None,
                    _ => break,
                }
            }
            return Some(end);
        }
        _ => return None,
    };
    if BYTE_CLASS[usize::from(w[lead])] != B_LETTER {
        return None;
    }
    window_run_end(w, lo, hi, lead + 1, B_LETTER)
}

/// `cl100k::match_end_with`, kept out of line so that the inline scanner stays small.
#[inline(never)]
fn cl100k_general<const END_RUN: bool>(s: &str, pos: usize) -> usize {
    cl100k::match_end_with::<END_RUN>(s, pos)
}

/// The GPT-2 regex matches of `s`, as byte ranges covering it.
pub fn gpt2_split(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < s.len() {
        let end = gpt2_match_end(s, pos);
        out.push((pos, end));
        pos = end;
    }
    out
}

impl Pattern for Gpt2Split {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        if inside.is_empty() {
            return Ok(vec![((0, 0), false)]);
        }
        Ok(gpt2_split(inside).into_iter().map(|r| (r, true)).collect())
    }
}

fn field_bool(v: &Value, field: &str, default: Option<bool>) -> Result<bool> {
    match (v.get(field), default) {
        (Some(Value::Bool(b)), _) => Ok(*b),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(Error::invalid(format!(
            "ByteLevel: missing field `{field}`"
        ))),
        (Some(_), _) => Err(Error::invalid(format!(
            "ByteLevel: `{field}` must be a boolean"
        ))),
    }
}

impl ByteLevel {
    /// From any tokenizer.json `{"type": "ByteLevel", ...}` object; a missing field takes the
    /// default (true). This suits the ByteLevel *normalizer*, which has no fields.
    pub fn from_json(v: &Value) -> Result<Self> {
        if !v.is_object() {
            return Err(Error::invalid("ByteLevel: must be an object"));
        }
        Ok(ByteLevel {
            add_prefix_space: field_bool(v, "add_prefix_space", Some(true))?,
            trim_offsets: field_bool(v, "trim_offsets", Some(true))?,
            use_regex: field_bool(v, "use_regex", Some(true))?,
        })
    }

    /// The ByteLevel pre-tokenizer / decoder / post-processor as `tokenizers` 0.22.1 reads it:
    /// `add_prefix_space` and `trim_offsets` are required (the reference fails to load without
    /// them), `use_regex` defaults to true; null is not a boolean.
    pub fn from_json_strict(v: &Value) -> Result<Self> {
        if !v.is_object() {
            return Err(Error::invalid("ByteLevel: must be an object"));
        }
        Ok(ByteLevel {
            add_prefix_space: field_bool(v, "add_prefix_space", None)?,
            trim_offsets: field_bool(v, "trim_offsets", None)?,
            use_regex: field_bool(v, "use_regex", Some(true))?,
        })
    }
}

/// Replace every byte of `n` by its GPT-2 character; the first byte of a character replaces
/// it (change 0), the following ones are insertions (change 1).
fn bytes_to_chars(n: &mut NormalizedString) {
    // Bytes `!`..=`~` map to themselves. A word usually has few other characters (its leading
    // space), so rewrite only the runs that change, last first so earlier ranges stay valid;
    // with many runs one pass over the whole string is cheaper.
    const MAX_RUNS: usize = 4;
    let keeps = |b: u8| (b'!'..=b'~').contains(&b);
    let whole = n.whole_original_range() == (0..n.len());
    let s = n.get();
    let mut runs: [(usize, usize); MAX_RUNS] = [(0, 0); MAX_RUNS];
    let mut count = 0usize;
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() && count <= MAX_RUNS {
        if keeps(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !keeps(bytes[i]) {
            i += 1;
        }
        if count < MAX_RUNS {
            runs[count] = (start, i);
        }
        count += 1;
    }
    if count == 0 && whole {
        return;
    }
    let table = bytes_char();
    let mapped = |text: &str| -> Vec<(char, isize)> {
        let mut t = Vec::with_capacity(text.len());
        for c in text.chars() {
            let mut buf = [0u8; 4];
            for (k, b) in c.encode_utf8(&mut buf).bytes().enumerate() {
                t.push((table[b as usize], isize::from(k > 0)));
            }
        }
        t
    };
    if count > MAX_RUNS || !whole {
        let t = mapped(s);
        n.transform(t, 0);
        return;
    }
    for &(a, b) in runs[..count].iter().rev() {
        // Runs end at char boundaries: a kept byte is ASCII.
        let t = mapped(&n.get()[a..b]);
        n.transform_range(a..b, t, 0);
    }
}

/// Trim the leading/trailing whitespace (Ġ) of each token's offsets, as the ByteLevel and
/// RobertaProcessing post-processors do when `trim_offsets` is on.
pub fn process_offsets(encoding: &mut Encoding, add_prefix_space: bool) {
    let space = byte_to_char(b' ');
    let is_space = |c: &char| *c == space || c.is_whitespace();
    for (i, (token, offsets)) in encoding
        .tokens
        .iter()
        .zip(encoding.offsets.iter_mut())
        .enumerate()
    {
        let mut leading = token.chars().take_while(is_space).count();
        let trailing = token.chars().rev().take_while(is_space).count();
        if leading > 0 {
            // The space added by add_prefix_space to the first token belongs to it; more than
            // one leading space cannot come from there and is trimmed.
            let is_first = i == 0 || offsets.0 == 0;
            if is_first && add_prefix_space && leading == 1 {
                leading = 0;
            }
            offsets.0 = (offsets.0 + leading).min(offsets.1);
        }
        if trailing > 0 && offsets.1 >= trailing {
            offsets.1 = (offsets.1 - trailing).max(offsets.0);
        }
    }
}

impl Normalizer for ByteLevel {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        if !n.is_empty() {
            bytes_to_chars(n);
        }
        Ok(())
    }
}

impl PreTokenizer for ByteLevel {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        pts.split(|_, mut n| {
            if self.add_prefix_space && !n.get().starts_with(' ') {
                n.prepend(" ");
            }
            if self.use_regex {
                n.split(&Gpt2Split, SplitBehavior::Isolated)
            } else {
                Ok(vec![n])
            }
        })?;
        pts.normalize(|n| {
            bytes_to_chars(n);
            Ok(())
        })
    }
}

impl Decoder for ByteLevel {
    fn decode_chain(&self, tokens: Vec<String>) -> Result<Vec<String>> {
        let mut bytes = Vec::with_capacity(tokens.iter().map(String::len).sum());
        for t in &tokens {
            let start = bytes.len();
            let mut all = true;
            for c in t.chars() {
                match char_to_byte(c) {
                    Some(b) => bytes.push(b),
                    None => {
                        all = false;
                        break;
                    }
                }
            }
            if !all {
                // A token with any char outside the alphabet is kept as its own UTF-8.
                bytes.truncate(start);
                bytes.extend_from_slice(t.as_bytes());
            }
        }
        Ok(vec![String::from_utf8_lossy(&bytes).into_owned()])
    }
}

impl PostProcessor for ByteLevel {
    fn added_tokens(&self, _is_pair: bool) -> usize {
        0
    }
    fn process(
        &self,
        mut encoding: Encoding,
        mut pair: Option<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        if self.trim_offsets {
            for e in std::iter::once(&mut encoding).chain(pair.as_mut()) {
                process_offsets(e, self.add_prefix_space);
                for o in e.overflowing.iter_mut() {
                    process_offsets(o, self.add_prefix_space);
                }
            }
        }
        crate::processors::default_process(encoding, pair, add_special_tokens)
    }
}

/// The end of the match in a run of white space `s[pos..ws_end]` (`pos < ws_end`) under the
/// tiktoken patterns' last alternatives, `\s*[\r\n]+ | \s+(?!\S) | \s+` (cl100k's `\s*[\r\n]
/// | \s+(?!\S) | \s` gives the same): up to the run's last newline if it has one; else the
/// whole run at the end of the text; else the run but its last character, which the next
/// match takes, or that one character alone.
#[inline]
pub(crate) fn space_run_end(s: &str, pos: usize, ws_end: usize) -> usize {
    let ws = s.as_bytes().get(pos..ws_end).unwrap_or_default();
    // `\r` and `\n` are ASCII: never inside a longer character.
    if let Some(i) = ws.iter().rposition(|&b| b == b'\r' || b == b'\n') {
        return pos + i + 1;
    }
    if ws_end == s.len() {
        return ws_end;
    }
    let last = s
        .get(pos..ws_end)
        .and_then(|r| r.char_indices().next_back())
        .map_or(pos, |(i, _)| pos + i);
    if last > pos {
        last
    } else {
        ws_end
    }
}

/// Test support for the hand-written tiktoken splits (`cl100k`, `o200k`): the translated
/// pattern, Oniguruma's matches with it and a scanner's, to compare.
#[cfg(test)]
pub(crate) mod split_check {
    use crate::text::SysRegex;

    /// Oniguruma over `translated`, which must be what `onig_pattern` makes of `published`.
    pub(crate) fn regex(published: &str, translated: &str) -> SysRegex {
        assert_eq!(
            crate::formats::tiktoken::onig_pattern(published)
                .ok()
                .as_deref(),
            Some(translated)
        );
        match SysRegex::new(translated) {
            Ok(re) => re,
            Err(e) => panic!("pattern does not compile: {e}"),
        }
    }

    pub(crate) fn regex_matches(re: &SysRegex, text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let _ = re.for_each_match(text, |s, e| {
            out.push((s, e));
            Ok(())
        });
        out
    }

    /// The matches of a scanner giving the end of the match at each start (always ahead).
    pub(crate) fn scanner_matches(
        text: &str,
        match_end: impl Fn(&str, usize) -> usize,
    ) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < text.len() {
            let end = match_end(text, pos);
            out.push((pos, end));
            pos = end.max(pos + 1);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Split;

    const GPT2_RE: &str =
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

    fn onig_split(re: &onig::Regex, s: &str) -> Vec<(usize, usize)> {
        re.find_iter(s).collect()
    }

    fn onig_class(c: char) -> Class {
        thread_local! {
            static RES: [onig::Regex; 3] = [
                onig::Regex::new(r"\A\p{L}\z").unwrap(),
                onig::Regex::new(r"\A\p{N}\z").unwrap(),
                onig::Regex::new(r"\A\s\z").unwrap(),
            ];
        }
        let mut buf = [0u8; 4];
        let s = c.encode_utf8(&mut buf);
        RES.with(|r| {
            if r[0].is_match(s) {
                Class::Letter
            } else if r[1].is_match(s) {
                Class::Number
            } else if r[2].is_match(s) {
                Class::Space
            } else {
                Class::Other
            }
        })
    }

    #[test]
    fn classes_agree_with_oniguruma() {
        // Every code point below U+3100 and both sides of every table boundary; the whole
        // range with PIECEWORK_SWEEP=1.
        let sweep = std::env::var("PIECEWORK_SWEEP").is_ok_and(|v| v == "1");
        let mut cps: Vec<u32> = if sweep {
            (0..=0x10FFFF).collect()
        } else {
            (0..0x3100).collect()
        };
        for t in [&tables::LETTER[..], &tables::NUMBER[..], &tables::SPACE[..]] {
            for &(a, b) in t {
                cps.extend([a.saturating_sub(1), a, b, b + 1]);
            }
        }
        let mut checked = 0;
        for cp in cps {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(class(c), onig_class(c), "U+{cp:04X}");
                checked += 1;
            }
        }
        assert!(checked > 10_000);
    }

    /// The compile-time BMP table, and the decoding scanner's classes, equal the range
    /// tables on every code point.
    #[test]
    fn bmp_table_equals_the_ranges() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let want = class_by_ranges(c);
            if (c as u32) >= 0x80 {
                assert_eq!(class_above_ascii(c), want, "U+{:04X}", c as u32);
            }
            let s = c.encode_utf8(&mut buf);
            let (bits, len) = char_class_at(s, 0);
            assert_eq!(len, c.len_utf8());
            if (c as u32) >= 0x80 {
                assert_eq!(class_of_bits(bits), want, "U+{:04X}", c as u32);
            }
        }
    }

    /// The fast scanner against Oniguruma on texts of many scripts (two-, three- and
    /// four-byte letters, digits, spaces and symbols next to ASCII), from every boundary.
    #[test]
    fn fast_match_end_equals_the_regex_on_scripts() {
        let re = onig::Regex::new(GPT2_RE).unwrap();
        let alphabet: Vec<char> = "aZ1 '\n.\u{e9}\u{416}\u{436}\u{5d0}\u{627}\u{660}\u{6f0}\u{966}\u{905}\u{93f}\u{e01}\u{4e2d}\u{3042}\u{ac00}\u{ff11}\u{3000}\u{2003}\u{a0}\u{85}\u{2028}\u{b7}\u{301}\u{20ac}\u{ffff}\u{1d400}\u{1f600}\u{10400}\u{1d7ce}"
            .chars()
            .collect();
        let mut next = crate::test_rng(0x0bad_cafe_1234_5678);
        for _ in 0..20_000 {
            let len = (next() % 20) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let mut got = Vec::new();
            let mut pos = 0;
            while pos < text.len() {
                let end = gpt2_match_end_fast(&text, pos);
                got.push((pos, end));
                pos = end;
            }
            assert_eq!(got, onig_split(&re, &text), "{text:?}");
        }
    }

    /// A deterministic generator of awkward strings.
    fn random_texts(n: usize) -> Vec<String> {
        let alphabet: Vec<char> = "aZé中 \t\n\r\u{a0}\u{3000}\u{2028}\u{85}'sStTrRevmld1٣²Ⅻ!?.,-_\u{301}😀\u{1F3FB}\u{0}\u{200B}ℌ"
            .chars()
            .collect();
        let mut next = crate::test_rng(0x1234_5678_9abc_def1);
        (0..n)
            .map(|_| {
                let len = (next() % 24) as usize;
                (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    #[test]
    fn split_agrees_with_the_regex() {
        let re = onig::Regex::new(GPT2_RE).unwrap();
        let fixed = [
            "",
            "Hello world",
            "I'M",
            "it's they're we've I'm you'll he'd",
            "a   b",
            " \n\n b",
            "123456",
            "   ",
            "  x",
            "x  ",
            "'''s",
            "a\u{3000}\u{3000}b",
            " !!! ?",
            "\t\tx",
            "Hello<|endoftext|>world",
            "a \n b",
            "火星 2024年",
        ];
        for s in fixed
            .iter()
            .map(|s| s.to_string())
            .chain(random_texts(20_000))
        {
            assert_eq!(gpt2_split(&s), onig_split(&re, &s), "{s:?}");
        }
    }

    /// The inline scanner ends every match where the general one does, from every character
    /// boundary of random texts (ASCII runs meeting non-ASCII letters, digits, spaces and
    /// symbols, apostrophes, spaces before each class).
    #[test]
    fn fast_match_end_equals_general() {
        let extra = [
            "don't stop",
            " 'tis",
            "x\u{e9}t\u{e9} 12\u{b2}3",
            "ab\u{3000}cd",
            "  \u{a0}x",
            "a\u{4e2d}b",
            "..\u{20ac}..",
            " 9\u{661}",
            "' s",
            "z'",
            " \u{e9}t\u{e9}",
        ];
        let mut n = 0;
        for s in extra
            .iter()
            .map(|s| s.to_string())
            .chain(random_texts(20_000))
        {
            for pos in (0..s.len()).filter(|&p| s.is_char_boundary(p)) {
                assert_eq!(
                    gpt2_match_end_fast(&s, pos),
                    gpt2_match_end(&s, pos),
                    "{s:?} at {pos}"
                );
                n += 1;
            }
        }
        assert!(n > 100_000, "{n}");
    }

    /// `ascii_letter_bits` marks exactly the `B_LETTER` bytes, every byte value at every
    /// position among every other.
    #[test]
    fn ascii_letter_bits_match_the_table() {
        for b in 0..=255u8 {
            for pos in 0..8 {
                for fill in [b'a', b'Z', b'0', b'@', b'{', 0x80, 0xff, b' '] {
                    let mut eight = [fill; 8];
                    eight[pos] = b;
                    let bits = ascii_letter_bits(u64::from_le_bytes(eight));
                    for (j, &x) in eight.iter().enumerate() {
                        let want = BYTE_CLASS[x as usize] == B_LETTER;
                        assert_eq!(bits >> (8 * j + 7) & 1 == 1, want, "{eight:?} at {j}");
                    }
                }
            }
        }
    }

    /// Texts with long ASCII letter runs (the eight-byte steps of `letter_run_end`), every
    /// case boundary byte (`@ [ ` { `) and non-ASCII letters, spaces and symbols among them.
    /// Texts of ASCII words, digits, punctuation and whitespace runs (of every kind, so that
    /// `\s+(?!\S)` backs off), with a few non-ASCII characters and contractions among them.
    fn window_texts(n: usize) -> Vec<String> {
        let pieces = [
            "a",
            "Zq",
            "word",
            "letters",
            "abcdefghijklmnop",
            "7",
            "2024",
            "1234567890123456",
            ".",
            "--",
            "!?)",
            "'s",
            "'ll",
            "'x",
            " ",
            "  ",
            "\n",
            "\n\n",
            " \t",
            "\r\n",
            "\u{b}\u{c}",
            "                ",
            "\u{e9}",
            "\u{4e2d}\u{6587}",
            "\u{a0}",
            "\u{3000}",
            "\u{2028}",
            "\u{2013}",
            "\u{661}",
            "\u{1F600}",
            "\u{301}",
            "\u{0}",
        ];
        let mut next = crate::test_rng(0x77d0_0c0d_e5ee_d005);
        (0..n)
            .map(|_| {
                let len = 8 + (next() % 24) as usize;
                (0..len)
                    .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    /// Every character boundary with sixteen bytes after it, of the window tests' texts:
    /// `word` (a window scanner) must end the match where `general` does whenever it gives a
    /// length; the counts of taken words by `kind` of the window are returned with the number
    /// of positions tried.
    fn window_taken(
        word: fn(&[u8; 16], u64, u64) -> Option<usize>,
        general: fn(&str, usize) -> usize,
        kind: fn(&[u8; 16]) -> usize,
    ) -> ([usize; 4], usize) {
        let (mut tried, mut taken) = (0, [0usize; 4]);
        let texts = window_texts(4000)
            .into_iter()
            .chain(random_texts(4000).into_iter().map(|t| t.repeat(3)))
            .chain(letter_run_texts(4000));
        for s in texts {
            for pos in (0..s.len()).filter(|&p| s.is_char_boundary(p)) {
                let Some(w) = s.as_bytes().get(pos..pos + 16) else {
                    continue;
                };
                let w: &[u8; 16] = w.try_into().unwrap();
                let [lo, hi] = crate::models::bpe::ids_cache::window_words(w);
                tried += 1;
                if let Some(n) = word(w, lo, hi) {
                    assert_eq!(pos + n, general(&s, pos), "{s:?} at {pos}");
                    assert!(n > 0 && n < 16, "{s:?} at {pos}: {n}");
                    taken[kind(w)] += 1;
                }
            }
        }
        (taken, tried)
    }

    /// `gpt2_window_word`, where it gives a length, ends the match where the general
    /// scanner does, at every character boundary with sixteen bytes after it; and it gives
    /// one for most such positions of mostly ASCII text (every kind of word it takes).
    #[test]
    fn window_word_equals_general() {
        let (taken, tried) = window_taken(gpt2_window_word, gpt2_match_end, |w| {
            let body = usize::from(w[0] == b' ' && w[1] != b' ');
            usize::from(BYTE_CLASS[w[body] as usize])
        });
        // Each kind of word (letters, digits, other, whitespace) taken many times.
        assert!(taken.iter().all(|&t| t > 2000), "{taken:?} of {tried}");
    }

    /// `cl100k_window_word` as `window_word_equals_general` for GPT-2.
    #[test]
    fn cl100k_window_word_equals_general() {
        let (taken, tried) = window_taken(cl100k_window_word, cl100k::match_end, |w| {
            usize::from(BYTE_CLASS[w[0] as usize])
        });
        // Words of letters after every kind of lead, and numbers, taken many times.
        assert!(taken.iter().all(|&t| t > 1000), "{taken:?} of {tried}");
    }

    fn letter_run_texts(n: usize) -> Vec<String> {
        let alphabet: Vec<char> = "abcxyzABCXYZ@[`{0 9'\u{e9}\u{4e2d}\u{a0}.\u{301}\n"
            .chars()
            .collect();
        let mut next = crate::test_rng(0x5eed_1e77_e125_0003);
        (0..n)
            .map(|_| {
                let len = (next() % 48) as usize;
                // Mostly letters, so that runs often pass eight bytes.
                (0..len)
                    .map(|_| match next() % 4 {
                        0 => alphabet[(next() % alphabet.len() as u64) as usize],
                        _ => alphabet[(next() % 12) as usize],
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn fast_match_ends_equal_general_on_letter_runs() {
        let mut n = 0;
        for s in letter_run_texts(20_000) {
            for pos in (0..s.len()).filter(|&p| s.is_char_boundary(p)) {
                assert_eq!(
                    gpt2_match_end_fast(&s, pos),
                    gpt2_match_end(&s, pos),
                    "{s:?} at {pos}"
                );
                assert_eq!(
                    cl100k_match_end_fast(&s, pos),
                    cl100k::match_end(&s, pos),
                    "{s:?} at {pos}"
                );
                n += 1;
            }
        }
        assert!(n > 200_000, "{n}");
    }

    /// The same for the cl100k scanner, with contractions, newlines and digit runs.
    #[test]
    fn cl100k_fast_match_end_equals_general() {
        let extra = [
            "I'll 12345 x\r\nab",
            "'S ' s 'LL",
            ".hello\tworld\n\nx",
            "123\u{661}4 1\u{b2}",
            " \u{e9}t\u{e9} x\u{e9}",
            "\r\nabc",
            "ab'cd",
        ];
        let mut n = 0;
        for s in extra
            .iter()
            .map(|s| s.to_string())
            .chain(random_texts(20_000))
        {
            for pos in (0..s.len()).filter(|&p| s.is_char_boundary(p)) {
                assert_eq!(
                    cl100k_match_end_fast(&s, pos),
                    cl100k::match_end(&s, pos),
                    "{s:?} at {pos}"
                );
                n += 1;
            }
        }
        assert!(n > 100_000, "{n}");
    }

    #[test]
    fn byte_table() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0), 'Ā');
        assert_eq!(byte_to_char(0xAD), 'Ń');
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = byte_to_char(b);
            assert!(seen.insert(c));
            assert_eq!(char_to_byte(c), Some(b));
        }
        assert_eq!(char_to_byte('é'), Some(0xE9));
        assert_eq!(char_to_byte('中'), None);
    }

    fn pre(bl: &ByteLevel, text: &str) -> Vec<(String, (usize, usize))> {
        let mut pts =
            PreTokenizedString::from_splits(vec![Split::from(NormalizedString::from(text))]);
        bl.pre_tokenize(&mut pts).unwrap();
        pts.splits
            .iter()
            .map(|s| {
                (
                    s.normalized.get().to_string(),
                    s.normalized.offsets_original(),
                )
            })
            .collect()
    }

    #[test]
    fn pre_tokenizer() {
        let bl = ByteLevel {
            add_prefix_space: false,
            trim_offsets: false,
            use_regex: true,
        };
        assert_eq!(
            pre(&bl, "Hello my friend"),
            [
                ("Hello".into(), (0, 5)),
                ("Ġmy".into(), (5, 8)),
                ("Ġfriend".into(), (8, 15))
            ]
        );
        let got: Vec<String> = pre(&bl, "a   b").into_iter().map(|x| x.0).collect();
        assert_eq!(got, ["a", "ĠĠ", "Ġb"]);
        let got: Vec<String> = pre(&bl, "I'M").into_iter().map(|x| x.0).collect();
        assert_eq!(got, ["I", "'", "M"]);
        // add_prefix_space: the added space takes the first character's offsets.
        let bl2 = ByteLevel {
            add_prefix_space: true,
            ..bl.clone()
        };
        assert_eq!(pre(&bl2, "Hello"), [("ĠHello".into(), (0, 5))]);
        assert_eq!(pre(&bl2, " Hello"), [("ĠHello".into(), (0, 6))]);
        // use_regex=false: one word.
        let bl3 = ByteLevel {
            use_regex: false,
            ..bl.clone()
        };
        assert_eq!(pre(&bl3, "a b"), [("aĠb".into(), (0, 3))]);
        // Multi-byte characters: the whole character's span for each of its byte chars.
        let p = pre(&bl, "é");
        assert_eq!(p, [("Ã©".into(), (0, 2))]);
    }

    #[test]
    fn byte_mapping_alignment() {
        // First byte replaces (change 0), the next ones are insertions (change 1): each maps
        // back to the whole character.
        let mut n = NormalizedString::from("a火");
        ByteLevel::default().normalize(&mut n).unwrap();
        assert_eq!(n.get(), "açģ«");
        assert_eq!(n.convert_normalized_range(1..3), Some(1..4));
        assert_eq!(n.convert_normalized_range(3..5), Some(1..4));
    }

    #[test]
    fn byte_mapping_by_runs_equals_whole_transform() {
        // The run-wise rewrite must give exactly the whole-string transform.
        for text in [
            " hello",
            "a b c",
            "a b c d e f g h",
            "é",
            "x\u{3000}y",
            "  ",
            "a\nb\tc",
            "火星 a",
            "!~",
            "\u{1F600} x \u{1F600}",
            "a  b   c    d",
        ] {
            let mut fast = NormalizedString::from(text);
            bytes_to_chars(&mut fast);
            let mut whole = NormalizedString::from(text);
            let t: Vec<(char, isize)> = text
                .bytes()
                .enumerate()
                .map(|(i, b)| (byte_to_char(b), isize::from(!text.is_char_boundary(i))))
                .collect();
            whole.transform(t, 0);
            assert_eq!(fast, whole, "{text:?}");
        }
    }

    #[test]
    fn decoder() {
        let bl = ByteLevel::default();
        let d = |t: &[&str]| {
            bl.decode_chain(t.iter().map(|s| s.to_string()).collect())
                .unwrap()
                .concat()
        };
        assert_eq!(d(&["Hello", "Ġworld"]), "Hello world");
        assert_eq!(d(&["Ã©"]), "é");
        // Invalid UTF-8 → U+FFFD (one per maximal invalid sequence, as from_utf8_lossy).
        assert_eq!(d(&["ç"]), "\u{FFFD}");
        assert_eq!(d(&["ç«", "a"]), "\u{FFFD}a");
        // A token with a char outside the alphabet is kept verbatim.
        assert_eq!(d(&["<s>", "中Ġ"]), "<s>中Ġ");
    }

    fn enc(tokens: &[&str], offsets: &[(usize, usize)]) -> Encoding {
        Encoding {
            tokens: tokens.iter().map(|s| s.to_string()).collect(),
            offsets: offsets.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn trim_offsets() {
        // "Hello world" with add_prefix_space=false.
        let mut e = enc(&["Hello", "Ġworld"], &[(0, 5), (5, 11)]);
        process_offsets(&mut e, false);
        assert_eq!(e.offsets, [(0, 5), (6, 11)]);
        // "a   b".
        let mut e = enc(&["a", "Ġ", "Ġ", "Ġb"], &[(0, 1), (1, 2), (2, 3), (3, 5)]);
        process_offsets(&mut e, false);
        assert_eq!(e.offsets, [(0, 1), (2, 2), (3, 3), (4, 5)]);
        // "a \n b": newlines count as whitespace only through char::is_whitespace on the
        // token text, and Ċ is not whitespace.
        let mut e = enc(&["a", "Ġ", "Ċ", "Ġb"], &[(0, 1), (1, 2), (2, 3), (3, 5)]);
        process_offsets(&mut e, false);
        assert_eq!(e.offsets, [(0, 1), (2, 2), (2, 3), (4, 5)]);
        // add_prefix_space: the first token keeps its single leading space; "  x".
        let mut e = enc(&["Ġ", "Ġx"], &[(0, 1), (1, 3)]);
        process_offsets(&mut e, true);
        assert_eq!(e.offsets, [(0, 0), (2, 3)]);
        let mut e = enc(&["ĠHello"], &[(0, 5)]);
        process_offsets(&mut e, true);
        assert_eq!(e.offsets, [(0, 5)]);
        // Without it on the post-processor: the H is lost.
        let mut e = enc(&["ĠHello"], &[(0, 5)]);
        process_offsets(&mut e, false);
        assert_eq!(e.offsets, [(1, 5)]);
    }

    #[test]
    fn from_json_fields() {
        let b = ByteLevel::from_json_strict(&serde_json::json!({
            "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true
        }))
        .unwrap();
        assert!(!b.add_prefix_space && b.trim_offsets && b.use_regex);
        let e = ByteLevel::from_json_strict(&serde_json::json!({"type": "ByteLevel"}));
        assert!(e.unwrap_err().message.contains("add_prefix_space"));
        let b = ByteLevel::from_json(&serde_json::json!({"type": "ByteLevel"})).unwrap();
        assert!(b.add_prefix_space && b.trim_offsets && b.use_regex);
        assert!(ByteLevel::from_json_strict(&serde_json::json!({
            "add_prefix_space": true, "trim_offsets": true, "use_regex": null
        }))
        .is_err());
    }
}
