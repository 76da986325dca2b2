"""Differential tests of piecework.SentencePieceProcessor against the sentencepiece library.

Every expected value is computed by sentencepiece in the test itself: ids, pieces, BYTE
offsets (from the serialized SentencePieceText proto), and decoding. Real models come from
../shared/data (skipped when absent); others are trained here with SentencePieceTrainer.
The big sweep runs with PIECEWORK_SWEEP=1 (see test_sentencepiece_sweep.py).
"""

from __future__ import annotations

import io
import os
import pickle
import random
import struct
from pathlib import Path

import pytest

spm = pytest.importorskip("sentencepiece")
import piecework
from piecework import InvalidDataError, SentencePieceProcessor
from sentencepiece import sentencepiece_model_pb2, sentencepiece_pb2


def _find_data() -> Path:
    """``../shared/data`` beside the checkout (CI); from a nested worktree, the nearest
    ``shared/data`` above the repo; ``PIECEWORK_DATA`` overrides."""
    if os.environ.get("PIECEWORK_DATA"):
        return Path(os.environ["PIECEWORK_DATA"])
    root = Path(__file__).resolve().parent.parent
    for d in [root.parent, *root.parent.parents]:
        if (d / "shared" / "data").is_dir():
            return d / "shared" / "data"
    return root.parent / "shared" / "data"


DATA = _find_data()

UNIGRAM_MODELS = [
    "xlnet-base-cased/spiece.model",
    "pegasus/pegasus.model",
    "rut5-large/spiece.model",
    "hf-transformers-fixtures/spiece.model",
    "hf-transformers-fixtures/test_sentencepiece.model",
    "hf-transformers-fixtures/test_sentencepiece_no_bos.model",
    "spm-test/test_model.model",
    "spm-test/test_ja_model.model",
    "seqio-test/sentencepiece.model",
    "tftext-test/fast_sentencepiece.model",
    "albert-de-privately/30k-clean.model",
    "bigbird-gpt2-spm/gpt2.model",
    "nmt-marian/vocab.joint.spm",
]

BPE_MODELS = [
    "llama2/tokenizer.model",
    "mistral-7b-v0.3/tokenizer.model.v3",
    "bpemb-en/en.wiki.bpe.vs100000.model",
    "hf-transformers-fixtures/test_sentencepiece_bpe.model",
]

ALL_MODELS = UNIGRAM_MODELS + BPE_MODELS

# Unicode corners: every kind of whitespace, combining marks, astral characters, controls,
# user-defined-looking markers, literal ▁, byte-fallback material.
CORNERS = [
    "",
    " ",
    "   ",
    "a",
    "Hello world",
    " Hello  world ",
    "a\tb\nc\r\nd",
    "x\u00a0y\u3000z\u2028w\u0085v\u200bu",
    "\u2581hello \u2581 \u2581\u2581",
    "e\u0301 a\u0308\u0304 \u1100\u1161\u11a8",
    "𝔸𝔹ℂ 😀👍🏽 👨‍👩‍👧 🇯🇵",
    "ﬁﬂ ＡＢＣ １２３ ｶﾀｶﾅ",
    "<s>hi</s> <unk> <pad> [CLS] [SEP] <0x41>",
    "x.......",
    "1234567890 3.14159 1,000,000",
    "\x00\x01\x7f\x1b[0m",
    "日本語のテキスト、です。",
    "Ünïcödé ÀÉÎÕÜ ß ẞ ǅ",
    "<b>bold</b>\n\n\n    indented",
    "a" * 300,
    "lorem " * 50,
]


