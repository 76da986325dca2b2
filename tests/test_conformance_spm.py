"""`piecework.Tokenizer` over every SentencePiece `.model` in ../shared/data against the
`sentencepiece` library: ids, pieces, offsets (sentencepiece's byte offsets as code points) and
decoding. (The `SentencePieceProcessor` drop-in has its own tests in test_sentencepiece.py.)

`PIECEWORK_SWEEP=1` runs every corpus line instead of a bounded sample.
"""

from __future__ import annotations

import random

import pytest

spm = pytest.importorskip("sentencepiece")
import piecework
from oracle import DATA_DIR as DATA
from oracle import SWEEP

MODELS = [
    "llama2/tokenizer.model",
    "mistral-7b-v0.3/tokenizer.model.v3",
    "bpemb-en/en.wiki.bpe.vs100000.model",
    "hf-transformers-fixtures/test_sentencepiece_bpe.model",
    "hf-transformers-fixtures/spiece.model",
    "xlnet-base-cased/spiece.model",
    "pegasus/pegasus.model",
    "rut5-large/spiece.model",
    "albert-de-privately/30k-clean.model",
    "bigbird-gpt2-spm/gpt2.model",
    "spm-test/test_model.model",
    "spm-test/test_ja_model.model",
    "seqio-test/sentencepiece.model",
    "tftext-test/fast_sentencepiece.model",
    "nmt-marian/vocab.joint.spm",
]


def _lines() -> list[str]:
    if not DATA.is_dir():
        pytest.skip(f"shared test data not found at {DATA} (only present beside the CI checkout)")
    out: list[str] = []
    for name in [
        "sherlock.txt",
        "wagahaiwa_nekodearu.txt",
        "udhr2_all.txt",
        "emoji/emoji-test-derived.txt",
    ]:
        p = DATA / "corpora" / name
        if p.is_file():
            out.extend(x for x in p.read_text(encoding="utf-8").splitlines())
    rng = random.Random(7)
    rng.shuffle(out)
    corners = [
        "",
        " ",
        "  a  b  ",
        "\t",
        "a\u3000b",
        "x" * 50,
        "e\u0301",
        "\U0001f469\u200d\U0001f4bb",
        "<s> </s> <unk>",
    ]
    return corners + (out if SWEEP else out[:400])


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return _lines()


def _char_offsets(text: str, proto) -> list[tuple[int, int]]:
    index = []
    for i, ch in enumerate(text):
        index.extend([i] * len(ch.encode("utf-8")))
    index.append(len(text))
    return [(index[p.begin], index[p.end]) for p in proto.pieces]


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_sentencepiece(name: str, lines: list[str]) -> None:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    ref = spm.SentencePieceProcessor(model_file=str(path))
    ours = piecework.Tokenizer.from_file(str(path))
    bad = []
    for text in lines:
        proto = ref.encode(text, out_type="proto")
        want = (
            [p.id for p in proto.pieces],
            [p.piece for p in proto.pieces],
            _char_offsets(text, proto),
        )
        enc = ours.encode(text)
        got = (enc.ids, enc.tokens, [tuple(o) for o in enc.offsets])
        if got != want:
            bad.append((text, got, want))
        elif ours.decode(want[0]) != ref.decode(want[0]):
            bad.append((text, "decode", ours.decode(want[0]), ref.decode(want[0])))
        elif ours.encode_ids(text) != want[0]:
            bad.append((text, "encode_ids"))
    assert not bad, f"{len(bad)} of {len(lines)} differ for {name}; first: {bad[0]!r}"
