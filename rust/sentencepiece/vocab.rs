//! Types shared by the sentencepiece readers and segmenters.

use crate::error::Result;

/// `ModelProto.SentencePiece.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PieceType {
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
}

/// One vocabulary entry; its id is its position.
#[derive(Debug, Clone, PartialEq)]
pub struct PieceEntry {
    pub piece: String,
    pub score: f32,
    pub kind: PieceType,
}

/// One segmented piece: a byte range of the *normalized* string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpPiece {
    pub id: u32,
    pub start: usize,
    pub end: usize,
}

/// A segmentation model over a whole normalized (▁-escaped) string.
pub trait Segmenter: Send + Sync {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()>;
}
