//! Added tokens: strings matched in the text before the model sees it, and never split.
//!
//! Tokens with `normalized: false` are matched on the raw text; the others on each remaining
//! piece after normalization. Matching is leftmost-longest (Aho-Corasick), then `single_word`,
//! `lstrip` and `rstrip` adjust each match the way `tokenizers` 0.22.1 does.

use crate::error::{Error, Result};
use crate::models::{Model, Token};
use crate::normalizers::Normalizer;
use crate::text::{NormalizedString, PreTokenizedString, Split};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedToken {
    pub content: String,
    pub single_word: bool,
    pub lstrip: bool,
    pub rstrip: bool,
    pub normalized: bool,
    pub special: bool,
}

impl AddedToken {
    /// One entry of tokenizer.json's `added_tokens` (its `id` is returned beside it).
    pub fn from_json(v: &Value, at: &str) -> Result<(Option<u32>, AddedToken)> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::invalid(format!("{at}: expected an object")))?;
        let content = obj
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid(format!("{at}.content: expected a string")))?
            .to_owned();
        let flag = |name: &str, default: bool| -> Result<bool> {
            match obj.get(name) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(Error::invalid(format!("{at}.{name}: expected a boolean"))),
            }
        };
        let special = flag("special", false)?;
        let token = AddedToken {
            content,
            single_word: flag("single_word", false)?,
            lstrip: flag("lstrip", false)?,
            rstrip: flag("rstrip", false)?,
            normalized: flag("normalized", !special)?,
            special,
        };
        let id =
            match obj.get("id") {
                None | Some(Value::Null) => None,
                Some(x) => Some(x.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(
                    || Error::invalid(format!("{at}.id: expected an unsigned 32-bit integer")),
                )?),
            };
        Ok((id, token))
    }
}

struct Matcher {
    ac: Option<AhoCorasick>,
    ids: Vec<u32>,
    /// The patterns' distinct first bytes when there are one to three (and no pattern is
    /// empty): a text holding none of them holds no pattern, which `memchr` tells in a few
    /// instructions per 16 bytes, where the automaton's search costs a hundred or so to start.
    firsts: Vec<u8>,
}

impl Matcher {
    /// Whether no pattern occurs in `text`.
    fn finds_none(&self, text: &str) -> bool {
        let Some(ac) = &self.ac else {
            return true;
        };
        let b = text.as_bytes();
        let maybe = match *self.firsts.as_slice() {
            [x] => memchr::memchr(x, b).is_some(),
            [x, y] => memchr::memchr2(x, y, b).is_some(),
            [x, y, z] => memchr::memchr3(x, y, z, b).is_some(),
            _ => true,
        };
        !maybe || ac.find(text).is_none()
    }

    fn new(patterns: &[String], ids: Vec<u32>) -> Result<Self> {
        let ac = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(patterns)
                    .map_err(|e| Error::invalid(format!("added_tokens: {e}")))?,
            )
        };
        let mut firsts: Vec<u8> = Vec::new();
        for p in patterns {
            match p.as_bytes().first() {
                Some(b) if !firsts.contains(b) => firsts.push(*b),
                Some(_) => {}
                None => {
                    firsts.clear();
                    break;
                }
            }
            if firsts.len() > 3 {
                firsts.clear();
                break;
            }
        }
        Ok(Matcher { ac, ids, firsts })
    }
}

pub struct AddedVocabulary {
    map: HashMap<String, u32>,
    map_r: HashMap<u32, AddedToken>,
    /// Non-special added tokens, in insertion order.
    added: Vec<AddedToken>,
    /// Special tokens, in insertion order.
    special: Vec<AddedToken>,
    special_set: ahash::AHashSet<String>,
    raw: Matcher,
    normalized: Matcher,
}

/// A piece of a text cut at added tokens: the token's id (or `None` for the text between)
/// and its byte range.
pub type Segment = (Option<u32>, (usize, usize));

