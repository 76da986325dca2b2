"""The `piecework` command, run in a subprocess, against the Python API and against `tokenizers`
on the same tokenizer file (the bundled default, and a crafted one)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import subprocess
import sys

import piecework
import pytest
from piecework import _core
from piecework.cli import default_tokenizer_path

tokenizers = pytest.importorskip("tokenizers")

TEXTS = [
    "Hello world",
    "Don't panic! It's 3.14, not 22/7.",
    "中文 and Café, naïve",
    "emoji 🤷🏽\u200d♀️ and 𝔸 𝐀",
    "tab\there NBSP\xa0ideographic\u3000space",
    "line\u2028separator and NEL\x85 inside one text",
    "",
    "   ",
    "x" * 700,  # longer than the default tokenizer's truncation (128 tokens)
]


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONIOENCODING="latin-1")  # the output must be UTF-8 regardless
    return subprocess.run(
        [sys.executable, "-m", "piecework", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env=env,
        check=False,
    )


def json_lines(out: bytes) -> list:
    # JSON Lines: records end at LF only (U+2028 may appear raw inside a string)
    text = out.decode("utf-8")
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def references(path: str):
    ours = piecework.Tokenizer.from_file(path)
    theirs = tokenizers.Tokenizer.from_file(path)
    # the CLI writes one line per text, so it does not pad (the file's truncation applies)
    ours.no_padding()
    theirs.no_padding()
    return ours, theirs


def check_lines(records, texts, path, add_special_tokens=True):
    ours, theirs = references(path)
    assert len(records) == len(texts)
    for text, rec in zip(texts, records):
        assert sorted(rec) == ["ids", "tokens"]
        expected = theirs.encode(text, add_special_tokens=add_special_tokens)
        assert rec["ids"] == expected.ids, text
        assert rec["tokens"] == expected.tokens, text
        assert rec["ids"] == ours.encode(text, add_special_tokens=add_special_tokens).ids


def test_default_tokenizer_is_shipped():
    path = default_tokenizer_path()
    assert os.path.isfile(path)
    assert os.path.isfile(os.path.join(os.path.dirname(path), "NOTICE"))
    with open(path, "rb") as f:
        assert piecework.detect_kind(f.read()) == "tokenizer.json"


def test_encode_arguments_default_tokenizer():
    r = run_cli("encode", *TEXTS)
    assert r.returncode == 0, r.stderr.decode()
    check_lines(json_lines(r.stdout), TEXTS, default_tokenizer_path())


def test_encode_no_special_tokens():
    r = run_cli("encode", "--no-special-tokens", *TEXTS[:3])
    assert r.returncode == 0, r.stderr.decode()
    check_lines(json_lines(r.stdout), TEXTS[:3], default_tokenizer_path(), False)


def test_encode_input_file_and_stdin(tmp_path):
    # CR LF and LF both end a line; U+2028, U+0085 and a lone CR inside a line do not
    texts = [*TEXTS, "carriage\rreturn"]
    raw = "\r\n".join(texts[:4]) + "\n" + "\n".join(texts[4:]) + "\n"
    path = tmp_path / "in.txt"
    path.write_bytes(raw.encode("utf-8"))
    r = run_cli("encode", "--input", str(path))
    assert r.returncode == 0, r.stderr.decode()
    check_lines(json_lines(r.stdout), texts, default_tokenizer_path())
    r2 = run_cli("encode", "--input", "-", stdin=raw.encode("utf-8"))
    assert r2.returncode == 0, r2.stderr.decode()
    assert r2.stdout == r.stdout


def test_encode_many_lines(tmp_path):
    texts = [f"line {i} of {'many ' * (i % 7)}words" for i in range(5000)]
    path = tmp_path / "many.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    r = run_cli("encode", "-i", str(path))
    assert r.returncode == 0, r.stderr.decode()
    records = json_lines(r.stdout)
    theirs = tokenizers.Tokenizer.from_file(default_tokenizer_path())
    theirs.no_padding()
    assert [rec["ids"] for rec in records] == [e.ids for e in theirs.encode_batch(texts)]


def test_encode_with_given_tokenizer(tmp_path):
    from tokenizers import models, pre_tokenizers

    vocab = {"<unk>": 0, "hello": 1, "world": 2, "!": 3}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "crafted.json"
    tok.save(str(path))
    texts = ["hello world!", "hello there", ""]
    r = run_cli("encode", "--tokenizer", str(path), *texts)
    assert r.returncode == 0, r.stderr.decode()
    check_lines(json_lines(r.stdout), texts, str(path))


def test_encode_shared_tokenizers(DATA):
    for rel in ("bert-base-uncased/tokenizer.json", "t5-small/tokenizer.json"):
        path = DATA / rel
        if not path.exists():
            continue
        r = run_cli("encode", "-t", str(path), *TEXTS)
        assert r.returncode == 0, r.stderr.decode()
        check_lines(json_lines(r.stdout), TEXTS, str(path))


def test_console_script_matches_module():
    exe = shutil.which("piecework", path=os.path.dirname(sys.executable)) or shutil.which(
        "piecework"
    )
    if exe is None:
        pytest.skip("the `piecework` console script is not installed on PATH")
    r = subprocess.run([exe, "encode", *TEXTS[:3]], capture_output=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == run_cli("encode", *TEXTS[:3]).stdout


def test_usage_errors(tmp_path):
    r = run_cli("encode")
    assert r.returncode == 2 and b"TEXT" in r.stderr
    path = tmp_path / "t.txt"
    path.write_text("a\n", encoding="utf-8")
    r = run_cli("encode", "--input", str(path), "text")
    assert r.returncode == 2
    r = run_cli("encode", "--tokenizer", str(tmp_path / "missing.json"), "x")
    assert r.returncode == 1 and b"missing.json" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": 1}', encoding="utf-8")
    r = run_cli("encode", "--tokenizer", str(bad), "x")
    assert r.returncode == 1 and r.stderr and not r.stdout
    assert b"Traceback" not in r.stderr
    r = run_cli("frobnicate")
    assert r.returncode == 2


def test_inspect_default():
    r = run_cli("inspect", default_tokenizer_path())
    assert r.returncode == 0, r.stderr.decode()
    (info,) = json_lines(r.stdout)
    theirs = tokenizers.Tokenizer.from_file(default_tokenizer_path())
    assert info["kind"] == "tokenizer.json"
    assert info["model"] == "WordPiece"
    assert info["vocab_size"] == theirs.get_vocab_size(with_added_tokens=True)
    assert info["vocab_size_without_added_tokens"] == theirs.get_vocab_size(False)


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def test_convert_model_to_spm(DATA, tmp_path):
    if not hasattr(_core, "_SentencePiece"):
        pytest.skip("this build has no .spm writer")
    spm = pytest.importorskip("sentencepiece")
    model = DATA / "spm-test" / "test_model.model"
    if not model.exists():
        pytest.skip(f"missing {model}")
    out = tmp_path / "out.spm"
    r = run_cli("convert", str(model), str(out))
    assert r.returncode == 0, r.stderr.decode()
    sp = spm.SentencePieceProcessor(model_file=str(model))
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == sp.get_piece_size()
    assert piecework.detect_kind(out.read_bytes()) == "spm"
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    decoded = [base64.b64decode(line.split()[0]).decode("utf-8") for line in lines]
    assert decoded == pieces
    # scores are written as the shortest decimal that gives back the same float32
    assert [f32(float(line.split()[1])) for line in lines] == [
        f32(sp.get_score(i)) for i in range(sp.get_piece_size())
    ]
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    assert [int(line.split()[2]) for line in lines] == [int(p.type) for p in proto.pieces]
    r = run_cli("inspect", str(model))
    assert r.returncode == 0, r.stderr.decode()
    (info,) = json_lines(r.stdout)
    assert info["kind"] == "sentencepiece"
    assert info["vocab_size"] == sp.get_piece_size()
    r = run_cli("convert", default_tokenizer_path(), str(tmp_path / "x.spm"))
    assert r.returncode == 2
