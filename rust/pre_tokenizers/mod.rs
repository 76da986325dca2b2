//! Pre-tokenizers of the tokenizer.json pipeline: split (and sometimes rewrite) the normalized
//! text into the words the model sees.

use crate::error::{Error, Result};
use crate::text::PreTokenizedString;
use serde_json::Value;

pub trait PreTokenizer: Send + Sync {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()>;
}

/// Build the pre-tokenizer a tokenizer.json `pre_tokenizer` object describes.
pub fn from_json(v: &Value) -> Result<Box<dyn PreTokenizer>> {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("?");
    Err(Error::unsupported(format!(
        "pre-tokenizer `{ty}` is not supported"
    )))
}
