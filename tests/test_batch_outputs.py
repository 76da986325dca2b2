"""The pipeline outputs of issue "Speed": encode_batch_ids, encode_batch_flat (TokenBatch with
zero-copy numpy and Arrow views), count_tokens, and the thread settings. Each is checked against
piecework's own `encode` and, where the data is present, against `tokenizers`."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import piecework
import pytest
from hypothesis import given
from hypothesis import strategies as st

DEFAULT = Path(piecework.__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
TEXTS = ["Hello world", "", "a much longer text, with punctuation!", "naïve café 中文 🎉", " "] * 7


@pytest.fixture(scope="module")
def tok() -> piecework.Tokenizer:
    return piecework.Tokenizer.from_file(str(DEFAULT))


def _unpadded(tok: piecework.Tokenizer) -> piecework.Tokenizer:
    t = piecework.Tokenizer.from_str(tok.to_str())
    t.no_padding()
    return t


@pytest.mark.parametrize("special", [True, False])
def test_batch_ids_equal_single_encodes(tok: piecework.Tokenizer, special: bool) -> None:
    want = [_unpadded(tok).encode(t, add_special_tokens=special).ids for t in TEXTS]
    assert tok.encode_batch_ids(TEXTS, add_special_tokens=special) == want
    assert [tok.encode_ids(t, add_special_tokens=special) for t in TEXTS] == want
    assert tok.count_tokens(TEXTS, add_special_tokens=special) == [len(w) for w in want]
    assert tok.count_tokens(TEXTS[2], add_special_tokens=special) == len(want[2])


def test_flat_batch_views(tok: piecework.Tokenizer) -> None:
    np = pytest.importorskip("numpy")
    rows = tok.encode_batch_ids(TEXTS)
    batch = tok.encode_batch_flat(TEXTS)
    assert len(batch) == len(rows)
    assert batch.to_list() == rows
    assert [batch[i] for i in range(len(rows))] == rows
    ids, splits = batch.ids, batch.row_splits
    assert ids.dtype == np.uint32 and splits.dtype == np.int64
    assert splits.tolist()[0] == 0 and splits.tolist()[-1] == sum(map(len, rows))
    assert ids.tolist() == [i for r in rows for i in r]
    padded = batch.to_numpy(pad_id=7)
    width = max(map(len, rows))
    assert padded.shape == (len(rows), width)
    for r, row in zip(padded.tolist(), rows):
        assert r == row + [7] * (width - len(row))
    assert [v.tolist() for v in batch.to_numpy(padded=False)] == rows
    # The views keep the buffer alive after the batch object is gone.
    del batch
    gc.collect()
    assert ids.tolist() == [i for r in rows for i in r]


def test_flat_batch_to_arrow(tok: piecework.Tokenizer) -> None:
    pa = pytest.importorskip("pyarrow")
    rows = tok.encode_batch_ids(TEXTS)
    arr = pa.array(tok.encode_batch_flat(TEXTS))
    assert arr.type == pa.large_list(pa.uint32())
    assert arr.to_pylist() == rows


def test_empty_batch(tok: piecework.Tokenizer) -> None:
    batch = tok.encode_batch_flat([])
    assert len(batch) == 0 and batch.to_list() == []
    assert tok.encode_batch_ids([]) == []


_TOK = piecework.Tokenizer.from_file(str(DEFAULT))


class _Texts(list):
    """A list subclass that iterates its own way (reversed): the core must read it through
    iteration, as any sequence, not item by item as it reads a plain list."""

    def __iter__(self):
        return iter(self[::-1])


class _Str(str):
    pass


def test_batch_inputs_list_tuple_and_other_sequences(tok: piecework.Tokenizer) -> None:
    # The core's batch calls directly (the wrapper hands them a list), on each input form.
    core = super(piecework.Tokenizer, tok)
    texts = [*TEXTS[:5], _Str("sub class"), "x" * 300]
    want = [tok.encode_ids(t) for t in texts]
    for form in (list(texts), tuple(texts)):
        assert core.encode_batch_flat(form, True).to_list() == want
        assert core.encode_batch_ids(form, True) == want
        assert core.count_tokens_batch(form, True) == [len(w) for w in want]
    odd = _Texts(texts)
    assert core.encode_batch_flat(odd, True).to_list() == want[::-1]
    assert core.encode_batch_ids(odd, True) == want[::-1]
    assert tok.encode_batch_flat(tuple(texts)).to_list() == want


@pytest.mark.parametrize("form", [list, tuple, _Texts])
def test_batch_input_errors(tok: piecework.Tokenizer, form) -> None:
    core = super(piecework.Tokenizer, tok)  # the core class's own batch methods
    for call in (core.encode_batch_flat, core.encode_batch_ids, core.count_tokens_batch):
        with pytest.raises(TypeError):
            call("a str is not a batch", True)
        with pytest.raises(TypeError):
            call(form(["ok", 3]), True)
        with pytest.raises(TypeError):
            call(form(["ok", b"bytes"]), True)
        # The first bad item in reading order decides: a lone surrogate before a non-str.
        bad = ["ok", "\ud800", 3] if form is not _Texts else [3, "\ud800", "ok"]
        with pytest.raises(UnicodeEncodeError):
            call(form(bad), True)
        # The same in a batch big enough for the pool: the error comes back, with nothing
        # of the batch.
        big = ["é word\n" * 3000] * 4 + ["x", "\ud800"] + ["word\nword "] * 20 + [3]
        with pytest.raises(UnicodeEncodeError):
            call(form(big if form is not _Texts else big[::-1]), True)
        with pytest.raises(UnicodeEncodeError):
            call(form(big[:-1]), True)
        with pytest.raises(TypeError):
            call((t for t in ["a", "b"]), True)


@given(st.lists(st.text(max_size=40), max_size=20))
def test_flat_batch_matches_rows_on_any_text(texts: list[str]) -> None:
    assert _TOK.encode_batch_flat(texts).to_list() == [_TOK.encode_ids(t) for t in texts]


def test_thread_settings() -> None:
    try:
        piecework.set_num_threads(1)
        assert piecework.get_num_threads() == 1
        tok = piecework.Tokenizer.from_file(str(DEFAULT))
        one = tok.encode_batch_ids(TEXTS)
        piecework.set_num_threads(2)
        assert tok.encode_batch_ids(TEXTS) == one
    finally:
        piecework.set_num_threads(0)
    assert piecework.get_num_threads() >= 1


def test_env_sets_thread_count() -> None:
    code = "import piecework; print(piecework.get_num_threads())"
    env = dict(os.environ, PIECEWORK_NUM_THREADS="3")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"
