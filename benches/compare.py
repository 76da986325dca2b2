#!/usr/bin/env python3
"""Speed of piecework against its peers, on the same texts, in one run.

    python benches/compare.py            # everything (a few minutes on 2 cores)
    python benches/compare.py --quick    # small texts, one repetition: a smoke run
    python benches/compare.py --only bert --only piecework   # filter models / libraries

Every library runs in a worker subprocess of this same script (`--worker`), started with the
Python that has that library: the current interpreter for piecework, tokenizers (the pinned
oracle, 0.22.1) and sentencepiece; a private plain venv (benches/.venv-peers, created on first
use) for the newest tokenizers release (pre-releases included: 1.0), tiktoken, tokie and
kitoken. Two tokenizers versions cannot share one interpreter, hence the subprocesses.

Before a speed is reported, the ids of every text are compared with the reference library for
that tokenizer file (tokenizers 0.22.1 for a tokenizer.json, sentencepiece for a .model, tiktoken
for a .tiktoken file); a library that differs gets the count of differing texts instead of a speed.

Output: benches/results.md (markdown tables, also printed), benches/results.json (raw numbers)
and benches/results.png (chart).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from array import array
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER_VENV = Path(os.environ.get("PIECEWORK_PEER_VENV", HERE / ".venv-peers"))
# The newest tokenizers (pre-releases too), and the peers that have no place in the oracle env.
PEER_PACKAGES = ["tokenizers", "tiktoken", "tokie", "kitoken", "matplotlib"]
THREADS = 2


def find_data() -> Path | None:
    """`../shared/data` beside the checkout (CI layout), or one level further up (worktrees)."""
    env = os.environ.get("PIECEWORK_DATA")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


# --------------------------------------------------------------------------------------------
# Tokenizers under test. `files` name each source file relative to the data dir; every library
# entry says which file it loads. `ref` is the library whose ids are the truth for that model.
# --------------------------------------------------------------------------------------------

MODELS = [
    {
        "key": "bert-base-uncased",
        "family": "WordPiece",
        "ref": "tokenizers",
        "files": {"json": "bert-base-uncased/tokenizer.json"},
        "libs": {
            "tokenizers": "json",
            "tokenizers-new": "json",
            "tokie": "json",
            "kitoken": "json",
            "piecework": "json",
        },
    },
    {
        "key": "t5-small",
        "family": "Unigram (tokenizer.json)",
        "ref": "tokenizers",
        "files": {"json": "t5-small/tokenizer.json"},
        "libs": {
            "tokenizers": "json",
            "tokenizers-new": "json",
            "tokie": "json",
            "kitoken": "json",
            "piecework": "json",
        },
    },
    {
        "key": "xlnet-base-cased",
        "family": "Unigram (spiece.model)",
        "ref": "sentencepiece",
        "files": {"model": "xlnet-base-cased/spiece.model"},
        "libs": {"sentencepiece": "model", "kitoken": "model", "piecework-sp": "model"},
    },
    {
        "key": "llama2",
        "family": "SentencePiece BPE (.model)",
        "ref": "sentencepiece",
        "files": {"model": "llama2/tokenizer.model"},
        "libs": {"sentencepiece": "model", "kitoken": "model", "piecework-sp": "model"},
    },
    {
        "key": "mistral-7b-v0.3",
        "family": "SentencePiece BPE (.model)",
        "ref": "sentencepiece",
        "files": {"model": "mistral-7b-v0.3/tokenizer.model.v3"},
        "libs": {"sentencepiece": "model", "kitoken": "model", "piecework-sp": "model"},
    },
    {
        "key": "codellama",
        "family": "SentencePiece BPE (tokenizer.json)",
        "ref": "tokenizers",
        "files": {"json": "codellama/tokenizer.json"},
        "libs": {
            "tokenizers": "json",
            "tokenizers-new": "json",
            "tokie": "json",
            "kitoken": "json",
            "piecework": "json",
        },
    },
    {
        "key": "gpt2",
        "family": "byte-level BPE",
        "ref": "tokenizers",
        "files": {
            "json": "gpt2/tokenizer.json",
            "gpt2-vocab": "gpt2/gpt2.vocab.json",
        },
        "libs": {
            "tokenizers": "json",
            "tokenizers-new": "json",
            "tiktoken": "gpt2-vocab",
            "tokie": "json",
            "kitoken": "json",
            "piecework": "json",
        },
    },
    {
        "key": "cl100k",
        "family": "byte-level BPE (tiktoken)",
        "ref": "tiktoken",
        "files": {"tiktoken": "cl100k-tiktoken/cl100k_base.tiktoken"},
        "libs": {"tiktoken": "tiktoken", "kitoken": "tiktoken", "piecework": "tiktoken"},
    },
]

# Which interpreter runs which library: "main" is this one, "peer" the private venv.
LIB_ENV = {
    "tokenizers": "main",
    "sentencepiece": "main",
    "piecework": "main",
    "piecework-sp": "main",
    "tokenizers-new": "peer",
    "tiktoken": "peer",
    "tokie": "peer",
    "kitoken": "peer",
}
LIB_ORDER = [
    "piecework",
    "piecework-sp",
    "tokenizers",
    "tokenizers-new",
    "sentencepiece",
    "tiktoken",
    "tokie",
    "kitoken",
]

# GPT-2's pre-tokenizer regex, as tiktoken's own gpt2 encoding states it.
GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


# --------------------------------------------------------------------------------------------
# Workloads: the same texts for every library.
# --------------------------------------------------------------------------------------------


def _read(data: Path, rel: str) -> str:
    p = data / rel
    return p.read_text(encoding="utf-8") if p.is_file() else ""


def _code_text(limit: int) -> str:
    """Python sources of the standard library, in sorted order (deterministic per version)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts, total = [], 0
    for p in sorted(stdlib.rglob("*.py")):
        if "site-packages" in p.parts:
            continue
        try:
            t = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(t)
        total += len(t)
        if total >= limit:
            break
    return "".join(parts)


