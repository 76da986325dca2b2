//! Decoders: turn the token strings of an id sequence back into text.
//!
//! Each decoder is one step of a chain (tokens in, tokens out); the pipeline concatenates the
//! final tokens. The steps reproduce the reference's string operations exactly, including the
//! odd ones (the Metaspace decoder drops every replacement character of the first token, not
//! only a leading one; an empty BPE suffix inserts spaces between characters).

use crate::error::{Error, Result};
use serde_json::Value;

pub trait Decoder: Send + Sync {
    /// One step of the chain: tokens in, tokens out (the pipeline concatenates the result).
    fn decode_chain(&self, tokens: Vec<String>) -> Result<Vec<String>>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrependScheme {
    First,
    Never,
    Always,
}

/// Every decoder a tokenizer.json can name.
#[derive(Debug)]
pub enum DecoderKind {
    Bpe {
        suffix: String,
    },
    ByteLevel(crate::byte_level::ByteLevel),
    WordPiece {
        prefix: String,
        cleanup: bool,
    },
    Metaspace {
        replacement: char,
        prepend_scheme: PrependScheme,
    },
    Ctc {
        pad_token: String,
        word_delimiter_token: String,
        cleanup: bool,
    },
    Sequence(Vec<DecoderKind>),
    Replace {
        regex: onig::Regex,
        content: String,
    },
    Fuse,
    Strip {
        content: char,
        start: usize,
        stop: usize,
    },
    ByteFallback,
}

/// The cleanup rules, applied one after the other in this order (a later rule sees the
/// earlier rules' output); a rule whose pattern is absent costs no allocation.
const CLEANUP_RULES: [(&str, &str); 11] = [
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
];

/// The WordPiece decoder's cleanup: the spaces that BERT-style tokenization put before
/// punctuation and inside English contractions are removed (the CTC decoder shares it).
pub fn wordpiece_cleanup(s: &str) -> String {
    cleanup_owned(s.to_owned())
}

fn cleanup_owned(mut out: String) -> String {
    if !out.contains(' ') {
        return out;
    }
    for (pattern, replacement) in CLEANUP_RULES {
        if out.contains(pattern) {
            out = out.replace(pattern, replacement);
        }
    }
    out
}

/// `<0xXX>` → the byte, read the way the reference reads it (exactly 6 bytes, any two
/// characters `u8::from_str_radix` accepts, so lowercase hex and `+F` count too).
fn byte_token(t: &str) -> Option<u8> {
    if t.len() == 6 && t.starts_with("<0x") && t.ends_with('>') {
        u8::from_str_radix(t.get(3..5)?, 16).ok()
    } else {
        None
    }
}

fn flush_bytes(bytes: &mut Vec<u8>, out: &mut Vec<String>) {
    if bytes.is_empty() {
        return;
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push(s.to_owned()),
        // An invalid run is one U+FFFD per byte token, not per invalid sequence.
        Err(_) => out.extend(std::iter::repeat_n("\u{FFFD}".to_owned(), bytes.len())),
    }
    bytes.clear();
}

fn byte_fallback(tokens: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut bytes = Vec::new();
    for t in tokens {
        if let Some(b) = byte_token(&t) {
            bytes.push(b);
        } else {
            flush_bytes(&mut bytes, &mut out);
            out.push(t);
        }
    }
    flush_bytes(&mut bytes, &mut out);
    out
}

fn strip(token: &str, content: char, start: usize, stop: usize) -> Result<String> {
    let chars: Vec<char> = token.chars().collect();
    let mut start_cut = 0;
    for (i, &c) in chars.iter().enumerate().take(start) {
        if c != content {
            break;
        }
        start_cut = i + 1;
    }
    let mut stop_cut = chars.len();
    for i in 0..stop {
        // The reference indexes past the front here (a panic); report it instead.
        let Some(index) = chars.len().checked_sub(i + 1) else {
            return Err(Error::other(format!(
                "Strip decoder: cannot strip {stop} `{content}` from the end of {token:?}"
            )));
        };
        if chars[index] != content {
            break;
        }
        stop_cut = index;
    }
    if start_cut > stop_cut {
        return Err(Error::other(format!(
            "Strip decoder: start and stop overlap in {token:?}"
        )));
    }
    Ok(chars[start_cut..stop_cut].iter().collect())
}

fn replace(regex: &onig::Regex, content: &str, token: &str) -> Result<String> {
    // The reference never matches inside an empty token (not even an empty pattern).
    if token.is_empty() {
        return Ok(String::new());
    }
    let piece = |r: std::ops::Range<usize>| {
        token.get(r).ok_or_else(|| {
            Error::other(format!(
                "Replace decoder: a match does not fall on character boundaries in {token:?}"
            ))
        })
    };
    let mut out = String::with_capacity(token.len());
    let mut prev = 0;
    for (s, e) in regex.find_iter(token) {
        out.push_str(piece(prev..s)?);
        out.push_str(content);
        prev = e;
    }
    out.push_str(piece(prev..token.len())?);
    Ok(out)
}

impl Decoder for DecoderKind {
    fn decode_chain(&self, tokens: Vec<String>) -> Result<Vec<String>> {
        Ok(match self {
            DecoderKind::Bpe { suffix } => {
                let last = tokens.len().saturating_sub(1);
                tokens
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| t.replace(suffix.as_str(), if i == last { "" } else { " " }))
                    .collect()
            }
            DecoderKind::ByteLevel(b) => b.decode_chain(tokens)?,
            DecoderKind::WordPiece { prefix, cleanup } => tokens
                .into_iter()
                .enumerate()
                .map(|(i, mut t)| {
                    if i > 0 {
                        if t.starts_with(prefix.as_str()) {
                            t.drain(..prefix.len());
                        } else {
                            t.insert(0, ' ');
                        }
                    }
                    if *cleanup {
                        cleanup_owned(t)
                    } else {
                        t
                    }
                })
                .collect(),
            DecoderKind::Metaspace {
                replacement,
                prepend_scheme,
            } => tokens
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let drop_first = i == 0 && *prepend_scheme != PrependScheme::Never;
                    t.chars()
                        .filter_map(|c| {
                            if c != *replacement {
                                Some(c)
                            } else if drop_first {
                                None
                            } else {
                                Some(' ')
                            }
                        })
                        .collect()
                })
                .collect(),
            DecoderKind::Ctc {
                pad_token,
                word_delimiter_token,
                cleanup,
            } => {
                let mut out: Vec<String> = Vec::new();
                let mut last: Option<String> = None;
                for t in tokens {
                    if last.as_ref() == Some(&t) {
                        continue;
                    }
                    let mut r = t.replace(pad_token.as_str(), "");
                    if *cleanup {
                        r = wordpiece_cleanup(&r).replace(word_delimiter_token.as_str(), " ");
                    }
                    if !r.is_empty() {
                        out.push(r);
                    }
                    last = Some(t);
                }
                out
            }
            DecoderKind::Sequence(list) => {
                let mut tokens = tokens;
                for d in list {
                    tokens = d.decode_chain(tokens)?;
                }
                tokens
            }
            DecoderKind::Replace { regex, content } => tokens
                .iter()
                .map(|t| replace(regex, content, t))
                .collect::<Result<_>>()?,
            DecoderKind::Fuse => vec![tokens.concat()],
            DecoderKind::Strip {
                content,
                start,
                stop,
            } => tokens
                .iter()
                .map(|t| strip(t, *content, *start, *stop))
                .collect::<Result<_>>()?,
            DecoderKind::ByteFallback => byte_fallback(tokens),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json

fn string_field(v: &Value, name: &str, what: &str) -> Result<String> {
    v.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Error::invalid(format!("decoder `{what}`: field `{name}` must be a string")))
}

fn bool_field(v: &Value, name: &str, what: &str) -> Result<bool> {
    v.get(name).and_then(Value::as_bool).ok_or_else(|| {
        Error::invalid(format!(
            "decoder `{what}`: field `{name}` must be a boolean"
        ))
    })
}

fn usize_field(v: &Value, name: &str, what: &str) -> Result<usize> {
    v.get(name)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "decoder `{what}`: field `{name}` must be a non-negative integer"
            ))
        })
}

