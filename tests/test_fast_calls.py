"""The builtin-function fast paths of the single-text calls (`Tokenizer.encode_ids`,
`Tokenizer.encode`, `SentencePieceProcessor.encode` / `encode_as_ids`): every argument shape,
the common ones taken in Rust and all others handed on to the general method, must give
what the oracle gives, and the same errors as the general method."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import piecework
import pytest

TEXTS = ["", "a", "Hello world", "  two  spaces ", "héllo wörld ☃ 日本語", "x" * 300]


class _Str(str):
    pass


def _tokenizer(DATA, name):
    tok = piecework.Tokenizer.from_file(DATA / name / "tokenizer.json")
    ref = pytest.importorskip("tokenizers").Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
    return tok, ref


@pytest.mark.parametrize("name", ["bert-base-uncased", "t5-small", "gpt2"])
def test_tokenizer_shapes(DATA, name):
    tok, ref = _tokenizer(DATA, name)
    for text in TEXTS + [_Str("Hello world")]:
        for ast in (True, False):
            want = ref.encode(text, add_special_tokens=ast).ids
            assert tok.encode_ids(text, add_special_tokens=ast) == want
            assert tok.encode_ids(text, ast) == want
            assert tok.encode_ids(text=text, add_special_tokens=ast) == want
            assert tok.encode(text, add_special_tokens=ast).ids == want
            assert tok.encode(text, None, False, ast).ids == want
            assert tok.encode(sequence=text, add_special_tokens=ast).ids == want
            enc = tok.encode(text, add_special_tokens=ast)
            full = ref.encode(text, add_special_tokens=ast)
            assert enc.tokens == full.tokens and enc.offsets == full.offsets
        assert tok.encode_ids(text) == ref.encode(text).ids
        assert tok.encode(text).ids == ref.encode(text).ids
    # A flag that is not exactly a bool goes to the general method, which accepts what it did.
    assert tok.encode("Hello", "world").ids == ref.encode("Hello", "world").ids
    assert tok.encode(["Hello", "world"], is_pretokenized=True).ids == (
        ref.encode(["Hello", "world"], is_pretokenized=True).ids
    )


def test_tokenizer_errors_as_general_method(DATA):
    tok, _ = _tokenizer(DATA, "bert-base-uncased")
    core = tok
    calls = [
        ((), {}),
        ((3,), {}),
        (("a", 1), {}),
        (("a",), {"foo": 1}),
        (("a",), {"add_special_tokens": 1}),
        (("a", True), {"add_special_tokens": True}),
        (("a", True, 3), {}),
        (("\ud800",), {}),
    ]
    for name in ("encode_ids", "encode"):
        general = getattr(piecework._core.Tokenizer, "_" + name)
        for args, kwargs in calls:
            with pytest.raises(Exception) as want:
                general(core, *args, **kwargs)
            with pytest.raises(type(want.value)) as got:
                getattr(tok, name)(*args, **kwargs)
            assert str(got.value) == str(want.value)


def test_tokenizer_fast_follows_reconfiguration(DATA):
    tok, ref = _tokenizer(DATA, "bert-base-uncased")
    tok.enable_truncation(max_length=4)
    ref.enable_truncation(max_length=4)
    text = "a fairly long sentence of many words"
    assert tok.encode_ids(text) == ref.encode(text).ids
    assert tok.encode(text).ids == ref.encode(text).ids


@pytest.mark.parametrize("model", ["xlnet-base-cased/spiece.model", "llama2/tokenizer.model"])
def test_sentencepiece_shapes(DATA, model):
    spm = pytest.importorskip("sentencepiece")
    path = str(DATA / model)
    sp = piecework.SentencePieceProcessor(model_file=path)
    ref = spm.SentencePieceProcessor(model_file=path)
    for text in TEXTS:
        want = ref.encode(text)
        for f in (sp.encode, sp.Encode, sp.encode_as_ids, sp.EncodeAsIds):
            assert f(text) == want
            assert f(_Str(text)) == want
            assert f([text, text]) == [want, want]
            assert f(text.encode()) == want
            assert f(text, add_bos=True) == ref.encode(text, add_bos=True)
            assert f(input=text) == want
        assert sp.encode(text, out_type=str) == ref.encode(text, out_type=str)
    with pytest.raises(TypeError):
        sp.encode_as_ids("a", out_type=str)
    with pytest.raises(TypeError):
        sp.encode()
    # Options of the processor disable the fast calls, and are applied.
    sp2 = piecework.SentencePieceProcessor(model_file=path, add_bos=True, out_type=str)
    ref2 = spm.SentencePieceProcessor(model_file=path, add_bos=True, out_type=str)
    assert sp2.encode("Hello world") == ref2.encode("Hello world")
    assert sp2.encode_as_ids("Hello world") == ref2.encode_as_ids("Hello world")
    sp3 = piecework.SentencePieceProcessor(model_file=path, out_type=str)
    ref3 = spm.SentencePieceProcessor(model_file=path, out_type=str)
    assert sp3.encode("Hello world") == ref3.encode("Hello world")
    assert sp3.encode_as_ids("Hello world") == ref3.encode_as_ids("Hello world")


# Ids on both sides of every size the shared int table takes (4096, then doubling, up to 2**18)
# and beyond it; the vocabulary is sparse so that one text reaches them all.
_SPARSE_IDS = [0, 1, 2, 4095, 4096, 4097, 8191, 8192, 65535, 65536, 70000, 262143, 262144, 300001]


def _check_sparse_ids(ids: list[int], seed: int) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    vocab = {f"w{i}": i for i in ids}
    vocab["<unk>"] = 3
    ref = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    ref.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = piecework.Tokenizer.from_str(ref.to_str())
    rng = random.Random(seed)
    words = [*vocab, "nope"]
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(rng.randrange(0, 40)))
        want = ref.encode(text).ids
        got = tok.encode_ids(text)
        assert got == want and all(type(i) is int for i in got), (text, got, want)
        assert tok.encode(text).ids == want, text
    texts = [" ".join(rng.choice(words) for _ in range(9)) for _ in range(300)]
    assert tok.encode_batch_ids(texts) == [e.ids for e in ref.encode_batch(texts)]
    # In the given order: descending, the first id seen is the largest.
    text = " ".join(f"w{i}" for i in ids)
    assert tok.encode_ids(text) == ref.encode(text).ids


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_shared_ints_any_id(order):
    """Ids below, at and above each size of the process-wide table of shared ints, in a fresh
    process (the table grows from its first size there) and in this one: the same ints as the
    oracle's, whatever order the table grows in."""
    pytest.importorskip("tokenizers")
    ids = sorted(_SPARSE_IDS, reverse=order == "descending")
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_fast_calls as t; "
        "t._check_sparse_ids([int(x) for x in sys.argv[2].split(',')], 7); print('ok')"
    )
    here = str(Path(__file__).parent)
    r = subprocess.run(
        [sys.executable, "-c", script, here, ",".join(map(str, ids))],
        capture_output=True,
        timeout=300,
        check=False,
    )
    # (tokenizers warns on stdout about the holes in the vocabulary.)
    out = r.stdout.decode().splitlines()
    assert r.returncode == 0 and out[-1:] == ["ok"], r.stderr.decode()[-3000:]
    _check_sparse_ids(ids, 11)


