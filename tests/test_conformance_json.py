"""Every tokenizer.json in ../shared/data against tokenizers 0.22.1, on real corpus lines.

The corpus sample is bounded for CI; `PIECEWORK_SWEEP=1` runs every line of every corpus file
(and more per file), which is how the counts in the issue notes were made.
"""

from __future__ import annotations

import os
import random

import pytest

tokenizers = pytest.importorskip("tokenizers")
import piecework
from oracle import DATA_DIR as DATA
from oracle import SWEEP, TOKENIZER_JSON_FILES

# Lines per file: bounded in CI; the sweep takes PIECEWORK_SWEEP_LINES (default: every line).
LINES = int(os.environ.get("PIECEWORK_SWEEP_LINES", "0") or 0) if SWEEP else 300


CORPORA = [
    "corpora/big.txt",
    "corpora/sherlock.txt",
    "corpora/botchan.txt",
    "corpora/wagahaiwa_nekodearu.txt",
    "corpora/udhr2_all.txt",
    "corpora/emoji/emoji-test-derived.txt",
]


def _need_data() -> None:
    if not DATA.is_dir():
        pytest.skip(f"shared test data not found at {DATA} (only present beside the CI checkout)")


def _corpus_lines() -> list[str]:
    lines: list[str] = []
    extra = sorted((DATA / "corpora" / "wikipedia-mars").glob("*.txt")) + sorted(
        (DATA / "corpora" / "lipsum-simdutf8").glob("*.txt")
    )
    for p in [DATA / c for c in CORPORA] + extra:
        if p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace")
            lines.extend(line for line in text.splitlines() if line.strip())
    rng = random.Random(1234)
    rng.shuffle(lines)
    # Corner cases real files rarely hold: whitespace runs, leading spaces, control chars, tabs.
    lines[:0] = [
        "",
        " ",
        "   leading and trailing   ",
        "tab\tsep\r\nCRLF\u3000ideographic\u00a0nbsp\u2028ls\u0085nel",
        "a\u0000b\u0001c\u200bzw\ufeffbom",
        "Hello<|endoftext|>world [CLS] <s> </s> <unk> [MASK] <mask>",
        "ＦＵＬＬｗｉｄｔｈ ｶﾀｶﾅ ①②③ ﬁ ﬀ",
        "e\u0301 a\u0308\u0323 \U0001d538\U0001f600\U0001f469\u200d\U0001f4bb",
        "x" * 300,
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa b",
        "    indented code():\n        return x  # comment",
    ]
    return lines


def _fields(enc) -> dict:
    return {
        "ids": enc.ids,
        "tokens": enc.tokens,
        "offsets": [tuple(o) for o in enc.offsets],
        "type_ids": enc.type_ids,
        "attention_mask": enc.attention_mask,
        "special_tokens_mask": enc.special_tokens_mask,
        "word_ids": enc.word_ids,
        "sequence_ids": enc.sequence_ids,
        "overflowing": [_fields(o) for o in enc.overflowing],
    }


def _first_difference(ours: dict, theirs: dict) -> str:
    for k, v in theirs.items():
        if ours.get(k) != v:
            return f"{k}: ours={ours.get(k)!r}\n theirs={v!r}"
    return ""


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    _need_data()
    return _corpus_lines()


@pytest.mark.parametrize("name", TOKENIZER_JSON_FILES)
def test_file_matches_tokenizers(name: str, corpus: list[str]) -> None:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = piecework.Tokenizer.from_file(str(path))
    texts = corpus[: LINES or len(corpus)]
    bad: list = []

    def check(what, ref_call, our_call) -> None:
        try:
            theirs = ref_call()
        except Exception:  # noqa: BLE001 - the reference raises plain Exception; we must refuse too
            with pytest.raises(piecework.TokenizerError):
                our_call()
            return
        mine = our_call()
        if mine != theirs:
            diff = _first_difference(mine, theirs) if isinstance(theirs, dict) else (mine, theirs)
            bad.append((what, diff))

    for add_special in (True, False):
        for text in texts:
            check(
                (add_special, text),
                lambda t=text, a=add_special: _fields(ref.encode(t, add_special_tokens=a)),
                lambda t=text, a=add_special: _fields(ours.encode(t, add_special_tokens=a)),
            )
    # The ids-only fast path gives the ids `encode` gives without padding.
    unpadded = tokenizers.Tokenizer.from_str(ref.to_str())
    unpadded.no_padding()
    for text in texts:
        for add_special in (True, False):
            check(
                ("encode_ids", add_special, text),
                lambda t=text, a=add_special: unpadded.encode(t, add_special_tokens=a).ids,
                lambda t=text, a=add_special: ours.encode_ids(t, add_special_tokens=a),
            )
    # Pairs and decode on a smaller sample.
    for a, b in zip(texts[:40], texts[40:80]):
        check(
            ("pair", a, b),
            lambda a=a, b=b: _fields(ref.encode(a, b)),
            lambda a=a, b=b: _fields(ours.encode(a, b)),
        )
    for text in texts[:100]:
        try:
            ids = ref.encode(text).ids
        except Exception:  # noqa: BLE001, S112 - refusals are compared above
            continue
        for skip in (True, False):
            check(
                ("decode", text, skip),
                lambda i=ids, k=skip: ref.decode(i, skip_special_tokens=k),
                lambda i=ids, k=skip: ours.decode(i, skip_special_tokens=k),
            )
    assert not bad, f"{len(bad)} differences in {name}; first: {bad[0]}"


def test_broken_llama_json_is_refused() -> None:
    _need_data()
    path = DATA / "llama2" / "tokenizer.ortx-modified.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    with pytest.raises(Exception):  # noqa: B017 - the reference raises plain Exception
        tokenizers.Tokenizer.from_file(str(path))
    with pytest.raises(piecework.InvalidDataError):
        piecework.Tokenizer.from_file(str(path))
