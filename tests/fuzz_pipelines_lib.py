"""Random tokenizer.json pipelines built with the tokenizers 0.22.1 API, for the differential
fuzz (test_fuzz_pipelines.py).

`random_pipeline(rng, corpus)` composes a normalizer, a pre-tokenizer, a model trained on the
corpus by tokenizers' own trainer, a post-processor, a decoder and added tokens, and returns the
tokenizer's `to_str()`. `differences(json, texts, rng)` loads it in both libraries and returns
every observable difference (encodings field by field with pairs, truncation, padding,
batches, decoding, and whether a call raises).
"""

from __future__ import annotations

import json
import random
from typing import Any

import piecework
import tokenizers
from oracle import ENCODING_FIELDS
from strategies import COMBINING, CONTROL, FRAGMENTS, WHITESPACE
from tokenizers import AddedToken, Regex
from tokenizers import decoders as D
from tokenizers import models as M
from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P
from tokenizers import processors as PP
from tokenizers import trainers as T

SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "<s>", "</s>", "<unk>", "<pad>"]
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
PRECOMPILED: list[bytes] = []  # charsmaps of sentencepiece models, filled by the test module


def _pick(rng: random.Random, items: list) -> Any:
    return items[rng.randrange(len(items))]


def random_normalizer(rng: random.Random, depth: int = 0) -> Any:
    kinds = [
        "NFC",
        "NFD",
        "NFKC",
        "NFKD",
        "Lowercase",
        "Strip",
        "StripAccents",
        "ReplaceStr",
        "ReplaceRegex",
        "Prepend",
        "Bert",
        "Nmt",
        "ByteLevel",
    ]
    if PRECOMPILED:
        kinds.append("Precompiled")
    if depth == 0:
        kinds += ["Sequence", "Sequence"]
    k = _pick(rng, kinds)
    if k == "NFC":
        return N.NFC()
    if k == "NFD":
        return N.NFD()
    if k == "NFKC":
        return N.NFKC()
    if k == "NFKD":
        return N.NFKD()
    if k == "Lowercase":
        return N.Lowercase()
    if k == "Strip":
        return N.Strip(left=rng.random() < 0.5, right=rng.random() < 0.5)
    if k == "StripAccents":
        return N.StripAccents()
    if k == "ReplaceStr":
        pat = _pick(rng, [" ", "a", "th", "é", "  ", "\n", ".", "▁"])
        return N.Replace(pat, _pick(rng, ["", "▁", "X", "  ", "ab", " "]))
    if k == "ReplaceRegex":
        pat = _pick(rng, [r"\s+", r"[aeiou]", r"\d", r"(.)\1", r"^", r"$", r"\p{P}", r"x*", r" ?"])
        return N.Replace(Regex(pat), _pick(rng, ["", "▁", "X", " ", "<>"]))
    if k == "Prepend":
        return N.Prepend(_pick(rng, ["▁", "_", " ", "ab"]))
    if k == "Bert":
        return N.BertNormalizer(
            clean_text=rng.random() < 0.7,
            handle_chinese_chars=rng.random() < 0.7,
            strip_accents=_pick(rng, [None, True, False]),
            lowercase=rng.random() < 0.6,
        )
    if k == "Nmt":
        return N.Nmt()
    if k == "ByteLevel":
        return N.ByteLevel()
    if k == "Precompiled":
        return N.Precompiled(_pick(rng, PRECOMPILED))
    return N.Sequence([random_normalizer(rng, depth + 1) for _ in range(rng.randint(0, 3))])


