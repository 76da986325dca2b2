//! BERT `vocab.txt`: one WordPiece entry per line, the id being the line number, and the
//! tokenizer.json document `tokenizers.BertWordPieceTokenizer(vocab, ...)` builds from it.
//!
//! Line rules (as `tokenizers` reads the file): lines end at `\n` only; trailing Unicode
//! White_Space is dropped and leading white space kept; a blank line is the entry `""`; there is
//! no byte-order-mark handling; a repeated entry keeps its last id; invalid UTF-8 is an error.
//! piecework's own rules on top: the file must contain `[UNK]` and is at most 64 MiB.

use crate::error::{Error, Result};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use unicode_categories::UnicodeCategories;

/// Largest accepted vocab.txt.
pub const MAX_VOCAB_TXT_BYTES: usize = 64 << 20;

const SPECIAL_TOKENS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// The entries of a vocab.txt, in line order (line i → id i).
pub fn parse_vocab_txt(bytes: &[u8]) -> Result<Vec<String>> {
    if bytes.len() > MAX_VOCAB_TXT_BYTES {
        return Err(Error::invalid(format!(
            "vocab.txt: {} bytes is over the {} MiB limit",
            bytes.len(),
            MAX_VOCAB_TXT_BYTES >> 20
        )));
    }
    // A final `\n` ends the last line rather than starting an empty one.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut tokens = Vec::new();
    if !bytes.is_empty() {
        for (i, line) in body.split(|&b| b == b'\n').enumerate() {
            let line = std::str::from_utf8(line).map_err(|e| {
                Error::invalid(format!(
                    "vocab.txt line {}: invalid UTF-8 at byte {} of the line",
                    i + 1,
                    e.valid_up_to()
                ))
            })?;
            // `trim_end` drops exactly the White_Space property, as the reference does.
            tokens.push(line.trim_end().to_owned());
        }
    }
    if !tokens.iter().any(|t| t == "[UNK]") {
        return Err(Error::invalid(
            "vocab.txt: the vocabulary has no [UNK] entry",
        ));
    }
    Ok(tokens)
}

/// Whether the vocabulary looks cased: some entry outside `[...]` has an uppercase (or
/// titlecase) letter that lowercasing changes. Caseless capitals such as `ℝ` do not count.
pub fn looks_cased(tokens: &[String]) -> bool {
    tokens.iter().any(|t| {
        let bracketed = t.len() >= 2 && t.starts_with('[') && t.ends_with(']');
        !bracketed
            && t.chars().any(|c| {
                (c.is_letter_uppercase() || c.is_letter_titlecase())
                    && !c.to_lowercase().eq(std::iter::once(c))
            })
    })
}

