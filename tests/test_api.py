"""The Python surface of `piecework.Tokenizer` against `tokenizers.Tokenizer` (the oracle), on
small tokenizers built here with the `tokenizers` API: encode/batch/pretokenized/pairs, decode,
vocabulary, padding and truncation (dict shapes and effect), errors, pickling, copies, and the
file-kind detection of `from_file`."""

from __future__ import annotations

import base64
import copy
import functools
import pickle
import random
import zlib

import piecework
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle import compare_batches, compare_encodings, data_path
from piecework import _core
from strategies import corner_text, corner_words

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDPIECE_VOCAB = SPECIALS + [
    "hello", "world", "the", "a", "un", "##aff", "##able", "##s", "##ing", "hel", "##lo", "wor",
    "##ld", "!", ",", ".", "'", "-", "t", "##t", "don", "cafe", "café", "中", "文", "日",
    "1", "2", "3", "##1", "##2", "##3", "straße", "x", "##x", "e", "##e",
]  # fmt: skip
WORDLEVEL_VOCAB = ["<unk>", "<pad>", "hello", "world", "the", "a", "!", ",", ".", "Hello", "中文"]


def make_wordpiece():
    vocab = {t: i for i, t in enumerate(WORDPIECE_VOCAB)}
    tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(SPECIALS)
    return tok


def make_wordpiece_bare():
    """No normalizer and no pre-tokenizer: the whole text is one word for the model."""
    tok = make_wordpiece()
    tok.normalizer = None
    tok.pre_tokenizer = None
    return tok


def make_wordlevel():
    vocab = {t: i for i, t in enumerate(WORDLEVEL_VOCAB)}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


MAKERS = {
    "wordpiece": make_wordpiece,
    "wordpiece-bare": make_wordpiece_bare,
    "wordlevel": make_wordlevel,
}


@pytest.fixture(params=sorted(MAKERS))
def both(request):
    """(oracle, ours) for the same crafted tokenizer.json."""
    theirs = MAKERS[request.param]()
    ours = piecework.Tokenizer.from_str(theirs.to_str())
    return theirs, ours


def _pair(name):
    """A fresh (oracle, ours) pair, free to reconfigure."""
    theirs = MAKERS[name]()
    return theirs, piecework.Tokenizer.from_str(theirs.to_str())


@functools.cache
def _fixed(name):
    """A shared (oracle, ours) pair for tests that never reconfigure (hypothesis loops)."""
    return _pair(name)


TEXTS = [
    "",
    "Hello world!",
    "hello, the unaffable world.",
    "  leading and trailing  ",
    "don't stop",
    "Café CAFÉ cafe\u0301",
    "中文日本語",
    "tab\tnew\nline\r\nNBSP\xa0ideo\u3000ls\u2028end",
    "emoji 🤷🏽\u200d♀️ and 𝔸",
    "x" * 150,
    "123 1,2,3",
]


# ----------------------------------------------------------------------------- encoding
@pytest.mark.parametrize("name", sorted(MAKERS))
@pytest.mark.parametrize("text", TEXTS)
def test_encode_fixed_texts(name, text):
    theirs, ours = _pair(name)
    for add in (True, False):
        compare_encodings(ours.encode(text, add_special_tokens=add),
                          theirs.encode(text, add_special_tokens=add), f"{name} {text!r} add={add}")  # fmt: skip


@pytest.mark.parametrize("name", sorted(MAKERS))
@given(a=corner_text, b=st.one_of(st.none(), corner_text), add=st.booleans())
def test_encode_corner_text(name, a, b, add):
    theirs, ours = _fixed(name)
    compare_encodings(ours.encode(a, b, add_special_tokens=add),
                      theirs.encode(a, b, add_special_tokens=add), f"{a!r} / {b!r}")  # fmt: skip


