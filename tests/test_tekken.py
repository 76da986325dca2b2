"""Mistral's tekken.json against its own reader, mistral-common's `Tekkenizer`.

The published files come inside the mistral-common wheel (`mistral_common/data`), so these
tests need no ../shared data; its corpora, when present, only add texts.
"""

from __future__ import annotations

import base64
import json
import pickle
import random
from pathlib import Path

import piecework
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import DATA_DIR, SWEEP, corpus_lines
from strategies import corner_text

tekken = pytest.importorskip("mistral_common.tokens.tokenizers.tekken")
base = pytest.importorskip("mistral_common.tokens.tokenizers.base")
import mistral_common  # after the skip: it is optional

Tekkenizer = tekken.Tekkenizer
KEEP = base.SpecialTokenPolicy.KEEP
IGNORE = base.SpecialTokenPolicy.IGNORE

PACKAGED = sorted((Path(mistral_common.__file__).parent / "data").glob("tekken*.json"))

_loaded: dict[Path, tuple[piecework.Tokenizer, object]] = {}


def _both(path: Path):
    if path not in _loaded:
        _loaded[path] = (piecework.Tokenizer.from_file(path), Tekkenizer.from_file(path))
    return _loaded[path]


@pytest.fixture(scope="module", params=PACKAGED, ids=[p.name for p in PACKAGED])
def packaged(request):
    return _both(request.param)


def test_the_wheel_ships_tekken_files():
    # Guards the parametrisation below against testing nothing.
    assert len(PACKAGED) >= 2, PACKAGED


def _check(ours, theirs, texts) -> int:
    try:
        bos = [theirs.bos_id]
    except ValueError:  # no `<s>`: mistral-common cannot add it, we add nothing
        bos = []
    for text in texts:
        plain = theirs.encode(text, bos=False, eos=False)
        assert ours.encode_ids(text, add_special_tokens=False) == plain, text
        assert ours.encode_ids(text) == bos + plain, text
    return len(texts)


