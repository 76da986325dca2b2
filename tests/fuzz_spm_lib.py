"""Generated SentencePiece models and texts for the differential fuzz (test_fuzz_spm.py).

A configuration is drawn from a seeded RNG over sentencepiece 0.2.3's trainer options; the
model is trained here on a small corpus sample; `differences` compares every surface of
piecework's processor with sentencepiece's on generated texts and returns what differs.
"""

from __future__ import annotations

import io
import os
import random
from typing import Any

import piecework
from strategies import COMBINING, CONTROL, FRAGMENTS, WHITESPACE

spm: Any = None  # set by the test module after importorskip

RULES = ["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"]
MODEL_TYPES = ["unigram", "bpe", "word", "char"]
UD_POOL = ["<b>", "</b>", "\n", "  ", "▁▁", "ｆｏｏ", "@@", "the", "é", "12", "[MASK]", "😀", "ab"]
CTL_POOL = ["<ctl>", "<sep>", "[CLS]", "<2en>"]


_RULE_CHARS = "aAbBeé \u3000\u0301\u2581_x.1中ｆ\t"


def random_rules(rng: random.Random, n: int) -> str:
    """A normalization (or denormalization) rule table in sentencepiece's TSV form: source
    code points, a tab, target code points (hex)."""
    seen: set[str] = set()
    rows = []
    for _ in range(n):
        src = "".join(rng.choice(_RULE_CHARS) for _ in range(rng.randint(1, 3)))
        dst = "".join(rng.choice(_RULE_CHARS) for _ in range(rng.randint(1, 3)))
        if src in seen:
            continue
        seen.add(src)
        rows.append(
            " ".join(f"{ord(c):X}" for c in src) + "\t" + " ".join(f"{ord(c):X}" for c in dst)
        )
    return "\n".join(rows) + "\n"


def random_config(rng: random.Random, tmpdir: str | None = None) -> dict[str, Any]:
    mt = rng.choice(MODEL_TYPES)
    cfg: dict[str, Any] = {
        "model_type": mt,
        "vocab_size": rng.choice([250, 300, 500, 800, 1200, 2000]),
        "normalization_rule_name": rng.choice(RULES),
    }
    flags = {
        "byte_fallback": [True, False],
        "split_digits": [True, False],
        "split_by_whitespace": [False, True, True],
        "split_by_unicode_script": [False, True, True],
        "split_by_number": [False, True, True],
        "treat_whitespace_as_suffix": [True, False, False],
        "allow_whitespace_only_pieces": [True, False],
        "remove_extra_whitespaces": [False, True],
        "add_dummy_prefix": [False, True],
    }
    for k, vals in flags.items():
        if rng.random() < 0.5:
            cfg[k] = rng.choice(vals)
    if rng.random() < 0.4:
        cfg["max_sentencepiece_length"] = rng.choice([1, 2, 4, 8])
    if rng.random() < 0.5:
        cfg["user_defined_symbols"] = rng.sample(UD_POOL, rng.randint(1, 5))
    if rng.random() < 0.4:
        cfg["control_symbols"] = rng.sample(CTL_POOL, rng.randint(1, 3))
    r = rng.random()
    if r < 0.2:  # ids moved
        ids = rng.sample(range(4), 4)
        cfg.update(unk_id=ids[0], bos_id=ids[1], eos_id=ids[2], pad_id=ids[3])
    elif r < 0.4:  # some disabled
        cfg.update(unk_id=0, bos_id=rng.choice([-1, 1]), eos_id=rng.choice([-1, 2]))
        cfg["pad_id"] = rng.choice([-1, 3]) if cfg["bos_id"] != -1 or cfg["eos_id"] != -1 else -1
        if cfg["pad_id"] == 3 and (cfg["bos_id"] == -1 or cfg["eos_id"] == -1):
            cfg["pad_id"] = -1
    elif r < 0.5:
        cfg.update(unk_piece="[UNK]", bos_piece="[BOS]", eos_piece="[EOS]", pad_id=3)
    if tmpdir is not None and rng.random() < 0.2:
        for key in ("normalization_rule_tsv", "denormalization_rule_tsv"):
            if key == "normalization_rule_tsv" or rng.random() < 0.5:
                path = os.path.join(tmpdir, f"{key}-{rng.getrandbits(32):08x}.tsv")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(random_rules(rng, rng.randint(1, 12)))
                cfg[key] = path
        cfg.pop("normalization_rule_name", None)
    if cfg.get("byte_fallback"):
        cfg["vocab_size"] = max(cfg["vocab_size"], 600)
    if mt == "char":
        cfg["vocab_size"] = min(cfg["vocab_size"], 400)
    return cfg


