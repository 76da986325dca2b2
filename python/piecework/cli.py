"""The `piecework` command.

    piecework encode [--tokenizer FILE] [TEXT ... | --input FILE]
    piecework inspect FILE
    piecework convert IN.model OUT.spm

`encode` writes one JSON line per text: {"ids": [...], "tokens": [...]}. Without --tokenizer it
uses the tokenizer shipped in the package (all-MiniLM-L6-v2's, a BERT uncased WordPiece; see
piecework/data/NOTICE).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import IO

from . import _core
from .tokenizer import Tokenizer, detect_kind

DEFAULT_TOKENIZER = os.path.join(
    os.path.dirname(__file__), "data", "all-MiniLM-L6-v2.tokenizer.json"
)

# Texts are sent to the Rust batch encoder in chunks: parallel, yet bounded in memory.
_CHUNK = 4096


def default_tokenizer_path() -> str:
    """Path of the tokenizer.json shipped inside the package."""
    return DEFAULT_TOKENIZER


def _lines(f: IO[str]) -> Iterator[str]:
    # One text per line; the line end (LF or CR LF) is not part of the text.
    for line in f:
        if line.endswith("\n"):
            line = line[:-1]
            line = line.removesuffix("\r")
        yield line


def _chunks(texts: Iterator[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    for t in texts:
        chunk.append(t)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _cmd_encode(args: argparse.Namespace, out: IO[str]) -> int:
    if args.input is not None and args.text:
        print("piecework encode: give TEXT arguments or --input, not both", file=sys.stderr)
        return 2
    if args.input is None and not args.text:
        print(
            "piecework encode: give TEXT arguments or --input FILE (- for stdin)", file=sys.stderr
        )
        return 2
    tok = Tokenizer.from_file(args.tokenizer or DEFAULT_TOKENIZER)
    # One line per text: padding would only append pad tokens, so it is off; the file's
    # truncation stays (it is part of what the tokenizer produces).
    tok.no_padding()
    add_special = not args.no_special_tokens
    with contextlib.ExitStack() as stack:
        if args.input is None:
            texts: Iterator[str] = iter(args.text)
        elif args.input == "-":
            texts = _lines(sys.stdin)
        else:
            texts = _lines(stack.enter_context(open(args.input, encoding="utf-8", newline="\n")))
        for chunk in _chunks(texts):
            for enc in tok.encode_batch(chunk, add_special_tokens=add_special):
                out.write(json.dumps({"ids": enc.ids, "tokens": enc.tokens}, ensure_ascii=False))
                out.write("\n")
    return 0


def _model_type(data: bytes, kind: str) -> str | None:
    if kind == "tokenizer.json":
        try:
            model = json.loads(data).get("model", {})
        except (ValueError, AttributeError):
            return None
        if isinstance(model, dict):
            return model.get("type") or "(untyped)"
        return None
    if kind == "vocab.txt":
        return "WordPiece"
    return None


def _sentencepiece_core():
    sp = getattr(_core, "_SentencePiece", None)
    if sp is None:
        raise _core.UnsupportedModelError("this build of piecework has no SentencePiece support")
    return sp


def _cmd_inspect(args: argparse.Namespace, out: IO[str]) -> int:
    with open(args.file, "rb") as f:
        data = f.read()
    kind = detect_kind(data)
    info = {"file": args.file, "kind": kind, "model": _model_type(data, kind)}
    if kind in ("tokenizer.json", "vocab.txt"):
        tok = Tokenizer.from_file(args.file)
        info["vocab_size"] = tok.get_vocab_size(with_added_tokens=True)
        info["vocab_size_without_added_tokens"] = tok.get_vocab_size(with_added_tokens=False)
    else:
        sp = _sentencepiece_core()
        if kind == "sentencepiece":
            proc = sp.from_model_bytes(data)
        else:
            proc = sp.from_spm_text(data.decode("utf-8"))
        info["vocab_size"] = proc.get_piece_size()
    out.write(json.dumps(info, ensure_ascii=False) + "\n")
    return 0


def _cmd_convert(args: argparse.Namespace, out: IO[str]) -> int:
    with open(args.input, "rb") as f:
        data = f.read()
    if detect_kind(data) != "sentencepiece":
        print(f"piecework convert: {args.input} is not a SentencePiece .model", file=sys.stderr)
        return 2
    text = _sentencepiece_core().from_model_bytes(data).to_spm_text()
    with open(args.output, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="piecework", description="Exact, fast tokenization.")
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("encode", help="encode texts; one JSON line {ids, tokens} per text")
    e.add_argument("text", nargs="*", help="texts to encode")
    e.add_argument(
        "--tokenizer",
        "-t",
        metavar="FILE",
        help="tokenizer.json, vocab.txt, SentencePiece .model or .spm "
        "(default: the bundled all-MiniLM-L6-v2 tokenizer)",
    )
    e.add_argument(
        "--input",
        "-i",
        metavar="FILE",
        help="read one text per line from FILE (- for standard input)",
    )
    e.add_argument(
        "--no-special-tokens",
        action="store_true",
        help="do not add the special tokens of the post-processor",
    )
    e.set_defaults(func=_cmd_encode)

    i = sub.add_parser("inspect", help="show the kind, model and vocabulary size of a file")
    i.add_argument("file")
    i.set_defaults(func=_cmd_inspect)

    c = sub.add_parser("convert", help="write a SentencePiece .model as a .spm text vocabulary")
    c.add_argument("input", metavar="IN.model")
    c.add_argument("output", metavar="OUT.spm")
    c.set_defaults(func=_cmd_convert)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = sys.stdout
    if hasattr(out, "reconfigure"):
        out.reconfigure(encoding="utf-8")  # JSON lines are UTF-8 whatever the locale
    if hasattr(sys.stdin, "reconfigure"):
        # lines end at LF (or CR LF) only, as for --input FILE
        sys.stdin.reconfigure(encoding="utf-8", newline="\n")
    try:
        return int(args.func(args, out))
    except BrokenPipeError:
        return 0
    except (OSError, _core.TokenizerError) as e:
        print(f"piecework {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
