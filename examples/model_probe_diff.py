"""Differential sweep of the Rust models (examples/model_probe.rs) against tokenizers 0.22.1.

Run from the repo root after `cargo build --release --example model_probe`:
    python3 examples/model_probe_diff.py [n_random_models]
Prints per-family counts of compared and matching cases, and the first mismatches.
"""

import json
import os
import random
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer

# ../shared/data beside the checkout, unless PIECEWORK_DATA says otherwise.
DATA = os.environ.get(
    "PIECEWORK_DATA",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"),
)
PROBE = os.environ.get("PROBE", "target/release/examples/model_probe")

ALPHA = ["a", "b", "c", "d", "é", "𝔸", "<", ">", "0", "x", "\u0301", " "]


def shell(model):
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


def hf_model(model):
    try:
        return Tokenizer.from_str(shell(model)).model, None
    except Exception as e:  # noqa: BLE001
        return None, str(e)


def hf_tokenize(m, text):
    try:
        return {"ok": [[t.id, t.value, t.offsets[0], t.offsets[1]] for t in m.tokenize(text)]}
    except Exception as e:  # noqa: BLE001
        return {"err": str(e)}


def rand_word(rng, n):
    return "".join(rng.choice(ALPHA[: rng.randint(3, len(ALPHA))]) for _ in range(n))


def random_unigram(rng):
    n = rng.randint(1, 14)
    pieces = []
    for _ in range(n):
        p = rand_word(rng, rng.randint(1, 3))
        pieces.append(p)
    if rng.random() < 0.5:
        pieces.insert(0, "<unk>")
    if rng.random() < 0.3:
        pieces += [f"<0x{b:02X}>" for b in rng.sample(range(256), 40)] + [
            "<0x61>",
            "<0xC3>",
            "<0xA9>",
        ]
    if rng.random() < 0.2 and pieces:
        pieces.append(rng.choice(pieces))  # repeated piece
    ints = rng.random() < 0.5
    vocab = [[p, float(-rng.randint(1, 4)) if ints else -rng.random() * 10] for p in pieces]
    model = {"type": "Unigram", "vocab": vocab, "byte_fallback": rng.random() < 0.4}
    r = rng.random()
    if r < 0.6:
        model["unk_id"] = 0
    elif r < 0.7:
        model["unk_id"] = rng.randrange(len(vocab))
    return model


def random_vocab_object(rng, prefix):
    vocab = {}
    n = rng.randint(1, 14)
    for _ in range(n):
        w = rand_word(rng, rng.randint(1, 3))
        if rng.random() < 0.4:
            w = prefix + w
        vocab[w] = rng.randrange(40)
    if rng.random() < 0.7:
        vocab["[UNK]"] = rng.randrange(40)
    return vocab


def random_wordpiece(rng):
    prefix = rng.choice(["##", "##", "@", ""])
    return {
        "type": "WordPiece",
        "unk_token": "[UNK]",
        "continuing_subword_prefix": prefix,
        "max_input_chars_per_word": rng.choice([100, 100, 3, 5, 0]),
        "vocab": random_vocab_object(rng, prefix),
    }


def random_wordlevel(rng):
    return {"type": "WordLevel", "unk_token": "[UNK]", "vocab": random_vocab_object(rng, "")}