def train(lines: list[str], cfg: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    args = {
        "character_coverage": 0.98,
        "hard_vocab_limit": False,
        "num_threads": 1,
        "minloglevel": 3,
    }
    args.update(cfg)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, **args)
    return out.getvalue()


_SPECIAL = [
    "<s>",
    "</s>",
    "<unk>",
    "[UNK]",
    "[BOS]",
    "<pad>",
    "<0x41>",
    "▁",
    "▁▁",
    "<ctl>",
    "<sep>",
    "[CLS]",
    "[MASK]",
    "<2en>",
    "<b>",
    "</b>",
    "ｆｏｏ",
    "@@",
    "12",
    "1234",
    "x.......",
]


def random_texts(rng: random.Random, n: int, corpus: list[str]) -> list[str]:
    """Texts like tests/strategies.py's corner_text (seeded, without hypothesis), corpus
    lines, and mixtures of the two."""
    pools = [FRAGMENTS, WHITESPACE, CONTROL, COMBINING, _SPECIAL]
    out = ["", " ", "  ", "\n", "\t", "a", " a ", "a  b", "▁", "a\ud800b"]
    if corpus:
        out.append(" ".join(rng.sample(corpus, min(len(corpus), 20))))
        out.append(rng.choice(corpus).replace(" ", "") * 3)
    while len(out) < n:
        r = rng.random()
        if r < 0.3 and corpus:
            out.append(rng.choice(corpus))
            continue
        parts = []
        for _ in range(rng.randint(0, 14)):
            q = rng.random()
            if q < 0.55:
                parts.append(rng.choice(rng.choice(pools)))
            elif q < 0.7:
                parts.append(" " * rng.randint(1, 4))
            elif q < 0.8 and corpus:
                line = rng.choice(corpus)
                i = rng.randrange(len(line) + 1)
                parts.append(line[i : i + rng.randint(1, 30)])
            elif q < 0.9:
                parts.append(chr(rng.randint(0x20, 0x7E)) * rng.randint(1, 3))
            else:
                cp = rng.randint(0, 0x10FFFF)
                if 0xD800 <= cp < 0xE000:
                    cp = 0xFFFD
                parts.append(chr(cp))
        out.append("".join(parts))
    return out


