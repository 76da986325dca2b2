//! Prefix search over a vocabulary (stub).
