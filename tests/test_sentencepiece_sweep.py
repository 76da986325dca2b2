"""The big differential sweep against sentencepiece (PIECEWORK_SWEEP=1 to run).

Counts are printed (run with -s) so they can be reported: for every real Unigram model,
thousands of corpus lines and random Unicode strings; then a grid of models trained here over
the normalizer / whitespace / byte-fallback / model-type options.
"""

from __future__ import annotations

import os
import random

import pytest

if not os.environ.get("PIECEWORK_SWEEP"):
    pytest.skip("set PIECEWORK_SWEEP=1 to run the sweep", allow_module_level=True)

spm = pytest.importorskip("sentencepiece")

from piecework import SentencePieceProcessor
from test_sentencepiece import (
    ALL_MODELS,
    CORNERS,
    DATA,
    corpus_lines,
    mismatches,
    spm_options,
    train,
    train_lines,
)

N_LINES = int(os.environ.get("PIECEWORK_SWEEP_LINES", "3000"))
N_RANDOM = int(os.environ.get("PIECEWORK_SWEEP_RANDOM", "1000"))

_SPECIAL = list(" \t\n\r\u00a0\u3000\u2028\u2029\u0085\u200b\u2581\u0301\u0308ﬁＡ１<>/b.-") + [
    "<s>",
    "</s>",
    "<unk>",
    "[CLS]",
    "<0x41>",
    "  ",
    "\n\n",
]


def random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.3:
                parts.append(rng.choice(_SPECIAL))
            elif r < 0.6:
                parts.append(chr(rng.randint(0x20, 0x7E)))
            elif r < 0.8:
                parts.append(chr(rng.randint(0xA0, 0x2FFF)))
            elif r < 0.9:
                parts.append(chr(rng.randint(0x3000, 0xD7FF)))
            else:
                parts.append(chr(rng.randint(0x10000, 0x1FAFF)))
        out.append("".join(parts))
    return out


def report(name: str, sp, pw, texts: list[str]) -> int:
    bad = mismatches(sp, pw, texts)
    print(f"SWEEP {name}: {len(texts) - len(bad)}/{len(texts)} identical")
    for b in bad[:3]:
        print("   ", repr(b)[:400])
    return len(bad)


@pytest.mark.parametrize("rel", ALL_MODELS)
def test_sweep_real_models(rel: str) -> None:
    path = DATA / rel
    if not path.exists():
        pytest.skip(f"{path} absent")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    texts = (
        CORNERS + corpus_lines(N_LINES, seed=11) + random_texts(N_RANDOM, seed=hash(rel) & 0xFFFF)
    )
    bad = report(rel, sp, pw, texts)
    data = path.read_bytes()
    back = SentencePieceProcessor.from_spm(pw.to_spm(), **spm_options(data))
    bad_spm = len(mismatches(sp, back, texts[:500], check_decode=False))
    print(f"SWEEP {rel} via .spm: {500 - bad_spm}/500 identical (tokens)")
    assert bad == 0 and bad_spm == 0


_WS = [(True, True), (False, False), (True, False), (False, True)]  # dummy, remove_ws
# Every model type with every normalization rule; the other switches cycle through their
# values so that each appears with each model type (a full product takes hours to train).
GRID = [
    (mt, rule, (i + j) % 2 == 1, _WS[(i + 3 * j) % 4], (i + 2 * j) % 3 == 2)
    for i, mt in enumerate(["unigram", "bpe", "word", "char"])
    for j, rule in enumerate(["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"])
]


@pytest.mark.parametrize("model_type,rule,byte_fallback,ws,suffix", GRID)
def test_sweep_trained(model_type, rule, byte_fallback, ws, suffix) -> None:
    dummy, remove_ws = ws
    lines = train_lines(800)
    kwargs = {
        "model_type": model_type,
        "normalization_rule_name": rule,
        "byte_fallback": byte_fallback,
        "add_dummy_prefix": dummy,
        "remove_extra_whitespaces": remove_ws,
        "treat_whitespace_as_suffix": suffix,
        "user_defined_symbols": ["<b>", "</b>", "\n", "  ", "▁▁", "ｆｏｏ", "@@"],
        "control_symbols": ["<ctl>"],
        "split_digits": True,
        "vocab_size": 800 if model_type != "char" else 400,
    }
    try:
        data = train(lines, **kwargs)
    except RuntimeError as e:
        pytest.skip(f"sentencepiece cannot train this combination: {e}")
    sp = spm.SentencePieceProcessor(model_proto=data)
    pw = SentencePieceProcessor(model_proto=data)
    texts = CORNERS + corpus_lines(300, seed=13) + random_texts(200, seed=17)
    name = f"{model_type}/{rule}/bf={byte_fallback}/dummy={dummy}/rmws={remove_ws}/suffix={suffix}"
    assert report(name, sp, pw, texts) == 0
