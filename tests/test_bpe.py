"""BPE in both families and the ByteLevel components, differential against the oracles.

Every expected value is computed by the oracle inside the test: `tokenizers` 0.22.1 for a
tokenizer.json (real files from ../shared/data, tokenizers trained here with BpeTrainer, and
crafted vocabularies for the BPE-NOTES minimal cases), the `sentencepiece` library for a BPE
`.model` (real files, and models trained here with its trainer).
"""

from __future__ import annotations

import json
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import SWEEP, compare_encodings, data_path
from strategies import corner_text

tokenizers = pytest.importorskip("tokenizers")
import piecework

BYTE_LEVEL_FILES = [
    "gpt2/tokenizer.json",
    "roberta-base/tokenizer.json",
    "phi-2/tokenizer.json",
    "falcon/tokenizer.json",
    "clip/tokenizer.json",
    "whisper-tiny/tokenizer.json",
    "wordlevel/bpe-code-tokenizer.json",
    "hf-tokenizers-data/eng_latn_300mb-hf.json",
    "hf-tokenizers-data/tiny-tokenizer.json",
    "hf-quicktour-wiki/tokenizer-wiki.json",
]
LLAMA_STYLE_FILES = [
    "codellama/tokenizer.json",
    "phi-3-mini/tokenizer.json",
    "mistral-7b-v0.3/tokenizer.json",
]
SPM_BPE_MODELS = [
    "llama2/tokenizer.model",
    "mistral-7b-v0.3/tokenizer.model.v3",
    "bpemb-en/en.wiki.bpe.vs100000.model",
    "hf-transformers-fixtures/test_sentencepiece_bpe.model",
]

# Inputs that stress merges, whitespace runs, byte fallback and the GPT-2 split.
ADVERSARIAL = [
    "",
    " ",
    "   ",
    "a  b",
    "a   b",
    "a    b",
    " Hello",
    "Hello  ",
    "\t",
    "a\nb",
    " \n\n b",
    "a \n b",
    "\u3000a",
    "!*****",
    " " * 20,
    "I'M it's they're we've I'm you'll he'd",
    "'''s",
    "123456",
    "héllo",
    "\U0001d538",
    "# 火星",
    "ꙮ",
    "aééb",
    "<s>hi</s>",
    "a <s> b",
    "Hello<|endoftext|>world",
    "\u2581hello",
    "e\u0301\u0301\u0301",
    "\U0001f469\u200d\U0001f4bb\U0001f3fb",
    "\x00\x01\x7f",
    "tab\tsep\r\nCRLF\u00a0nbsp\u2028ls\u0085nel",
]