def _multi_text(data: Path, limit: int) -> str:
    """Wikipedia's Mars article in 18 languages, interleaved block by block so that every
    stretch of the text is multilingual, then the UDHR translations."""
    mars = data / "corpora" / "wikipedia-mars"
    langs = [p.read_text(encoding="utf-8") for p in sorted(mars.glob("*.utf8.txt"))]
    block = 8000
    parts, total, pos = [], 0, [0] * len(langs)
    while total < limit and any(p < len(t) for p, t in zip(pos, langs)):
        for i, t in enumerate(langs):
            if pos[i] >= len(t):
                continue
            end = min(len(t), pos[i] + block)
            nl = t.find("\n", end)
            end = len(t) if nl < 0 else nl + 1
            parts.append(t[pos[i] : end])
            total += end - pos[i]
            pos[i] = end
    return "".join(parts) + _read(data, "corpora/udhr2_all.txt")


class Corpus:
    """Consumes a text front to back, so that no two workload variants share a text (a
    library's cache of earlier inputs must not decide a speed: a pipeline sees each text once).
    Wraps around, and says so, when the text runs out."""

    def __init__(self, name: str, text: str):
        self.name, self.text, self.pos, self.wrapped = name, text, 0, False

    def _take(self, total: int) -> str:
        """The next stretch of at least `total` UTF-8 bytes (less only if the text is shorter),
        ending at a line end."""
        if self.pos >= len(self.text):
            self.pos, self.wrapped = 0, True
        # Characters are 1-4 bytes: grow the window until it holds `total` bytes.
        end = self.pos + total // 2
        while True:
            end = min(len(self.text), end)
            nl = self.text.find("\n", end)
            cut = len(self.text) if nl < 0 else nl + 1
            piece = self.text[self.pos : cut]
            if len(piece.encode("utf-8")) >= total or cut >= len(self.text):
                self.pos = cut
                return piece
            end += total // 2

    def lines(self, total: int, n: int) -> list[list[str]]:
        """`n` sets of non-blank lines of `total` bytes each, dealt out in turn so that the
        sets are alike (line lengths, topics, languages) but share no line of the corpus."""
        out, size = [[] for _ in range(n)], [0] * n
        while min(size) < total:
            for line in self._take(n * total // 4).splitlines():
                i = size.index(min(size))
                if line.strip() and size[i] < total:
                    out[i].append(line)
                    size[i] += len(line.encode("utf-8"))
        return out

    def docs(self, total: int, size: int, n: int) -> list[list[str]]:
        """`n` sets of ~`size`-byte documents cut at line ends, `total` bytes each, dealt out
        in turn."""
        out, got = [[] for _ in range(n)], [0] * n
        while min(got) < total:
            i = got.index(min(got))
            doc = self._take(size)
            out[i].append(doc)
            got[i] += len(doc.encode("utf-8"))
        return out


def build_workloads(
    data: Path, total: int, doc_size: int, variants: int, log
) -> dict[str, list[list[str]]]:
    """Per workload, `variants` lists of texts, no text shared between any two of them."""
    need = total * variants * 2 + total
    corpora = [
        Corpus("prose", _read(data, "corpora/big.txt") + _read(data, "corpora/sherlock.txt")),
        Corpus("multi", _multi_text(data, need)),
        Corpus("code", _code_text(need)),
    ]
    out = {}
    for c in corpora:
        if not c.text.strip():
            continue
        out[f"{c.name}-lines"] = c.lines(total, variants)
        out[f"{c.name}-docs"] = c.docs(total, doc_size, variants)
        if c.wrapped:
            log(f"  note: the {c.name} corpus ran out; some variants repeat texts")
    return out


# --------------------------------------------------------------------------------------------
# Library adapters (run inside the worker). Each returns (single, batch_variants) where single
# encodes one text to a list of ids, and each batch variant encodes a list of texts to a list of
# id lists (or something `as_lists` turns into one). A missing API raises `Skip`.
# --------------------------------------------------------------------------------------------


class Skip(Exception):
    pass


def _import(name: str):
    try:
        return __import__(name)
    except ImportError as e:
        raise Skip(f"{name} not importable in {sys.executable}: {e}") from None


def _tiktoken_gpt2(path: Path):
    """tiktoken's gpt2 encoding built offline from GPT-2's byte-level vocab.json.

    GPT-2 maps each byte to a printable code point; inverting that map gives each token's bytes.
    The vocab ids are exactly tiktoken's ranks (tiktoken's own loader asserts this)."""
    tiktoken = _import("tiktoken")
    printable = list(range(ord("!"), ord("~") + 1))
    printable += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    byte_of = {chr(b): b for b in printable}
    n = 0
    for b in range(256):
        if b not in printable:
            byte_of[chr(256 + n)] = b
            n += 1
    vocab = json.loads(path.read_text(encoding="utf-8"))
    ranks = {}
    special = {}
    for tok, i in vocab.items():
        if tok == "<|endoftext|>":
            special[tok] = i
            continue
        ranks[bytes(byte_of[c] for c in tok)] = i
    return tiktoken.Encoding(
        name="gpt2-offline", pat_str=GPT2_PAT, mergeable_ranks=ranks, special_tokens=special
    )


def _tiktoken_file(path: Path):
    tiktoken = _import("tiktoken")
    import base64

    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return tiktoken.Encoding(
        name="cl100k-offline",
        pat_str=CL100K_PAT,
        mergeable_ranks=ranks,
        special_tokens=CL100K_SPECIAL,
    )


def make_adapter(lib: str, kind: str, path: Path):
    if lib in ("tokenizers", "tokenizers-new"):
        if kind != "json":
            raise Skip("tokenizers reads only tokenizer.json here")
        tk = _import("tokenizers")
        t = tk.Tokenizer.from_file(str(path))

        def single(x):
            return t.encode(x, add_special_tokens=False).ids

        variants = {}
        if hasattr(t, "encode_batch_fast"):
            # The batch path without offsets (0.22); 1.0 dropped the separate method.
            variants["encode_batch_fast"] = lambda xs: [
                e.ids for e in t.encode_batch_fast(xs, add_special_tokens=False)
            ]
        else:
            variants["encode_batch"] = lambda xs: [
                e.ids for e in t.encode_batch(xs, add_special_tokens=False)
            ]
        return single, variants, tk.__version__
    if lib == "sentencepiece":
        spm = _import("sentencepiece")
        sp = spm.SentencePieceProcessor(model_file=str(path))
        return (
            sp.encode,
            {"encode(list)": lambda xs: sp.encode(xs, num_threads=THREADS)},
            spm.__version__,
        )
    if lib == "tiktoken":
        tiktoken = _import("tiktoken")
        enc = _tiktoken_gpt2(path) if kind == "gpt2-vocab" else _tiktoken_file(path)
        return (
            enc.encode_ordinary,
            {
                "encode_ordinary_batch": lambda xs: enc.encode_ordinary_batch(
                    xs, num_threads=THREADS
                )
            },
            tiktoken.__version__,
        )
    if lib == "tokie":
        tokie = _import("tokie")
        if kind != "json":
            raise Skip("tokie reads tokenizer.json / .tkz only")
        t = tokie.Tokenizer.from_json(str(path))
        return (
            lambda x: t.encode(x, add_special_tokens=False).ids,
            {
                "encode_batch": lambda xs: [
                    e.ids for e in t.encode_batch(xs, add_special_tokens=False)
                ]
            },
            _version("tokie"),
        )
    if lib == "kitoken":
        kitoken = _import("kitoken")
        K = kitoken.Kitoken
        if kind == "json":
            t = K.from_tokenizers_file(str(path))
        elif kind == "model":
            t = K.from_sentencepiece_file(str(path))
        elif kind == "tiktoken":
            t = K.from_tiktoken_file(str(path))
        else:
            raise Skip(f"kitoken: no loader used for {kind}")
        return t.encode, {"encode_all": t.encode_all}, _version("kitoken")
    if lib == "piecework":
        pw = _import("piecework")
        T = getattr(pw, "Tokenizer", None)
        if T is None or not hasattr(T, "from_file"):
            raise Skip("piecework.Tokenizer.from_file not present yet")
        if kind not in ("json", "model", "vocab", "tiktoken"):
            raise Skip(f"piecework.Tokenizer does not read {path.name}")
        if kind == "tiktoken" and not hasattr(T, "from_tiktoken"):
            raise Skip("piecework.Tokenizer.from_tiktoken not present yet")
        if hasattr(pw, "set_num_threads"):
            pw.set_num_threads(THREADS)
        t = T.from_file(str(path))
        singles = {"encode": lambda x: t.encode(x, add_special_tokens=False).ids}
        if hasattr(t, "encode_ids"):
            # The ids-only path: no tokens, offsets or masks are built.
            singles["encode_ids"] = lambda x: t.encode_ids(x, add_special_tokens=False)
        variants = {}
        if hasattr(t, "encode_batch"):
            variants["encode_batch"] = lambda xs: [
                e.ids for e in t.encode_batch(xs, add_special_tokens=False)
            ]
        if hasattr(t, "encode_batch_ids"):
            variants["encode_batch_ids"] = lambda xs: t.encode_batch_ids(
                xs, add_special_tokens=False
            )
        if hasattr(t, "encode_batch_flat"):
            variants["encode_batch_flat"] = lambda xs: t.encode_batch_flat(
                xs, add_special_tokens=False
            )
        return singles, variants, _version("piecework")
    if lib == "piecework-sp":
        pw = _import("piecework")
        P = getattr(pw, "SentencePieceProcessor", None)
        if P is None:
            raise Skip("piecework.SentencePieceProcessor not present yet")
        if hasattr(pw, "set_num_threads"):
            pw.set_num_threads(THREADS)
        sp = P(model_file=str(path))
        variants = {"encode(list)": sp.encode}
        for name in ("encode_batch_ids", "encode_batch_flat"):
            if hasattr(sp, name):
                variants[name] = getattr(sp, name)
        return {"encode": sp.encode}, variants, _version("piecework")
    raise Skip(f"unknown library {lib}")


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001 - a version string is decoration
        return "?"


def as_lists(result) -> list[list[int]]:
    """Normalise a batch result: list of lists, or a flat (ids, offsets) pair of arrays."""
    if isinstance(result, tuple) and len(result) == 2:
        ids, offs = result
        ids = list(ids)
        offs = [int(o) for o in offs]
        return [ids[offs[i] : offs[i + 1]] for i in range(len(offs) - 1)]
    return [list(r) for r in result]


def digest(ids) -> str:
    return hashlib.blake2b(array("I", ids).tobytes(), digest_size=8).hexdigest()


def _set_process_affinity(cpus: set[int]) -> None:
    """Give every thread of this process the CPU mask `cpus`.

    `os.sched_setaffinity(0, ...)` sets only the calling thread's mask; a library's thread pool
    started earlier keeps its own, so each task in /proc/self/task is set."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # the thread ended meanwhile
            pass


def _single_core() -> set[int] | None:
    """The core single-mode runs are pinned to, or None when pinning is off or unavailable."""
    if os.environ.get("PIECEWORK_BENCH_PIN", "1") == "0" or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    return {max(allowed)} if len(allowed) > 1 else None


# The first text encoded after a load, in the load-time measurement.
LOAD_TEXT = "Hello world"


def run_worker(lib: str, workloads_path: str) -> None:
    """Serve one library: JSON requests on stdin, one JSON answer per line on stdout.

    Requests: {"op": "load", model, kind, path} -> {"version", "apis": {mode: [api, ...]}} or
    {"skip"}; {"op": "run", model, workload, variant, mode, api} -> {"secs", "cpu", "digests",
    "ntokens"} or {"error"}; {"op": "loadtime", model} -> {"secs", "cpu"} (a fresh instance
    from the file, ready: loaded and one first encode of a short text, which runs any lazy
    build) or {"error"}. The orchestrator runs the libraries in turn, repetition by repetition,
    so that load from other jobs on a shared machine spreads over all of them alike."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever a library prints must not corrupt the protocol
    workloads = json.loads(Path(workloads_path).read_text(encoding="utf-8"))
    loaded = {}  # model -> (kind, path, the apis of its first instance)
    # One instance of the tokenizer per (model, mode, api): a cell must not profit from a
    # cache that another cell filled with the same texts.
    instances: dict = {}

    def answer(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    def adapter(model):
        kind, path = loaded[model]
        singles, variants, ver = make_adapter(lib, kind, path)
        if callable(singles):
            singles = {"encode": singles}
        return singles, variants, ver

    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "load":
            instances.clear()  # the previous model's instances (memory)
            loaded[req["model"]] = (req["kind"], Path(req["path"]))
            try:
                singles, variants, ver = adapter(req["model"])
            except Skip as e:
                answer({"skip": str(e)})
                continue
            except Exception as e:  # noqa: BLE001 - a loader error is a result (unsupported file)
                answer({"skip": f"load failed: {type(e).__name__}: {e}"})
                continue
            instances[(req["model"], None)] = (singles, variants)
            answer({"version": ver, "apis": {"single": list(singles), "batch": list(variants)}})
        elif req["op"] == "loadtime":
            gc.collect()  # the previous instance's memory is freed outside the timing
            try:
                c0 = time.process_time()
                t0 = time.perf_counter()
                # Only the singles are kept: the instance must not outlive the timing through
                # another name, or the next load would time its drop.
                singles = adapter(req["model"])[0]
                next(iter(singles.values()))(LOAD_TEXT)
                secs = time.perf_counter() - t0
                cpu = time.process_time() - c0
                del singles
                answer({"secs": secs, "cpu": cpu})
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                answer({"error": f"{type(e).__name__}: {e}"[:300]})
        elif req["op"] == "run":
            key = (req["model"], req["mode"], req["api"])
            if key not in instances:
                # The load's instance serves the first cell, later cells get their own.
                first = instances.pop((req["model"], None), None)
                instances[key] = first or adapter(req["model"])[:2]
            singles, variants = instances[key]
            texts = workloads[req["workload"]][req["variant"]]
            if req["mode"] == "single":

                def fn(xs, f=singles[req["api"]]):
                    return [f(t) for t in xs]
            else:
                fn = variants[req["api"]]
            # A single-mode loop runs on one core: some libraries spread one long text over
            # threads inside `encode`, which would measure two cores against one.
            pin = _single_core() if req["mode"] == "single" else None
            allowed = os.sched_getaffinity(0) if pin else None
            try:
                if pin:
                    _set_process_affinity(pin)
                c0 = time.process_time()
                t0 = time.perf_counter()
                try:
                    res = fn(texts)
                finally:
                    secs = time.perf_counter() - t0
                    if allowed:
                        _set_process_affinity(allowed)
                # CPU seconds of the whole process (all threads): on a shared machine a
                # single-threaded run's CPU time is much steadier than its wall time.
                out = {"secs": secs, "cpu": time.process_time() - c0}
                ids = as_lists(res)
                out["digests"] = [digest(i) for i in ids]
                out["ntokens"] = sum(len(i) for i in ids)
                answer(out)
            except Exception as e:  # noqa: BLE001 - any library error is reported, not fatal
                answer({"error": f"{type(e).__name__}: {e}"[:300]})


class Worker:
    """A library's worker subprocess."""

    def __init__(self, lib: str, python: str, workloads_path: Path, env: dict):
        self.lib = lib
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--worker", lib, str(workloads_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )

    def ask(self, **req) -> dict:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError as e:
            return {"error": f"worker died: {e}", "skip": f"worker died: {e}"}
        if not line:
            return {"error": "worker died", "skip": "worker died"}
        return json.loads(line)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=60)


# --------------------------------------------------------------------------------------------
# Orchestration.
# --------------------------------------------------------------------------------------------


def peer_python(log) -> tuple[str | None, str]:
    """The peer venv's interpreter, created and filled on first use; (None, reason) on failure."""
    py = PEER_VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    stamp = PEER_VENV / ".piecework-peers-ok"
    if py.exists() and stamp.exists():
        return str(py), ""
    try:
        if not py.exists():
            log(f"creating peer venv {PEER_VENV}")
            venv.EnvBuilder(with_pip=True, clear=True).create(PEER_VENV)
        log(f"installing {' '.join(PEER_PACKAGES)} (newest, pre-releases included) into it")
        r = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "--pre", "-U", *PEER_PACKAGES],
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if r.returncode != 0:
            # Install what can be installed, one by one, so one missing peer skips only itself.
            for p in PEER_PACKAGES:
                subprocess.run(
                    [str(py), "-m", "pip", "install", "-q", "--pre", "-U", p],
                    check=False,
                    capture_output=True,
                    timeout=600,
                )
        stamp.write_text("ok\n")
        return str(py), ""
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"peer venv unavailable: {e}"