@pytest.mark.parametrize("name", sorted(MAKERS))
@given(a=corner_words, b=st.one_of(st.none(), corner_words))
def test_encode_pretokenized(name, a, b):
    theirs, ours = _fixed(name)
    compare_encodings(
        ours.encode(a, b, is_pretokenized=True), theirs.encode(a, b, is_pretokenized=True)
    )
    # tuples are accepted as well as lists
    compare_encodings(
        ours.encode(tuple(a), is_pretokenized=True), theirs.encode(tuple(a), is_pretokenized=True)
    )


def test_encode_batch_mixed_inputs(both):
    theirs, ours = both
    batch = ["hello world", ("hello", "the world"), ["a", "b c"], "", "中文 x"]
    compare_batches(ours.encode_batch(batch), theirs.encode_batch(batch))
    compare_batches(
        ours.encode_batch(batch, add_special_tokens=False),
        theirs.encode_batch(batch, add_special_tokens=False),
    )
    pre = [["hello", "world"], (["a"], ["the", "x"]), ("hello",), []]
    compare_batches(
        ours.encode_batch(pre, is_pretokenized=True),
        theirs.encode_batch(pre, is_pretokenized=True),
    )
    assert ours.encode_batch([]) == []


@given(texts=st.lists(corner_text, max_size=20))
def test_encode_batch_equals_single(texts):
    theirs, ours = _fixed("wordpiece")
    compare_batches(ours.encode_batch(texts), theirs.encode_batch(texts))
    for text, enc in zip(texts, ours.encode_batch(texts)):
        compare_encodings(enc, ours.encode(text), "batch vs single")


def test_encoding_object(both):
    theirs, ours = both
    e, t = ours.encode("hello world", "a"), theirs.encode("hello world", "a")
    assert len(e) == len(t)
    assert repr(e) == repr(t)
    assert e.words == e.word_ids == t.word_ids
    assert isinstance(e, piecework.Encoding)


ENCODING_INPUTS = [
    ("hello world the a", None),
    ("hello, world!", "the unaffable a"),
    (["hello", "world", "x"], ["a", "the"]),
    ("", "a"),
]


@pytest.mark.parametrize("first,pair", ENCODING_INPUTS)
def test_encoding_helpers(both, first, pair):
    theirs, ours = both
    pre = isinstance(first, list)
    e = ours.encode(first, pair, is_pretokenized=pre)
    t = theirs.encode(first, pair, is_pretokenized=pre)
    compare_encodings(e, t)
    n = len(t)
    for seq in (0, 1, 2):
        for w in range(8):
            assert e.word_to_tokens(w, seq) == t.word_to_tokens(w, seq), (w, seq)
            assert e.word_to_chars(w, seq) == t.word_to_chars(w, seq), (w, seq)
        for c in range(40):
            assert e.char_to_token(c, seq) == t.char_to_token(c, seq), (c, seq)
            assert e.char_to_word(c, seq) == t.char_to_word(c, seq), (c, seq)
    assert e.word_to_tokens(1) == t.word_to_tokens(1)
    assert e.char_to_token(3) == t.char_to_token(3)
    for i in range(n + 2):
        assert e.token_to_sequence(i) == t.token_to_sequence(i), i
        assert e.token_to_chars(i) == t.token_to_chars(i), i
        assert e.token_to_word(i) == t.token_to_word(i), i


@pytest.mark.parametrize("first,pair", ENCODING_INPUTS)
def test_encoding_in_place_ops(both, first, pair):
    theirs, ours = both
    pre = isinstance(first, list)
    for op in (
        lambda x: x.pad(12),
        lambda x: x.pad(12, direction="left", pad_id=1, pad_type_id=1, pad_token="<p>"),
        lambda x: x.truncate(3),
        lambda x: x.truncate(4, stride=1, direction="left"),
        lambda x: x.truncate(0),
        lambda x: x.set_sequence_id(1),
    ):
        e = ours.encode(first, pair, is_pretokenized=pre)
        t = theirs.encode(first, pair, is_pretokenized=pre)
        op(e)
        op(t)
        compare_encodings(e, t)
    e = ours.encode(first, pair, is_pretokenized=pre)
    t = theirs.encode(first, pair, is_pretokenized=pre)
    with pytest.raises(ValueError) as ref:
        t.truncate(2, direction="up")
    with pytest.raises(piecework.TokenizerError) as got:
        e.truncate(2, direction="up")
    assert str(got.value) == str(ref.value)
    with pytest.raises(piecework.TokenizerError):
        e.pad(2, direction="up")


