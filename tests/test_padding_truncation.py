"""Truncation (strategies, directions, stride, overflowing) and padding against tokenizers 0.22.1.

Synthetic tokenizers (a small WordPiece vocabulary with each kind of post-processor) are loaded
with `truncation` / `padding` in the document itself and through `enable_truncation` /
`enable_padding`; every Encoding field is compared, overflowing parts recursively, for singles,
pairs and padded batches. The tokenizer.json files in ../shared/data are run the same way on
corpus lines when present.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

tokenizers = pytest.importorskip("tokenizers")
import piecework
from oracle import DATA_DIR as DATA
from oracle import SWEEP

LETTERS = "abcdefgh"
VOCAB: dict[str, int] = {
    t: i for i, t in enumerate(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "<s>", "</s>"])
}
for _c in LETTERS:
    VOCAB[_c] = len(VOCAB)
    VOCAB["##" + _c] = len(VOCAB)

BERT = {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]}
ROBERTA = {
    "type": "RobertaProcessing",
    "sep": ["</s>", 5],
    "cls": ["<s>", 4],
    "trim_offsets": False,
    "add_prefix_space": False,
}
TEMPLATE = {
    "type": "TemplateProcessing",
    "single": [
        {"SpecialToken": {"id": "<s>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}},
    ],
    "pair": [
        {"Sequence": {"id": "A", "type_id": 0}},
        {"SpecialToken": {"id": "</s>", "type_id": 0}},
        {"Sequence": {"id": "B", "type_id": 1}},
        {"SpecialToken": {"id": "</s>", "type_id": 1}},
    ],
    "special_tokens": {
        "<s>": {"id": "<s>", "ids": [4], "tokens": ["<s>"]},
        "</s>": {"id": "</s>", "ids": [5, 5], "tokens": ["</s>", "</s>"]},
    },
}
PROCESSORS = {"none": None, "bert": BERT, "roberta": ROBERTA, "template": TEMPLATE}


def document(post: Any, truncation: Any = None, padding: Any = None) -> str:
    tok = tokenizers.Tokenizer(
        tokenizers.models.WordPiece(VOCAB, unk_token="[UNK]", max_input_chars_per_word=100)
    )
    doc = json.loads(tok.to_str())
    doc["post_processor"] = post
    doc["truncation"] = truncation
    doc["padding"] = padding
    return json.dumps(doc)


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
        "overflowing": [fields(o) for o in enc.overflowing],
    }


def outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """("ok", value) or ("error", None); the reference's panics count as errors."""
    try:
        value = fn(*args, **kwargs)
    except BaseException as e:  # pyo3 PanicException derives from BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return "error", None
    if value is None:
        return "ok", None
    if isinstance(value, list):
        return "ok", [fields(v) for v in value]
    return "ok", fields(value)


TRUNCATION = st.fixed_dictionaries(
    {
        "direction": st.sampled_from(["Left", "Right"]),
        "max_length": st.integers(0, 14),
        "strategy": st.sampled_from(["LongestFirst", "OnlyFirst", "OnlySecond"]),
        "stride": st.sampled_from([0, 0, 1, 2, 3]),
    }
)
PADDING = st.fixed_dictionaries(
    {
        "strategy": st.one_of(
            st.just("BatchLongest"), st.builds(lambda n: {"Fixed": n}, st.integers(0, 16))
        ),
        "direction": st.sampled_from(["Left", "Right"]),
        "pad_to_multiple_of": st.sampled_from([None, 0, 3, 8]),
        "pad_id": st.just(3),
        "pad_type_id": st.integers(0, 2),
        "pad_token": st.just("[PAD]"),
    }
)
# One word per input (no pre-tokenizer); "z" makes the whole word unknown.
TEXT = st.text(alphabet=LETTERS + "z", max_size=12).filter(lambda s: "z" not in s or len(s) < 3)


@pytest.mark.parametrize("name", list(PROCESSORS))
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    truncation=st.none() | TRUNCATION,
    padding=st.none() | PADDING,
    a=TEXT,
    b=st.none() | TEXT,
    add=st.booleans(),
)
def test_document_truncation_and_padding(
    name: str, truncation: Any, padding: Any, a: str, b: Any, add: bool
) -> None:
    """`truncation` / `padding` as a tokenizer.json holds them (no setter validation)."""
    doc = document(PROCESSORS[name], truncation, padding)
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    assert outcome(ours.encode, a, b, add_special_tokens=add) == outcome(
        ref.encode, a, b, add_special_tokens=add
    )


@pytest.mark.parametrize("name", list(PROCESSORS))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    padding=PADDING,
    truncation=st.none() | TRUNCATION,
    batch=st.lists(st.tuples(TEXT, st.none() | TEXT), max_size=5),
    add=st.booleans(),
)
def test_batch_padding(
    name: str, padding: Any, truncation: Any, batch: list[Any], add: bool
) -> None:
    doc = document(PROCESSORS[name], truncation, padding)
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    inputs = [a if b is None else (a, b) for a, b in batch]
    assert outcome(ours.encode_batch, inputs, add_special_tokens=add) == outcome(
        ref.encode_batch, inputs, add_special_tokens=add
    )