def run_all(args) -> dict:
    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    data = find_data()
    if data is None:
        sys.exit("no ../shared/data found (set PIECEWORK_DATA); nothing to measure")
    total = 48_000 if args.quick else args.size
    doc_size = 16_000 if args.quick else 100_000
    reps = 1 if args.quick else args.reps
    # Variant 0 is the warm-up's, variant r the r-th timed run's: every run meets new texts.
    nvar = 1 if args.repeat_texts else reps + 1
    workloads = build_workloads(data, total, doc_size, nvar, log)
    if args.workload:
        workloads = {k: v for k, v in workloads.items() if any(w in k for w in args.workload)}

    only = [o.lower() for o in args.only]
    model_f = [o for o in only if any(o in f"{m['key']} {m['family']}".lower() for m in MODELS)]
    lib_f = [o for o in only if any(o in lib for lib in LIB_ORDER)]
    models = [
        m
        for m in MODELS
        if not model_f or any(o in f"{m['key']} {m['family']}".lower() for o in model_f)
    ]
    refs = {m["ref"] for m in models}  # the reference always runs: it is what ids are checked on
    libs_wanted = [
        lib for lib in LIB_ORDER if lib in refs or not lib_f or any(o in lib for o in lib_f)
    ]

    envs = {"main": sys.executable}
    skipped = {}
    if any(LIB_ENV[lib] == "peer" for lib in libs_wanted):
        py, why = peer_python(log)
        if py:
            envs["peer"] = py
        else:
            skipped["peer libraries"] = why

    tmp = Path(tempfile.mkdtemp(prefix="piecework-bench-"))
    wl_path = tmp / "workloads.json"
    wl_path.write_text(json.dumps(workloads), encoding="utf-8")
    results = []
    env = dict(os.environ)
    env.update(
        RAYON_NUM_THREADS=str(THREADS),
        TOKENIZERS_PARALLELISM="true",
        PIECEWORK_NUM_THREADS=str(THREADS),
        OMP_NUM_THREADS=str(THREADS),
    )
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    t_start = time.time()
    workers: dict[str, Worker] = {}
    for lib in libs_wanted:
        pyexe = envs.get(LIB_ENV[lib])
        if pyexe is None:
            skipped[lib] = skipped.get("peer libraries", "no interpreter")
            continue
        workers[lib] = Worker(lib, pyexe, wl_path, env)
    try:
        for m in models:
            active = {}  # lib -> apis, for the libraries that loaded this model
            for lib, w in workers.items():
                kind = m["libs"].get(lib)
                if kind is None:
                    continue
                path = data / m["files"][kind]
                rec = {"model": m["key"], "lib": lib}
                if not path.exists():
                    results.append({**rec, "skip": f"{path} absent"})
                    continue
                r = w.ask(op="load", model=m["key"], kind=kind, path=str(path))
                if "skip" in r:
                    results.append({**rec, "skip": r["skip"]})
                    log(f"  {lib}: {m['key']} skipped: {r['skip']}")
                    continue
                results.append({**rec, "version": r["version"], "loaded": True})
                active[lib] = r["apis"]
            # Load time: file to ready for a first encode, each library in turn, a few times.
            load_secs: dict[str, list[float]] = {lib: [] for lib in active}
            load_cpu: dict[str, list[float]] = {lib: [] for lib in active}
            for _ in range(3 if args.quick else 5):
                for lib in active:
                    r = workers[lib].ask(op="loadtime", model=m["key"])
                    if "secs" in r:
                        load_secs[lib].append(r["secs"])
                        load_cpu[lib].append(r.get("cpu", r["secs"]))
            for lib, secs in load_secs.items():
                if secs:
                    results.append(
                        {
                            "model": m["key"],
                            "lib": lib,
                            "load_secs": secs,
                            "load_cpu_secs": load_cpu[lib],
                        }
                    )
            for wname, variants in workloads.items():
                nbytes = [sum(len(t.encode("utf-8")) for t in v) for v in variants]
                cells = [
                    (lib, mode, api)
                    for lib, apis in active.items()
                    for mode in ("single", "batch")
                    for api in apis[mode]
                ]
                rows = {
                    cell: {
                        "model": m["key"],
                        "lib": cell[0],
                        "workload": wname,
                        "mode": cell[1],
                        "api": cell[2],
                        "texts": len(variants[0]),
                        # [variant, bytes, secs, cpu] of each timed run
                        "runs": [],
                        # digests[variant]: the ids of each text, to be checked
                        "digests": [None] * len(variants),
                    }
                    for cell in cells
                }
                # Round 0 is the warm-up (not timed), round r >= 1 a timed run on variant r.
                for rnd in range(reps + 1):
                    var = rnd % len(variants)
                    for cell in cells:
                        row = rows[cell]
                        if "error" in row:
                            continue
                        lib, mode, api = cell
                        r = workers[lib].ask(
                            op="run",
                            model=m["key"],
                            workload=wname,
                            variant=var,
                            mode=mode,
                            api=api,
                        )
                        if "error" in r:
                            row["error"] = r["error"]
                            continue
                        row["digests"][var] = r["digests"]
                        row["ntokens"] = r["ntokens"]
                        if rnd > 0:
                            row["runs"].append([var, nbytes[var], r["secs"], r["cpu"]])
                for row in rows.values():
                    if "error" in row:
                        row.pop("runs", None)
                        row.pop("digests", None)
                    results.append(row)
                log(f"  {m['key']:18s} {wname:12s} done ({time.time() - t_start:.0f} s)")
    finally:
        for w in workers.values():
            w.close()
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {_cpu_name()}",
        "python": platform.python_version(),
        "threads": THREADS,
        "single_pinned": os.environ.get("PIECEWORK_BENCH_PIN", "1") != "0"
        and hasattr(os, "sched_setaffinity")
        and len(os.sched_getaffinity(0)) > 1,
        "reps": reps,
        "quick": bool(args.quick),
        "load_before": load_before,
        "load_after": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "wall_secs": round(time.time() - t_start, 1),
        "repeat_texts": bool(args.repeat_texts),
        "workloads": {
            k: {
                "texts": len(v[0]),
                "bytes": sum(len(t.encode("utf-8")) for t in v[0]),
                "variants": len(v),
            }
            for k, v in workloads.items()
        },
        "skipped": skipped,
    }
    return {"meta": meta, "results": results}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


