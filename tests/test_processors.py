"""Post-processors against tokenizers 0.22.1: every Encoding field, singles and pairs.

Each case builds a `tokenizers.Tokenizer` (a small WordPiece vocabulary, optionally behind a
Whitespace pre-tokenizer) with one post-processor, serializes it, loads the same document in
piecework, and compares every field of the encodings (overflowing parts recursively).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

tokenizers = pytest.importorskip("tokenizers")
import piecework

LETTERS = "abcdefgh"
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<x>", "<y>"]


def _vocab() -> dict[str, int]:
    v = {t: i for i, t in enumerate(SPECIALS)}
    for c in LETTERS:
        v[c] = len(v)
        v["##" + c] = len(v)
    v["ab"] = len(v)
    v["##cd"] = len(v)
    return v


VOCAB = _vocab()


def _sp(name: str, type_id: int = 0) -> dict[str, Any]:
    return {"SpecialToken": {"id": name, "type_id": type_id}}


def _seq(which: str, type_id: int = 0) -> dict[str, Any]:
    return {"Sequence": {"id": which, "type_id": type_id}}


SPECIAL_TOKENS = {
    "[CLS]": {"id": "[CLS]", "ids": [VOCAB["[CLS]"]], "tokens": ["[CLS]"]},
    "[SEP]": {"id": "[SEP]", "ids": [VOCAB["[SEP]"]], "tokens": ["[SEP]"]},
    # One template entry that stands for two tokens.
    "<xy>": {"id": "<xy>", "ids": [VOCAB["<x>"], VOCAB["<y>"]], "tokens": ["<x>", "<y>"]},
}

BERT = {
    "type": "BertProcessing",
    "sep": ["[SEP]", VOCAB["[SEP]"]],
    "cls": ["[CLS]", VOCAB["[CLS]"]],
}

PROCESSORS: dict[str, Any] = {
    "none": None,
    "bert": BERT,
    "roberta": {
        "type": "RobertaProcessing",
        "sep": ["</s>", VOCAB["</s>"]],
        "cls": ["<s>", VOCAB["<s>"]],
        "trim_offsets": False,
        "add_prefix_space": True,
    },
    "template-bert": {
        "type": "TemplateProcessing",
        "single": [_sp("[CLS]"), _seq("A"), _sp("[SEP]")],
        "pair": [_sp("[CLS]"), _seq("A"), _sp("[SEP]"), _seq("B", 1), _sp("[SEP]", 1)],
        "special_tokens": SPECIAL_TOKENS,
    },
    "template-odd": {
        "type": "TemplateProcessing",
        "single": [_seq("A", 3), _sp("<xy>", 2), _sp("[SEP]", 1)],
        "pair": [_sp("<xy>", 1), _seq("B", 2), _seq("A", 4), _sp("[SEP]"), _sp("<xy>", 7)],
        "special_tokens": SPECIAL_TOKENS,
    },
    "template-bare": {
        "type": "TemplateProcessing",
        "single": [_seq("A")],
        "pair": [_seq("A"), _seq("B", 1)],
        "special_tokens": {},
    },
    # An input used twice: each copy gets the type id of its own place.
    "template-twice": {
        "type": "TemplateProcessing",
        "single": [_seq("A", 1), _sp("[SEP]"), _seq("A", 2)],
        "pair": [_seq("B", 3), _seq("A"), _sp("[CLS]", 1), _seq("B", 4)],
        "special_tokens": SPECIAL_TOKENS,
    },
    "sequence-trim-template": {
        "type": "Sequence",
        "processors": [
            {
                "type": "ByteLevel",
                "add_prefix_space": True,
                "trim_offsets": True,
                "use_regex": True,
            },
            {
                "type": "TemplateProcessing",
                "single": [_sp("[CLS]"), _seq("A")],
                "pair": [_sp("[CLS]"), _seq("A"), _sp("[CLS]", 1), _seq("B", 1)],
                "special_tokens": SPECIAL_TOKENS,
            },
        ],
    },
    "bytelevel-untrimmed": {
        "type": "ByteLevel",
        "add_prefix_space": True,
        "trim_offsets": False,
        "use_regex": True,
    },
    "sequence": {
        "type": "Sequence",
        "processors": [
            {
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": False,
                "use_regex": True,
            },
            BERT,
        ],
    },
}


def _document(pre_tokenizer: bool, post: Any, **extra: Any) -> str:
    model = tokenizers.models.WordPiece(VOCAB, unk_token="[UNK]", max_input_chars_per_word=100)
    tok = tokenizers.Tokenizer(model)
    if pre_tokenizer:
        tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    doc = json.loads(tok.to_str())
    doc["post_processor"] = post
    doc.update(extra)
    return json.dumps(doc)


def load_pair(doc: str, pre_tokenizer: bool) -> tuple[Any, Any]:
    """The reference and piecework tokenizers for one document (skips what piecework lacks)."""
    ref = tokenizers.Tokenizer.from_str(doc)
    try:
        ours = piecework.Tokenizer.from_str(doc)
    except piecework.UnsupportedModelError as e:
        if pre_tokenizer:
            pytest.skip(f"pre-tokenizer not available in this build: {e}")
        raise
    return ref, ours


def fields(enc: Any) -> dict[str, Any]:
    return {
        "ids": enc.ids,
        "tokens": enc.tokens,
        "offsets": [tuple(o) for o in enc.offsets],
        "type_ids": enc.type_ids,
        "attention_mask": enc.attention_mask,
        "special_tokens_mask": enc.special_tokens_mask,
        "word_ids": enc.word_ids,
        "sequence_ids": enc.sequence_ids,
        "n_sequences": enc.n_sequences,
        "len": len(enc),
        "overflowing": [fields(o) for o in enc.overflowing],
    }


def outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """("ok", fields) or ("error", None); the reference's panics count as errors."""
    try:
        return "ok", fields(fn(*args, **kwargs))
    except BaseException as e:  # pyo3 PanicException derives from BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return "error", None


