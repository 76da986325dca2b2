"""The settings a `.tiktoken` file does not carry: the split pattern and the special tokens of
OpenAI's published encodings (as tiktoken defines them), found by the file's SHA-256."""

from __future__ import annotations

import hashlib
import re

_R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# The alternatives of o200k_base's pattern, one per line.
_O200K_PAT = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n/]*"""
    r"""|\s*[\r\n]+"""
    r"""|\s+(?!\S)"""
    r"""|\s+"""
)
_EOT = "<|endoftext|>"

# name: (sha256 of the published file, pattern, special tokens)
ENCODINGS: dict[str, tuple[str, str, dict[str, int]]] = {
    "r50k_base": (
        "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        _R50K_PAT,
        {_EOT: 50256},
    ),
    "p50k_base": (
        "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        _R50K_PAT,
        {_EOT: 50256},
    ),
    "cl100k_base": (
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            _EOT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {_EOT: 199999, "<|endofprompt|>": 200018},
    ),
}

# One line of a .tiktoken file: base64 of the token's bytes and its rank.
_LINE = re.compile(rb"^[A-Za-z0-9+/]+={0,2} [0-9]+\r?$")


def looks_like_tiktoken(data: bytes) -> bool:
    lines = [ln for ln in data[:4096].split(b"\n")[:8] if ln.strip()]
    if len(data) > 4096 and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    return bool(lines) and all(_LINE.match(ln) for ln in lines)


def known_encoding(data: bytes) -> str | None:
    """The name of the published encoding whose file this is, if any."""
    digest = hashlib.sha256(data).hexdigest()
    return next((name for name, (h, _, _) in ENCODINGS.items() if h == digest), None)