# --------------------------------------------------------------------------------------------
# Checking and reporting.
# --------------------------------------------------------------------------------------------


def check_and_rate(run: dict) -> list[dict]:
    """Attach `mbps` and `mismatch` (texts whose ids differ from the reference) to each row."""
    refs = {}
    by_model = {m["key"]: m for m in MODELS}
    for r in run["results"]:
        m = by_model.get(r["model"])
        if m and r["lib"] == m["ref"] and r.get("mode") == "single" and "digests" in r:
            refs[(r["model"], r["workload"])] = r["digests"]
    rows = []
    for r in run["results"]:
        if "workload" not in r:
            continue
        row = dict(r)
        ref = refs.get((r["model"], r["workload"]))
        if "digests" in r:
            if ref is None:
                row["mismatch"] = None
            else:
                # Every variant this library ran is checked against the reference's.
                row["mismatch"] = sum(
                    sum(a != b for a, b in zip(mine, theirs)) + abs(len(mine) - len(theirs))
                    for mine, theirs in zip(r["digests"], ref)
                    if mine is not None and theirs is not None
                )
            del row["digests"]
        if r.get("runs"):
            # The best timed run; bytes differ a little between variants.
            row["mbps"] = max(b / s for _, b, s, _ in r["runs"]) / 1e6
            row["cpu_mbps"] = max(b / max(c, 1e-9) for _, b, _, c in r["runs"]) / 1e6
            best_run = max(r["runs"], key=lambda x: x[1] / x[2])
            row["bytes"], row["secs"], row["cpu"] = best_run[1], best_run[2], best_run[3]
        rows.append(row)
    return rows


