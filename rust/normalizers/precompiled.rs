//! Precompiled: the SentencePiece normalization rules stored in a tokenizer.json (base64).
//!
//! The reference walks extended grapheme clusters. A cluster shorter than 6 bytes that has a
//! rule for any of its prefixes is replaced WHOLE by the replacement of the SHORTEST such
//! prefix; otherwise each character is looked up on its own. Alignments come from a change
//! list built the reference's way (see `push_replacement`).

use super::config::Obj;
use super::Normalizer;
use crate::charsmap::CharsMap;
use crate::error::{Error, Result};
use crate::text::NormalizedString;
use base64::Engine;
use unicode_segmentation::UnicodeSegmentation;

pub struct Precompiled {
    map: CharsMap,
    /// A charsmap with no trie unit loads, but the reference cannot look anything up in it
    /// (it panics on the first character).
    empty_trie: bool,
    /// The rule of each ASCII character alone (`shortest_match` of its one byte): most text is
    /// ASCII, and an ASCII character followed by another is a grapheme of its own (but CR LF).
    ascii: [Option<Box<str>>; 128],
    /// No ASCII character, nor CR LF, has a rule: ASCII text is left as it is.
    ascii_identity: bool,
    /// Per ASCII byte: no rule, or whitespace turned into non-empty whitespace.
    ascii_keeps_words: [bool; 128],
    /// `Normalizer::ascii_word_classes`.
    ascii_classes: [u8; 128],
    /// Take the `is_simple` shortcut past the grapheme segmenter (off only in tests).
    fast_graphemes: bool,
    /// One bit per BMP code point: `is_simple` and plain (no rule's key starts with the
    /// character, none is a prefix of it), so the walk keeps it without a charsmap lookup.
    simple_plain: Box<[u64; 1024]>,
}

/// The `simple_plain` bits of `map`.
fn simple_plain_bits(map: &CharsMap) -> Box<[u64; 1024]> {
    let mut bits = Box::new([0u64; 1024]);
    let mut buf = [0u8; 4];
    for (lo, hi) in SIMPLE_RANGES {
        for c in (lo..=hi).filter_map(char::from_u32) {
            let key = c.encode_utf8(&mut buf).as_bytes();
            if map.shortest_match(key).is_none() && !map.has_prefix(key) {
                let cp = c as usize;
                if let Some(w) = bits.get_mut(cp >> 6) {
                    *w |= 1 << (cp & 63);
                }
            }
        }
    }
    bits
}

/// A rule that keeps whitespace-separated words: whitespace becomes non-empty whitespace.
fn whitespace_to_whitespace(from: u8, to: Option<&str>) -> bool {
    match to {
        None => true,
        Some(to) => {
            (from as char).is_whitespace() && !to.is_empty() && to.chars().all(char::is_whitespace)
        }
    }
}

/// base64 as the reference decodes it (base64 0.13 `decode`: padding optional, no trailing
/// bits).
fn decode_base64(s: &str) -> std::result::Result<Vec<u8>, base64::DecodeError> {
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine.decode(s)
}

