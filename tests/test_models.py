"""WordPiece, WordLevel and Unigram models against tokenizers 0.22.1.

Every expected value comes from the oracle in the test: a tokenizer.json holding only the model
(no normalizer, pre-tokenizer or post-processor, so the whole text reaches the model as one
piece) is loaded by both libraries and the encodings (ids, tokens, code point offsets) and
errors are compared. Crafted vocabularies cover each rule of the spec and ORACLE-NOTES;
hypothesis adds random vocabularies and Unicode corners; the model sections of the real files
in ../shared/data are run on corpus words. `PIECEWORK_SWEEP=1` runs many more examples.
"""

from __future__ import annotations

import json

import pytest

tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
import piecework
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import DATA_DIR as DATA
from oracle import SWEEP

EXAMPLES = 2000 if SWEEP else 150


def shell(model: dict) -> str:
    return json.dumps(
        {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [],
            "normalizer": None,
            "pre_tokenizer": None,
            "post_processor": None,
            "decoder": None,
            "model": model,
        }
    )


def load_both(model: dict):
    """Both tokenizers, or both load errors (asserting they agree on failing)."""
    doc = shell(model)
    try:
        hf = tokenizers.Tokenizer.from_str(doc)
    except Exception:  # noqa: BLE001 - any oracle failure means "refused"
        hf = None
    if hf is None:
        with pytest.raises(piecework.InvalidDataError):
            piecework.Tokenizer.from_str(doc)
        return None, None
    return hf, piecework.Tokenizer.from_str(doc)


def outcome(tok, text: str):
    try:
        e = tok.encode(text, add_special_tokens=False)
    except Exception as err:  # noqa: BLE001
        return ("error", type(err).__name__ if isinstance(err, piecework.TokenizerError) else "")
    return (e.ids, e.tokens, e.offsets)


def check(model: dict, texts, *, vocab: bool = True) -> None:
    hf, pw = load_both(model)
    if hf is None:
        return
    for text in texts:
        exp = outcome(hf, text)
        got = outcome(pw, text)
        if exp[0] == "error":
            assert got[0] == "error", (text, got)
            assert got[1] == "InvalidDataError", (text, got)
        else:
            assert got == exp, (model, text)
    if vocab:
        for added in (False, True):
            assert pw.get_vocab_size(added) == hf.get_vocab_size(added)
            assert pw.get_vocab(added) == hf.get_vocab(added)


def unigram(vocab, unk_id=None, byte_fallback=False):
    m = {"type": "Unigram", "vocab": [list(v) for v in vocab], "byte_fallback": byte_fallback}
    m["unk_id"] = unk_id
    return m


def wordpiece(vocab, unk="[UNK]", prefix="##", max_chars=100):
    return {
        "type": "WordPiece",
        "unk_token": unk,
        "continuing_subword_prefix": prefix,
        "max_input_chars_per_word": max_chars,
        "vocab": vocab if isinstance(vocab, dict) else {t: i for i, t in enumerate(vocab)},
    }


def wordlevel(vocab, unk="[UNK]"):
    return {"type": "WordLevel", "unk_token": unk, "vocab": vocab}


# ----------------------------------------------------------------------------- WordPiece


def test_wordpiece_greedy_longest_match():
    m = wordpiece(["[UNK]", "un", "##aff", "##able", "una", "##ffable", "a", "##a"])
    check(m, ["unaffable", "unun", "aaaa", "una", "unaff", "x", "aé"])


def test_wordpiece_limit_counts_scalar_values():
    m = wordpiece(["[UNK]", "𝔸", "##𝔸", "a", "##a"], max_chars=3)
    check(m, ["𝔸𝔸𝔸", "𝔸𝔸𝔸𝔸", "aaa", "aaaa", "a𝔸a", "e\u0301e\u0301"])
    check(wordpiece(["[UNK]", "a"], max_chars=0), ["a"])


def test_wordpiece_whole_word_unknown_and_missing_unknown():
    check(wordpiece(["[UNK]", "a", "##b"]), ["ab", "abc", "ab𝔸x", "b"])
    # No [UNK] in the vocabulary: fine until a word needs it, then an error.
    check(wordpiece(["a", "##b"], max_chars=2), ["ab", "ac", "abb"])


def test_wordpiece_custom_prefix_and_odd_entries():
    v = {"[UNK]": 0, "a": 1, "@@b": 2, "b": 3, "@@": 4, "": 5}
    check(wordpiece(v, prefix="@@"), ["ab", "abb", "ba", "@@b", "a@@"])
    check(wordpiece(v, prefix=""), ["ab", "abb", "ba", "@@b"])


