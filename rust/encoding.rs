//! The result of encoding one input (or one pair), field for field what `tokenizers` returns.
//! Offsets are code point offsets into the original input.

use std::collections::HashMap;
use std::ops::Range;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    pub tokens: Vec<String>,
    pub words: Vec<Option<u32>>,
    pub offsets: Vec<(usize, usize)>,
    pub special_tokens_mask: Vec<u32>,
    pub attention_mask: Vec<u32>,
    pub overflowing: Vec<Encoding>,
    /// Which tokens belong to which input sequence (0 or 1); absent for a single sequence that
    /// never went through a post-processor.
    pub sequence_ranges: HashMap<usize, Range<usize>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Left,
    Right,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationStrategy {
    LongestFirst,
    OnlyFirst,
    OnlySecond,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruncationParams {
    pub direction: Direction,
    pub max_length: usize,
    pub strategy: TruncationStrategy,
    pub stride: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaddingStrategy {
    BatchLongest,
    Fixed(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaddingParams {
    pub strategy: PaddingStrategy,
    pub direction: Direction,
    pub pad_to_multiple_of: Option<usize>,
    pub pad_id: u32,
    pub pad_type_id: u32,
    pub pad_token: String,
}

impl Default for PaddingParams {
    fn default() -> Self {
        PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            direction: Direction::Right,
            pad_to_multiple_of: None,
            pad_id: 0,
            pad_type_id: 0,
            pad_token: "[PAD]".into(),
        }
    }
}

// ---- Placeholders until the encoding operations land (replaced by the processors work). ----

impl Encoding {
    /// Append `pair` to this encoding.
    pub fn merge_with(&mut self, pair: Encoding, _growing_offsets: bool) {
        self.ids.extend(pair.ids);
        self.type_ids.extend(pair.type_ids);
        self.tokens.extend(pair.tokens);
        self.words.extend(pair.words);
        self.offsets.extend(pair.offsets);
        self.special_tokens_mask.extend(pair.special_tokens_mask);
        self.attention_mask.extend(pair.attention_mask);
    }
}

pub fn truncate_encodings(
    enc: Encoding,
    pair: Option<Encoding>,
    _params: &TruncationParams,
) -> crate::error::Result<(Encoding, Option<Encoding>)> {
    Err(crate::error::Error::unsupported(
        "truncation is not implemented yet",
    ))
    .map(|()| (enc, pair))
}

pub fn pad_encodings(_encs: &mut [Encoding], _params: &PaddingParams) -> crate::error::Result<()> {
    Err(crate::error::Error::unsupported(
        "padding is not implemented yet",
    ))
}

impl PaddingParams {
    pub fn from_json(_v: &serde_json::Value) -> crate::error::Result<Self> {
        Err(crate::error::Error::unsupported(
            "padding is not implemented yet",
        ))
    }
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

impl TruncationParams {
    pub fn from_json(_v: &serde_json::Value) -> crate::error::Result<Self> {
        Err(crate::error::Error::unsupported(
            "truncation is not implemented yet",
        ))
    }
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
