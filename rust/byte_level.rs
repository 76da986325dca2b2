//! ByteLevel: the GPT-2 byte↔unicode mapping, used as pre-tokenizer, normalizer, decoder and
//! post-processor (offset trimming). (stub)

use crate::decoders::Decoder;
use crate::encoding::Encoding;
use crate::error::{Error, Result};
use crate::normalizers::Normalizer;
use crate::pre_tokenizers::PreTokenizer;
use crate::processors::PostProcessor;
use crate::text::{NormalizedString, PreTokenizedString};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct ByteLevel {
    pub add_prefix_space: bool,
    pub trim_offsets: bool,
    pub use_regex: bool,
}

impl ByteLevel {
    /// From any tokenizer.json `{"type": "ByteLevel", ...}` object (missing fields take the
    /// reference defaults).
    pub fn from_json(_v: &Value) -> Result<Self> {
        Err(Error::unsupported("`ByteLevel` is not implemented yet"))
    }
}

/// Trim the leading/trailing whitespace (Ġ) of each token's offsets, as the ByteLevel and
/// RobertaProcessing post-processors do when `trim_offsets` is on.
pub fn process_offsets(_encoding: &mut Encoding, _add_prefix_space: bool) {}

impl Normalizer for ByteLevel {
    fn normalize(&self, _n: &mut NormalizedString) -> Result<()> {
        Err(Error::unsupported("`ByteLevel` is not implemented yet"))
    }
}
impl PreTokenizer for ByteLevel {
    fn pre_tokenize(&self, _pts: &mut PreTokenizedString) -> Result<()> {
        Err(Error::unsupported("`ByteLevel` is not implemented yet"))
    }
}
impl Decoder for ByteLevel {
    fn decode_chain(&self, _tokens: Vec<String>) -> Result<Vec<String>> {
        Err(Error::unsupported("`ByteLevel` is not implemented yet"))
    }
}
impl PostProcessor for ByteLevel {
    fn added_tokens(&self, _is_pair: bool) -> usize {
        0
    }
    fn process(&self, _e: Encoding, _p: Option<Encoding>, _a: bool) -> Result<Encoding> {
        Err(Error::unsupported("`ByteLevel` is not implemented yet"))
    }
}