def test_wordpiece_repeated_ids_encode_to_that_id():
    # Which entry id_to_token returns for a shared id is random in tokenizers; ids, tokens
    # (the matched entry) and offsets are not, and get compared.
    v = {"[UNK]": 0, "x": 5, "y": 5, "##x": 6, "##y": 6}
    check(wordpiece(v), ["xy", "yx", "xx", "q"])


def test_wordpiece_file_fields_required():
    full = wordpiece(["[UNK]", "a"])
    for field in ["unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"]:
        m = dict(full)
        del m[field]
        check(m, ["a"])
    bad = dict(full, vocab={"a": -1})
    check(bad, ["a"])
    check(dict(full, max_input_chars_per_word=-1), ["a"])


# ----------------------------------------------------------------------------- WordLevel


def test_wordlevel_lookup_unknown_and_missing_unknown():
    check(wordlevel({"[UNK]": 0, "hello": 1, "𝔸": 2}), ["hello", "𝔸", "hellos", "hell", "x y"])
    check(wordlevel({"a": 0}), ["a", "b"])
    check(wordlevel({"a": 0, "b": 0}, unk="a"), ["zz"], vocab=True)


def test_wordlevel_requires_unk_token():
    check({"type": "WordLevel", "vocab": {"a": 0}}, ["a"])
    check(wordlevel({"a": 1.5}), ["a"])


# ----------------------------------------------------------------------------- Unigram


def test_unigram_tie_breaking_earliest_start():
    v = [("a", -1), ("b", -1), ("c", -1), ("d", -1), ("ab", -2), ("bc", -2), ("cd", -2)]
    check(unigram(v), ["abcd", "abc", "bcd", "abcdabcd"])


def test_unigram_unknown_score_min_over_all_minus_ten():
    # Unknown "x" + "a" = (-20 - 10) + 15 = -15; "xa" wins above, ties keep it, loses below.
    for xa in (-15 + 1e-9, -15.0, -15 - 1e-9):
        check(unigram([("<unk>", -20), ("a", 15), ("xa", xa)], unk_id=0), ["xa", "xax"])
    # Byte pieces count towards the minimum.
    check(unigram([("<unk>", -20), ("<0x00>", -40), ("a", 5), ("xa", -35)], unk_id=0), ["xa"])


def test_unigram_fused_unknown():
    v = [("<unk>", 0), ("<unk><unk>", -1), ("a", -1)]
    check(unigram(v, unk_id=0), ["<unk><unk>", "<unk>", "xy𝔸a", "x<unk>a", "a<unk>b"])


def test_unigram_no_unk_id_error_rule():
    check(unigram([("a", -50), ("ab", -1), ("bc", -50)]), ["abc", "ab", "a"])
    check(unigram([("a", -1), ("ab", -1)]), ["ab", "ac", "z", ""])


def test_unigram_byte_fallback():
    v = [("<unk>", 0), ("a", -1)] + [(f"<0x{b:02X}>", -5) for b in range(256)]
    check(unigram(v, unk_id=0, byte_fallback=True), ["éxa", "<0x41>", "a𝔸a", "\u3000"])
    part = [("<unk>", 0), ("<0xC3>", -1), ("a", -1)]
    check(unigram(part, unk_id=0, byte_fallback=True), ["é", "aéa"])
    check(unigram(v, unk_id=0, byte_fallback=False), ["éxa"])


def test_unigram_scores_are_64_bit():
    check(unigram([("a", -0.5), ("b", -0.5), ("ab", -1.000000000001)]), ["ab", "abab"])


def test_unigram_repeated_piece_and_sizes():
    v = [("<unk>", 0), ("a", -1), ("a", -3), ("b", -1), ("ab", -0.5)]
    check(unigram(v, unk_id=0), ["a", "ab", "ba", "c"])


def test_unigram_file_fields():
    check({"vocab": [["<unk>", 0], ["a", -1]], "unk_id": 0}, ["ab"])
    for bad in [
        {"type": "Unigram", "vocab": [["a", -1]], "unk_id": 1},
        {"type": "Unigram", "vocab": [], "unk_id": 0},
        {"type": "Unigram", "vocab": [["a", -1, 0]]},
        {"type": "Unigram", "vocab": [["a", "-1"]]},
        {"type": "Unigram", "vocab": [["a", -1]], "byte_fallback": None},
    ]:
        check(bad, ["a"])


# ----------------------------------------------------------------------------- hypothesis

