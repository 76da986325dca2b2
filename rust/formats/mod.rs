//! Readers (and writers) of the files tokenizers ship as.
pub mod sentencepiece;
pub mod spm_text;
pub mod tekken;
pub mod tiktoken;
pub mod tokenizer_json;
pub mod vocab_txt;
