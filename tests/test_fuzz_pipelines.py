"""Differential fuzz of tokenizer.json pipelines nobody wrote by hand, against tokenizers 0.22.1.

Each case draws, from its seed, a pipeline built with the tokenizers API (random normalizers,
pre-tokenizers, a model trained here by tokenizers' own trainer, post-processor, decoder, added
tokens with random flags, model options written into the JSON), saves it with `to_str()`, loads
that text in both libraries and compares every observable: encodings field by field (single,
pair, pre-tokenized, with and without special tokens, under random truncation and padding,
batches), the ids-only entry points, decoding (also of id lists no encoder gives), vocabulary
look-ups, and whether a call raises. A second generator starts from the shapes piecework has
fast paths for (BERT, byte-level BPE, Llama-style, T5-style) and changes a few options.

CI runs a bounded, seeded sample; `PIECEWORK_SWEEP=1` runs the large sweep and prints counts
(`pytest -s`). The expectation is always computed by the oracle in the test.
"""

from __future__ import annotations

import os
import random

import pytest

tokenizers = pytest.importorskip("tokenizers")
import fuzz_pipelines_lib as F
import piecework
from oracle import DATA_DIR
from tokenizers import AddedToken
from tokenizers import models as M
from tokenizers import normalizers as N

N_CI = 10
N_SWEEP = int(os.environ.get("PIECEWORK_SWEEP_PIPELINES", "400"))
# Another start explores new cases; the default keeps a failing sweep reproducible.
SWEEP_SEED = int(os.environ.get("PIECEWORK_SWEEP_SEED", "1000"))
TEXTS_CI, TEXTS_SWEEP = 40, 120


@pytest.fixture(scope="module")
def lines() -> tuple[list[str], list[str]]:
    """(training lines, extra text lines), from the shared corpora."""
    return F.shared_lines(DATA_DIR)


@pytest.fixture(scope="module", autouse=True)
def _precompiled() -> None:
    """Charsmaps for the Precompiled normalizer, from sentencepiece models trained here (when
    sentencepiece is installed; without it the generators skip Precompiled)."""
    try:
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:
        return
    if F.PRECOMPILED or not DATA_DIR.is_dir():
        return
    import io

    train = F.corpus(DATA_DIR, 300, seed=1)
    for rule in ("nmt_nfkc", "nfkc_cf"):
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(train),
            model_writer=out,
            vocab_size=800,
            normalization_rule_name=rule,
            hard_vocab_limit=False,
            character_coverage=0.98,
            num_threads=1,
            minloglevel=3,
        )
        m = sentencepiece_model_pb2.ModelProto()
        m.ParseFromString(out.getvalue())
        F.PRECOMPILED.append(bytes(m.normalizer_spec.precompiled_charsmap))


def _run(generator, seed: int, lines, n_texts: int) -> tuple[int, list]:
    train, extra = lines
    rng = random.Random(seed)
    try:
        data = generator(rng, train)
    except F.TrainingFailed as e:
        pytest.skip(f"tokenizers cannot train this draw: {e}")
    texts = F.random_texts(rng, n_texts, extra) + F.long_texts(rng, extra)
    return len(texts), F.differences(data, texts, rng)


def _report(bad: list, seed: int, what: str) -> str:
    shown = "\n".join(repr(b)[:800] for b in bad[:4])
    return f"{len(bad)} differences for {what} seed {seed}:\n{shown}"


@pytest.mark.parametrize("seed", range(N_CI))
def test_random_pipeline(lines, seed: int) -> None:
    _, bad = _run(F.random_pipeline, seed, lines, TEXTS_CI)
    assert not bad, _report(bad, seed, "random_pipeline")


@pytest.mark.parametrize("seed", range(N_CI))
def test_near_fast_path_pipeline(lines, seed: int) -> None:
    _, bad = _run(F.near_fast_path_pipeline, seed, lines, TEXTS_CI)
    assert not bad, _report(bad, seed, "near_fast_path_pipeline")


@pytest.mark.sweep
@pytest.mark.parametrize("generator", ["random_pipeline", "near_fast_path_pipeline"])
def test_sweep(lines, generator: str) -> None:
    gen = getattr(F, generator)
    built = texts = 0
    failed: list[tuple[int, list]] = []
    for seed in range(SWEEP_SEED, SWEEP_SEED + N_SWEEP):
        rng = random.Random(seed)
        try:
            data = gen(rng, lines[0])
        except F.TrainingFailed:
            continue
        sample = F.random_texts(rng, TEXTS_SWEEP, lines[1]) + F.long_texts(rng, lines[1])
        bad = F.differences(data, sample, rng)
        built += 1
        texts += len(sample)
        if bad:
            failed.append((seed, bad))
    print(
        f"SWEEP {generator}: {built} pipelines x ~{texts // max(built, 1)} texts; "
        f"{len(failed)} with differences"
    )
    assert not failed, "\n".join(_report(b, s, generator) for s, b in failed[:5])


# ------------------------------------------------------------------------ found by the fuzz


def _both(theirs, ours, *args):
    """(result or None, raised?) for both libraries."""
    out = []
    for lib in (theirs, ours):
        try:
            e = lib.encode(*args)
            out.append(((e.ids, e.tokens, e.offsets), False))
        except BaseException as ex:
            if isinstance(ex, KeyboardInterrupt):
                raise
            out.append((type(ex), True))
    return out