/// A JSON string holding exactly one character (serde's `char`).
fn char_field(v: &Value, name: &str, what: &str) -> Result<char> {
    let s = string_field(v, name, what)?;
    let mut it = s.chars();
    match (it.next(), it.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(Error::invalid(format!(
            "decoder `{what}`: field `{name}` must be a single character, got {s:?}"
        ))),
    }
}

/// The pattern escaped so that Oniguruma matches it literally (the characters the reference's
/// `regex::escape` escapes).
fn escape_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn replace_from(v: &Value) -> Result<DecoderKind> {
    const WHAT: &str = "Replace";
    let pattern = v
        .get("pattern")
        .and_then(Value::as_object)
        .filter(|o| o.len() == 1)
        .ok_or_else(|| {
            Error::invalid(
                "decoder `Replace`: field `pattern` must be {\"String\": ...} or {\"Regex\": ...}",
            )
        })?;
    let source =
        match (pattern.get("String"), pattern.get("Regex")) {
            (Some(Value::String(s)), None) => escape_literal(s),
            (None, Some(Value::String(r))) => r.clone(),
            _ => return Err(Error::invalid(
                "decoder `Replace`: field `pattern` must be {\"String\": ...} or {\"Regex\": ...}",
            )),
        };
    let regex = onig::Regex::new(&source).map_err(|e| {
        Error::invalid(format!(
            "decoder `Replace`: invalid pattern {source:?}: {e}"
        ))
    })?;
    Ok(DecoderKind::Replace {
        regex,
        content: string_field(v, "content", WHAT)?,
    })
}