def corpus_lines(n: int, seed: int = 0) -> list[str]:
    """A deterministic mix of n lines from the shared corpora."""
    files = [
        "corpora/big.txt",
        "corpora/botchan.txt",
        "corpora/wagahaiwa_nekodearu.txt",
        "corpora/udhr2_all.txt",
        "corpora/sherlock.txt",
    ]
    for sub in ("wikipedia-mars", "lipsum-simdutf8", "emoji"):
        d = DATA / "corpora" / sub
        if d.exists():
            files += [f"corpora/{sub}/{p.name}" for p in sorted(d.iterdir()) if p.suffix == ".txt"]
    pool: list[str] = []
    for f in files:
        p = DATA / f
        if not p.exists():
            continue
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
        rng = random.Random(f"{seed}:{f}")
        pool += rng.sample(lines, min(len(lines), max(1, n // len(files) + 1)))
    rng = random.Random(seed)
    rng.shuffle(pool)
    return pool[:n]


def need(rel: str) -> Path:
    p = DATA / rel
    if not p.exists():
        pytest.skip(f"{p} not found (shared test data absent)")
    return p


def oracle_tokens(sp, text: str) -> list[tuple[int, str, int, int]]:
    spt = sentencepiece_pb2.SentencePieceText()
    spt.ParseFromString(sp.encode(text, out_type="serialized_proto"))
    return [(p.id, p.piece, p.begin, p.end) for p in spt.pieces]


def ours_tokens(pw: SentencePieceProcessor, text: str) -> list[tuple[int, str, int, int]]:
    ids, pieces, offsets = pw.encode_with_offsets(text)
    return [(i, p, b, e) for i, p, (b, e) in zip(ids, pieces, offsets)]


def mismatches(sp, pw, texts, check_decode: bool = True) -> list[tuple]:
    """Every (text, what, expected, got) on which piecework differs from sentencepiece."""
    bad = []
    for t in texts:
        try:
            exp = oracle_tokens(sp, t)
        except RuntimeError as e:  # the oracle refuses: we must refuse too
            try:
                got = ours_tokens(pw, t)
                bad.append((t, "oracle raised", repr(e), got))
            except piecework.TokenizerError:
                pass
            continue
        got = ours_tokens(pw, t)
        if exp != got:
            bad.append((t, "tokens", exp, got))
            continue
        if check_decode:
            ids = [x[0] for x in exp]
            pieces = [x[1] for x in exp]
            for what, e, g in (
                ("decode ids", sp.decode(ids), pw.decode(ids)),
                ("decode pieces", sp.decode(pieces), pw.decode(pieces)),
            ):
                if e != g:
                    bad.append((t, what, e, g))
    return bad


def assert_same(sp, pw, texts, check_decode: bool = True) -> None:
    bad = mismatches(sp, pw, texts, check_decode)
    assert not bad, f"{len(bad)} of {len(texts)} texts differ; first: {bad[:3]}"


def spm_options(model_bytes: bytes) -> dict:
    """The .spm loader options that reproduce a .model's settings."""
    m = sentencepiece_model_pb2.ModelProto()
    m.ParseFromString(model_bytes)
    ns, ts = m.normalizer_spec, m.trainer_spec
    names = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
    return {
        "model_type": names[ts.model_type],
        "add_dummy_prefix": ns.add_dummy_prefix,
        "remove_extra_whitespaces": ns.remove_extra_whitespaces,
        "byte_fallback": ts.byte_fallback,
        "escape_whitespaces": ns.escape_whitespaces,
        "treat_whitespace_as_suffix": ts.treat_whitespace_as_suffix,
        "precompiled_charsmap": bytes(ns.precompiled_charsmap),
    }


def train(lines: list[str], **kwargs) -> bytes:
    out = io.BytesIO()
    args = {
        "vocab_size": 1000,
        "model_type": "unigram",
        "character_coverage": 0.98,
        "hard_vocab_limit": False,
        "num_threads": 1,
        "minloglevel": 2,
    }
    args.update(kwargs)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, **args)
    return out.getvalue()


TRAIN_LINES_CACHE: dict[int, list[str]] = {}


def train_lines(n: int = 1500) -> list[str]:
    """Mostly English, some French, German and Japanese: small enough an alphabet that a
    1000-piece vocabulary covers it."""
    if n not in TRAIN_LINES_CACHE:
        lines: list[str] = []
        for rel, share in (
            ("corpora/big.txt", 0.5),
            ("corpora/botchan.txt", 0.2),
            ("corpora/wikipedia-mars/french.utf8.txt", 0.1),
            ("corpora/wikipedia-mars/german.utf8.txt", 0.1),
            ("corpora/wagahaiwa_nekodearu.txt", 0.1),
        ):
            p = DATA / rel
            if not p.exists():
                continue
            pool = [x for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
            lines += random.Random(rel).sample(pool, min(len(pool), int(n * share)))
        if len(lines) < 50:
            pytest.skip("shared corpora absent")
        TRAIN_LINES_CACHE[n] = lines
    return TRAIN_LINES_CACHE[n]


# ---------------------------------------------------------------------------------------------
# Real models


@pytest.mark.parametrize("rel", ALL_MODELS)
def test_real_model_matches_sentencepiece(rel: str) -> None:
    path = need(rel)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    assert pw.get_piece_size() == sp.get_piece_size()
    for f in ("unk_id", "bos_id", "eos_id", "pad_id"):
        assert getattr(pw, f)() == getattr(sp, f)(), f
    texts = CORNERS + corpus_lines(80, seed=1)
    assert_same(sp, pw, texts)
    # ids and pieces through the plain API, batch and single
    assert pw.encode(texts) == sp.encode(texts)
    assert pw.encode(texts, out_type=str) == sp.encode(texts, out_type=str)
    assert pw.encode(
        "Hello world", add_bos=sp.bos_id() >= 0, add_eos=sp.eos_id() >= 0
    ) == sp.encode("Hello world", add_bos=sp.bos_id() >= 0, add_eos=sp.eos_id() >= 0)


# The two biggest vocabularies (pegasus 96k, bpemb 100k) go through .spm in the sweep only.
SPM_ROUNDTRIP_MODELS = [
    m
    for m in ALL_MODELS
    if m not in ("pegasus/pegasus.model", "bpemb-en/en.wiki.bpe.vs100000.model")
]


@pytest.mark.parametrize("rel", SPM_ROUNDTRIP_MODELS)
def test_real_model_through_spm_text(rel: str) -> None:
    path = need(rel)
    data = path.read_bytes()
    sp = spm.SentencePieceProcessor(model_proto=data)
    pw = SentencePieceProcessor(model_proto=data)
    text = pw.to_spm()
    lines = text.splitlines()
    assert len(lines) == sp.get_piece_size()
    # Every line is what the spec says, computed from the oracle.
    import base64

    for i in range(0, len(lines), max(1, len(lines) // 500)):
        b64, score, _kind = lines[i].split()
        assert base64.b64decode(b64).decode("utf-8") == sp.id_to_piece(i)
        # The score is the f32 its shortest decimal denotes.
        assert struct.unpack("f", struct.pack("f", float(score)))[0] == sp.get_score(i)
    back = SentencePieceProcessor.from_spm(text, **spm_options(data))
    assert back.to_spm() == text
    # A .spm has no denormalizer (nmt-marian's restores case markers when decoding), so
    # decoding is compared only for models without one.
    m = sentencepiece_model_pb2.ModelProto()
    m.ParseFromString(data)
    has_denorm = bool(m.denormalizer_spec.precompiled_charsmap)
    assert_same(sp, back, CORNERS + corpus_lines(20, seed=2), check_decode=not has_denorm)


def test_vocabulary_accessors_match() -> None:
    path = need("spm-test/test_model.model")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    n = sp.get_piece_size()
    ids = list(range(n))
    assert pw.id_to_piece(ids) == sp.id_to_piece(ids)
    assert pw.get_score(ids) == sp.get_score(ids)
    for f in ("is_unknown", "is_control", "is_unused", "is_byte"):
        assert getattr(pw, f)(ids) == getattr(sp, f)(ids), f
    pieces = sp.id_to_piece(ids) + ["not-a-piece", "<s>", "▁", "▁the"]
    assert pw.piece_to_id(pieces) == sp.piece_to_id(pieces)
    assert pw.piece_to_id("zzzz-unknown") == sp.piece_to_id("zzzz-unknown")
    assert len(pw) == len(sp) and pw.vocab_size() == sp.vocab_size()
    assert pw["▁the"] == sp["▁the"]
    for bad in (-1, n):
        with pytest.raises(IndexError):
            pw.id_to_piece(bad)
        with pytest.raises(IndexError):
            pw.decode([5, bad])
        with pytest.raises(IndexError):
            pw.get_score(bad)


def test_decode_shapes_match() -> None:
    path = need("spm-test/test_model.model")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    ids = sp.encode("Hello world, this is a test.")
    pieces = sp.encode("Hello world, this is a test.", out_type=str)
    for arg in (
        ids,
        pieces,
        [ids, ids[:3]],
        [pieces, []],
        [[], pieces],
        5,
        "▁He",
        [],
        [[]],
        tuple(ids),
    ):
        assert pw.decode(arg) == sp.decode(arg), arg
    assert pw.decode_ids(ids) == sp.decode_ids(ids)
    assert pw.decode_pieces(pieces) == sp.decode_pieces(pieces)
    # Unknown pieces come back as they are; <unk> as " ⁇ "; control pieces vanish.
    for arg in (["▁a", "xyz-not-a-piece", "▁b"], ["<unk>", "<s>", "▁x", "</s>"], ["▁", "▁", "a"]):
        assert pw.decode(arg) == sp.decode(arg), arg


def test_encode_options_match() -> None:
    """add_bos / add_eos / reverse / emit_unk_piece as sentencepiece's binding applies them."""
    path = need("spm-test/test_model.model")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    for text in ("a ö b", "Hello world", "", ["x ü y", "z"]):
        for out_type in (int, str):
            for opts in (
                {"add_bos": True},
                {"add_eos": True, "reverse": True},
                {"add_bos": True, "add_eos": True, "reverse": True},
                {"emit_unk_piece": True} if out_type is str else {},
            ):
                assert pw.encode(text, out_type=out_type, **opts) == sp.encode(
                    text, out_type=out_type, **opts
                ), (text, out_type, opts)
    # A model whose <s> is not a control piece refuses add_bos, with the same error type.
    albert = need("albert-de-privately/30k-clean.model")
    sp2 = spm.SentencePieceProcessor(model_file=str(albert))
    pw2 = SentencePieceProcessor(model_file=str(albert))
    with pytest.raises(ValueError):
        sp2.encode("a", add_bos=True)
    with pytest.raises(ValueError):
        pw2.encode("a", add_bos=True)


@pytest.mark.parametrize(
    "rel", ["spm-test/test_model.model", "llama2/tokenizer.model", "xlnet-base-cased/spiece.model"]
)
def test_batch_extensions_match_encode(rel: str) -> None:
    """`encode_batch_ids` / `encode_batch_flat` (piecework extensions) give what
    sentencepiece's `encode(list)` gives, with the call's and the constructor's options."""
    path = need(rel)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    texts = CORNERS + corpus_lines(300, seed=4)
    mixed = texts + [t.encode("utf-8") for t in texts[:20]]
    for opts in ({}, {"add_bos": True}, {"add_eos": True, "reverse": True}):
        if (opts.get("add_bos") and sp.bos_id() < 0) or (opts.get("add_eos") and sp.eos_id() < 0):
            continue
        want = sp.encode(mixed, **opts)
        assert pw.encode_batch_ids(mixed, **opts) == want, opts
        assert pw.encode_batch_flat(mixed, **opts).to_list() == want, opts
        assert pw.encode_batch_flat(tuple(mixed), **opts).to_list() == want, opts
        made = SentencePieceProcessor(model_file=str(path), **opts)
        assert made.encode_batch_flat(mixed).to_list() == want, opts
    assert pw.encode_batch_flat([]).to_list() == []
    for bad in (["a", 3], ["a", None]):
        with pytest.raises(TypeError):
            sp.encode(bad)
        with pytest.raises(TypeError):
            pw.encode_batch_flat(bad)


def test_escape_whitespaces_false_matches() -> None:
    """escape_whitespaces=false (no trainer flag sets it): patch a trained model's spec."""
    lines = train_lines(600)
    for model_type in ("unigram", "word", "char"):
        m = sentencepiece_model_pb2.ModelProto()
        m.ParseFromString(train(lines, model_type=model_type, vocab_size=600))
        m.normalizer_spec.escape_whitespaces = False
        for dummy, rmws in ((True, True), (False, False)):
            m.normalizer_spec.add_dummy_prefix = dummy
            m.normalizer_spec.remove_extra_whitespaces = rmws
            data = m.SerializeToString()
            sp = spm.SentencePieceProcessor(model_proto=data)
            pw = SentencePieceProcessor(model_proto=data)
            assert_same(sp, pw, CORNERS + corpus_lines(30, seed=4))


def test_constructor_options_and_pickle() -> None:
    path = need("spm-test/test_model.model")
    sp = spm.SentencePieceProcessor(model_file=str(path), add_bos=True, add_eos=True, out_type=str)
    pw = SentencePieceProcessor(model_file=str(path), add_bos=True, add_eos=True, out_type=str)
    assert pw.encode("Hello world") == sp.encode("Hello world")
    assert pw.encode_as_ids("Hello") == sp.encode_as_ids("Hello")
    assert pw.EncodeAsIds("Hello", add_bos=False) == sp.EncodeAsIds("Hello", add_bos=False)
    assert pw.EncodeAsPieces(["a b", "c"]) == sp.EncodeAsPieces(["a b", "c"])
    pw2 = pickle.loads(pickle.dumps(pw))
    assert pw2.encode("Hello world") == sp.encode("Hello world")
    assert pw.serialized_model_proto() == path.read_bytes()
    pw3 = SentencePieceProcessor()
    pw3.Load(model_proto=path.read_bytes())
    assert pw3.encode("Hello") == sp.encode("Hello", add_bos=False, add_eos=False, out_type=int)
    pw4 = SentencePieceProcessor()
    pw4.load(str(path))
    assert pw4.encode("Hello") == pw3.encode("Hello")


def test_default_encode_shortcut_agrees_with_every_other_form_of_the_call() -> None:
    """With default options `encode(str)` is answered in Rust without the Python method;
    every other call shape must still reach the general method, and agree with sentencepiece."""
    import gc
    import weakref

    data = train(train_lines(600), model_type="unigram", vocab_size=600)
    sp = spm.SentencePieceProcessor(model_proto=data)
    pw = SentencePieceProcessor(model_proto=data)
    texts = [*CORNERS, *corpus_lines(20, seed=9)]
    for t in texts:
        want = sp.encode(t)
        assert pw.encode(t) == want
        assert pw.Encode(t) == want
        assert pw.encode(t, out_type=int) == want
        assert pw.encode(t.encode("utf-8")) == sp.encode(t.encode("utf-8"))
        assert pw.encode(t, out_type=str) == sp.encode(t, out_type=str)
        assert pw.encode(t, add_bos=True) == sp.encode(t, add_bos=True)
        assert pw.encode(input=t) == sp.encode(input=t)
    assert pw.encode(texts) == sp.encode(texts)
    with pytest.raises(TypeError):
        pw.encode()
    # A processor built with other defaults never takes the shortcut.
    bos = SentencePieceProcessor(model_proto=data, add_bos=True)
    assert bos.encode("abc") == spm.SentencePieceProcessor(model_proto=data, add_bos=True).encode(
        "abc"
    )
    # The shortcut survives pickling, and pickles nothing of itself.
    clone = pickle.loads(pickle.dumps(pw))
    assert clone.encode(texts[-1]) == sp.encode(texts[-1])
    # The method outlives the processor (as a bound method would) in every call shape.
    enc = SentencePieceProcessor(model_proto=data).encode
    gc.collect()
    assert enc(texts[0]) == sp.encode(texts[0])
    assert enc(texts) == sp.encode(texts)
    assert enc(texts[0], out_type=str) == sp.encode(texts[0], out_type=str)
    # No reference cycle: dropping the processor frees it without the collector.
    gc.disable()
    try:
        ref = weakref.ref(pw)
        del pw
        assert ref() is None
    finally:
        gc.enable()


# ---------------------------------------------------------------------------------------------
# Models trained here, across options

TRAIN_CONFIGS = {
    "unigram-nmt_nfkc": {},
    "unigram-identity-keep-ws": {
        "normalization_rule_name": "identity",
        "add_dummy_prefix": False,
        "remove_extra_whitespaces": False,
    },
    "unigram-nfkc-bytefb-ud": {
        "normalization_rule_name": "nfkc",
        "byte_fallback": True,
        "user_defined_symbols": ["<b>", "</b>", "\n", "\n\n", "  ", "▁▁", "ｆｏｏ", "bar", "é"],
        "control_symbols": ["<ctl>", "[MASK]"],
    },
    "unigram-nmt_nfkc_cf-suffix": {
        "normalization_rule_name": "nmt_nfkc_cf",
        "treat_whitespace_as_suffix": True,
        "split_digits": True,
    },
    "unigram-nfkc_cf-no-dummy": {"normalization_rule_name": "nfkc_cf", "add_dummy_prefix": False},
    "word-nmt_nfkc": {"model_type": "word", "vocab_size": 600},
    "char-identity-ud": {
        "model_type": "char",
        "normalization_rule_name": "identity",
        "user_defined_symbols": ["<b>", "ab"],
    },
    "char-bytefb": {"model_type": "char", "byte_fallback": True, "character_coverage": 0.98},
    "bpe-gemma-like": {
        "model_type": "bpe",
        "normalization_rule_name": "identity",
        "byte_fallback": True,
        "add_dummy_prefix": False,
        "remove_extra_whitespaces": False,
        "allow_whitespace_only_pieces": True,
        "split_digits": True,
        "user_defined_symbols": ["\n", "\n\n", "  ", "    ", "<b>", "▁▁"],
    },
    "bpe-nmt_nfkc": {"model_type": "bpe", "vocab_size": 800},
}


@pytest.fixture(scope="module")
def trained() -> dict[str, bytes]:
    lines = train_lines()
    return {name: train(lines, **cfg) for name, cfg in TRAIN_CONFIGS.items()}


@pytest.mark.parametrize("name", list(TRAIN_CONFIGS))
def test_trained_model_matches_sentencepiece(trained: dict[str, bytes], name: str) -> None:
    data = trained[name]
    sp = spm.SentencePieceProcessor(model_proto=data)
    pw = SentencePieceProcessor(model_proto=data)
    extra = [
        "a<b>b</b>c foo ｆｏｏ bar barbar",
        "line\n\n\nnext  two   three    four",
        "<ctl> [MASK] <unk>",
        "ab abab aab",
        "ééé e\u0301",
    ]
    texts = CORNERS + extra + corpus_lines(60, seed=3)
    assert_same(sp, pw, texts)
    back = SentencePieceProcessor.from_spm(pw.to_spm(), **spm_options(data))
    assert_same(sp, back, texts[:40], check_decode=False)


def test_user_defined_notes_cases(trained: dict[str, bytes]) -> None:
    """ORACLE-NOTES / BPE-NOTES part A cases on a model with user-defined pieces."""
    data = trained["unigram-nfkc-bytefb-ud"]
    sp = spm.SentencePieceProcessor(model_proto=data)
    pw = SentencePieceProcessor(model_proto=data)
    texts = [
        "a<b>b",
        "<b> b",
        "ｆｏｏ ｂａｒ",
        "a  b",
        "a    b",
        "a   b",
        "hello  world",
        "x\n\n\ny",
    ]
    assert_same(sp, pw, texts)


# ---------------------------------------------------------------------------------------------
# Malformed models


def _good_model() -> bytes:
    p = DATA / "spm-test/test_model.model"
    if p.exists():
        return p.read_bytes()
    return train(train_lines(200), vocab_size=100)


def test_malformed_models_are_rejected() -> None:
    good = _good_model()
    m = sentencepiece_model_pb2.ModelProto()
    m.ParseFromString(good)

    def variant(edit) -> bytes:
        x = sentencepiece_model_pb2.ModelProto()
        x.CopyFrom(m)
        edit(x)
        return x.SerializeToString()

    cases = {
        "truncated": good[: len(good) // 2],
        "truncated-tag": good[:1],
        "bad-varint": b"\x0a" + b"\xff" * 11,
        "length-past-end": b"\x0a\xff\x7f" + good[:100],
        "bad-wire-type": b"\x0f" + good,
        "empty-piece": variant(lambda x: setattr(x.pieces[5], "piece", "")),
        "oversize-piece": variant(lambda x: setattr(x.pieces[5], "piece", "x" * 5000)),
        "no-unk": variant(lambda x: setattr(x.pieces[0], "type", 1)),
        "duplicate": variant(lambda x: setattr(x.pieces[6], "piece", x.pieces[5].piece)),
    }
    # An unknown piece type value: the proto runtime would not let us set it, so patch bytes.
    piece = sentencepiece_model_pb2.ModelProto.SentencePiece(piece="zz", score=-1.0)
    raw = piece.SerializeToString() + b"\x18\x09"  # type = 9
    cases["bad-type"] = good + b"\x0a" + bytes([len(raw)]) + raw
    for name, data in cases.items():
        with pytest.raises(InvalidDataError):
            SentencePieceProcessor(model_proto=data)
        print(name, "rejected")
    # Random corruption never crashes: it loads or raises a piecework error.
    rng = random.Random(5)
    for _ in range(60):
        b = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        try:
            pw = SentencePieceProcessor(model_proto=bytes(b))
            pw.encode("Hello world ü 𝔸")
        except piecework.TokenizerError:
            pass


def test_bpe_notes_cases() -> None:
    """BPE-NOTES part A cases (whitespace runs, byte fallback offsets, dummy prefix) on llama2."""
    path = need("llama2/tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    texts = [
        "Hello",
        " Hello",
        "1",
        "\u2581hello",
        "a  b",
        "a   b",
        "a    b",
        " ",
        "   ",
        "Hello  ",
        "\t",
        "a\nb",
        "\u3000a",
        "!*****",
        " " * 20,
        "aéb",
        "😀",
        "<s>hi</s>",
        "12345",
    ]
    assert_same(sp, pw, texts)


def long_span_texts(seed: str) -> list[str]:
    """Long stretches without spaces (the backtracking encoder), alone, indented, mixed
    with characters that fall back to bytes, and space-free runs of real text."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    code = letters + "ABCXYZ_.()[]=0123456789"
    odd = ["\u00e9", "\u4e2d", "\u6587", "\U0001f600", "\u0434", "\u0e01", "\x00", "\u2581"]
    texts = []
    for n in (33, 34, 40, 64, 100, 257, 1000, 5000):
        texts.append("a" * n)
        texts.append(rng.choice(letters) * n)
        texts.append("".join(rng.choice(letters) for _ in range(n)))
        texts.append("".join(rng.choice("ab") for _ in range(n)))
        word = "".join(rng.choice(code) for _ in range(n))
        texts.append(" " * rng.randint(2, 40) + word)
        texts.append("x " + " " * rng.randint(1, 12) + word + " y")
        texts.append(
            "".join(
                rng.choice(letters) if rng.random() < 0.9 else rng.choice(odd) for _ in range(n)
            )
        )
        texts.append("".join(rng.choice(odd) for _ in range(n)))
    for f in sorted((DATA / "corpora" / "wikipedia-mars").glob("*.txt")):
        lines = [x for x in f.read_text(encoding="utf-8").splitlines() if len(x) > 40]
        texts += rng.sample(lines, min(len(lines), 15))
        texts += ["".join(x.split()) for x in rng.sample(lines, min(len(lines), 5))]
    return texts


@pytest.mark.parametrize("rel", ["llama2/tokenizer.model", "mistral-7b-v0.3/tokenizer.model.v3"])
def test_long_spans_match_sentencepiece(rel: str) -> None:
    path = need(rel)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pw = SentencePieceProcessor(model_file=str(path))
    texts = long_span_texts(rel)
    assert [pw.encode(t) for t in texts] == [sp.encode(t) for t in texts]
    assert_same(sp, pw, texts, check_decode=False)


# ---------------------------------------------------------------------------------------------
# Hypothesis: Unicode corners

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st

_ALPHABET = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(list(" \t\n\r\u00a0\u3000\u2028\u2029\u0085\u200b\u2581\u0301\u0308ﬁＡ１<>/b")),
)


@pytest.fixture(scope="module")
def hypo_models() -> list:
    out = []
    for rel in (
        "spm-test/test_model.model",
        "nmt-marian/vocab.joint.spm",
        "albert-de-privately/30k-clean.model",
    ):
        p = DATA / rel
        if p.exists():
            out.append(
                (
                    spm.SentencePieceProcessor(model_file=str(p)),
                    SentencePieceProcessor(model_file=str(p)),
                )
            )
    if not out:
        pytest.skip("shared test data absent")
    return out


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=_ALPHABET, max_size=40))
def test_hypothesis_unicode(hypo_models, text: str) -> None:
    for sp, pw in hypo_models:
        assert_same(sp, pw, [text])
