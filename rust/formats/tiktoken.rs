//! `.tiktoken` vocabularies (`base64(token bytes) rank` per line), run as tiktoken runs them.
//!
//! tiktoken's BPE repeatedly merges the adjacent pair whose concatenation has the lowest rank,
//! leftmost first, after trying the whole piece as one token. That is a byte-level BPE whose
//! merges are every split of every token into two tokens, with `ignore_merges`; the one thing a
//! tokenizer.json cannot say is that all the splits of one token share its rank (it ranks them
//! one by one), so `Bpe::rank_merges_by_result` gives each merge the rank of the token it makes, and the
//! merge engine breaks ties by position, as tiktoken does. The regex is tiktoken's (Rust
//! `fancy-regex` syntax), translated to Oniguruma by [`onig_pattern`].

use crate::byte_level::byte_to_char;
use crate::error::{Error, Result};
use crate::models::bpe::Bpe;
use ahash::AHashMap;
use base64::Engine;
use serde_json::{json, Value};

/// Largest accepted `.tiktoken` file.
pub const MAX_TIKTOKEN_BYTES: usize = 64 << 20;

/// The (token bytes, rank) entries, in file order. As tiktoken's loader: lines end at `\n`,
/// `\r\n` or `\r`, blank lines are skipped, a repeated token keeps its last rank; a rank used
/// twice is an error (tiktoken refuses it too).
pub fn parse(bytes: &[u8]) -> Result<Vec<(Vec<u8>, u32)>> {
    if bytes.len() > MAX_TIKTOKEN_BYTES {
        return Err(Error::invalid(format!(
            ".tiktoken: {} bytes is over the {} MiB limit",
            bytes.len(),
            MAX_TIKTOKEN_BYTES >> 20
        )));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut rank_of: AHashMap<Vec<u8>, (u32, usize)> = AHashMap::new();
    let lines = bytes
        .split(|&b| b == b'\n')
        .flat_map(|l| l.split(|&b| b == b'\r'));
    for (i, line) in lines.enumerate() {
        let mut fields = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty());
        let Some(token) = fields.next() else {
            continue;
        };
        let bad = |what: &str| Error::invalid(format!(".tiktoken line {}: {what}", i + 1));
        let rank = fields
            .next()
            .and_then(|r| std::str::from_utf8(r).ok())
            .and_then(|r| r.parse::<u32>().ok())
            .ok_or_else(|| bad("expected `base64 rank` with a rank in 0..2^32"))?;
        if fields.next().is_some() {
            return Err(bad("expected two fields, `base64 rank`"));
        }
        let token = b64
            .decode(token)
            .map_err(|e| bad(&format!("bad base64: {e}")))?;
        if token.is_empty() {
            return Err(bad("empty token"));
        }
        rank_of.insert(token, (rank, i));
    }
    let mut entries: Vec<(Vec<u8>, u32, usize)> =
        rank_of.into_iter().map(|(t, (r, i))| (t, r, i)).collect();
    entries.sort_unstable_by_key(|e| e.1);
    if let Some(w) = entries.windows(2).find(|w| w[0].1 == w[1].1) {
        return Err(Error::invalid(format!(
            ".tiktoken line {}: rank {} is already used on line {}",
            w[0].2.max(w[1].2) + 1,
            w[0].1,
            w[0].2.min(w[1].2) + 1
        )));
    }
    if entries.is_empty() {
        return Err(Error::invalid(".tiktoken: no tokens"));
    }
    Ok(entries.into_iter().map(|(t, r, _)| (t, r)).collect())
}

fn byte_level(token: &[u8]) -> String {
    token.iter().map(|&b| byte_to_char(b)).collect()
}

/// The pipeline of a `.tiktoken` vocabulary with its split `pattern` (tiktoken syntax) and
/// special tokens: the tokenizer.json document without its `model` (null), and the BPE model,
/// built directly (going through JSON costs most of a second for cl100k). The model's merges
/// are every split of a token into two tokens, in rank order, each ranked as the token it makes.
pub fn pipeline(bytes: &[u8], pattern: &str, specials: &[(String, u32)]) -> Result<(Value, Bpe)> {
    let entries = parse(bytes)?;
    let rank: AHashMap<&[u8], u32> = entries.iter().map(|(t, r)| (t.as_slice(), *r)).collect();
    let mut vocab = AHashMap::with_capacity(entries.len() + specials.len());
    let mut merges = Vec::new();
    for (token, r) in &entries {
        vocab.insert(byte_level(token), *r);
        for cut in 1..token.len() {
            let (a, b) = token.split_at(cut);
            if rank.contains_key(a) && rank.contains_key(b) {
                merges.push((byte_level(a), byte_level(b)));
            }
        }
    }
    let mut added = Vec::with_capacity(specials.len());
    for (content, id) in specials {
        if let Some((t, _)) = entries.iter().find(|e| e.1 == *id) {
            return Err(Error::invalid(format!(
                "special token {content:?}: id {id} is the rank of the token {:?}",
                String::from_utf8_lossy(t)
            )));
        }
        // In the model's vocabulary too, so the added token takes this id (the reference gives
        // an added token its vocabulary id, or the next free one).
        vocab.insert(content.clone(), *id);
        added.push(
            json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}),
        );
    }
    let mut bpe = Bpe::build(vocab, merges, None, None)?;
    bpe.set_ignore_merges(true);
    bpe.rank_merges_by_result();
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": onig_pattern(pattern)?},
             "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
             "use_regex": false},
        ]},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                    "use_regex": true},
        "model": null,
    });
    Ok((doc, bpe))
}

