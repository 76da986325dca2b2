//! The o200k_base split (GPT-4o, Llama 4) and Mistral's tekken split, written by hand:
//!
//! ```text
//! [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! | [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! | \p{N}{1,3} | ' '?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//! ```
//!
//! tekken is the same without the two contraction suffixes and with `\p{N}` for `\p{N}{1,3}`:
//! one scanner, `match_end::<CONTRACTIONS, DIGITS>`, covers both. Neither pattern is
//! possessive, so the scanner follows Oniguruma's backtracking: the optional lead is tried
//! first and dropped when the rest fails, and the `U*` run gives characters back to `W+`
//! (`Lm`, `Lo` and marks are in both classes). Marks are not letters, so one can also be the
//! lead, or start a `[^\s\p{L}\p{N}]+` run. The classes are Oniguruma's (the regex path's),
//! from the generated `tables.rs`.

use super::tables;
use crate::text::unicode::in_ranges;

/// tiktoken's o200k_base pattern (also Llama 4's) as `formats::tiktoken::onig_pattern`
/// translates it (unchanged: no `$`, no possessive interval).
pub const O200K_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The `config.pattern` of Mistral's tekken files, translated likewise (unchanged).
pub const TEKKEN_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The kind of a character, as far as the pattern tells them apart. `U` is the class
/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, `W` is `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
/// `Ll`: in `W` only.
const K_LOWER: u8 = 0;
/// `Lu`, `Lt`: in `U` only.
const K_UPPER: u8 = 1;
/// `Lm`, `Lo`: letters in both `U` and `W`.
const K_BOTH: u8 = 2;
/// `M`: in `U` and `W`, but not a letter (so also in `[^\s\p{L}\p{N}]` and the lead class).
const K_MARK: u8 = 3;
const K_NUMBER: u8 = 4;
/// `\s` (with `\r` and `\n`, told apart by their byte where it matters).
const K_SPACE: u8 = 5;
const K_OTHER: u8 = 6;
/// In `BYTE_KIND` only: a byte of a non-ASCII character, classified by decoding.
const K_HIGH: u8 = 7;

/// Sets of kinds, as bit masks (`1 << kind`).
const IN_U: u32 = 1 << K_UPPER | 1 << K_BOTH | 1 << K_MARK;
const IN_W: u32 = 1 << K_LOWER | 1 << K_BOTH | 1 << K_MARK;
const IS_LETTER: u32 = 1 << K_LOWER | 1 << K_UPPER | 1 << K_BOTH;
/// `[^\s\p{L}\p{N}]`.
const IS_PUNCT: u32 = 1 << K_MARK | 1 << K_OTHER;
const IS_SPACE: u32 = 1 << K_SPACE;

#[inline(always)]
const fn is(set: u32, k: u8) -> bool {
    (set >> k) & 1 != 0
}

const fn ascii_kind(b: u8) -> u8 {
    match b {
        b'a'..=b'z' => K_LOWER,
        b'A'..=b'Z' => K_UPPER,
        b'0'..=b'9' => K_NUMBER,
        b'\t'..=b'\r' | b' ' => K_SPACE,
        0..=0x7F => K_OTHER,
        _ => K_HIGH,
    }
}

static BYTE_KIND: [u8; 256] = {
    let mut t = [K_HIGH; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = ascii_kind(i as u8);
        i += 1;
    }
    t
};

/// The kind of every BMP code point, four bits each, built at compile time from the same
/// range tables as `kind_by_ranges`: one load per non-ASCII character (32 KB, of which a text
/// touches the few lines of its scripts).
static BMP_KIND: [u8; 0x8000] = {
    let mut t = [K_OTHER * 0x11; 0x8000];
    let tables: [(&[(u32, u32)], u8); 8] = [
        (&tables::SPACE, K_SPACE),
        (&tables::NUMBER, K_NUMBER),
        (&tables::MARK, K_MARK),
        (&tables::MODIFIER, K_BOTH),
        (&tables::OTHER_LETTER, K_BOTH),
        (&tables::UPPERCASE, K_UPPER),
        (&tables::TITLECASE, K_UPPER),
        (&tables::LOWERCASE, K_LOWER),
    ];
    let mut k = 0;
    while k < tables.len() {
        let (ranges, kind) = tables[k];
        let mut r = 0;
        while r < ranges.len() {
            let (a, b) = ranges[r];
            let mut c = a;
            while c <= b && c < 0x1_0000 {
                let (byte, shift) = ((c >> 1) as usize, (c & 1) * 4);
                t[byte] = (t[byte] & !(0xF << shift)) | (kind << shift);
                c += 1;
            }
            r += 1;
        }
        k += 1;
    }
    t
};

#[inline(always)]
fn bmp_kind(cp: u32) -> u8 {
    let byte = BMP_KIND.get((cp >> 1) as usize).copied().unwrap_or(0x66);
    (byte >> ((cp & 1) * 4)) & 0xF
}

/// The kind from the range tables (Oniguruma's, generated): the definition `BMP_KIND` is
/// built from, and the classifier of the supplementary planes. `\p{L}` is the union of the
/// five letter categories (a test checks it on every code point), so one search rules the
/// letters out.
#[inline(never)]
fn kind_by_ranges(c: char) -> u8 {
    if in_ranges(&tables::LETTER, c) {
        if in_ranges(&tables::OTHER_LETTER, c) || in_ranges(&tables::MODIFIER, c) {
            K_BOTH
        } else if in_ranges(&tables::LOWERCASE, c) {
            K_LOWER
        } else {
            K_UPPER
        }
    } else if in_ranges(&tables::MARK, c) {
        K_MARK
    } else if in_ranges(&tables::NUMBER, c) {
        K_NUMBER
    } else if in_ranges(&tables::SPACE, c) {
        K_SPACE
    } else {
        K_OTHER
    }
}

/// The kind and byte length of the character at byte `i` of `s` (a boundary below `s.len()`).
#[inline(always)]
fn kind_at(s: &str, i: usize) -> (u8, usize) {
    let bytes = s.as_bytes();
    let b0 = bytes.get(i).copied().unwrap_or(0);
    if b0 < 0x80 {
        return (BYTE_KIND[b0 as usize], 1);
    }
    // `s` is UTF-8 and `i` a boundary: the continuation bytes exist.
    let cont = |j: usize| u32::from(bytes.get(i + j).copied().unwrap_or(0x80) & 0x3F);
    if b0 < 0xE0 {
        return (bmp_kind((u32::from(b0 & 0x1F) << 6) | cont(1)), 2);
    }
    if b0 < 0xF0 {
        let cp = (u32::from(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
        return (bmp_kind(cp), 3);
    }
    match s.get(i..).and_then(|r| r.chars().next()) {
        Some(c) => (kind_by_ranges(c), c.len_utf8()),
        None => (K_OTHER, 1),
    }
}

/// The end of the run of characters from `from` whose kinds are in `set`.
#[inline]
fn run(s: &str, from: usize, set: u32) -> usize {
    let mut i = from;
    while i < s.len() {
        let (k, n) = kind_at(s, i);
        if !is(set, k) {
            return i;
        }
        i += n;
    }
    s.len()
}

/// `U*W+` from `from`: `U*` takes its whole run, then gives back characters until `W+` can
/// start. An `Ll` after the run starts `W+` there (it takes the whole `W` run); else `W+` is
/// the run's last `W` character (the characters after it are `Lu`/`Lt`, which `W` refuses);
/// with neither, no match.
fn upper_lower(s: &str, from: usize) -> Option<usize> {
    let mut i = from;
    let mut last_w = None;
    while i < s.len() {
        let (k, n) = kind_at(s, i);
        if !is(IN_U, k) {
            if k == K_LOWER {
                return Some(run(s, i + n, IN_W));
            }
            break;
        }
        i += n;
        if is(IN_W, k) {
            last_w = Some(i);
        }
    }
    last_w
}

/// `U+W*` from `from`.
fn upper_then_lower(s: &str, from: usize) -> Option<usize> {
    let (k, n) = kind_at(s, from);
    if from >= s.len() || !is(IN_U, k) {
        return None;
    }
    let u_end = run(s, from + n, IN_U);
    Some(run(s, u_end, IN_W))
}

/// The end of the two letter alternatives at `pos` (first character of kind `k0`, `len0`
/// bytes, not `\r` or `\n` when `lead_ok`), without their contraction suffix.
fn word_end(s: &str, pos: usize, k0: u8, len0: usize, lead_ok: bool) -> Option<usize> {
    let after = pos + len0;
    if is(IS_LETTER, k0) {
        // No lead (a letter is not in its class): `U*W+`, else `U+W*` (a letter is in `U`
        // or `W`, so one of them matches).
        return upper_lower(s, pos).or_else(|| upper_then_lower(s, pos));
    }
    if !lead_ok {
        return None;
    }
    // The lead is taken first; dropped, only a mark (in `W`) can start `U*W+` itself, and
    // always does.
    upper_lower(s, after)
        .or_else(|| (k0 == K_MARK).then(|| upper_lower(s, pos)).flatten())
        .or_else(|| upper_then_lower(s, after))
}

/// The end of `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `pos`.
#[inline]
pub(crate) fn contraction(s: &str, pos: usize) -> usize {
    let bytes = s.as_bytes();
    if bytes.get(pos) != Some(&b'\'') {
        return pos;
    }
    let a = bytes.get(pos + 1).map_or(0, |&b| b | 0x20);
    let b = bytes.get(pos + 2).map_or(0, |&b| b | 0x20);
    match (a, b) {
        (b's' | b't' | b'm' | b'd', _) => pos + 2,
        // `(?i:s)` also matches U+017F LATIN SMALL LETTER LONG S (simple case folding);
        // 0xC5 | 0x20 = 0xE5, and its second byte 0xBF | 0x20 = 0xBF.
        (0xE5, 0xBF) if bytes.get(pos + 1) == Some(&0xC5) => pos + 3,
        (b'r' | b'v', b'e') | (b'l', b'l') => pos + 3,
        _ => pos,
    }
}

