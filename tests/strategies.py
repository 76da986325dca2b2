"""Hypothesis strategies for text that exercises Unicode corners: every kind of whitespace,
control and format characters, combining marks, astral characters, CJK, Hangul, emoji ZWJ
sequences, and plain words around them.

    from strategies import corner_text, corner_words
"""

from __future__ import annotations

from hypothesis import strategies as st

# Every whitespace a normalizer or pre-tokenizer may treat differently.
WHITESPACE = [
    " ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\x0b",  # vertical tab
    "\x0c",  # form feed
    "\x1c",  # information separators: not Unicode White_Space, yet str.isspace() is True
    "\x1f",
    "\x85",  # NEL
    "\xa0",  # NBSP
    "\u1680",
    "\u2000",
    "\u2007",  # figure space (no-break)
    "\u200a",
    "\u2028",  # line separator
    "\u2029",  # paragraph separator
    "\u202f",  # narrow NBSP
    "\u205f",
    "\u3000",  # ideographic space
    "\u200b",  # ZWSP: not White_Space
    "\ufeff",  # BOM / ZWNBSP
    "\u180e",  # Mongolian vowel separator (was Zs)
    "  ",
    " \t ",
]

CONTROL = [
    "\x00",
    "\x01",
    "\x07",
    "\x1b",
    "\x7f",
    "\x80",
    "\x9f",
    "\xad",  # soft hyphen (Cf)
    "\u200c",  # ZWNJ
    "\u200d",  # ZWJ
    "\u200e",  # LRM
    "\u2060",  # word joiner
    "\u2066",
    "\ufff9",
    "\ufffd",  # replacement character
    "\U000e0001",  # language tag
    "\U000e0061",  # tag letter a
]

COMBINING = [
    "\u0301",
    "\u0308",
    "\u0327",
    "\u0345",  # iota subscript: changes under case folding
    "\u05b4",  # Hebrew point
    "\u0903",  # Devanagari sign (Mc)
    "\u20dd",  # enclosing circle (Me)
    "\u1ab0",
    "\ufe0f",  # variation selector 16
    "\U000e0100",  # variation selector 17 (astral)
]

FRAGMENTS = [
    # ASCII words and punctuation
    "hello",
    "Hello",
    "WORLD",
    "don't",
    "U.S.A.",
    "co-operate",
    "3.14",
    "1,000",
    "$5",
    "e-mail@example.com",
    "...",
    "!?",
    "(",
    ")",
    "[CLS]",
    "[SEP]",
    "[UNK]",
    "[PAD]",
    "[MASK]",
    "<s>",
    "</s>",
    "<unk>",
    "##ing",
    "\u2581word",  # ▁ (metaspace)
    # Latin with diacritics, precomposed and decomposed, case oddities
    "café",
    "cafe\u0301",
    "naïve",
    "Ångström",
    "A\u030angstro\u0308m",
    "straße",
    "İstanbul",
    "ǅ",
    "ﬁ",
    "Ⅻ",
    "①",
    "½",
    "µ",
    "ΣΑΣ",
    "ς",
    # other scripts
    "Привет",
    "مرحبا",
    "שָׁלוֹם",
    "नमस्ते",
    "สวัสดี",
    "Ελληνικά",
    # CJK, kana, halfwidth, Hangul (precomposed and conjoining jamo)
    "中文",
    "日本語",
    "の",
    "カタカナ",
    "ｶﾀｶﾅ",
    "ﾃﾞ",
    "\u3099",
    "한국어",
    "\u1100\u1161\u11a8",
    "㈜",
    # astral: math letters, CJK extension B, emoji with modifiers, ZWJ, flags, tags
    "𝔸",
    "𝐀𝐁",
    "𠀀",
    "\U0002a6d6",
    "😀",
    "👍🏽",
    "🤷🏽\u200d♀️",
    "👨\u200d👩\u200d👧\u200d👦",
    "🇫🇷",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
    "\U0010fffd",
    "\U0001f3fb",
]

_any_char = st.characters(codec="utf-8")  # any scalar value (no lone surrogates)

corner_fragment = st.one_of(
    st.sampled_from(FRAGMENTS),
    st.sampled_from(WHITESPACE),
    st.sampled_from(CONTROL),
    st.sampled_from(COMBINING),
    st.text(_any_char, min_size=1, max_size=4),
)

#: Text made of corner fragments (may be empty, may be only whitespace).
corner_text = st.lists(corner_fragment, max_size=16).map("".join)

#: A non-empty piece of corner text.
corner_text_nonempty = st.lists(corner_fragment, min_size=1, max_size=16).map("".join)

#: A list of words for `is_pretokenized=True` (each word may itself contain anything).
corner_words = st.lists(corner_text_nonempty, min_size=0, max_size=6)

#: A single Unicode scalar value, biased toward the corner cases.
corner_char = st.one_of(
    st.sampled_from([c for c in WHITESPACE + CONTROL + COMBINING if len(c) == 1]),
    _any_char,
)
