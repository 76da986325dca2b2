"""Every pre-tokenizer of the tokenizer.json pipeline, differential against tokenizers 0.22.1.

Each test builds a `tokenizers.Tokenizer` around the pre-tokenizer under test (alone, and after
a normalizer that moves characters around) with a WordPiece model over single characters, so
each word is spelled out character by character with its offsets; piecework loads the
oracle's own `to_str()` and must give the same ids, tokens and offsets. `PIECEWORK_SWEEP=1`
runs many more examples per pre-tokenizer.
"""

from __future__ import annotations

import json

import pytest

tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
import piecework
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import DATA_DIR as DATA
from oracle import SWEEP

EXAMPLES = 1000 if SWEEP else 80

SPECIAL = (
    "\t\n\r\x0b\x0c \u00a0\u3000\u2028\u2029\u0085\u1680\u2000\u200a\u202f\u205f\u200b\ufeff"
    "\x00\x01\x7f\x85\u00ad\u200d\ufffd"
    "\u0301\u0308\u0903\u20dd\u3099"
    "éÉßİǅﬁ™½²①Σς▁_＂Ａ０ｱ"
    "中文日本語のカナー한국어\u3400\U00020000"
    "😀👍🏽🇫🇷\U0001d400"
    ".,;:!?'\"`()-_/$^+=~|<>。、「」…—‘’“”¡¿"
    "0123456789٠١२৩߁᠑𝟎Ⅻ"
    "ПриветΓειάשלוםمرحباनमस्तेสวัสดี"
)

TEXT = st.text(
    st.one_of(
        st.characters(exclude_categories=["Cs"]),
        st.sampled_from(SPECIAL),
        st.sampled_from("ab  1"),
    ),
    max_size=40,
)

VOCAB_CHARS = sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + SPECIAL))


def _doc(pre_tokenizer, normalizer=None):
    vocab = {"[UNK]": 0}
    for c in VOCAB_CHARS:
        vocab.setdefault(c, len(vocab))
        vocab.setdefault("##" + c, len(vocab))
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "WordPiece",
            "vocab": vocab,
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
        },
    }


def _pair(pre_tokenizer, normalizer=None):
    ref = tokenizers.Tokenizer.from_str(json.dumps(_doc(pre_tokenizer, normalizer)))
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


GPT2_LIKE = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

