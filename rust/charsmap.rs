//! The SentencePiece precompiled charsmap: a double-array trie of source strings and a blob of
//! NUL-terminated replacements. Shared by the `Precompiled` normalizer of tokenizer.json and by
//! the sentencepiece normalizer. (stub)