/// The tokenizer.json document of `tokenizers.BertWordPieceTokenizer(vocab, lowercase=...,
/// strip_accents=...)`. `lowercase: None` guesses from the entries ([`looks_cased`]);
/// `strip_accents: None` follows lowercasing (the BertNormalizer's own rule). The
/// `[CLS] A [SEP]` post-processor is set only when both `[CLS]` and `[SEP]` exist.
pub fn bert_tokenizer_json(
    bytes: &[u8],
    lowercase: Option<bool>,
    strip_accents: Option<bool>,
) -> Result<Value> {
    let tokens = parse_vocab_txt(bytes)?;
    if tokens.len() > u32::MAX as usize {
        return Err(Error::invalid("vocab.txt: too many lines"));
    }
    let lowercase = lowercase.unwrap_or_else(|| !looks_cased(&tokens));
    // A repeated entry keeps its last id; entries are written in id order, as tokenizers saves.
    let mut last: HashMap<&str, usize> = HashMap::with_capacity(tokens.len());
    for (id, token) in tokens.iter().enumerate() {
        last.insert(token.as_str(), id);
    }
    let mut vocab = Map::new();
    for (id, token) in tokens.iter().enumerate() {
        if last.get(token.as_str()) == Some(&id) {
            vocab.insert(token.clone(), json!(id));
        }
    }
    let id_of = |t: &str| vocab.get(t).and_then(Value::as_u64);
    let mut specials: Vec<(u64, &str)> = SPECIAL_TOKENS
        .iter()
        .filter_map(|&t| id_of(t).map(|id| (id, t)))
        .collect();
    specials.sort();
    let added: Vec<Value> = specials
        .iter()
        .map(|&(id, t)| {
            json!({"id": id, "content": t, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let post = match (id_of("[SEP]"), id_of("[CLS]")) {
        (Some(sep), Some(cls)) => {
            json!({"type": "BertProcessing", "sep": ["[SEP]", sep], "cls": ["[CLS]", cls]})
        }
        _ => Value::Null,
    };
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": true,
            "handle_chinese_chars": true,
            "strip_accents": strip_accents,
            "lowercase": lowercase,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": Value::Object(vocab),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &[u8]) -> Vec<String> {
        parse_vocab_txt(s).unwrap()
    }

    #[test]
    fn lines_end_at_newline_only() {
        assert_eq!(parse(b"[UNK]\na\r\nb"), vec!["[UNK]", "a", "b"]);
        // U+0085 and U+2028 do not end a line; being White_Space they are trimmed at the end.
        assert_eq!(
            parse("[UNK]\nx\u{2028}y\u{85}\n".as_bytes()),
            vec!["[UNK]", "x\u{2028}y"]
        );
        // A lone \r inside a line stays (it is not at the end).
        assert_eq!(parse(b"[UNK]\na\rb\n"), vec!["[UNK]", "a\rb"]);
    }

    #[test]
    fn trailing_white_space_only_is_dropped() {
        assert_eq!(
            parse("[UNK]\n  a \t\u{3000}\u{a0}\n".as_bytes()),
            vec!["[UNK]", "  a"]
        );
        // Not White_Space: ZWSP, BOM and the information separators stay.
        assert_eq!(
            parse("\u{feff}a\n[UNK]\nb\u{200b}\nc\u{1f}\n".as_bytes()),
            vec!["\u{feff}a", "[UNK]", "b\u{200b}", "c\u{1f}"]
        );
    }

    #[test]
    fn blank_lines_are_empty_entries() {
        assert_eq!(parse(b"[UNK]\n\n \n"), vec!["[UNK]", "", ""]);
        assert_eq!(parse(b"[UNK]\n\n"), vec!["[UNK]", ""]);
        assert_eq!(parse(b"[UNK]"), vec!["[UNK]"]);
    }

    #[test]
    fn errors() {
        let e = parse_vocab_txt(b"[UNK]\nok\n\xff\n").unwrap_err();
        assert!(e.message.contains("line 3"), "{}", e.message);
        assert!(parse_vocab_txt(b"a\nb\n").is_err(), "no [UNK]");
        assert!(parse_vocab_txt(b"").is_err());
        // The BOM makes the first line something else than [UNK].
        assert!(parse_vocab_txt("\u{feff}[UNK]\n".as_bytes()).is_err());
        let big = vec![b'a'; MAX_VOCAB_TXT_BYTES + 1];
        assert!(parse_vocab_txt(&big)
            .unwrap_err()
            .message
            .contains("64 MiB"));
    }

    #[test]
    fn casing_guess() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(!looks_cased(&v(&["[UNK]", "[CLS]", "a", "##b"])));
        assert!(looks_cased(&v(&["[UNK]", "Hello"])));
        // Caseless capital letters do not count; bracketed tokens do not count.
        assert!(!looks_cased(&v(&["ℝ", "[UNK]", "[unused1]"])));
        assert!(looks_cased(&v(&["<S>"])));
        assert!(looks_cased(&v(&["ǅ"])), "titlecase lowercases");
        // "[" alone is not a bracketed token (and has no letter anyway); "[A" is not bracketed.
        assert!(looks_cased(&v(&["[A"])));
    }

    #[test]
    fn document() {
        let doc =
            bert_tokenizer_json(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nA\n[UNK]\n", None, None).unwrap();
        assert_eq!(doc["normalizer"]["lowercase"], json!(false));
        assert_eq!(doc["normalizer"]["strip_accents"], Value::Null);
        // [UNK] repeated: its last id (5) wins, and is the added token's id.
        assert_eq!(doc["model"]["vocab"]["[UNK]"], json!(5));
        let order: Vec<&str> = doc["model"]["vocab"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(order, vec!["[PAD]", "[CLS]", "[SEP]", "A", "[UNK]"]);
        let added: Vec<_> = doc["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["id"].as_u64().unwrap(),
                    t["content"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            added,
            vec![
                (0, "[PAD]".to_string()),
                (2, "[CLS]".to_string()),
                (3, "[SEP]".to_string()),
                (5, "[UNK]".to_string())
            ]
        );
        assert_eq!(doc["post_processor"]["sep"], json!(["[SEP]", 3]));
        assert_eq!(doc["post_processor"]["cls"], json!(["[CLS]", 2]));
        let doc = bert_tokenizer_json(b"[UNK]\na\n", Some(true), Some(false)).unwrap();
        assert_eq!(doc["post_processor"], Value::Null);
        assert_eq!(doc["normalizer"]["lowercase"], json!(true));
        assert_eq!(doc["normalizer"]["strip_accents"], json!(false));
    }
}