fn metaspace_from(v: &Value) -> Result<DecoderKind> {
    const WHAT: &str = "Metaspace";
    let replacement = char_field(v, "replacement", WHAT)?;
    let mut prepend_scheme = match v.get("prepend_scheme") {
        None => PrependScheme::Always,
        Some(p) => match p.as_str() {
            Some("first") => PrependScheme::First,
            Some("never") => PrependScheme::Never,
            Some("always") => PrependScheme::Always,
            _ => {
                return Err(Error::invalid(format!(
                    "decoder `Metaspace`: field `prepend_scheme` must be \"first\", \"never\" or \"always\", got {p}"
                )))
            }
        },
    };
    match v.get("add_prefix_space") {
        None | Some(Value::Null) | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            if prepend_scheme != PrependScheme::Never {
                return Err(Error::invalid(
                    "decoder `Metaspace`: add_prefix_space does not match declared prepend_scheme",
                ));
            }
            prepend_scheme = PrependScheme::Never;
        }
        Some(_) => {
            return Err(Error::invalid(
                "decoder `Metaspace`: field `add_prefix_space` must be a boolean",
            ))
        }
    }
    if v.get("split")
        .is_some_and(|s| !s.is_boolean() && !s.is_null())
    {
        return Err(Error::invalid(
            "decoder `Metaspace`: field `split` must be a boolean",
        ));
    }
    Ok(DecoderKind::Metaspace {
        replacement,
        prepend_scheme,
    })
}

/// The decoders that the reference recognises by their fields alone (objects without a known
/// `type`), tried in its order.
fn legacy_from(v: &Value) -> Option<DecoderKind> {
    if let Ok(suffix) = string_field(v, "suffix", "") {
        return Some(DecoderKind::Bpe { suffix });
    }
    if let (Ok(prefix), Ok(cleanup)) = (string_field(v, "prefix", ""), bool_field(v, "cleanup", ""))
    {
        return Some(DecoderKind::WordPiece { prefix, cleanup });
    }
    if let (Ok(pad_token), Ok(word_delimiter_token), Ok(cleanup)) = (
        string_field(v, "pad_token", ""),
        string_field(v, "word_delimiter_token", ""),
        bool_field(v, "cleanup", ""),
    ) {
        return Some(DecoderKind::Ctc {
            pad_token,
            word_delimiter_token,
            cleanup,
        });
    }
    if let Ok(r) = replace_from(v) {
        return Some(r);
    }
    if let (Ok(content), Ok(start), Ok(stop)) = (
        char_field(v, "content", ""),
        usize_field(v, "start", ""),
        usize_field(v, "stop", ""),
    ) {
        return Some(DecoderKind::Strip {
            content,
            start,
            stop,
        });
    }
    None
}

