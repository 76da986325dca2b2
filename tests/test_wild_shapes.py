"""Pipeline shapes of real tokenizer.json files found in public repositories (session 19's
harvest), none of which ../shared/data holds, rebuilt with the tokenizers 0.22.1 API and
trained by its own trainers on the shared corpora; each is compared with the oracle by the
fuzz's `differences` (encodings with pairs, truncation, padding, batches, decoding).

The harvested files themselves stay outside the repository (licences): these tests need only
../shared (for the training corpus) and skip cleanly without it. Each shape names the kind of
file it mirrors:

- `code_bpe`: a code model's BPE with a regex-heavy normalizer (CRLF, control characters,
  space runs, line-start and line-end anchors) and a pre-tokenizer sequence of Splits (lazy
  string literals, comments, URLs, numbers, operators, emoji ZWJ sequences, identifiers),
  Punctuation and UnicodeScripts before a regex-free ByteLevel;
- `french_wordpiece`: a WordPiece model behind Splits with `\\b`, `(?i:)` elisions, `^ $`
  removed, a `\\p{Z}` / `\\p{Cf}` normalizer and a RoBERTa post-processor;
- `byte_level_wordpiece`: WordPiece over ByteLevel (with a prefix space) and individual
  digits, with the ByteLevel post-processor and decoder;
- `casing_split_bpe`: a Prepend / NFC / newline-rewriting normalizer, a letter-casing Split
  regex then a regex-free ByteLevel, and a ByteLevel + Strip + Replace decoder;
- `herbert_bpe`: BERT normalization and pre-tokenization in front of a BPE model with an
  end-of-word suffix and the BPE decoder;
- `albert_unigram`: the ALBERT normalizer chain (quote Replaces, NFKD, StripAccents,
  Lowercase) with WhitespaceSplit + Metaspace and a Unigram model.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

tokenizers = pytest.importorskip("tokenizers")
import fuzz_pipelines_lib as F
from oracle import DATA_DIR
from tokenizers import AddedToken, Regex
from tokenizers import decoders as D
from tokenizers import models as M
from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P
from tokenizers import processors as PP
from tokenizers import trainers as T

SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<mask>"]

CODE = [
    'def f(x):\n    """Doc string."""\n    return x ** 2  # square\n',
    'int main() { printf("%d\\n", a >= b && c != d); /* done */ }\r\n',
    "const url = 'https://example.com/a?b=1'; let n = 3.14e-10 + 0x1F;\n\n\n\nx++;",
    "  \tindented\t  \n\t\tif (a === b || c !== d) => { return a ?? b; }   \n",
    "emoji 👩\u200d💻 and 🏳️\u200d🌈 in a // comment\n",
    "fn main() -> Result<(), E> { let v: Vec<u8> = vec![1_000, 2]; Ok(()) }",
]


@pytest.fixture(scope="module")
def lines() -> tuple[list[str], list[str]]:
    """(training lines, extra text lines), from the shared corpora, plus some code."""
    train, extra = F.shared_lines(DATA_DIR)
    return train + CODE * 5, extra + CODE


def _bpe_trainer(**kw) -> T.BpeTrainer:
    return T.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, show_progress=False, **kw)


def code_bpe() -> tuple[tokenizers.Tokenizer, Any]:
    tok = tokenizers.Tokenizer(M.BPE(unk_token=None))
    tok.normalizer = N.Sequence(
        [
            N.NFC(),
            N.Replace(Regex(r"\r\n?"), "\n"),
            N.Replace(Regex(r"[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]"), ""),
            N.Replace(Regex(r"[\u3000\u00A0\u2007\u202F]"), " "),
            N.Replace(Regex(r"[ ]{2,}"), " "),
            N.Replace(Regex(r"\n{3,}"), "\n\n"),
            N.Replace(Regex(r"^[ \t]+"), ""),
            N.Replace(Regex(r"[ \t]+$"), ""),
        ]
    )
    tok.pre_tokenizer = P.Sequence(
        [
            P.Split(Regex(r"""([rubf]*(['"]{3}.*?['"]{3}|['"].*?['"]))"""), "isolated"),
            P.Split(Regex(r"(#.*|//.*|/\*[\s\S]*?\*/)"), "isolated"),
            P.Split(Regex(r"https?://[^\s]+"), "isolated"),
            P.Split(Regex(r"\d+([._]\d+)*([eE][+-]?\d+)?"), "isolated"),
            P.Split(Regex(r"(===|!==|==|!=|<=|>=|\+\+|--|&&|\|\||->|=>|::|\?\?|\.?)"), "isolated"),
            P.Punctuation("isolated"),
            P.Split(
                Regex(r"(\p{Extended_Pictographic}(?:\u200D\p{Extended_Pictographic})*)"),
                "isolated",
            ),
            P.Split(Regex(r"[\p{L}_][\p{L}\p{N}_]*"), "isolated"),
            P.UnicodeScripts(),
            P.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = D.ByteLevel()
    return tok, _bpe_trainer(initial_alphabet=P.ByteLevel.alphabet())


def french_wordpiece() -> tuple[tokenizers.Tokenizer, Any]:
    tok = tokenizers.Tokenizer(M.WordPiece(unk_token="<unk>"))
    tok.normalizer = N.Sequence(
        [
            N.Replace(Regex(r"\p{Z}"), " "),
            N.Replace(Regex(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\p{Cf}|\p{Co}|[\uFE0F]"), ""),
        ]
    )
    elision = (
        r"(?i:\b[cmnjstdl]|qu|puisqu|lorsqu|quelqu|presqu|quoiqu|jusqu)['´’]"
        r"|['´’](?i:[sdmt]|ll|ve|re)\b|\p{P}{1,4}|[^\p{L}\p{N}\p{Z}]"
    )
    tok.pre_tokenizer = P.Sequence(
        [
            P.Split(Regex(r"[ ]{1,4}"), "isolated"),
            P.Split(Regex(r"^ $"), "removed"),
            P.Split(Regex(elision), "isolated"),
        ]
    )
    tok.decoder = D.WordPiece()
    return tok, T.WordPieceTrainer(vocab_size=600, special_tokens=SPECIALS, show_progress=False)


def byte_level_wordpiece() -> tuple[tokenizers.Tokenizer, Any]:
    tok = tokenizers.Tokenizer(M.WordPiece(unk_token="<unk>"))
    tok.pre_tokenizer = P.Sequence(
        [P.ByteLevel(add_prefix_space=True), P.Digits(individual_digits=True)]
    )
    tok.decoder = D.ByteLevel()
    trainer = T.WordPieceTrainer(
        vocab_size=600,
        special_tokens=SPECIALS,
        initial_alphabet=P.ByteLevel.alphabet(),
        show_progress=False,
    )
    return tok, trainer


def casing_split_bpe() -> tuple[tokenizers.Tokenizer, Any]:
    tok = tokenizers.Tokenizer(M.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = N.Sequence(
        [
            N.Prepend(" "),
            N.NFC(),
            N.Replace(Regex("\n"), "\n "),
            N.Replace(Regex(" *\n"), "\n"),
        ]
    )
    casing = (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        r"| ?\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    tok.pre_tokenizer = P.Sequence(
        [
            P.Split(Regex(casing), "isolated"),
            P.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = D.Sequence([D.ByteLevel(), D.Strip(" ", 1, 0), D.Replace("\n ", "\n")])
    return tok, _bpe_trainer(initial_alphabet=P.ByteLevel.alphabet())


def herbert_bpe() -> tuple[tokenizers.Tokenizer, Any]:
    tok = tokenizers.Tokenizer(M.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = N.BertNormalizer(lowercase=False, strip_accents=False)
    tok.pre_tokenizer = P.BertPreTokenizer()
    tok.decoder = D.BPEDecoder(suffix="</w>")
    return tok, _bpe_trainer(end_of_word_suffix="</w>")


def albert_unigram() -> tuple[tokenizers.Tokenizer, Any]:
    tok = tokenizers.Tokenizer(M.Unigram())
    tok.normalizer = N.Sequence(
        [
            N.Replace("``", '"'),
            N.Replace("''", '"'),
            N.NFKD(),
            N.StripAccents(),
            N.Lowercase(),
            N.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = P.Sequence([P.WhitespaceSplit(), P.Metaspace()])
    tok.decoder = D.Metaspace()
    trainer = T.UnigramTrainer(
        vocab_size=3000, special_tokens=SPECIALS, unk_token="<unk>", show_progress=False
    )
    return tok, trainer


SHAPES = {
    "code_bpe": code_bpe,
    "french_wordpiece": french_wordpiece,
    "byte_level_wordpiece": byte_level_wordpiece,
    "casing_split_bpe": casing_split_bpe,
    "herbert_bpe": herbert_bpe,
    "albert_unigram": albert_unigram,
}

# The post-processor each mirrored file has (after training, when the ids are known).
POST = {
    "code_bpe": "template",
    "french_wordpiece": "roberta",
    "byte_level_wordpiece": "byte_level",
    "casing_split_bpe": "template",
    "herbert_bpe": None,
    "albert_unigram": "template",
}


def _post(kind: str | None, tok: tokenizers.Tokenizer) -> Any:
    if kind is None:
        return None
    if kind == "byte_level":
        return PP.ByteLevel(trim_offsets=True)
    s, e = ("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))
    if kind == "roberta":
        return PP.RobertaProcessing(e, s, trim_offsets=True, add_prefix_space=False)
    return PP.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[s, e]
    )


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_wild_shape_matches_tokenizers(name: str, lines) -> None:
    train, extra = lines
    tok, trainer = SHAPES[name]()
    tok.train_from_iterator(train, trainer)
    tok.post_processor = _post(POST[name], tok)
    # Added tokens as the mirrored files have them: specials, and plain ones with flags.
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True, normalized=False)])
    tok.add_tokens([AddedToken("<tab>", single_word=True), AddedToken(" if", lstrip=True)])
    data = tok.to_str()
    rng = random.Random(sum(map(ord, name)))
    texts = F.random_texts(rng, 60, extra) + F.long_texts(rng, extra) + CODE
    texts += ["\n".join(rng.sample(extra, 3)) for _ in range(10)]
    bad = F.differences(data, texts, rng)
    shown = "\n".join(repr(b)[:800] for b in bad[:4])
    assert not bad, f"{len(bad)} differences for {name}:\n{shown}"
