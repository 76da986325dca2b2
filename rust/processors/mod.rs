//! Post-processors: add special tokens, set type ids, join pairs.

use crate::encoding::Encoding;
use crate::error::{Error, Result};
use serde_json::Value;

pub trait PostProcessor: Send + Sync {
    /// How many tokens `process` adds (for truncation).
    fn added_tokens(&self, is_pair: bool) -> usize;
    fn process(
        &self,
        encoding: Encoding,
        pair: Option<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Encoding>;
}

/// What the reference does when there is no post-processor: set sequence ids and merge the pair.
pub fn default_process(
    encoding: Encoding,
    pair: Option<Encoding>,
    _add_special_tokens: bool,
) -> Result<Encoding> {
    let _ = (encoding, pair);
    Err(Error::other(
        "default post-processing is not implemented yet",
    ))
}

/// Build the post-processor a tokenizer.json `post_processor` object describes.
pub fn from_json(v: &Value) -> Result<Box<dyn PostProcessor>> {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("?");
    Err(Error::unsupported(format!(
        "post-processor `{ty}` is not supported"
    )))
}