@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
@pytest.mark.parametrize("direction", ["left", "right"])
@pytest.mark.parametrize("name", list(PROCESSORS))
def test_setters(name: str, strategy: str, direction: str) -> None:
    """`enable_truncation` / `enable_padding`, and what `to_str` then writes."""
    doc = document(PROCESSORS[name])
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    for t in (ref, ours):
        t.enable_truncation(9, stride=2, strategy=strategy, direction=direction)
        t.enable_padding(direction=direction, pad_id=3, pad_token="[PAD]", pad_to_multiple_of=4)
    assert json.loads(ours.to_str())["truncation"] == json.loads(ref.to_str())["truncation"]
    assert json.loads(ours.to_str())["padding"] == json.loads(ref.to_str())["padding"]
    inputs = ["abcdefghabcd", ("abcdefgh", "hgfedcbahg"), ("ab", "cdefghabcdefgh"), "a", ("", "")]
    for add in (True, False):
        assert outcome(ours.encode_batch, inputs, add_special_tokens=add) == outcome(
            ref.encode_batch, inputs, add_special_tokens=add
        )
        for x in inputs:
            a, b = (x, None) if isinstance(x, str) else x
            assert outcome(ours.encode, a, b, add_special_tokens=add) == outcome(
                ref.encode, a, b, add_special_tokens=add
            )
    # Fixed length, then off again.
    for t in (ref, ours):
        t.enable_padding(length=20, direction="left", pad_type_id=1)
    assert json.loads(ours.to_str())["padding"] == json.loads(ref.to_str())["padding"]
    assert outcome(ours.encode, "abc", "def") == outcome(ref.encode, "abc", "def")
    for t in (ref, ours):
        t.no_padding()
        t.no_truncation()
    assert json.loads(ours.to_str())["padding"] is None
    assert json.loads(ours.to_str())["truncation"] is None


def test_stride_errors_match() -> None:
    """A stride that the effective max length cannot take is refused when set, as in the reference."""
    doc = document(BERT)
    ref = tokenizers.Tokenizer.from_str(doc)
    ours = piecework.Tokenizer.from_str(doc)
    assert outcome(ref.enable_truncation, 4, stride=3)[0] == "error"
    with pytest.raises(piecework.TokenizerError):
        ours.enable_truncation(4, stride=3)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("truncation", {"max_length": 5, "strategy": "LongestFirst"}),
        (
            "truncation",
            {"max_length": 5, "strategy": "LongestFirst", "stride": 0, "direction": "left"},
        ),
        ("truncation", {"max_length": -1, "strategy": "LongestFirst", "stride": 0}),
        (
            "padding",
            {"strategy": {"Fixed": 3}, "direction": "Right", "pad_id": 0, "pad_type_id": 0},
        ),
        (
            "padding",
            {
                "strategy": "Fixed",
                "direction": "Right",
                "pad_id": 0,
                "pad_type_id": 0,
                "pad_token": "x",
            },
        ),
    ],
)
def test_bad_params_are_refused(field: str, value: Any) -> None:
    doc = json.loads(document(None))
    doc[field] = value
    assert outcome(tokenizers.Tokenizer.from_str, json.dumps(doc))[0] == "error"
    with pytest.raises(piecework.InvalidDataError):
        piecework.Tokenizer.from_str(json.dumps(doc))


JSON_FILES = [
    "all-minilm-l6-v2/tokenizer.json",
    "bert-base-uncased/tokenizer.json",
    "generated/bert-base-cased/tokenizer.json",
    "hf-tokenizers-data/bert-wiki.json",
    "wordlevel/wordlevel.json",
    "t5-small/tokenizer.json",
    "xlnet-base-cased/tokenizer.json",
    "pegasus/tokenizer.json",
    "nmt-marian/tokenizer.json",
    "gpt2/tokenizer.json",
    "roberta-base/tokenizer.json",
    "phi-2/tokenizer.json",
    "clip/tokenizer.json",
    "whisper-tiny/tokenizer.json",
    "hf-quicktour-wiki/tokenizer-wiki.json",
    "codellama/tokenizer.json",
    "phi-3-mini/tokenizer.json",
    "mistral-7b-v0.3/tokenizer.json",
]


def _lines() -> list[str]:
    lines: list[str] = []
    for rel in ["corpora/big.txt", "corpora/udhr2_all.txt"]:
        p = DATA / rel
        if p.is_file():
            lines.extend(
                s for s in p.read_text(encoding="utf-8", errors="replace").splitlines() if s.strip()
            )
    random.Random(7).shuffle(lines)
    return lines[: 4000 if SWEEP else 120]