def text_strategy(pre_tokenizer: bool) -> st.SearchStrategy[str]:
    # Without a pre-tokenizer the whole input is one word, so spaces would make it unknown.
    word = st.text(alphabet=LETTERS + "z", min_size=1, max_size=6)
    sep = " " if pre_tokenizer else ""
    return st.lists(word, max_size=5).map(sep.join)


@pytest.mark.parametrize("pre_tokenizer", [False, True], ids=["no-pretok", "whitespace"])
@pytest.mark.parametrize("name", list(PROCESSORS))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_processor_matches(name: str, pre_tokenizer: bool, data: st.DataObject) -> None:
    ref, ours = load_pair(_document(pre_tokenizer, PROCESSORS[name]), pre_tokenizer)
    texts = text_strategy(pre_tokenizer)
    a = data.draw(texts)
    b = data.draw(st.none() | texts)
    add = data.draw(st.booleans())
    theirs = outcome(ref.encode, a, b, add_special_tokens=add)
    mine = outcome(ours.encode, a, b, add_special_tokens=add)
    assert mine == theirs
    if b is None:
        # The ids-only path applies the processor to ids alone; same ids, same refusals.
        try:
            ids = ours.encode_ids(a, add_special_tokens=add)
        except piecework.TokenizerError:
            assert theirs[0] == "error"
        else:
            assert theirs[0] == "ok" and ids == theirs[1]["ids"]


@pytest.mark.parametrize("name", [n for n in PROCESSORS if n != "none"])
def test_processor_with_truncated_pair_overflowing(name: str) -> None:
    """Both inputs overflow: the processor wraps every combination the reference makes."""
    doc = _document(
        False,
        PROCESSORS[name],
        truncation={"direction": "Right", "max_length": 9, "strategy": "LongestFirst", "stride": 1},
    )
    ref, ours = load_pair(doc, False)
    for a, b in [("abcdefgh", "hgfedcbaab"), ("abc", "defghabcdefgh"), ("abcdefghabc", "a")]:
        for add in (True, False):
            assert outcome(ours.encode, a, b, add_special_tokens=add) == outcome(
                ref.encode, a, b, add_special_tokens=add
            ), (a, b, add)


