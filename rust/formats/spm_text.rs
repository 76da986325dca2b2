//! The .spm text vocabulary (stub).