# Small alphabets make matches likely; the corners are combining marks, astral characters,
# every kind of white space and control characters.
ALPHABET = list("abcé<>0") + [
    "\u0301",
    "𝔸",
    "😀",
    " ",
    "\t",
    "\u00a0",
    "\u3000",
    "\u2028",
    "\r",
    "\n",
    "\x00",
    "\x85",
]
chars = st.sampled_from(ALPHABET)
words = st.text(chars, min_size=1, max_size=4)
texts = st.lists(st.text(chars, min_size=0, max_size=12), min_size=1, max_size=6)


@st.composite
def unigram_models(draw):
    pieces = draw(st.lists(words, min_size=1, max_size=12))
    if draw(st.booleans()):
        pieces.insert(0, "<unk>")
    if draw(st.booleans()):
        pieces += [f"<0x{b:02X}>" for b in draw(st.lists(st.integers(0, 255), max_size=30))]
    ints = draw(st.booleans())
    score = st.integers(-4, 0).map(float) if ints else st.floats(-20, 0, allow_nan=False)
    vocab = [(p, draw(score)) for p in pieces]
    unk = draw(st.one_of(st.none(), st.just(0), st.integers(0, len(vocab) - 1)))
    return unigram(vocab, unk_id=unk, byte_fallback=draw(st.booleans()))


@st.composite
def vocab_objects(draw, prefix="##"):
    entries = draw(st.lists(st.tuples(st.booleans(), words), min_size=1, max_size=12))
    v = {(prefix + w if cont else w): draw(st.integers(0, 30)) for cont, w in entries}
    if draw(st.booleans()):
        v["[UNK]"] = draw(st.integers(0, 30))
    return v


@st.composite
def wordpiece_models(draw):
    prefix = draw(st.sampled_from(["##", "##", "@", ""]))
    return wordpiece(
        draw(vocab_objects(prefix)), prefix=prefix, max_chars=draw(st.sampled_from([100, 4, 0]))
    )


HSET = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HSET
@given(unigram_models(), texts)
def test_unigram_hypothesis(model, ts):
    check(model, ts)


@HSET
@given(wordpiece_models(), texts)
def test_wordpiece_hypothesis(model, ts):
    # get_vocab is compared; a shared id's id_to_token is not (random in the oracle).
    check(model, ts)


@HSET
@given(vocab_objects(""), texts)
def test_wordlevel_hypothesis(vocab, ts):
    check(wordlevel(vocab), ts + list(vocab)[:3])


# ----------------------------------------------------------------------------- real files

REAL = {
    "bert-base-uncased/tokenizer.json": "",
    "all-minilm-l6-v2/tokenizer.json": "",
    "generated/bert-base-cased/tokenizer.json": "",
    "hf-tokenizers-data/bert-wiki.json": "",
    "wordlevel/wordlevel.json": "",
    "t5-small/tokenizer.json": "\u2581",
    "xlnet-base-cased/tokenizer.json": "\u2581",
    "pegasus/tokenizer.json": "\u2581",
    "rut5-large/tokenizer.json": "\u2581",
    "nmt-marian/tokenizer.json": "\u2581",
}


def corpus_words(n: int) -> list[str]:
    out: list[str] = []
    for rel in [
        "corpora/sherlock.txt",
        "corpora/udhr2_all.txt",
        "corpora/emoji/emoji-test-derived.txt",
        "corpora/wikipedia-mars/japanese.utf8.txt",
    ]:
        p = DATA / rel
        if p.exists():
            out += p.read_text(encoding="utf-8", errors="replace").split()[: n // 4]
    return out


@pytest.mark.parametrize("rel", sorted(REAL))
def test_real_model_sections(rel):
    path = DATA / rel
    if not path.exists():
        pytest.skip(f"{path} not found (shared test data sits beside the CI checkout)")
    model = json.loads(path.read_text(encoding="utf-8"))["model"]
    hf, pw = load_both(model)
    assert hf is not None
    prefix = REAL[rel]
    ws = corpus_words(200_000 if SWEEP else 8_000)
    ws = [prefix + w for w in ws] + [w.lower() for w in ws[:2000]]
    exp = hf.encode_batch(ws, add_special_tokens=False)
    got = pw.encode_batch(ws, add_special_tokens=False)
    for w, e, g in zip(ws, exp, got):
        assert (g.ids, g.tokens, g.offsets) == (e.ids, e.tokens, e.offsets), (rel, w)
    assert pw.get_vocab_size(False) == hf.get_vocab_size(False)
    assert pw.get_vocab_size(True) == hf.get_vocab_size(True)
    assert pw.get_vocab(False) == hf.get_vocab(False)
    sample = list(range(0, hf.get_vocab_size(False), 97))
    assert [pw.id_to_token(i) for i in sample] == [hf.id_to_token(i) for i in sample]
