"""Every normalizer of the tokenizer.json pipeline, differential against tokenizers 0.22.1.

Each test builds a `tokenizers.Tokenizer` around the normalizer under test, with a
`FixedLength(1)` pre-tokenizer (one piece per normalized character, so every character's
alignment to the original text shows in the offsets) and a WordLevel model over single
characters; piecework loads the oracle's own `to_str()` and must give the same ids, tokens and
offsets. `PIECEWORK_SWEEP=1` runs many more examples per normalizer.
"""

from __future__ import annotations

import base64
import json

import pytest

tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
import piecework
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import DATA_DIR as DATA
from oracle import SWEEP

EXAMPLES = 1000 if SWEEP else 150

# Characters that exercise the Unicode corners: every kind of whitespace, controls, combining
# marks (Mn, Mc, Me), precomposed and compatibility characters, CJK, Hangul, astral planes.
SPECIAL = (
    "\t\n\r\x0b\x0c \u00a0\u3000\u2028\u2029\u0085\u1680\u2000\u200a\u202f\u205f\u200b\ufeff"
    "\x00\x01\x1f\x7f\x80\x9f\u00ad\u200c\u200d\u200e\u2060\ue000\ufffd"
    "\u0300\u0301\u0308\u0323\u0345\u0903\u093c\u0e49\u20dd\u3099\U0001d165"
    "éÉçñßẞİıǄǅﬁ™½²①ΣςЁ▁＂Ａ０ｱ"
    "中文漢日本語のカナー한국어각\u1100\u1161\u11a8\u3400\U00020000\uf900"
    "😀👍🏽👨‍👩‍👧🇫🇷\U0001d400\U00010400"
    ".,;:!?'\"`()-_/$^+=~|。、「」…—‘’“”"
    "0123456789٠١२৩"
)

TEXT = st.text(
    st.one_of(
        st.characters(exclude_categories=["Cs"]),
        st.sampled_from(SPECIAL),
        st.sampled_from("abcABC  "),
    ),
    max_size=40,
)

# The model sees single characters; the vocabulary covers a spread of them so ids differ.
VOCAB_CHARS = sorted(
    set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + SPECIAL)
)


def _doc(normalizer, pre_tokenizer=None):
    vocab = {"[UNK]": 0}
    for c in VOCAB_CHARS:
        vocab.setdefault(c, len(vocab))
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer or {"type": "FixedLength", "length": 1},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }


def _pair(normalizer, pre_tokenizer=None):
    ref = tokenizers.Tokenizer.from_str(json.dumps(_doc(normalizer, pre_tokenizer)))
    ours = piecework.Tokenizer.from_str(ref.to_str())
    return ref, ours


def _same(ref, ours, text):
    try:
        e = ref.encode(text)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - the oracle refuses (or panics): so must we
        with pytest.raises(piecework.TokenizerError):
            ours.encode(text)
        return
    g = ours.encode(text)
    assert (g.ids, g.tokens, g.offsets) == (e.ids, e.tokens, e.offsets), repr(text)


def _charsmap(rel):
    path = DATA / rel
    if not path.exists():
        pytest.skip(f"{rel} is absent (../shared/data not beside the checkout)")
    return json.loads(path.read_text(encoding="utf-8"))["normalizer"]


