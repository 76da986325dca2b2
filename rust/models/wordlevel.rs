//! WordLevel: the whole pre-token is looked up; if absent it becomes the unknown token over the
//! whole piece, or an error when the vocabulary has no unknown token (as in `tokenizers` 0.22.1).

use super::wordpiece::{build_vocab, model_object, required_str, vocab_from_json};
use super::{Model, Token};
use crate::error::{Error, Result};
use ahash::{AHashMap, AHashSet};
use serde_json::Value;
use std::collections::HashMap;

pub struct WordLevel {
    /// Boxed so the model enum stays small.
    d: Box<WordLevelData>,
}

struct WordLevelData {
    vocab: AHashMap<String, u32>,
    /// Among entries sharing an id, the last one given.
    vocab_r: AHashMap<u32, Box<str>>,
    shared_ids: AHashSet<u32>,
    unk_token: String,
}

impl WordLevel {
    /// Build from (entry, id) pairs in order: a repeated entry keeps its last id; an id shared by
    /// several entries decodes to the last of them.
    pub fn new(vocab: Vec<(String, u32)>, unk_token: impl Into<String>) -> Self {
        let (vocab, vocab_r, shared_ids) = build_vocab(vocab);
        WordLevel {
            d: Box::new(WordLevelData {
                vocab,
                vocab_r,
                shared_ids,
                unk_token: unk_token.into(),
            }),
        }
    }

    /// Build from the tokenizer.json `model` object; `vocab` and `unk_token` are required.
    pub fn from_json(v: &Value) -> Result<Self> {
        let obj = model_object(v, "WordLevel")?;
        let vocab = match obj.get("vocab") {
            Some(vocab) => vocab_from_json(vocab, "model.vocab")?,
            None => return Err(Error::invalid("model.vocab: missing field")),
        };
        let unk = required_str(obj, "unk_token")?;
        Ok(WordLevel::new(vocab, unk))
    }

    pub fn unk_token(&self) -> &str {
        &self.d.unk_token
    }

    fn token(&self, id: u32, text: &str, len: usize) -> Token {
        if self.d.shared_ids.contains(&id) && self.d.vocab_r.get(&id).map(|t| &**t) != Some(text) {
            Token::with_value(id, text, 0, len)
        } else {
            Token::new(id, 0, len)
        }
    }
}

impl Model for WordLevel {
    fn tokenize(&self, piece: &str, out: &mut Vec<Token>) -> Result<()> {
        if let Some(&id) = self.d.vocab.get(piece) {
            out.push(self.token(id, piece, piece.len()));
        } else if let Some(&id) = self.d.vocab.get(&self.d.unk_token) {
            out.push(self.token(id, &self.d.unk_token, piece.len()));
        } else {
            return Err(Error::invalid(format!(
                "WordLevel: the unknown token {:?} is needed but missing from the vocabulary",
                self.d.unk_token
            )));
        }
        Ok(())
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.d.vocab.get(token).copied()
    }

    fn id_to_token(&self, id: u32) -> Option<&str> {
        self.d.vocab_r.get(&id).map(|t| &**t)
    }

    fn vocab_size(&self) -> usize {
        self.d.vocab.len()
    }

    fn vocab(&self) -> HashMap<String, u32> {
        self.d
            .vocab
            .iter()
            .map(|(t, &id)| (t.clone(), id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(m: &WordLevel, s: &str) -> Result<Vec<Token>> {
        let mut out = Vec::new();
        m.tokenize(s, &mut out)?;
        Ok(out)
    }

    #[test]
    fn whole_piece_lookup_and_unknown() {
        let m = WordLevel::new(
            vec![("<unk>".into(), 0), ("hello".into(), 1), ("𝔸".into(), 2)],
            "<unk>",
        );
        assert_eq!(run(&m, "hello").unwrap(), vec![Token::new(1, 0, 5)]);
        assert_eq!(run(&m, "𝔸").unwrap(), vec![Token::new(2, 0, 4)]);
        // Not a prefix search: "hell" and "hellos" are unknown, covering the whole piece.
        assert_eq!(run(&m, "hellos").unwrap(), vec![Token::new(0, 0, 6)]);
        assert_eq!(run(&m, "hell").unwrap(), vec![Token::new(0, 0, 4)]);
    }

    #[test]
    fn missing_unknown_is_an_error() {
        let m = WordLevel::new(vec![("a".into(), 0)], "[UNK]");
        assert_eq!(run(&m, "a").unwrap(), vec![Token::new(0, 0, 1)]);
        let e = run(&m, "b").unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::InvalidData);
    }

    #[test]
    fn shared_ids() {
        let m = WordLevel::new(vec![("a".into(), 3), ("b".into(), 3)], "a");
        assert_eq!(m.id_to_token(3), Some("b"));
        assert_eq!(m.vocab_size(), 2);
        assert_eq!(run(&m, "a").unwrap(), vec![Token::with_value(3, "a", 0, 1)]);
        assert_eq!(run(&m, "b").unwrap(), vec![Token::new(3, 0, 1)]);
        assert_eq!(
            run(&m, "zz").unwrap(),
            vec![Token::with_value(3, "a", 0, 2)]
        );
    }

    #[test]
    fn from_json_requires_unk_token() {
        let v = json!({"type": "WordLevel", "vocab": {"a": 0}});
        let e = WordLevel::from_json(&v).err().unwrap();
        assert!(e.message.contains("unk_token"), "{}", e.message);
        let v = json!({"vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"});
        let m = WordLevel::from_json(&v).unwrap();
        assert_eq!(run(&m, "q").unwrap(), vec![Token::new(1, 0, 1)]);
        let v = json!({"vocab": {"a": 1.5}, "unk_token": "[UNK]"});
        let e = WordLevel::from_json(&v).err().unwrap();
        assert!(e.message.starts_with("model.vocab[\"a\"]"), "{}", e.message);
    }
}
