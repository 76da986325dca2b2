//! Long texts of a batch cut into pieces, so that a few long documents still spread over
//! every thread of the pool.
//!
//! Every cut goes right after a `\n`; a `Rule` says which `\n`s qualify. For the pipelines
//! that allow it (`Core::cuts_at_newlines`, `SentencePiece::newline_cuts_exact`) the ids of
//! the whole text are the ids of its pieces one after the other.
//!
//! tokenizer.json pipelines (`Rule::visible`): the `\n` has a visible character on both
//! sides (neither whitespace, nor a control, nor a format character that some Unicode
//! version or regex engine counts as a space; for the tiktoken-style splits only after it),
//! and the character after it starts no `lstrip` added token.
//! - added tokens: none contains whitespace or a control character, so no match spans the
//!   cut, and matching after the cut does not depend on what precedes it except through
//!   `lstrip` (which would take the `\n`; excluded by the rule) and `single_word` (a `\n`
//!   and the start of the text are both word boundaries). An `rstrip` token before the cut
//!   takes the `\n` either way and nothing after it (a visible character follows);
//! - BERT (BertNormalizer + BertPreTokenizer): the normalizer works per character (NFD only
//!   reorders runs of combining marks, and `\n` is a starter, so no mark moves across it),
//!   `\n` becomes a space, and the pre-tokenizer splits at whitespace, dropping it;
//! - T5 (Precompiled + WhitespaceSplit + Metaspace): Precompiled works per grapheme, a
//!   grapheme always ends after `\n` (so a combining mark after it starts a grapheme in both
//!   texts), the charsmap turns `\n` into whitespace (checked on load) and the pre-tokenizer
//!   splits there, every word getting its own `▁`;
//! - ByteLevel without prefix space, per split (`WordSplit::newline_cut`): no pattern
//!   looks behind, and a match holding a `\n` takes after it only white space, newlines or
//!   (o200k, tekken: `[\r\n/]*` after punctuation) `/`. So before a visible character
//!   other than `/`, the match of the `\n` ends at the cut in the whole text, and a piece's
//!   end changes no match either: its last match is the one that ends with the `\n`
//!   (`\s*[\r\n]`, which cl100k's `\s++\z` then equals). The character before the `\n`
//!   may be anything (`Rule::visible_after`) for cl100k, Llama 3, o200k and tekken. GPT-2's
//!   `\s+(?!\S)` looks ahead: it would take a whitespace run before the `\n` whole at the
//!   end of a piece but not before the visible character, hence the visible character
//!   before the `\n` too.
//!
//! SentencePiece BPE `.model`s (`Rule::any`: every `\n` but a last one), allowed when the
//! normalizer is the identity (no charsmap, no `remove_extra_whitespaces`, no whitespace as
//! suffix), no piece but `\n` itself contains a `\n`, and byte fallback is on: the
//! normalized text of a piece after the first is its own normalized text without the one
//! dummy-prefix `▁` (added once at the start of the text); BPE starts from single characters
//! (or user-defined pieces, none with a `\n` in it) and merges a pair only into a piece, so
//! no symbol ever spans the `\n` and each side's merges, taken in the same score-then-position
//! order, are its own; the `\n` itself is a piece or becomes `<0x0A>` (byte fallback), so no
//! unknown run fuses across the cut.

/// A piece of one text of a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece<'a> {
    pub(crate) text: &'a str,
    /// The whole text (it gets the usual post-processing at once), not a part of one.
    pub(crate) whole: bool,
    /// The text's first piece (or the whole text): later pieces get no dummy prefix.
    pub(crate) first: bool,
}

/// A batch as pieces: text `i` is `pieces[bounds[i]..bounds[i + 1]]`.
pub(crate) struct Plan<'a> {
    pub(crate) pieces: Vec<Piece<'a>>,
    pub(crate) bounds: Vec<usize>,
}

impl Plan<'_> {
    /// How many pieces each text has, in text order.
    pub(crate) fn piece_counts(&self) -> impl Iterator<Item = usize> + '_ {
        self.bounds.windows(2).map(|w| match w {
            [a, b] => b - a,
            _ => 0,
        })
    }
}

/// Which `\n`s a text may be cut after (see the module doc for why each is exact).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rule {
    /// Only a `\n` with a visible character (`visible`) before it.
    pub(crate) visible_before: bool,
    /// Only a `\n` with a visible character after it.
    pub(crate) visible_after: bool,
    /// Characters that may not follow the cut (the first characters of `lstrip` tokens, a
    /// character the split's match of the `\n` would take).
    pub(crate) not_after: Vec<char>,
}