def test_id_lists_hold_one_reference_per_slot(DATA):
    """Id lists are filled in place, each slot's int counted by hand: every slot holds exactly
    one reference to its int (an id past the shared table too), taken when the list is built
    and given back when it goes, through `encode_ids`, `encode(...).ids` and
    `encode_batch_ids`. A missing count frees a shared int under the table; an extra one
    leaks it: both change these counts."""
    tok = piecework.Tokenizer.from_file(f"{DATA}/gpt2/tokenizer.json")
    text = "Hello world, the world said hello again: world!"
    ids = tok.encode_ids(text)
    # An int no other code shares (not a small int) that the list holds several times.
    probe = max((i for i in ids if i >= 256), key=ids.count)
    per_list = ids.count(probe)
    assert per_list > 1
    before = sys.getrefcount(probe)
    for make in (
        lambda: [tok.encode_ids(text) for _ in range(500)],
        lambda: [tok.encode(text).ids for _ in range(500)],
        lambda: tok.encode_batch_ids([text] * 500),
    ):
        lists = make()
        assert all(x == ids for x in lists)
        assert sys.getrefcount(probe) - before == 500 * per_list
        del lists
        assert sys.getrefcount(probe) == before


def test_tokenizer_is_the_core(DATA):
    """`piecework.Tokenizer` objects are the core's (no instance dict in the way of the fast
    calls); the fast calls check their receiver, and a core made by `__new__` alone refuses
    every call instead of encoding."""
    tok, ref = _tokenizer(DATA, "bert-base-uncased")
    core = piecework._core.Tokenizer
    assert isinstance(tok, core) and not hasattr(tok, "__dict__")
    text = "Hello world"
    for name in ("encode_ids", "encode"):
        f = getattr(core, name)
        got = f(tok, text)
        assert (got if name == "encode_ids" else got.ids) == ref.encode(text).ids
        with pytest.raises(TypeError):
            f("not a tokenizer", text)
        with pytest.raises(TypeError):
            f()
    empty = core()
    for call in (
        lambda: empty.encode_ids(text),
        lambda: empty.encode(text),
        lambda: empty.get_vocab_size(),
        lambda: empty.no_padding(),
        lambda: empty.to_str(),
        lambda: core().copy(),
        lambda: tok._assign(empty),
    ):
        with pytest.raises(piecework.TokenizerError):
            call()
    # `tok` is unchanged by the refused `_assign`.
    assert tok.encode_ids(text) == ref.encode(text).ids
