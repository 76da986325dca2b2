"""piecework: exact, fast tokenizers with a Rust core."""

from ._core import InvalidDataError, TokenizerError, UnsupportedModelError
from .sentencepiece import SentencePieceProcessor

__all__ = ["InvalidDataError", "SentencePieceProcessor", "TokenizerError", "UnsupportedModelError"]
