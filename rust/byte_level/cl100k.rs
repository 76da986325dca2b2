//! The cl100k_base split (tiktoken's regex, as [`ONIG_PATTERN`] runs it) written by hand:
//!
//! ```text
//! '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ' '?[^\s\p{L}\p{N}]++[\r\n]*+
//! | \s++\z | \s*[\r\n] | \s+(?!\S) | \s
//! ```
//!
//! Each alternative is tried in order at the match start, as the regex engine does; the
//! character classes are the ones the GPT-2 split uses (Oniguruma's, like the regex path).
//!
//! Llama 3's pattern ([`LLAMA3_PATTERN`]) is the same split but at the end of the text: it
//! has no `\s++\z`, so trailing white space with a newline in it ends at the last newline
//! (`\s*[\r\n]+`) and the rest is a match of its own; `match_end_with::<false>` scans it.

use super::{class, Class};

/// The pattern tiktoken publishes for cl100k_base, translated for Oniguruma
/// (`formats::tiktoken::onig_pattern`); a Split with exactly this regex takes this fast path.
pub const ONIG_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|(?>\p{N}{1,3})| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++\z|\s*[\r\n]|\s+(?!\S)|\s";

/// Llama 3's published pattern (as `formats::tiktoken::onig_pattern` translates it:
/// unchanged). Its other differences from cl100k_base's (the contractions' order, no
/// possessive quantifiers, `[\r\n]+` for `[\r\n]`, `\s+` for `\s`) change no match.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn is_newline(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// The byte just past the run of characters from `from` that satisfy `keep`.
fn run(s: &str, from: usize, keep: impl Fn(char) -> bool) -> usize {
    s.get(from..)
        .and_then(|r| r.char_indices().find(|&(_, c)| !keep(c)))
        .map_or(s.len(), |(i, _)| from + i)
}

/// The end of the contraction `'s 't 'd 'm 'll 've 're` (any case) starting at `pos`.
fn contraction(s: &str, pos: usize) -> Option<usize> {
    let mut it = s.get(pos + 1..)?.chars();
    let a = it.next()?;
    // `(?i:s)` also matches U+017F LATIN SMALL LETTER LONG S (simple case folding).
    if matches!(a, 's' | 'S' | '\u{17F}' | 'd' | 'D' | 'm' | 'M' | 't' | 'T') {
        return Some(pos + 1 + a.len_utf8());
    }
    let b = it.next()?;
    let pair = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    matches!(pair, ('l', 'l') | ('v', 'e') | ('r', 'e')).then_some(pos + 3)
}

/// The end of the cl100k match starting at byte `pos` of `s` (`pos < s.len()`) (the tests'
/// name for `match_end_with::<true>`).
#[cfg(test)]
pub(crate) fn match_end(s: &str, pos: usize) -> usize {
    match_end_with::<true>(s, pos)
}

/// `match_end`, with the `\s++\z` alternative when `END_RUN` (cl100k), without (Llama 3).
pub(crate) fn match_end_with<const END_RUN: bool>(s: &str, pos: usize) -> usize {
    let Some(c) = s.get(pos..).and_then(|r| r.chars().next()) else {
        return s.len();
    };
    let after = pos + c.len_utf8();
    if c == '\'' {
        if let Some(end) = contraction(s, pos) {
            return end;
        }
    }
    let k = class(c);
    // `[^\r\n\p{L}\p{N}]?+\p{L}++`: the optional lead is taken whenever it can be.
    let letters_from = match k {
        Class::Letter => Some(pos),
        Class::Number => None,
        _ if is_newline(c) => None,
        _ => Some(after),
    };
    if let Some(from) = letters_from {
        let end = run(s, from, |x| class(x) == Class::Letter);
        if end > from {
            return end;
        }
    }
    if k == Class::Number {
        let mut end = after;
        for _ in 0..2 {
            match s.get(end..).and_then(|r| r.chars().next()) {
                Some(x) if class(x) == Class::Number => end += x.len_utf8(),
                _ => break,
            }
        }
        return end;
    }
    // ` ?[^\s\p{L}\p{N}]++[\r\n]*+`
    let other_from = if c == ' ' { after } else { pos };
    let other_end = run(s, other_from, |x| class(x) == Class::Other);
    if other_end > other_from {
        return run(s, other_end, is_newline);
    }
    // White space from here on (a letter, number or other character matched above).
    let ws_end = run(s, pos, |x| class(x) == Class::Space);
    if END_RUN && ws_end == s.len() {
        return ws_end; // `\s++\z`
    }
    super::space_run_end(s, pos, ws_end)
}

#[cfg(test)]
mod tests {
    use super::super::split_check::{regex, regex_matches, scanner_matches};
    use super::*;

    /// The hand-written split equals Oniguruma running the translated tiktoken pattern, on
    /// random texts over every character class the pattern distinguishes.
    #[test]
    fn equals_the_regex() {
        check::<true>(
            r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s",
            ONIG_PATTERN,
        );
    }

    /// The same for Llama 3's pattern and `match_end_with::<false>`.
    #[test]
    fn llama3_equals_the_regex() {
        check::<false>(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            LLAMA3_PATTERN,
        );
    }

    fn check<const END_RUN: bool>(published: &str, translated: &str) {
        let re = regex(published, translated);
        let alphabet: Vec<char> = "aZé\u{17F}sStTlLvVeErRdDmM'''  \t\r\n\u{a0}\u{2003}\u{3000}19٣²½.,!-/😀\u{301}\u{300}漢字ⅷ\u{85}\u{b}"
            .chars()
            .collect();
        let mut next = crate::test_rng(0x9E37_79B9_7F4A_7C15u64);
        for _ in 0..20_000 {
            let len = (next() % 14) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let expected = regex_matches(&re, &text);
            let got = scanner_matches(&text, match_end_with::<END_RUN>);
            assert_eq!(got, expected, "text {text:?}");
            let fast = scanner_matches(&text, super::super::cl100k_scan::<END_RUN>);
            assert_eq!(fast, expected, "fast: text {text:?}");
        }
    }
}
