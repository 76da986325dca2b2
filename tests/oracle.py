"""Helpers shared by the differential tests: where the shared data is, and how to compare an
encoding of piecework with the oracle's, field by field."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# CI (and the developers' machines) have `shared/` beside the checkout; a user's clone does not.
DATA_DIR = Path(os.environ.get("PIECEWORK_DATA", REPO_ROOT.parent / "shared" / "data"))
SWEEP = os.environ.get("PIECEWORK_SWEEP", "") not in ("", "0")


# Every tokenizer.json in ../shared/data that tokenizers 0.22.1 loads, by model family.
TOKENIZER_JSON_FILES = [
    "all-minilm-l6-v2/tokenizer.json",
    "bert-base-uncased/tokenizer.json",
    "generated/bert-base-cased/tokenizer.json",
    "hf-tokenizers-data/bert-wiki.json",
    "hf-tokenizers-data/_tok.json",
    "wordlevel/wordlevel.json",
    "t5-small/tokenizer.json",
    "xlnet-base-cased/tokenizer.json",
    "pegasus/tokenizer.json",
    "rut5-large/tokenizer.json",
    "nmt-marian/tokenizer.json",
    "gpt2/tokenizer.json",
    "roberta-base/tokenizer.json",
    "phi-2/tokenizer.json",
    "falcon/tokenizer.json",
    "clip/tokenizer.json",
    "whisper-tiny/tokenizer.json",
    "wordlevel/bpe-code-tokenizer.json",
    "hf-tokenizers-data/eng_latn_300mb-hf.json",
    "hf-tokenizers-data/tiny-tokenizer.json",
    "hf-quicktour-wiki/tokenizer-wiki.json",
    "codellama/tokenizer.json",
    "phi-3-mini/tokenizer.json",
    "mistral-7b-v0.3/tokenizer.json",
]


def data_path(*parts: str) -> Path:
    """The path of a shared data file; skips the calling test (with the reason) when absent."""
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared test data not found: {path} (expected ../shared/data beside the repo)")
    return path


def corpus_lines(limit: int) -> list[str]:
    """Up to `limit` lines of each of the English, multilingual and Japanese corpora of the
    shared data (none when it is absent)."""
    lines: list[str] = []
    for name in ("big.txt", "udhr2_all.txt", "wagahaiwa_nekodearu.txt"):
        path = DATA_DIR / "corpora" / name
        if path.exists():
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()[:limit]
    return lines


ENCODING_FIELDS = (
    "ids",
    "tokens",
    "offsets",
    "type_ids",
    "attention_mask",
    "special_tokens_mask",
    "word_ids",
    "sequence_ids",
    "n_sequences",
)


def _first_difference(a: Any, b: Any) -> str:
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                lo = max(0, i - 3)
                return (
                    f"first difference at index {i}: ours {x!r} vs theirs {y!r}\n"
                    f"    ours[{lo}:{i + 4}]   = {a[lo : i + 4]!r}\n"
                    f"    theirs[{lo}:{i + 4}] = {b[lo : i + 4]!r}"
                )
        return f"lengths differ: ours {len(a)} vs theirs {len(b)}"
    return f"ours {a!r} vs theirs {b!r}"


def _clip(items: list, limit: int = 24) -> str:
    if len(items) <= limit:
        return repr(items)
    return f"{items[:limit]!r} ... (+{len(items) - limit} more)"


def compare_encodings(ours: Any, theirs: Any, context: str = "", _path: str = "encoding") -> None:
    """Assert that a piecework `Encoding` equals a `tokenizers` `Encoding` in every field,
    overflowing encodings included (recursively)."""
    where = f" [{context}]" if context else ""
    for field in ENCODING_FIELDS:
        a = getattr(ours, field)
        b = getattr(theirs, field)
        if field == "offsets":
            a = [tuple(x) for x in a]
            b = [tuple(x) for x in b]
        if a != b:
            raise AssertionError(
                f"{_path}.{field} differs{where}:\n  {_first_difference(a, b)}\n"
                f"  ours tokens:   {_clip(list(ours.tokens))}\n"
                f"  theirs tokens: {_clip(list(theirs.tokens))}"
            )
    a_over, b_over = ours.overflowing, theirs.overflowing
    if len(a_over) != len(b_over):
        raise AssertionError(
            f"{_path}.overflowing: ours has {len(a_over)} encodings, theirs {len(b_over)}{where}"
        )
    for i, (x, y) in enumerate(zip(a_over, b_over)):
        compare_encodings(x, y, context, f"{_path}.overflowing[{i}]")


def compare_batches(ours: list, theirs: list, context: str = "") -> None:
    assert len(ours) == len(theirs), f"batch sizes differ: {len(ours)} vs {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        compare_encodings(a, b, context, f"batch[{i}]")
