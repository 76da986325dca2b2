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
        Ok(Precompiled {
            map,
            empty_trie: trie_bytes == 0,
            ascii,
            ascii_identity,
            ascii_keeps_words,
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

/// What the rule walk produces: kept text and replacements, in order.
trait Sink {
    /// `part` (one character) is left as it is.
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

impl Precompiled {
    /// The reference's walk over `text`, reporting each kept character and each replacement
    /// to `sink` (one walk for both outputs, so they cannot disagree).
    #[inline]
    fn walk(&self, text: &str, sink: &mut impl Sink) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let next = bytes.get(i + 1).copied();
            // An ASCII character is a grapheme of its own when what follows is ASCII too (or
            // nothing), except CR before LF; a non-ASCII follower may extend it.
            if b < 0x80 && next.is_none_or(|x| x < 0x80 && !(b == b'\r' && x == b'\n')) {
                let part = &text[i..i + 1];
                match &self.ascii[b as usize] {
                    Some(rep) => sink.replace(part, rep),
                    None => sink.keep(part),
                }
                i += 1;
                continue;
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