def test_encoding_merge(both):
    theirs, ours = both
    texts = ["hello world", "the a", ""]
    for growing in (True, False):
        m = piecework.Encoding.merge([ours.encode(x) for x in texts], growing_offsets=growing)
        r = tokenizers.Encoding.merge([theirs.encode(x) for x in texts], growing_offsets=growing)
        compare_encodings(m, r, f"growing={growing}")


# ----------------------------------------------------------------------------- decoding
@given(ids=st.lists(st.integers(0, len(WORDPIECE_VOCAB) + 3), max_size=30), skip=st.booleans())
def test_decode(ids, skip):
    for name in MAKERS:
        theirs, ours = _fixed(name)
        assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(
            ids, skip_special_tokens=skip
        )


def test_decode_batch_and_roundtrip(both):
    theirs, ours = both
    seqs = [ours.encode(t).ids for t in TEXTS]
    assert ours.decode_batch(seqs) == theirs.decode_batch(seqs)
    assert ours.decode_batch(seqs, skip_special_tokens=False) == theirs.decode_batch(
        seqs, skip_special_tokens=False
    )
    assert ours.decode_batch([]) == []


# ----------------------------------------------------------------------------- vocabulary
def test_vocabulary(both):
    theirs, ours = both
    for added in (True, False):
        assert ours.get_vocab(with_added_tokens=added) == theirs.get_vocab(with_added_tokens=added)
        assert ours.get_vocab_size(with_added_tokens=added) == theirs.get_vocab_size(
            with_added_tokens=added
        )
    assert ours.get_vocab() == theirs.get_vocab()
    for token in list(theirs.get_vocab()) + ["nope", "", "##", "Hello"]:
        assert ours.token_to_id(token) == theirs.token_to_id(token), token
    for i in range(theirs.get_vocab_size() + 3):
        assert ours.id_to_token(i) == theirs.id_to_token(i), i


# ----------------------------------------------------------------------------- padding
PADDING_ARGS = [
    {},
    {"direction": "left"},
    {"pad_id": 1, "pad_type_id": 2, "pad_token": "<pad>"},
    {"length": 12},
    {"length": 12, "pad_to_multiple_of": 5},
    {"pad_to_multiple_of": 4},
    {"pad_to_multiple_of": 0},
    {"direction": "left", "length": 3},
]


@pytest.mark.parametrize("kwargs", PADDING_ARGS)
def test_padding(both, kwargs):
    theirs, ours = both
    assert ours.padding is None and theirs.padding is None
    theirs.enable_padding(**kwargs)
    ours.enable_padding(**kwargs)
    assert ours.padding == theirs.padding
    assert list(ours.padding) == list(theirs.padding)  # same keys, same order
    batch = ["hello", "hello world the a", ("a", "the world"), ""]
    compare_batches(ours.encode_batch(batch), theirs.encode_batch(batch), str(kwargs))
    compare_encodings(ours.encode("hello world"), theirs.encode("hello world"), str(kwargs))
    ours.no_padding()
    theirs.no_padding()
    assert ours.padding is None
    compare_batches(ours.encode_batch(batch), theirs.encode_batch(batch))


def test_padding_positional_order(both):
    theirs, ours = both
    # the reference's documented order: direction, pad_id, pad_type_id, pad_token, length, ...
    ours.enable_padding("left", 3, 1, "<p>", 7, 2)
    theirs.enable_padding(
        direction="left", pad_id=3, pad_type_id=1, pad_token="<p>", length=7, pad_to_multiple_of=2
    )
    assert ours.padding == theirs.padding


