//! Regular expressions as the reference runs them: Oniguruma through the `onig` crate with the
//! default syntax and options, searched left to right without overlap. An empty match right
//! after the previous match is skipped by advancing one character, exactly like
//! `onig::FindMatches`; but a search error (e.g. the retry limit) becomes an `Error` here
//! instead of a panic.

use super::normalized::Pattern;
use crate::error::{Error, Result};
use onig::{MatchParam, Region, SearchOptions};

pub struct SysRegex {
    regex: onig::Regex,
}

impl std::fmt::Debug for SysRegex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SysRegex")
    }
}

impl SysRegex {
    /// Compile `pattern`; the error names what is wrong (Oniguruma's message).
    pub fn new(pattern: &str) -> Result<Self> {
        onig::Regex::new(pattern)
            .map(|regex| SysRegex { regex })
            .map_err(|e| Error::invalid(format!("bad regex {pattern:?}: {}", e.description())))
    }

    /// A regex matching `literal` exactly (its metacharacters escaped).
    pub fn literal(literal: &str) -> Result<Self> {
        SysRegex::new(&escape(literal))
    }

    /// Call `f(start, end)` for every match, in order.
    pub fn for_each_match(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize) -> Result<()>,
    ) -> Result<()> {
        let mut region = Region::new();
        let mut from = 0usize;
        let mut last_match_end: Option<usize> = None;
        while from <= text.len() {
            region.clear();
            let found = self
                .regex
                .search_with_param(
                    text,
                    from,
                    text.len(),
                    SearchOptions::SEARCH_OPTION_NONE,
                    Some(&mut region),
                    MatchParam::default(),
                )
                .map_err(|e| Error::other(format!("regex search failed: {}", e.description())))?;
            if found.is_none() {
                break;
            }
            let Some((s, e)) = region.pos(0) else {
                break;
            };
            if s == e && last_match_end == Some(e) {
                // An empty match where the previous one ended: step over one character.
                from += text[from..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            from = e;
            last_match_end = Some(e);
            f(s, e)?;
        }
        Ok(())
    }
}

impl Pattern for SysRegex {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        if inside.is_empty() {
            return Ok(vec![((0, 0), false)]);
        }
        let mut out = Vec::new();
        let mut prev = 0;
        self.for_each_match(inside, |s, e| {
            if prev != s {
                out.push(((prev, s), false));
            }
            out.push(((s, e), true));
            prev = e;
            Ok(())
        })?;
        if prev != inside.len() {
            out.push(((prev, inside.len()), false));
        }
        Ok(out)
    }
}

/// Flip the `is_match` flag of every piece another pattern finds.
pub struct Invert<P: Pattern>(pub P);

impl<P: Pattern> Pattern for Invert<P> {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        let mut m = self.0.find_matches(inside)?;
        for piece in &mut m {
            piece.1 = !piece.1;
        }
        Ok(m)
    }
}

/// Escape the characters the reference escapes (those of the `regex` crate's `escape`). Every
/// other character stands for itself in Oniguruma's default syntax, so the result matches
/// `literal` and nothing else.
pub fn escape(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len() + 8);
    for c in literal.chars() {
        if matches!(
            c,
            '\\' | '.'
                | '+'
                | '*'
                | '?'
                | '('
                | ')'
                | '|'
                | '['
                | ']'
                | '{'
                | '}'
                | '^'
                | '$'
                | '#'
                | '&'
                | '-'
                | '~'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(re: &str, text: &str) -> Vec<(usize, usize)> {
        let r = SysRegex::new(re).unwrap();
        let mut v = Vec::new();
        r.for_each_match(text, |s, e| {
            v.push((s, e));
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn literal_metacharacters_are_literal() {
        let r = SysRegex::literal("a.b*(c)").unwrap();
        let m = r.find_matches("xa.b*(c)a_b").unwrap();
        assert_eq!(m, vec![((0, 1), false), ((1, 8), true), ((8, 11), false)]);
    }

    #[test]
    fn empty_matches_step_one_char() {
        // "" matches before every char and at the end; the empty match right after the
        // previous one is skipped, so each position yields exactly one match.
        assert_eq!(matches("", "aé"), vec![(0, 0), (1, 1), (3, 3)]);
        // x* matches "x" then the empty match at 1 is skipped (it touches the previous end).
        assert_eq!(matches("x*", "xa"), vec![(0, 1), (2, 2)]);
    }

    #[test]
    fn bad_regex_is_invalid() {
        assert!(SysRegex::new("(").is_err());
    }

    #[test]
    fn invert_flips_flags() {
        let r = SysRegex::new("b").unwrap();
        let m = Invert(&r).find_matches("abc").unwrap();
        assert_eq!(m, vec![((0, 1), true), ((1, 2), false), ((2, 3), true)]);
    }
}
