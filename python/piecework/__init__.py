"""piecework: exact, fast tokenizers with a Rust core.

``Tokenizer`` reads a Hugging Face tokenizer.json, a BERT vocab.txt, a SentencePiece .model or a
.spm text vocabulary and encodes exactly as ``tokenizers`` (or ``sentencepiece``) does.
"""

from ._core import (
    Encoding,
    InvalidDataError,
    TokenizerError,
    UnsupportedModelError,
    get_num_threads,
    set_num_threads,
)
from .batch import TokenBatch
from .sentencepiece import SentencePieceProcessor
from .tokenizer import Tokenizer, detect_kind

__version__ = "0.1.0"

__all__ = [
    "Encoding",
    "InvalidDataError",
    "SentencePieceProcessor",
    "TokenBatch",
    "Tokenizer",
    "TokenizerError",
    "UnsupportedModelError",
    "detect_kind",
    "get_num_threads",
    "set_num_threads",
]
