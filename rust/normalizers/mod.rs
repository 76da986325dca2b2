//! Normalizers of the tokenizer.json pipeline. Each rewrites a `NormalizedString` in place,
//! keeping its alignment to the original text exactly as `tokenizers` 0.22.1 does.

use crate::error::{Error, Result};
use crate::text::NormalizedString;
use serde_json::Value;

pub trait Normalizer: Send + Sync {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()>;
}

/// Build the normalizer a tokenizer.json `normalizer` object describes.
/// An unknown `type` is `Error::unsupported` naming it; a malformed one `Error::invalid`
/// naming the field.
pub fn from_json(v: &Value) -> Result<Box<dyn Normalizer>> {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("?");
    Err(Error::unsupported(format!(
        "normalizer `{ty}` is not supported"
    )))
}