def _bytes_to_chars() -> dict[int, str]:
    """GPT-2's byte-level alphabet: printable bytes stand for themselves, the others for
    the characters from U+0100 on, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


_CHAR_OF_BYTE = _bytes_to_chars()


_BUILT_IN = [
    "Hello world",
    "  leading spaces,\ttabs\n\n\nand new lines  \n",
    "日本語のテキストと English mixed",
    "Ünïcödé CAPS and lowerCamelCase, HTTPServer, iPhone",
    "def f(x):\n    return x**2  # 1234567890",
    "🙂👍🏽 emoji, \u00a0no-break, \u2028line sep",
    "x" * 500,
    "",
]


def test_packaged_files_equal_mistral_common(packaged):
    ours, theirs = packaged
    assert _check(ours, theirs, _BUILT_IN) == len(_BUILT_IN)


def test_packaged_files_on_the_corpora(packaged):
    lines = corpus_lines(200_000 if SWEEP else 1_500)
    if not lines:
        pytest.skip(f"no corpora in {DATA_DIR / 'corpora'} (the ../shared data)")
    ours, theirs = packaged
    assert _check(ours, theirs, lines) == len(lines)
    docs = ["\n".join(lines[i : i + 300]) for i in range(0, len(lines), 300)]
    assert _check(ours, theirs, docs) == len(docs)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=corner_text)
def test_packaged_files_on_unicode_corners(packaged, text):
    ours, theirs = packaged
    assert ours.encode_ids(text, add_special_tokens=False) == theirs.encode(text, False, False)


def test_special_tokens_and_vocabulary(packaged):
    ours, theirs = packaged
    assert ours.get_vocab_size() == theirs.n_words
    n = theirs.num_special_tokens
    for i in range(n):
        piece = theirs.id_to_piece(i)
        assert ours.id_to_token(i) == piece
        assert ours.token_to_id(piece) == theirs.get_special_token(piece) == i
    for i in (n, n + 1, n + 255, n + 256, theirs.n_words - 1):
        assert ours.id_to_token(i) is not None
        raw = theirs.id_to_byte_piece(i)
        assert ours.id_to_token(i) == "".join(_CHAR_OF_BYTE[b] for b in raw)
    assert ours.id_to_token(theirs.n_words) is None


def test_decode_with_and_without_special_tokens(packaged):
    ours, theirs = packaged
    rng = random.Random(7)
    n, size = theirs.num_special_tokens, theirs.n_words
    for _ in range(300):
        ids = [
            rng.randrange(n) if rng.random() < 0.2 else rng.randrange(n, size)
            for _ in range(rng.randrange(0, 12))
        ]
        assert ours.decode(ids) == theirs.decode(ids, IGNORE), ids
        assert ours.decode(ids, skip_special_tokens=False) == theirs.decode(ids, KEEP), ids


def test_recognised_by_content_and_pickled(tmp_path):
    path = PACKAGED[0]
    data = path.read_bytes()
    assert piecework.detect_kind(data) == "tekken"
    # By content, not by name (mistral-common wants "tekken" in the name; we do not).
    other = tmp_path / "tokenizer-file"
    other.write_bytes(data)
    ours = piecework.Tokenizer.from_file(other)
    again = pickle.loads(pickle.dumps(ours))
    text = "Pickled tekken, 1234 ünïcödé"
    assert (
        again.encode_ids(text) == ours.encode_ids(text) == _both(path)[1].encode(text, True, False)
    )


# ----------------------------------------------------------------- synthetic files
def _synthetic_vocab(rng: random.Random, size: int) -> list[bytes]:
    """The 256 bytes, then tokens joined from two earlier ones (reachable by merges), and a few
    no merge makes."""
    tokens = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    pool = [b"a", b"b", b" ", b"\n", b"1", "é".encode(), b"S", b"'", b"["]
    while len(tokens) < size:
        t = rng.choice(pool) + rng.choice(pool)
        if t not in seen and len(t) <= 10:
            tokens.append(t)
            seen.add(t)
            pool.append(t)
    for t in (b"xyz", b" qq"):
        if t not in seen:
            tokens.append(t)
    return tokens


def _tekken_doc(tokens, specials, num_special, vocab_size, version="v7") -> dict:
    doc = {
        "config": {
            "pattern": tekken_pattern(),
            "num_vocab_tokens": len(tokens),
            "default_vocab_size": vocab_size,
            "default_num_special_tokens": num_special,
            "version": version,
        },
        "vocab": [
            {
                "rank": i,
                "token_bytes": base64.b64encode(t).decode(),
                "token_str": t.decode("utf-8", "replace"),
            }
            for i, t in enumerate(tokens)
        ],
    }
    if specials is not None:
        doc["special_tokens"] = [
            {"rank": i, "token_str": s, "is_control": True} for i, s in enumerate(specials)
        ]
    return doc


def tekken_pattern() -> str:
    return json.loads(PACKAGED[0].read_bytes())["config"]["pattern"] if PACKAGED else ""


_PIECES = ["a", "b", " ", "\n", "1", "é", "S", "'", "[", "ab", "xyz", " qq", "😀", "\t", "Ab"]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    extra=st.integers(0, 300),
    listed=st.one_of(st.none(), st.integers(0, 6)),
    fill=st.integers(0, 40),
    cut=st.integers(0, 200),
)
def test_synthetic_files_equal_mistral_common(tmp_path_factory, seed, extra, listed, fill, cut):
    """Any vocabulary size, special-token list (or none: the first versions' 20), filler
    count and truncation of the vocabulary."""
    rng = random.Random(seed)
    tokens = _synthetic_vocab(rng, 256 + extra)
    names = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[X]"]
    specials = None if listed is None else names[:listed]
    first = 20 if specials is None else len(specials)
    num_special = first + fill
    vocab_size = num_special + max(256, len(tokens) - cut)
    path = tmp_path_factory.mktemp("tekken") / "tekken_synthetic.json"
    version = "v3" if specials is None else "v7"
    path.write_text(json.dumps(_tekken_doc(tokens, specials, num_special, vocab_size, version)))
    ours, theirs = piecework.Tokenizer.from_file(path), Tekkenizer.from_file(path)
    texts = ["".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 40))) for _ in range(80)]
    assert _check(ours, theirs, texts) == len(texts)
    assert ours.get_vocab_size() == theirs.n_words
    for i in range(num_special):
        assert ours.id_to_token(i) == theirs.id_to_piece(i)


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "tekken_bad.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda d: d["vocab"][300].update(token_bytes=d["vocab"][299]["token_bytes"]),
            "vocab[300]",
        ),
        (lambda d: d["vocab"][5].update(rank=6), "vocab[5].rank"),
        (lambda d: d["vocab"][65].update(token_bytes="QkI="), "vocab[65]"),
        (lambda d: d["config"].update(default_num_special_tokens=2), "special tokens listed"),
        (lambda d: d["special_tokens"][2].update(token_str="<s>"), "listed twice"),
        (lambda d: d["special_tokens"][1].update(rank=3), "special_tokens[1].rank"),
        (lambda d: d["config"].update(default_vocab_size=10**6), "default_vocab_size"),
        (lambda d: d["vocab"][7].update(token_bytes="!!"), "vocab[7]"),
        (lambda d: d.pop("vocab"), "vocab"),
    ],
)
def test_bad_files_name_the_field(tmp_path, change, message):
    doc = _tekken_doc(_synthetic_vocab(random.Random(1), 400), ["<unk>", "<s>", "</s>"], 10, 410)
    change(doc)
    with pytest.raises(piecework.InvalidDataError, match=message.replace("[", r"\[")):
        piecework.Tokenizer.from_tekken(_write(tmp_path, doc))


def test_special_token_spelled_as_a_token_is_refused(tmp_path):
    tokens = _synthetic_vocab(random.Random(2), 300) + [b"[X]"]
    doc = _tekken_doc(tokens, ["<unk>", "<s>", "[X]"], 5, 5 + len(tokens))
    with pytest.raises(piecework.UnsupportedModelError, match=r"\[X\]"):
        piecework.Tokenizer.from_tekken(_write(tmp_path, doc))
