//! The tokenizer.json pipeline and the public Rust facade over every kind of tokenizer.

use crate::encoding::{Encoding, PaddingParams, TruncationParams};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// One input sequence: raw text, or words already split by the caller.
#[derive(Debug, Clone)]
pub enum InputSequence<'a> {
    Raw(&'a str),
    PreTokenized(Vec<&'a str>),
}

/// An immutable tokenizer. Cloning is cheap (the vocabulary is shared); changing padding or
/// truncation makes a new value with the same core.
#[derive(Clone)]
pub struct Tokenizer {
    core: Arc<Core>,
    padding: Option<PaddingParams>,
    truncation: Option<TruncationParams>,
}

pub(crate) struct Core {}

impl Tokenizer {
    /// Load a tokenizer.json document.
    pub fn from_json_str(_json: &str) -> Result<Self> {
        Err(Error::unsupported("not implemented yet"))
    }
    /// Serialize back to tokenizer.json (with the current padding and truncation).
    pub fn to_json_string(&self, _pretty: bool) -> Result<String> {
        Err(Error::unsupported("not implemented yet"))
    }
    pub fn encode(
        &self,
        _first: InputSequence<'_>,
        _pair: Option<InputSequence<'_>>,
        _add_special_tokens: bool,
    ) -> Result<Encoding> {
        Err(Error::unsupported("not implemented yet"))
    }
    /// Many inputs at once, across threads; padding (batch longest) applies to the batch.
    pub fn encode_batch(
        &self,
        _inputs: &[(InputSequence<'_>, Option<InputSequence<'_>>)],
        _add_special_tokens: bool,
    ) -> Result<Vec<Encoding>> {
        Err(Error::unsupported("not implemented yet"))
    }
    /// Only the ids of one text (no padding); the fast path.
    pub fn encode_ids(
        &self,
        _text: &str,
        _add_special_tokens: bool,
        _out: &mut Vec<u32>,
    ) -> Result<()> {
        Err(Error::unsupported("not implemented yet"))
    }
    pub fn decode(&self, _ids: &[u32], _skip_special_tokens: bool) -> Result<String> {
        Err(Error::unsupported("not implemented yet"))
    }
    pub fn token_to_id(&self, _token: &str) -> Option<u32> {
        None
    }
    pub fn id_to_token(&self, _id: u32) -> Option<String> {
        None
    }
    pub fn get_vocab(&self, _with_added_tokens: bool) -> HashMap<String, u32> {
        HashMap::new()
    }
    pub fn get_vocab_size(&self, _with_added_tokens: bool) -> usize {
        0
    }
    pub fn padding(&self) -> Option<&PaddingParams> {
        self.padding.as_ref()
    }
    pub fn truncation(&self) -> Option<&TruncationParams> {
        self.truncation.as_ref()
    }
    /// A copy with other padding.
    pub fn with_padding(&self, padding: Option<PaddingParams>) -> Tokenizer {
        Tokenizer {
            padding,
            ..self.clone()
        }
    }
    /// A copy with other truncation. Fails when the truncation cannot fit the added tokens.
    pub fn with_truncation(&self, truncation: Option<TruncationParams>) -> Result<Tokenizer> {
        Ok(Tokenizer {
            truncation,
            ..self.clone()
        })
    }
}
