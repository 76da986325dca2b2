//! Replace: every match of a literal string or an Oniguruma regex becomes `content`.

use super::config::Obj;
use super::Normalizer;
use crate::error::{Error, Result};
use crate::text::{NormalizedString, Pattern, SysRegex};

/// A `{"String": ...}` or `{"Regex": ...}` pattern as the reference compiles it (a literal is
/// an escaped Oniguruma regex). A non-empty literal is searched without the regex engine: a
/// leftmost, non-overlapping literal search finds exactly what the escaped regex finds.
pub enum TextPattern {
    Literal(String),
    Regex(SysRegex),
}

impl TextPattern {
    pub fn new(is_regex: bool, s: &str) -> Result<Self> {
        if is_regex {
            Ok(TextPattern::Regex(SysRegex::new(s)?))
        } else if s.is_empty() {
            // The empty regex matches at every character boundary; keep the engine's rules.
            Ok(TextPattern::Regex(SysRegex::literal(s)?))
        } else {
            Ok(TextPattern::Literal(s.to_owned()))
        }
    }
}

impl Pattern for TextPattern {
    fn find_matches(&self, inside: &str) -> Result<Vec<((usize, usize), bool)>> {
        match self {
            TextPattern::Literal(s) => s.as_str().find_matches(inside),
            TextPattern::Regex(r) => r.find_matches(inside),
        }
    }
}

pub struct Replace {
    pattern: TextPattern,
    content: String,
}

impl Replace {
    pub fn new(is_regex: bool, pattern: &str, content: &str) -> Result<Self> {
        Ok(Replace {
            pattern: TextPattern::new(is_regex, pattern)?,
            content: content.to_owned(),
        })
    }

    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        let (is_regex, p) = o.req_pattern("pattern")?;
        let content = o.req_str("content")?;
        Replace::new(is_regex, p, content)
            .map_err(|e| Error::invalid(format!("normalizer `Replace`: field `pattern`: {e}")))
    }
}

impl Normalizer for Replace {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        if let TextPattern::Literal(s) = &self.pattern {
            if !n.get().contains(s.as_str()) {
                return Ok(());
            }
        }
        n.replace(&self.pattern, &self.content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_and_regex() {
        let r = Replace::new(false, "''", "\"").unwrap();
        let mut n = NormalizedString::from("a ''b'' c");
        r.normalize(&mut n).unwrap();
        assert_eq!(n.get(), "a \"b\" c");
        // The inserted quote aligns to the last character of what it replaced.
        assert_eq!(n.convert_normalized_range(2..3), Some(3..4));

        let r = Replace::new(true, " {2,}", " ").unwrap();
        let mut n = NormalizedString::from("a   b");
        r.normalize(&mut n).unwrap();
        assert_eq!(n.get(), "a b");
    }

    #[test]
    fn regex_metacharacters_in_a_literal_are_literal() {
        let r = Replace::new(false, ".", "!").unwrap();
        let mut n = NormalizedString::from("a.b");
        r.normalize(&mut n).unwrap();
        assert_eq!(n.get(), "a!b");
    }

    #[test]
    fn bad_regex_is_invalid() {
        assert!(Replace::new(true, "(", "").is_err());
    }
}
