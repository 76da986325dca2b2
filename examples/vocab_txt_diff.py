"""Compare the vocab.txt reader (examples/model_probe.rs) with tokenizers.BertWordPieceTokenizer.

Run from the repo root after `cargo build --release --example model_probe`.
"""

import json
import os
import random
import subprocess
import tempfile

from tokenizers import BertWordPieceTokenizer

# ../shared/data beside the checkout, unless PIECEWORK_DATA says otherwise.
DATA = os.environ.get(
    "PIECEWORK_DATA",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"),
)
PROBE = os.environ.get("PROBE", "target/release/examples/model_probe")
WS = [
    " ",
    "\t",
    "\r",
    "\u00a0",
    "\u3000",
    "\u2028",
    "\u0085",
    "\u200b",
    "\ufeff",
    "\u001f",
    "\u000b",
    "\u000c",
]


# Unicode White_Space (Python's str.isspace also counts U+001C..U+001F, which it is not).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000"
)


def hf_doc(path, lowercase, strip_accents):
    try:
        t = BertWordPieceTokenizer(path, lowercase=lowercase, strip_accents=strip_accents)
        return json.loads(t._tokenizer.to_str())
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}


def main():
    rng = random.Random(7)
    files = []
    tmp = tempfile.mkdtemp()
    for rel in [
        "bert-base-uncased/vocab.txt",
        "bert-base-cased/vocab.txt",
        "bert-base-chinese/vocab.txt",
        "tftext-test/test_wp_en_vocab.txt",
        "hf-transformers-fixtures/vocab.txt",
    ]:
        p = os.path.join(DATA, rel)
        if os.path.exists(p):
            files.append(p)
    for i in range(400):
        toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "B", "##c", "é", "", "a"]
        rng.shuffle(toks)
        toks = toks[: rng.randint(1, len(toks))]
        lines = [
            (rng.choice(WS) if rng.random() < 0.2 else "")
            + t
            + "".join(rng.choice(WS) for _ in range(rng.randint(0, 2)))
            for t in toks
        ]
        data = "\n".join(lines) + rng.choice(["", "\n", "\r\n", "\n\n"])
        raw = data.encode("utf-8")
        if rng.random() < 0.05:
            raw += b"\xff\n"
        p = os.path.join(tmp, f"v{i}.txt")
        with open(p, "wb") as f:
            f.write(raw)
        files.append(p)
    reqs = []
    for p in files:
        for lc, sa in [(None, None), (True, None), (False, None), (True, False), (False, True)]:
            reqs.append((p, lc, sa))
    req_path = os.path.join(tmp, "req.jsonl")
    with open(req_path, "w") as f:
        for p, lc, sa in reqs:
            f.write(json.dumps({"vocab_txt": p, "lowercase": lc, "strip_accents": sa}) + "\n")
    out = (
        subprocess.run([PROBE, req_path], capture_output=True, check=True)
        .stdout.decode()
        .split("\n")
    )
    n = ok = 0
    shown = 0
    for (p, lc, sa), line in zip(reqs, out):
        got = json.loads(line)
        with open(p, "rb") as fh:
            raw = fh.read()
        n += 1
        if "err" in got:
            # Expected only for invalid UTF-8, no [UNK], or (HF) reading failures.
            toks = None
            try:
                toks = [t.rstrip(WHITE_SPACE) for t in raw.decode("utf-8").split("\n")]
            except UnicodeDecodeError:
                pass
            good = toks is None or "[UNK]" not in toks
            if good:
                ok += 1
            elif shown < 10:
                shown += 1
                print("UNEXPECTED ERR", p, got)
            continue
        doc = got["ok"]
        hl = doc["normalizer"]["lowercase"] if lc is None else lc
        exp = hf_doc(p, hl, sa)
        if "error" in exp:
            # HF refuses a vocab without [CLS]/[SEP]; ours then has no post-processor.
            exp_ok = doc["post_processor"] is None
            ok += exp_ok
            if not exp_ok and shown < 10:
                shown += 1
                print("HF ERR", p, exp)
            continue
        if doc == exp:
            ok += 1
        elif shown < 10:
            shown += 1
            for k in doc:
                if doc[k] != exp.get(k):
                    print("DIFF", p, lc, sa, k, str(doc[k])[:300], "||", str(exp.get(k))[:300])
    print(f"vocab.txt: {ok}/{n} matched ({len(files)} files)")


if __name__ == "__main__":
    main()
