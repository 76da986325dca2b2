"""`Encoding` fields are built on demand: the ids at encode time, the id-level fields (type
ids, masks, sequence ids) from the ids, the rest (tokens, offsets, words, overflowing parts)
from the full pipeline. Whatever field is read first, and whatever follows, every value must be
the one `tokenizers` 0.22.1 gives; these tests read the fields in different orders (the shared
`compare_encodings` always reads `tokens` second, which builds everything)."""

from __future__ import annotations

import copy
import pickle
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

tokenizers = pytest.importorskip("tokenizers")
import piecework
from oracle import compare_encodings, data_path
from test_padding_truncation import PADDING, PROCESSORS, TEXT, TRUNCATION, document

FIELDS = (
    "ids",
    "type_ids",
    "attention_mask",
    "special_tokens_mask",
    "sequence_ids",
    "n_sequences",
    "tokens",
    "offsets",
    "word_ids",
    "words",
)
# The id-level fields first (they never need the full pipeline), the full ones first, the
# overflowing parts first, and mixed.
ORDERS = [
    FIELDS + ("overflowing",),
    ("type_ids", "attention_mask", "special_tokens_mask", "sequence_ids", "n_sequences")
    + ("overflowing", "ids", "tokens", "offsets", "word_ids", "words"),
    ("tokens", "offsets", "word_ids", "words", "overflowing") + FIELDS[:6],
    ("overflowing",) + tuple(reversed(FIELDS)),
    ("offsets", "attention_mask", "word_ids", "special_tokens_mask", "type_ids")
    + ("sequence_ids", "ids", "n_sequences", "tokens", "words", "overflowing"),
    ("special_tokens_mask", "word_ids", "n_sequences", "overflowing", "sequence_ids")
    + ("tokens", "type_ids", "ids", "attention_mask", "offsets", "words"),
]


def field(enc: Any, name: str) -> Any:
    value = getattr(enc, name)
    if name == "offsets":
        return [tuple(o) for o in value]
    if name == "overflowing":
        return [read(o, tuple(f for f in FIELDS if f != "words")) for o in value]
    return value


def read(enc: Any, order: tuple[str, ...]) -> dict[str, Any]:
    """Every field, read in `order` (then once more: a second read gives the same values)."""
    first = {name: field(enc, name) for name in order}
    again = {name: field(enc, name) for name in order}
    assert first == again
    first["len"] = len(enc)
    first["repr"] = repr(enc)
    return first


def oracle_fields(enc: Any) -> dict[str, Any]:
    # `words` is deprecated in the reference (it warns): the same list as `word_ids`.
    out = read(enc, tuple(f for f in FIELDS if f != "words") + ("overflowing",))
    out["words"] = out["word_ids"]
    return out


def check_orders(make_ours: Any, theirs: Any, context: str) -> None:
    want = oracle_fields(theirs)
    for order in ORDERS:
        got = read(make_ours(), order)
        for name in want:
            assert got[name] == want[name], f"{name} [{context}] order {order}"


FILES = [
    "bert-base-uncased/tokenizer.json",
    "gpt2/tokenizer.json",
    "roberta-base/tokenizer.json",
    "t5-small/tokenizer.json",
    "xlnet-base-cased/tokenizer.json",
    "codellama/tokenizer.json",
]
TEXTS = [
    "",
    " ",
    "Hello, world!",
    "  The quick brown fox   jumps over the lazy dog.  ",
    "héllo wörld: naïve café, 日本語のテキスト and emoji 🤗🤗 too",
    (
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
        "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity"
    ),
]
CONFIGS: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = [
    ("plain", None, None),
    ("truncate", {"max_length": 9, "stride": 2}, None),
    ("truncate-left", {"max_length": 7, "stride": 1, "direction": "left"}, None),
    ("pad", None, {"length": 40, "pad_id": 3, "pad_type_id": 1, "direction": "left"}),
    ("pad-multiple", None, {"pad_to_multiple_of": 8, "pad_id": 1}),
    ("both", {"max_length": 10, "stride": 3}, {"pad_to_multiple_of": 16, "direction": "left"}),
]


def _configure(tok: Any, truncation: Any, padding: Any) -> None:
    if truncation is not None:
        tok.enable_truncation(**truncation)
    if padding is not None:
        tok.enable_padding(**padding)


