//! Mistral's `tekken.json`: tiktoken-style ranks in JSON, read as mistral-common's
//! `Tekkenizer` reads it.
//!
//! The file holds the split pattern (tiktoken syntax), the ranked tokens (base64 bytes) and,
//! since v7, the special tokens. Of the tokens only the first `default_vocab_size −
//! default_num_special_tokens` are used; the special tokens take the ids below
//! `default_num_special_tokens` (missing ones are filled in as `<SPECIAL_i>`; files without
//! a list get the 20 of the first versions), and each token's id is its rank plus that
//! number. Encoding is tiktoken's with those ranks (a uniform shift keeps their order), so
//! the model is the `.tiktoken` one: the ranks are handed to [`super::tiktoken::pipeline`]
//! as the lines of a `.tiktoken` file. The special tokens are never read from a text (they
//! are given by id, see `Tokenizer::from_tekken`); their strings stay in the model's
//! vocabulary for their ids, so a pre-token spelled exactly as one would still encode as it,
//! which tekken's patterns never give (they cut brackets from the letters inside).

use crate::error::{Error, Result};
use crate::models::bpe::Bpe;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;

/// Largest accepted `tekken.json` (the published ones are 15–19 MB).
pub const MAX_TEKKEN_BYTES: usize = 256 << 20;

/// The special tokens of files that list none (mistral-common's `DEPRECATED_SPECIAL_TOKENS`).
const FIRST_SPECIALS: [&str; 20] = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
];

#[derive(Deserialize)]
struct File<'a> {
    #[serde(borrow)]
    config: Config<'a>,
    #[serde(borrow)]
    vocab: Vec<Entry<'a>>,
    #[serde(default, borrow)]
    special_tokens: Option<Vec<Special<'a>>>,
}

#[derive(Deserialize)]
struct Config<'a> {
    #[serde(borrow)]
    pattern: Cow<'a, str>,
    default_vocab_size: u64,
    default_num_special_tokens: u64,
}

#[derive(Deserialize)]
struct Entry<'a> {
    rank: u64,
    #[serde(borrow)]
    token_bytes: Cow<'a, str>,
    #[allow(dead_code)] // present in every entry; only its presence is read
    token_str: IgnoredAny,
}

#[derive(Deserialize)]
struct Special<'a> {
    rank: u64,
    #[serde(borrow)]
    token_str: Cow<'a, str>,
}

/// The parts of a tekken file: its pattern, its ranked tokens as `.tiktoken` lines (ranks
/// already shifted to ids) and its special tokens with their ids.
pub struct Parts {
    pub pattern: String,
    pub tiktoken: Vec<u8>,
    pub specials: Vec<(String, u32)>,
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("tekken.json: {what}"))
}