@pytest.mark.parametrize("name", JSON_FILES)
def test_data_file_truncation_and_padding(name: str) -> None:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (the shared data is only beside the CI checkout)")
    ref = tokenizers.Tokenizer.from_file(str(path))
    try:
        ours = piecework.Tokenizer.from_file(str(path))
    except piecework.UnsupportedModelError as e:
        pytest.skip(f"not supported in this build: {e}")
    lines = _lines()
    if not lines:
        pytest.skip("corpus lines are absent")
    rng = random.Random(name)
    bad = []
    for i in range(0, len(lines) - 1, 2):
        strategy = rng.choice(["longest_first", "only_first", "only_second"])
        direction = rng.choice(["left", "right"])
        max_length = rng.choice([8, 16, 32, 64])
        stride = rng.choice([0, 1, 4])
        pad_dir = rng.choice(["left", "right"])
        multiple = rng.choice([None, 8])
        for t in (ref, ours):
            t.no_truncation()
            t.no_padding()
            # A stride the effective length cannot take is refused by both: no truncation then.
            outcome(
                t.enable_truncation,
                max_length,
                stride=stride,
                strategy=strategy,
                direction=direction,
            )
            t.enable_padding(
                direction=pad_dir,
                pad_id=0,
                pad_token="<pad>",
                pad_to_multiple_of=multiple,
            )
        pair = (lines[i], lines[i + 1])
        batch = [lines[i], pair, lines[i + 1][:20]]
        theirs = outcome(ref.encode_batch, batch)
        mine = outcome(ours.encode_batch, batch)
        if mine != theirs:
            bad.append((batch, strategy, direction, max_length, stride))
    assert not bad, f"{len(bad)} of {len(lines) // 2} batches differ; first: {bad[0]}"


def _lookups(enc: Any) -> dict[str, Any]:
    n = len(enc)
    seqs = range(3)
    return {
        "char_to_token": [[enc.char_to_token(p, s) for p in range(40)] for s in seqs],
        "char_to_word": [[enc.char_to_word(p, s) for p in range(40)] for s in seqs],
        "word_to_tokens": [[enc.word_to_tokens(w, s) for w in range(10)] for s in seqs],
        "word_to_chars": [[enc.word_to_chars(w, s) for w in range(10)] for s in seqs],
        "token_to_sequence": [enc.token_to_sequence(i) for i in range(n + 2)],
        "token_to_chars": [enc.token_to_chars(i) for i in range(n + 2)],
        "token_to_word": [enc.token_to_word(i) for i in range(n + 2)],
    }


WORDS = st.lists(st.text(alphabet=LETTERS + "z", min_size=1, max_size=4), max_size=6).map(" ".join)


@pytest.mark.parametrize("name", list(PROCESSORS))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=WORDS,
    b=st.none() | WORDS,
    add=st.booleans(),
    cut=st.tuples(st.integers(0, 12), st.integers(0, 3), st.sampled_from(["left", "right"])),
    pad=st.tuples(st.integers(0, 20), st.sampled_from(["left", "right"]), st.integers(0, 3)),
    growing=st.booleans(),
)
def test_encoding_methods(
    name: str, a: str, b: Any, add: bool, cut: Any, pad: Any, growing: bool
) -> None:
    """Encoding lookups, `truncate`, `pad` and `merge` on the encodings of both libraries."""
    doc = json.loads(document(PROCESSORS[name]))
    doc["pre_tokenizer"] = {"type": "Whitespace"}
    doc = json.dumps(doc)
    ref = tokenizers.Tokenizer.from_str(doc)
    try:
        ours = piecework.Tokenizer.from_str(doc)
    except piecework.UnsupportedModelError as e:
        pytest.skip(f"pre-tokenizer not available in this build: {e}")
    theirs = ref.encode(a, b, add_special_tokens=add)
    mine = ours.encode(a, b, add_special_tokens=add)
    assert fields(mine) == fields(theirs)
    assert _lookups(mine) == _lookups(theirs)
    # Merging keeps the sequence ranges, so the lookups must still agree.
    other_t, other_m = (
        ref.encode("ab cd", add_special_tokens=add),
        ours.encode("ab cd", add_special_tokens=add),
    )
    merged_t = tokenizers.Encoding.merge([theirs, other_t], growing_offsets=growing)
    merged_m = piecework.Encoding.merge([mine, other_m], growing_offsets=growing)
    assert fields(merged_m) == fields(merged_t)
    assert _lookups(merged_m) == _lookups(merged_t)
    length, direction, pad_id = pad
    theirs.pad(length, direction=direction, pad_id=pad_id, pad_type_id=pad_id, pad_token="[PAD]")
    mine.pad(length, direction=direction, pad_id=pad_id, pad_type_id=pad_id, pad_token="[PAD]")
    assert fields(mine) == fields(theirs)
    assert _lookups(mine) == _lookups(theirs)
    max_length, stride, tdir = cut
    t_out = outcome(theirs.truncate, max_length, stride=stride, direction=tdir)
    m_out = outcome(mine.truncate, max_length, stride=stride, direction=tdir)
    assert m_out[0] == t_out[0]
    if t_out[0] == "ok":
        assert fields(mine) == fields(theirs)
        assert _lookups(mine) == _lookups(theirs)