/// Build the decoder a tokenizer.json `decoder` object describes (as a concrete value).
pub fn decoder_from_json(v: &Value) -> Result<DecoderKind> {
    if !v.is_object() {
        return Err(Error::invalid(format!(
            "decoder: expected an object, got {v}"
        )));
    }
    let ty = v.get("type").and_then(Value::as_str);
    Ok(match ty {
        Some("BPEDecoder") => DecoderKind::Bpe {
            suffix: string_field(v, "suffix", "BPEDecoder")?,
        },
        Some("ByteLevel") => {
            DecoderKind::ByteLevel(crate::byte_level::ByteLevel::from_json_strict(v)?)
        }
        Some("WordPiece") => DecoderKind::WordPiece {
            prefix: string_field(v, "prefix", "WordPiece")?,
            cleanup: bool_field(v, "cleanup", "WordPiece")?,
        },
        Some("Metaspace") => metaspace_from(v)?,
        Some("CTC") => DecoderKind::Ctc {
            pad_token: string_field(v, "pad_token", "CTC")?,
            word_delimiter_token: string_field(v, "word_delimiter_token", "CTC")?,
            cleanup: bool_field(v, "cleanup", "CTC")?,
        },
        Some("Sequence") => {
            let list = v.get("decoders").and_then(Value::as_array).ok_or_else(|| {
                Error::invalid("decoder `Sequence`: missing list field `decoders`")
            })?;
            DecoderKind::Sequence(
                list.iter()
                    .enumerate()
                    .map(|(i, d)| {
                        decoder_from_json(d)
                            .map_err(|e| e.context(format!("decoder `Sequence`.decoders[{i}]")))
                    })
                    .collect::<Result<_>>()?,
            )
        }
        Some("Replace") => replace_from(v)?,
        Some("Fuse") => DecoderKind::Fuse,
        Some("Strip") => DecoderKind::Strip {
            content: char_field(v, "content", "Strip")?,
            start: usize_field(v, "start", "Strip")?,
            stop: usize_field(v, "stop", "Strip")?,
        },
        Some("ByteFallback") => DecoderKind::ByteFallback,
        other => match legacy_from(v) {
            Some(d) => d,
            None => {
                return Err(match other {
                    Some(name) => Error::unsupported(format!("decoder `{name}` is not supported")),
                    None => {
                        Error::invalid("decoder: no `type`, and the fields match no known decoder")
                    }
                })
            }
        },
    })
}