impl Precompiled {
    /// From the decoded charsmap bytes, with the reference's load checks: a 4-byte header,
    /// the whole trie present, and a replacement blob that is valid UTF-8 as a whole.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let what = "normalizer `Precompiled`: field `precompiled_charsmap`";
        let head: [u8; 4] = bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                Error::invalid(format!("{what}: cannot parse (shorter than 4 bytes)"))
            })?;
        let trie_bytes = (u32::from_le_bytes(head) as usize / 4) * 4;
        let blob = bytes
            .get(4 + trie_bytes..)
            .ok_or_else(|| Error::invalid(format!("{what}: cannot parse (trie truncated)")))?;
        if std::str::from_utf8(blob).is_err() {
            return Err(Error::invalid(format!(
                "{what}: the replacement strings are not valid UTF-8"
            )));
        }
        // The reference reads `size / 4` trie units and takes everything after them as the
        // blob, so a size that is not a multiple of 4 is rounded down, not refused.
        let mut normalized = Vec::with_capacity(bytes.len());
        normalized.extend_from_slice(&(trie_bytes as u32).to_le_bytes());
        normalized.extend_from_slice(&bytes[4..]);
        let map = CharsMap::parse(&normalized).map_err(|e| e.context(what))?;
        let ascii: [Option<Box<str>>; 128] =
            std::array::from_fn(|b| map.shortest_match(&[b as u8]).map(|(_, r)| Box::from(r)));
        let ascii_identity =
            ascii.iter().all(Option::is_none) && map.shortest_match(b"\r\n").is_none();
        let ascii_keeps_words =
            std::array::from_fn(|b| whitespace_to_whitespace(b as u8, ascii[b].as_deref()));
        let ascii_classes = std::array::from_fn(|b| {
            match (ascii_keeps_words[b], (b as u8 as char).is_whitespace()) {
                (true, false) if ascii[b].is_none() => super::ASCII_WORD,
                (true, true) => super::ASCII_SPACE,
                _ => super::ASCII_OTHER,
            }
        });
        let simple_plain = simple_plain_bits(&map);
        Ok(Precompiled {
            simple_plain,
            map,
            ascii_classes,
            empty_trie: trie_bytes == 0,
            ascii,
            ascii_identity,
            ascii_keeps_words,
            fast_graphemes: true,
        })
    }

    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        let s = o.req_str("precompiled_charsmap")?;
        let bytes = decode_base64(s).map_err(|e| {
            Error::invalid(format!(
                "normalizer `Precompiled`: field `precompiled_charsmap` is not base64: {e}"
            ))
        })?;
        Precompiled::from_bytes(&bytes)
    }
}

/// Append the changes that turn `old` into `new`: every new char replaces (0); when `new` is
/// longer, its last extra chars are insertions (1); when shorter, the last change entry (which
/// may belong to an EARLIER replacement when `new` is empty) absorbs the removal.
fn push_replacement(t: &mut Vec<(char, isize)>, old: &str, new: &str) {
    let old_count = old.chars().count() as isize;
    let new_count = new.chars().count() as isize;
    let diff = new_count - old_count;
    t.extend(new.chars().map(|c| (c, 0)));
    if diff > 0 {
        let n = t.len();
        for e in &mut t[n - diff as usize..] {
            e.1 = 1;
        }
    } else if diff < 0 {
        if let Some(last) = t.last_mut() {
            last.1 += diff;
        }
    }
}

impl Normalizer for Precompiled {
    fn keeps_words(&self, text: &str) -> bool {
        // ASCII characters are graphemes of their own (CR LF aside), so each byte's own rule
        // is what happens to it.
        !self.empty_trie
            && text
                .bytes()
                .all(|b| self.ascii_keeps_words.get(usize::from(b)) == Some(&true))
            // CR LF is one grapheme, with its own lookup: left to the general path.
            && !text.contains("\r\n")
    }

    fn ascii_word_classes(&self) -> Option<&[u8; 128]> {
        (!self.empty_trie).then_some(&self.ascii_classes)
    }

    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        if self.empty_trie {
            if n.is_empty() {
                return Ok(());
            }
            return Err(empty_trie_error());
        }
        let text = n.get();
        if self.ascii_identity && text.is_ascii() {
            return Ok(());
        }
        let mut sink = Changes {
            t: Vec::with_capacity(text.len()),
            modified: false,
        };
        self.walk(text, &mut sink);
        if sink.modified {
            n.transform(sink.t, 0);
        }
        Ok(())
    }

    fn normalize_text(&self, text: &str, out: &mut String) -> Option<Result<()>> {
        out.clear();
        if self.empty_trie {
            return Some(if text.is_empty() {
                Ok(())
            } else {
                Err(empty_trie_error())
            });
        }
        if self.ascii_identity && text.is_ascii() {
            out.push_str(text);
            return Some(Ok(()));
        }
        out.reserve(text.len());
        self.walk(text, &mut TextOnly(out));
        Some(Ok(()))
    }
}

fn empty_trie_error() -> Error {
    Error::invalid("normalizer `Precompiled`: field `precompiled_charsmap` has an empty trie")
}

