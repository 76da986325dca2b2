//! Decoders: turn the token strings of an id sequence back into text.

use crate::error::{Error, Result};
use serde_json::Value;

pub trait Decoder: Send + Sync {
    /// One step of the chain: tokens in, tokens out (the pipeline concatenates the result).
    fn decode_chain(&self, tokens: Vec<String>) -> Result<Vec<String>>;
}

/// Build the decoder a tokenizer.json `decoder` object describes.
pub fn from_json(v: &Value) -> Result<Box<dyn Decoder>> {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("?");
    Err(Error::unsupported(format!(
        "decoder `{ty}` is not supported"
    )))
}