/// A tiktoken (Rust regex / fancy-regex) pattern in Oniguruma's Ruby syntax, which the Split
/// pre-tokenizer runs. Two constructs mean something else there: `$` is end of line in Ruby
/// (end of text in Rust: becomes `\z`) and `{m,n}+` is not possessive in Ruby (becomes an
/// atomic group around the repeated atom). Everything else used by tiktoken's patterns
/// (`\p{..}`, `(?i:..)`, `?+ *+ ++`, lookahead) reads the same.
pub fn onig_pattern(p: &str) -> Result<String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 8);
    // Where the last complete atom starts in `out`, for a possessive interval to wrap it.
    let mut atom: Option<usize> = None;
    let mut groups: Vec<usize> = Vec::new();
    let mut i = 0;
    let unbalanced = || Error::invalid(format!("bad regex {p:?}: unbalanced brackets"));
    while let Some(&c) = chars.get(i) {
        let start = out.len();
        match c {
            '\\' => {
                out.push(c);
                i += 1;
                let n = *chars.get(i).ok_or_else(unbalanced)?;
                out.push(n);
                i += 1;
                if matches!(n, 'p' | 'P' | 'x' | 'u') && chars.get(i) == Some(&'{') {
                    loop {
                        let d = *chars.get(i).ok_or_else(unbalanced)?;
                        out.push(d);
                        i += 1;
                        if d == '}' {
                            break;
                        }
                    }
                } else if matches!(n, 'p' | 'P') {
                    out.push(*chars.get(i).ok_or_else(unbalanced)?);
                    i += 1;
                }
                atom = Some(start);
            }
            '[' => {
                // Copy the class as it is (nested classes included); `]` first is literal.
                let mut depth = 0usize;
                loop {
                    let d = *chars.get(i).ok_or_else(unbalanced)?;
                    out.push(d);
                    i += 1;
                    match d {
                        '\\' => {
                            out.push(*chars.get(i).ok_or_else(unbalanced)?);
                            i += 1;
                        }
                        '[' => {
                            depth += 1;
                            if chars.get(i) == Some(&'^') {
                                out.push('^');
                                i += 1;
                            }
                            if chars.get(i) == Some(&']') {
                                out.push(']');
                                i += 1;
                            }
                        }
                        ']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                atom = Some(start);
            }
            '(' => {
                groups.push(start);
                out.push(c);
                i += 1;
                atom = None;
            }
            ')' => {
                atom = Some(groups.pop().ok_or_else(unbalanced)?);
                out.push(c);
                i += 1;
            }
            '$' => {
                out.push_str("\\z");
                i += 1;
                atom = None;
            }
            '{' if interval_end(&chars, i).is_some() => {
                let end = interval_end(&chars, i).unwrap_or(i);
                out.extend(&chars[i..=end]);
                i = end + 1;
                if chars.get(i) == Some(&'+') {
                    i += 1;
                    if let Some(a) = atom {
                        out.insert_str(a, "(?>");
                        out.push(')');
                    }
                }
                atom = None;
            }
            _ => {
                out.push(c);
                i += 1;
                atom = (!matches!(c, '|' | '*' | '+' | '?')).then_some(start);
            }
        }
    }
    if !groups.is_empty() {
        return Err(unbalanced());
    }
    Ok(out)
}

/// The index of the `}` closing a `{m}`, `{m,}` or `{m,n}` repetition that starts at `i`.
fn interval_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i + 1;
    let mut digits = 0;
    let mut comma = false;
    while let Some(&c) = chars.get(j) {
        match c {
            '0'..='9' => digits += 1,
            ',' if !comma => comma = true,
            '}' if digits > 0 => return Some(j),
            _ => return None,
        }
        j += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn possessive_intervals_become_atomic_groups() {
        let cases = [
            (r"\p{N}{1,3}+", r"(?>\p{N}{1,3})"),
            (r"a{2}+b", r"(?>a{2})b"),
            (r"(ab){1,}+|c", r"(?>(ab){1,})|c"),
            (r"[a-z\]]{1,2}+", r"(?>[a-z\]]{1,2})"),
            (r"\s++$|x{,2}", r"\s++\z|x{,2}"),
            (r"[$^]\p{L}++", r"[$^]\p{L}++"),
            (r"a{3}", r"a{3}"),
        ];
        for (from, to) in cases {
            assert_eq!(onig_pattern(from).unwrap_or_default(), to, "{from}");
        }
        assert!(onig_pattern("(a").is_err());
        assert!(onig_pattern("[a").is_err());
        assert!(onig_pattern("a\\").is_err());
    }

    /// The translated cl100k pattern splits as tiktoken documents it: digits in threes, the
    /// trailing white space of the text as one piece.
    #[test]
    fn translated_pattern_runs_in_oniguruma() {
        let p = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
        let re = crate::text::SysRegex::new(&onig_pattern(p).unwrap_or_default());
        let Ok(re) = re else {
            panic!("the translated pattern does not compile");
        };
        let mut pieces = Vec::new();
        let text = "I'LL pay 1234567 now  \n ok  ";
        let _ = re.for_each_match(text, |s, e| {
            pieces.push(&text[s..e]);
            Ok(())
        });
        assert_eq!(
            pieces,
            ["I", "'LL", " pay", " ", "123", "456", "7", " now", "  \n", " ok", "  "]
        );
    }

    #[test]
    fn parse_reports_lines() {
        assert!(parse(b"YQ== 0\nYg== 1\r\n\nYWI= 2\n").is_ok_and(|e| e.len() == 3));
        let err = |b: &[u8]| parse(b).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(b"YQ== 0\nYg== 0\n").contains("line 2"));
        assert!(err(b"YQ== 0\n!!! 1\n").contains("line 2"));
        assert!(err(b"YQ== x\n").contains("line 1"));
        assert!(err(b"YQ== 1 2\n").contains("line 1"));
        assert!(err(b"\n\n").contains("no tokens"));
    }
}