/// Characters of common scripts whose grapheme-break property is Other (not Prepend, Extend,
/// SpacingMark, ZWJ, Regional Indicator, Hangul jamo, Control) or a Hangul syllable (LV,
/// LVT). Between such a character (or an ASCII one) and a following one of them or an ASCII
/// character, no rule of UAX #29 keeps the cluster together (a Hangul syllable joins only a
/// following jamo; an Indic conjunct needs a linker before the consonant), so the first one
/// ends its cluster: the walk can skip the segmenter there (checked against it in the tests).
const SIMPLE_RANGES: [(u32, u32); 35] = [
    (0x00C0, 0x02AF), // Latin-1 letters, Latin Extended-A and -B, IPA
    (0x0370, 0x0377), // Greek
    (0x037A, 0x037F),
    (0x0384, 0x03FF),
    (0x0400, 0x0482), // Cyrillic (not the combining 0483..0489)
    (0x048A, 0x052F),
    (0x05D0, 0x05EA), // Hebrew letters
    (0x05F0, 0x05F4),
    (0x060C, 0x060C), // Arabic comma, semicolon, question mark, letters, digits
    (0x061B, 0x061B),
    (0x061F, 0x064A),
    (0x0660, 0x066F),
    (0x0671, 0x06D5),
    (0x0904, 0x0939), // Devanagari letters (not the vowel signs, nukta, virama)
    (0x093D, 0x093D),
    (0x0950, 0x0950),
    (0x0958, 0x0961),
    (0x0964, 0x0970),
    (0x0972, 0x097F),
    (0x0E01, 0x0E30), // Thai (not the vowel signs above and below, nor sara am)
    (0x0E32, 0x0E32),
    (0x0E3F, 0x0E46),
    (0x0E4F, 0x0E5B),
    (0x1E00, 0x1EFF), // Latin Extended Additional (Vietnamese)
    (0x1F00, 0x1FFE), // Greek Extended
    (0x2010, 0x2027), // dashes, quotes, bullets, ellipsis
    (0x2030, 0x205E),
    (0x3001, 0x3029), // CJK punctuation (not the tone marks 302A..302F)
    (0x3041, 0x3096), // Hiragana
    (0x309B, 0x309F),
    (0x30A1, 0x30FF), // Katakana
    (0x3400, 0x4DBF), // CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF), // CJK Unified Ideographs
    (0xAC00, 0xD7A3), // Hangul syllables
    (0xFF01, 0xFF5E), // fullwidth ASCII
];

#[inline]
fn is_simple(c: char) -> bool {
    matches!(c as u32,
        0x00C0..=0x02AF
        | 0x0370..=0x0377
        | 0x037A..=0x037F
        | 0x0384..=0x03FF
        | 0x0400..=0x0482
        | 0x048A..=0x052F
        | 0x05D0..=0x05EA
        | 0x05F0..=0x05F4
        | 0x060C
        | 0x061B
        | 0x061F..=0x064A
        | 0x0660..=0x066F
        | 0x0671..=0x06D5
        | 0x0904..=0x0939
        | 0x093D
        | 0x0950
        | 0x0958..=0x0961
        | 0x0964..=0x0970
        | 0x0972..=0x097F
        | 0x0E01..=0x0E30
        | 0x0E32
        | 0x0E3F..=0x0E46
        | 0x0E4F..=0x0E5B
        | 0x1E00..=0x1EFF
        | 0x1F00..=0x1FFE
        | 0x2010..=0x2027
        | 0x2030..=0x205E
        | 0x3001..=0x3029
        | 0x3041..=0x3096
        | 0x309B..=0x309F
        | 0x30A1..=0x30FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xAC00..=0xD7A3
        | 0xFF01..=0xFF5E
    )
}

/// `text` starts with an `is_simple` character.
#[inline]
fn starts_simple(text: &str) -> bool {
    text.chars().next().is_some_and(is_simple)
}

/// What the rule walk produces: kept text and replacements, in order.
trait Sink {
    /// `part` (characters, each a cluster of its own) is left as it is.
    fn keep(&mut self, part: &str);
    /// `old` (a grapheme or one character) becomes `new`.
    fn replace(&mut self, old: &str, new: &str);
}