def random_pre_tokenizer(rng: random.Random, depth: int = 0) -> Any:
    kinds = [
        "Whitespace",
        "WhitespaceSplit",
        "Bert",
        "Metaspace",
        "ByteLevel",
        "Split",
        "Punctuation",
        "Digits",
        "UnicodeScripts",
        "CharDelimiterSplit",
        "FixedLength",
    ]
    if depth == 0:
        kinds += ["Sequence", "Sequence"]
    k = _pick(rng, kinds)
    if k == "Whitespace":
        return P.Whitespace()
    if k == "WhitespaceSplit":
        return P.WhitespaceSplit()
    if k == "Bert":
        return P.BertPreTokenizer()
    if k == "Metaspace":
        return P.Metaspace(
            replacement=_pick(rng, ["▁", "_"]),
            prepend_scheme=_pick(rng, ["always", "never", "first"]),
            split=rng.random() < 0.5,
        )
    if k == "ByteLevel":
        return P.ByteLevel(
            add_prefix_space=rng.random() < 0.5,
            use_regex=rng.random() < 0.7,
            trim_offsets=rng.random() < 0.5,
        )
    if k == "Split":
        pat = _pick(rng, [" ", "a", "ab", "▁", "\n"])
        if rng.random() < 0.6:
            pat = Regex(_pick(rng, [r"\s+", r"\w+", r"\d", r"[aeiou]+", r"\p{L}+", r"x*", r"."]))
        return P.Split(pat, behavior=_pick(rng, BEHAVIORS), invert=rng.random() < 0.3)
    if k == "Punctuation":
        return P.Punctuation(behavior=_pick(rng, BEHAVIORS))
    if k == "Digits":
        return P.Digits(individual_digits=rng.random() < 0.5)
    if k == "UnicodeScripts":
        return P.UnicodeScripts()
    if k == "CharDelimiterSplit":
        return P.CharDelimiterSplit(_pick(rng, [" ", "a", "▁", "-", "é"]))
    if k == "FixedLength":
        return P.FixedLength(length=rng.randint(1, 6))
    return P.Sequence([random_pre_tokenizer(rng, depth + 1) for _ in range(rng.randint(0, 3))])