def _call(f, *args, **kwargs):
    """(result, None) or (None, exception type name)."""
    try:
        return f(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - either side's error is the observable
        return None, type(e).__name__


def _same_outcome(a, b) -> bool:
    (ra, ea), (rb, eb) = a, b
    if ea or eb:
        # both must raise; the exception types need not match exactly (a subclass of
        # ValueError on our side, RuntimeError/ValueError/IndexError on sentencepiece's)
        return bool(ea) and bool(eb)
    return ra == rb


def oracle_tokens(sp, text: str):
    from sentencepiece import sentencepiece_pb2

    spt = sentencepiece_pb2.SentencePieceText()
    spt.ParseFromString(sp.encode(text, out_type="serialized_proto"))
    return [(p.id, p.piece, p.begin, p.end) for p in spt.pieces]


def ours_tokens(pw, text: str):
    ids, pieces, offsets = pw.encode_with_offsets(text)
    return [(i, p, b, e) for i, p, (b, e) in zip(ids, pieces, offsets)]


def vocab_differences(sp, pw) -> list[tuple]:
    bad: list[tuple] = []
    n = sp.get_piece_size()
    if pw.get_piece_size() != n:
        return [("get_piece_size", n, pw.get_piece_size())]
    ids = list(range(n))
    for name in ("id_to_piece", "get_score", "is_unknown", "is_control", "is_unused", "is_byte"):
        a, b = getattr(sp, name)(ids), getattr(pw, name)(ids)
        if name == "get_score":  # NaN scores (mutated models) equal themselves here
            a, b = ([repr(x) for x in v] for v in (a, b))
        if a != b:
            bad.append((name, a, b))
    for name in ("unk_id", "bos_id", "eos_id", "pad_id"):
        a, b = getattr(sp, name)(), getattr(pw, name)()
        if a != b:
            bad.append((name, a, b))
    pieces = sp.id_to_piece(ids) + ["", "not-a-piece", "<s>", "</s>", "<unk>", "<pad>", "▁"]
    a, b = sp.piece_to_id(pieces), pw.piece_to_id(pieces)
    if a != b:
        bad.append(("piece_to_id", a, b))
    for i in (-1, n, n + 5):
        for name in ("id_to_piece", "is_unknown", "is_control", "get_score"):
            sa, pa = _call(getattr(sp, name), i), _call(getattr(pw, name), i)
            if not _same_outcome(sa, pa):
                bad.append((f"{name}({i})", sa, pa))
    return bad


def text_differences(sp, pw, tok, text: str) -> list[tuple]:
    bad: list[tuple] = []
    exp = _call(oracle_tokens, sp, text)
    got = _call(ours_tokens, pw, text)
    if not _same_outcome(exp, got):
        return [(text, "tokens+offsets", exp, got)]
    if exp[1]:
        return bad
    ids = [x[0] for x in exp[0]]
    pieces = [x[1] for x in exp[0]]
    checks = [
        ("encode ids", lambda m: m.encode(text)),
        ("encode str", lambda m: m.encode(text, out_type=str)),
        ("bos+eos ids", lambda m: m.encode(text, add_bos=True, add_eos=True)),
        ("eos str", lambda m: m.encode(text, out_type=str, add_eos=True)),
        ("bos str reverse", lambda m: m.encode(text, out_type=str, add_bos=True, reverse=True)),
        ("emit_unk", lambda m: m.encode(text, out_type=str, emit_unk_piece=True)),
        ("batch", lambda m: m.encode([text, text[::-1]], out_type=str)),
        ("decode ids", lambda m: m.decode(ids)),
        ("decode pieces", lambda m: m.decode(pieces)),
        ("decode rev", lambda m: m.decode(ids[::-1])),
    ]
    for what, f in checks:
        a, b = _call(f, sp), _call(f, pw)
        if not _same_outcome(a, b):
            bad.append((text, what, a, b))
    if tok is not None:
        enc = _call(tok.encode, text)
        if enc[1]:
            bad.append((text, "Tokenizer.encode raised", enc[1], ids))
        elif enc[0].ids != ids or enc[0].tokens != pieces:
            bad.append((text, "Tokenizer.encode", (ids, pieces), (enc[0].ids, enc[0].tokens)))
        else:
            a, b = _call(sp.decode, ids), _call(tok.decode, ids)
            if not _same_outcome(a, b):
                bad.append((text, "Tokenizer.decode", a, b))
    return bad


def decode_differences(sp, pw, rng: random.Random, n: int) -> list[tuple]:
    """Decoding of id and piece sequences no encoder produces: byte pieces in any order
    (invalid UTF-8), control, unknown and user-defined pieces anywhere, pieces not in the
    vocabulary."""
    size = sp.get_piece_size()
    special = [i for i in range(size) if sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i)]
    bad: list[tuple] = []
    for _ in range(n):
        ids = [
            rng.choice(special) if special and rng.random() < 0.5 else rng.randrange(size)
            for _ in range(rng.randint(0, 10))
        ]
        a, b = _call(sp.decode, ids), _call(pw.decode, ids)
        if not _same_outcome(a, b):
            bad.append(("decode random ids", ids, a, b))
        pieces = sp.id_to_piece(ids)
        if pieces and rng.random() < 0.3:
            pieces[rng.randrange(len(pieces))] = rng.choice(["not-a-piece", "▁x▁", "", "<0x4>"])
        a, b = _call(sp.decode, pieces), _call(pw.decode, pieces)
        if not _same_outcome(a, b):
            bad.append(("decode random pieces", pieces, a, b))
        a, b = _call(sp.decode, [ids, ids[::-1]]), _call(pw.decode, [ids, ids[::-1]])
        if not _same_outcome(a, b):
            bad.append(("decode batch", ids, a, b))
    return bad