/// The end of the match starting at byte `pos` of `s` (`pos < s.len()`): with the contraction
/// suffixes when `CONTRACTIONS`, numbers in runs of up to `DIGITS`.
pub(crate) fn match_end<const CONTRACTIONS: bool, const DIGITS: usize>(
    s: &str,
    pos: usize,
) -> usize {
    if pos >= s.len() {
        return s.len();
    }
    let bytes = s.as_bytes();
    let b0 = bytes.get(pos).copied().unwrap_or(0);
    let newline = b0 == b'\r' || b0 == b'\n';
    let (k0, len0) = kind_at(s, pos);
    let after = pos + len0;
    // The lead class `[^\r\n\p{L}\p{N}]`.
    let lead_ok = !newline && k0 != K_NUMBER && !is(IS_LETTER, k0);
    if let Some(end) = word_end(s, pos, k0, len0, lead_ok) {
        return if CONTRACTIONS {
            contraction(s, end)
        } else {
            end
        };
    }
    if k0 == K_NUMBER {
        let mut end = after;
        for _ in 1..DIGITS {
            match kind_at(s, end) {
                (K_NUMBER, n) if end < s.len() => end += n,
                _ => break,
            }
        }
        return end;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    let punct_from = if b0 == b' ' { after } else { pos };
    let punct_end = run(s, punct_from, IS_PUNCT);
    if punct_end > punct_from {
        let tail = bytes
            .get(punct_end..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&b| matches!(b, b'\r' | b'\n' | b'/'))
            .count();
        return punct_end + tail;
    }
    // White space from here on (letters, marks, numbers and the rest matched above).
    let ws_end = run(s, pos, IS_SPACE);
    super::space_run_end(s, pos, ws_end)
}

/// Bit 7 of each byte of `x` (eight bytes of text, little-endian) set where that byte is
/// `a..=z`: the two additions set bit 7 where the byte (bit 7 cleared, so that nothing
/// carries into the next byte) reaches `a` and `{`.
#[inline(always)]
fn lower_bits(x: u64) -> u64 {
    const HI: u64 = 0x8080_8080_8080_8080;
    let y = x & !HI;
    let from_a = y.wrapping_add(0x1f1f_1f1f_1f1f_1f1f);
    let past_z = y.wrapping_add(0x0505_0505_0505_0505);
    from_a & !past_z & !x & HI
}

/// The end of the run of `a..=z` bytes from `from`, eight at a time while they last.
#[inline(always)]
fn lower_run_end(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(eight) = bytes.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        let other = !lower_bits(u64::from_le_bytes(*eight)) & 0x8080_8080_8080_8080;
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while bytes.get(i).is_some_and(u8::is_ascii_lowercase) {
        i += 1;
    }
    i
}

/// `match_end`, with the common matches scanned inline: an ASCII letter, or an ASCII lead
/// (not a newline, digit or letter) before an ASCII letter, begins a word: ASCII capitals,
/// then ASCII lower-case letters. When the next byte is ASCII the regex ends there (no `W`
/// character can follow; with no lower-case letter, `U*W+` fails and `U+W*` takes the
/// capitals, the lead being no mark), then the contraction suffix. An ASCII digit begins
/// `\p{N}{1,DIGITS}`, taken here while the bytes are ASCII. Everything else, and a word that
/// goes on into a non-ASCII character, takes `match_end`.
#[inline(always)]
pub(crate) fn match_end_fast<const CONTRACTIONS: bool, const DIGITS: usize>(
    s: &str,
    pos: usize,
) -> usize {
    let bytes = s.as_bytes();
    if let Some(&b0) = bytes.get(pos) {
        let k0 = BYTE_KIND[b0 as usize];
        let from = match k0 {
            K_LOWER | K_UPPER => Some(pos),
            K_OTHER => Some(pos + 1),
            K_SPACE if b0 != b'\r' && b0 != b'\n' => Some(pos + 1),
            _ => None,
        };
        if let Some(from) = from {
            let mut i = from;
            while bytes.get(i).is_some_and(u8::is_ascii_uppercase) {
                i += 1;
            }
            let i = lower_run_end(bytes, i);
            if i > from && bytes.get(i).is_none_or(|&b| b < 0x80) {
                return if CONTRACTIONS { contraction(s, i) } else { i };
            }
        }
        if k0 == K_NUMBER {
            let mut end = pos + 1;
            for _ in 1..DIGITS {
                match bytes.get(end).map(|&b| BYTE_KIND[b as usize]) {
                    Some(K_NUMBER) => end += 1,
                    Some(K_HIGH) => return general::<CONTRACTIONS, DIGITS>(s, pos),
                    _ => break,
                }
            }
            return end;
        }
    }
    general::<CONTRACTIONS, DIGITS>(s, pos)
}

/// `match_end`, out of line so that the inline scanner stays small.
#[inline(never)]
fn general<const CONTRACTIONS: bool, const DIGITS: usize>(s: &str, pos: usize) -> usize {
    match_end::<CONTRACTIONS, DIGITS>(s, pos)
}

/// `byte_level::gpt2_window_word` for this split: the length of the match at the start of
/// `w` (sixteen bytes of text from a match start, also as two little-endian words) when
/// `match_end_fast` scans it inline and it ends inside `w` before an ASCII byte that starts
/// no contraction; else None, for `match_end_fast`.
#[inline(always)]
pub(crate) fn window_word<const CONTRACTIONS: bool, const DIGITS: usize>(
    w: &[u8; 16],
    lo: u64,
    hi: u64,
) -> Option<usize> {
    let b0 = lo as u8;
    let lead = match BYTE_KIND[usize::from(b0)] {
        K_LOWER | K_UPPER => 0,
        K_OTHER => 1,
        K_SPACE if b0 != b'\r' && b0 != b'\n' => 1,
        K_NUMBER => {
            let mut end = 1;
            while end < DIGITS {
                match BYTE_KIND[usize::from(w[end])] {
                    K_NUMBER => end += 1,
                    K_HIGH => return None,
                    _ => break,
                }
            }
            return Some(end);
        }
        _ => return None,
    };
    let mut i = lead;
    while i < w.len() && w[i].is_ascii_uppercase() {
        i += 1;
    }
    // The first byte from `i` on that is not `a..=z`.
    const HI: u128 = 0x8080_8080_8080_8080_8080_8080_8080_8080;
    let lower = u128::from(lower_bits(lo)) | (u128::from(lower_bits(hi)) << 64);
    let other = !lower & HI & (u128::MAX.checked_shl(8 * i as u32).unwrap_or(0));
    if other == 0 {
        return None;
    }
    let end = (other.trailing_zeros() / 8) as usize;
    match w.get(end) {
        Some(&b) if end > lead && b < 0x80 && !(CONTRACTIONS && b == b'\'') => Some(end),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::split_check::{regex, regex_matches, scanner_matches};
    use super::*;

    /// `BMP_KIND` equals `kind_by_ranges`, and `\p{L}` is the union of the five letter
    /// categories (which `kind_by_ranges` relies on), on every code point.
    #[test]
    fn kind_tables_agree() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let letter = [
                &tables::UPPERCASE[..],
                &tables::TITLECASE,
                &tables::MODIFIER,
                &tables::OTHER_LETTER,
                &tables::LOWERCASE,
            ]
            .iter()
            .any(|t| in_ranges(t, c));
            assert_eq!(in_ranges(&tables::LETTER, c), letter, "{c:?}");
            let mut buf = [0u8; 4];
            let s = c.encode_utf8(&mut buf);
            let want = if c.is_ascii() {
                ascii_kind(c as u8)
            } else {
                kind_by_ranges(c)
            };
            assert_eq!(kind_at(s, 0), (want, c.len_utf8()), "{c:?}");
        }
    }

    /// Characters of every kind and case the patterns tell apart.
    const ALPHABET: &str = concat!(
        "aZbQé\u{C9}\u{17F}sStTlLvVeErRdDmM\u{1C5}\u{2B0}\u{2C6}\u{AA}\u{E0}ǅ", // letters
        "'''  \t\r\n\r\n/\u{a0}\u{2003}\u{3000}\u{85}\u{b}\u{c}\u{2028}",       // ', spaces
        "19٣²½ⅷ\u{1D7CE}",                                                      // numbers
        ".,!-😀\u{1F44D}\u{1F3FB}\u{200D}ß\u{FB05}",                            // other
        "\u{301}\u{300}\u{93F}\u{20DD}\u{1D165}",                               // marks
        "漢字あア\u{30FC}\u{3005}한\u{5D0}\u{627}\u{E01}\u{20000}\u{10400}\u{10428}", // scripts
    );

    /// The hand-written split (general and fast scanner, and the window) equals Oniguruma
    /// running the translated pattern, on random texts over `ALPHABET`.
    fn check<const C: bool, const D: usize>(published: &str, translated: &str, seed: u64) {
        let re = regex(published, translated);
        let alphabet: Vec<char> = ALPHABET.chars().collect();
        let mut next = crate::test_rng(seed);
        let mut windows = 0;
        for round in 0..60_000 {
            // Mostly short texts; some long ones, so that the fast scanner's eight-byte steps
            // and the sixteen-byte window are reached.
            let len = (next() % if round % 8 == 0 { 40 } else { 14 }) as usize;
            // Some texts mostly ASCII letters, to reach the inline scanners' long words.
            let ascii = round % 3 == 0;
            let text: String = (0..len)
                .map(|_| {
                    let r = next();
                    if ascii && r % 4 != 0 {
                        char::from(b"aZbyQ 'sT"[(r / 4 % 9) as usize])
                    } else {
                        alphabet[(r % alphabet.len() as u64) as usize]
                    }
                })
                .collect();
            let expected = regex_matches(&re, &text);
            for (name, f) in [
                ("general", match_end::<C, D> as fn(&str, usize) -> usize),
                ("fast", match_end_fast::<C, D>),
            ] {
                assert_eq!(scanner_matches(&text, f), expected, "{name}: text {text:?}");
            }
            for &(s, e) in &expected {
                let Some(w) = text.as_bytes().get(s..).and_then(<[u8]>::first_chunk::<16>) else {
                    continue;
                };
                let [lo, hi] = crate::models::bpe::ids_cache::window_words(w);
                if let Some(n) = window_word::<C, D>(w, lo, hi) {
                    assert_eq!(s + n, e, "window: text {text:?} at {s}");
                    windows += 1;
                }
            }
        }
        assert!(windows > 1000, "the window took only {windows} words");
    }

    #[test]
    fn o200k_equals_the_regex() {
        check::<true, 3>(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            O200K_PATTERN,
            0x9E37_79B9_7F4A_7C15,
        );
    }

    #[test]
    fn tekken_equals_the_regex() {
        check::<false, 1>(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            TEKKEN_PATTERN,
            0x2545_F491_4F6C_DD1D,
        );
    }
}