@pytest.mark.parametrize("flags", [{}, {"single_word": True}, {"lstrip": True}, {"rstrip": True}])
def test_added_token_normalized_to_nothing(flags) -> None:
    """An added token that the normalizer turns into "" matches between the bytes of a
    character. tokenizers fails on such a text (a panic with a flag, "bad split" without);
    piecework panicked with a flag: now it raises its TokenizerError, and on ASCII text both
    give the same tokens."""
    theirs = tokenizers.Tokenizer(M.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    theirs.normalizer = N.Strip()
    theirs.add_tokens([AddedToken("  ", normalized=True, **flags)])
    ours = piecework.Tokenizer.from_str(theirs.to_str())
    for text in ["ab", "a  b", " a", "", "é", "a 中", "中b", "😀"]:
        (a, a_raised), (b, b_raised) = _both(theirs, ours, text)
        assert a_raised == b_raised, (text, a, b)
        if b_raised:
            assert issubclass(b, piecework.TokenizerError), (text, b)
        else:
            assert a == b, text


@pytest.mark.parametrize("pattern", ["^", "$"])
@pytest.mark.parametrize("content", ["▁", "ab", "ab "])
def test_pieces_inserted_before_the_input_then_byte_level(pattern, content) -> None:
    """An empty regex match at the very start inserts characters aligned to no original text
    (span (0, 0)). Where the pre-tokenizer makes them a piece of their own, the reference's
    ByteLevel rewrite is applied to the piece's (empty) original range: the mapped text is
    inserted before the unmapped one, so `▁` becomes `âĸģ▁` (fuzz sweep seed 1158). Where such
    characters share a piece with original ones, the reference panics; those cases are skipped."""
    from tokenizers import Regex, Tokenizer
    from tokenizers import pre_tokenizers as P

    vocab = ["[UNK]", "a", "b", "x", "ab", "▁", "âĸģ", "Ċ", "Ġ", "abab", "Ġab"]
    vocab += ["@@" + t for t in vocab[1:]]
    pres = [
        P.ByteLevel(add_prefix_space=False),
        P.ByteLevel(add_prefix_space=True),
        P.Sequence([P.WhitespaceSplit(), P.ByteLevel(add_prefix_space=False)]),
        P.Sequence([P.Whitespace(), P.ByteLevel(add_prefix_space=False, use_regex=False)]),
    ]
    texts = ["\n", "a\n", "\n\na", " x", "x", "x y\n", "é\n", "\n😀 ", ""]
    compared = 0
    for pre in pres:
        ref = Tokenizer(
            M.WordPiece(
                {t: i for i, t in enumerate(vocab)},
                unk_token="[UNK]",
                continuing_subword_prefix="@@",
            )
        )
        ref.normalizer = N.Replace(Regex(pattern), content)
        ref.pre_tokenizer = pre
        ours = piecework.Tokenizer.from_str(ref.to_str())
        for text in texts:
            (a, a_raised), (b, b_raised) = _both(ref, ours, text)
            if a_raised:
                continue
            assert not b_raised, (text, b)
            assert a == b, (pre, text)
            compared += 1
    assert compared >= len(texts), compared


@pytest.mark.parametrize("pre", [None, "Whitespace", "ByteLevel"])
def test_byte_fallback_spells_prefix_and_suffix_past_the_word(pre) -> None:
    """With byte fallback, a character missing from the vocabulary becomes the bytes of its
    prefixed / suffixed form (`@@x_`), each one byte long, so the word's later tokens run past
    its end (fuzz sweep seed 1052). Such a token keeps offsets within its word, unshifted, and
    an end past the text is clamped by the reference's byte-to-char rule, for ASCII text too."""
    from tokenizers import pre_tokenizers as P

    vocab = {f"<0x{b:02X}>": b for b in range(256)}
    for t in ["a", "b", "@@a", "@@b", "a_", "@@b_", "ab", "@@ab", "ab_", "@@ab_", "@@c", "@@abc"]:
        vocab[t] = len(vocab)
    merges = [("a", "@@b"), ("@@a", "@@b"), ("a", "@@b_"), ("@@a", "@@b_"), ("@@ab", "@@c")]
    ref = tokenizers.Tokenizer(
        M.BPE(
            vocab,
            merges,
            continuing_subword_prefix="@@",
            end_of_word_suffix="_",
            byte_fallback=True,
        )
    )
    if pre:
        ref.pre_tokenizer = getattr(P, pre)()
    ref.add_tokens([AddedToken("<x>", normalized=False)])
    ours = piecework.Tokenizer.from_str(ref.to_str())
    texts = [
        "axabc",
        "xab",
        "abxyabq",
        "a b xqab",
        "ab<x>cxabz",
        "é<x>xéab",
        "<x>bzabé",
        "ab xé zab",
    ]
    texts += ["ax", "abxy", "a b xq", "ab<x>cd", "é<x>xé", "<x>bz", "ab xé z", "zz<x>"]
    texts += ["axabcd", "zxxabcde", "é xabcd"]
    clamped = 0
    for text in texts:
        (a, a_raised), (b, b_raised) = _both(ref, ours, text)
        assert (a_raised, a) == (b_raised, b), text
        # the case the clamp is about: a token that starts inside the text, runs past its
        # end, and comes out shorter than it is
        e = ref.encode(text)
        clamped += any(
            s < len(text) <= end and len(tok.removeprefix("@@")) > end - s
            for tok, (s, end) in zip(e.tokens, e.offsets)
        )
    assert clamped, "no token was clamped at the end of its text: the test lost its point"