# ----------------------------------------------------------------------------- truncation
TRUNCATION_ARGS = [
    {"max_length": 6},
    {"max_length": 6, "stride": 2},
    {"max_length": 7, "strategy": "only_first"},
    {"max_length": 7, "strategy": "only_second"},
    {"max_length": 6, "direction": "left", "stride": 1},
    {"max_length": 2},
]


@pytest.mark.parametrize("kwargs", TRUNCATION_ARGS)
def test_truncation(both, kwargs):
    theirs, ours = both
    assert ours.truncation is None and theirs.truncation is None
    theirs.enable_truncation(**kwargs)
    ours.enable_truncation(**kwargs)
    assert ours.truncation == theirs.truncation
    assert list(ours.truncation) == list(theirs.truncation)
    long = "hello world the a hello world the a , . hello"
    for first, pair in [(long, None), (long, "the world a"), ("a", long), (long, long)]:
        try:
            expected = theirs.encode(first, pair)
        except BaseException as e:  # the oracle refuses, or even panics
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            # ours refuses with an error (never a panic), with the oracle's message
            with pytest.raises(piecework.TokenizerError) as got:
                ours.encode(first, pair)
            assert str(got.value) == str(e)
            continue
        compare_encodings(ours.encode(first, pair), expected, f"{kwargs} {first!r}/{pair!r}")
    ours.no_truncation()
    theirs.no_truncation()
    assert ours.truncation is None
    compare_encodings(ours.encode(long), theirs.encode(long))


def test_truncation_and_padding_together(both):
    theirs, ours = both
    for t in (theirs, ours):
        t.enable_truncation(9, stride=1)
        t.enable_padding(length=8, direction="left")
    batch = ["hello world the a hello world", ("hello world the", "a a a a")]
    compare_batches(ours.encode_batch(batch), theirs.encode_batch(batch))


# ----------------------------------------------------------------------------- errors
def _raises_like_reference(ours_call, theirs_call, exc=ValueError, same_message=True):
    with pytest.raises(exc) as reference:
        theirs_call()
    with pytest.raises(exc) as got:
        ours_call()
    if same_message:
        assert str(got.value) == str(reference.value)
    return got.value


def test_argument_errors(both):
    theirs, ours = both
    e = _raises_like_reference(
        lambda: ours.enable_truncation(5, strategy="bogus"),
        lambda: theirs.enable_truncation(5, strategy="bogus"),
    )
    assert isinstance(e, piecework.TokenizerError)
    e = _raises_like_reference(
        lambda: ours.enable_truncation(5, direction="up"),
        lambda: theirs.enable_truncation(5, direction="up"),
    )
    assert isinstance(e, piecework.TokenizerError)
    e = _raises_like_reference(
        lambda: ours.enable_padding(direction="up"),
        lambda: theirs.enable_padding(direction="up"),
    )
    assert isinstance(e, piecework.TokenizerError)
    # a failed call leaves the configuration as it was
    assert ours.truncation is None and ours.padding is None


def test_truncation_stride_too_large():
    theirs, ours = _pair("wordpiece")  # the template adds 2 tokens
    e = _raises_like_reference(
        lambda: ours.enable_truncation(3, stride=2),
        lambda: theirs.enable_truncation(3, stride=2),
        same_message=False,
    )
    assert isinstance(e, piecework.TokenizerError)
    assert ours.truncation == theirs.truncation


def test_type_errors(both):
    theirs, ours = both
    for call in (
        lambda t: t.encode(123),
        lambda t: t.encode(["a", "b"]),
        lambda t: t.encode("a b", is_pretokenized=True),
        lambda t: t.encode_batch("abc"),
        lambda t: t.encode_batch([1]),
        lambda t: t.encode_batch([("a", "b", "c")]),
        lambda t: t.decode("abc"),
    ):
        _raises_like_reference(lambda c=call: c(ours), lambda c=call: c(theirs), TypeError, False)
    for call in (lambda t: t.decode([-1]), lambda t: t.id_to_token(-1)):
        _raises_like_reference(
            lambda c=call: c(ours), lambda c=call: c(theirs), OverflowError, False
        )


