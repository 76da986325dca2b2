//! One error type for the whole crate. The bindings map it once to Python:
//! `InvalidData` → `piecework.InvalidDataError`, `Unsupported` → `piecework.UnsupportedModelError`,
//! everything else → `piecework.TokenizerError` (a `ValueError`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file or value is malformed, or the input cannot be tokenized with this vocabulary.
    InvalidData,
    /// A component or model kind that piecework does not implement (yet).
    Unsupported,
    /// Any other failure (bad argument, I/O).
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn invalid(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::InvalidData,
            message: message.into(),
        }
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Unsupported,
            message: message.into(),
        }
    }
    pub fn other(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Other,
            message: message.into(),
        }
    }
    /// Prefix the message with where the error happened (a file, a JSON field, a line).
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::other(e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::invalid(format!("invalid JSON: {e}"))
    }
}

/// Attach context to any `Result<T, Error>`.
pub trait ResultExt<T> {
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.context(what))
    }
}
