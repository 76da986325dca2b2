"""piecework: exact, fast tokenizers with a Rust core."""

from ._core import InvalidDataError, TokenizerError, UnsupportedModelError

__all__ = ["TokenizerError", "InvalidDataError", "UnsupportedModelError"]
