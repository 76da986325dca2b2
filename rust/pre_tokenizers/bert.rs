//! The character-class splitters: BertPreTokenizer, Whitespace, WhitespaceSplit. Each is one
//! pass over the characters with no regex engine; the pieces are exactly the ones the
//! reference's chained `split` calls produce (slicing a slice equals slicing once).

use super::tables;
use super::PreTokenizer;
use crate::error::{Error, Result};
use crate::text::unicode;
use crate::text::{NormalizedString, PreTokenizedString};
use unicode_categories::UnicodeCategories;

/// How a character takes part in a split.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A delimiter that is dropped.
    Drop,
    /// A delimiter that becomes a piece of its own.
    Alone,
    /// Part of a run of characters of the same kind.
    Run(u8),
}

fn slice(n: &NormalizedString, s: usize, e: usize) -> Result<NormalizedString> {
    n.slice(s..e)
        .ok_or_else(|| Error::other(format!("bad split range {s}..{e}")))
}

/// Split `n` into maximal runs of same-kind characters, single `Alone` characters, dropping
/// `Drop` characters.
pub(crate) fn split_by_class(
    n: &NormalizedString,
    class: impl Fn(char) -> Class,
) -> Result<Vec<NormalizedString>> {
    let s = n.get();
    let mut out = Vec::new();
    let mut run: Option<(usize, u8)> = None;
    for (b, c) in s.char_indices() {
        let k = class(c);
        if let (Some((_, cur)), Class::Run(x)) = (run, k) {
            if cur == x {
                continue;
            }
        }
        if let Some((start, _)) = run.take() {
            out.push(slice(n, start, b)?);
        }
        match k {
            Class::Drop => {}
            Class::Alone => out.push(slice(n, b, b + c.len_utf8())?),
            Class::Run(x) => run = Some((b, x)),
        }
    }
    if let Some((start, _)) = run {
        out.push(slice(n, start, s.len())?);
    }
    Ok(out)
}

/// Punctuation for BERT and the Punctuation pre-tokenizer: ASCII punctuation (which includes
/// symbols like `$`, `+`, `^`) or a Unicode P* category (unicode_categories 0.1.1).
#[inline]
pub fn is_bert_punctuation(c: char) -> bool {
    if c.is_ascii() {
        // Every ASCII P* character is also ASCII punctuation.
        return c.is_ascii_punctuation();
    }
    c.is_punctuation()
}

/// Split on whitespace (removed), then isolate each punctuation character.
#[derive(Debug, Clone, Copy)]
pub struct BertPreTokenizer;

impl PreTokenizer for BertPreTokenizer {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        pts.split(|_, n| {
            split_by_class(&n, |c| {
                if unicode::is_whitespace(c) {
                    Class::Drop
                } else if is_bert_punctuation(c) {
                    Class::Alone
                } else {
                    Class::Run(0)
                }
            })
        })
    }
}

/// The pieces of the regex `\w+|[^\w\s]+` (the `regex` crate's Unicode classes, measured from
/// the reference): runs of word characters and runs of other non-space characters.
#[derive(Debug, Clone, Copy)]
pub struct Whitespace;

impl PreTokenizer for Whitespace {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        pts.split(|_, n| {
            split_by_class(&n, |c| {
                if tables::is_regex_word(c) {
                    Class::Run(0)
                } else if tables::is_regex_space(c) {
                    Class::Drop
                } else {
                    Class::Run(1)
                }
            })
        })
    }
}

/// Split on `char::is_whitespace`, dropping the whitespace.
#[derive(Debug, Clone, Copy)]
pub struct WhitespaceSplit;

impl PreTokenizer for WhitespaceSplit {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        pts.split(|_, n| {
            split_by_class(&n, |c| {
                if unicode::is_whitespace(c) {
                    Class::Drop
                } else {
                    Class::Run(0)
                }
            })
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
    fn bert_isolates_punctuation_and_drops_whitespace() {
        let p = pieces(json!({"type": "BertPreTokenizer"}), "Hey, you$2\u{3000}é!");
        let t: Vec<&str> = p.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(t, vec!["Hey", ",", "you", "$", "2", "é", "!"]);
        // "é" follows 10 ASCII bytes and U+3000 (3 bytes): bytes 13..15.
        assert_eq!(p[5].1, (13, 15));
    }

    #[test]
    fn whitespace_groups_word_and_symbol_runs() {
        assert_eq!(
            texts(json!({"type": "Whitespace"}), "a_b1 ..!x\t+-"),
            vec!["a_b1", "..!", "x", "+-"]
        );
    }

    #[test]
    fn whitespace_split_keeps_punctuation() {
        assert_eq!(
            texts(json!({"type": "WhitespaceSplit"}), " a.b\u{a0}c\n"),
            vec!["a.b", "c"]
        );
    }
}