def test_load_errors(tmp_path):
    for bad in ("garbage", "{}", '{"model": 3}', "[1, 2]", ""):
        with pytest.raises(piecework.TokenizerError):
            piecework.Tokenizer.from_str(bad)
        with pytest.raises(Exception):  # noqa: B017 - the oracle refuses too
            tokenizers.Tokenizer.from_str(bad)
    with pytest.raises(piecework.InvalidDataError):
        piecework.Tokenizer.from_buffer(b'{"version": "1.0", "model": \xff}')
    with pytest.raises(OSError):
        piecework.Tokenizer.from_file(tmp_path / "missing.json")
    assert issubclass(piecework.InvalidDataError, piecework.TokenizerError)
    assert issubclass(piecework.UnsupportedModelError, piecework.TokenizerError)
    assert issubclass(piecework.TokenizerError, ValueError)


# ----------------------------------------------------------------------------- copies, pickling
def test_pickle_and_copies(both):
    theirs, ours = both
    ours.enable_truncation(6, stride=1)
    ours.enable_padding(length=9, pad_id=1)
    theirs.enable_truncation(6, stride=1)
    theirs.enable_padding(length=9, pad_id=1)
    for clone in (
        pickle.loads(pickle.dumps(ours)),
        pickle.loads(pickle.dumps(ours, protocol=0)),
        pickle.loads(pickle.dumps(ours, protocol=1)),
        pickle.loads(pickle.dumps(ours, protocol=pickle.HIGHEST_PROTOCOL)),
        copy.deepcopy(ours),
        copy.copy(ours),
    ):
        assert isinstance(clone, piecework.Tokenizer)
        assert clone.padding == ours.padding
        assert clone.truncation == ours.truncation
        assert clone.get_vocab() == ours.get_vocab()
        for text in TEXTS:
            compare_encodings(clone.encode(text), theirs.encode(text), text)
        # the clone's configuration is its own
        clone.no_padding()
        clone.no_truncation()
        assert ours.padding is not None and ours.truncation is not None
        compare_encodings(ours.encode(TEXTS[2]), theirs.encode(TEXTS[2]))


class _Counting(piecework.Tokenizer):
    """A subclass that overrides one of the methods the instance otherwise binds to the core."""

    def encode_ids(self, text, add_special_tokens=True):
        self.calls.append(text)
        return super().encode_ids(text, add_special_tokens)


def test_direct_calls_take_keywords_and_respect_subclasses(both):
    """encode / encode_ids / decode are the core's methods on the instance: keyword calls work
    as on the oracle, and a subclass's override is still the one called."""
    theirs, ours = both
    for text in TEXTS:
        want = theirs.encode(sequence=text, pair="a pair", add_special_tokens=False)
        compare_encodings(ours.encode(sequence=text, pair="a pair", add_special_tokens=False), want)
        single = theirs.encode(text, add_special_tokens=False).ids
        assert ours.encode_ids(text=text, add_special_tokens=False) == single
        assert ours.decode(ids=want.ids, skip_special_tokens=False) == theirs.decode(
            ids=want.ids, skip_special_tokens=False
        )

    sub = _Counting.from_str(theirs.to_str())
    for clone in (sub, pickle.loads(pickle.dumps(sub)), copy.copy(sub), copy.deepcopy(sub)):
        assert type(clone) is _Counting
        clone.calls = []
        assert clone.encode_ids(TEXTS[2]) == theirs.encode(TEXTS[2]).ids
        assert clone.calls == [TEXTS[2]]


def test_to_str_roundtrip_and_save(both, tmp_path):
    _, ours = both
    ours.enable_padding(length=4)
    for pretty in (False, True):
        again = piecework.Tokenizer.from_str(ours.to_str(pretty=pretty))
        assert again.padding == ours.padding
        # the oracle reads what we write
        oracle = tokenizers.Tokenizer.from_str(ours.to_str(pretty=pretty))
        for text in TEXTS:
            compare_encodings(again.encode(text), oracle.encode(text), text)
    path = tmp_path / "saved.json"
    ours.save(str(path))
    compare_encodings(
        piecework.Tokenizer.from_file(path).encode("hello"),
        tokenizers.Tokenizer.from_file(str(path)).encode("hello"),
    )