impl Rule {
    /// After a `\n` between two visible characters, unless the second is in `not_after`.
    pub(crate) fn visible(not_after: Vec<char>) -> Rule {
        Rule {
            visible_before: true,
            visible_after: true,
            not_after,
        }
    }

    /// After a `\n` before a visible character, unless it is in `not_after`.
    pub(crate) fn visible_after(not_after: Vec<char>) -> Rule {
        Rule {
            visible_before: false,
            visible_after: true,
            not_after,
        }
    }

    /// After any `\n` that does not end the text.
    pub(crate) fn any() -> Rule {
        Rule::default()
    }

    /// The same rule that also keeps `more` from following a cut.
    pub(crate) fn and_not_after(mut self, more: &[char]) -> Rule {
        self.not_after.extend_from_slice(more);
        self.not_after.sort_unstable();
        self.not_after.dedup();
        self
    }

    fn allows(&self, before: Option<char>, after: Option<char>) -> bool {
        let Some(after) = after else {
            return false;
        };
        !self.not_after.contains(&after)
            && (!self.visible_after || visible(after))
            && (!self.visible_before || before.is_some_and(visible))
    }
}

/// Neither whitespace nor a control, nor a format character that an older Unicode version
/// (U+180E, U+200B) or some regex engine counts as a space or a line break: a character
/// every `\s` and every pre-tokenizer's whitespace test rejects.
pub(crate) fn visible(c: char) -> bool {
    !(c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            '\u{180e}' | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}'
        ))
}

/// Pieces per thread: enough that uneven documents still balance.
const PIECES_PER_THREAD: usize = 8;
/// No piece is cut smaller: below this the pool's hand-over costs more than it balances.
const MIN_PIECE: usize = 16 * 1024;

/// The batch cut into pieces for `threads` threads, or `None` when no text is long enough to
/// be worth cutting (the batch then runs text by text, as without a plan).
pub(crate) fn plan<'a>(texts: &[&'a str], threads: usize, rule: &Rule) -> Option<Plan<'a>> {
    if threads < 2 {
        return None;
    }
    let total: usize = texts.iter().map(|t| t.len()).sum();
    let target = (total / (threads * PIECES_PER_THREAD)).max(MIN_PIECE);
    if !texts.iter().any(|t| t.len() >= 2 * target) {
        return None;
    }
    Some(plan_with(texts, target, rule))
}

/// The batch with every text of `2 * target` bytes or more cut about every `target` bytes.
pub(crate) fn plan_with<'a>(texts: &[&'a str], target: usize, rule: &Rule) -> Plan<'a> {
    let total: usize = texts.iter().map(|t| t.len()).sum();
    let target = target.max(1);
    let mut pieces = Vec::with_capacity(texts.len() + total / target + 1);
    let mut bounds = Vec::with_capacity(texts.len() + 1);
    bounds.push(0);
    let mut starts = Vec::new();
    for &t in texts {
        starts.clear();
        if t.len() >= 2 * target {
            cut_points(t, target, rule, &mut starts);
        }
        if starts.is_empty() {
            pieces.push(Piece {
                text: t,
                whole: true,
                first: true,
            });
        } else {
            let mut from = 0;
            for &s in starts.iter().chain(std::iter::once(&t.len())) {
                // Cut points are char boundaries (after a `\n`), increasing, inside the text.
                if let Some(p) = t.get(from..s) {
                    pieces.push(Piece {
                        text: p,
                        whole: false,
                        first: from == 0,
                    });
                }
                from = s;
            }
        }
        bounds.push(pieces.len());
    }
    Plan { pieces, bounds }
}

/// One text's ids from its pieces' rows (in order), and whether it was cut (more than one
/// row): a cut text still needs the processing a whole text got with its piece.
pub(crate) fn join_rows(mut rows: impl Iterator<Item = Vec<u32>>) -> (Vec<u32>, bool) {
    let mut ids = rows.next().unwrap_or_default();
    let mut cut = false;
    for r in rows {
        ids.extend_from_slice(&r);
        cut = true;
    }
    (ids, cut)
}

/// The rows of a plan's pieces, in piece order, made across the pool (handed out longest
/// first).
pub(crate) fn plan_rows<E: Send>(
    plan: &Plan<'_>,
    piece: impl Fn(&Piece<'_>) -> Result<Vec<u32>, E> + Sync,
) -> Result<Vec<Vec<u32>>, E> {
    let order = plan.longest_first();
    let one = |&i: &usize| match plan.pieces.get(i) {
        Some(p) => piece(p),
        None => Ok(Vec::new()),
    };
    let done = crate::parallel::map_in_turn(&order, one)?;
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); plan.pieces.len()];
    for (i, r) in order.into_iter().zip(done) {
        if let Some(slot) = rows.get_mut(i) {
            *slot = r;
        }
    }
    Ok(rows)
}

