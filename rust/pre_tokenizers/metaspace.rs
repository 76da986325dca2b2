//! Metaspace: spaces become the replacement character (default `▁`), a replacement is put in
//! front of the word as the prepend scheme says, and the text is split before each
//! replacement character.

use super::bert::{split_by_class, Class};
use super::PreTokenizer;
use crate::error::{Error, Result};
use crate::normalizers::config::Obj;
use crate::text::{NormalizedString, PreTokenizedString, SplitBehavior};

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

impl PreTokenizer for Metaspace {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        pts.split(|_, mut n| {
            self.rewrite(&mut n)?;
            if !self.split {
                return Ok(vec![n]);
            }
            let r = self.replacement;
            if n.get().chars().skip(1).any(|c| c == r) {
                n.split(&r, SplitBehavior::MergedWithNext)
            } else {
                // No replacement after the first char: the whole split is one piece.
                split_by_class(&n, |_| Class::Run(0))
            }
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
    fn legacy_add_prefix_space_false_needs_never() {
        let v = json!({"type": "Metaspace", "replacement": "▁", "add_prefix_space": false});
        assert!(super::super::from_json(&v).is_err());
    }
}