def random_decoder(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["BPE", "ByteFallback", "ByteLevel", "CTC", "Fuse", "Metaspace", "Replace", "Strip"]
    kinds += ["WordPiece"]
    if depth == 0:
        kinds += ["Sequence", "Sequence", "None"]
    k = _pick(rng, kinds)
    if k == "BPE":
        return D.BPEDecoder(suffix=_pick(rng, ["</w>", "", "a"]))
    if k == "ByteFallback":
        return D.ByteFallback()
    if k == "ByteLevel":
        return D.ByteLevel()
    if k == "CTC":
        return D.CTC(
            pad_token=_pick(rng, ["<pad>", "[PAD]", "a"]),
            word_delimiter_token=_pick(rng, ["|", "▁", " "]),
            cleanup=rng.random() < 0.5,
        )
    if k == "Fuse":
        return D.Fuse()
    if k == "Metaspace":
        return D.Metaspace(
            replacement=_pick(rng, ["▁", "_"]),
            prepend_scheme=_pick(rng, ["always", "never", "first"]),
            split=rng.random() < 0.5,
        )
    if k == "Replace":
        return D.Replace(_pick(rng, ["▁", " ", "a"]), _pick(rng, [" ", "", "▁"]))
    if k == "Strip":
        return D.Strip(
            content=_pick(rng, [" ", "▁", "a"]), left=rng.randint(0, 2), right=rng.randint(0, 2)
        )
    if k == "WordPiece":
        return D.WordPiece(prefix=_pick(rng, ["##", "@@", ""]), cleanup=rng.random() < 0.5)
    if k == "None":
        return None
    return D.Sequence([random_decoder(rng, depth + 1) for _ in range(rng.randint(1, 3))])


def random_post_processor(rng: random.Random, tok: tokenizers.Tokenizer) -> Any:
    def tid(t: str) -> int:
        i = tok.token_to_id(t)
        return 0 if i is None else i

    k = _pick(rng, ["Template", "Template", "Bert", "Roberta", "ByteLevel", "Sequence", "None"])
    if k == "Template":
        single = _pick(rng, ["[CLS] $A [SEP]", "$A", "<s> $A:1 </s>:1", "$A [SEP]", "[CLS] $0"])
        pair = _pick(
            rng,
            [
                "[CLS] $A [SEP] $B:1 [SEP]:1",
                "$A $B",
                "<s> $A </s> </s> $B:1 </s>:1",
                "$B:1 [SEP] $A",
                None,
            ],
        )
        used = {w.split(":")[0] for w in f"{single} {pair or ''}".split() if not w.startswith("$")}
        kwargs = {"single": single, "special_tokens": [(t, tid(t)) for t in sorted(used)]}
        if pair is not None:
            kwargs["pair"] = pair
        return PP.TemplateProcessing(**kwargs)
    if k == "Bert":
        return PP.BertProcessing(("[SEP]", tid("[SEP]")), ("[CLS]", tid("[CLS]")))
    if k == "Roberta":
        return PP.RobertaProcessing(
            ("</s>", tid("</s>")),
            ("<s>", tid("<s>")),
            trim_offsets=rng.random() < 0.5,
            add_prefix_space=rng.random() < 0.5,
        )
    if k == "ByteLevel":
        return PP.ByteLevel(trim_offsets=rng.random() < 0.5)
    if k == "Sequence":
        return PP.Sequence(
            [
                PP.ByteLevel(trim_offsets=rng.random() < 0.5),
                PP.TemplateProcessing(
                    single="[CLS] $A [SEP]",
                    pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                    special_tokens=[("[CLS]", tid("[CLS]")), ("[SEP]", tid("[SEP]"))],
                ),
            ]
        )
    return None


def _train(rng: random.Random, corpus: list[str], tok: tokenizers.Tokenizer, model: str) -> None:
    vocab_size = _pick(rng, [60, 150, 300, 600, 1200])
    specials = SPECIALS[:]
    uses_byte_level = '"ByteLevel"' in tok.to_str()
    if model == "BPE":
        kwargs: dict[str, Any] = {"vocab_size": vocab_size, "special_tokens": specials}
        if rng.random() < 0.3:
            kwargs["continuing_subword_prefix"] = _pick(rng, ["##", "@@"])
        if rng.random() < 0.3:
            kwargs["end_of_word_suffix"] = _pick(rng, ["</w>", "_"])
        if uses_byte_level and rng.random() < 0.7:
            kwargs["initial_alphabet"] = P.ByteLevel.alphabet()
        if rng.random() < 0.3:
            kwargs["limit_alphabet"] = rng.randint(10, 60)
        trainer = T.BpeTrainer(show_progress=False, **kwargs)
    elif model == "WordPiece":
        trainer = T.WordPieceTrainer(
            vocab_size=vocab_size,
            special_tokens=specials,
            show_progress=False,
            continuing_subword_prefix=_pick(rng, ["##", "##", "@@", ""]),
        )
    elif model == "WordLevel":
        trainer = T.WordLevelTrainer(
            vocab_size=vocab_size, special_tokens=specials, show_progress=False
        )
    else:
        trainer = T.UnigramTrainer(
            vocab_size=max(vocab_size, 100),
            special_tokens=specials,
            unk_token=_pick(rng, ["<unk>", "[UNK]", None]),
            show_progress=False,
        )
    tok.train_from_iterator(corpus, trainer)


def _model(rng: random.Random, name: str) -> Any:
    if name == "BPE":
        return M.BPE(unk_token=_pick(rng, ["[UNK]", "<unk>", None]))
    if name == "WordPiece":
        return M.WordPiece(unk_token="[UNK]", max_input_chars_per_word=_pick(rng, [100, 100, 5]))
    if name == "WordLevel":
        return M.WordLevel(unk_token=_pick(rng, ["[UNK]", "<unk>"]))
    return M.Unigram()


def _edit_model(rng: random.Random, data: dict) -> None:
    """Options the trainers do not set, written into the model's JSON."""
    m = data["model"]
    if m["type"] == "BPE":
        m["fuse_unk"] = rng.random() < 0.4
        m["ignore_merges"] = rng.random() < 0.3
        if rng.random() < 0.35:
            m["byte_fallback"] = True
            vocab = m["vocab"]
            if rng.random() < 0.8:
                nxt = max(vocab.values(), default=-1) + 1
                for b in range(256):
                    vocab.setdefault(f"<0x{b:02X}>", nxt + b)
    elif m["type"] == "Unigram" and rng.random() < 0.3:
        m["byte_fallback"] = True
        if rng.random() < 0.8:
            have = {p for p, _ in m["vocab"]}
            m["vocab"] += [
                [f"<0x{b:02X}>", -20.0] for b in range(256) if f"<0x{b:02X}>" not in have
            ]


def _added_tokens(rng: random.Random, tok: tokenizers.Tokenizer) -> None:
    pool = ["<mask>", "[NEW]", "hello", "the", "ab", " x ", "é", "▁", "中", "<|end|>", "1 2", "  "]
    toks = []
    for content in rng.sample(pool, rng.randint(0, 5)):
        toks.append(
            AddedToken(
                content,
                single_word=rng.random() < 0.3,
                lstrip=rng.random() < 0.3,
                rstrip=rng.random() < 0.3,
                normalized=rng.random() < 0.5,
                special=rng.random() < 0.4,
            )
        )
    if toks:
        tok.add_tokens(toks)
    if rng.random() < 0.5:
        tok.add_special_tokens([AddedToken("[MASK]", lstrip=rng.random() < 0.5)])


class TrainingFailed(Exception):
    """tokenizers' trainer refused (or panicked on) the drawn configuration."""


def _file_settings(rng: random.Random, tok: tokenizers.Tokenizer) -> None:
    """Truncation and padding stored in the file itself, sometimes."""
    if rng.random() < 0.2:
        try:
            tok.enable_truncation(
                max_length=rng.randint(2, 12),
                stride=rng.randint(0, 1),
                strategy=_pick(rng, ["longest_first", "only_first"]),
                direction=_pick(rng, ["right", "left"]),
            )
        except ValueError:  # the stride does not fit beside the special tokens
            tok.no_truncation()
    if rng.random() < 0.2:
        tok.enable_padding(
            direction=_pick(rng, ["right", "left"]),
            pad_id=rng.randint(0, 3),
            pad_token=_pick(rng, ["[PAD]", "<pad>"]),
            length=_pick(rng, [None, 8]),
            pad_to_multiple_of=_pick(rng, [None, 3]),
        )


def random_pipeline(rng: random.Random, corpus: list[str]) -> str:
    """A trained tokenizer with random stages, as tokenizer.json text."""
    model = _pick(rng, ["BPE", "BPE", "WordPiece", "WordLevel", "Unigram"])
    tok = tokenizers.Tokenizer(_model(rng, model))
    if rng.random() < 0.8:
        tok.normalizer = random_normalizer(rng)
    if rng.random() < 0.9:
        tok.pre_tokenizer = random_pre_tokenizer(rng)
    try:
        _train(rng, corpus, tok, model)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise TrainingFailed(repr(e)) from None
    pp = random_post_processor(rng, tok)
    if pp is not None:
        tok.post_processor = pp
    dec = random_decoder(rng)
    if dec is not None:
        tok.decoder = dec
    _added_tokens(rng, tok)
    _file_settings(rng, tok)
    data = json.loads(tok.to_str())
    _edit_model(rng, data)
    return json.dumps(data, ensure_ascii=False)


_EXTRA = SPECIALS + ["<mask>", "[NEW]", "hello", "<|end|>", "<0x41>", "##ing", "▁", "  ", "中文"]


def random_texts(rng: random.Random, n: int, corpus: list[str]) -> list[str]:
    pools = [FRAGMENTS, WHITESPACE, CONTROL, COMBINING, _EXTRA]
    out = ["", " ", "a", "hello world", " the  end ", "[CLS] hello [SEP]", "a\ud800b"]
    while len(out) < n:
        if rng.random() < 0.3:
            out.append(_pick(rng, corpus)[:300])
            continue
        parts = []
        for _ in range(rng.randint(0, 12)):
            q = rng.random()
            if q < 0.6:
                parts.append(_pick(rng, _pick(rng, pools)))
            elif q < 0.75:
                parts.append(" " * rng.randint(1, 3))
            elif q < 0.9:
                line = _pick(rng, corpus)
                i = rng.randrange(len(line) + 1)
                parts.append(line[i : i + rng.randint(1, 25)])
            else:
                cp = rng.randint(0, 0x10FFFF)
                parts.append(chr(0xFFFD if 0xD800 <= cp < 0xE000 else cp))
        out.append("".join(parts))
    return out


# ------------------------------------------------------------------------------- comparing


def _call(f, *args, **kwargs):
    try:
        return f(*args, **kwargs), None
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        return None, f"{type(e).__name__}: {str(e)[:120]}"


def _fields(enc) -> dict:
    out = {}
    for f in ENCODING_FIELDS:
        v = getattr(enc, f)
        out[f] = [tuple(x) for x in v] if f == "offsets" else list(v) if f != "n_sequences" else v
    out["overflowing"] = [_fields(o) for o in enc.overflowing]
    return out


def _diff(a: dict, b: dict, path: str = "") -> str | None:
    for f in ENCODING_FIELDS:
        if a[f] != b[f]:
            return f"{path}{f}: theirs {a[f]!r} ours {b[f]!r}"
    if len(a["overflowing"]) != len(b["overflowing"]):
        return f"{path}overflowing count {len(a['overflowing'])} vs {len(b['overflowing'])}"
    for i, (x, y) in enumerate(zip(a["overflowing"], b["overflowing"])):
        d = _diff(x, y, f"{path}overflowing[{i}].")
        if d:
            return d
    return None


def _compare_encode(theirs, ours, what: str, *args, **kwargs) -> list[tuple]:
    a = _call(theirs.encode, *args, **kwargs)
    b = _call(ours.encode, *args, **kwargs)
    if a[1] or b[1]:
        if bool(a[1]) != bool(b[1]) or (b[1] or "").startswith("PanicException"):
            return [(what, args, "raises", a[1], b[1])]
        return []
    d = _diff(_fields(a[0]), _fields(b[0]))
    return [(what, args, d)] if d else []


def _configure(tok, trunc, pad) -> None:
    if trunc:
        tok.enable_truncation(**trunc)
    else:
        tok.no_truncation()
    if pad:
        tok.enable_padding(**pad)
    else:
        tok.no_padding()


def differences(data: str, texts: list[str], rng: random.Random) -> list[tuple]:
    theirs = tokenizers.Tokenizer.from_str(data)
    got = _call(piecework.Tokenizer.from_str, data)
    if got[1]:
        return [("load", got[1])]
    ours = got[0]
    # the ids-only entry points never pad: their oracle is the file without its padding
    unpadded = tokenizers.Tokenizer.from_str(data)
    unpadded.no_padding()
    bad: list[tuple] = []
    if theirs.get_vocab_size() != ours.get_vocab_size():
        bad.append(("vocab size", theirs.get_vocab_size(), ours.get_vocab_size()))
    if theirs.get_vocab() != ours.get_vocab():
        bad.append(("get_vocab",))
    for attr in ("padding", "truncation"):
        if getattr(theirs, attr) != getattr(ours, attr):
            bad.append((attr, getattr(theirs, attr), getattr(ours, attr)))
    for t in texts:
        for special in (True, False):
            bad += _compare_encode(theirs, ours, "single", t, add_special_tokens=special)
            a = _call(lambda t=t, s=special: unpadded.encode(t, add_special_tokens=s).ids)
            b = _call(ours.encode_ids, t, special)
            if a != b and not (a[1] and b[1]):
                bad.append(("encode_ids", t, special, a, b))
        pair = _pick(rng, texts)
        bad += _compare_encode(theirs, ours, "pair", t, pair)
        enc = _call(theirs.encode, t, pair)
        if enc[1]:
            continue
        ids = enc[0].ids
        for skip in (True, False):
            a, b = (
                _call(theirs.decode, ids, skip_special_tokens=skip),
                _call(ours.decode, ids, skip),
            )
            if a != b and not (a[1] and b[1]):
                bad.append(("decode", t, pair, skip, a, b))
        if len(bad) > 20:
            return bad
    # the ids-only batch entry points
    plain = [t for t in texts if "\ud800" not in t]
    want_all = _call(lambda: [e.ids for e in unpadded.encode_batch(plain)])
    for what, f in (
        ()
        if want_all[1]
        else (
            ("encode_batch_ids", ours.encode_batch_ids),
            ("encode_batch_flat", lambda x: ours.encode_batch_flat(x).to_list()),
            ("count_tokens", lambda x: [[0] * n for n in ours.count_tokens(x)]),
        )
    ):
        got = _call(f, plain)
        want = want_all[0]
        exp = want if what != "count_tokens" else [[0] * len(w) for w in want]
        if got != (exp, None):
            bad.append((what, got[1] or "differs"))
    # pre-tokenized input, single and pair
    for _ in range(5):
        words = [_pick(rng, texts)[:20] for _ in range(rng.randint(0, 4))]
        pair = [_pick(rng, texts)[:20] for _ in range(rng.randint(0, 3))]
        bad += _compare_encode(theirs, ours, "pretokenized", words, is_pretokenized=True)
        bad += _compare_encode(theirs, ours, "pretokenized pair", words, pair, is_pretokenized=True)
    # decoding id lists no encoder gives: specials anywhere, ids out of range
    size = theirs.get_vocab_size()
    for _ in range(10):
        ids = [rng.randrange(size + 3) for _ in range(rng.randint(0, 12))]
        for skip in (True, False):
            a, b = (
                _call(theirs.decode, ids, skip_special_tokens=skip),
                _call(ours.decode, ids, skip),
            )
            if a != b and not (a[1] and b[1]):
                bad.append(("decode random", ids, skip, a, b))
        a = _call(theirs.decode_batch, [ids, ids[::-1]])
        b = _call(ours.decode_batch, [ids, ids[::-1]])
        if a != b and not (a[1] and b[1]):
            bad.append(("decode_batch random", ids, a, b))
    for i in [-1, 0, 1, size - 1, size, size + 10]:
        a, b = _call(theirs.id_to_token, i), _call(ours.id_to_token, i)
        if a != b and not (a[1] and b[1]):
            bad.append(("id_to_token", i, a, b))
    for t in ["[UNK]", "[CLS]", "<mask>", "hello", "the", "", "▁", "Ġthe", "##s"]:
        a, b = _call(theirs.token_to_id, t), _call(ours.token_to_id, t)
        if a != b:
            bad.append(("token_to_id", t, a, b))
    # truncation and padding, with pairs and batches
    for _ in range(3):
        trunc = None
        if rng.random() < 0.8:
            trunc = {
                "max_length": rng.randint(0, 12),
                "stride": rng.randint(0, 4),
                "strategy": _pick(rng, ["longest_first", "only_first", "only_second"]),
                "direction": _pick(rng, ["right", "left"]),
            }
        pad = None
        if rng.random() < 0.6:
            pad = {
                "direction": _pick(rng, ["right", "left"]),
                "pad_id": rng.randint(0, 3),
                "pad_type_id": rng.randint(0, 2),
                "pad_token": _pick(rng, ["[PAD]", "<pad>"]),
                "length": _pick(rng, [None, 5, 16]),
                "pad_to_multiple_of": _pick(rng, [None, None, 4]),
            }
        ea, eb = _call(_configure, theirs, trunc, pad), _call(_configure, ours, trunc, pad)
        if bool(ea[1]) != bool(eb[1]):
            bad.append(("configure", trunc, pad, ea, eb))
            continue
        for attr in ("padding", "truncation"):
            if getattr(theirs, attr) != getattr(ours, attr):
                bad.append((attr, trunc, pad, getattr(theirs, attr), getattr(ours, attr)))
        if ea[1]:
            continue
        sample = rng.sample(texts, min(len(texts), 8))
        for t in sample:
            bad += _compare_encode(theirs, ours, f"trunc {trunc} pad {pad}", t)
            bad += _compare_encode(theirs, ours, f"trunc {trunc} pad {pad}", t, _pick(rng, texts))
        batch = [s if rng.random() < 0.5 else (s, _pick(rng, texts)) for s in sample]
        a, b = _call(theirs.encode_batch, batch), _call(ours.encode_batch, batch)
        if bool(a[1]) != bool(b[1]):
            bad.append(("batch raises", trunc, pad, batch, a[1], b[1]))
        elif not a[1]:
            for x, y in zip(a[0], b[0]):
                d = _diff(_fields(x), _fields(y))
                if d:
                    bad.append(("batch", trunc, pad, batch, d))
                    break
        _configure(theirs, None, None)
        _configure(ours, None, None)
    return bad


# ------------------------------------------------------------------ near the fast paths
# piecework chooses exact fast paths from the configuration (BERT, byte-level BPE, Llama-style
# "▁" escaping, T5-style Precompiled + Metaspace). Real-world shapes with one or two options
# changed probe where a fast path's conditions and the general pipeline part.

_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# what piecework's from_tiktoken writes for cl100k_base (its hand-written split's trigger)
_CL100K_ONIG = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|(?>\p{N}{1,3})| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++\z|\s*[\r\n]|\s+(?!\S)|\s"
)
_CL100K_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _bert(rng: random.Random) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(
        M.WordPiece(unk_token="[UNK]", max_input_chars_per_word=_pick(rng, [100, 100, 8]))
    )
    tok.normalizer = N.BertNormalizer(
        clean_text=rng.random() < 0.8,
        handle_chinese_chars=rng.random() < 0.8,
        strip_accents=_pick(rng, [None, None, True, False]),
        lowercase=rng.random() < 0.6,
    )
    if rng.random() < 0.2:
        tok.normalizer = N.Sequence([tok.normalizer, random_normalizer(rng, 1)])
    tok.pre_tokenizer = _pick(
        rng, [P.BertPreTokenizer(), P.BertPreTokenizer(), P.Whitespace(), P.WhitespaceSplit()]
    )
    return tok


