//! The vocabulary models. Each turns one pre-token (a `&str`) into tokens whose offsets are
//! byte ranges inside that pre-token.

pub mod bpe;
pub mod trie;
pub mod unigram;
pub mod wordlevel;
pub mod wordpiece;

use crate::error::Result;
use std::collections::HashMap;

/// One token produced by a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub id: u32,
    /// The token's text, when it differs from `id_to_token(id)` (a fused unknown run, an entry
    /// that shares its id with another). `None` in the common case, so no allocation is made.
    pub value: Option<Box<str>>,
    /// Byte range inside the pre-token the model was given.
    pub offsets: (usize, usize),
}

impl Token {
    pub fn new(id: u32, start: usize, end: usize) -> Self {
        Token {
            id,
            value: None,
            offsets: (start, end),
        }
    }
    pub fn with_value(id: u32, value: &str, start: usize, end: usize) -> Self {
        Token {
            id,
            value: Some(value.into()),
            offsets: (start, end),
        }
    }
}

/// What every model offers the pipeline.
pub trait Model: Send + Sync {
    /// Append the tokens of `piece` to `out`.
    fn tokenize(&self, piece: &str, out: &mut Vec<Token>) -> Result<()>;
    fn token_to_id(&self, token: &str) -> Option<u32>;
    fn id_to_token(&self, id: u32) -> Option<&str>;
    /// Number of entries as `tokenizers`' `Model.get_vocab_size()` reports it.
    fn vocab_size(&self) -> usize;
    /// Every (token, id) pair, as `get_vocab()` reports it.
    fn vocab(&self) -> HashMap<String, u32>;
}

/// The model of a tokenizer.json pipeline.
pub enum ModelWrapper {
    WordPiece(wordpiece::WordPiece),
    WordLevel(wordlevel::WordLevel),
    Unigram(unigram::Unigram),
    Bpe(Box<bpe::Bpe>),
}

impl ModelWrapper {
    pub fn as_model(&self) -> &dyn Model {
        match self {
            ModelWrapper::WordPiece(m) => m,
            ModelWrapper::WordLevel(m) => m,
            ModelWrapper::Unigram(m) => m,
            ModelWrapper::Bpe(m) => m.as_ref(),
        }
    }
}
