"""The T5-style ids path (Precompiled + WhitespaceSplit + Metaspace + Unigram) against
`tokenizers` on generated text: characters of the scripts whose clusters the Precompiled walk
takes without the segmenter (and the marks, jamo and prepend characters next to them that
must still take it), code-like punctuation runs, long words with and without unknown
characters, all through `encode_ids` (ids path, word caches) and `encode` (token path), in
both orders, so cache entries made by one path serve the other."""

from __future__ import annotations

import random

import piecework
import pytest
import tokenizers
from oracle import DATA_DIR as DATA

FILES = [
    "t5-small/tokenizer.json",
    "rut5-large/tokenizer.json",
    "xlnet-base-cased/tokenizer.json",
    "pegasus/tokenizer.json",
]

# Ranges the walk treats as clusters of their own, with neighbours on both sides, plus what
# joins clusters: combining marks, Hebrew points, Thai vowel signs and sara am, Devanagari
# signs and virama, Hangul jamo, Arabic prepend and superscript alef, ZWJ, variation
# selectors, halfwidth voiced marks, regional indicators.
SPANS = [
    (0xBF, 0x2B0),
    (0x300, 0x36F),
    (0x370, 0x3FF),
    (0x400, 0x530),
    (0x590, 0x5F5),
    (0x600, 0x6DE),
    (0x900, 0x980),
    (0xE00, 0xE5C),
    (0x1100, 0x11FF),
    (0x1E00, 0x1FFF),
    (0x2000, 0x2070),
    (0x3000, 0x3100),
    (0x3400, 0x3420),
    (0x4E00, 0x4E40),
    (0xAC00, 0xAC40),
    (0xD790, 0xD7B0),
    (0xFF00, 0xFFA0),
]
EXTRA = "\u200d\ufe0f\u2581 \t\n\u3000\u00a0\U0001f1e6\U0001f1e8\U0001f600\ufb2a"


def _alphabet(rng: random.Random) -> list[str]:
    chars = [chr(c) for lo, hi in SPANS for c in range(lo, hi + 1)]
    return rng.sample(chars, 60) + list(EXTRA) + list("aZ0 .,()_=-")


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        alphabet = _alphabet(rng)
        k = i % 4
        if k == 0:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40)))
        elif k == 1:
            # Words of one script with spaces, as real text has them.
            lo, hi = rng.choice(SPANS)
            words = [
                "".join(chr(rng.randrange(lo, hi + 1)) for _ in range(rng.randrange(1, 9)))
                for _ in range(rng.randrange(1, 8))
            ]
            text = " ".join(words)
        elif k == 2:
            # Code-like: punctuation-heavy words, some longer than the short-word cache.
            parts = ["self", ".", "_", "(", ")", "x", "==", "[", "]", ",", "'a'", "0x1F", ":"]
            text = " ".join(
                "".join(rng.choice(parts) for _ in range(rng.randrange(1, 12)))
                for _ in range(rng.randrange(1, 6))
            )
        else:
            # Long words of random letters, with an unknown character now and then.
            text = "".join(
                rng.choice("abcdefghijklmnopqrstuvwxyz" + "\U0001d538\u0e01")
                for _ in range(rng.choice([17, 40, 255, 256, 300, 1000]))
            )
        out.append(text)
    return out


@pytest.mark.parametrize("name", FILES)
def test_generated_text_matches_tokenizers(name: str) -> None:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_padding()
    ref.no_truncation()
    ours = piecework.Tokenizer.from_file(str(path))
    ours.no_padding()
    ours.no_truncation()
    texts = _texts(0x75F5 + len(name), 1200)
    for i, text in enumerate(texts):
        want = ref.encode(text, add_special_tokens=False)
        # Alternate which path sees the text first.
        if i % 2:
            assert ours.encode_ids(text, add_special_tokens=False) == want.ids, repr(text)
            enc = ours.encode(text, add_special_tokens=False)
        else:
            enc = ours.encode(text, add_special_tokens=False)
            assert enc.tokens == want.tokens, repr(text)
            assert ours.encode_ids(text, add_special_tokens=False) == want.ids, repr(text)
        assert enc.ids == want.ids, repr(text)
        assert enc.tokens == want.tokens, repr(text)
        assert enc.offsets == want.offsets, repr(text)
    # Again, every word now cached.
    for text in texts[:300]:
        assert (
            ours.encode_ids(text, add_special_tokens=False)
            == ref.encode(text, add_special_tokens=False).ids
        ), repr(text)


def test_every_bmp_code_point_matches_tokenizers() -> None:
    """Every BMP code point (but surrogates) through T5's Precompiled walk, 24 per text,
    next to its neighbours, letters and spaces (so runs of plain characters end at every
    kind of follower)."""
    path = DATA / "t5-small/tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = piecework.Tokenizer.from_file(str(path))
    cps = [c for c in range(0x80, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    texts = []
    for sep in (("x", " ", ""), ("", "", " ")):
        for i in range(0, len(cps), 24):
            chunk = cps[i : i + 24]
            texts.append("".join(chr(c) + sep[j % 3] for j, c in enumerate(chunk)))
    for text in texts:
        want = ref.encode(text, add_special_tokens=False)
        assert ours.encode_ids(text, add_special_tokens=False) == want.ids, repr(text)
        got = ours.encode(text, add_special_tokens=False)
        assert (got.tokens, got.offsets) == (want.tokens, want.offsets), repr(text)
