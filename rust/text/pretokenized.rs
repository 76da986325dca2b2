//! The text of one input sequence on its way through the pipeline: a list of splits, each a
//! `NormalizedString`, some already turned into tokens (added tokens), the others waiting for
//! the pre-tokenizer and the model.

use super::normalized::NormalizedString;
use crate::error::Result;
use crate::models::Token;

#[derive(Debug, Clone)]
pub struct Split {
    pub normalized: NormalizedString,
    pub tokens: Option<Vec<Token>>,
}

impl From<NormalizedString> for Split {
    fn from(normalized: NormalizedString) -> Self {
        Split {
            normalized,
            tokens: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct PreTokenizedString {
    pub splits: Vec<Split>,
}

impl PreTokenizedString {
    pub fn from_splits(splits: Vec<Split>) -> Self {
        PreTokenizedString { splits }
    }

    /// Replace every split that has no tokens yet by what `f` makes of it (its index among the
    /// current splits is passed too). Empty results are dropped, as the reference drops them.
    pub fn split<F, I>(&mut self, mut f: F) -> Result<()>
    where
        F: FnMut(usize, NormalizedString) -> Result<I>,
        I: IntoIterator<Item = NormalizedString>,
    {
        let mut out = Vec::with_capacity(self.splits.len());
        for (i, s) in std::mem::take(&mut self.splits).into_iter().enumerate() {
            if s.tokens.is_some() {
                out.push(s);
                continue;
            }
            for n in f(i, s.normalized)? {
                if !n.is_empty() {
                    out.push(Split {
                        normalized: n,
                        tokens: None,
                    });
                }
            }
        }
        self.splits = out;
        Ok(())
    }

    /// Apply `f` to each split that has no tokens yet.
    pub fn normalize(&mut self, f: impl Fn(&mut NormalizedString) -> Result<()>) -> Result<()> {
        for s in self.splits.iter_mut().filter(|s| s.tokens.is_none()) {
            f(&mut s.normalized)?;
        }
        Ok(())
    }
}

/// Byte offsets in the original input → code point offsets, with the reference's rules for
/// offsets that fall at the very end.
pub struct ByteToCharOffsets {
    /// For each byte of the input, the index of the char it belongs to; empty for ASCII
    /// input, where bytes are code points.
    map: Vec<u32>,
    /// The input's length in bytes.
    len: usize,
}

impl ByteToCharOffsets {
    pub fn new(s: &str) -> Self {
        let mut map = Vec::new();
        if !s.is_ascii() {
            map.reserve(s.len());
            for (i, c) in s.chars().enumerate() {
                map.extend(std::iter::repeat_n(i as u32, c.len_utf8()));
            }
        }
        ByteToCharOffsets { map, len: s.len() }
    }

    /// The char that byte `b` belongs to; `None` past the input.
    #[inline]
    fn char_at(&self, b: usize) -> Option<usize> {
        if self.map.is_empty() {
            (b < self.len).then_some(b)
        } else {
            self.map.get(b).map(|&c| c as usize)
        }
    }

    /// `None` when the start is not inside the text (the caller then keeps the byte offsets,
    /// as the reference does). An end past the text is one past the char before it, or
    /// `start + 2` when that char is past the text too.
    pub fn convert(&self, (s, e): (usize, usize)) -> Option<(usize, usize)> {
        let start = self.char_at(s)?;
        match self.char_at(e) {
            Some(end) => Some((start, end)),
            None => {
                let last = e
                    .checked_sub(1)
                    .and_then(|i| self.char_at(i))
                    .unwrap_or(start + 1);
                Some((start, last + 1))
            }
        }
    }
}