def model_differences(data: bytes, texts: list[str], rng: random.Random | None = None) -> list:
    sp = spm.SentencePieceProcessor(model_proto=data)
    pw = piecework.SentencePieceProcessor(model_proto=data)
    tok = piecework.Tokenizer.from_sentencepiece(data)
    bad = vocab_differences(sp, pw)
    for t in texts:
        bad += text_differences(sp, pw, tok, t)
    bad += decode_differences(sp, pw, rng or random.Random(0), len(texts))
    return bad


# ------------------------------------------------------------------- mutated model files


def mutate(rng: random.Random, m: Any) -> list[str]:
    """Edit a ModelProto in place the way no trainer writes one: piece types, scores (ties,
    infinities, NaN), piece strings (duplicates, spaces, byte-like names), pieces removed or
    appended, normalizer flags, special ids. Returns the edits made."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    T = pb.ModelProto.SentencePiece
    n = len(m.pieces)
    ops = []
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(
            ["type", "score", "tie", "piece", "dup", "del", "append", "flags", "ids", "empty"]
        )
        ops.append(op)
        i = rng.randrange(n)
        p = m.pieces[i]
        if op == "type":
            p.type = rng.choice([T.NORMAL, T.UNKNOWN, T.CONTROL, T.USER_DEFINED, T.BYTE, T.UNUSED])
        elif op == "score":
            p.score = rng.choice([0.0, -1e9, 1e9, float("-inf"), float("nan"), -0.5, 5.0])
        elif op == "tie":
            j = rng.randrange(n)
            m.pieces[j].score = p.score
        elif op == "piece":
            p.piece = rng.choice(
                ["▁the", "a b", "▁", "<0x41>", "<0xZZ>", "", "é", "ab", "▁▁", "<b>", "xyz"]
            )
        elif op == "dup":
            p.piece = m.pieces[rng.randrange(n)].piece
        elif op == "del":
            del m.pieces[i]
            n -= 1
        elif op == "append":
            q = m.pieces.add()
            q.piece = rng.choice(["zq", "▁zq", "<0x41>", "qq qq", "<unk>"])
            q.score = rng.uniform(-20, 0)
            q.type = rng.choice([T.NORMAL, T.USER_DEFINED, T.CONTROL, T.BYTE])
            n += 1
        elif op == "flags":
            ns = m.normalizer_spec
            f = rng.choice(["add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces"])
            setattr(ns, f, not getattr(ns, f))
            if rng.random() < 0.3:
                m.trainer_spec.treat_whitespace_as_suffix ^= True
            if rng.random() < 0.3:
                m.trainer_spec.byte_fallback ^= True
        elif op == "ids":
            ts = m.trainer_spec
            f = rng.choice(["unk_id", "bos_id", "eos_id", "pad_id"])
            setattr(ts, f, rng.choice([-1, 0, 1, 5, n, n + 3]))
        elif op == "empty":
            if rng.random() < 0.5:
                m.normalizer_spec.precompiled_charsmap = b""
            else:
                m.normalizer_spec.name = rng.choice(["identity", "nfkc", "bogus"])
    return ops


def mutated_differences(base: bytes, rng: random.Random, texts: list[str]) -> tuple[bool, list]:
    """Mutate `base`, then compare: both load it or both refuse it; when both load, every
    surface as for a trained model. Returns (loaded, differences)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    m.ParseFromString(base)
    ops = mutate(rng, m)
    data = m.SerializeToString()
    sp = _call(lambda: spm.SentencePieceProcessor(model_proto=data))
    pw = _call(lambda: piecework.SentencePieceProcessor(model_proto=data))
    if bool(sp[1]) != bool(pw[1]):
        return False, [("load", ops, sp[1], pw[1])]
    if sp[1]:
        return False, []
    bad = vocab_differences(sp[0], pw[0])
    for t in texts:
        bad += text_differences(sp[0], pw[0], None, t)
    bad += decode_differences(sp[0], pw[0], rng, len(texts) // 2)
    return True, [(ops, *b) for b in bad]
