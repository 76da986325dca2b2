"""`.tiktoken` files against tiktoken itself: ids, special tokens, decoding, the split patterns
of OpenAI's published encodings, and the file reader's errors.

The oracle is a `tiktoken.Encoding` built offline from the same ranks, pattern and special
tokens (tiktoken would download the file otherwise)."""

from __future__ import annotations

import base64
import os
import random
from pathlib import Path

import piecework
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle import DATA_DIR, SWEEP, corpus_lines, data_path
from piecework import _tiktoken
from strategies import corner_text

tiktoken = pytest.importorskip("tiktoken")

CL100K = "cl100k-tiktoken/cl100k_base.tiktoken"


def _ranks(data: bytes) -> dict[bytes, int]:
    ranks = {}
    for line in data.splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _file(ranks: dict[bytes, int]) -> bytes:
    return b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items())


def _pair(data: bytes, name: str, specials: dict[str, int] | None = None):
    """(piecework tokenizer, tiktoken encoding) over the same ranks, with the pattern (and
    unless given, the special tokens) of the published encoding `name`."""
    _, pattern, known_specials = _tiktoken.ENCODINGS[name]
    specials = known_specials if specials is None else specials
    ours = piecework.Tokenizer.from_tiktoken(data, pattern, specials)
    theirs = tiktoken.Encoding(
        name=f"{name}-offline",
        pat_str=pattern,
        mergeable_ranks=_ranks(data),
        special_tokens=specials,
    )
    return ours, theirs


def _check(ours, theirs, texts) -> int:
    for text in texts:
        assert ours.encode_ids(text, add_special_tokens=False) == theirs.encode_ordinary(text), text
    return len(texts)


# ----------------------------------------------------------------- synthetic, no shared data
def _synthetic_ranks(seed: int) -> dict[bytes, int]:
    """All 256 bytes, then tokens made by joining two earlier tokens (so merges reach them),
    plus a few whole-word-only tokens no merge makes."""
    rng = random.Random(seed)
    ranks = {bytes([b]): b for b in range(256)}
    alphabet = [b"a", b"b", b" ", b"'", b"\n", b"1", "é".encode(), b"s"]
    pool = list(alphabet)
    while len(ranks) < 600:
        t = rng.choice(pool) + rng.choice(pool)
        if t not in ranks and len(t) <= 8:
            ranks[t] = len(ranks)
            pool.append(t)
    for t in (b"xyz", b" qq", b"zz9"):
        ranks[t] = len(ranks)
    return ranks


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", ["cl100k_base", "r50k_base", "o200k_base"])
def test_synthetic_vocabulary_equals_tiktoken(seed, name):
    data = _file(_synthetic_ranks(seed))
    ours, theirs = _pair(data, name, {"<|endoftext|>": 1000})
    rng = random.Random(seed)
    pieces = [
        "a",
        "b",
        " ",
        "'",
        "\n",
        "\r\n",
        "1",
        "é",
        "s",
        "S",
        "'S",
        "'ll",
        "xyz",
        " qq",
        "zz9",
    ]
    pieces += ["\t", "  ", "2", "ab", "ba", "é\u0301", "😀", "\u00a0", "!"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30))) for _ in range(600)]
    texts += ["ababababa", "ab" * 40 + "a", " " * 9, "xyz xyz", "'s's's"]
    assert _check(ours, theirs, texts) == len(texts)