/// Read and check the file as mistral-common does (its assertions become errors naming the
/// field).
pub fn parts(bytes: &[u8]) -> Result<Parts> {
    if bytes.len() > MAX_TEKKEN_BYTES {
        return Err(bad(format_args!(
            "{} bytes is over the {} MiB limit",
            bytes.len(),
            MAX_TEKKEN_BYTES >> 20
        )));
    }
    let file: File = serde_json::from_slice(bytes).map_err(bad)?;
    let num_special = file.config.default_num_special_tokens;
    let vocab_size = file.config.default_vocab_size;
    let listed: Vec<(u64, Cow<str>)> = match file.special_tokens {
        Some(list) => list.into_iter().map(|s| (s.rank, s.token_str)).collect(),
        None => FIRST_SPECIALS
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u64, Cow::Borrowed(*s)))
            .collect(),
    };
    if listed.len() as u64 > num_special {
        return Err(bad(format_args!(
            "{} special tokens listed, over config.default_num_special_tokens = {num_special}",
            listed.len()
        )));
    }
    let inner = vocab_size
        .checked_sub(num_special)
        .filter(|&n| n <= file.vocab.len() as u64)
        .ok_or_else(|| {
            bad(format_args!(
                "config.default_vocab_size = {vocab_size} is not between \
                 config.default_num_special_tokens = {num_special} and that plus the {} tokens \
                 of `vocab`",
                file.vocab.len()
            ))
        })?;
    // Ids must fit u32 (and leave room for the reference's own additions).
    if vocab_size >= u64::from(u32::MAX) {
        return Err(bad(format_args!(
            "config.default_vocab_size = {vocab_size} is too large"
        )));
    }
    let mut specials: Vec<(String, u32)> = Vec::with_capacity(num_special as usize);
    let mut seen: ahash::AHashSet<String> = ahash::AHashSet::new();
    for (i, (rank, content)) in listed.into_iter().enumerate() {
        // The reference takes a special token's id from its `rank` and finds its string by
        // position; they agree in every file it accepts.
        if rank != i as u64 {
            return Err(bad(format_args!(
                "special_tokens[{i}].rank is {rank}, expected {i}"
            )));
        }
        if !seen.insert(content.to_string()) {
            return Err(bad(format_args!(
                "special_tokens[{i}]: {content:?} is listed twice"
            )));
        }
        specials.push((content.into_owned(), i as u32));
    }
    for i in specials.len() as u64..num_special {
        let content = format!("<SPECIAL_{i}>");
        if !seen.insert(content.clone()) {
            return Err(bad(format_args!(
                "the filler special token {content} is also listed"
            )));
        }
        specials.push((content, i as u32));
    }
    let mut tiktoken = Vec::with_capacity(inner as usize * 16);
    // The used tokens' bytes one after another (token i ends at ends[i]).
    let mut decoded: Vec<u8> = Vec::with_capacity(inner as usize * 8);
    let mut ends: Vec<usize> = Vec::with_capacity(inner as usize);
    for (i, e) in file.vocab.iter().take(inner as usize).enumerate() {
        if e.rank != i as u64 {
            return Err(bad(format_args!(
                "vocab[{i}].rank is {}, expected {i}",
                e.rank
            )));
        }
        // One `.tiktoken` line; its base64 is read as the reference reads it (Python's
        // non-validating `b64decode`, as the `.tiktoken` reader does). A field with white
        // space in it would read as other fields there: refused instead.
        if e.token_bytes
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b == 0x0b)
        {
            return Err(bad(format_args!("vocab[{i}].token_bytes has white space")));
        }
        if e.token_bytes.is_empty() {
            return Err(bad(format_args!("vocab[{i}].token_bytes is empty")));
        }
        let start = decoded.len();
        if super::tiktoken::decode_b64_lenient(e.token_bytes.as_bytes(), &mut decoded).is_err() {
            return Err(bad(format_args!("vocab[{i}].token_bytes is not base64")));
        }
        if i < 256 && decoded.get(start..) != Some(&[i as u8][..]) {
            return Err(bad(format_args!(
                "vocab[{i}] is not the byte {i} (the first 256 tokens are the bytes)"
            )));
        }
        ends.push(decoded.len());
        tiktoken.extend_from_slice(e.token_bytes.as_bytes());
        tiktoken.push(b' ');
        tiktoken.extend_from_slice((i as u64 + num_special).to_string().as_bytes());
        tiktoken.push(b'\n');
    }
    let mut tokens: ahash::AHashSet<&[u8]> = ahash::AHashSet::with_capacity(ends.len());
    let mut start = 0;
    for (i, &end) in ends.iter().enumerate() {
        let token = decoded.get(start..end).unwrap_or_default();
        if !tokens.insert(token) {
            return Err(bad(format_args!(
                "vocab[{i}] repeats an earlier token, {:?}",
                String::from_utf8_lossy(token)
            )));
        }
        start = end;
    }
    // The reference keeps special tokens apart from the ranks; one vocabulary string per id
    // cannot (it would give the token the special's id).
    for (content, _) in &specials {
        let raw: Option<Vec<u8>> = content
            .chars()
            .map(crate::byte_level::char_to_byte)
            .collect();
        if raw.is_some_and(|raw| tokens.contains(raw.as_slice())) {
            return Err(Error::unsupported(format!(
                "tekken.json: the special token {content:?} is also a token of `vocab`"
            )));
        }
    }
    if inner == 0 {
        return Err(bad(
            "no tokens are used (default_vocab_size = default_num_special_tokens)",
        ));
    }
    Ok(Parts {
        pattern: file.config.pattern.into_owned(),
        tiktoken,
        specials,
    })
}

