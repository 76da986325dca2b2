//! SentencePiece ModelProto, read with prost (stub).