def test_equal_ranks_break_ties_by_position():
    """aba is made by (ab, a) and by (a, ba): tiktoken ranks both splits as aba and merges the
    leftmost first; a tokenizer.json would rank them one after the other."""
    ranks = {bytes([b]): b for b in range(256)}
    for t in (b"ab", b"ba", b"aba"):
        ranks[t] = len(ranks)
    data = _file(ranks)
    pattern = r"\S+|\s+"
    ours = piecework.Tokenizer.from_tiktoken(data, pattern, {})
    theirs = tiktoken.Encoding(name="t", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    for text in ["ababa", "babab", "abababa", "aababa"]:
        assert ours.encode_ids(text) == theirs.encode_ordinary(text), text


def test_reader_errors_name_the_line():
    good = base64.b64encode(b"a") + b" 0\n"
    with pytest.raises(piecework.InvalidDataError, match="line 2"):
        piecework.Tokenizer.from_tiktoken(good + b"!!notbase64 1\n", r"\S+", {})
    with pytest.raises(piecework.InvalidDataError, match="line 2"):
        piecework.Tokenizer.from_tiktoken(good + base64.b64encode(b"b") + b" 0\n", r"\S+", {})
    with pytest.raises(piecework.InvalidDataError, match="rank"):
        piecework.Tokenizer.from_tiktoken(good, r"\S+", {"<|x|>": 0})
    with pytest.raises(piecework.TokenizerError, match="pattern"):
        piecework.Tokenizer.from_tiktoken(good)


def _load_both(data: bytes, tmp: Path):
    """(piecework's tokenizer or its error, tiktoken's ranks or its error) for one file; the
    ranks from tiktoken's own loader (`base64.b64decode`, not validating)."""
    from tiktoken.load import load_tiktoken_bpe

    path = tmp / "t.tiktoken"
    path.write_bytes(data)
    try:
        theirs = load_tiktoken_bpe(str(path))
        tiktoken.Encoding(name="t", pat_str=r"\S+|\s+", mergeable_ranks=theirs, special_tokens={})
    except Exception as e:  # noqa: BLE001 - any refusal counts as one
        theirs = e
    try:
        ours = piecework.Tokenizer.from_tiktoken(data, r"\S+|\s+", {})
    except piecework.InvalidDataError as e:
        ours = e
    return ours, theirs


# GPT-2's byte-level characters: printable Latin-1 bytes stand for themselves, the others
# for 256, 257, ... in byte order.
_PRINTABLE = [*range(33, 127), *range(161, 173), *range(174, 256)]
_BYTE_OF_CHAR = {b: b for b in _PRINTABLE}
_BYTE_OF_CHAR.update(
    {256 + i: b for i, b in enumerate(b for b in range(256) if b not in _PRINTABLE)}
)


def _token_bytes(tok, i: int) -> bytes | None:
    s = tok.id_to_token(i)
    return None if s is None else bytes(_BYTE_OF_CHAR[ord(c)] for c in s)


# A token written as Python's base64 reader takes it when not validating: stray characters
# (also non-ASCII bytes), `=` anywhere, bits or padding left out or added, the empty token.
_lenient_token = st.tuples(
    st.binary(max_size=7),
    st.lists(
        st.tuples(
            st.integers(0, 16), st.sampled_from([b"=", b"==", b"!", b"-", b"\xc3\xa9", b"A"])
        ),
        max_size=3,
    ),
    st.integers(0, 3),
)


def _spell(token: tuple) -> bytes:
    raw, edits, cut = token
    s = bytearray(base64.b64encode(raw))
    for at, what in edits:
        s[at:at] = what
    return bytes(s[: len(s) - cut] if cut and len(s) > cut else s)


@given(st.lists(_lenient_token, min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_lenient_base64_lines_read_as_tiktoken_reads_them(tokens, rng):
    """Each line's token is the bytes Python's reader gives (or the file is refused where
    tiktoken refuses it); whisper's multilingual vocabulary has such a line (`=`, the empty
    token)."""
    import tempfile

    base = [bytes([b]) for b in range(256)]
    lines = [base64.b64encode(t) + b" %d" % i for i, t in enumerate(base)]
    lines += [_spell(t) + b" %d" % (256 + i) for i, t in enumerate(tokens)]
    rng.shuffle(lines)
    data = b"\n".join(lines) + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = _load_both(data, Path(tmp))
    if isinstance(theirs, Exception):
        assert isinstance(ours, Exception), (data, theirs)
        return
    assert not isinstance(ours, Exception), (data, ours)
    assert {_token_bytes(ours, r): r for r in theirs.values()} == theirs
    enc = tiktoken.Encoding(name="t", pat_str=r"\S+|\s+", mergeable_ranks=theirs, special_tokens={})
    ids = sorted(theirs.values())
    assert ours.decode(ids) == enc.decode(ids)
    for text in ("ab c", "\xe9\xe9 a\xe9", "=="):
        assert ours.encode_ids(text) == enc.encode_ordinary(text)


def test_detected_by_content():
    data = _file(_synthetic_ranks(0))
    assert piecework.detect_kind(data) == "tiktoken"
    # An unknown .tiktoken needs its pattern: from_file says so instead of guessing.
    with pytest.raises(piecework.TokenizerError, match="pattern"):
        piecework.Tokenizer.from_file(data)


# ----------------------------------------------------------------- cl100k_base, shared data
@pytest.fixture(scope="module")
def cl100k():
    data = data_path(CL100K).read_bytes()
    return (piecework.Tokenizer.from_file(DATA_DIR / CL100K), *_pair(data, "cl100k_base"))


def test_cl100k_corpus_equals_tiktoken(cl100k):
    from_file, ours, theirs = cl100k
    lines = corpus_lines(200_000 if SWEEP else 3_000)
    assert _check(ours, theirs, lines) == len(lines)
    # from_file recognises the published file and takes tiktoken's pattern and special tokens.
    assert _check(from_file, theirs, lines[:500]) == min(500, len(lines))
    docs = ["\n".join(lines[i : i + 400]) for i in range(0, len(lines), 400)]
    assert _check(ours, theirs, docs) == len(docs)


def test_cl100k_special_tokens_and_decode(cl100k):
    _, ours, theirs = cl100k
    text = "a<|endoftext|>b <|fim_prefix|>x<|endofprompt|>"
    assert ours.encode_ids(text) == theirs.encode(text, allowed_special="all")
    ids = theirs.encode_ordinary("héllo wörld 😀 it's 1234567")
    assert ours.decode(ids) == theirs.decode(ids)


@given(corner_text)
def test_cl100k_unicode_corners_equal_tiktoken(cl100k, text):
    _, ours, theirs = cl100k
    assert ours.encode_ids(text, add_special_tokens=False) == theirs.encode_ordinary(text)


# tekken's split (Mistral; `config.pattern` of its files) and Llama 3's, as published.
_TEKKEN_PAT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _offline(data: bytes, pattern: str):
    ours = piecework.Tokenizer.from_tiktoken(data, pattern, {})
    theirs = tiktoken.Encoding(
        name="offline", pat_str=pattern, mergeable_ranks=_ranks(data), special_tokens={}
    )
    return ours, theirs


@pytest.fixture(scope="module")
def other_patterns():
    """Other published patterns over cl100k's ranks: o200k's and tekken's (the hand-written
    o200k split), r50k's and Llama 3's (the general regex path)."""
    data = data_path(CL100K).read_bytes()
    pairs = [_pair(data, name, {}) for name in ("r50k_base", "o200k_base")]
    return pairs + [_offline(data, p) for p in (_TEKKEN_PAT, _LLAMA3_PAT)]


# Every kind of character the o200k and tekken splits tell apart: lower, upper, title-case,
# modifier and other letters, combining marks (neither letters nor numbers), digits of
# several scripts, contractions in both cases and with U+017F, every newline and space.
_O200K_ALPHABET = list(
    " \t\r\n\u00a0\u2028\u3000\x0b\x85'sSlLvVeEtTmMdD\u017f1234567890\u0663\u00b2\u2167"
    "aZ\u00e9\u00c9!?./\u0301\u0300\u093f\U0001d165\U0001f600\U0001f3fb\u200d\u01c5\u02b0"
    "\u3042\u30fc\u6f22\u05d0\u0e01\U00020000\U00010400\U00010428\u00df"
)


@given(st.text(alphabet=st.sampled_from(_O200K_ALPHABET), max_size=40) | corner_text)
def test_published_patterns_on_cl100k_ranks(other_patterns, text):
    for ours, theirs in other_patterns:
        assert ours.encode_ids(text, add_special_tokens=False) == theirs.encode_ordinary(text)


# ----------------------------------------------------------------- o200k_base, when present
O200K = "o200k-tiktoken/o200k_base.tiktoken"


@pytest.fixture(scope="module")
def o200k():
    """The published o200k_base file: `PIECEWORK_O200K`, else in the shared data."""
    env = os.environ.get("PIECEWORK_O200K")
    path = Path(env) if env else DATA_DIR / O200K
    if not path.exists():
        pytest.skip(f"o200k_base.tiktoken not found: {path} (set PIECEWORK_O200K)")
    data = path.read_bytes()
    return (piecework.Tokenizer.from_file(path), *_pair(data, "o200k_base"))


def test_o200k_corpus_equals_tiktoken(o200k):
    from_file, ours, theirs = o200k
    lines = corpus_lines(200_000 if SWEEP else 3_000)
    assert _check(ours, theirs, lines) == len(lines)
    assert _check(from_file, theirs, lines[:500]) == min(500, len(lines))
    docs = ["\n".join(lines[i : i + 400]) for i in range(0, len(lines), 400)]
    assert _check(ours, theirs, docs) == len(docs)


@given(st.text(alphabet=st.sampled_from(_O200K_ALPHABET), max_size=40) | corner_text)
def test_o200k_unicode_corners_equal_tiktoken(o200k, text):
    _, ours, theirs = o200k
    assert ours.encode_ids(text, add_special_tokens=False) == theirs.encode_ordinary(text)


def test_cl100k_saved_as_tokenizer_json(cl100k):
    """to_str writes the model out; the file loads back, and tokenizers reads it as well."""
    _, ours, theirs = cl100k
    tokenizers = pytest.importorskip("tokenizers")
    saved = ours.to_str()
    again = piecework.Tokenizer.from_str(saved)
    hf = tokenizers.Tokenizer.from_str(saved)
    for text in corpus_lines(200)[:200] + ["Hello world, it's 12345 ok\n\n  "]:
        expected = theirs.encode_ordinary(text)
        assert again.encode_ids(text, add_special_tokens=False) == expected
        assert hf.encode(text, add_special_tokens=False).ids == expected