/// The pipeline: the `.tiktoken` one over the shifted ranks, plus mistral-common's `bos`
/// (`<s>`) before each sequence when special tokens are added (as Mistral's tokenizer.json
/// files do).
pub fn pipeline(bytes: &[u8]) -> Result<(Value, Bpe)> {
    let parts = parts(bytes)?;
    let (mut doc, bpe) =
        super::tiktoken::pipeline(&parts.tiktoken, &parts.pattern, &parts.specials)?;
    if let Some((bos, id)) = parts.specials.iter().find(|(c, _)| c == "<s>") {
        let special = |type_id: u32| json!({"SpecialToken": {"id": bos, "type_id": type_id}});
        let seq = |id: &str, type_id: u32| json!({"Sequence": {"id": id, "type_id": type_id}});
        doc["post_processor"] = json!({
            "type": "TemplateProcessing",
            "single": [special(0), seq("A", 0)],
            "pair": [special(0), seq("A", 0), special(1), seq("B", 1)],
            "special_tokens": {bos.as_str(): {"id": bos, "ids": [id], "tokens": [bos]}},
        });
    }
    Ok((doc, bpe))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::Tokenizer;

    /// The bytes, then `ab`, `abab`; `specials` listed (None: the first versions' list).
    fn file(specials: Option<&[&str]>, num_special: u64, vocab_size: u64) -> String {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"ab".to_vec());
        tokens.push(b"abab".to_vec());
        let b64 = |t: &[u8]| {
            let abc = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut s = String::new();
            for c in t.chunks(3) {
                let n = c.iter().fold(0u32, |n, &b| n << 8 | u32::from(b)) << (8 * (3 - c.len()));
                for k in 0..4 {
                    s.push(if k <= c.len() {
                        abc[(n >> (18 - 6 * k) & 63) as usize] as char
                    } else {
                        '='
                    });
                }
            }
            s
        };
        let vocab: Vec<Value> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"rank": i, "token_bytes": b64(t), "token_str": null}))
            .collect();
        let mut doc = json!({
            "config": {"pattern": r"\p{L}+|\s+|.", "num_vocab_tokens": tokens.len(),
                       "default_vocab_size": vocab_size,
                       "default_num_special_tokens": num_special, "version": "v7"},
            "vocab": vocab,
        });
        if let Some(list) = specials {
            let list: Vec<Value> = list
                .iter()
                .enumerate()
                .map(|(i, s)| json!({"rank": i, "token_str": s, "is_control": true}))
                .collect();
            doc["special_tokens"] = Value::Array(list);
        }
        doc.to_string()
    }

    #[test]
    fn ids_are_ranks_after_the_special_tokens() {
        let f = file(Some(&["<unk>", "<s>", "</s>"]), 5, 5 + 258);
        let tok = Tokenizer::from_tekken(f.as_bytes()).unwrap();
        let ids = |t: &str, add: bool| {
            let mut out = Vec::new();
            tok.encode_ids(t, add, &mut out).unwrap();
            out
        };
        // "abab" is rank 257; "a" rank 97, " " rank 32.
        assert_eq!(ids("abab a", false), vec![5 + 257, 5 + 32, 5 + 97]);
        assert_eq!(ids("abab", true), vec![1, 5 + 257]);
        // A special token's string is text.
        assert_eq!(ids("<s>", false), vec![5 + 60, 5 + 115, 5 + 62]);
        assert_eq!(tok.id_to_token(3), Some("<SPECIAL_3>".into()));
        assert_eq!(tok.id_to_token(4), Some("<SPECIAL_4>".into()));
        assert_eq!(tok.token_to_id("</s>"), Some(2));
    }

    #[test]
    fn the_vocabulary_is_cut_to_the_configured_size() {
        // 20 first-version special tokens, 4 fillers, 257 of the 258 tokens.
        let f = file(None, 24, 24 + 257);
        let tok = Tokenizer::from_tekken(f.as_bytes()).unwrap();
        let mut out = Vec::new();
        tok.encode_ids("abab", false, &mut out).unwrap();
        assert_eq!(out, vec![24 + 256, 24 + 256]);
        assert_eq!(tok.id_to_token(19), Some("[TOOL_CONTENT]".into()));
        assert_eq!(tok.id_to_token(23), Some("<SPECIAL_23>".into()));
        assert_eq!(tok.id_to_token(24 + 257), None);
    }

    #[test]
    fn errors_name_the_field() {
        let err = |f: String| {
            Tokenizer::from_tekken(f.as_bytes())
                .err()
                .unwrap()
                .to_string()
        };
        assert!(err(file(Some(&["a", "b"]), 1, 300)).contains("special tokens listed"));
        assert!(err(file(Some(&["a", "a"]), 4, 262)).contains("listed twice"));
        assert!(err(file(None, 20, 20 + 259)).contains("default_vocab_size"));
        let dup = file(None, 20, 278).replace("\"YWJhYg==\"", "\"YWI=\"");
        assert!(err(dup).contains("vocab[257] repeats"));
    }
}