/// The reference's change list (alignment included).
struct Changes {
    t: Vec<(char, isize)>,
    modified: bool,
}

impl Sink for Changes {
    #[inline]
    fn keep(&mut self, part: &str) {
        self.t.extend(part.chars().map(|c| (c, 0)));
    }
    #[inline]
    fn replace(&mut self, old: &str, new: &str) {
        self.modified = true;
        push_replacement(&mut self.t, old, new);
    }
}

/// The normalized text alone: the change list's characters, in order (which is what
/// `transform` makes the normalized string of), without the alignment.
struct TextOnly<'a>(&'a mut String);

impl Sink for TextOnly<'_> {
    #[inline]
    fn keep(&mut self, part: &str) {
        self.0.push_str(part);
    }
    #[inline]
    fn replace(&mut self, _old: &str, new: &str) {
        self.0.push_str(new);
    }
}

/// The BMP code point of the 2- or 3-byte character at `i` of `b` (valid UTF-8), with its
/// length; `None` for ASCII, a 4-byte character or the end.
#[inline]
fn bmp_at(b: &[u8], i: usize) -> Option<(u32, usize)> {
    match *b.get(i..)? {
        [x @ 0xC0..=0xDF, y, ..] => Some(((u32::from(x & 0x1F) << 6) | u32::from(y & 0x3F), 2)),
        [x @ 0xE0..=0xEF, y, z, ..] => Some((
            (u32::from(x & 0x0F) << 12) | (u32::from(y & 0x3F) << 6) | u32::from(z & 0x3F),
            3,
        )),
        _ => None,
    }
}

impl Precompiled {
    #[inline]
    fn is_simple_plain(&self, cp: u32) -> bool {
        self.simple_plain
            .get((cp >> 6) as usize)
            .is_some_and(|w| (w >> (cp & 63)) & 1 == 1)
    }