def label(lib: str, versions: dict) -> str:
    v = versions.get(lib)
    name = {"tokenizers-new": "tokenizers", "piecework-sp": "piecework"}.get(lib, lib)
    return f"{name} {v}" if v else name


def best(rows, model, workload, mode, lib):
    """The fastest matching API of `lib` for one cell; (row or None, any mismatch row)."""
    cands = [
        r
        for r in rows
        if r["model"] == model
        and r["workload"] == workload
        and r["mode"] == mode
        and r["lib"] == lib
    ]
    ok = [r for r in cands if "mbps" in r and not r.get("mismatch")]
    bad = [r for r in cands if "mbps" in r and r.get("mismatch")]
    err = [r for r in cands if "error" in r]
    return (
        (max(ok, key=lambda r: r["mbps"]) if ok else None),
        (bad[0] if bad else None),
        (err[0] if err else None),
    )


def render_markdown(run: dict, rows: list[dict]) -> str:
    meta = run["meta"]
    versions = {}
    for r in run["results"]:
        if r.get("version"):
            versions[r["lib"]] = r["version"]
    out = []
    out.append(
        f"Measured {meta['date']} on {meta['machine']}, Python {meta['python']}; "
        f"batch mode uses {meta['threads']} threads"
        + ("; single mode is pinned to one core" if meta.get("single_pinned") else "")
        + f"; best of {meta['reps']} runs after a "
        f"warm-up, "
        + (
            "every run on the same texts (--repeat-texts). "
            if meta.get("repeat_texts")
            else "each run on new texts, and one tokenizer instance per library and API: a "
            "cache helps only as far as words recur across texts, as in a pipeline. "
        )
        + f"Load average before/after: {_fmt_load(meta['load_before'])} / "
        f"{_fmt_load(meta['load_after'])} (the 2 cores are shared with other jobs: "
        "expect ±30 % noise or more)." + (" (smoke run: --quick)" if meta["quick"] else "")
    )
    out.append("")
    out.append(
        "Cells: MB/s of UTF-8 input (ids returned to Python as lists), and in brackets how "
        "many times faster piecework is (piecework ÷ that library). `✗ n/N` = n of N texts "
        "gave ids different from the reference (marked *ref*), so no speed is reported."
    )
    out.append("")
    wl = meta["workloads"]
    out.append(
        "Workloads: "
        + ", ".join(f"`{k}` {v['texts']} texts / {v['bytes'] / 1e6:.2f} MB" for k, v in wl.items())
        + " (per run)"
    )
    out.append("")
    by_model = {m["key"]: m for m in MODELS}
    models = [m["key"] for m in MODELS if any(r["model"] == m["key"] for r in rows)]
    for mk in models:
        m = by_model[mk]
        libs = [lib for lib in LIB_ORDER if lib in m["libs"]]
        present = [lib for lib in libs if any(r["model"] == mk and r["lib"] == lib for r in rows)]
        pw = "piecework-sp" if "piecework-sp" in m["libs"] else "piecework"
        out.append(f"### {mk} — {m['family']}")
        out.append("")
        heads = []
        for lib in present:
            h = label(lib, versions)
            if lib == m["ref"]:
                h += " *ref*"
            heads.append(h)
        out.append("| workload | mode | " + " | ".join(heads) + " |")
        out.append("|---|---|" + "---:|" * len(present))
        workloads = list(dict.fromkeys(r["workload"] for r in rows if r["model"] == mk))
        for w in workloads:
            for mode in ("single", "batch"):
                pwrow, _, _ = best(rows, mk, w, mode, pw)
                cells = []
                for lib in present:
                    ok, bad, err = best(rows, mk, w, mode, lib)
                    if ok:
                        c = f"{ok['mbps']:.2f}"
                        if lib.startswith("piecework") and ok["api"] != "encode":
                            c += f" `{ok['api']}`"
                        if pwrow and not lib.startswith("piecework"):
                            c += f" (×{pwrow['mbps'] / ok['mbps']:.2f})"
                        cells.append(c)
                    elif bad:
                        cells.append(f"✗ {bad['mismatch']}/{bad['texts']}")
                    elif err:
                        cells.append("error")
                    else:
                        cells.append("–")
                out.append(f"| {w} | {mode} | " + " | ".join(cells) + " |")
        out.append("")
        notes = []
        for r in run["results"]:
            if r["model"] == mk and "skip" in r:
                notes.append(f"{label(r['lib'], versions)}: skipped ({r['skip']})")
        for r in rows:
            if r["model"] == mk and "error" in r:
                notes.append(f"{r['lib']} `{r['api']}` on {r['workload']}: {r['error']}")
        for n in dict.fromkeys(notes):
            out.append(f"- {n}")
        if notes:
            out.append("")
    if meta["skipped"]:
        out.append(
            "Libraries not run: " + "; ".join(f"{k}: {v}" for k, v in meta["skipped"].items())
        )
        out.append("")
    loads = load_times(run)
    out.append(load_section(loads, versions))
    out.append(targets_section(rows, loads))
    return "\n".join(out)


