//! A string that remembers, byte by byte, where each part came from in the original input.
//!
//! The alignment rules (how an inserted, replaced or removed character is aligned) follow the
//! observable behaviour of `tokenizers` 0.22.1 exactly, because every offset a user sees is
//! derived from them. Each byte of `normalized` carries the `(start, end)` byte range of the
//! original text it stands for, relative to this string's own original slice; `original_shift`
//! places that slice in the whole input.

use crate::error::{Error, Result};
use std::ops::Range;

/// How a split treats the delimiter it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitBehavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

impl SplitBehavior {
    pub fn from_name(name: &str) -> Result<Self> {
        Ok(match name {
            "Removed" => SplitBehavior::Removed,
            "Isolated" => SplitBehavior::Isolated,
            "MergedWithPrevious" => SplitBehavior::MergedWithPrevious,
            "MergedWithNext" => SplitBehavior::MergedWithNext,
            "Contiguous" => SplitBehavior::Contiguous,
            other => return Err(Error::invalid(format!("unknown split behavior `{other}`"))),
        })
    }
}

/// Something that finds matches in a string: the result covers the whole input with
/// `((start, end), is_match)` pieces, in order.
pub trait Pattern {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>>;
}

impl<P: Pattern> Pattern for &P {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        (*self).find_matches(inside)
    }
}

/// Matches every character for which the predicate holds, one character per match.
pub struct CharPredicate<F: Fn(char) -> bool>(pub F);

impl<F: Fn(char) -> bool> Pattern for CharPredicate<F> {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        if inside.is_empty() {
            return Ok(vec![((0, 0), false)]);
        }
        let mut out = Vec::new();
        let mut last = 0;
        for (b, c) in inside.char_indices() {
            if (self.0)(c) {
                if last < b {
                    out.push(((last, b), false));
                }
                let e = b + c.len_utf8();
                out.push(((b, e), true));
                last = e;
            }
        }
        if last < inside.len() {
            out.push(((last, inside.len()), false));
        }
        Ok(out)
    }
}

impl Pattern for char {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        let c = *self;
        CharPredicate(move |x| x == c).find_matches(inside)
    }
}

/// A literal string, matched left to right without overlap.
impl Pattern for &str {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        if self.is_empty() {
            // The reference reports the whole input as one non-match, measured in characters.
            return Ok(vec![((0, inside.chars().count()), false)]);
        }
        if inside.is_empty() {
            return Ok(vec![((0, 0), false)]);
        }
        let mut out = Vec::new();
        let mut prev = 0;
        for (start, m) in inside.match_indices(*self) {
            if prev != start {
                out.push(((prev, start), false));
            }
            out.push(((start, start + m.len()), true));
            prev = start + m.len();
        }
        if prev != inside.len() {
            out.push(((prev, inside.len()), false));
        }
        Ok(out)
    }
}