/// How a batch is encoded into one flat buffer (`flat_ids`), for one front end.
pub(crate) trait FlatEncode: Sync {
    type Error: Send;
    /// Append the ids of a whole text (options applied) to `out`.
    fn append(&self, text: &str, out: &mut Vec<u32>) -> Result<(), Self::Error>;
    /// The ids of a plan's piece: a whole text's with the options applied, a cut text's
    /// piece's bare.
    fn piece(&self, p: &Piece<'_>) -> Result<Vec<u32>, Self::Error>;
    /// Whether the ids of a cut text are its pieces' ids one after the other (no options to
    /// apply to the joined text).
    fn plain(&self) -> bool;
    /// A cut text's ids from its pieces' rows, in order (joined, the options applied).
    fn finish(&self, rows: &mut dyn Iterator<Item = Vec<u32>>) -> Result<Vec<u32>, Self::Error>;
}

/// The ids of `texts` across the pool as one flat buffer, with the end of each text's row in
/// it. With a `plan`, its pieces run across the pool and their rows go straight into the
/// buffer (one copy, on this thread); else the texts go in chunks, each chunk's ids in one
/// buffer.
pub(crate) fn flat_ids<F: FlatEncode>(
    enc: &F,
    texts: &[&str],
    plan: Option<&Plan<'_>>,
) -> Result<(Vec<u32>, Vec<usize>), F::Error> {
    if let Some(plan) = plan {
        let rows = plan_rows(plan, |p| enc.piece(p))?;
        let plain = enc.plain();
        let mut ids = Vec::with_capacity(rows.iter().map(Vec::len).sum::<usize>() + 16);
        let mut ends = Vec::with_capacity(texts.len());
        let mut rows = rows.into_iter();
        for n in plan.piece_counts() {
            if plain || n <= 1 {
                for r in rows.by_ref().take(n) {
                    ids.extend_from_slice(&r);
                }
            } else {
                ids.extend_from_slice(&enc.finish(&mut rows.by_ref().take(n))?);
            }
            ends.push(ids.len());
        }
        return Ok((ids, ends));
    }
    // As many chunks as `map_batch_streamed` makes: enough to balance, few enough that the
    // per-chunk costs vanish.
    let len = (texts.len() / (crate::parallel::num_threads() * 16)).clamp(1, 256);
    let chunks: Vec<&[&str]> = texts.chunks(len).collect();
    let bytes = |c: &&[&str]| c.iter().map(|t| t.len()).sum::<usize>();
    let one = |c: &&[&str]| {
        // Room for one id per 2 bytes: code and multilingual chunks often have more than one
        // per 3, and a regrowth copies the whole chunk; the join copies it once more.
        let mut ids = Vec::with_capacity(bytes(c).min(1 << 24) / 2 + 16);
        let mut ends = Vec::with_capacity(c.len());
        for t in c.iter() {
            enc.append(t, &mut ids)?;
            ends.push(ids.len());
        }
        Ok::<_, F::Error>((ids, ends))
    };
    let parts = crate::parallel::map_batch(&chunks, bytes, one)?;
    let mut ids = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    let mut ends = Vec::with_capacity(texts.len());
    for (part, part_ends) in parts {
        let base = ids.len();
        ids.extend_from_slice(&part);
        ends.extend(part_ends.into_iter().map(|e| base + e));
    }
    Ok((ids, ends))
}

impl Plan<'_> {
    /// Bytes of piece `i` (0 when there is none).
    pub(crate) fn piece_len(&self, i: usize) -> usize {
        self.pieces.get(i).map_or(0, |p| p.text.len())
    }

    /// The pieces' indices, longest first: handed out in this order, the long pieces start
    /// early and the short ones fill the gaps at the end (no long piece is left for last).
    pub(crate) fn longest_first(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.pieces.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.piece_len(i)));
        order
    }
}

/// Where pieces of `text` start (never 0 or the end): the first allowed cut at least
/// `target` bytes after the previous one, so every piece but the last has `target` bytes or
/// more.
pub(crate) fn cut_points(text: &str, target: usize, rule: &Rule, out: &mut Vec<usize>) {
    let target = target.max(1);
    let mut at = target;
    while let Some(cut) = next_cut(text, at, rule).filter(|&c| c < text.len()) {
        out.push(cut);
        at = cut + target;
    }
}

