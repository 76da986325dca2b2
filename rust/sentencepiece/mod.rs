//! The sentencepiece processor: a `.model` or `.spm` vocabulary run exactly as the
//! sentencepiece library runs it (its normalizer, Unigram / BPE / WORD / CHAR segmentation,
//! byte fallback, offsets, decoding).

pub mod bpe;
pub mod vocab;