def _big_inputs() -> list[str]:
    rnd = random.Random(7)
    n = 1 << 20 if SWEEP else 100_000
    return [
        "a" * n,
        " " * n,
        "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)),
        "ꙮ" * (n // 3),
    ]


def _encode_both(ours, ref, text: str, add_special: bool = True) -> None:
    try:
        theirs = ref.encode(text, add_special_tokens=add_special)
    except Exception:  # noqa: BLE001 - the oracle refuses: piecework must refuse too
        with pytest.raises(piecework.TokenizerError):
            ours.encode(text, add_special_tokens=add_special)
        return
    mine = ours.encode(text, add_special_tokens=add_special)
    compare_encodings(mine, theirs, context=repr(text[:80]))


# ---------------------------------------------------------------------------------------------
# Real tokenizer.json files.


@pytest.fixture(scope="module", params=BYTE_LEVEL_FILES + LLAMA_STYLE_FILES)
def real_pair(request):
    path = data_path(request.param)
    return (
        request.param,
        piecework.Tokenizer.from_file(str(path)),
        tokenizers.Tokenizer.from_file(str(path)),
    )


def test_real_files_adversarial(real_pair) -> None:
    _, ours, ref = real_pair
    for text in ADVERSARIAL:
        for add_special in (True, False):
            _encode_both(ours, ref, text, add_special)
        ids = ref.encode(text).ids
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(
                ids, skip_special_tokens=skip
            ), repr(text)


# Bounded for CI (13 files); the sweep profile's example count with PIECEWORK_SWEEP=1.
_FEW = settings() if SWEEP else settings(max_examples=60)
# In CI the big inputs run on one file per family; every file with PIECEWORK_SWEEP=1.
_BIG_INPUT_FILES = {"gpt2/tokenizer.json", "codellama/tokenizer.json"}


@_FEW
@given(text=corner_text)
def test_real_files_hypothesis(real_pair, text: str) -> None:
    _, ours, ref = real_pair
    _encode_both(ours, ref, text)


def test_real_files_big_inputs(real_pair) -> None:
    name, ours, ref = real_pair
    if not SWEEP and name not in _BIG_INPUT_FILES:
        pytest.skip("big inputs on this file only with PIECEWORK_SWEEP=1")
    for text in _big_inputs():
        t0 = time.perf_counter()
        mine = ours.encode(text)
        ours_s = time.perf_counter() - t0
        theirs = ref.encode(text)
        assert mine.ids == theirs.ids, name
        assert [tuple(o) for o in mine.offsets] == [tuple(o) for o in theirs.offsets]
        # Near-linear: a quadratic loop would take minutes here.
        assert ours_s < 30, f"{name}: {ours_s:.1f}s on {len(text)} chars"


# Pieces for the byte-level word loop (words ending inside the sixteen bytes from their start
# are scanned and keyed from those bytes): ASCII words of every length around 8 and 16 bytes,
# digits, punctuation, contractions, whitespace runs of every kind, non-ASCII letters, digits,
# spaces and punctuation right after ASCII ones.
_WORD_LOOP_PIECES = [
    "a",
    "Zq",
    "word",
    "letters",
    "sixteen_letters",
    "abcdefghijklmnopq",
    "7",
    "2024",
    "123456789012345678",
    ".",
    "--",
    "!?)",
    "'s",
    "'ll",
    "'x",
    " ",
    "  ",
    "\n",
    "\n\n",
    " \t",
    "\r\n",
    "\x0b\x0c",
    " " * 17,
    "\u00e9",
    "\u4e2d\u6587",
    "\u00a0",
    "\u3000",
    "\u2028",
    "\u2013",
    "\u0661",
    "\U0001f600",
    "\u0301",
    "\x00",
    "\u041c\u0430\u0440\u0441",
]


@pytest.fixture(scope="module")
def gpt2_pair():
    path = data_path("gpt2", "tokenizer.json")
    return piecework.Tokenizer.from_file(str(path)), tokenizers.Tokenizer.from_file(str(path))


@settings(max_examples=300)
@given(pieces=st.lists(st.sampled_from(_WORD_LOOP_PIECES), min_size=4, max_size=60))
def test_byte_level_word_loop(gpt2_pair, pieces: list[str]) -> None:
    ours, ref = gpt2_pair
    text = "".join(pieces)
    want = ref.encode(text, add_special_tokens=False).ids
    assert ours.encode_ids(text, add_special_tokens=False) == want, repr(text)
    assert ours.encode(text, add_special_tokens=False).ids == want, repr(text)


def test_byte_level_decode_invalid_utf8() -> None:
    """Byte tokens that do not form valid UTF-8 decode to U+FFFD as `from_utf8_lossy` does."""
    path = data_path("gpt2", "tokenizer.json")
    ours = piecework.Tokenizer.from_file(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    vocab = ref.get_vocab()
    # Lone lead bytes, lone continuation bytes, a truncated 4-byte sequence, mixed with text.
    pieces = [["ç"], ["«"], ["ç", "«"], ["ð", "Ł"], ["a", "ç", "b"], ["Ã", "Ã©"], ["ĉ", "Ġ"]]
    for toks in pieces:
        ids = [vocab[t] for t in toks]
        assert ours.decode(ids) == ref.decode(ids), toks


# ---------------------------------------------------------------------------------------------
# tokenizer.json variants built here.


def _train_bpe(**model_kwargs) -> str:
    """A small BPE tokenizer trained on text made up here, as a tokenizer.json string."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    special = ["<unk>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", **model_kwargs))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer_kwargs = {
        k: v
        for k, v in model_kwargs.items()
        if k in ("continuing_subword_prefix", "end_of_word_suffix")
    }
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special, **trainer_kwargs)
    rnd = random.Random(3)
    words = ["lower", "newest", "widest", "low", "new", "wide", "érable", "naïve", "数据", "x1"]
    lines = [" ".join(rnd.choice(words) for _ in range(12)) for _ in range(300)]
    tok.train_from_iterator(lines, trainer)
    tok.decoder = decoders.BPEDecoder(suffix=model_kwargs.get("end_of_word_suffix") or "</w>")
    return tok.to_str()


TRAINED_VARIANTS = {
    "plain": {},
    "prefix": {"continuing_subword_prefix": "##"},
    "suffix": {"end_of_word_suffix": "</w>"},
    "fuse_unk": {"fuse_unk": True},
    "ignore_merges": {"ignore_merges": True},
}


@pytest.fixture(scope="module", params=sorted(TRAINED_VARIANTS))
def trained_pair(request):
    s = _train_bpe(**TRAINED_VARIANTS[request.param])
    return piecework.Tokenizer.from_str(s), tokenizers.Tokenizer.from_str(s)


@given(text=st.one_of(corner_text, st.text(alphabet="lowerneswidtéabè数据x1 ï", max_size=40)))
def test_trained_variants(trained_pair, text: str) -> None:
    ours, ref = trained_pair
    _encode_both(ours, ref, text)


def test_trained_variants_adversarial(trained_pair) -> None:
    ours, ref = trained_pair
    for text in ADVERSARIAL + ["lowestnewest" * 50, "é" * 1000, "数据" * 1000]:
        _encode_both(ours, ref, text)


def _tokenizer_json(model: dict, pre_tokenizer=None, post_processor=None, decoder=None) -> str:
    model = dict(model)
    model.setdefault("type", "BPE")
    return json.dumps(
        {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [],
            "normalizer": None,
            "pre_tokenizer": pre_tokenizer or {"type": "Whitespace"},
            "post_processor": post_processor,
            "decoder": decoder,
            "model": model,
        }
    )


def _vocab(tokens) -> dict:
    return {t: i for i, t in enumerate(tokens)}


BYTES = [f"<0x{b:02X}>" for b in range(256)]

# (name, model object, texts): the BPE-NOTES part B minimal cases and their neighbours.
CRAFTED = [
    (
        "rank b c first",
        {"vocab": _vocab(["a", "b", "c", "ab", "bc"]), "merges": ["b c", "a b"]},
        ["abc"],
    ),
    (
        "rank a b first",
        {"vocab": _vocab(["a", "b", "c", "bc", "ab"]), "merges": ["a b", "b c"]},
        ["abc"],
    ),
    ("same pair leftmost", {"vocab": _vocab(["a", "aa"]), "merges": ["a a"]}, ["aaaaa", "a" * 99]),
    (
        "duplicate merge",
        {"vocab": _vocab(["a", "b", "c", "ab", "bc"]), "merges": ["a b", "b c", "a b"]},
        ["abc"],
    ),
    (
        "one merge at a time",
        {"vocab": _vocab(["a", "b", "ab", "aba"]), "merges": ["ab a", "a b"]},
        ["abab", "ababab"],
    ),
    (
        "pairs format with spaces",
        {"vocab": _vocab(["a", "b", "ab", "#version"]), "merges": [["a", "b"]]},
        ["ab"],
    ),
    (
        "version line skipped",
        {"vocab": _vocab(["a", "b", "ab"]), "merges": ["#version: 0.2", "a b"]},
        ["ab ba"],
    ),
    ("unreachable", {"vocab": _vocab(["a", "b", "c", "abc"]), "merges": []}, ["abc"]),
    (
        "sparse ids",
        {
            "vocab": {"a": 7, "b": 1000, "ab": 3, "<unk>": 99},
            "merges": ["a b"],
            "unk_token": "<unk>",
        },
        ["ab ba xab"],
    ),
    (
        "ignore_merges",
        {
            "vocab": _vocab(["<unk>", "a", "b", "c", "ab", "abc"]),
            "merges": ["a b"],
            "ignore_merges": True,
            "unk_token": "<unk>",
        },
        ["abc", "abcabc", "<unk>", "abd"],
    ),
    (
        "unk per char",
        {"vocab": _vocab(["<unk>", "a", "b"]), "merges": [], "unk_token": "<unk>"},
        ["aééb", "éé éé"],
    ),
    (
        "fuse_unk",
        {
            "vocab": _vocab(["<unk>", "a", "b"]),
            "merges": [],
            "unk_token": "<unk>",
            "fuse_unk": True,
        },
        ["aééb", "éé éé", "éaé"],
    ),
    ("unk null drops", {"vocab": _vocab(["a", "b"]), "merges": [], "unk_token": None}, ["éab"]),
    (
        "unk merges",
        {
            "vocab": _vocab(["<unk>", "a", "<unk>a"]),
            "merges": [["<unk>", "a"]],
            "unk_token": "<unk>",
        },
        ["éa", "ééa"],
    ),
    (
        "byte fallback",
        {"vocab": _vocab(["<unk>", "a", "b", *BYTES]), "merges": [], "byte_fallback": True},
        ["aéb", "😀", "a\u0301"],
    ),
    (
        "byte fallback merges",
        {
            "vocab": _vocab(["a", *BYTES, "<0xC3><0xA9>"]),
            "merges": [["<0xC3>", "<0xA9>"]],
            "byte_fallback": True,
        },
        ["éé", "aéa"],
    ),
    (
        "byte fallback lowercase spelling",
        {
            "vocab": _vocab(["<unk>", "<0xc3>", "<0xa9>"]),
            "merges": [],
            "byte_fallback": True,
            "unk_token": "<unk>",
        },
        ["é"],
    ),
    (
        "byte fallback missing byte keeps unk pending",
        {
            "vocab": _vocab(["<unk>", "a", "<0xC3>", "<0xA9>"]),
            "merges": [],
            "byte_fallback": True,
            "unk_token": "<unk>",
            "fuse_unk": True,
        },
        ["üéa", "üüéü"],
    ),
    (
        "byte fallback decorated prefix",
        {
            "vocab": _vocab(["a", *BYTES]),
            "merges": [],
            "byte_fallback": True,
            "continuing_subword_prefix": "##",
        },
        ["aé"],
    ),
    (
        "byte fallback decorated suffix",
        {
            "vocab": _vocab(["b", *BYTES]),
            "merges": [],
            "byte_fallback": True,
            "end_of_word_suffix": "</w>",
        },
        ["a", "ba"],
    ),
    (
        "prefix",
        {
            "vocab": _vocab(["a", "##b", "##c", "ab", "##bc", "<unk>"]),
            "merges": ["a ##b", "##b ##c"],
            "continuing_subword_prefix": "##",
            "unk_token": "<unk>",
        },
        ["abc", "ab", "acb"],
    ),
    (
        "suffix",
        {
            "vocab": _vocab(["a", "b", "c</w>", "bc</w>", "a</w>", "<unk>"]),
            "merges": ["b c</w>"],
            "end_of_word_suffix": "</w>",
            "unk_token": "<unk>",
        },
        ["abc", "a", "ab"],
    ),
    (
        "empty prefix and suffix",
        {
            "vocab": _vocab(["a", "b", "ab"]),
            "merges": ["a b"],
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
        },
        ["ab"],
    ),
    (
        "dropout 1.0",
        {"vocab": _vocab(["a", "b", "c", "ab", "abc"]), "merges": ["a b", "ab c"], "dropout": 1.0},
        ["abc"],
    ),
    (
        "dropout 0.0",
        {"vocab": _vocab(["a", "b", "c", "ab", "abc"]), "merges": ["a b", "ab c"], "dropout": 0.0},
        ["abc"],
    ),
    ("no type", {"type": None, "vocab": _vocab(["a", "b", "ab"]), "merges": ["a b"]}, ["ab"]),
]


@pytest.mark.parametrize("name,model,texts", CRAFTED, ids=[c[0] for c in CRAFTED])
def test_crafted_models(name: str, model: dict, texts: list[str]) -> None:
    if model.get("type", "BPE") is None:
        model = {k: v for k, v in model.items() if k != "type"}
        doc = json.loads(_tokenizer_json(model))
        del doc["model"]["type"]
        s = json.dumps(doc)
    else:
        s = _tokenizer_json(model)
    ref = tokenizers.Tokenizer.from_str(s)
    ours = piecework.Tokenizer.from_str(s)
    for text in texts:
        _encode_both(ours, ref, text)


def test_dropout_between_zero_and_one_varies() -> None:
    s = _tokenizer_json(
        {"vocab": _vocab(["a", "b", "c", "ab", "abc"]), "merges": ["a b", "ab c"], "dropout": 0.5}
    )
    ours = piecework.Tokenizer.from_str(s)
    ref = tokenizers.Tokenizer.from_str(s)
    ours_seen = {tuple(ours.encode("abc").tokens) for _ in range(200)}
    ref_seen = {tuple(ref.encode("abc").tokens) for _ in range(200)}
    # Both libraries reach the unmerged and the fully merged forms.
    assert ("abc",) in ref_seen and ("a", "b", "c") in ref_seen
    assert ("abc",) in ours_seen and ("a", "b", "c") in ours_seen
    assert ours_seen <= ref_seen | {("ab", "c")}


BAD_MODELS = [
    ("merge token oov", {"vocab": _vocab(["a", "b"]), "merges": ["a b"]}),
    ("merge part oov", {"vocab": _vocab(["a", "ab"]), "merges": ["a b"]}),
    ("three parts", {"vocab": _vocab(["a", "b", "c", "ab"]), "merges": ["a b c"]}),
    ("one part", {"vocab": _vocab(["a", "b", "ab"]), "merges": ["ab"]}),
    (
        "mixed formats",
        {"vocab": _vocab(["a", "b", "c", "ab", "bc"]), "merges": ["a b", ["b", "c"]]},
    ),
    ("missing merges", {"vocab": _vocab(["a", "b"])}),
    ("dropout above one", {"vocab": _vocab(["a", "b"]), "merges": [], "dropout": 1.5}),
    ("negative id", {"vocab": {"a": -1}, "merges": []}),
    ("wrong type", {"type": "WordPiece", "vocab": {"a": 0}, "merges": []}),
]


@pytest.mark.parametrize("name,model", BAD_MODELS, ids=[b[0] for b in BAD_MODELS])
def test_bad_models_are_refused(name: str, model: dict) -> None:
    s = _tokenizer_json(model)
    with pytest.raises(Exception):  # noqa: B017 - the oracle raises its own exception types
        tokenizers.Tokenizer.from_str(s)
    with pytest.raises(piecework.TokenizerError):
        piecework.Tokenizer.from_str(s)


def test_unk_token_not_in_vocab_fails_at_encode() -> None:
    s = _tokenizer_json({"vocab": _vocab(["a"]), "merges": [], "unk_token": "<unk>"})
    ref = tokenizers.Tokenizer.from_str(s)
    ours = piecework.Tokenizer.from_str(s)
    _encode_both(ours, ref, "a")
    _encode_both(ours, ref, "é")


# ByteLevel pre-tokenizer / post-processor combinations over a trained byte-level model.


def _byte_level_json(aps_pre: bool, aps_post: bool, trim: bool, use_regex: bool) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=aps_pre, use_regex=use_regex)
    trainer = trainers.BpeTrainer(
        vocab_size=500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    rnd = random.Random(5)
    words = ["hello", "world", "  indented", "\n\n", "naïve", "火星", "it's", "123", "!!"]
    tok.train_from_iterator(
        [" ".join(rnd.choice(words) for _ in range(10)) for _ in range(200)], trainer
    )
    doc = json.loads(tok.to_str())
    doc["post_processor"] = {
        "type": "ByteLevel",
        "add_prefix_space": aps_post,
        "trim_offsets": trim,
        "use_regex": True,
    }
    doc["decoder"] = json.loads(decoders.ByteLevel().__getstate__())
    return json.dumps(doc)


BL_VARIANTS = [
    (aps_pre, aps_post, trim, use_regex)
    for aps_pre in (False, True)
    for aps_post in (False, True)
    for trim in (False, True)
    for use_regex in (True, False)
    if aps_pre == aps_post or trim
]


@pytest.fixture(scope="module", params=BL_VARIANTS, ids=[str(v) for v in BL_VARIANTS])
def byte_level_pair(request):
    s = _byte_level_json(*request.param)
    return piecework.Tokenizer.from_str(s), tokenizers.Tokenizer.from_str(s)


@_FEW
@given(text=corner_text)
def test_byte_level_variants(byte_level_pair, text: str) -> None:
    ours, ref = byte_level_pair
    _encode_both(ours, ref, text)
    ids = ref.encode(text).ids
    assert ours.decode(ids) == ref.decode(ids)


def test_byte_level_variants_adversarial(byte_level_pair) -> None:
    ours, ref = byte_level_pair
    for text in ADVERSARIAL:
        _encode_both(ours, ref, text)
        _encode_both(ours, ref, text, add_special=False)
    pairs = list(zip(ADVERSARIAL[:10], ADVERSARIAL[10:20]))
    for a, b in pairs:
        compare_encodings(ours.encode(a, b), ref.encode(a, b), context=repr((a, b)))


# tokenizers 0.22.1 requires add_prefix_space and trim_offsets on the ByteLevel pre-tokenizer,
# decoder and post-processor (only the normalizer has no fields).
@pytest.mark.parametrize("where", ["pre_tokenizer", "decoder", "post_processor"])
@pytest.mark.parametrize("missing", ["both", "trim_offsets"])
def test_byte_level_missing_fields_are_refused(where: str, missing: str) -> None:
    comp = (
        {"type": "ByteLevel"}
        if missing == "both"
        else {"type": "ByteLevel", "add_prefix_space": True}
    )
    doc = json.loads(_tokenizer_json({"vocab": _vocab(["a"]), "merges": []}))
    doc[where] = comp
    s = json.dumps(doc)
    with pytest.raises(Exception):  # noqa: B017 - the oracle raises its own exception types
        tokenizers.Tokenizer.from_str(s)
    with pytest.raises(piecework.TokenizerError):
        piecework.Tokenizer.from_str(s)


def test_byte_level_normalizer_has_no_fields() -> None:
    doc = json.loads(_tokenizer_json({"vocab": _vocab(["a", "Ġ", "Ã", "©"]), "merges": []}))
    doc["normalizer"] = {"type": "ByteLevel"}
    s = json.dumps(doc)
    ours = piecework.Tokenizer.from_str(s)
    ref = tokenizers.Tokenizer.from_str(s)
    for text in ["a a", "é", "", "aé a"]:
        _encode_both(ours, ref, text)


# ---------------------------------------------------------------------------------------------
# sentencepiece BPE (.model): needs the sentencepiece loader of piecework.


spm = pytest.importorskip("sentencepiece")


def _load_spm(data: bytes):
    if not hasattr(piecework, "SentencePieceProcessor"):
        pytest.skip("piecework built without its SentencePieceProcessor")
    return piecework.SentencePieceProcessor(model_proto=data)


def _spm_compare(ours, sp, text: str) -> None:
    """Ids, pieces and UTF-8 byte offsets (those of sentencepiece's serialized proto)."""
    proto = sp.encode(text, return_type="proto")
    want = [(p.id, p.piece, (p.begin, p.end)) for p in proto.pieces]
    ids, pieces, offsets = ours.encode_with_offsets(text)
    got = list(zip(ids, pieces, [tuple(o) for o in offsets]))
    assert got == want, repr(text[:80])


@pytest.fixture(scope="module", params=SPM_BPE_MODELS)
def spm_pair(request):
    path = data_path(request.param)
    data = path.read_bytes()
    return _load_spm(data), spm.SentencePieceProcessor(model_proto=data)


def test_spm_real_models_adversarial(spm_pair) -> None:
    ours, sp = spm_pair
    for text in ADVERSARIAL:
        _spm_compare(ours, sp, text)


@given(text=corner_text)
def test_spm_real_models_hypothesis(spm_pair, text: str) -> None:
    ours, sp = spm_pair
    _spm_compare(ours, sp, text)


def test_spm_real_models_big_inputs(spm_pair) -> None:
    ours, sp = spm_pair
    if not SWEEP and len(sp) != 32000:  # llama2 only in CI
        pytest.skip("big inputs on this model only with PIECEWORK_SWEEP=1")
    for text in _big_inputs():
        t0 = time.perf_counter()
        got = ours.encode(text)
        dt = time.perf_counter() - t0
        assert list(got) == sp.encode(text)
        assert dt < 30, f"{dt:.1f}s on {len(text)} chars"


def _train_spm(tmp_path, **kwargs) -> bytes:
    rnd = random.Random(11)
    words = ["hello", "world", "naïve", "火星", "über", "x1", "<b>", "ab", "abc"]
    words += [
        "".join(rnd.choice("abcdefghijklmnopqrstuvwxyzé") for _ in range(rnd.randrange(2, 9)))
        for _ in range(300)
    ]
    lines = [" ".join(rnd.choice(words) for _ in range(10)) for _ in range(2000)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    prefix = tmp_path / "m"
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        model_type="bpe",
        vocab_size=300,
        hard_vocab_limit=False,
        minloglevel=2,
        **kwargs,
    )
    return (tmp_path / "m.model").read_bytes()


SPM_TRAINED = {
    "plain": {},
    "byte_fallback": {"byte_fallback": True},
    "user_defined": {"user_defined_symbols": ["<b>", "ab", "abc", "▁▁"]},
    "keep_whitespace": {
        "remove_extra_whitespaces": False,
        "add_dummy_prefix": False,
        "allow_whitespace_only_pieces": True,
        "byte_fallback": True,
        "user_defined_symbols": ["\n", "  "],
        "normalization_rule_name": "identity",
    },
}


@pytest.mark.parametrize("variant", sorted(SPM_TRAINED))
def test_spm_trained_models(tmp_path, variant: str) -> None:
    data = _train_spm(tmp_path, **SPM_TRAINED[variant])
    ours = _load_spm(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    rnd = random.Random(2)
    alphabet = "helowrdnaïve火星über x1<b>abc\n\t  é😀"
    texts = ADVERSARIAL + ["".join(rnd.choice(alphabet) for _ in range(30)) for _ in range(300)]
    for text in texts:
        _spm_compare(ours, sp, text)


# Crafted sentencepiece BPE models: the BPE-NOTES part A minimal cases, each checked against
# the library on the same model.

_TYPES = {"NORMAL": 1, "UNKNOWN": 2, "CONTROL": 3, "USER_DEFINED": 4, "UNUSED": 5, "BYTE": 6}


def _crafted_spm(specs: list[str], chars: str, byte_fallback: bool = False) -> bytes:
    """A BPE ModelProto from `piece:score[:TYPE]` specs, with `<unk>` first, every character of
    `chars` as a NORMAL piece scored -100, identity normalization, no dummy prefix."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = byte_fallback
    m.trainer_spec.unk_id = 0
    m.trainer_spec.bos_id = -1
    m.trainer_spec.eos_id = -1
    m.trainer_spec.pad_id = -1
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    seen = set()

    def add(piece: str, score: float, kind: str) -> None:
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, score, _TYPES[kind]
        seen.add(piece)

    add("<unk>", 0.0, "UNKNOWN")
    for spec in specs:
        parts = spec.rsplit(":", 2) if spec.count(":") >= 2 else spec.rsplit(":", 1)
        if len(parts) == 3 and parts[2] in _TYPES:
            add(parts[0], float(parts[1]), parts[2])
        else:
            add(parts[0], float(parts[1]), "NORMAL")
    for c in chars:
        if c not in seen:
            add(c, -100.0, "NORMAL")
    if byte_fallback:
        for b in range(256):
            add(f"<0x{b:02X}>", 0.0, "BYTE")
    return m.SerializeToString()


SPM_CRAFTED = [
    (["ab:-2", "bc:-1"], "abc", ["abc"]),
    (["ab:-1", "bc:-2"], "abc", ["abc"]),
    (["bc:-2", "ab:-1"], "abc", ["abc"]),
    (["a:5", "b:5", "ab:-1000"], "ab", ["ab"]),
    (["ab:-1", "bc:-1"], "abc", ["abc"]),
    (["aa:-1"], "a", ["aaaaa", "a" * 101]),
    (["aa:-1", "aaa:-1"], "a", ["aaaa", "a" * 50]),
    (["ab:-1.00000001", "bc:-1.0"], "abc", ["abc"]),
    (["ab:-1.0000001", "bc:-1.0"], "abc", ["abc"]),
    (["abc:0"], "abc", ["abc"]),
    (["ab:-1:CONTROL"], "ab", ["ab"]),
    (["ab:-1:UNUSED", "abc:-2"], "abcd", ["abc", "abd", "abcabd"]),
    (["ab:-1:UNUSED", "bc:-2"], "abcx", ["abc", "xbc"]),
    (["ab:-1", "abc:-2:UNUSED", "abcd:-3"], "abcdx", ["abcd", "abcx", "abcxabcd"]),
    (["ab:-1", "bc:-1.5", "abc:-2:UNUSED", "abcd:-3"], "abcdx", ["abcabcx", "xbcabc"]),
    (["ab:0:USER_DEFINED", "abc:10", "bc:5"], "abc", ["abc"]),
    (["a:0:USER_DEFINED", "ab:0:USER_DEFINED", "abc:0:USER_DEFINED"], "abc", ["abcab"]),
    (["ab:0:USER_DEFINED", "bcd:0:USER_DEFINED"], "abcdx", ["abcd", "xbcd"]),
    (["xa:-1", "ab:0:USER_DEFINED"], "xab", ["xab"]),
    (["é:0:USER_DEFINED"], "ab", ["aéb"]),
    ([], "ab", ["aééb", "é é", "éé😀a"]),
    (["▁b:-0.5", "a▁b:-1"], "abx", ["xa b"]),
    # A character typed CONTROL: unknown in sentencepiece 0.2.3 (0.2.1 failed on it).
    (["a:0:CONTROL"], "b", ["abb", "aéb", "éa", "aa"]),
    (["a:0:CONTROL", "ab:-1"], "b", ["abb"]),
    (["<s>:0:CONTROL", "s:-1"], "<>", ["<s>"]),
]


@pytest.mark.parametrize(
    "specs,chars,texts", SPM_CRAFTED, ids=[" ".join(c[0]) for c in SPM_CRAFTED]
)
@pytest.mark.parametrize("byte_fallback", [False, True])
def test_spm_crafted(specs: list[str], chars: str, texts: list[str], byte_fallback: bool) -> None:
    data = _crafted_spm(specs, chars, byte_fallback)
    sp = spm.SentencePieceProcessor(model_proto=data)
    ours = _load_spm(data)
    for text in texts:
        _spm_compare(ours, sp, text)


@pytest.fixture(scope="module")
def gpt2_ignore_merges():
    """GPT-2 with `ignore_merges` (as Llama 3 files have) and two tokens no merge makes, so the
    ByteLevel ids path must look whole words up before merging."""
    doc = json.loads(data_path("gpt2", "tokenizer.json").read_text(encoding="utf-8"))
    vocab = doc["model"]["vocab"]
    for extra in ("Ġzzqx", "qqqq"):
        vocab[extra] = len(vocab)
    doc["model"]["ignore_merges"] = True
    s = json.dumps(doc)
    return piecework.Tokenizer.from_str(s), tokenizers.Tokenizer.from_str(s)


@given(text=st.one_of(corner_text, st.text(alphabet=" zqxabé'\n1", max_size=30)))
def test_byte_level_ignore_merges(gpt2_ignore_merges, text: str) -> None:
    ours, ref = gpt2_ignore_merges
    for t in (text, f"{text} zzqx qqqq"):
        assert (
            ours.encode_ids(t, add_special_tokens=False)
            == ref.encode(t, add_special_tokens=False).ids
        )
        _encode_both(ours, ref, t)
