//! Metaspace: spaces become the replacement character (default `▁`), a replacement is put in
//! front of the word as the prepend scheme says, and the text is split before each
//! replacement character.

use super::PreTokenizer;
use crate::error::{Error, Result};
use crate::normalizers::config::Obj;
use crate::text::{NormalizedString, PreTokenizedString};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrependScheme {
    Always,
    First,
    Never,
}

#[derive(Debug, Clone)]
pub struct Metaspace {
    pub replacement: char,
    str_rep: String,
    pub prepend_scheme: PrependScheme,
    pub split: bool,
}

impl Metaspace {
    pub fn new(replacement: char, prepend_scheme: PrependScheme, split: bool) -> Self {
        Metaspace {
            replacement,
            str_rep: replacement.to_string(),
            prepend_scheme,
            split,
        }
    }

    /// The reference's reader: `replacement` is required; `prepend_scheme` defaults to
    /// "always"; the legacy `add_prefix_space: false` means "never" and is an error with any
    /// other declared scheme (`true` changes nothing); `split` defaults to true.
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        let replacement = o.req_char("replacement")?;
        let mut scheme = match o.get("prepend_scheme") {
            None => PrependScheme::Always,
            Some(v) => match v.as_str() {
                Some("always") => PrependScheme::Always,
                Some("first") => PrependScheme::First,
                Some("never") => PrependScheme::Never,
                _ => return Err(o.bad("prepend_scheme", "one of \"always\", \"first\", \"never\"")),
            },
        };
        if o.opt_bool("add_prefix_space")? == Some(false) {
            if scheme != PrependScheme::Never {
                return Err(Error::invalid(
                    "pre-tokenizer `Metaspace`: add_prefix_space does not match declared \
                     prepend_scheme",
                ));
            }
            scheme = PrependScheme::Never;
        }
        let split = o.opt_bool("split")?.unwrap_or(true);
        Ok(Metaspace::new(replacement, scheme, split))
    }

    fn rewrite(&self, n: &mut NormalizedString) -> Result<()> {
        if n.get().contains(' ') {
            n.replace(&' ', &self.str_rep)?;
        }
        let prepend = match self.prepend_scheme {
            PrependScheme::Always => true,
            // "first" means the first piece of the whole input, not of each split.
            PrependScheme::First => n.offsets_original().0 == 0,
            PrependScheme::Never => false,
        };
        if prepend && !n.get().starts_with(self.replacement) {
            n.prepend(&self.str_rep);
        }
        Ok(())
    }
}

impl Metaspace {
    /// Replace, prepend and split in one pass. The reference's steps keep one alignment per
    /// character: a space's replacement keeps the space's, the prepended replacement takes the
    /// first character's; then every replacement character (except at the very start) begins
    /// a new piece, and each piece is rebased as `slice` rebases it.
    fn split_pieces(&self, n: &NormalizedString) -> Vec<NormalizedString> {
        let text = n.get();
        let al = n.alignments();
        let shift = n.offsets_original().0;
        let rep = self.replacement;
        let mut out = Vec::new();
        let Some(first) = text.chars().next() else {
            return out;
        };
        let prepend = match self.prepend_scheme {
            PrependScheme::Always => true,
            PrependScheme::First => shift == 0,
            PrependScheme::Never => false,
        } && first != ' '
            && first != rep;
        // Pieces are words: start small rather than at the whole text's size.
        const CAP: usize = 24;
        let mut buf = String::with_capacity(CAP);
        let mut balign: Vec<(usize, usize)> = Vec::with_capacity(CAP);
        if prepend {
            buf.push(rep);
            balign.extend(std::iter::repeat_n(al[0], rep.len_utf8()));
        }
        for (b, c) in text.char_indices() {
            let c = if c == ' ' { rep } else { c };
            if c == rep && !buf.is_empty() {
                out.push(NormalizedString::from_aligned_piece(
                    std::mem::replace(&mut buf, String::with_capacity(CAP)),
                    std::mem::replace(&mut balign, Vec::with_capacity(CAP)),
                    shift,
                ));
            }
            buf.push(c);
            balign.extend(std::iter::repeat_n(al[b], c.len_utf8()));
        }
        if !buf.is_empty() {
            out.push(NormalizedString::from_aligned_piece(buf, balign, shift));
        }
        out
    }
}

impl PreTokenizer for Metaspace {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        if self.split {
            return pts.split(|_, n| Ok(self.split_pieces(&n)));
        }
        pts.split(|_, mut n| {
            self.rewrite(&mut n)?;
            Ok(vec![n])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pieces;
    use serde_json::json;

    #[test]
    fn always_prepends_and_splits_before_each_space() {
        let p = pieces(json!({"type": "Metaspace", "replacement": "▁"}), "Hey  you");
        let t: Vec<&str> = p.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(t, vec!["▁Hey", "▁", "▁you"]);
        // The prepended ▁ aligns to "H"; each other ▁ to its own space.
        assert_eq!(p[0].1, (0, 3));
        assert_eq!(p[1].1, (3, 4));
        assert_eq!(p[2].1, (4, 8));
    }

    #[test]
    fn never_and_no_split() {
        let p = pieces(
            json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never",
                   "split": false}),
            "a b",
        );
        assert_eq!(p, vec![("a▁b".to_string(), (0, 3))]);
    }

    #[test]
    fn one_pass_equals_rewrite_then_split() {
        use super::*;
        use crate::text::SplitBehavior;
        // The reference's own steps, run on a string with non-trivial alignments (an NFKD
        // expansion and a removal before the spaces), must give the same pieces.
        for scheme in [
            PrependScheme::Always,
            PrependScheme::First,
            PrependScheme::Never,
        ] {
            for (text, shift) in [
                ("ﬁ a\u{1}  ▁b ", 0),
                ("ﬁ a\u{1}  ▁b ", 3),
                (" x", 0),
                ("▁", 0),
                ("ab", 0),
                ("é ﬃ", 5),
            ] {
                let m = Metaspace::new('▁', scheme, true);
                let mut n = NormalizedString::new(text, shift);
                n.nfkd();
                n.filter(|c| c != '\u{1}');
                let fast = m.split_pieces(&n);
                let mut slow_src = n.clone();
                m.rewrite(&mut slow_src).unwrap();
                let slow: Vec<NormalizedString> = slow_src
                    .split(&'▁', SplitBehavior::MergedWithNext)
                    .unwrap()
                    .into_iter()
                    .filter(|p| !p.is_empty())
                    .collect();
                assert_eq!(fast, slow, "{text:?} {scheme:?}");
            }
        }
    }

    #[test]
    fn legacy_add_prefix_space_false_needs_never() {
        let v = json!({"type": "Metaspace", "replacement": "▁", "add_prefix_space": false});
        assert!(super::super::from_json(&v).is_err());
    }
}