def _byte_level_available() -> bool:
    doc = json.loads(_document(False, None))
    doc["pre_tokenizer"] = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": True,
    }
    try:
        piecework.Tokenizer.from_str(json.dumps(doc))
    except piecework.UnsupportedModelError:
        return False
    return True


@pytest.mark.parametrize("add_prefix_space", [False, True])
@pytest.mark.parametrize("kind", ["ByteLevel", "RobertaProcessing"])
def test_trim_offsets(kind: str, add_prefix_space: bool) -> None:
    """Offset trimming of tokens with leading/trailing Ġ or whitespace (the ByteLevel rule)."""
    if not _byte_level_available():
        pytest.skip("the ByteLevel offset trimming is not in this build yet")
    vocab = {t: i for i, t in enumerate(SPECIALS + ["Ġ", "a", "Ġa", "aĠ", "ĠĠa", "Ġb", "b", "ĠaĠ"])}
    ref_tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    ref_tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    doc = json.loads(ref_tok.to_str())
    if kind == "ByteLevel":
        doc["post_processor"] = {
            "type": "ByteLevel",
            "add_prefix_space": add_prefix_space,
            "trim_offsets": True,
        }
    else:
        doc["post_processor"] = {
            "type": "RobertaProcessing",
            "sep": ["</s>", vocab["</s>"]],
            "cls": ["<s>", vocab["<s>"]],
            "trim_offsets": True,
            "add_prefix_space": add_prefix_space,
        }
    ref, ours = load_pair(json.dumps(doc), True)
    words = ["Ġ", "a", "Ġa", "aĠ", "ĠĠa", "Ġb", "b", "ĠaĠ"]
    for i in range(len(words)):
        a = " ".join(words[i:] + words[:i])
        b = " ".join(reversed(words[i:]))
        for add in (True, False):
            assert outcome(ours.encode, a, b, add_special_tokens=add) == outcome(
                ref.encode, a, b, add_special_tokens=add
            )


@pytest.mark.parametrize(
    ("post", "kind"),
    [
        ({"type": "Magic"}, piecework.UnsupportedModelError),
        ({"type": "ByteLevel", "add_prefix_space": True}, piecework.InvalidDataError),
        ({"type": "TemplateProcessing", "single": [], "pair": []}, piecework.InvalidDataError),
        ({"type": "Sequence", "processors": [{"type": "Magic"}]}, piecework.UnsupportedModelError),
        (
            {"type": "BertProcessing", "sep": ["[SEP]", -1], "cls": ["[CLS]", 1]},
            piecework.InvalidDataError,
        ),
    ],
)
def test_bad_post_processor_is_refused(post: dict[str, Any], kind: type) -> None:
    doc = _document(False, post)
    assert outcome(tokenizers.Tokenizer.from_str, doc)[0] == "error"
    with pytest.raises(kind):
        piecework.Tokenizer.from_str(doc)


def test_untagged_quirks_are_kept() -> None:
    """The reference reads `post_processor` as an untagged union: `sep`/`cls` decide."""
    # A "RobertaProcessing" without its flags is read as BertProcessing (pair layout differs).
    post = {
        "type": "RobertaProcessing",
        "sep": ["</s>", VOCAB["</s>"]],
        "cls": ["<s>", VOCAB["<s>"]],
    }
    ref, ours = load_pair(_document(False, post), False)
    assert fields(ours.encode("ab", "cd")) == fields(ref.encode("ab", "cd"))


@pytest.mark.parametrize("name", ["bert", "template-odd", "roberta", "none"])
def test_pretokenized_input(name: str) -> None:
    """Pre-split words (word ids come from the list positions) through each processor."""
    ref, ours = load_pair(_document(False, PROCESSORS[name]), False)
    cases = [(["ab", "c"], None), (["a", "bcd", "h"], ["ef", "g"]), ([], ["a"]), (["a"], [])]
    for a, b in cases:
        for add in (True, False):
            kw = {"is_pretokenized": True, "add_special_tokens": add}
            assert outcome(ours.encode, a, b, **kw) == outcome(ref.encode, a, b, **kw)
