//! Long texts of a batch cut into pieces, so that a few long documents still spread over
//! every thread of the pool.
//!
//! A cut goes right after a `\n` that follows a visible character and precedes an ASCII
//! letter or digit. For the pipelines `Core` allows it on (see `Core::cuts_at_newlines`) the
//! ids of the whole text are the ids of its pieces one after the other:
//! - added tokens: none contains whitespace or a control character, so no match spans the
//!   cut, and matching after the cut does not depend on what precedes it, except `lstrip`
//!   (which would take the `\n`): no `lstrip` token may start with a letter or digit;
//! - BERT (BertNormalizer + BertPreTokenizer) and T5 (Precompiled + WhitespaceSplit +
//!   Metaspace): the normalizer works per character (Precompiled per grapheme, and a grapheme
//!   always ends after `\n`), `\n` normalizes to whitespace, and the pre-tokenizer splits at
//!   whitespace, dropping it;
//! - ByteLevel with the GPT-2 or cl100k regex and no prefix space: a match that contains `\n`
//!   has only whitespace (GPT-2), or ends at its last newline (cl100k), so a match ends at
//!   the cut and the next one starts there; neither regex looks behind. GPT-2's `\s+(?!\S)`
//!   looks ahead: it would take a whitespace run before the `\n` whole at the end of a piece
//!   but not before the letter, hence the visible character before the `\n`.

/// A piece of one text of a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece<'a> {
    pub(crate) text: &'a str,
    /// The whole text (it gets the usual post-processing at once), not a part of one.
    pub(crate) whole: bool,
}

/// A batch as pieces: text `i` is `pieces[bounds[i]..bounds[i + 1]]`.
pub(crate) struct Plan<'a> {
    pub(crate) pieces: Vec<Piece<'a>>,
    pub(crate) bounds: Vec<usize>,
}

/// Pieces per thread: enough that uneven documents still balance.
const PIECES_PER_THREAD: usize = 8;
/// No piece is cut smaller: below this the pool's hand-over costs more than it balances.
const MIN_PIECE: usize = 16 * 1024;

/// The batch cut into pieces for `threads` threads, or `None` when no text is long enough to
/// be worth cutting (the batch then runs text by text, as without a plan).
pub(crate) fn plan<'a>(texts: &[&'a str], threads: usize) -> Option<Plan<'a>> {
    if threads < 2 {
        return None;
    }
    let total: usize = texts.iter().map(|t| t.len()).sum();
    let target = (total / (threads * PIECES_PER_THREAD)).max(MIN_PIECE);
    if !texts.iter().any(|t| t.len() >= 2 * target) {
        return None;
    }
    Some(plan_with(texts, target))
}

/// The batch with every text of `2 * target` bytes or more cut about every `target` bytes.
pub(crate) fn plan_with<'a>(texts: &[&'a str], target: usize) -> Plan<'a> {
    let total: usize = texts.iter().map(|t| t.len()).sum();
    let target = target.max(1);
    let mut pieces = Vec::with_capacity(texts.len() + total / target + 1);
    let mut bounds = Vec::with_capacity(texts.len() + 1);
    bounds.push(0);
    let mut starts = Vec::new();
    for &t in texts {
        starts.clear();
        if t.len() >= 2 * target {
            cut_points(t, target, &mut starts);
        }
        if starts.is_empty() {
            pieces.push(Piece {
                text: t,
                whole: true,
            });
        } else {
            let mut from = 0;
            for &s in starts.iter().chain(std::iter::once(&t.len())) {
                // Cut points are char boundaries (after a `\n`), increasing, inside the text.
                if let Some(p) = t.get(from..s) {
                    pieces.push(Piece {
                        text: p,
                        whole: false,
                    });
                }
                from = s;
            }
        }
        bounds.push(pieces.len());
    }
    Plan { pieces, bounds }
}

/// Where pieces of `text` start (never 0 or the end): the first allowed cut at least
/// `target` bytes after the previous one, so every piece but the last has `target` bytes or
/// more.
pub(crate) fn cut_points(text: &str, target: usize, out: &mut Vec<usize>) {
    let target = target.max(1);
    let mut at = target;
    while let Some(cut) = next_cut(text, at).filter(|&c| c < text.len()) {
        out.push(cut);
        at = cut + target;
    }
}

/// The first cut position at or after `from`: just after a `\n` that follows a visible
/// character (neither whitespace nor a control) and precedes an ASCII letter or digit.
fn next_cut(text: &str, from: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = from.checked_sub(1)?;
    loop {
        let nl = i + b.get(i..)?.iter().position(|&c| c == b'\n')?;
        let before = text.get(..nl).and_then(|t| t.chars().next_back());
        if b.get(nl + 1).is_some_and(u8::is_ascii_alphanumeric)
            && before.is_some_and(|c| !c.is_whitespace() && !c.is_control())
        {
            return Some(nl + 1);
        }
        i = nl + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces_of(text: &str, target: usize) -> Vec<&str> {
        let mut s = Vec::new();
        cut_points(text, target, &mut s);
        let mut from = 0;
        let mut v = Vec::new();
        for &c in s.iter().chain(std::iter::once(&text.len())) {
            v.push(&text[from..c]);
            from = c;
        }
        v
    }

    #[test]
    fn cuts_only_after_a_newline_before_a_letter_or_digit() {
        let text = "ab\n cd\n\nef\n1x\n.y\né\nzz  \nq\u{3000}\nr\u{1}\ns\n";
        let mut seen = 0;
        for target in 1..text.len() + 2 {
            let pieces = pieces_of(text, target);
            assert_eq!(pieces.concat(), text);
            for w in pieces.windows(2) {
                let before = w[0].strip_suffix('\n').and_then(|p| p.chars().next_back());
                assert!(
                    before.is_some_and(|c| !c.is_whitespace() && !c.is_control()),
                    "{w:?}"
                );
                assert!(w[1].as_bytes()[0].is_ascii_alphanumeric(), "{w:?}");
            }
            assert!(pieces.iter().all(|p| !p.is_empty()));
            seen += pieces.len() - 1;
        }
        assert!(seen > 0);
    }

    #[test]
    fn pieces_are_near_the_target_size() {
        let text = "word word word\n".repeat(10_000);
        let target = 20_000;
        let pieces = pieces_of(&text, target);
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
        cut_points(&"x".repeat(100_000), 1000, &mut s);
        assert!(s.is_empty());
        cut_points(&"x\n ".repeat(100_000), 1000, &mut s);
        assert!(s.is_empty());
    }

    #[test]
    fn plan_cuts_only_long_texts_and_keeps_their_order() {
        let long = "alpha beta\ngamma\n".repeat(20_000);
        let texts = ["short", long.as_str(), "", "x\ny"];
        assert!(plan(&texts, 1).is_none());
        let p = plan(&texts, 2).expect("a long text is cut");
        assert_eq!(p.bounds.len(), texts.len() + 1);
        for (i, t) in texts.iter().enumerate() {
            let part = &p.pieces[p.bounds[i]..p.bounds[i + 1]];
            let joined: String = part.iter().map(|x| x.text).collect();
            assert_eq!(&joined, t);
            assert_eq!(part.len() == 1, part[0].whole);
        }
        assert!(p.bounds[2] - p.bounds[1] > 4);
        assert!(plan(&["short", "lines"], 2).is_none());
    }
}
