"""BERT vocab.txt reader against tokenizers 0.22.1's BertWordPieceTokenizer.

Expected values come from the oracle: the tokenizer.json document BertWordPieceTokenizer builds
from the same file (compared as parsed JSON), its vocabulary, and its encodings. piecework's own
rules (the file must contain [UNK]; 64 MiB limit; the casing guess when `lowercase` is not
given; no post-processor when [CLS] or [SEP] is missing, where the oracle raises) are checked
against the spec. Crafted files cover each line rule; the real vocab.txt files in
../shared/data are compared whole.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")
import piecework
from oracle import DATA_DIR as DATA
from oracle import SWEEP

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Unicode White_Space. (Python's str.isspace also counts U+001C..U+001F, which it is not.)
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000"
)


def ours(path, lowercase=None, strip_accents=None):
    try:
        return piecework.Tokenizer.from_wordpiece_vocab(
            str(path), lowercase=lowercase, strip_accents=strip_accents
        )
    except piecework.UnsupportedModelError as e:
        pytest.skip(f"pipeline component not available yet: {e}")


def expect_invalid(path, match=None):
    """Loading `path` must fail with InvalidDataError (skip while the loader is missing)."""
    try:
        piecework.Tokenizer.from_wordpiece_vocab(str(path))
    except piecework.UnsupportedModelError as e:
        pytest.skip(f"pipeline component not available yet: {e}")
    except piecework.InvalidDataError as e:
        if match is not None:
            assert re.search(match, str(e)), str(e)
        return
    pytest.fail(f"{path} loaded, but must be refused")


def oracle(path, lowercase, strip_accents):
    return tokenizers.BertWordPieceTokenizer(
        str(path), lowercase=lowercase, strip_accents=strip_accents
    )


def oracle_without_post_processor(path, lowercase, strip_accents):
    """BertWordPieceTokenizer's construction, step by step, for a vocabulary without [CLS] or
    [SEP] (where BertWordPieceTokenizer itself raises): the same minus the post-processor."""
    from tokenizers import decoders, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    tok = tokenizers.Tokenizer(WordPiece.from_file(str(path), unk_token="[UNK]"))
    for t in ["[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"]:
        if tok.token_to_id(t) is not None:
            tok.add_special_tokens([t])
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=True,
        strip_accents=strip_accents,
        lowercase=lowercase,
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def oracle_tokenizer(path, lowercase, strip_accents):
    try:
        return oracle(path, lowercase, strip_accents)._tokenizer
    except TypeError:  # "sep_token/cls_token not found in the vocabulary"
        return oracle_without_post_processor(path, lowercase, strip_accents)


def oracle_doc(path, lowercase, strip_accents):
    return json.loads(oracle_tokenizer(path, lowercase, strip_accents).to_str())


def write(tmp_path, data: bytes, name="vocab.txt") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def lines(*tokens: str, end: str = "\n") -> bytes:
    return ("\n".join(tokens) + end).encode("utf-8")


BASE = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"]


# ----------------------------------------------------------------------------- line rules


@pytest.mark.parametrize(
    "data",
    [
        lines(*BASE),
        lines(*BASE, end=""),  # no final newline
        lines(*BASE, end="\n\n"),  # a blank last line is the token ""
        "\r\n".join(BASE).encode(),  # CRLF: \r is trailing white space
        lines(*BASE, "a\rb", "x\u2028y", "z\x85w"),  # only \n ends a line
        lines(*BASE, "  lead", "trail \t\u3000\u00a0", "\u2003"),  # trailing White_Space dropped
        lines(*BASE, "zw\u200b", "bom\ufeff", "sep\x1f", "\x1c"),  # not White_Space: kept
        lines("\ufeff[PAD]", *BASE[1:]),  # no BOM handling
        lines(*BASE, "", "", "x", ""),  # blank lines are "" tokens; the last keeps its id
        lines(*BASE, "hello", "[UNK]"),  # a repeated token keeps its last id
    ],
)
def test_reader_rules_match_oracle(tmp_path, data):
    p = write(tmp_path, data)
    expected = tokenizers.models.WordPiece.read_file(str(p))
    tok = ours(p, lowercase=True)
    assert tok.get_vocab(with_added_tokens=False) == expected
    assert json.loads(tok.to_str()) == oracle_doc(p, True, None)


def test_invalid_utf8_names_the_line(tmp_path):
    p = write(tmp_path, lines(*BASE) + b"ok\n\xff\xfe\n")
    expect_invalid(p, "line 10")
    # The oracle refuses it as well.
    with pytest.raises(Exception):  # noqa: B017 - any refusal
        tokenizers.models.WordPiece.read_file(str(p))


def test_unk_is_required(tmp_path):
    # BertWordPieceTokenizer loads this; the spec requires [UNK].
    p = write(tmp_path, lines("[PAD]", "[CLS]", "[SEP]", "a"))
    expect_invalid(p, r"\[UNK\]")
    p = write(tmp_path, lines("[UNK]\x1f", "a"))  # U+001F is not trimmed: no [UNK]
    expect_invalid(p)


def test_size_limit(tmp_path):
    p = write(tmp_path, lines("[UNK]") + b"a" * (64 << 20))
    expect_invalid(p, "64 MiB")


# ----------------------------------------------------------------------------- document


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("strip_accents", [None, True, False])
def test_document_matches_oracle(tmp_path, lowercase, strip_accents):
    p = write(tmp_path, lines(*BASE, "Héllo", "##ed"))
    got = json.loads(ours(p, lowercase, strip_accents).to_str())
    assert got == oracle_doc(p, lowercase, strip_accents)


def test_special_tokens_that_exist_in_oracle_order(tmp_path):
    rng = random.Random(5)
    for _ in range(20):
        toks = SPECIALS + ["a", "b", "##c", "[unused1]"]
        rng.shuffle(toks)
        p = write(tmp_path, lines(*toks))
        got = json.loads(ours(p, True).to_str())
        assert got == oracle_doc(p, True, None)


def test_missing_cls_or_sep_has_no_post_processor(tmp_path):
    p = write(tmp_path, lines("[PAD]", "[UNK]", "[SEP]", "a"))
    with pytest.raises(TypeError):  # the oracle cannot build it at all
        oracle(p, True, None)
    got = json.loads(ours(p, True).to_str())
    assert got["post_processor"] is None
    assert [t["content"] for t in got["added_tokens"]] == ["[PAD]", "[UNK]", "[SEP]"]
    assert got == oracle_doc(p, True, None)


def test_casing_guess(tmp_path):
    cases = {
        ("[UNK]", "[CLS]", "hello"): True,  # uncased
        ("[UNK]", "Hello"): False,
        ("[UNK]", "ℝ", "[unused0]"): True,  # ℝ has no lowercase form; brackets don't count
        ("[UNK]", "<S>"): False,
        ("[UNK]", "ǅ"): False,  # titlecase letter with a lowercase form
    }
    for toks, lower in cases.items():
        p = write(tmp_path, lines(*toks))
        doc = json.loads(ours(p).to_str())
        assert doc["normalizer"]["lowercase"] is lower, toks
        assert doc["normalizer"]["strip_accents"] is None
        assert doc == oracle_doc(p, lower, None)


# ----------------------------------------------------------------------------- real files

REAL = {
    "bert-base-uncased/vocab.txt": True,
    "bert-base-cased/vocab.txt": False,
    "bert-base-chinese/vocab.txt": False,  # cased through <S> and <T>
    "tftext-test/test_wp_en_vocab.txt": None,
}


def corpus_lines(n: int) -> list[str]:
    out: list[str] = []
    for rel in ["corpora/sherlock.txt", "corpora/udhr2_all.txt", "corpora/wagahaiwa_nekodearu.txt"]:
        p = DATA / rel
        if p.exists():
            out += [x for x in p.read_text(encoding="utf-8").split("\n") if x][: n // 3]
    return out


@pytest.mark.parametrize("rel", sorted(REAL))
def test_real_vocab_files(rel):
    path = DATA / rel
    if not path.exists():
        pytest.skip(f"{path} not found (shared test data sits beside the CI checkout)")
    tok = ours(path)
    doc = json.loads(tok.to_str())
    if REAL[rel] is not None:
        assert doc["normalizer"]["lowercase"] is REAL[rel]
    lower = doc["normalizer"]["lowercase"]
    assert doc == oracle_doc(path, lower, None)
    ref = oracle_tokenizer(path, lower, None)
    texts = corpus_lines(20_000 if SWEEP else 600)
    texts += ["Hello, World! naïve café 𝔸 日本語 [CLS] x [MASK]", "\u3000\t\u00a0 x\u2028y"]
    for text in texts:
        e = ref.encode(text)
        g = tok.encode(text)
        assert (g.ids, g.tokens, g.offsets) == (e.ids, e.tokens, e.offsets), text


def test_fixture_without_unk_is_refused():
    path = DATA / "hf-transformers-fixtures/vocab.txt"
    if not path.exists():
        pytest.skip(f"{path} not found")
    expect_invalid(path)