/// Build the decoder a tokenizer.json `decoder` object describes.
pub fn from_json(v: &Value) -> Result<Box<dyn Decoder>> {
    Ok(Box::new(decoder_from_json(v)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: Value, tokens: &[&str]) -> Vec<String> {
        decoder_from_json(&v)
            .unwrap()
            .decode_chain(tokens.iter().map(|t| t.to_string()).collect())
            .unwrap()
    }

    fn joined(v: Value, tokens: &[&str]) -> String {
        run(v, tokens).concat()
    }

    #[test]
    fn wordpiece_joins_prefixed_pieces_and_cleans_up() {
        let wp = json!({"type": "WordPiece", "prefix": "##", "cleanup": true});
        assert_eq!(
            joined(wp.clone(), &["un", "##aff", "##able", "."]),
            "unaffable."
        );
        // Cleanup works inside each token (after its space is added), never across tokens.
        assert_eq!(joined(wp.clone(), &["I", "do not", "!"]), "I don't!");
        assert_eq!(joined(wp.clone(), &["I", "do", "not"]), "I do not");
        assert_eq!(joined(wp.clone(), &["it", "'s"]), "it's");
        assert_eq!(joined(wp, &["it", "'", "s"]), "it ' s");
        let raw = json!({"type": "WordPiece", "prefix": "##", "cleanup": false});
        assert_eq!(joined(raw, &["##a", "b", "."]), "##a b .");
    }

    #[test]
    fn metaspace_drops_every_replacement_of_the_first_token() {
        let m = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true});
        assert_eq!(joined(m.clone(), &["▁▁a▁b", "▁c"]), "ab c");
        let never = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"});
        assert_eq!(joined(never, &["▁a", "▁b"]), " a b");
        // Old files: add_prefix_space false means "never", and contradicts any other scheme.
        let old = json!({"type": "Metaspace", "replacement": "▁", "add_prefix_space": false,
            "prepend_scheme": "never"});
        assert_eq!(joined(old, &["▁a"]), " a");
        let bad = json!({"type": "Metaspace", "replacement": "▁", "add_prefix_space": false});
        assert!(decoder_from_json(&bad).is_err());
        let two = json!({"type": "Metaspace", "replacement": "▁▁"});
        assert!(decoder_from_json(&two)
            .unwrap_err()
            .message
            .contains("replacement"));
    }

    #[test]
    fn byte_fallback_runs() {
        let bf = json!({"type": "ByteFallback"});
        assert_eq!(
            run(bf.clone(), &["a", "<0xC3>", "<0xA9>", "b"]),
            ["a", "é", "b"]
        );
        // An invalid run gives one U+FFFD per byte token.
        assert_eq!(
            joined(bf.clone(), &["<0xEA>", "<0x99>"]),
            "\u{FFFD}\u{FFFD}"
        );
        assert_eq!(
            joined(bf.clone(), &["<0xC3>", "<0xA9>", "<0xA9>"]),
            "\u{FFFD}\u{FFFD}\u{FFFD}"
        );
        // Lowercase hex is read too; other spellings are left alone.
        assert_eq!(
            run(bf.clone(), &["<0x41>", "<0x4>", "<0x041>"]),
            ["A", "<0x4>", "<0x041>"]
        );
        assert_eq!(joined(bf, &["<0xc3>", "<0xa9>"]), "é");
    }

    #[test]
    fn llama_chain() {
        let chain = json!({"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}
        ]});
        assert_eq!(joined(chain.clone(), &["▁", "▁Hello"]), " Hello");
        assert_eq!(joined(chain.clone(), &["<s>", "▁Hello"]), "<s> Hello");
        assert_eq!(joined(chain, &["▁Hi", "<0x21>"]), "Hi!");
    }

    #[test]
    fn strip_bounds() {
        let s = json!({"type": "Strip", "content": "x", "start": 2, "stop": 1});
        assert_eq!(run(s.clone(), &["xxxay", "xax", "ax"]), ["xay", "a", "a"]);
        // Stripping past the token's start is where the reference panics: an error here.
        assert!(decoder_from_json(&s)
            .unwrap()
            .decode_chain(vec![String::new()])
            .is_err());
        assert!(decoder_from_json(&s)
            .unwrap()
            .decode_chain(vec!["xx".into()])
            .is_err());
    }

    #[test]
    fn replace_string_is_literal_and_regex_is_onig() {
        let lit = json!({"type": "Replace", "pattern": {"String": "a.b"}, "content": "-"});
        assert_eq!(run(lit, &["a.bXaxb", ""]), ["-Xaxb", ""]);
        let re = json!({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": "_"});
        assert_eq!(run(re, &["a  b\tc"]), ["a_b_c"]);
        let bad = json!({"type": "Replace", "pattern": {"Regex": "("}, "content": "_"});
        assert_eq!(
            decoder_from_json(&bad).unwrap_err().kind,
            crate::error::ErrorKind::InvalidData
        );
    }

    #[test]
    fn bpe_ctc_fuse() {
        let bpe = json!({"type": "BPEDecoder", "suffix": "</w>"});
        assert_eq!(
            run(bpe, &["hel", "lo</w>", "wor", "ld</w>"]),
            ["hel", "lo ", "wor", "ld"]
        );
        let empty = json!({"type": "BPEDecoder", "suffix": ""});
        assert!(run(empty, &[]).is_empty());
        let ctc = json!({"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": true});
        assert_eq!(
            joined(
                ctc,
                &["<pad>", "h", "h", "e", "l", "<pad>", "l", "|", "o", "o"]
            ),
            "hell o"
        );
        assert_eq!(run(json!({"type": "Fuse"}), &["a", "b"]), ["ab"]);
    }

    #[test]
    fn json_errors_and_legacy_objects() {
        let err = decoder_from_json(&json!({"type": "Nope"})).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Unsupported);
        assert!(err.message.contains("`Nope`"));
        let err = decoder_from_json(&json!({"type": "WordPiece", "prefix": "##"})).unwrap_err();
        assert!(err.message.contains("cleanup"));
        // Without a known type the fields decide, in the reference's order.
        let legacy = decoder_from_json(&json!({"prefix": "##", "cleanup": false})).unwrap();
        assert!(matches!(legacy, DecoderKind::WordPiece { .. }));
    }
}