# ----------------------------------------------------------------------------- from_file kinds
def _spm_text_from_model(model_path) -> bytes:
    spm = pytest.importorskip("sentencepiece")
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model_path.read_bytes())
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    lines = []
    for i, p in enumerate(proto.pieces):
        assert sp.id_to_piece(i) == p.piece
        b64 = base64.b64encode(p.piece.encode("utf-8")).decode("ascii")
        lines.append(f"{b64} {p.score!r} {int(p.type)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def test_detect_kind_crafted(tmp_path):
    theirs = make_wordpiece()
    detect = piecework.detect_kind
    assert detect(theirs.to_str().encode()) == "tokenizer.json"
    assert detect(b"\n  " + theirs.to_str(pretty=True).encode()) == "tokenizer.json"
    assert detect(b"\xef\xbb\xbf{}") == "tokenizer.json"
    vocab_txt = "\n".join(WORDPIECE_VOCAB).encode() + b"\n"
    assert detect(vocab_txt) == "vocab.txt"
    assert detect(b"\n" + vocab_txt) == "vocab.txt"  # starts with 0x0A like a protobuf
    assert detect(b"\n\n\n[UNK]\n") == "vocab.txt"
    assert detect(b"") == "vocab.txt"
    spm_lines = (
        b"PHVuaz4= 0.0 2\nPHM+ 0 3\n4paB -1.5 1\nYQ== -2.25e-05 1\nYg== -inf 1\nYw== 0.00001 6\n"
    )
    assert detect(spm_lines) == "spm"
    assert detect(spm_lines.replace(b"\n", b"\r\n")) == "spm"
    assert detect(b"hello\nworld\n") == "vocab.txt"


@pytest.mark.parametrize(
    "rel",
    [
        "spm-test/test_model.model",
        "nmt-marian/vocab.joint.spm",  # a protobuf despite its name
        "llama2/tokenizer.model",
        "hf-transformers-fixtures/test_sentencepiece_bpe.model",
        "bigbird-gpt2-spm/gpt2.model",
    ],
)
def test_detect_kind_sentencepiece_files(rel):
    path = data_path(*rel.split("/"))
    assert piecework.detect_kind(path.read_bytes()) == "sentencepiece"


@pytest.mark.parametrize(
    "rel,kind",
    [
        ("bert-base-uncased/vocab.txt", "vocab.txt"),
        ("bert-base-chinese/vocab.txt", "vocab.txt"),
        ("tftext-test/test_wp_en_vocab.txt", "vocab.txt"),
        ("hf-transformers-fixtures/vocab.txt", "vocab.txt"),
        ("bert-base-uncased/tokenizer.json", "tokenizer.json"),
        ("t5-small/tokenizer.json", "tokenizer.json"),
    ],
)
def test_detect_kind_shared_files(rel, kind):
    path = data_path(*rel.split("/"))
    assert piecework.detect_kind(path.read_bytes()) == kind


def test_detect_kind_generated_spm():
    model = data_path("spm-test", "test_model.model")
    assert piecework.detect_kind(_spm_text_from_model(model)) == "spm"


def _need(loader: str) -> None:
    if not hasattr(_core.Tokenizer, loader):
        pytest.skip(f"this build has no Tokenizer.{loader} loader")


def test_from_file_tokenizer_json(tmp_path):
    theirs = make_wordpiece()
    path = tmp_path / "tok.bin"  # the name does not matter
    path.write_text(theirs.to_str(pretty=True), encoding="utf-8")
    ours = piecework.Tokenizer.from_file(path)
    for text in TEXTS:
        compare_encodings(ours.encode(text), theirs.encode(text), text)


@pytest.mark.parametrize("leading_blank", [False, True])
def test_from_file_vocab_txt(tmp_path, leading_blank):
    _need("from_vocab_txt")
    words = ([""] if leading_blank else []) + WORDPIECE_VOCAB
    path = tmp_path / "whatever.dat"
    path.write_text("\n".join(words) + "\n", encoding="utf-8")
    ours = piecework.Tokenizer.from_file(path)
    # an all-lowercase vocabulary is guessed uncased: lowercasing, accents stripped
    theirs = tokenizers.BertWordPieceTokenizer(str(path), lowercase=True)
    for text in TEXTS:
        compare_encodings(ours.encode(text), theirs.encode(text), text)
    explicit = piecework.Tokenizer.from_wordpiece_vocab(path, lowercase=True)
    for text in TEXTS:
        assert explicit.encode(text).ids == ours.encode(text).ids
    # pickling a vocab.txt tokenizer keeps what it was built from
    clone = pickle.loads(pickle.dumps(ours))
    assert clone.encode(TEXTS[2]).ids == ours.encode(TEXTS[2]).ids


SPM_TEXTS = [
    "Hello world.",
    "I saw a girl with a telescope.",
    "  spaces  ",
    "ab",
    "日本語のテキスト",
]


@pytest.mark.parametrize("rel", ["spm-test/test_model.model", "nmt-marian/vocab.joint.spm"])
def test_from_file_sentencepiece(rel):
    _need("from_sentencepiece")
    spm = pytest.importorskip("sentencepiece")
    path = data_path(*rel.split("/"))
    sp = spm.SentencePieceProcessor(model_file=str(path))
    ours = piecework.Tokenizer.from_file(path)
    same = piecework.Tokenizer.from_sentencepiece(path.read_bytes())
    for text in SPM_TEXTS:
        enc = ours.encode(text)
        assert enc.ids == sp.encode(text), text
        assert enc.tokens == sp.encode(text, out_type=str), text
        assert same.encode(text).ids == enc.ids
    clone = pickle.loads(pickle.dumps(ours))
    assert clone.encode(SPM_TEXTS[1]).ids == ours.encode(SPM_TEXTS[1]).ids


def test_from_file_spm_text(tmp_path):
    _need("from_spm_text")
    spm = pytest.importorskip("sentencepiece")
    # A byte-fallback BPE model: the .spm defaults (bpe, byte_fallback) apply as they are.
    model = data_path("llama2", "tokenizer.model")
    path = tmp_path / "v.spm"
    path.write_bytes(_spm_text_from_model(model))
    by_detection = piecework.Tokenizer.from_file(path)
    explicit = piecework.Tokenizer.from_spm_vocab(path)
    for text in SPM_TEXTS:
        assert by_detection.encode(text).ids == explicit.encode(text).ids
    # With the model's own settings the .spm gives what sentencepiece gives (on texts its
    # normalizer leaves alone).
    sp = spm.SentencePieceProcessor(model_file=str(model))
    same = piecework.Tokenizer.from_spm_vocab(path, add_dummy_prefix=True)
    for text in ["Hello world.", "I saw a girl with a telescope.", "ab", "日本語のテキスト"]:
        assert same.encode(text).ids == sp.encode(text), text
    with pytest.raises(piecework.TokenizerError):
        piecework.Tokenizer.from_spm_vocab(path, model_type="bogus")
    # A Unigram model without byte pieces cannot take the byte-fallback default: a clear error.
    unigram = tmp_path / "u.spm"
    unigram_model = data_path("spm-test", "test_model.model")
    unigram.write_bytes(_spm_text_from_model(unigram_model))
    with pytest.raises(piecework.InvalidDataError):
        piecework.Tokenizer.from_file(unigram)
    sp = spm.SentencePieceProcessor(model_file=str(unigram_model))
    ours = piecework.Tokenizer.from_spm_vocab(
        unigram,
        model_type="unigram",
        add_dummy_prefix=True,
        remove_extra_whitespaces=True,
        byte_fallback=False,
    )
    for text in ["Hello world.", "I saw a girl with a telescope.", "  two  spaces ", "ab"]:
        assert ours.encode(text).ids == sp.encode(text), text
    clone = pickle.loads(pickle.dumps(ours))
    assert clone.encode("Hello world.").ids == ours.encode("Hello world.").ids


def test_public_names():
    for name in ("Tokenizer", "Encoding", "TokenizerError", "InvalidDataError",
                 "UnsupportedModelError", "set_num_threads", "get_num_threads"):  # fmt: skip
        assert hasattr(piecework, name), name
    n = piecework.get_num_threads()
    assert n >= 1
    piecework.set_num_threads(1)
    assert piecework.get_num_threads() == 1
    theirs, ours = _pair("wordpiece")
    compare_batches(ours.encode_batch(TEXTS), theirs.encode_batch(TEXTS))
    piecework.set_num_threads(0)
    assert piecework.get_num_threads() >= 1


def test_type_stubs_match_the_extension():
    pytest.importorskip("mypy")
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "piecework._core"],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stdout.decode()[-3000:]


