//! The SentencePiece processor uses the crate's double-array trie (the role darts-clone plays
//! in the reference); one implementation serves every prefix search in the crate.

pub use crate::models::trie::Trie as ByteTrie;