def load_times(run: dict, key: str = "load_secs") -> dict:
    """(model, lib) -> median seconds from file to ready (load + first encode): wall time, or
    with `key="load_cpu_secs"` the CPU time of all the worker's threads."""
    return {(r["model"], r["lib"]): statistics.median(r[key]) for r in run["results"] if r.get(key)}


def load_section(loads: dict, versions: dict) -> str:
    if not loads:
        return ""
    # piecework's two front ends (Tokenizer, SentencePieceProcessor) never load the same
    # model here: one column.
    loads = {(m, "piecework" if lib == "piecework-sp" else lib): t for (m, lib), t in loads.items()}
    libs = [lib for lib in LIB_ORDER if any(k[1] == lib for k in loads)]
    out = [
        "### Load time",
        "",
        (
            "Milliseconds from the file to a tokenizer that has encoded one short text "
            f"({LOAD_TEXT!r}: lazy builds included), median of a few fresh loads per library, "
            "in turn; in brackets the peer's time ÷ piecework's (CPU times, all threads, are "
            "in results.json: piecework builds a `.tiktoken` model on two threads)."
        ),
        "",
        "| model | " + " | ".join(label(lib, versions) for lib in libs) + " |",
        "|---|" + "---:|" * len(libs),
    ]
    for m in MODELS:
        mk = m["key"]
        if not any(k[0] == mk for k in loads):
            continue
        pw = loads.get((mk, "piecework"))
        cells = []
        for lib in libs:
            t = loads.get((mk, lib))
            if t is None:
                cells.append("–")
                continue
            c = f"{t * 1e3:.1f}"
            if pw and not lib.startswith("piecework"):
                c += f" (×{t / pw:.2f})"
            cells.append(c)
        out.append(f"| {mk} | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def _fmt_load(load) -> str:
    return "?" if not load else ", ".join(f"{x:.1f}" for x in load)


TARGETS = [
    # (what, model, piecework lib, peer lib, mode, factor)
    ("WordPiece ≥2× tokie", "bert-base-uncased", "piecework", "tokie", "single", 2.0),
    (
        "WordPiece ≥3× tokenizers 1.0 per-text",
        "bert-base-uncased",
        "piecework",
        "tokenizers-new",
        "single",
        3.0,
    ),
    (
        "WordPiece batch ≥3× tokie batch",
        "bert-base-uncased",
        "piecework",
        "tokie",
        "batch",
        3.0,
    ),
    ("Unigram (t5) ≥2× tokie", "t5-small", "piecework", "tokie", "single", 2.0),
    ("Unigram (t5) ≥2× tokenizers 1.0", "t5-small", "piecework", "tokenizers-new", "single", 2.0),
    (
        "Unigram (xlnet) ≥3× sentencepiece",
        "xlnet-base-cased",
        "piecework-sp",
        "sentencepiece",
        "single",
        3.0,
    ),
    ("SP BPE ≥2× kitoken", "llama2", "piecework-sp", "kitoken", "single", 2.0),
    ("SP BPE ≥5× sentencepiece", "llama2", "piecework-sp", "sentencepiece", "single", 5.0),
    ("SP BPE ≥2× kitoken (Mistral)", "mistral-7b-v0.3", "piecework-sp", "kitoken", "single", 2.0),
    (
        "SP BPE ≥5× sentencepiece (Mistral)",
        "mistral-7b-v0.3",
        "piecework-sp",
        "sentencepiece",
        "single",
        5.0,
    ),
    ("GPT-2 ≥1.5× tiktoken", "gpt2", "piecework", "tiktoken", "single", 1.5),
    ("GPT-2 ≥2× tokenizers 1.0", "gpt2", "piecework", "tokenizers-new", "single", 2.0),
]


def paired_ratio(a: dict, b: dict) -> float | None:
    """Median over the timed runs of a's speed ÷ b's on the same texts (same round): a run pairs
    two measurements taken seconds apart, so a change of the machine's load between rounds
    cancels out, which the ratio of the two bests does not."""

    def rates(row: dict) -> dict:
        return {v: byt / secs for v, byt, secs, _ in row.get("runs", []) if secs > 0}

    ra, rb = rates(a), rates(b)
    common = sorted(set(ra) & set(rb))
    if not common:
        return None
    return statistics.median(ra[v] / rb[v] for v in common)


def targets_section(rows: list[dict], loads: dict | None = None) -> str:
    out = [
        "### Targets",
        "",
        (
            "Geometric mean over the workloads of piecework ÷ peer (same mode; single = one text "
            "at a time); `batch ≥1.7× single` compares piecework's batch (2 threads) with its own "
            "single loop. The CPU column divides CPU seconds instead of wall seconds (single-"
            "threaded runs only): steadier when other jobs share the cores. The paired column "
            "takes, per workload, the median over the timed runs of the two libraries' ratio in "
            "the same round (on the same texts, seconds apart), so that a change of the machine's "
            "load between rounds cancels out."
        ),
        "",
        "| target | measured (wall) | paired median | CPU time | met? |",
        "|---|---:|---:|---:|---|",
    ]
    workloads = sorted({r["workload"] for r in rows})
    for what, model, pw, peer, mode, factor in TARGETS:
        ratios, cpu, paired = [], [], []
        for w in workloads:
            a, _, _ = best(rows, model, w, mode, pw)
            b, _, _ = best(rows, model, w, mode, peer)
            if a and b:
                ratios.append(a["mbps"] / b["mbps"])
                cpu.append(a["cpu_mbps"] / b["cpu_mbps"])
                paired.append(paired_ratio(a, b))
        if ratios:
            out.append(_target_row(what, ratios, paired, factor, cpu))
        else:
            out.append(f"| {what} | not measured | | | – |")
    for model in ("bert-base-uncased", "t5-small", "gpt2", "llama2"):
        pw = "piecework-sp" if model == "llama2" else "piecework"
        ratios, paired = [], []
        for w in workloads:
            a, _, _ = best(rows, model, w, "batch", pw)
            b, _, _ = best(rows, model, w, "single", pw)
            if a and b:
                ratios.append(a["mbps"] / b["mbps"])
                paired.append(paired_ratio(a, b))
        what = f"batch ≥1.7× single ({model})"
        if ratios:
            out.append(_target_row(what, ratios, paired, 1.7))
        else:
            out.append(f"| {what} | not measured | | | – |")
    t = (loads or {}).get(("cl100k", "piecework"))
    if t is None:
        out.append("| 100k-piece model loads < 100 ms (cl100k) | not measured | | | – |")
    else:
        out.append(
            f"| 100k-piece model loads < 100 ms (cl100k) | {t * 1e3:.0f} ms | | | "
            f"{'yes' if t < 0.1 else 'no'} |"
        )
    out.append("")
    return "\n".join(out)


def _target_row(what, ratios, paired, factor, cpu=None) -> str:
    """One targets row: geometric means over the workloads; met when the best-of ratio is."""
    g = statistics.geometric_mean(ratios)
    pm = [p for p in paired if p]
    pcell = f"×{statistics.geometric_mean(pm):.2f}" if len(pm) == len(paired) else ""
    ccell = f"×{statistics.geometric_mean(cpu):.2f}" if cpu else ""
    return (
        f"| {what} | ×{g:.2f} (×{min(ratios):.2f}–×{max(ratios):.2f}) | {pcell} | {ccell} | "
        f"{'yes' if g >= factor else 'no'} |"
    )


def render_chart(rows: list[dict], path: Path, envs_python: list[str]) -> str:
    """Draw with whichever interpreter has matplotlib (installing it into the peer venv)."""
    data = [
        {k: r[k] for k in ("model", "lib", "workload", "mode", "mbps")}
        for r in rows
        if "mbps" in r and not r.get("mismatch")
    ]
    # Keep the fastest API per cell.
    cell = {}
    for r in data:
        k = (r["model"], r["lib"], r["workload"], r["mode"])
        if k not in cell or cell[k]["mbps"] < r["mbps"]:
            cell[k] = r
    tmp = Path(tempfile.mkdtemp(prefix="piecework-chart-")) / "chart.json"
    tmp.write_text(
        json.dumps(
            {"rows": list(cell.values()), "order": LIB_ORDER, "models": [m["key"] for m in MODELS]}
        )
    )
    for py in envs_python:
        r = subprocess.run(
            [py, str(Path(__file__).resolve()), "--chart", str(tmp), str(path)],
            check=False,
            capture_output=True,
            text=True,
        )
        if r.returncode == 0:
            return ""
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
    return f"chart not drawn: {last}"


def draw_chart(spec_path: str, out_path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    spec = json.loads(Path(spec_path).read_text())
    rows = spec["rows"]
    models = [m for m in spec["models"] if any(r["model"] == m for r in rows)]
    libs = [lib for lib in spec["order"] if any(r["lib"] == lib for r in rows)]
    colors = {lib: plt.cm.tab10(i) for i, lib in enumerate(libs)}
    colors["piecework-sp"] = colors.get("piecework", colors.get("piecework-sp"))
    names = {"piecework-sp": "piecework", "tokenizers-new": "tokenizers (newest)"}
    fig, axes = plt.subplots(len(models), 1, figsize=(13, 2.7 * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        mr = [r for r in rows if r["model"] == model]
        groups = list(dict.fromkeys((r["workload"], r["mode"]) for r in mr))
        mlibs = [lib for lib in libs if any(r["lib"] == lib for r in mr)]
        width = 0.8 / max(1, len(mlibs))
        for j, lib in enumerate(mlibs):
            xs, ys = [], []
            for i, g in enumerate(groups):
                for r in mr:
                    if (r["workload"], r["mode"]) == g and r["lib"] == lib:
                        xs.append(i + j * width)
                        ys.append(r["mbps"])
            ax.bar(xs, ys, width, label=names.get(lib, lib), color=colors[lib])
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
        ax.set_xticklabels([f"{w}\n{m}" for w, m in groups], fontsize=7)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        lo, hi = ax.get_ylim()
        # Under one decade there is no major tick to read: label the minor ones then.
        minor = "%g" if hi / max(lo, 1e-9) < 20 else ""
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter(minor))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_ylabel("MB/s (log)")
        ax.set_title(model, fontsize=10)
        ax.legend(fontsize=7, ncol=len(mlibs), loc="upper right")
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_path, dpi=80)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small texts, 1 repetition (smoke run)")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        help="keep models/libraries whose name contains this (repeatable)",
    )
    ap.add_argument(
        "--workload",
        action="append",
        default=[],
        help="keep workloads whose name contains this (repeatable)",
    )
    ap.add_argument("--size", type=int, default=500_000, help="bytes per workload")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions (best is kept)")
    ap.add_argument(
        "--repeat-texts",
        action="store_true",
        help="time every run on the same texts (by default each run gets texts no library "
        "has seen, so caches of earlier inputs do not count)",
    )
    ap.add_argument(
        "--no-pin",
        action="store_true",
        help="do not pin single-mode runs to one core (by default every thread of a worker "
        "is pinned to one core during a single-mode run)",
    )
    ap.add_argument("--out", default=str(HERE), help="folder for results.md/.json/.png")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--chart", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        run_worker(*args.worker)
        return
    if args.chart:
        draw_chart(*args.chart)
        return
    if args.no_pin:
        os.environ["PIECEWORK_BENCH_PIN"] = "0"  # the workers inherit it
    run = run_all(args)
    rows = check_and_rate(run)
    md = render_markdown(run, rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cpu = load_times(run, "load_cpu_secs")
    loads = [
        {
            "model": m,
            "lib": lib,
            "load_ms": round(t * 1e3, 2),
            "cpu_ms": round(cpu[m, lib] * 1e3, 2) if (m, lib) in cpu else None,
        }
        for (m, lib), t in load_times(run).items()
    ]
    (out / "results.json").write_text(
        json.dumps({"meta": run["meta"], "rows": rows, "loads": loads}, indent=1)
    )
    pys = [p for p in (str(PEER_VENV / "bin" / "python"), sys.executable) if Path(p).exists()]
    note = render_chart(rows, out / "results.png", pys)
    if note:
        md += f"\n{note}\n"
    else:
        md += "\n![speed chart](results.png)\n"
    (out / "results.md").write_text(md, encoding="utf-8")
    update_readme(out, md)
    print(md)


README_MARK = "<!-- compare.py replaces everything below this line -->"


def update_readme(out: Path, md: str) -> None:
    """Put the latest tables under the marker of benches/README.md (full runs into benches/ only)."""
    readme = HERE / "README.md"
    if out.resolve() != HERE or not readme.exists() or "(smoke run" in md:
        return
    text = readme.read_text(encoding="utf-8")
    if README_MARK in text:
        head = text.split(README_MARK)[0]
        readme.write_text(head + README_MARK + "\n\n" + md, encoding="utf-8")


if __name__ == "__main__":
    main()
