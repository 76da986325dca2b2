//! piecework: exact, fast tokenization.
//!
//! Data flows one way: a reader (`formats`) builds a [`tokenizer::Tokenizer`] (the tokenizer.json
//! pipeline: added tokens → normalizer → pre-tokenizer → model → post-processor) or a
//! [`sentencepiece::SentencePiece`] processor (a `.model` / `.spm` vocabulary run the way the
//! sentencepiece library runs it); either turns text into ids, and, when asked, tokens and
//! offsets. Decoding runs the decoder chain back to text.
//!
//! No function here panics on data: every malformed input is an [`error::Error`].

pub mod added_vocabulary;
pub mod byte_level;
pub mod charsmap;
mod cuts;
pub mod decoders;
pub mod encoding;
pub mod error;
mod fast;
pub mod formats;
pub mod models;
pub mod normalizers;
pub mod parallel;
pub mod pre_tokenizers;
pub mod processors;
pub mod sentencepiece;
pub mod text;
pub mod tokenizer;

#[cfg(feature = "python")]
mod bindings;

pub use encoding::Encoding;
pub use error::{Error, ErrorKind, Result};
pub use tokenizer::Tokenizer;

/// The tests' random numbers: a xorshift64 stream from `seed` (deterministic, no dependency;
/// each call steps the state and returns it).
#[cfg(test)]
pub(crate) fn test_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// The shared test data folder: `PIECEWORK_DATA`, else `../shared/data` beside the crate.
#[cfg(test)]
pub(crate) fn test_data_dir() -> String {
    std::env::var("PIECEWORK_DATA")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data").into())
}