PRE_TOKENIZERS = {
    "bert": {"type": "BertPreTokenizer"},
    "whitespace": {"type": "Whitespace"},
    "whitespace-split": {"type": "WhitespaceSplit"},
    "metaspace-always": {
        "type": "Metaspace",
        "replacement": "▁",
        "prepend_scheme": "always",
        "split": True,
    },
    "metaspace-first-nosplit": {
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
    "metaspace-legacy": {
        "type": "Metaspace",
        "replacement": "_",
        "add_prefix_space": True,
        "str_rep": "_",
    },
    "punctuation": {"type": "Punctuation"},
    "punctuation-contiguous": {"type": "Punctuation", "behavior": "Contiguous"},
    "punctuation-removed": {"type": "Punctuation", "behavior": "Removed"},
    "punctuation-merged-previous": {"type": "Punctuation", "behavior": "MergedWithPrevious"},
    "punctuation-merged-next": {"type": "Punctuation", "behavior": "MergedWithNext"},
    "digits": {"type": "Digits", "individual_digits": False},
    "digits-individual": {"type": "Digits", "individual_digits": True},
    "split-regex-isolated": {
        "type": "Split",
        "pattern": {"Regex": "[0-9][0-9][0-9]"},
        "behavior": "Isolated",
        "invert": False,
    },
    "split-regex-gpt2": {
        "type": "Split",
        "pattern": {"Regex": GPT2_LIKE},
        "behavior": "Isolated",
        "invert": False,
    },
    "split-regex-invert": {
        "type": "Split",
        "pattern": {"Regex": "[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+"},
        "behavior": "Removed",
        "invert": True,
    },
    "split-regex-empty-matches": {
        "type": "Split",
        "pattern": {"Regex": "\\s*"},
        "behavior": "Contiguous",
        "invert": True,
    },
    "split-string": {
        "type": "Split",
        "pattern": {"String": " "},
        "behavior": "MergedWithPrevious",
        "invert": False,
    },
    "split-string-meta": {
        "type": "Split",
        "pattern": {"String": "."},
        "behavior": "MergedWithNext",
        "invert": False,
    },
    "split-string-empty": {
        "type": "Split",
        "pattern": {"String": ""},
        "behavior": "Isolated",
        "invert": False,
    },
    "char-delimiter": {"type": "CharDelimiterSplit", "delimiter": " "},
    "fixed-length": {"type": "FixedLength", "length": 3},
    "unicode-scripts": {"type": "UnicodeScripts"},
    "sequence": {
        "type": "Sequence",
        "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "▁"}],
    },
}

NORMALIZERS = {
    "none": None,
    # Decomposition moves bytes around and the prepended ▁ is an insertion aligned to the first
    # character: the pieces' offsets must follow both.
    "nfkd-prepend": {
        "type": "Sequence",
        "normalizers": [{"type": "NFKD"}, {"type": "Prepend", "prepend": "▁"}],
    },
    "bert": {
        "type": "BertNormalizer",
        "clean_text": True,
        "handle_chinese_chars": True,
        "strip_accents": None,
        "lowercase": True,
    },
}


def _cases():
    for name in sorted(PRE_TOKENIZERS):
        for norm in sorted(NORMALIZERS):
            yield pytest.param(name, norm, id=f"{name}-{norm}")


@pytest.mark.parametrize("name, norm", list(_cases()))
def test_pre_tokenizer_matches_oracle(name, norm):
    ref, ours = _pair(PRE_TOKENIZERS[name], NORMALIZERS[norm])

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(TEXT)
    def check(text):
        _same(ref, ours, text)

    check()


def test_bert_fast_path_vertical_tab_and_form_feed():
    """clean_text drops \\x0b and \\x0c (category Cc, not tab/LF/CR), so "0\\x0c0" is ONE word
    (the pipeline's BERT fast path once split there)."""
    ref, ours = _pair(PRE_TOKENIZERS["bert"], NORMALIZERS["bert"])
    for text in ["0\x0c0", "ab\x0bcd", "a \x0c b"]:
        _same(ref, ours, text)


def test_pre_tokenize_str_pieces_match_oracle():
    """The pieces themselves (text and offsets), through the pipeline's word ids: each piece
    of the oracle's `pre_tokenize_str` is one word of the encoding."""
    texts = ["Hello, world!  How's it\tgoing?", "  ▁a  b ", "中文 and 日本語のカナー 123,456", ""]
    for name, cfg in sorted(PRE_TOKENIZERS.items()):
        ref, ours = _pair(cfg)
        for text in texts:
            _same(ref, ours, text)
            pieces = ref.pre_tokenizer.pre_tokenize_str(text)
            enc = ours.encode(text)
            words = {}
            for w, off in zip(enc.word_ids, enc.offsets):
                if w is not None:
                    a, b = words.get(w, off)
                    words[w] = (min(a, off[0]), max(b, off[1]))
            assert len(words) == len(pieces), (name, text)


def test_metaspace_first_only_prepends_at_the_start():
    cfg = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}
    doc = _doc(cfg)
    doc["added_tokens"] = [
        {
            "id": 10_000,
            "content": "<s>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    ]
    ref = tokenizers.Tokenizer.from_str(json.dumps(doc))
    ours = piecework.Tokenizer.from_str(ref.to_str())
    for text in ["a b<s>c d", "<s>a", "x <s> y"]:
        _same(ref, ours, text)


def test_real_pre_tokenizers_on_corpus_lines():
    corpus = DATA / "corpora" / "lipsum-simdutf8"
    if not corpus.exists():
        pytest.skip("../shared/data/corpora is absent")
    lines = []
    for f in sorted(corpus.glob("*.txt")):
        lines += f.read_text(encoding="utf-8").splitlines()[: (200 if SWEEP else 15)]
    count = 0
    for rel in [
        "pegasus/tokenizer.json",
        "t5-small/tokenizer.json",
        "mistral-7b-v0.3/tokenizer.json",
        "falcon/tokenizer.json",
        "clip/tokenizer.json",
        "hf-quicktour-wiki/tokenizer-wiki.json",
        "bert-base-uncased/tokenizer.json",
    ]:
        path = DATA / rel
        if not path.exists():
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        pre = doc["pre_tokenizer"]
        if "ByteLevel" in json.dumps(pre):
            # Keep only the parts this file tests (ByteLevel has its own tests).
            pre = {
                "type": "Sequence",
                "pretokenizers": [
                    p for p in pre.get("pretokenizers", []) if p.get("type") != "ByteLevel"
                ],
            }
        ref, ours = _pair(pre, doc.get("normalizer"))
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
    "pre_tokenizer, field",
    [
        ({"type": "Digits"}, "individual_digits"),
        ({"type": "Split", "pattern": {"String": "a"}, "behavior": "Isolated"}, "invert"),
        (
            {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways", "invert": False},
            "behavior",
        ),
        (
            {
                "type": "Split",
                "pattern": {
                    "Regex": "(",
                },
                "behavior": "Isolated",
                "invert": False,
            },
            "pattern",
        ),
        ({"type": "Metaspace"}, "replacement"),
        ({"type": "Metaspace", "replacement": "ab"}, "replacement"),
        ({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "First"}, "prepend_scheme"),
        ({"type": "Metaspace", "replacement": "▁", "add_prefix_space": False}, "add_prefix_space"),
        ({"type": "CharDelimiterSplit", "delimiter": "ab"}, "delimiter"),
        ({"type": "Punctuation", "behavior": "removed"}, "behavior"),
        ({"type": "Sequence"}, "pretokenizers"),
    ],
)
def test_malformed_pre_tokenizer_is_invalid_data(pre_tokenizer, field):
    doc = _doc(pre_tokenizer)
    assert _load_error(doc)
    with pytest.raises(piecework.InvalidDataError, match=field):
        piecework.Tokenizer.from_str(json.dumps(doc))


def test_unknown_pre_tokenizer_is_unsupported():
    for cfg in [{"type": "Frobnicate"}, {"type": "Delimiter", "delimiter": "x"}]:
        doc = _doc(cfg)
        assert _load_error(doc)
        with pytest.raises(piecework.UnsupportedModelError):
            piecework.Tokenizer.from_str(json.dumps(doc))


@pytest.mark.skipif(not SWEEP, reason="every code point: set PIECEWORK_SWEEP=1")
@pytest.mark.parametrize(
    "name",
    [
        "bert",
        "whitespace",
        "whitespace-split",
        "punctuation",
        "digits-individual",
        "unicode-scripts",
    ],
)
def test_every_code_point(name):
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = [
        "".join(chr(c) + ("a", " ", "")[j % 3] for j, c in enumerate(cps[i : i + 24]))
        for i in range(0, len(cps), 24)
    ]
    ref, ours = _pair(PRE_TOKENIZERS[name])
    theirs = ref.encode_batch(texts)
    mine = ours.encode_batch(texts)
    for text, e, g in zip(texts, theirs, mine):
        assert (g.ids, g.tokens, g.offsets) == (e.ids, e.tokens, e.offsets), repr(text)
