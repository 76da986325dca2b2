//! WordPiece model (stub: filled in by its implementation).

use super::{Model, Token};
use crate::error::{Error, Result};
use serde_json::Value;
use std::collections::HashMap;

pub struct WordPiece {}

impl WordPiece {
    /// Build from the tokenizer.json `model` object.
    pub fn from_json(_v: &Value) -> Result<Self> {
        Err(Error::unsupported("model WordPiece is not implemented yet"))
    }
}

impl Model for WordPiece {
    fn tokenize(&self, _piece: &str, _out: &mut Vec<Token>) -> Result<()> {
        Err(Error::unsupported("model WordPiece is not implemented yet"))
    }
    fn token_to_id(&self, _token: &str) -> Option<u32> {
        None
    }
    fn id_to_token(&self, _id: u32) -> Option<&str> {
        None
    }
    fn vocab_size(&self) -> usize {
        0
    }
    fn vocab(&self) -> HashMap<String, u32> {
        HashMap::new()
    }
}
