//! BERT vocab.txt (stub).