def corpus_words(limit):
    words = []
    for rel in [
        "corpora/sherlock.txt",
        "corpora/udhr2_all.txt",
        "corpora/emoji/emoji-test-derived.txt",
        "corpora/wikipedia-mars/japanese.utf8.txt",
        "corpora/wikipedia-mars/russian.utf8.txt",
        "corpora/wikipedia-mars/thai.utf8.txt",
        "corpora/wikipedia-mars/hindi.utf8.txt",
    ]:
        p = os.path.join(DATA, rel)
        if os.path.exists(p):
            with open(p, encoding="utf-8", errors="replace") as f:
                ws = f.read().split()
            words += ws[: limit // 7]
    return words


def main():
    n_random = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    rng = random.Random(1234)
    cases = []  # (family, model_request, hf_model_or_error, texts)
    for i in range(n_random):
        fam = ["Unigram", "WordPiece", "WordLevel"][i % 3]
        model = {
            "Unigram": random_unigram,
            "WordPiece": random_wordpiece,
            "WordLevel": random_wordlevel,
        }[fam](rng)
        texts = [rand_word(rng, rng.randint(1, 9)) for _ in range(12)]
        if fam == "WordLevel":
            texts += list(model["vocab"])[:4]
        cases.append((fam, {"model": model}, model, texts))
    special = [
        {"type": "Unigram", "vocab": [["", -1.0], ["a", -2.0], ["<unk>", 0]], "unk_id": 2},
        {"type": "Unigram", "vocab": [["a", -1]], "unk_id": 0.0},
        {"type": "Unigram", "vocab": [["a", -1]], "unk_id": -1},
        {"type": "Unigram", "vocab": [["a", -1]], "byte_fallback": None},
        {"type": "Unigram", "vocab": [["a", "-1"]]},
        {"type": "Unigram", "vocab": [["a", -1, 0]]},
        {"type": "Unigram", "vocab": [["a", 10**20]], "unk_id": None},
        {"type": "Unigram", "vocab": [], "unk_id": 0},
        {"type": "Unigram", "vocab": []},
        {"vocab": [["a", -1.0], ["<unk>", -3.0]], "unk_id": 1, "byte_fallback": True},
        {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": -1,
            "vocab": {"a": 0},
        },
        {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 5,
            "vocab": {"a": 1.0},
        },
        {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 5,
            "vocab": {"a": 2**32},
        },
        {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "max_input_chars_per_word": 5,
            "vocab": {"a": 1},
        },
        {
            "type": "WordPiece",
            "unk_token": None,
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 5,
            "vocab": {"a": 1},
        },
        {
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 5,
            "vocab": {"a": 1, "##": 2, "": 3, "[UNK]": 4},
        },
        {"type": "WordLevel", "vocab": {"a": 1}},
        {"type": "WordLevel", "unk_token": "a", "vocab": {"a": 1, "": 2}},
        {"type": "WordLevel", "unk_token": "a", "vocab": [["a", 1]]},
    ]
    for model in special:
        fam = (
            "Unigram"
            if isinstance(model.get("vocab"), list)
            else ("WordPiece" if "max_input_chars_per_word" in model else "WordLevel")
        )
        texts = ["a", "aa", "ab", "", "é", "a##a", "<0x61>"]
        cases.append((fam, {"model": model}, model, texts))
    words = corpus_words(70000) if os.environ.get("REAL", "1") == "1" else []
    real = {
        "WordPiece": [
            "bert-base-uncased/tokenizer.json",
            "all-minilm-l6-v2/tokenizer.json",
            "generated/bert-base-cased/tokenizer.json",
            "hf-tokenizers-data/bert-wiki.json",
        ],
        "WordLevel": ["wordlevel/wordlevel.json"],
        "Unigram": [
            "t5-small/tokenizer.json",
            "xlnet-base-cased/tokenizer.json",
            "pegasus/tokenizer.json",
            "rut5-large/tokenizer.json",
            "nmt-marian/tokenizer.json",
        ],
    }
    for fam, files in real.items():
        for rel in files:
            p = os.path.join(DATA, rel)
            if not words or not os.path.exists(p):
                print("missing", p)
                continue
            texts = list(words)
            if fam == "Unigram":
                texts = ["\u2581" + w for w in texts] + texts[:3000]
            elif fam == "WordPiece":
                texts += [w.lower() for w in texts[:20000]]
            texts += [rand_word(rng, rng.randint(1, 12)) for _ in range(2000)]
            cases.append((fam + ":" + rel, {"model_file": p}, p, texts))

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for _, req, _, texts in cases:
            f.write(json.dumps(req) + "\n")
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
        reqfile = f.name
    out = (
        subprocess.run([PROBE, reqfile], capture_output=True, check=True)
        .stdout.decode()
        .split("\n")
    )
    os.unlink(reqfile)
    it = iter(out)
    stats = {}
    shown = 0
    for fam, _req, model, texts in cases:
        key = fam.split(":")[0] + ("-real" if ":" in fam else "-crafted")
        st = stats.setdefault(key, [0, 0])
        load = json.loads(next(it))
        if isinstance(model, str):
            m, err = Tokenizer.from_file(model).model, None
        else:
            m, err = hf_model(model)
        st[0] += 1
        if (err is None) != ("err" not in load):
            if shown < 15:
                print("LOAD MISMATCH", fam, json.dumps(model)[:300], err, load)
                shown += 1
            for _ in texts:
                next(it)
            continue
        st[1] += 1
        if err is not None:
            for _ in texts:
                next(it)
            continue
        if load["size"] != m.get_vocab_size() if hasattr(m, "get_vocab_size") else False:
            print("SIZE MISMATCH", fam, load["size"])
        for t in texts:
            got = json.loads(next(it))
            exp = hf_tokenize(m, t)
            st[0] += 1
            same = ("err" in got and "err" in exp) or got.get("ok") == exp.get("ok")
            if same:
                st[1] += 1
            elif shown < 15:
                shown += 1
                print(
                    "MISMATCH",
                    fam,
                    repr(t),
                    "\n  model:",
                    json.dumps(model, ensure_ascii=False)[:400],
                    "\n  ours:",
                    got,
                    "\n  hf:  ",
                    exp,
                )
    for k, (n, ok) in sorted(stats.items()):
        print(f"{k}: {ok}/{n} matched")


if __name__ == "__main__":
    main()