def _byte_level(rng: random.Random) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(M.BPE())
    r = rng.random()
    aps, trim = rng.random() < 0.4, rng.random() < 0.5
    if r < 0.5:
        tok.pre_tokenizer = P.ByteLevel(add_prefix_space=aps, use_regex=True, trim_offsets=trim)
    else:
        pat = _pick(rng, [_GPT2_SPLIT, _CL100K_SPLIT, _CL100K_ONIG, _CL100K_ONIG])
        tok.pre_tokenizer = P.Sequence(
            [
                P.Split(
                    Regex(pat),
                    behavior=_pick(rng, ["isolated", "isolated", "removed"]),
                    invert=False,
                ),
                P.ByteLevel(add_prefix_space=aps, use_regex=False, trim_offsets=trim),
            ]
        )
    if rng.random() < 0.2:
        tok.normalizer = _pick(rng, [N.NFC(), N.NFKC(), N.Lowercase()])
    return tok


def _llama(rng: random.Random) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(M.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if rng.random() < 0.5:
        tok.normalizer = N.Sequence([N.Prepend("▁"), N.Replace(" ", "▁")])
        if rng.random() < 0.2:
            tok.normalizer = N.Replace(" ", "▁")
    else:
        tok.pre_tokenizer = P.Metaspace(
            replacement="▁",
            prepend_scheme=_pick(rng, ["first", "always", "never"]),
            split=rng.random() < 0.3,
        )
    return tok


def _t5(rng: random.Random) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(M.Unigram())
    if PRECOMPILED and rng.random() < 0.8:
        tok.normalizer = N.Precompiled(_pick(rng, PRECOMPILED))
        if rng.random() < 0.3:
            tok.normalizer = N.Sequence([tok.normalizer, N.Replace(Regex(" {2,}"), " ")])
    metaspace = P.Metaspace(
        replacement="▁", prepend_scheme=_pick(rng, ["always", "first", "never"]), split=True
    )
    tok.pre_tokenizer = (
        P.Sequence([P.WhitespaceSplit(), metaspace]) if rng.random() < 0.7 else metaspace
    )
    return tok


def near_fast_path_pipeline(rng: random.Random, corpus: list[str]) -> str:
    kind = _pick(rng, ["bert", "byte_level", "llama", "t5"])
    tok = {"bert": _bert, "byte_level": _byte_level, "llama": _llama, "t5": _t5}[kind](rng)
    vocab_size = _pick(rng, [150, 400, 1000, 2000])
    canonical = {"bert": "WordPiece", "byte_level": "BPE", "llama": "BPE", "t5": "Unigram"}[kind]
    model = canonical
    if rng.random() < 0.35:
        # the same pipeline over another model: a fast path keyed on the pipeline alone
        model = _pick(rng, ["BPE", "WordPiece", "WordLevel", "Unigram"])
        tok.model = _model(rng, model)
    try:
        if model == "WordPiece":
            trainer = T.WordPieceTrainer(
                vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False
            )
        elif model == "WordLevel":
            trainer = T.WordLevelTrainer(
                vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False
            )
        elif model == "BPE":
            extra = {"initial_alphabet": P.ByteLevel.alphabet()} if kind == "byte_level" else {}
            trainer = T.BpeTrainer(
                vocab_size=vocab_size + (256 if extra else 0),
                special_tokens=SPECIALS,
                show_progress=False,
                **extra,
            )
        else:
            trainer = T.UnigramTrainer(
                vocab_size=max(vocab_size, 200),
                special_tokens=SPECIALS,
                unk_token="<unk>",
                show_progress=False,
            )
        tok.train_from_iterator(corpus, trainer)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise TrainingFailed(repr(e)) from None
    if kind == "bert":
        tok.post_processor = PP.BertProcessing(
            ("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]"))
        )
        tok.decoder = D.WordPiece(cleanup=rng.random() < 0.7)
    elif kind == "byte_level":
        tok.post_processor = _pick(
            rng,
            [
                PP.ByteLevel(trim_offsets=rng.random() < 0.5),
                PP.RobertaProcessing(
                    ("</s>", tok.token_to_id("</s>")),
                    ("<s>", tok.token_to_id("<s>")),
                    trim_offsets=rng.random() < 0.5,
                    add_prefix_space=rng.random() < 0.5,
                ),
            ],
        )
        tok.decoder = D.ByteLevel()
    elif kind == "llama":
        tok.post_processor = PP.TemplateProcessing(
            single="<s> $A",
            pair="<s> $A <s> $B:1",
            special_tokens=[("<s>", tok.token_to_id("<s>"))],
        )
        tok.decoder = D.Sequence(
            [D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(content=" ", left=1)]
        )
    else:
        tok.post_processor = PP.TemplateProcessing(
            single="$A </s>",
            pair="$A </s> $B </s>",
            special_tokens=[("</s>", tok.token_to_id("</s>"))],
        )
        tok.decoder = D.Metaspace(prepend_scheme=_pick(rng, ["always", "first", "never"]))
    if rng.random() < 0.6:
        _added_tokens(rng, tok)
    _file_settings(rng, tok)
    data = json.loads(tok.to_str())
    m = data["model"]
    if (kind == "llama" or (kind == "t5" and rng.random() < 0.3)) and m["type"] in (
        "BPE",
        "Unigram",
    ):
        if m["type"] == "BPE":
            nxt = max(m["vocab"].values(), default=-1) + 1
            for b in range(256):
                m["vocab"].setdefault(f"<0x{b:02X}>", nxt + b)
            m["byte_fallback"] = rng.random() < 0.9
            m["fuse_unk"] = rng.random() < 0.8
        else:
            have = {p for p, _ in m["vocab"]}
            m["vocab"] += [
                [f"<0x{b:02X}>", -30.0] for b in range(256) if f"<0x{b:02X}>" not in have
            ]
            m["byte_fallback"] = rng.random() < 0.8
    if kind == "byte_level" and m["type"] == "BPE":
        m["ignore_merges"] = rng.random() < 0.3
    return json.dumps(data, ensure_ascii=False)