/// Turn a list of match ranges (sorted, non-overlapping) into the full covering list.
pub fn matches_from_ranges(
    inside: &str,
    ranges: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<((usize, usize), bool)> {
    if inside.is_empty() {
        return vec![((0, 0), false)];
    }
    let mut out = Vec::new();
    let mut prev = 0;
    for (s, e) in ranges {
        if prev != s {
            out.push(((prev, s), false));
        }
        out.push(((s, e), true));
        prev = e;
    }
    if prev != inside.len() {
        out.push(((prev, inside.len()), false));
    }
    out
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NormalizedString {
    /// Length in bytes of the original slice this string stands for.
    original_len: usize,
    normalized: String,
    /// One entry per byte of `normalized`: the original byte range, relative to the slice.
    alignments: Vec<(usize, usize)>,
    /// Where the original slice starts in the whole input.
    original_shift: usize,
}

impl From<&str> for NormalizedString {
    fn from(s: &str) -> Self {
        NormalizedString::new(s, 0)
    }
}

impl NormalizedString {
    /// A fresh string for `s`, which starts at byte `shift` of the whole input.
    pub fn new(s: &str, shift: usize) -> Self {
        let mut alignments = Vec::with_capacity(s.len());
        for (b, c) in s.char_indices() {
            let l = c.len_utf8();
            alignments.extend(std::iter::repeat_n((b, b + l), l));
        }
        NormalizedString {
            original_len: s.len(),
            normalized: s.to_owned(),
            alignments,
            original_shift: shift,
        }
    }

    pub fn get(&self) -> &str {
        &self.normalized
    }
    pub fn len(&self) -> usize {
        self.normalized.len()
    }
    pub fn is_empty(&self) -> bool {
        self.normalized.is_empty()
    }
    pub fn len_original(&self) -> usize {
        self.original_len
    }
    pub fn alignments(&self) -> &[(usize, usize)] {
        &self.alignments
    }
    /// The original byte range (in the whole input) this string stands for.
    pub fn offsets_original(&self) -> (usize, usize) {
        (self.original_shift, self.original_shift + self.original_len)
    }

    /// Map a range of the normalized string to a range of the original slice (relative).
    /// An empty range is returned unchanged, as the reference does.
    pub fn convert_normalized_range(&self, r: Range<usize>) -> Option<Range<usize>> {
        if r.start == r.end {
            return Some(r);
        }
        if r.start > r.end {
            return None;
        }
        let a = self.alignments.get(r)?;
        let first = a.first()?;
        let last = a.last()?;
        Some(first.0..last.1)
    }

    /// Map a range of the original slice (relative) to the normalized string.
    pub fn convert_original_range(&self, target: Range<usize>) -> Option<Range<usize>> {
        if target.start == target.end {
            return Some(target);
        }
        if target.start > target.end {
            return None;
        }
        if self.original_len == 0 && target == (0..0) {
            return Some(0..self.len());
        }
        let (mut start, mut end) = (None, None);
        for (i, al) in self.alignments.iter().enumerate() {
            if target.end < al.1 {
                break;
            }
            if start.is_none() && target.start <= al.0 && al.0 != al.1 {
                start = Some(i);
            }
            end = Some(i + 1);
        }
        match (start, end) {
            (Some(s), None) => Some(s..s),
            (None, Some(e)) => Some(e..e),
            (Some(s), Some(e)) => Some(s..e),
            _ => None,
        }
    }

    /// A sub-string for a normalized byte range (on char boundaries); its alignments are rebased
    /// on the original range it covers.
    pub fn slice(&self, r: Range<usize>) -> Option<NormalizedString> {
        if r.start > r.end
            || r.end > self.len()
            || !self.normalized.is_char_boundary(r.start)
            || !self.normalized.is_char_boundary(r.end)
        {
            return None;
        }
        let orig = self.convert_normalized_range(r.clone())?;
        let shift = orig.start;
        Some(NormalizedString {
            original_len: orig.end.saturating_sub(orig.start),
            normalized: self.normalized[r.clone()].to_owned(),
            alignments: self.alignments[r]
                .iter()
                .map(|&(s, e)| (s.wrapping_sub(shift), e.wrapping_sub(shift)))
                .collect(),
            original_shift: self.original_shift + shift,
        })
    }

    /// The string `slice` would cut out of a parent whose normalized bytes were `text`, aligned
    /// byte by byte to `alignments` (relative to the parent's original slice, which starts at
    /// `parent_shift`): alignments rebased on the original range the piece covers. Lets a
    /// pre-tokenizer build its pieces in one pass instead of rewriting and then slicing.
    pub fn from_aligned_piece(
        text: String,
        mut alignments: Vec<(usize, usize)>,
        parent_shift: usize,
    ) -> NormalizedString {
        let (start, end) = match (alignments.first(), alignments.last()) {
            (Some(f), Some(l)) => (f.0, l.1),
            _ => (0, 0),
        };
        for a in &mut alignments {
            *a = (a.0.wrapping_sub(start), a.1.wrapping_sub(start));
        }
        NormalizedString {
            original_len: end.saturating_sub(start),
            normalized: text,
            alignments,
            original_shift: parent_shift + start,
        }
    }

    /// Replace the normalized range `r` by the characters of `dest`, each with its change:
    /// `1` an inserted character, `0` a replacement of one existing character, `-n` a
    /// replacement that also removes the `n` characters after it. `initial_offset` characters
    /// at the start of the range are removed before anything else.
    pub fn transform_range<I>(&mut self, r: Range<usize>, dest: I, initial_offset: usize)
    where
        I: IntoIterator<Item = (char, isize)>,
    {
        let mut replaced = self.normalized[r.clone()].chars();
        let initial_removed: usize = (&mut replaced)
            .take(initial_offset)
            .map(char::len_utf8)
            .sum();
        let mut offset = r.start + initial_removed;
        let mut new_align = Vec::with_capacity(r.len());
        let mut new_text = String::with_capacity(r.len());
        for (c, change) in dest {
            let align = if change > 0 {
                if offset < 1 {
                    (0, 0)
                } else {
                    self.alignments[offset - 1]
                }
            } else {
                self.alignments.get(offset).copied().unwrap_or((0, 0))
            };
            if change <= 0 {
                if let Some(rc) = replaced.next() {
                    offset += rc.len_utf8();
                }
            }
            if change < 0 {
                let removed: usize = (&mut replaced)
                    .take((-change) as usize)
                    .map(char::len_utf8)
                    .sum();
                offset += removed;
            }
            new_align.extend(std::iter::repeat_n(align, c.len_utf8()));
            new_text.push(c);
        }
        self.alignments.splice(r.clone(), new_align);
        self.normalized.replace_range(r, &new_text);
    }

    /// `transform_range` over the range the whole original slice maps to, as the reference's
    /// `transform` does.
    pub fn transform<I>(&mut self, dest: I, initial_offset: usize)
    where
        I: IntoIterator<Item = (char, isize)>,
    {
        let r = self.whole_original_range();
        self.transform_range(r, dest, initial_offset);
    }

    /// The normalized range of the whole original slice. It is all of the string unless the
    /// string starts with characters inserted before the input (aligned to an empty span at 0):
    /// a piece made only of those has an empty original, so a whole-string rewrite inserts its
    /// result before them and keeps them (the reference does; where some of the piece is
    /// original, the reference panics).
    pub fn whole_original_range(&self) -> Range<usize> {
        match self.alignments.first() {
            _ if self.original_len == 0 => 0..0,
            Some(&(s, e)) if s != e => 0..self.len(),
            _ => self
                .convert_original_range(0..self.original_len)
                .unwrap_or(0..self.len()),
        }
    }

    // Each normal form is skipped when the quick check says the text is already in it: the
    // rewrite would then give every char back with change 0, an identity on the alignments.
    pub fn nfd(&mut self) -> &mut Self {
        use unicode_normalization_alignments::{is_nfd_quick, IsNormalized, UnicodeNormalization};
        if is_nfd_quick(self.normalized.chars()) != IsNormalized::Yes {
            let t: Vec<(char, isize)> = self.normalized.nfd().collect();
            self.transform(t, 0);
        }
        self
    }
    pub fn nfkd(&mut self) -> &mut Self {
        use unicode_normalization_alignments::{is_nfkd_quick, IsNormalized, UnicodeNormalization};
        if is_nfkd_quick(self.normalized.chars()) != IsNormalized::Yes {
            let t: Vec<(char, isize)> = self.normalized.nfkd().collect();
            self.transform(t, 0);
        }
        self
    }
    pub fn nfc(&mut self) -> &mut Self {
        use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};
        if is_nfc_quick(self.normalized.chars()) != IsNormalized::Yes {
            let t: Vec<(char, isize)> = self.normalized.nfc().collect();
            self.transform(t, 0);
        }
        self
    }
    pub fn nfkc(&mut self) -> &mut Self {
        use unicode_normalization_alignments::{is_nfkc_quick, IsNormalized, UnicodeNormalization};
        if is_nfkc_quick(self.normalized.chars()) != IsNormalized::Yes {
            let t: Vec<(char, isize)> = self.normalized.nfkc().collect();
            self.transform(t, 0);
        }
        self
    }

    /// Keep only the characters for which `keep` holds.
    pub fn filter(&mut self, keep: impl Fn(char) -> bool) -> &mut Self {
        let mut removed: isize = 0;
        let mut removed_start = 0usize;
        let mut t = Vec::with_capacity(self.normalized.len());
        let mut last: Option<char> = None;
        for c in self.normalized.chars() {
            if keep(c) {
                match last {
                    Some(lc) => t.push((lc, -removed)),
                    None => removed_start = removed as usize,
                }
                last = Some(c);
                removed = 0;
            } else {
                removed += 1;
            }
        }
        if let Some(lc) = last {
            t.push((lc, -removed));
        }
        self.transform(t, removed_start);
        self
    }

    pub fn prepend(&mut self, s: &str) -> &mut Self {
        if let Some(next) = self.normalized.chars().next() {
            let t: Vec<(char, isize)> = s
                .chars()
                .enumerate()
                .map(|(i, c)| (c, isize::from(i != 0)))
                .chain(std::iter::once((next, 1)))
                .collect();
            self.transform_range(0..next.len_utf8(), t, 0);
        }
        self
    }

    pub fn append(&mut self, s: &str) -> &mut Self {
        if let Some((b, prev)) = self.normalized.char_indices().last() {
            let t: Vec<(char, isize)> = std::iter::once((prev, 0))
                .chain(s.chars().map(|c| (c, 1)))
                .collect();
            let len = self.len();
            self.transform_range(b..len, t, 0);
        } else {
            let t: Vec<(char, isize)> = s.chars().map(|c| (c, 1)).collect();
            self.transform_range(0..0, t, 0);
        }
        self
    }

    pub fn map(&mut self, f: impl Fn(char) -> char) -> &mut Self {
        self.rewrite_chars(|c, out| out(f(c)));
        self
    }

    pub fn lowercase(&mut self) -> &mut Self {
        if self.normalized.is_ascii() {
            // ASCII lowercases to ASCII of the same length: alignments are unchanged.
            self.normalized.make_ascii_lowercase();
            return self;
        }
        if !self.normalized.chars().any(|c| {
            let mut l = super::unicode::to_lowercase(c);
            l.next() != Some(c) || l.next().is_some()
        }) {
            return self;
        }
        self.rewrite_chars(|c, out| {
            for l in super::unicode::to_lowercase(c) {
                out(l);
            }
        });
        self
    }

    /// Replace each character by the characters `f` emits, every one of them aligned to the
    /// character it came from. This is what `transform` makes of `(first, 0), (next, 1)...`
    /// per character (an insertion copies the alignment of the byte before it, which belongs
    /// to the same source character), done in one pass without the change list.
    fn rewrite_chars(&mut self, mut f: impl FnMut(char, &mut dyn FnMut(char))) {
        let mut text = String::with_capacity(self.normalized.len());
        let mut align = Vec::with_capacity(self.alignments.len());
        let mut changed = false;
        for (b, c) in self.normalized.char_indices() {
            let a = self.alignments[b];
            let before = text.len();
            let mut n = 0;
            f(c, &mut |x: char| {
                text.push(x);
                n += 1;
                if n > 1 || x != c {
                    changed = true;
                }
            });
            if n == 0 {
                changed = true;
            }
            align.extend(std::iter::repeat_n(a, text.len() - before));
        }
        if changed {
            self.normalized = text;
            self.alignments = align;
        }
    }

    pub fn uppercase(&mut self) -> &mut Self {
        let mut t = Vec::with_capacity(self.normalized.len());
        for c in self.normalized.chars() {
            for (i, u) in c.to_uppercase().enumerate() {
                t.push((u, isize::from(i > 0)));
            }
        }
        self.transform(t, 0);
        self
    }

    /// Replace every match of `pattern` by `content`. Each inserted character takes the
    /// alignment of the byte before the match (or `(0, 0)` at the very start).
    pub fn replace(&mut self, pattern: &impl Pattern, content: &str) -> Result<()> {
        let matches = pattern.find_matches(&self.normalized)?;
        let mut text = String::with_capacity(self.normalized.len());
        let mut align = Vec::with_capacity(self.alignments.len());
        let mut last_end = 0;
        for ((start, end), is_match) in matches {
            if !is_match {
                continue;
            }
            text.push_str(&self.normalized[last_end..start]);
            align.extend_from_slice(&self.alignments[last_end..start]);
            let a = if end > start && end >= 1 {
                // The whole matched range is removed first, so inserted chars align to the
                // byte just before the match's end.
                self.alignments[end - 1]
            } else if start >= 1 {
                self.alignments[start - 1]
            } else {
                (0, 0)
            };
            for c in content.chars() {
                align.extend(std::iter::repeat_n(a, c.len_utf8()));
                text.push(c);
            }
            last_end = end;
        }
        text.push_str(&self.normalized[last_end..]);
        align.extend_from_slice(&self.alignments[last_end..]);
        self.normalized = text;
        self.alignments = align;
        Ok(())
    }

    /// Split on `pattern`, treating the delimiters as `behavior` says. Empty pieces are kept
    /// here; `PreTokenizedString::split` drops them.
    pub fn split(
        &self,
        pattern: &impl Pattern,
        behavior: SplitBehavior,
    ) -> Result<Vec<NormalizedString>> {
        let matches = pattern.find_matches(&self.normalized)?;
        let pieces: Vec<((usize, usize), bool)> = match behavior {
            SplitBehavior::Isolated => matches.into_iter().map(|(o, _)| (o, false)).collect(),
            SplitBehavior::Removed => matches,
            SplitBehavior::Contiguous => {
                let mut prev = false;
                let mut acc: Vec<((usize, usize), bool)> = Vec::new();
                for (o, m) in matches {
                    if m == prev {
                        if let Some(((_, e), _)) = acc.last_mut() {
                            *e = o.1;
                        } else {
                            acc.push((o, false));
                        }
                    } else {
                        acc.push((o, false));
                    }
                    prev = m;
                }
                acc
            }
            SplitBehavior::MergedWithPrevious => {
                let mut prev = false;
                let mut acc: Vec<((usize, usize), bool)> = Vec::new();
                for (o, m) in matches {
                    if m && !prev {
                        if let Some(((_, e), _)) = acc.last_mut() {
                            *e = o.1;
                        } else {
                            acc.push((o, false));
                        }
                    } else {
                        acc.push((o, false));
                    }
                    prev = m;
                }
                acc
            }
            SplitBehavior::MergedWithNext => {
                let mut prev = false;
                let mut acc: Vec<((usize, usize), bool)> = Vec::new();
                for (o, m) in matches.into_iter().rev() {
                    if m && !prev {
                        if let Some(((s, _), _)) = acc.last_mut() {
                            *s = o.0;
                        } else {
                            acc.push((o, false));
                        }
                    } else {
                        acc.push((o, false));
                    }
                    prev = m;
                }
                acc.reverse();
                acc
            }
        };
        let mut out = Vec::with_capacity(pieces.len());
        for ((s, e), remove) in pieces {
            if remove {
                continue;
            }
            let piece = self
                .slice(s..e)
                .ok_or_else(|| Error::other(format!("bad split range {s}..{e}")))?;
            out.push(piece);
        }
        Ok(out)
    }

    pub fn lstrip(&mut self) -> &mut Self {
        self.lrstrip(true, false)
    }
    pub fn rstrip(&mut self) -> &mut Self {
        self.lrstrip(false, true)
    }
    pub fn strip(&mut self) -> &mut Self {
        self.lrstrip(true, true)
    }

    fn lrstrip(&mut self, left: bool, right: bool) -> &mut Self {
        let leading = if left {
            self.normalized
                .chars()
                .take_while(|c| super::unicode::is_whitespace(*c))
                .count()
        } else {
            0
        };
        let trailing = if right {
            self.normalized
                .chars()
                .rev()
                .take_while(|c| super::unicode::is_whitespace(*c))
                .count()
        } else {
            0
        };
        if leading > 0 || trailing > 0 {
            let count = self.normalized.chars().count();
            // The reference compares a char index with a *byte* length here; kept for parity.
            let last_kept = self.len().wrapping_sub(trailing).wrapping_sub(1);
            let t: Vec<(char, isize)> = self
                .normalized
                .chars()
                .enumerate()
                .filter_map(|(i, c)| {
                    if i < leading || i >= count - trailing {
                        None
                    } else if i == last_kept {
                        Some((c, -(trailing as isize)))
                    } else {
                        Some((c, 0))
                    }
                })
                .collect();
            self.transform(t, leading);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercase_keeps_alignment() {
        let mut n = NormalizedString::from("AbC");
        n.lowercase();
        assert_eq!(n.get(), "abc");
        assert_eq!(n.convert_normalized_range(1..3), Some(1..3));
    }

    #[test]
    fn whole_rewrite_of_a_piece_with_no_original_inserts_before_it() {
        // Two characters inserted before the input: their piece covers no original text.
        let mut n = NormalizedString::from_aligned_piece("ab".into(), vec![(0, 0); 2], 0);
        assert_eq!(n.whole_original_range(), 0..0);
        n.transform([('X', 0), ('Y', 0)], 0);
        assert_eq!(n.get(), "XYab");
        assert_eq!(n.alignments(), &[(0, 0); 4]);
        // With an original character first, the rewrite covers the whole string.
        let mut m = NormalizedString::from("ab");
        assert_eq!(m.whole_original_range(), 0..2);
        m.transform([('X', 0), ('Y', 0)], 0);
        assert_eq!(m.get(), "XY");
    }

    #[test]
    fn prepend_takes_first_char_alignment() {
        let mut n = NormalizedString::new("hé", 4);
        n.prepend("▁");
        assert_eq!(n.get(), "▁hé");
        assert_eq!(n.convert_normalized_range(0..3), Some(0..1));
        assert_eq!(n.offsets_original(), (4, 7));
    }

    #[test]
    fn filter_removes_and_realigns() {
        let mut n = NormalizedString::from("a\u{0}b");
        n.filter(|c| c != '\u{0}');
        assert_eq!(n.get(), "ab");
        assert_eq!(n.convert_normalized_range(0..2), Some(0..3));
    }

    #[test]
    fn split_isolated_and_removed() {
        let n = NormalizedString::from("a b");
        let parts = n.split(&' ', SplitBehavior::Removed).unwrap();
        let texts: Vec<&str> = parts.iter().map(|p| p.get()).collect();
        assert_eq!(texts, vec!["a", "b"]);
        assert_eq!(parts[1].offsets_original(), (2, 3));
        let parts = n.split(&' ', SplitBehavior::Isolated).unwrap();
        assert_eq!(parts.len(), 3);
    }

    #[test]
    fn nfd_decomposes_with_alignment() {
        let mut n = NormalizedString::from("é");
        n.nfd();
        assert_eq!(n.get(), "e\u{301}");
        assert_eq!(n.convert_normalized_range(1..3), Some(0..2));
    }
}