/// The first cut position at or after `from`: just after a `\n` that `rule` allows.
fn next_cut(text: &str, from: usize, rule: &Rule) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = from.checked_sub(1)?;
    loop {
        let nl = i + b.get(i..)?.iter().position(|&c| c == b'\n')?;
        let before = text.get(..nl).and_then(|t| t.chars().next_back());
        let after = text.get(nl + 1..).and_then(|t| t.chars().next());
        if rule.allows(before, after) {
            return Some(nl + 1);
        }
        i = nl + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces_of<'a>(text: &'a str, target: usize, rule: &Rule) -> Vec<&'a str> {
        let mut s = Vec::new();
        cut_points(text, target, rule, &mut s);
        let mut from = 0;
        let mut v = Vec::new();
        for &c in s.iter().chain(std::iter::once(&text.len())) {
            v.push(&text[from..c]);
            from = c;
        }
        v
    }

    #[test]
    fn visible_rule_cuts_only_after_a_newline_between_visible_characters() {
        let text = "ab\n cd\n\nef\n1x\n.y\né\nzz  \nq\u{3000}\nr\u{1}\ns\n\u{200b}t\nд\n中\n\u{301}\n[m\n(x\n";
        let rule = Rule::visible(vec!['[']);
        let mut seen = std::collections::BTreeSet::new();
        for target in 1..text.len() + 2 {
            let pieces = pieces_of(text, target, &rule);
            assert_eq!(pieces.concat(), text);
            for w in pieces.windows(2) {
                let before = w[0].strip_suffix('\n').and_then(|p| p.chars().next_back());
                assert!(before.is_some_and(visible), "{w:?}");
                let after = w[1].chars().next();
                assert!(after.is_some_and(|c| visible(c) && c != '['), "{w:?}");
                seen.extend(after);
            }
            assert!(pieces.iter().all(|p| !p.is_empty()));
        }
        // Letters of any script, digits, punctuation and combining marks start pieces.
        for c in ['z', '1', '.', 'д', '中', '\u{301}', '(', 'é'] {
            assert!(seen.contains(&c), "{c:?} never started a piece: {seen:?}");
        }
    }

    #[test]
    fn any_rule_cuts_after_every_newline_but_a_last_one() {
        let text = "a\n\n b\n\u{301}\r\n\n";
        for target in 1..text.len() + 2 {
            let pieces = pieces_of(text, target, &Rule::any());
            assert_eq!(pieces.concat(), text);
            assert!(pieces.iter().all(|p| !p.is_empty()));
            for w in pieces.windows(2) {
                assert!(w[0].ends_with('\n'), "{w:?}");
            }
        }
        assert_eq!(pieces_of(text, 1, &Rule::any()).len(), 5);
    }

    #[test]
    fn pieces_are_near_the_target_size() {
        let text = "word word word\n".repeat(10_000);
        let target = 20_000;
        let pieces = pieces_of(&text, target, &Rule::visible(Vec::new()));
        assert!(pieces.len() >= text.len() / target - 1, "{}", pieces.len());
        assert!(
            pieces.len() <= 2 * text.len() / target + 1,
            "{}",
            pieces.len()
        );
    }

    #[test]
    fn a_text_without_cut_points_stays_whole() {
        let mut s = Vec::new();
        let rule = Rule::visible(Vec::new());
        cut_points(&"x".repeat(100_000), 1000, &rule, &mut s);
        assert!(s.is_empty());
        cut_points(&"x\n ".repeat(100_000), 1000, &rule, &mut s);
        assert!(s.is_empty());
        cut_points(&"x\n\u{2028}".repeat(100_000), 1000, &rule, &mut s);
        assert!(s.is_empty());
    }

    #[test]
    fn plan_cuts_only_long_texts_and_keeps_their_order() {
        let long = "alpha beta\ngamma\n".repeat(20_000);
        let texts = ["short", long.as_str(), "", "x\ny"];
        let rule = Rule::visible(Vec::new());
        assert!(plan(&texts, 1, &rule).is_none());
        let p = plan(&texts, 2, &rule).expect("a long text is cut");
        assert_eq!(p.bounds.len(), texts.len() + 1);
        for (i, t) in texts.iter().enumerate() {
            let part = &p.pieces[p.bounds[i]..p.bounds[i + 1]];
            let joined: String = part.iter().map(|x| x.text).collect();
            assert_eq!(&joined, t);
            assert_eq!(part.len() == 1, part[0].whole);
            assert!(part[0].first);
            assert!(part[1..].iter().all(|x| !x.first && !x.whole));
        }
        assert!(p.bounds[2] - p.bounds[1] > 4);
        assert!(plan(&["short", "lines"], 2, &rule).is_none());
        let order = p.longest_first();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..p.pieces.len()).collect::<Vec<_>>());
        assert!(order
            .windows(2)
            .all(|w| p.pieces[w[0]].text.len() >= p.pieces[w[1]].text.len()));
    }

    /// Every byte-level split's cut rule (`WordSplit::newline_cut`) keeps its words: on
    /// random texts rich in the characters the patterns treat apart around a `\n` (`\r`,
    /// spaces, tabs, `/`, punctuation, letters of several scripts, marks, digits), the words
    /// of the whole text are the words of the pieces at every allowed cut, one after the
    /// other, for the hand-written scanner and for Oniguruma on the translated pattern. Each
    /// looser rule (no `/` exclusion, white space after the `\n`, for GPT-2 white space
    /// before it) is caught on these texts.
    #[test]
    fn newline_cuts_keep_the_words_of_every_byte_level_split() {
        use crate::byte_level::split_check::{regex_matches, scanner_matches};
        use crate::byte_level::{cl100k, o200k};
        use crate::fast::WordSplit;
        type Words<'a> = &'a dyn Fn(&str) -> Vec<(usize, usize)>;
        const GPT2: &str =
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
        let no_slash = Rule::visible_after(Vec::new());
        let splits = [
            (WordSplit::Gpt2, GPT2, vec![Rule::visible_after(Vec::new())]),
            (WordSplit::Cl100k, cl100k::ONIG_PATTERN, vec![Rule::any()]),
            (WordSplit::Llama3, cl100k::LLAMA3_PATTERN, vec![Rule::any()]),
            (
                WordSplit::O200k,
                o200k::O200K_PATTERN,
                vec![Rule::any(), no_slash.clone()],
            ),
            (
                WordSplit::Tekken,
                o200k::TEKKEN_PATTERN,
                vec![Rule::any(), no_slash],
            ),
        ];
        // Newlines, `\r` and `/` weighted up: most cut candidates meet one of them.
        let alphabet: Vec<char> = concat!(
            "\n\n\n\n\n\n\r\r\r//// \t\t",
            "aZsStTlLdé\u{17F}д\u{3a3}中\u{e01}\u{301}\u{93f}'''",
            "19\u{663}\u{b2}.,!-()\u{ab}\u{1F600}\u{a0}\u{3000}\u{85}\u{b}\u{2028}\u{200b}",
        )
        .chars()
        .collect();
        // The words of `text` cut at `starts`, each piece split on its own.
        let joined = |text: &str, starts: &[usize], words: Words<'_>| {
            let mut out = Vec::new();
            let mut from = 0;
            for &c in starts.iter().chain(std::iter::once(&text.len())) {
                let piece = words(&text[from..c]);
                out.extend(piece.into_iter().map(|(a, b)| (a + from, b + from)));
                from = c;
            }
            out
        };
        for (k, (split, pattern, looser)) in splits.into_iter().enumerate() {
            let rule = split.newline_cut().expect("byte-level splits cut");
            let re = match crate::text::SysRegex::new(pattern) {
                Ok(re) => re,
                Err(e) => panic!("{split:?}: {e}"),
            };
            let scan = split
                .match_end()
                .expect("byte-level splits are regex splits");
            let by_scanner = |t: &str| scanner_matches(t, scan);
            let by_regex = |t: &str| regex_matches(&re, t);
            let mut next = crate::test_rng(0x5851_F42D_4C95_7F2D ^ k as u64);
            let (mut cuts, mut caught) = (0, vec![0; looser.len()]);
            let mut starts = Vec::new();
            for _ in 0..20_000 {
                let len = (next() % 40) as usize;
                let text: String = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                let whole = by_regex(&text);
                assert_eq!(by_scanner(&text), whole, "{split:?}: {text:?}");
                starts.clear();
                cut_points(&text, 1, &rule, &mut starts);
                cuts += starts.len();
                for words in [&by_scanner as Words<'_>, &by_regex] {
                    assert_eq!(
                        joined(&text, &starts, words),
                        whole,
                        "{split:?}: {text:?} cut at {starts:?}"
                    );
                }
                for (r, n) in looser.iter().zip(&mut caught) {
                    starts.clear();
                    cut_points(&text, 1, r, &mut starts);
                    if joined(&text, &starts, &by_regex) != whole {
                        *n += 1;
                    }
                }
            }
            assert!(cuts > 10_000, "{split:?}: only {cuts} cuts");
            for (r, n) in looser.iter().zip(caught) {
                assert!(n > 50, "{split:?}: the looser {r:?} went unnoticed ({n})");
            }
        }
    }
}
