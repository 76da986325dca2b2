"""Decoders against tokenizers 0.22.1: `decode` / `decode_batch` of generated id lists.

Each case builds a `tokenizers.Tokenizer` whose WordLevel vocabulary holds awkward token
strings (byte tokens, prefixes, suffixes, replacement characters, spaces, empty strings), sets
one decoder (or chain), serializes it, loads it in piecework, and compares the decoded text
for hypothesis-generated id lists, with and without skipping special tokens. The files in
../shared/data are decoded the same way when present.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

tokenizers = pytest.importorskip("tokenizers")
import piecework
from oracle import DATA_DIR as DATA
from oracle import SWEEP, TOKENIZER_JSON_FILES

POOL = [
    "[UNK]", "▁", "▁▁", "▁a", "a▁b", "<0xC3>", "<0xA9>", "<0x41>", "<0xEA>", "<0x99>", "<0xc3>",
    "<0x+F>", "<0xZZ>", "<0x4>", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "##ab", "##", "#", "ab",
    "</w>", "x</w>", "x</w>y", " ", "'s", " do not", "do not", ".", " .", "?", "'", "n't",
    "<pad>", "|", "é", "😀", "\t", "xx", "x", "a b", "  a  ", "Ġ", "ĠHello", "Ċ", "Ã©", "e\u0301",
]  # fmt: skip
SPECIAL = ["<s>", "</s>"]

REPLACE_SPACE = {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}
DECODERS: dict[str, Any] = {
    "none": None,
    "wordpiece": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    "wordpiece-raw": {"type": "WordPiece", "prefix": "##", "cleanup": False},
    "wordpiece-noprefix": {"type": "WordPiece", "prefix": "", "cleanup": True},
    "metaspace": {
        "type": "Metaspace",
        "replacement": "▁",
        "prepend_scheme": "always",
        "split": True,
    },
    "metaspace-first": {
        "type": "Metaspace",
        "replacement": "▁",
        "prepend_scheme": "first",
        "split": False,
    },
    "metaspace-never": {
        "type": "Metaspace",
        "replacement": "▁",
        "prepend_scheme": "never",
        "split": True,
    },
    "metaspace-legacy": {"type": "Metaspace", "replacement": "a", "add_prefix_space": True},
    "bytefallback": {"type": "ByteFallback"},
    "fuse": {"type": "Fuse"},
    "strip-front": {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    "strip-both": {"type": "Strip", "content": "x", "start": 2, "stop": 1},
    "replace": REPLACE_SPACE,
    "replace-empty": {"type": "Replace", "pattern": {"String": ""}, "content": "-"},
    "replace-dot": {"type": "Replace", "pattern": {"String": "."}, "content": "!"},
    "replace-regex": {"type": "Replace", "pattern": {"Regex": "\\s*"}, "content": "_"},
    "replace-lookbehind": {"type": "Replace", "pattern": {"Regex": "(?<=a)b|x+"}, "content": ""},
    "bpe": {"type": "BPEDecoder", "suffix": "</w>"},
    "bpe-empty": {"type": "BPEDecoder", "suffix": ""},
    "ctc": {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True},
    "ctc-raw": {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": False},
    "llama": {
        "type": "Sequence",
        "decoders": [
            REPLACE_SPACE,
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    },
    "bytefallback-metaspace": {
        "type": "Sequence",
        "decoders": [
            {"type": "ByteFallback"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
        ],
    },
    "fuse-wordpiece": {
        "type": "Sequence",
        "decoders": [{"type": "Fuse"}, {"type": "WordPiece", "prefix": "##", "cleanup": True}],
    },
    # No `type`: the reference recognises a decoder by its fields.
    "legacy-wordpiece": {"prefix": "##", "cleanup": False},
    "legacy-bpe": {"suffix": "</w>"},
}


def _document(decoder: Any) -> str:
    tok = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({t: i for i, t in enumerate(POOL)}, unk_token="[UNK]")
    )
    tok.add_special_tokens(SPECIAL)
    doc = json.loads(tok.to_str())
    doc["decoder"] = decoder
    return json.dumps(doc)


def outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except BaseException as e:  # pyo3 PanicException derives from BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return "error", None


# Ids past the vocabulary are dropped by both.
IDS = st.lists(st.integers(min_value=0, max_value=len(POOL) + len(SPECIAL) + 1), max_size=12)


@pytest.mark.parametrize("name", list(DECODERS))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ids=IDS, skip=st.booleans())
def test_decoder_matches(name: str, ids: list[int], skip: bool) -> None:
    doc = _document(DECODERS[name])
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    assert outcome(ours.decode, ids, skip_special_tokens=skip) == outcome(
        ref.decode, ids, skip_special_tokens=skip
    )


@pytest.mark.parametrize("name", ["llama", "wordpiece", "metaspace", "bytefallback"])
def test_decode_batch_matches(name: str) -> None:
    doc = _document(DECODERS[name])
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    batch = [list(range(i, i + 7)) for i in range(0, len(POOL), 3)] + [[], [len(POOL)]]
    for skip in (True, False):
        assert ours.decode_batch(batch, skip_special_tokens=skip) == ref.decode_batch(
            batch, skip_special_tokens=skip
        )


def test_strip_past_the_token_is_an_error() -> None:
    """The reference panics when Strip runs off the front of a token; we raise instead."""
    doc = _document({"type": "Strip", "content": "x", "start": 0, "stop": 3})
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    ids = [POOL.index("xx")]
    assert outcome(ref.decode, ids)[0] == "error"
    with pytest.raises(piecework.TokenizerError):
        ours.decode(ids)


@pytest.mark.parametrize(
    ("decoder", "kind"),
    [
        ({"type": "Nope"}, piecework.UnsupportedModelError),
        ({"type": "WordPiece", "prefix": "##"}, piecework.InvalidDataError),
        (
            {"type": "Metaspace", "replacement": "▁", "add_prefix_space": False},
            piecework.InvalidDataError,
        ),
        ({"type": "Metaspace", "replacement": "▁▁"}, piecework.InvalidDataError),
        ({"type": "Strip", "content": " ", "start": -1, "stop": 0}, piecework.InvalidDataError),
        ({"type": "Replace", "pattern": {"Regex": "("}, "content": ""}, piecework.InvalidDataError),
        ({"type": "Sequence", "decoders": [{"type": "Nope"}]}, piecework.UnsupportedModelError),
    ],
)
def test_bad_decoder_is_refused(decoder: dict[str, Any], kind: type) -> None:
    doc = _document(decoder)
    assert outcome(tokenizers.Tokenizer.from_str, doc)[0] == "error"
    with pytest.raises(kind):
        piecework.Tokenizer.from_str(doc)


@pytest.mark.parametrize("name", TOKENIZER_JSON_FILES)
def test_data_file_decode(name: str) -> None:
    """Random id lists (every id of the vocabulary is reachable) decode as in the reference."""
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (the shared data is only beside the CI checkout)")
    if outcome(tokenizers.Tokenizer.from_file, str(path))[0] == "error":
        pytest.skip("the reference refuses this file")
    ref = tokenizers.Tokenizer.from_file(str(path))
    # Decoding never runs the normalizer or the pre-tokenizer, so they are left out: this
    # checks the decoders even where piecework lacks some encoding component.
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["normalizer"] = None
    doc["pre_tokenizer"] = None
    try:
        ours = piecework.Tokenizer.from_str(json.dumps(doc))
    except piecework.UnsupportedModelError as e:
        pytest.skip(f"not supported in this build: {e}")
    import random

    rng = random.Random(name)
    size = ref.get_vocab_size()
    special = [t.content for t in ref.get_added_tokens_decoder().values() if t.special]
    special_ids = [ref.token_to_id(t) for t in special]
    n = 2000 if SWEEP else 150
    bad = []
    for _ in range(n):
        ids = [rng.randrange(size + 2) for _ in range(rng.randrange(12))]
        if special_ids and rng.random() < 0.3:
            ids.insert(rng.randrange(len(ids) + 1), rng.choice(special_ids))
        for skip in (True, False):
            theirs = outcome(ref.decode, ids, skip_special_tokens=skip)
            mine = outcome(ours.decode, ids, skip_special_tokens=skip)
            if mine != theirs:
                bad.append((ids, skip, mine, theirs))
    assert not bad, f"{len(bad)} differences; first: {bad[0]}"


# Unicode corners: every whitespace kind, combining marks, astral characters, controls.
CORNERS = " \t\n\r\u00a0\u3000\u2028\u2029\u0085\u200b\ufeff\u0301\u0308é😀𝔸\x00\x1f▁#<>0xAC.,!?'"
TOKEN = st.text(alphabet=st.sampled_from(CORNERS) | st.characters(codec="utf-8"), max_size=6)
UNICODE_DECODERS = [
    "wordpiece",
    "metaspace",
    "metaspace-never",
    "strip-front",
    "strip-both",
    "replace",
    "replace-regex",
    "replace-lookbehind",
    "bpe",
    "ctc",
    "llama",
    "bytefallback-metaspace",
]


@pytest.mark.parametrize("name", UNICODE_DECODERS)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tokens=st.lists(TOKEN, min_size=1, max_size=8, unique=True), data=st.data())
def test_decoder_unicode_tokens(name: str, tokens: list[str], data: st.DataObject) -> None:
    """Arbitrary token strings (the vocabulary is generated too) decode as in the reference."""
    tok = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token=tokens[0])
    )
    doc = json.loads(tok.to_str())
    doc["decoder"] = DECODERS[name]
    doc = json.dumps(doc)
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    ids = data.draw(st.lists(st.integers(0, len(tokens) - 1), max_size=10))
    assert outcome(ours.decode, ids) == outcome(ref.decode, ids)