@pytest.fixture(scope="module", params=FILES)
def pair_of_tokenizers(request: Any) -> tuple[Any, Any]:
    path = str(data_path(request.param))
    return tokenizers.Tokenizer.from_file(path), piecework.Tokenizer.from_file(path)


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_single_any_order(pair_of_tokenizers: Any, config: Any) -> None:
    theirs, ours = (copy.copy(t) for t in pair_of_tokenizers)
    name, truncation, padding = config
    _configure(theirs, truncation, padding)
    _configure(ours, truncation, padding)
    for text in TEXTS:
        for add in (True, False):
            check_orders(
                lambda text=text, add=add: ours.encode(text, add_special_tokens=add),
                theirs.encode(text, add_special_tokens=add),
                f"{name} add={add} {text!r}",
            )


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_batch_any_order(pair_of_tokenizers: Any, config: Any) -> None:
    theirs, ours = (copy.copy(t) for t in pair_of_tokenizers)
    name, truncation, padding = config
    _configure(theirs, truncation, padding)
    _configure(ours, truncation, padding)
    want = theirs.encode_batch(TEXTS)
    for order in ORDERS:
        got = ours.encode_batch(TEXTS)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            a, b = read(g, order), oracle_fields(w)
            for key in b:
                assert a[key] == b[key], f"batch[{i}].{key} [{name}] order {order}"
    # A generator of texts, and a batch mixing texts and pairs (built in full).
    compare_list = ours.encode_batch(t for t in TEXTS)
    for g, w in zip(compare_list, want):
        compare_encodings(g, w, name)
    mixed = [TEXTS[2], (TEXTS[3], TEXTS[4]), TEXTS[5]]
    try:
        want_mixed = theirs.encode_batch(mixed)
    except BaseException:  # noqa: BLE001 (a stride too long for the pair: the reference panics)
        with pytest.raises(piecework.TokenizerError):
            ours.encode_batch(mixed)
        return
    for g, w in zip(ours.encode_batch(mixed), want_mixed):
        assert read(g, ORDERS[1]) == oracle_fields(w)


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_in_place_ops_and_merge_after_partial_reads(pair_of_tokenizers: Any, config: Any) -> None:
    theirs, ours = (copy.copy(t) for t in pair_of_tokenizers)
    name, truncation, padding = config
    _configure(theirs, truncation, padding)
    _configure(ours, truncation, padding)
    text = TEXTS[4]
    ops = [
        lambda e: e.pad(60, direction="left", pad_id=7, pad_type_id=2, pad_token="<p>"),
        lambda e: e.pad(3),
        lambda e: e.truncate(4, stride=1),
        lambda e: e.truncate(5, stride=2, direction="left"),
        lambda e: e.truncate(0),
        lambda e: e.set_sequence_id(1),
    ]
    for first_read in ((), ("type_ids",), ("attention_mask", "n_sequences"), ("tokens",)):
        for op in ops:
            e, t = ours.encode(text), theirs.encode(text)
            for f in first_read:
                getattr(e, f)
            op(e)
            op(t)
            compare_encodings(e, t, f"{name} after {first_read}")
        parts = [ours.encode(x) for x in TEXTS[2:5]]
        for p in parts:
            for f in first_read:
                getattr(p, f)
        for growing in (True, False):
            merged = piecework.Encoding.merge(parts, growing_offsets=growing)
            ref = tokenizers.Encoding.merge(
                [theirs.encode(x) for x in TEXTS[2:5]], growing_offsets=growing
            )
            compare_encodings(merged, ref, f"{name} merge")


def test_lookups_before_fields(pair_of_tokenizers: Any) -> None:
    theirs, ours = pair_of_tokenizers
    text = TEXTS[4]
    t = theirs.encode(text)
    n = len(t)
    calls: list[tuple[str, tuple[int, ...]]] = []
    calls += [("token_to_sequence", (i,)) for i in range(n + 2)]
    calls += [("token_to_chars", (i,)) for i in range(n + 2)]
    calls += [("token_to_word", (i,)) for i in range(n + 2)]
    calls += [("word_to_tokens", (w,)) for w in range(12)]
    calls += [("word_to_chars", (w,)) for w in range(12)]
    calls += [("char_to_token", (c,)) for c in range(len(text) + 2)]
    calls += [("char_to_word", (c,)) for c in range(len(text) + 2)]
    for name, args in calls:
        e = ours.encode(text)  # fresh: the lookup is the first thing asked
        assert getattr(e, name)(*args) == getattr(t, name)(*args), (name, args)


def test_lists_are_fresh_copies() -> None:
    ours = piecework.Tokenizer.from_file(data_path("bert-base-uncased/tokenizer.json"))
    e = ours.encode("hello world")
    for name in FIELDS:
        value = getattr(e, name)
        if isinstance(value, list):
            value.append("changed")
            assert getattr(e, name)[-1:] != ["changed"], name