static STARTS_WITH_WORD: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^\w").ok());
static ENDS_WITH_WORD: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\w$").ok());
static SPACE_AT_START: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^\s*").ok());
static SPACE_AT_END: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\s*$").ok());

fn re_match(re: &Option<Regex>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

impl AddedVocabulary {
    /// Build from tokens in file order, the way the reference adds them one batch at a time:
    /// a token already known (to the model or an earlier added token) keeps that id; a new one
    /// gets the next id after the model's vocabulary and the added ids.
    pub fn new(
        tokens: Vec<AddedToken>,
        model: &dyn Model,
        normalizer: Option<&dyn Normalizer>,
    ) -> Result<Self> {
        let mut v = AddedVocabulary {
            map: HashMap::new(),
            map_r: HashMap::new(),
            added: Vec::new(),
            special: Vec::new(),
            special_set: ahash::AHashSet::new(),
            raw: Matcher {
                ac: None,
                ids: vec![],
                firsts: vec![],
            },
            normalized: Matcher {
                ac: None,
                ids: vec![],
                firsts: vec![],
            },
        };
        for t in &tokens {
            if t.special && !t.content.is_empty() && !v.special_set.contains(&t.content) {
                v.special.push(t.clone());
                v.special_set.insert(t.content.clone());
            }
        }
        let model_size = model.vocab_size() as u32;
        for t in tokens {
            if t.content.is_empty() || v.map_r.values().any(|x| *x == t) {
                continue;
            }
            let id = match v
                .map
                .get(&t.content)
                .copied()
                .or_else(|| model.token_to_id(&t.content))
            {
                Some(id) => id,
                None => match v.map.values().copied().max() {
                    None => model_size,
                    Some(max) if max >= model_size || model_size == 0 => max + 1,
                    Some(_) => model_size,
                },
            };
            v.map.insert(t.content.clone(), id);
            v.map_r.insert(id, t.clone());
            if !v.special_set.contains(&t.content) {
                v.added.push(t);
            }
        }
        v.refresh(model, normalizer)?;
        Ok(v)
    }

    fn refresh(&mut self, model: &dyn Model, normalizer: Option<&dyn Normalizer>) -> Result<()> {
        let mut raw = (Vec::new(), Vec::new());
        let mut norm = (Vec::new(), Vec::new());
        for t in self.special.iter().chain(self.added.iter()) {
            let id = self
                .map
                .get(&t.content)
                .copied()
                .or_else(|| model.token_to_id(&t.content))
                .ok_or_else(|| Error::invalid(format!("added token `{}` has no id", t.content)))?;
            if t.normalized {
                let mut n = NormalizedString::from(t.content.as_str());
                if let Some(nz) = normalizer {
                    nz.normalize(&mut n)?;
                }
                norm.0.push(n.get().to_owned());
                norm.1.push(id);
            } else {
                raw.0.push(t.content.clone());
                raw.1.push(id);
            }
        }
        self.raw = Matcher::new(&raw.0, raw.1)?;
        self.normalized = Matcher::new(&norm.0, norm.1)?;
        Ok(())
    }

    /// Stop finding the tokens in texts: they keep their ids (for decoding, skipping and
    /// lookups) but a text spelling one is encoded as text, as mistral-common encodes it.
    pub fn match_nothing(&mut self) {
        for m in [&mut self.raw, &mut self.normalized] {
            *m = Matcher {
                ac: None,
                ids: vec![],
                firsts: vec![],
            };
        }
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.map.get(token).copied()
    }
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.map_r.get(&id).map(|t| t.content.as_str())
    }
    pub fn is_special(&self, token: &str) -> bool {
        self.special_set.contains(token)
    }
    pub fn vocab(&self) -> &HashMap<String, u32> {
        &self.map
    }
    /// Every added token with its id, sorted by id (the order tokenizer.json lists them).
    pub fn tokens_by_id(&self) -> Vec<(u32, &AddedToken)> {
        let mut v: Vec<(u32, &AddedToken)> = self.map_r.iter().map(|(id, t)| (*id, t)).collect();
        v.sort_by_key(|(id, _)| *id);
        v
    }

    /// What cutting a text right after a `\n` (see `crate::cuts`) needs of the added
    /// tokens: `None` when some token has whitespace or a control character in it (a match
    /// could span the cut), else the first characters of the `lstrip` tokens, which must not
    /// follow a cut (their match would take the `\n` before them).
    pub fn newline_cut_exclusions(&self) -> Option<Vec<char>> {
        let splits = |c: char| c.is_whitespace() || c.is_control();
        if self.map_r.values().any(|t| t.content.contains(splits)) {
            return None;
        }
        let mut firsts: Vec<char> = self
            .map_r
            .values()
            .filter(|t| t.lstrip)
            .filter_map(|t| t.content.chars().next())
            .collect();
        firsts.sort_unstable();
        firsts.dedup();
        Some(firsts)
    }

    /// Whether any added token is matched on normalized text.
    pub fn has_normalized_tokens(&self) -> bool {
        self.normalized.ac.is_some()
    }

    /// The raw text cut at non-normalized added tokens: `(Some(id), range)` for a token,
    /// `(None, range)` for the text between (the whole text when nothing matches).
    pub fn raw_segments(&self, text: &str) -> Result<Vec<Segment>> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        self.find_matches(text, &self.raw)
    }

    /// Whether `raw_segments(text)` is the one segment `(None, (0, text.len()))`: a non-empty
    /// text where no non-normalized added token occurs (`find_matches` keeps only matches).
    pub fn raw_matches_none(&self, text: &str) -> bool {
        !text.is_empty() && self.raw.finds_none(text)
    }

    /// Whether `identity_segments(text)` is the one segment `(None, (0, text.len()))`: a
    /// non-empty text where no added token occurs at all (none occurs in a part of the text
    /// either, so neither matcher cuts anything).
    pub fn identity_matches_none(&self, text: &str) -> bool {
        self.raw_matches_none(text) && self.normalized.finds_none(text)
    }

    /// Like `raw_segments`, then the text between is cut at normalized added tokens too: what
    /// `extract_and_normalize` does when there is no normalizer (normalized text = raw text).
    pub fn identity_segments(&self, text: &str) -> Result<Vec<Segment>> {
        let raw = self.raw_segments(text)?;
        if self.normalized.ac.is_none() {
            return Ok(raw);
        }
        let mut out = Vec::with_capacity(raw.len());
        for (id, (s, e)) in raw {
            if id.is_some() {
                out.push((id, (s, e)));
                continue;
            }
            let part = text
                .get(s..e)
                .ok_or_else(|| Error::other("added tokens: bad split"))?;
            for (id2, (a, b)) in self.find_matches(part, &self.normalized)? {
                if b > a {
                    out.push((id2, (s + a, s + b)));
                }
            }
        }
        Ok(out)
    }

    fn find_matches(&self, s: &str, m: &Matcher) -> Result<Vec<Segment>> {
        if s.is_empty() {
            return Ok(vec![(None, (0, 0))]);
        }
        let Some(ac) = &m.ac else {
            return Ok(vec![(None, (0, s.len()))]);
        };
        let mut out = Vec::new();
        let mut start_offset = 0;
        for mat in ac.find_iter(s) {
            let (mut start, mut stop) = (mat.start(), mat.end());
            // A token that normalizes to "" matches between the bytes of a character; the
            // reference fails on such a text (it panics, or reports a bad split), so do we.
            if !s.is_char_boundary(start) || !s.is_char_boundary(stop) {
                return Err(Error::other("added tokens: bad split"));
            }
            let Some(&id) = m.ids.get(mat.pattern().as_usize()) else {
                continue;
            };
            let Some(tok) = self.map_r.get(&id) else {
                continue;
            };
            if tok.single_word {
                let start_space = start == 0 || !re_match(&ENDS_WITH_WORD, &s[..start]);
                let stop_space = stop == s.len() || !re_match(&STARTS_WITH_WORD, &s[stop..]);
                if !start_space || !stop_space {
                    continue;
                }
            }
            if tok.lstrip {
                let left = &s[..start];
                let newstart = SPACE_AT_END
                    .as_ref()
                    .and_then(|r| r.find(left))
                    .map_or(left.len(), |x| x.start());
                start = newstart.max(start_offset);
            }
            if tok.rstrip {
                stop += SPACE_AT_START
                    .as_ref()
                    .and_then(|r| r.find(&s[stop..]))
                    .map_or(0, |x| x.end());
            }
            if start_offset < start {
                out.push((None, (start_offset, start)));
            }
            out.push((Some(id), (start, stop)));
            start_offset = stop;
        }
        if start_offset != s.len() {
            out.push((None, (start_offset, s.len())));
        }
        Ok(out)
    }

    fn split_with(&self, n: NormalizedString, m: &Matcher) -> Result<Vec<Split>> {
        let mut out = Vec::new();
        for (id, (s, e)) in self.find_matches(n.get(), m)? {
            let slice = n
                .slice(s..e)
                .ok_or_else(|| Error::other("added tokens: bad split"))?;
            let tokens = id.map(|id| {
                let text = slice.get();
                vec![Token::with_value(id, text, 0, text.len())]
            });
            out.push(Split {
                normalized: slice,
                tokens,
            });
        }
        Ok(out)
    }

    /// Split `text` at added tokens and normalize the rest.
    pub fn extract_and_normalize(
        &self,
        normalizer: Option<&dyn Normalizer>,
        text: &str,
    ) -> Result<PreTokenizedString> {
        let mut pts =
            PreTokenizedString::from_splits(vec![Split::from(NormalizedString::from(text))]);
        self.split_pass(&mut pts, None, &self.raw)?;
        self.split_pass(&mut pts, normalizer, &self.normalized)?;
        Ok(pts)
    }

    fn split_pass(
        &self,
        pts: &mut PreTokenizedString,
        normalizer: Option<&dyn Normalizer>,
        m: &Matcher,
    ) -> Result<()> {
        let mut out = Vec::with_capacity(pts.splits.len());
        for s in std::mem::take(&mut pts.splits) {
            if s.tokens.is_some() {
                out.push(s);
                continue;
            }
            let mut n = s.normalized;
            if let Some(nz) = normalizer {
                nz.normalize(&mut n)?;
            }
            // Empty pieces are dropped, as the reference drops them.
            out.extend(
                self.split_with(n, m)?
                    .into_iter()
                    .filter(|p| !p.normalized.is_empty()),
            );
        }
        pts.splits = out;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Matcher;

    /// A small deterministic generator (the tests need no quality, only repeatability).
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n.max(1)
        }
    }

    /// The first-byte prefilter never changes the answer of the automaton, for pattern sets
    /// with one to five distinct first bytes (the filter is used up to three), an empty
    /// pattern among them, and texts built from the patterns' own bytes.
    #[test]
    fn finds_none_is_the_automaton() {
        let alphabet = [
            "<", "|", "e", "[", "C", "L", "S", "]", "é", " ", "\u{2581}", "x",
        ];
        let mut rng = Rng(7);
        for set in 0..400 {
            let n = 1 + rng.below(5);
            let mut patterns: Vec<String> = (0..n)
                .map(|_| {
                    (0..1 + rng.below(4))
                        .map(|_| alphabet[rng.below(alphabet.len())])
                        .collect()
                })
                .collect();
            if set % 50 == 0 {
                patterns.push(String::new());
            }
            let m = Matcher::new(&patterns, (0..patterns.len() as u32).collect()).unwrap();
            assert!(m.firsts.len() <= 3);
            for _ in 0..50 {
                let text: String = (0..rng.below(12))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                let want = m.ac.as_ref().is_none_or(|ac| ac.find(&text).is_none());
                assert_eq!(m.finds_none(&text), want, "{patterns:?} in {text:?}");
            }
        }
    }
}