_WORDS = ["the", "The", "THE", "cat", "I", "don", "won", "it", "x", "naïve", "Über", "日本"]
_BITS = ["'s", "'S", "'ll", "'LL", "'re", "'ve", "'d", "'m", "'t", "'", "''", "n't"]
_BITS += ["1", "12", "123", "1234", "12345", "3.14", "٣", "½", "...", "!!", "?!", "--", "-"]
_BITS += [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\r", "\u00a0", "\u3000", "\x0b"]


def english_texts(rng: random.Random, n: int) -> list[str]:
    """Contractions in every case, digit runs of every length, punctuation runs, and every
    mix of spaces and line breaks: what the byte-level splits (GPT-2, cl100k) decide on."""
    out = []
    for _ in range(n):
        parts = [
            _pick(rng, _WORDS if rng.random() < 0.4 else _BITS) for _ in range(rng.randint(1, 14))
        ]
        out.append("".join(parts))
    return out


def long_texts(rng: random.Random, corpus: list[str]) -> list[str]:
    """Words of hundreds of bytes (the BPE backtracking and cache limits), long runs."""
    out = ["a" * 300, "ab" * 200, "é" * 150, "😀" * 80, " " * 50, "\n" * 20, "1" * 40]
    out += english_texts(rng, 30)
    for _ in range(4):
        line = _pick(rng, corpus)
        out.append(line.replace(" ", "")[:600])
        out.append((line + " ") * 3)
    return out


def shared_lines(data_dir) -> tuple[list[str], list[str]]:
    """(training lines, extra text lines) from the shared corpora; skips the test without them."""
    import pytest

    if not data_dir.is_dir():
        pytest.skip(f"shared test data not found at {data_dir} (expected ../shared/data)")
    train = corpus(data_dir, 300, seed=1)
    if len(train) < 50:
        pytest.skip("shared corpora absent")
    return train, corpus(data_dir, 300, seed=2)


def corpus(data_dir, n: int, seed: int) -> list[str]:
    """n non-empty lines drawn from the shared corpora (English-heavy, some other scripts)."""
    files = [
        ("corpora/big.txt", 0.4),
        ("corpora/botchan.txt", 0.2),
        ("corpora/wikipedia-mars/french.utf8.txt", 0.1),
        ("corpora/wikipedia-mars/german.utf8.txt", 0.1),
        ("corpora/wagahaiwa_nekodearu.txt", 0.1),
        ("corpora/udhr2_all.txt", 0.1),
    ]
    out: list[str] = []
    for rel, share in files:
        p = data_dir / rel
        if not p.exists():
            continue
        pool = [
            x for x in p.read_text(encoding="utf-8", errors="replace").splitlines() if x.strip()
        ]
        out += random.Random(f"{seed}:{rel}").sample(pool, min(len(pool), max(1, int(n * share))))
    random.Random(seed).shuffle(out)
    return out