@functools.cache
def _default_pair():
    from piecework.cli import default_tokenizer_path

    path = default_tokenizer_path()
    return tokenizers.Tokenizer.from_file(path), piecework.Tokenizer.from_file(path)


@given(a=corner_text, b=st.one_of(st.none(), corner_text))
def test_default_tokenizer_corner_text(a, b):
    """The shipped tokenizer (BERT uncased, truncation 128, padding 128) against the oracle."""
    theirs, ours = _default_pair()
    compare_encodings(ours.encode(a, b), theirs.encode(a, b), f"{a!r} / {b!r}")
    assert ours.decode(ours.encode(a).ids) == theirs.decode(theirs.encode(a).ids)


@pytest.mark.parametrize("text", ["hello\x0bhello", "a\x0cb c", "x\x0b", "\x0c\x0bworld"])
def test_clean_text_drops_vertical_tab_and_form_feed(text):
    """BertNormalizer(clean_text) removes U+000B and U+000C (category Cc, not tab/LF/CR) before
    any splitting, so they join the words around them; they are not whitespace there."""
    theirs, ours = _default_pair()
    compare_encodings(ours.encode(text), theirs.encode(text), repr(text))


def _random_corner_texts(seed: int, n: int) -> list:
    from strategies import COMBINING, CONTROL, FRAGMENTS, WHITESPACE

    rng = random.Random(seed)
    pool = FRAGMENTS + WHITESPACE + CONTROL + COMBINING
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 12)):
            if rng.random() < 0.2:
                parts.append(
                    chr(rng.choice([rng.randint(0, 0x2FFF), rng.randint(0x3000, 0x10FFFF)]))
                )
            else:
                parts.append(rng.choice(pool))
        out.append("".join(p for p in parts if not 0xD800 <= ord(p[0]) < 0xE000))
    return out


@pytest.mark.sweep
@pytest.mark.parametrize("name", ["default", *sorted(MAKERS)])
def test_sweep_corner_texts(name):
    """PIECEWORK_SWEEP=1: 100,000 random corner texts (and 20,000 pairs) per tokenizer."""
    theirs, ours = _default_pair() if name == "default" else _fixed(name)
    texts = _random_corner_texts(zlib.crc32(name.encode()), 100_000)
    bad = []
    for enc, ref, text in zip(ours.encode_batch(texts), theirs.encode_batch(texts), texts):
        try:
            compare_encodings(enc, ref)
        except AssertionError:
            bad.append(text)
    pairs = list(zip(texts[:20_000], texts[20_000:40_000]))
    for enc, ref, pair in zip(ours.encode_batch(pairs), theirs.encode_batch(pairs), pairs):
        try:
            compare_encodings(enc, ref)
        except AssertionError:
            bad.append(pair)
    print(f"{name}: {len(bad)} of {len(texts) + len(pairs)} differ")
    assert not bad, f"{len(bad)} differ; first: {bad[:5]!r}"
