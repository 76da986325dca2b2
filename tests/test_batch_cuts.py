"""Batches of a few long documents: piecework cuts them after newlines (rust/cuts.rs) so that
their pieces run on every thread. The ids must still be the oracle's for the whole documents:
special tokens and truncation once per document, nothing changed at a cut (added tokens at a
line start, CRLF, digits, runs of newlines, any Unicode around them). tokenizer.json pipelines
are cut between two visible characters (the tiktoken-style splits of `.tiktoken` and
`tekken.json` files: before a visible character, o200k and tekken not before `/`),
SentencePiece BPE `.model`s (identity normalizer) after any newline."""

from __future__ import annotations

import random

import piecework
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import DATA_DIR, data_path
from strategies import corner_char, corner_text

tokenizers = pytest.importorskip("tokenizers")

# bert/t5/gpt2/roberta are cut (roberta: an lstrip <mask>); codellama is not (a control case).
MODELS = ["bert-base-uncased", "t5-small", "gpt2", "roberta-base", "codellama"]
LEADS = ["", "", "", "42 ", "\r", "\n", " ", "\t", "é", "中", "x\u0301", "\u0301"]
LEADS += ["д", "(", "«", "\U0001f600", "\u200b", "\u00ad", "\x01", "ﬁ", "İ", "Σ", "\u0915\u094d"]


@pytest.fixture(autouse=True)
def two_threads():
    before = piecework.get_num_threads()
    piecework.set_num_threads(2)
    yield
    piecework.set_num_threads(before)


def _pair(name: str):
    path = str(data_path(name, "tokenizer.json"))
    return piecework.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)


def _lines() -> list[str]:
    prose = data_path("corpora", "big.txt").read_text(encoding="utf-8")
    lines = [ln for ln in prose[:300_000].splitlines() if ln.strip()]
    mars = sorted((DATA_DIR / "corpora" / "wikipedia-mars").glob("*.txt"))
    for p in mars[:6]:
        lines += p.read_text(encoding="utf-8").splitlines()[:300]
    return lines


def _docs(lines: list[str], specials: list[str], seed: int, n: int = 3) -> list[str]:
    """`n` documents of ~40-120 KB, lines led by added tokens and oddities now and then."""
    rng = random.Random(seed)
    leads = LEADS + specials
    docs = []
    for _ in range(n):
        parts: list[str] = []
        size = 0
        goal = rng.randint(40_000, 120_000)
        while size < goal:
            line = rng.choice(leads) + rng.choice(lines) + rng.choice(["\n", "\n", "\r\n", "\n\n"])
            parts.append(line)
            size += len(line.encode())
        docs.append("".join(parts))
    return docs + ["a short text", ""]


def _specials(ours: piecework.Tokenizer) -> list[str]:
    return [t for t in ours.get_vocab(with_added_tokens=True) if t.startswith(("[", "<"))][:12]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("special", [True, False])
def test_long_documents_match_the_oracle(name: str, special: bool) -> None:
    ours, ref = _pair(name)
    docs = _docs(_lines(), _specials(ours), seed=len(name) + special)
    want = [e.ids for e in ref.encode_batch(docs, add_special_tokens=special)]
    assert ours.encode_batch_ids(docs, add_special_tokens=special) == want
    assert ours.encode_batch_flat(docs, add_special_tokens=special).to_list() == want
    assert ours.count_tokens(docs, add_special_tokens=special) == [len(w) for w in want]


@pytest.mark.parametrize("name", ["bert-base-uncased", "gpt2"])
def test_truncation_applies_to_the_whole_document(name: str) -> None:
    ours, ref = _pair(name)
    for t in (ours, ref):
        t.enable_truncation(max_length=3000)
    docs = _docs(_lines(), _specials(ours), seed=7)
    want = [e.ids for e in ref.encode_batch(docs)]
    assert ours.encode_batch_ids(docs) == want
    assert ours.encode_batch_flat(docs).to_list() == want