def test_shared_encoding_across_threads() -> None:
    """Threads that ask a fresh encoding for its fields at once all get the same values."""
    ours = piecework.Tokenizer.from_file(data_path("gpt2/tokenizer.json"))
    text = " ".join(TEXTS) * 20
    want = read(ours.encode(text), ORDERS[0])
    for _ in range(5):
        e = ours.encode(text)
        results: list[Any] = [None] * 8
        barrier = threading.Barrier(8)

        def work(k: int, e: Any, barrier: Any, results: list[Any]) -> None:
            barrier.wait()
            results[k] = read(e, ORDERS[k % len(ORDERS)])

        threads = [threading.Thread(target=work, args=(k, e, barrier, results)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for r in results:
            assert r is not None
            for key, value in r.items():
                assert value == want[key], key


@pytest.mark.parametrize(
    "loader",
    ["sentencepiece", "vocab.txt", "tiktoken"],
)
def test_loaders_without_oracle_agree_with_themselves(loader: str) -> None:
    """For tokenizers `tokenizers` cannot load: the fields read id-level first equal the
    fields read after the full pipeline ran."""
    path = {
        "sentencepiece": "llama2/tokenizer.model",
        "vocab.txt": "bert-base-uncased/vocab.txt",
        "tiktoken": "cl100k-tiktoken/cl100k_base.tiktoken",
    }[loader]
    ours = piecework.Tokenizer.from_file(data_path(path))
    for truncation, padding in [(None, None), *[(c[1], c[2]) for c in CONFIGS[1:]]]:
        tok = copy.copy(ours)
        _configure(tok, truncation, padding)
        for text in TEXTS:
            ref = read(tok.encode(text), ORDERS[2])
            for order in ORDERS:
                assert read(tok.encode(text), order) == ref, (loader, text, order)
            ref_batch = [read(e, ORDERS[2]) for e in tok.encode_batch(TEXTS)]
            got_batch = [read(e, ORDERS[1]) for e in tok.encode_batch(TEXTS)]
            assert got_batch == ref_batch


@pytest.mark.parametrize("name", list(PROCESSORS))
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    truncation=st.none() | TRUNCATION,
    padding=st.none() | PADDING,
    texts=st.lists(TEXT, min_size=1, max_size=4),
    add=st.booleans(),
    order=st.sampled_from(ORDERS),
)
def test_synthetic_id_level_fields_first(
    name: str, truncation: Any, padding: Any, texts: list[str], add: bool, order: Any
) -> None:
    """Every processor with any truncation and padding, fields read in `order`."""
    doc = document(PROCESSORS[name], truncation, padding)
    try:
        theirs = tokenizers.Tokenizer.from_str(doc)
        want_single = [theirs.encode(t, add_special_tokens=add) for t in texts]
        want_batch = theirs.encode_batch(texts, add_special_tokens=add)
    except BaseException as e:  # the reference's panics too
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        ours = piecework.Tokenizer.from_str(doc)
        with pytest.raises(piecework.TokenizerError):
            for t in texts:
                ours.encode(t, add_special_tokens=add)
            ours.encode_batch(texts, add_special_tokens=add)
        return
    ours = piecework.Tokenizer.from_str(doc)
    for t, w in zip(texts, want_single):
        got = read(ours.encode(t, add_special_tokens=add), order)
        for key, value in oracle_fields(w).items():
            assert got[key] == value, (key, t)
    for g, w in zip(ours.encode_batch(texts, add_special_tokens=add), want_batch):
        got = read(g, order)
        for key, value in oracle_fields(w).items():
            assert got[key] == value, key


def test_pickle_and_copies_in_any_state(pair_of_tokenizers: Any) -> None:
    """Pickled (every protocol) or copied before any field is read, after the id-level ones,
    after the full ones, after an in-place change: the copy has every field of the original,
    overflowing parts included, and is independent of it."""
    theirs, ours = (copy.copy(t) for t in pair_of_tokenizers)
    for tok in (theirs, ours):
        tok.enable_truncation(6, stride=2)
        tok.enable_padding(pad_to_multiple_of=4, direction="left")
    text = TEXTS[4]
    want = theirs.encode(text)
    for before in ((), ("type_ids",), ("tokens",), ("pad",)):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            e = ours.encode(text)
            t = theirs.encode(text)
            for name in before:
                if name == "pad":
                    e.pad(30)
                    t.pad(30)
                else:
                    getattr(e, name)
            clones = [
                pickle.loads(pickle.dumps(e, protocol=protocol)),
                copy.copy(e),
                copy.deepcopy(e),
            ]
            for clone in clones:
                assert isinstance(clone, piecework.Encoding)
                compare_encodings(clone, t, f"clone after {before}")
                clone.pad(40)
            compare_encodings(e, t, "original untouched by its clones")
    assert len(want) > 0
    empty = piecework.Encoding()
    compare_encodings(empty, tokenizers.Encoding(), "Encoding()")
    compare_encodings(pickle.loads(pickle.dumps(empty)), tokenizers.Encoding())
    with pytest.raises(ValueError):
        piecework.Encoding().__setstate__(([1, 2], [0], [], [], [], [], [], [], []))
