//! The configurable splitters: Split (string or Oniguruma regex), Punctuation, Digits,
//! CharDelimiterSplit, FixedLength.

use super::bert::{is_bert_punctuation, split_by_class, Class};
use super::PreTokenizer;
use crate::error::{Error, Result};
use crate::normalizers::config::Obj;
use crate::normalizers::replace::TextPattern;
use crate::text::unicode;
use crate::text::{CharPredicate, Invert, PreTokenizedString, SplitBehavior};

/// Split on a pattern; `invert` splits on what does NOT match.
pub struct Split {
    pattern: TextPattern,
    pub behavior: SplitBehavior,
    pub invert: bool,
}

impl Split {
    pub fn new(
        is_regex: bool,
        pattern: &str,
        behavior: SplitBehavior,
        invert: bool,
    ) -> Result<Self> {
        Ok(Split {
            pattern: TextPattern::new(is_regex, pattern)?,
            behavior,
            invert,
        })
    }

    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        let (is_regex, p) = o.req_pattern("pattern")?;
        let behavior = o
            .opt_behavior("behavior")?
            .ok_or_else(|| Error::invalid("pre-tokenizer `Split`: missing field `behavior`"))?;
        let invert = o.req_bool("invert")?;
        Split::new(is_regex, p, behavior, invert)
            .map_err(|e| Error::invalid(format!("pre-tokenizer `Split`: field `pattern`: {e}")))
    }
}

impl PreTokenizer for Split {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        if self.invert {
            pts.split(|_, n| n.split(&Invert(&self.pattern), self.behavior))
        } else {
            pts.split(|_, n| n.split(&self.pattern, self.behavior))
        }
    }
}

/// Split on punctuation (as BERT defines it) with the given behavior (default Isolated).
pub struct Punctuation {
    pub behavior: SplitBehavior,
}

impl Punctuation {
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        Ok(Punctuation {
            behavior: o
                .opt_behavior("behavior")?
                .unwrap_or(SplitBehavior::Isolated),
        })
    }
}

impl PreTokenizer for Punctuation {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        if self.behavior == SplitBehavior::Isolated {
            return pts.split(|_, n| {
                split_by_class(&n, |c| {
                    if is_bert_punctuation(c) {
                        Class::Alone
                    } else {
                        Class::Run(0)
                    }
                })
            });
        }
        pts.split(|_, n| n.split(&CharPredicate(is_bert_punctuation), self.behavior))
    }
}

/// Split off numbers (`char::is_numeric`): each digit alone, or runs of digits.
pub struct Digits {
    pub individual_digits: bool,
}

impl Digits {
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        Ok(Digits {
            individual_digits: o.req_bool("individual_digits")?,
        })
    }
}

impl PreTokenizer for Digits {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        let individual = self.individual_digits;
        pts.split(|_, n| {
            split_by_class(&n, |c| match (unicode::is_numeric(c), individual) {
                (true, true) => Class::Alone,
                (true, false) => Class::Run(1),
                (false, _) => Class::Run(0),
            })
        })
    }
}

/// Split on one character, dropping it.
pub struct CharDelimiterSplit {
    pub delimiter: char,
}

impl CharDelimiterSplit {
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        Ok(CharDelimiterSplit {
            delimiter: o.req_char("delimiter")?,
        })
    }
}

impl PreTokenizer for CharDelimiterSplit {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        let d = self.delimiter;
        pts.split(|_, n| split_by_class(&n, |c| if c == d { Class::Drop } else { Class::Run(0) }))
    }
}

/// Cut the text into pieces of `length` characters (default 5).
pub struct FixedLength {
    pub length: usize,
}

impl FixedLength {
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        let length = match o.get("length") {
            None => 5,
            Some(v) => v
                .as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .ok_or_else(|| o.bad("length", "a non-negative integer"))?,
        };
        Ok(FixedLength { length })
    }
}

impl PreTokenizer for FixedLength {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        if self.length == 0 {
            // The reference panics on chunks of 0; refuse instead.
            return Err(Error::invalid(
                "pre-tokenizer `FixedLength`: length must be > 0",
            ));
        }
        let len = self.length;
        pts.split(|_, n| {
            let text = n.get();
            let mut out = Vec::new();
            let mut start = 0;
            let mut count = 0;
            for (b, c) in text.char_indices() {
                if count == len {
                    out.push(n.slice(start..b).ok_or_else(|| Error::other("bad chunk"))?);
                    start = b;
                    count = 0;
                }
                count += 1;
                let _ = c;
            }
            if count > 0 {
                out.push(
                    n.slice(start..text.len())
                        .ok_or_else(|| Error::other("bad chunk"))?,
                );
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pieces;
    use serde_json::json;

    fn texts(v: serde_json::Value, s: &str) -> Vec<String> {
        pieces(v, s).into_iter().map(|p| p.0).collect()
    }

    #[test]
    fn digits_runs_or_single() {
        let v = json!({"type": "Digits", "individual_digits": false});
        assert_eq!(texts(v, "a12b3"), vec!["a", "12", "b", "3"]);
        let v = json!({"type": "Digits", "individual_digits": true});
        assert_eq!(texts(v, "a12"), vec!["a", "1", "2"]);
    }

    #[test]
    fn punctuation_behaviors() {
        let v = json!({"type": "Punctuation"});
        assert_eq!(texts(v, "a,,b"), vec!["a", ",", ",", "b"]);
        let v = json!({"type": "Punctuation", "behavior": "Contiguous"});
        assert_eq!(texts(v, "a,,b"), vec!["a", ",,", "b"]);
        let v = json!({"type": "Punctuation", "behavior": "MergedWithPrevious"});
        assert_eq!(texts(v, "a,b"), vec!["a,", "b"]);
    }

    #[test]
    fn split_regex_invert_and_literal() {
        let v = json!({"type": "Split", "pattern": {"Regex": "\\p{L}+"},
                       "behavior": "Removed", "invert": true});
        assert_eq!(texts(v, "ab 12cd"), vec!["ab", "cd"]);
        let v = json!({"type": "Split", "pattern": {"String": "-"},
                       "behavior": "MergedWithNext", "invert": false});
        assert_eq!(texts(v, "a-b-"), vec!["a", "-b", "-"]);
    }

    #[test]
    fn delimiter_and_fixed_length() {
        let v = json!({"type": "CharDelimiterSplit", "delimiter": "x"});
        assert_eq!(texts(v, "axxbx"), vec!["a", "b"]);
        let v = json!({"type": "FixedLength", "length": 2});
        assert_eq!(texts(v, "abcdé"), vec!["ab", "cd", "é"]);
    }
}
