//! BertNormalizer: clean control characters and whitespace, space out CJK ideographs, strip
//! accents (NFD then drop nonspacing marks), lowercase.

use super::config::Obj;
use super::Normalizer;
use crate::error::Result;
use crate::text::unicode;
use crate::text::NormalizedString;
use unicode_categories::UnicodeCategories;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BertNormalizer {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    /// `None` follows `lowercase`.
    pub strip_accents: Option<bool>,
    pub lowercase: bool,
}

/// Whitespace for BERT: tab, LF and CR, plus everything `char::is_whitespace` accepts.
#[inline]
pub fn is_bert_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || unicode::is_whitespace(c)
}

/// Control for BERT: the "other" categories (Cc, Cf, Co of unicode_categories 0.1.1) except
/// tab, LF and CR.
#[inline]
pub fn is_bert_control(c: char) -> bool {
    if c.is_ascii() {
        // The only "other" ASCII characters are the C0 controls and DEL (all Cc).
        return (c < ' ' || c == '\u{7f}') && !matches!(c, '\t' | '\n' | '\r');
    }
    c.is_other()
}

/// The CJK ideograph blocks BERT isolates (the original BERT list, not all of Han).
#[inline]
pub fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// What clean_text drops: NUL, U+FFFD and the controls.
#[inline]
pub(crate) fn is_removed(c: char) -> bool {
    c == '\0' || c == '\u{fffd}' || is_bert_control(c)
}

impl BertNormalizer {
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        Ok(BertNormalizer {
            clean_text: o.req_bool("clean_text")?,
            handle_chinese_chars: o.req_bool("handle_chinese_chars")?,
            strip_accents: o.opt_bool("strip_accents")?,
            lowercase: o.req_bool("lowercase")?,
        })
    }
}

impl BertNormalizer {
    /// ASCII text: no ideographs, no accents, and every rewrite keeps one byte per char, so
    /// only the controls' removal touches the alignments.
    fn normalize_ascii(&self, n: &mut NormalizedString) {
        if self.clean_text {
            if n.get().bytes().any(|b| is_removed(b as char)) {
                n.filter(|c| !is_removed(c));
            }
            if n.get().bytes().any(|b| matches!(b, b'\t' | b'\n' | b'\r')) {
                n.map(|c| if is_bert_whitespace(c) { ' ' } else { c });
            }
        }
        if self.lowercase {
            n.lowercase();
        }
    }
}

impl Normalizer for BertNormalizer {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        if n.get().is_ascii() {
            self.normalize_ascii(n);
            return Ok(());
        }
        // Each step is skipped when it would change nothing: an identity rewrite leaves the
        // alignments as they are, so skipping is exact and saves the allocation.
        if self.clean_text {
            if n.get().chars().any(is_removed) {
                n.filter(|c| !is_removed(c));
            }
            if n.get().chars().any(|c| c != ' ' && is_bert_whitespace(c)) {
                n.map(|c| if is_bert_whitespace(c) { ' ' } else { c });
            }
        }
        if self.handle_chinese_chars && n.get().chars().any(is_chinese_char) {
            let mut t = Vec::with_capacity(n.len() + 16);
            for c in n.get().chars() {
                if is_chinese_char(c) {
                    // The space takes the ideograph's place; the ideograph and the second
                    // space are insertions, so all three align to the ideograph.
                    t.extend([(' ', 0), (c, 1), (' ', 1)]);
                } else {
                    t.push((c, 0));
                }
            }
            n.transform(t, 0);
        }
        if self.strip_accents.unwrap_or(self.lowercase) {
            n.nfd();
            let mn = |c: char| !c.is_ascii() && c.is_mark_nonspacing();
            if n.get().chars().any(mn) {
                n.filter(|c| !mn(c));
            }
        }
        if self.lowercase {
            n.lowercase();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bert(lowercase: bool, strip: Option<bool>) -> BertNormalizer {
        BertNormalizer {
            clean_text: true,
            handle_chinese_chars: true,
            strip_accents: strip,
            lowercase,
        }
    }

    #[test]
    fn cleans_controls_and_whitespace() {
        let mut n = NormalizedString::from("a\u{0}\tb\u{fffd}\u{200b}c\r\n");
        bert(false, None).normalize(&mut n).unwrap();
        // NUL, U+FFFD and U+200B (Cf) are removed; tab, CR, LF become spaces.
        assert_eq!(n.get(), "a bc  ");
        // "b" is at original byte 3 (after a, NUL, tab).
        assert_eq!(n.convert_normalized_range(2..3), Some(3..4));
    }

    #[test]
    fn chinese_chars_are_spaced_and_aligned_to_the_ideograph() {
        let mut n = NormalizedString::from("a中b");
        bert(false, None).normalize(&mut n).unwrap();
        assert_eq!(n.get(), "a 中 b");
        // The spaces and the ideograph all map to the ideograph's bytes 1..4.
        assert_eq!(n.convert_normalized_range(1..2), Some(1..4));
        assert_eq!(n.convert_normalized_range(5..6), Some(1..4));
    }

    #[test]
    fn strip_accents_follows_lowercase_when_unset() {
        let mut n = NormalizedString::from("Éa");
        bert(true, None).normalize(&mut n).unwrap();
        assert_eq!(n.get(), "ea");
        let mut n = NormalizedString::from("Éa");
        bert(true, Some(false)).normalize(&mut n).unwrap();
        assert_eq!(n.get(), "éa");
        let mut n = NormalizedString::from("Éa");
        bert(false, None).normalize(&mut n).unwrap();
        assert_eq!(n.get(), "Éa");
        let mut n = NormalizedString::from("Éa");
        bert(false, Some(true)).normalize(&mut n).unwrap();
        assert_eq!(n.get(), "Ea");
    }
}
