//! tokenizer.json → Tokenizer (stub).