NORMALIZERS = {
    "bert-uncased": {
        "type": "BertNormalizer",
        "clean_text": True,
        "handle_chinese_chars": True,
        "strip_accents": None,
        "lowercase": True,
    },
    "bert-cased": {
        "type": "BertNormalizer",
        "clean_text": True,
        "handle_chinese_chars": True,
        "strip_accents": None,
        "lowercase": False,
    },
    "bert-strip-only": {
        "type": "BertNormalizer",
        "clean_text": False,
        "handle_chinese_chars": False,
        "strip_accents": True,
        "lowercase": False,
    },
    "nfc": {"type": "NFC"},
    "nfd": {"type": "NFD"},
    "nfkc": {"type": "NFKC"},
    "nfkd": {"type": "NFKD"},
    "lowercase": {"type": "Lowercase"},
    "strip-accents": {"type": "StripAccents"},
    "nmt": {"type": "Nmt"},
    "strip-both": {"type": "Strip", "strip_left": True, "strip_right": True},
    "strip-left": {"type": "Strip", "strip_left": True, "strip_right": False},
    "strip-right": {"type": "Strip", "strip_left": False, "strip_right": True},
    "replace-regex": {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
    "replace-regex-empty-match": {"type": "Replace", "pattern": {"Regex": "a*"}, "content": "<>"},
    "replace-regex-delete": {"type": "Replace", "pattern": {"Regex": "[aeiou]"}, "content": ""},
    "replace-string": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    "replace-string-meta": {"type": "Replace", "pattern": {"String": ".*"}, "content": "!"},
    "replace-string-empty": {"type": "Replace", "pattern": {"String": ""}, "content": "x"},
    "prepend": {"type": "Prepend", "prepend": "▁"},
    "sequence": {
        "type": "Sequence",
        "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}],
    },
    "untyped-strip": {"strip_left": False, "strip_right": True},
}


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
def test_normalizer_matches_oracle(name):
    ref, ours = _pair(NORMALIZERS[name])

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(TEXT)
    def check(text):
        _same(ref, ours, text)

    check()


@pytest.mark.parametrize(
    "rel", ["t5-small/tokenizer.json", "nmt-marian/tokenizer.json", "pegasus/tokenizer.json"]
)
def test_precompiled_charsmaps_match_oracle(rel):
    normalizer = _charsmap(rel)
    ref, ours = _pair(normalizer)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(TEXT)
    def check(text):
        _same(ref, ours, text)

    check()
    # Grapheme clusters longer and shorter than 6 bytes, with and without a rule.
    for text in [
        "ｱﾞ",
        "Ａ\u0301",
        "👨‍👩‍👧",
        "e\u0301\u0301\u0301",
        "™\x1eg",
        "ﬁ ①",
        "\u3000x\u00a0",
    ]:
        _same(ref, ours, text)


def test_corpus_lines_through_real_normalizers():
    """The normalizers of the real tokenizer.json files on corpus lines."""
    files = [
        "bert-base-uncased/tokenizer.json",
        "t5-small/tokenizer.json",
        "xlnet-base-cased/tokenizer.json",
        "clip/tokenizer.json",
        "codellama/tokenizer.json",
        "nmt-marian/tokenizer.json",
        "hf-tokenizers-data/bert-wiki.json",
    ]
    corpus = DATA / "corpora" / "lipsum-simdutf8"
    if not corpus.exists():
        pytest.skip("../shared/data/corpora is absent")
    lines = []
    for f in sorted(corpus.glob("*.txt")):
        lines += f.read_text(encoding="utf-8").splitlines()[: (200 if SWEEP else 15)]
    count = 0
    for rel in files:
        path = DATA / rel
        if not path.exists():
            continue
        ref, ours = _pair(json.loads(path.read_text(encoding="utf-8"))["normalizer"])
        for line in lines:
            _same(ref, ours, line)
            count += 1
    assert count > 0


def _load_error(doc):
    try:
        tokenizers.Tokenizer.from_str(json.dumps(doc))
    except BaseException:  # noqa: BLE001 - the oracle panics on some of these
        return True
    return False


@pytest.mark.parametrize(
    "normalizer, field",
    [
        ({"type": "Strip"}, "strip_left"),
        ({"type": "Prepend"}, "prepend"),
        ({"type": "Bert", "clean_text": True}, "handle_chinese_chars"),
        ({"type": "Replace", "pattern": {"Regex": "("}, "content": ""}, "pattern"),
        ({"type": "Replace", "pattern": "x", "content": ""}, "pattern"),
        ({"type": "Sequence"}, "normalizers"),
        ({"type": "Precompiled", "precompiled_charsmap": ""}, "precompiled_charsmap"),
        ({"type": "Precompiled", "precompiled_charsmap": "!!"}, "precompiled_charsmap"),
        (
            {
                "type": "Precompiled",
                "precompiled_charsmap": base64.b64encode(b"\0\0\0\0\xff").decode(),
            },
            "precompiled_charsmap",
        ),
    ],
)
def test_malformed_normalizer_is_invalid_data(normalizer, field):
    doc = _doc(normalizer)
    assert _load_error(doc)
    with pytest.raises(piecework.InvalidDataError, match=field):
        piecework.Tokenizer.from_str(json.dumps(doc))


def test_unknown_normalizer_is_unsupported():
    doc = _doc({"type": "Frobnicate"})
    assert _load_error(doc)
    with pytest.raises(piecework.UnsupportedModelError, match="Frobnicate"):
        piecework.Tokenizer.from_str(json.dumps(doc))


@pytest.mark.parametrize(
    "blob",
    [
        b"\x03\x00\x00\x00ab",  # trie size rounded down to 0 units; blob "ab"
        b"\x00\x00\x00\x00",  # no trie, no blob
    ],
)
def test_precompiled_degenerate_charsmaps(blob):
    """Charsmaps with no trie unit load, and then refuse any non-empty text (the oracle
    panics; piecework raises a TokenizerError)."""
    normalizer = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode()}
    ref, ours = _pair(normalizer)
    for text in ["", "x", "  "]:
        _same(ref, ours, text)


def _all_code_point_texts():
    """Every code point (but surrogates), 24 per text, between letters and spaces."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = []
    for i in range(0, len(cps), 24):
        chunk = cps[i : i + 24]
        texts.append("".join(chr(c) + ("x", " ", "")[j % 3] for j, c in enumerate(chunk)))
    return texts


@pytest.mark.skipif(not SWEEP, reason="every code point: set PIECEWORK_SWEEP=1")
@pytest.mark.parametrize(
    "name", ["bert-uncased", "bert-cased", "nfkc", "nfkd", "lowercase", "strip-accents", "nmt"]
)
def test_every_code_point(name):
    ref, ours = _pair(NORMALIZERS[name])
    texts = _all_code_point_texts()
    theirs = ref.encode_batch(texts)
    mine = ours.encode_batch(texts)
    for text, e, g in zip(texts, theirs, mine):
        assert (g.ids, g.tokens, g.offsets) == (e.ids, e.tokens, e.offsets), repr(text)