@settings(max_examples=12)
@given(st.lists(corner_text, min_size=1, max_size=30), st.integers(0, 2**32))
def test_generated_documents_match_the_oracle(lines: list[str], seed: int) -> None:
    """Lines of Unicode corners (every whitespace, controls, combining marks, astral
    characters), repeated and shuffled into documents long enough to be cut."""
    if not (DATA_DIR / "bert-base-uncased").is_dir():
        pytest.skip(f"shared test data not found at {DATA_DIR}")
    rng = random.Random(seed)
    pool = [ln + rng.choice(["a", "7", "Z"]) for ln in lines]
    docs = []
    for _ in range(2):
        body = [rng.choice(pool) + "\n" + rng.choice("ab1") for _ in range(40_000 // 12)]
        docs.append("".join(body))
    for name in ["bert-base-uncased", "gpt2", "t5-small"]:
        ours, ref = _PAIRS.get(name) or _PAIRS.setdefault(name, _pair(name))
        want = [e.ids for e in ref.encode_batch(docs)]
        assert ours.encode_batch_ids(docs) == want, name
        assert ours.encode_batch_flat(docs).to_list() == want, name


@pytest.mark.parametrize("name", ["bert-base-uncased", "t5-small", "codellama"])
def test_mixed_batches_match_the_oracle(name: str) -> None:
    """Long documents among many lines, in several orders: `encode_batch_flat` sends lines
    to the pool in chunks and documents in pieces, and must join the results in order."""
    ours, ref = _pair(name)
    lines = _lines()
    docs = _docs(lines, _specials(ours), seed=3, n=2)
    rng = random.Random(5)
    mixed = rng.sample(lines, 300) + docs
    rng.shuffle(mixed)
    for batch in (mixed, docs + lines[:50], lines[:50] + docs, docs[:1] * 9):
        for special in (True, False):
            want = [e.ids for e in ref.encode_batch(batch, add_special_tokens=special)]
            got = ours.encode_batch_flat(batch, add_special_tokens=special).to_list()
            assert got == want, (name, special)


_PAIRS: dict[str, tuple] = {}


# SentencePiece BPE models with an identity normalizer: cut after any newline.
SP_MODELS = ["llama2/tokenizer.model", "mistral-7b-v0.3/tokenizer.model.v3"]
SP_LEADS = LEADS + ["  ", "▁", "▁▁x", "<s>", "<0x0A>", "\u3000", "\x00", "\r\n"]

_SP: dict[str, tuple] = {}


def _sp_pair(model: str):
    spm = pytest.importorskip("sentencepiece")
    if model not in _SP:
        path = data_path(*model.split("/"))
        _SP[model] = (
            piecework.SentencePieceProcessor(model_file=str(path)),
            spm.SentencePieceProcessor(model_file=str(path)),
        )
    return _SP[model]


@pytest.mark.parametrize("model", SP_MODELS)
@pytest.mark.parametrize(
    "options",
    [{}, {"add_bos": True, "add_eos": True}, {"add_bos": True, "reverse": True}],
)
def test_sentencepiece_long_documents_match_the_oracle(model: str, options: dict) -> None:
    ours, ref = _sp_pair(model)
    rng = random.Random(len(model) + len(options))
    lines = _lines()
    docs = []
    for _ in range(3):
        parts, size, goal = [], 0, rng.randint(40_000, 120_000)
        while size < goal:
            end = rng.choice(["\n", "\n", "\r\n", "\n\n", " \n", "\n "])
            line = rng.choice(SP_LEADS) + rng.choice(lines) + end
            parts.append(line)
            size += len(line.encode())
        docs.append("".join(parts))
    docs += ["a short text", "x\n"]
    want = ref.encode(docs, **options)
    assert ours.encode(docs, **options) == want
    assert [ours.encode(d, **options) for d in docs] == want
    assert ours.encode_batch_ids(docs, **options) == want
    assert ours.encode_batch_flat(docs, **options).to_list() == want
    # Documents among many lines: lines go to the pool in chunks, documents in pieces.
    mixed = rng.sample(lines, 200) + docs
    rng.shuffle(mixed)
    assert ours.encode_batch_flat(mixed, **options).to_list() == ref.encode(mixed, **options)
    if not options:
        tok = piecework.Tokenizer.from_file(str(data_path(*model.split("/"))))
        assert tok.encode_batch_ids(docs, add_special_tokens=False) == want
        assert tok.encode_batch_flat(docs, add_special_tokens=False).to_list() == want


@settings(max_examples=10, deadline=None)
@given(
    st.lists(corner_text, min_size=1, max_size=20),
    st.lists(corner_char, min_size=1, max_size=20),
    st.integers(0, 2**32),
)
def test_sentencepiece_generated_documents_match_the_oracle(
    lines: list[str], starts: list[str], seed: int
) -> None:
    """Lines of Unicode corners, each newline followed by a corner character (whitespace,
    controls, combining marks, astral characters): every kind of cut."""
    if not (DATA_DIR / "llama2").is_dir():
        pytest.skip(f"shared test data not found at {DATA_DIR}")
    rng = random.Random(seed)
    docs = []
    for _ in range(2):
        body = [rng.choice(lines) + "\n" + rng.choice(starts) for _ in range(40_000 // 10)]
        docs.append("".join(body))
    for model in SP_MODELS:
        ours, ref = _sp_pair(model)
        want = ref.encode(docs)
        assert ours.encode(docs) == want, model
        assert ours.encode_batch_flat(docs).to_list() == want, model


@settings(max_examples=10, deadline=None)
@given(
    st.lists(corner_text, min_size=1, max_size=20),
    st.lists(corner_char, min_size=1, max_size=20),
    st.integers(0, 2**32),
)
def test_generated_cuts_before_any_character_match_the_oracle(
    lines: list[str], starts: list[str], seed: int
) -> None:
    """Every newline followed by a corner character, and preceded by a visible letter or
    by the line's own corners: cuts land before letters of every script, marks, astral
    characters, and are refused next to whitespace and controls."""
    if not (DATA_DIR / "bert-base-uncased").is_dir():
        pytest.skip(f"shared test data not found at {DATA_DIR}")
    rng = random.Random(seed)
    pool = [ln + rng.choice(["", "a", "д", ".", "\u0301", "\U0001f600"]) for ln in lines]
    docs = []
    for _ in range(2):
        body = [rng.choice(pool) + "\n" + rng.choice(starts) for _ in range(40_000 // 12)]
        docs.append("".join(body))
    for name in ["bert-base-uncased", "gpt2", "t5-small", "roberta-base"]:
        ours, ref = _PAIRS.get(name) or _PAIRS.setdefault(name, _pair(name))
        want = [e.ids for e in ref.encode_batch(docs)]
        assert ours.encode_batch_ids(docs) == want, name
        assert ours.encode_batch_flat(docs).to_list() == want, name


@pytest.mark.parametrize("seed", range(8))
def test_trained_bpe_models_cut_exactly(seed: int) -> None:
    """SentencePiece BPE models trained here with an identity normalizer and random options
    (byte fallback or not, dummy prefix or not, user-defined pieces among them `\\n`, `\\n\\n`
    and `▁▁`): where the cuts are allowed they change nothing, where not they are not made."""
    spm = pytest.importorskip("sentencepiece")
    import fuzz_spm_lib

    fuzz_spm_lib.spm = spm
    random_texts, train = fuzz_spm_lib.random_texts, fuzz_spm_lib.train
    rng = random.Random(9000 + seed)
    corpus = _lines()[:3000]
    cfg = {
        "model_type": "bpe",
        "vocab_size": rng.choice([600, 1200]),
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
        # Without byte fallback and without a `\n` piece, or with `\n\n`: no cuts.
        "byte_fallback": seed % 3 != 0,
        "add_dummy_prefix": seed % 2 == 0,
        "split_by_whitespace": rng.random() < 0.7,
    }
    uds = [["\n", "▁▁", "ab"], ["\n\n", "<b>"], ["é", "▁▁"], []][seed % 4]
    if uds:
        cfg["user_defined_symbols"] = uds
    model = train(corpus, cfg)
    ours = piecework.SentencePieceProcessor(model_proto=model)
    ref = spm.SentencePieceProcessor(model_proto=model)
    texts = [t for t in random_texts(rng, 400, corpus) if "\ud800" not in t]
    docs = []
    for _ in range(3):
        parts, size = [], 0
        while size < 50_000:
            t = rng.choice(texts) + rng.choice(["\n", "\n", "\n\n", " \n", "\n "])
            parts.append(t)
            size += len(t.encode())
        docs.append("".join(parts))
    want = ref.encode(docs)
    assert ours.encode(docs) == want, cfg
    assert ours.encode(docs, add_bos=True, add_eos=True) == ref.encode(
        docs, add_bos=True, add_eos=True
    ), cfg


# ------------------------------------------------- byte-level tiktoken-style splits
# cl100k_base, Llama 3, o200k_base and tekken are cut after a newline before a visible
# character, o200k and tekken not before `/` (their `[\r\n/]*` after punctuation takes it).
# Lines start and end with what those patterns treat apart around a newline: `/`,
# punctuation (its match takes the newlines after it), white space, `\r`, digits,
# contractions, marks, special tokens.
TIKTOKEN_LEADS = LEADS + ["/", "//x", "/\n", " /", ".", "./", "-\n", "  ", "\r\n", "'s", "'LL"]
TIKTOKEN_LEADS += ["1234", "\u3000", "\u00a0x", "\u0301", "\U0001f600/"]
TIKTOKEN_ENDS = ["\n", "\n", "\r\n", "\n\n", " \n", ".\n", "/\n", "!)\n", "\t\n", "\n ", ":\r\n"]
_LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_PAT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


# What a newline is followed by where a cut must not go (a looser rule would cut there): a
# document with many of them after punctuation makes the cut planner meet them often.
RISKY_LEADS = ["/", "//x", "/\n", "\n", "\r\n", "\n/", " \n", "\t\n"]
RISKY_ENDS = [".\n", "/\n", "!)\n", ":\r\n", "-\n", "\n"]


def _tiktoken_docs(seed: int, specials: list[str], n: int = 3) -> list[str]:
    """`n` documents of 60-120 KB: the first of lines mostly ended by punctuation and led by
    what must not follow a cut, the others of lines with any tricky lead and end."""
    rng = random.Random(seed)
    lines = _lines()
    leads = TIKTOKEN_LEADS + specials
    docs = []
    for k in range(n):
        parts: list[str] = []
        size, goal = 0, rng.randint(60_000, 120_000)
        while size < goal:
            if k == 0:
                lead = rng.choice(RISKY_LEADS if rng.random() < 0.7 else leads)
                end = rng.choice(RISKY_ENDS)
            else:
                lead, end = rng.choice(leads), rng.choice(TIKTOKEN_ENDS)
            line = lead + rng.choice(lines) + end
            parts.append(line)
            size += len(line.encode())
        docs.append("".join(parts))
    return docs + ["a short text\n/x", ""]


def _assert_cut(ours: piecework.Tokenizer, docs: list[str]) -> None:
    """The long documents are really cut (a test of the cuts, not of whole texts)."""
    pieces = ours._batch_pieces(docs)
    assert all(p > 1 for p, d in zip(pieces, docs) if len(d) > 50_000), pieces


def _ranks(path) -> dict[bytes, int]:
    import base64

    ranks = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _check_tiktoken(ours: piecework.Tokenizer, theirs, docs: list[str]) -> None:
    _assert_cut(ours, docs)
    want = [theirs.encode(d, allowed_special="all") for d in docs]
    for special in (True, False):
        assert ours.encode_batch_ids(docs, add_special_tokens=special) == want
        assert ours.encode_batch_flat(docs, add_special_tokens=special).to_list() == want


_TIKTOKEN: dict[str, tuple] = {}


def _tiktoken_pair(path, name: str, pattern: str | None = None):
    """(piecework, tiktoken) over the ranks at `path`: the published encoding `name`, or its
    special tokens with another `pattern` (through `from_tiktoken`)."""
    tiktoken = pytest.importorskip("tiktoken")
    from piecework import _tiktoken

    key = f"{path}:{name}:{pattern}"
    if key not in _TIKTOKEN:
        _, published, specials = _tiktoken.ENCODINGS[name]
        if pattern is None:
            ours = piecework.Tokenizer.from_file(path)
        else:
            ours = piecework.Tokenizer.from_tiktoken(path.read_bytes(), pattern, specials)
        theirs = tiktoken.Encoding(
            name=f"{name}-offline",
            pat_str=pattern or published,
            mergeable_ranks=_ranks(path),
            special_tokens=specials,
        )
        _TIKTOKEN[key] = (ours, theirs)
    return _TIKTOKEN[key]


@pytest.mark.parametrize("pattern", ["cl100k_base", "llama3", "o200k", "tekken"])
def test_tiktoken_splits_long_documents_match_tiktoken(pattern: str) -> None:
    """cl100k_base as published (from_file), and cl100k's ranks with Llama 3's, o200k's and
    tekken's patterns: every hand-written split against tiktoken running its pattern."""
    path = data_path("cl100k-tiktoken", "cl100k_base.tiktoken")
    from piecework import _tiktoken

    other = {"llama3": _LLAMA3_PAT, "o200k": _tiktoken.ENCODINGS["o200k_base"][1]}
    other["tekken"] = _TEKKEN_PAT
    ours, theirs = _tiktoken_pair(path, "cl100k_base", other.get(pattern))
    _check_tiktoken(ours, theirs, _tiktoken_docs(len(pattern), ["<|endoftext|>"]))


def test_o200k_long_documents_match_tiktoken() -> None:
    """o200k_base itself, when `PIECEWORK_O200K` names the file (or the shared data has it)."""
    import os
    from pathlib import Path

    env = os.environ.get("PIECEWORK_O200K")
    path = Path(env) if env else DATA_DIR / "o200k-tiktoken" / "o200k_base.tiktoken"
    if not path.exists():
        pytest.skip(f"o200k_base.tiktoken not found: {path} (set PIECEWORK_O200K)")
    ours, theirs = _tiktoken_pair(path, "o200k_base")
    for seed in range(2):
        _check_tiktoken(ours, theirs, _tiktoken_docs(100 + seed, ["<|endoftext|>"]))


def _tekken_files():
    try:
        import mistral_common
    except ImportError:
        return []
    from pathlib import Path

    return sorted((Path(mistral_common.__file__).parent / "data").glob("tekken*.json"))


@pytest.mark.parametrize("path", _tekken_files(), ids=lambda p: p.name)
def test_tekken_long_documents_match_mistral_common(path) -> None:
    tekken = pytest.importorskip("mistral_common.tokens.tokenizers.tekken")
    ours = piecework.Tokenizer.from_file(path)
    theirs = tekken.Tekkenizer.from_file(path)
    # Control tokens are never read from the text: `<s>` at a line start is text.
    docs = _tiktoken_docs(len(path.name), ["<s>", "[INST]"])
    _assert_cut(ours, docs)
    plain = [theirs.encode(d, bos=False, eos=False) for d in docs]
    with_bos = [[theirs.bos_id] + p for p in plain]
    for special, want in ((False, plain), (True, with_bos)):
        assert ours.encode_batch_ids(docs, add_special_tokens=special) == want
        assert ours.encode_batch_flat(docs, add_special_tokens=special).to_list() == want
    assert ours.count_tokens(docs, add_special_tokens=False) == [len(p) for p in plain]


def test_tekken_files_are_found() -> None:
    # Guards the parametrisation above against testing nothing.
    pytest.importorskip("mistral_common")
    assert len(_tekken_files()) >= 2


@settings(max_examples=10, deadline=None)
@given(
    st.lists(corner_text, min_size=1, max_size=20),
    st.lists(corner_char | st.sampled_from(["/", "/\n", ".", "-", "'s", "\r"]), min_size=1),
    st.integers(0, 2**32),
)
def test_tiktoken_splits_generated_documents_match_tiktoken(
    lines: list[str], starts: list[str], seed: int
) -> None:
    """Lines of Unicode corners, each newline followed by a corner character or one the
    patterns treat apart (`/`, punctuation, `\\r`): cuts before every kind of character,
    refused before white space and `/`."""
    if not (DATA_DIR / "cl100k-tiktoken").is_dir():
        pytest.skip(f"shared test data not found at {DATA_DIR}")
    from piecework import _tiktoken

    rng = random.Random(seed)
    pool = [ln + rng.choice(["", "a", ".", "/", " ", "\u0301", "\U0001f600"]) for ln in lines]
    docs = []
    for _ in range(2):
        body = [rng.choice(pool) + "\n" + rng.choice(starts) for _ in range(40_000 // 12)]
        docs.append("".join(body))
    path = data_path("cl100k-tiktoken", "cl100k_base.tiktoken")
    for pattern in (None, _TEKKEN_PAT, _tiktoken.ENCODINGS["o200k_base"][1], _LLAMA3_PAT):
        ours, theirs = _tiktoken_pair(path, "cl100k_base", pattern)
        want = [theirs.encode(d, allowed_special="all") for d in docs]
        assert ours.encode_batch_ids(docs) == want, pattern
        assert ours.encode_batch_flat(docs).to_list() == want, pattern


@pytest.mark.parametrize("pattern", ["cl100k_base", "llama3", "o200k"])
def test_tiktoken_splits_saved_as_tokenizer_json_match_tokenizers(pattern: str) -> None:
    """The same splits in a tokenizer.json (as HF's converted Llama 3 / o200k files hold
    them: Split + ByteLevel), read back by piecework and by tokenizers."""
    path = data_path("cl100k-tiktoken", "cl100k_base.tiktoken")
    from piecework import _tiktoken

    other = {"llama3": _LLAMA3_PAT, "o200k": _tiktoken.ENCODINGS["o200k_base"][1]}
    ours, theirs = _tiktoken_pair(path, "cl100k_base", other.get(pattern))
    saved = ours.to_str()
    again = piecework.Tokenizer.from_str(saved)
    hf = tokenizers.Tokenizer.from_str(saved)
    docs = _tiktoken_docs(len(pattern) + 50, ["<|endoftext|>"], n=2)
    _assert_cut(again, docs)
    want = [theirs.encode(d, allowed_special="all") for d in docs]
    assert [e.ids for e in hf.encode_batch(docs)] == want
    assert again.encode_batch_ids(docs) == want
    assert again.encode_batch_flat(docs).to_list() == want
