"""The ids-only Unigram shortcut over texts whose normalization is plain words, against
sentencepiece: random texts built from the characters that decide whether it applies
(spaces and the controls NFKC turns into spaces, characters that start user-defined pieces,
ASCII letters before combining marks, non-ASCII characters with and without rules, unknown
characters, long words), on every real Unigram model and on models trained here with
user-defined pieces, byte fallback and the normalizer options."""

from __future__ import annotations

import random
import zlib

import pytest

spm = pytest.importorskip("sentencepiece")

from piecework import SentencePieceProcessor
from test_sentencepiece import DATA, UNIGRAM_MODELS, corpus_lines, train

_ATOMS = (
    list("abcdefghijklmnopqrstuvwxyzAEIOU0123456789.,;:!?()\"'-=<>/_{}[]#@")
    + [" ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x7f", "\x00"]
    + ["\u0301", "\u0308", "\u0338", "é", "ß", "–", "—", "€", "£", "“", "”", "«", "»", "…"]
    + ["日本", "語", "กรุงเทพ", "Привет", "مرحبا", "ﬁ", "Ａ", "①", "😀", "\u00a0", "\u3000"]
    + ["<eop>", "<eod>", "<unk>", "<s>", "▁", "the", "ing", "tion", "supercalifragilistic"]
)


def random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.choice([1, 3, 10, 40, 200])
        # Mostly plain text (so the shortcut runs), with a few odd atoms mixed in.
        plain = rng.random() < 0.6
        parts = []
        for _ in range(rng.randint(0, k)):
            if plain and rng.random() < 0.8:
                parts.append(rng.choice(["word", "a", "Tokyo", "x1", " ", " ", "\n", "é", "ab"]))
            else:
                parts.append(rng.choice(_ATOMS))
        out.append("".join(parts))
    return out


def _check(model: bytes, texts: list[str]) -> int:
    sp = spm.SentencePieceProcessor(model_proto=model)
    pw = SentencePieceProcessor(model_proto=model)
    bad = [(t, sp.encode(t), pw.encode(t)) for t in texts if sp.encode(t) != pw.encode(t)]
    assert not bad, bad[:3]
    return len(texts)


@pytest.mark.parametrize("name", UNIGRAM_MODELS)
def test_real_models(name: str) -> None:
    p = DATA / name
    if not p.exists():
        pytest.skip(f"{p} not found")
    corners = ["a ▁", "a▁", "▁", " ▁ ", "a ▁ b▁", "▁a", "é▁", "a\n▁", "<eop>", "a<eop>b", "a\u0301"]
    texts = corners + random_texts(1500, zlib.crc32(name.encode())) + corpus_lines(300, seed=7)
    _check(p.read_bytes(), texts)


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"user_defined_symbols": ["<eop>", ".", "ab", "–", "é"]},
        {"byte_fallback": True},
        {"byte_fallback": True, "user_defined_symbols": ["<x>", "."]},
        {"normalization_rule_name": "identity"},
        {"normalization_rule_name": "nfkc_cf"},
        {"remove_extra_whitespaces": False},
        {"add_dummy_prefix": False},
        {"split_by_whitespace": False},
    ],
)
def test_trained_models(opts: dict) -> None:
    model = train(corpus_lines(3000, seed=3), vocab_size=2500, **opts)
    _check(model, random_texts(1500, 11))