    /// The reference's walk over `text`, reporting each kept character and each replacement
    /// to `sink` (one walk for both outputs, so they cannot disagree).
    #[inline]
    fn walk(&self, text: &str, sink: &mut impl Sink) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if self.fast_graphemes && b < 0x80 {
                // A run of ASCII characters with no rule, each followed by an ASCII one (or
                // the end) and none a CR before LF: what the branch below keeps one by one.
                let mut j = i;
                while let Some(&x) = bytes.get(j) {
                    let keeps = x < 0x80
                        && self.ascii.get(usize::from(x)).is_some_and(Option::is_none)
                        && bytes
                            .get(j + 1)
                            .is_none_or(|&n| n < 0x80 && !(x == b'\r' && n == b'\n'));
                    if !keeps {
                        break;
                    }
                    j += 1;
                }
                if j > i {
                    sink.keep(&text[i..j]);
                    i = j;
                    continue;
                }
            }
            let next = bytes.get(i + 1).copied();
            // An ASCII character is a grapheme of its own when what follows is ASCII too (or
            // nothing), except CR before LF; a non-ASCII follower may extend it.
            if b < 0x80 && next.is_none_or(|x| x < 0x80 && !(b == b'\r' && x == b'\n'))
                || b < 0x80 && self.fast_graphemes && text.get(i + 1..).is_some_and(starts_simple)
            {
                let part = &text[i..i + 1];
                match &self.ascii[b as usize] {
                    Some(rep) => sink.replace(part, rep),
                    None => sink.keep(part),
                }
                i += 1;
                continue;
            }
            if self.fast_graphemes && b >= 0x80 {
                // A run of `simple_plain` characters, each a cluster of its own when followed
                // by one of them: all kept. The last one also when an ASCII or `is_simple`
                // character (or the end) follows; else it takes the paths below.
                let mut j = i;
                let mut last = i;
                while let Some((cp, len)) = bmp_at(bytes, j) {
                    if !self.is_simple_plain(cp) {
                        break;
                    }
                    last = j;
                    j += len;
                }
                if j > i {
                    let ends = text.get(j..).is_some_and(|t| {
                        t.chars()
                            .next()
                            .is_none_or(|n| n.is_ascii() || is_simple(n))
                    });
                    let to = if ends { j } else { last };
                    if to > i {
                        sink.keep(&text[i..to]);
                        i = to;
                        continue;
                    }
                }
            }
            if self.fast_graphemes {
                let mut chars = text[i..].chars();
                if let Some(c) = chars.next().filter(|&c| is_simple(c)) {
                    if chars.next().is_none_or(|n| n.is_ascii() || is_simple(n)) {
                        // A cluster of its own (see `is_simple`): what the cluster path
                        // below does with a one-character cluster.
                        let part = &text[i..i + c.len_utf8()];
                        i += part.len();
                        match self.map.shortest_match(part.as_bytes()) {
                            Some((_, rep)) => sink.replace(part, rep),
                            None => sink.keep(part),
                        }
                        continue;
                    }
                }
            }
            // Segmentation restarts here at a grapheme boundary, which gives the same clusters
            // as segmenting the whole text (the rules look back only inside a cluster).
            let g = text[i..].graphemes(true).next().unwrap_or(&text[i..]);
            i += g.len();
            if g.len() < 6 {
                if let Some((_, rep)) = self.map.shortest_match(g.as_bytes()) {
                    sink.replace(g, rep);
                    continue;
                }
            }
            for (j, c) in g.char_indices() {
                let part = &g[j..j + c.len_utf8()];
                match self.map.shortest_match(part.as_bytes()) {
                    Some((_, rep)) => sink.replace(part, rep),
                    None => sink.keep(part),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacement_changes() {
        // One char to two: the second is an insertion.
        let mut t = vec![];
        push_replacement(&mut t, "™", "TM");
        assert_eq!(t, vec![('T', 0), ('M', 1)]);
        // A removal is charged to the previous entry.
        push_replacement(&mut t, "\u{1e}", "");
        assert_eq!(t, vec![('T', 0), ('M', 0)]);
        t.push(('g', 0));
        let mut n = NormalizedString::from("™\u{1e}g");
        n.transform(t, 0);
        assert_eq!(n.get(), "TMg");
        assert_eq!(n.convert_normalized_range(2..3), Some(4..5));
    }

    #[test]
    fn simple_characters_end_their_cluster() {
        // Every `is_simple` character, and every ASCII one, followed by an ASCII or an
        // `is_simple` character is a cluster of its own for the segmenter itself. The
        // followers probe every grapheme-break category that can join two characters: a
        // character itself (Regional Indicator pairs), Hangul LV and LVT (after a jamo L or
        // V), ASCII (after Prepend), the ends and middle of every range; and each character
        // as a follower catches Extend, ZWJ and SpacingMark.
        let mut followers: Vec<char> = SIMPLE_RANGES
            .iter()
            .flat_map(|&(a, b)| [a, (a + b) / 2, b])
            .filter_map(char::from_u32)
            .collect();
        followers.extend([
            'a', ' ', '\r', '\n', '\t', '\u{7f}', '0', '\u{AC00}', '\u{AC01}',
        ]);
        let mut firsts: Vec<char> = (0..128u8).map(char::from).collect();
        for &(a, b) in &SIMPLE_RANGES {
            firsts.extend((a..=b).filter_map(char::from_u32));
        }
        let splits = |c: char, n: char| {
            let s = format!("{c}{n}");
            s.graphemes(true).next() == Some(&s[..c.len_utf8()])
        };
        for &c in &firsts {
            assert!(c.is_ascii() || is_simple(c));
            for &n in followers.iter().chain([&c]) {
                assert!(n.is_ascii() || is_simple(n));
                if c == '\r' && n == '\n' {
                    continue;
                }
                assert!(splits(c, n), "{c:?} {n:?}");
                if !c.is_ascii() {
                    assert!(splits(n, c), "{n:?} {c:?}");
                }
            }
        }
        // `is_simple` is exactly the ranges.
        let in_ranges = |c: u32| SIMPLE_RANGES.iter().any(|&(a, b)| (a..=b).contains(&c));
        for c in (0x80..0x11000).filter_map(char::from_u32) {
            assert_eq!(is_simple(c), in_ranges(c as u32), "{c:?}");
        }
        // Just outside the ranges the shortcut is not taken.
        for c in [
            '\u{BF}', '\u{483}', '\u{3099}', '\u{302A}', '\u{600}', '\u{6DD}', '\u{E31}',
            '\u{E33}', '\u{93E}', '\u{94D}', '\u{1100}', '\u{11A8}',
        ] {
            assert!(!is_simple(c));
        }
    }

    #[test]
    fn bmp_at_decodes_every_bmp_character() {
        let mut buf = [0u8; 4];
        for c in (0x80..0x10000).filter_map(char::from_u32) {
            let b = c.encode_utf8(&mut buf).as_bytes();
            assert_eq!(bmp_at(b, 0), Some((c as u32, b.len())));
        }
        assert_eq!(bmp_at(b"a", 0), None);
        assert_eq!(bmp_at("😀".as_bytes(), 0), None);
        assert_eq!(bmp_at(b"", 0), None);
    }

    #[test]
    fn cluster_shortcut_changes_nothing() {
        // The T5 charsmap (NFKC rules) with and without the shortcut, on text mixing simple
        // characters with what extends or joins clusters: combining marks, voiced-sound
        // marks, ZWJ and emoji, Hangul jamo, a Prepend character, Devanagari conjuncts, CR LF.
        let dir = crate::test_data_dir();
        let Ok(json) = std::fs::read_to_string(format!("{dir}/t5-small/tokenizer.json")) else {
            eprintln!("skipped: t5-small/tokenizer.json not found under {dir}");
            return;
        };
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let b64 = v["normalizer"]["precompiled_charsmap"].as_str().unwrap();
        let fast = Precompiled::from_bytes(&decode_base64(b64).unwrap()).unwrap();
        let slow = Precompiled {
            fast_graphemes: false,
            ..Precompiled::from_bytes(&decode_base64(b64).unwrap()).unwrap()
        };
        let alphabet: Vec<char> = "aZ \r\n中文ｶﾞガカ\u{3099}ﾞ\u{301}éÀŒ\u{200d}👍\u{1f3fb}ᄀ\u{1161}\u{11a8}한\u{600}١ب\u{64b}क\u{94d}षि①ＡΩЖ、。ㇰ\u{fe0f}ﬁ\u{5d0}\u{5b0}\u{e01}\u{e31}\u{e33}\u{e40}ें\u{93e}\u{915}\u{958}\u{1ea1}\u{1ec7}ơ\u{30fc}\u{2014}\u{2026}\u{fb2a}\u{6a9}\u{670}\u{1f00}\u{345}\u{3400}"
            .chars()
            .collect();
        let mut next = crate::test_rng(0x51_7cc1_b727_220au64);
        let (mut a, mut b) = (String::new(), String::new());
        for _ in 0..20_000 {
            let len = (next() % 12) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            fast.normalize_text(&text, &mut a).unwrap().unwrap();
            slow.normalize_text(&text, &mut b).unwrap().unwrap();
            assert_eq!(a, b, "{text:?}");
            let mut x = NormalizedString::from(text.as_str());
            let mut y = NormalizedString::from(text.as_str());
            fast.normalize(&mut x).unwrap();
            slow.normalize(&mut y).unwrap();
            assert_eq!(x.get(), a, "{text:?}");
            assert_eq!(y.get(), a, "{text:?}");
            assert_eq!(x.alignments(), y.alignments(), "{text:?}");
        }
    }

    #[test]
    fn load_checks() {
        assert!(Precompiled::from_bytes(&[]).is_err());
        assert!(Precompiled::from_bytes(&[8, 0, 0, 0, 0, 0, 0, 0]).is_err());
        // Empty trie, blob with invalid UTF-8.
        assert!(Precompiled::from_bytes(&[0, 0, 0, 0, 0xff]).is_err());
        // An empty trie loads but cannot normalize text.
        let p = Precompiled::from_bytes(&[0, 0, 0, 0, b'a', 0]).unwrap();
        let mut n = NormalizedString::from("x");
        assert!(p.normalize(&mut n).is_err());
        // A trie size that is not a multiple of 4 is rounded down: 3 → no unit, blob "ab".
        assert!(Precompiled::from_bytes(&[3, 0, 0, 0, b'a', b'b']).is_ok());
    }
}
