//! Added tokens (stub).
