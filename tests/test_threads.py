"""Concurrency: many threads encode while another reconfigures; every result must be exactly
one configuration's (computed serially first), never a mix and never a crash. And a forked
child must be able to run batch calls (rayon's global pool does not survive a fork)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading

import piecework
import pytest
from piecework.cli import default_tokenizer_path
from strategies import COMBINING, FRAGMENTS, WHITESPACE

WORKERS = 6
ROUNDS = 40


def _texts(seed: int, n: int) -> list:
    rng = random.Random(seed)
    pool = FRAGMENTS + WHITESPACE + COMBINING
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(n)]


def _key(enc) -> tuple:
    return (tuple(enc.ids), tuple(enc.attention_mask), tuple(enc.tokens), tuple(enc.offsets))


# The two settings the toggler flips, one swap each; a call may see any of the four
# combinations, but always one whole snapshot.
CONFIGS = [(p, t) for p in (False, True) for t in (False, True)]


def _configure(tok, config) -> None:
    padded, truncated = config
    if padded:
        tok.enable_padding(pad_to_multiple_of=16, pad_token="[PAD]")
    else:
        tok.no_padding()
    if truncated:
        tok.enable_truncation(24, stride=4)
    else:
        tok.no_truncation()


@pytest.fixture(scope="module")
def tok():
    return piecework.Tokenizer.from_file(default_tokenizer_path())


def test_encode_while_reconfiguring(tok):
    batches = [_texts(seed, 8) for seed in range(12)]
    singles = _texts(99, 24)
    expected = {}
    for config in CONFIGS:
        _configure(tok, config)
        expected[config] = (
            [tuple(_key(e) for e in tok.encode_batch(b)) for b in batches],
            [_key(tok.encode(t)) for t in singles],
        )
    assert len({str(v) for v in expected.values()}) == 4  # all four are distinguishable
    batch_ok = [{expected[c][0][i] for c in CONFIGS} for i in range(len(batches))]
    single_ok = [{expected[c][1][i] for c in CONFIGS} for i in range(len(singles))]

    failures: list = []
    done = threading.Event()

    def worker(wid: int) -> None:
        rng = random.Random(wid)
        try:
            for _ in range(ROUNDS):
                if rng.random() < 0.5:
                    i = rng.randrange(len(batches))
                    got = tuple(_key(e) for e in tok.encode_batch(batches[i]))
                    ok = got in batch_ok[i]
                else:
                    i = rng.randrange(len(singles))
                    got = _key(tok.encode(singles[i]))
                    ok = got in single_ok[i]
                if not ok:
                    failures.append((wid, i, got))
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append((wid, "exception", repr(e)))

    def toggler() -> None:
        rng = random.Random(1234)
        while not done.is_set():
            if rng.random() < 0.5:
                tok.enable_padding(pad_to_multiple_of=16)
            else:
                tok.no_padding()
            if rng.random() < 0.5:
                tok.enable_truncation(24, stride=4)
            else:
                tok.no_truncation()
            _ = tok.padding, tok.truncation

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
    flipper = threading.Thread(target=toggler)
    flipper.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    done.set()
    flipper.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert not failures, failures[:3]
    _configure(tok, (False, False))


def test_concurrent_readers_share_one_tokenizer(tok):
    _configure(tok, (False, False))
    texts = _texts(7, 200)
    expected = [e.ids for e in tok.encode_batch(texts)]
    results: dict = {}

    def run(k: int) -> None:
        results[k] = (
            [tok.encode(t).ids for t in texts]
            if k % 2
            else [e.ids for e in tok.encode_batch(texts)]
        )

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert all(results[k] == expected for k in range(4))


def _run_fork_script(script: str, *args: str, env: dict | None = None) -> None:
    """Run `script` in a fresh interpreter; it exits non-zero when its forked child failed."""
    r = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        timeout=180,
        check=False,
        env=env,
    )
    assert r.returncode == 0, (r.returncode, r.stderr.decode()[-2000:])
    assert b"fork-ok" in r.stdout


# The scripts' common part: `in_child(check)` forks, runs `check` in the child (which must
# return True) and exits this process with the child's code when it failed.
_IN_CHILD = """
import os, sys
import piecework

def in_child(check):
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if check() else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(code)
"""

FORK_SCRIPT = _IN_CHILD + textwrap.dedent(
    """
    from piecework.cli import default_tokenizer_path

    tok = piecework.Tokenizer.from_file(default_tokenizer_path())
    texts = ["hello world number %d, with some more words" % i for i in range(3000)]
    parent = [e.ids for e in tok.encode_batch(texts)]  # the parent's pool is running now

    def child(threads):
        if threads:
            piecework.set_num_threads(threads)
        ids = [e.ids for e in tok.encode_batch(texts)]
        return ids == parent and tok.decode_batch(ids[:100]) == tok.decode_batch(parent[:100])

    for threads in (0, 1):
        in_child(lambda: child(threads))
    # the parent still works after forking
    assert [e.ids for e in tok.encode_batch(texts)] == parent
    print("fork-ok")
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork on this platform")
def test_batch_after_fork():
    _run_fork_script(FORK_SCRIPT)


SP_FORK_SCRIPT = _IN_CHILD + textwrap.dedent(
    """
    sp = piecework.SentencePieceProcessor(model_file=sys.argv[1])
    texts = ["hello world number %d, with some more words" % i for i in range(3000)]
    docs = [" ".join(texts[i::4]) for i in range(4)]  # few long texts: split by size
    parent = sp.encode(texts), sp.encode(docs), sp.encode(docs, out_type=str)

    def child():
        got = sp.encode(texts), sp.encode(docs), sp.encode(docs, out_type=str)
        return got == parent and sp.decode(got[1]) == sp.decode(parent[1])

    in_child(child)
    print("fork-ok")
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork on this platform")
def test_sentencepiece_batch_after_fork():
    from oracle import data_path

    model = data_path("xlnet-base-cased", "spiece.model")
    _run_fork_script(SP_FORK_SCRIPT, str(model))


TIKTOKEN_FORK_SCRIPT = _IN_CHILD + textwrap.dedent(
    """
    import base64

    # A `.tiktoken` file: every byte, then pairs of letters (its load builds the vocabulary
    # and the merges side by side in the pool).
    letters = [bytes([a, b]) for a in range(97, 123) for b in range(97, 123)]
    tokens = [bytes([b]) for b in range(256)] + letters
    data = b"".join(base64.b64encode(t) + b" %d\\n" % r for r, t in enumerate(tokens))
    text = "hello world, some more words"
    parent = piecework.Tokenizer.from_tiktoken(data, r"\\S+", {}).encode_ids(text)
    in_child(lambda: piecework.Tokenizer.from_tiktoken(data, r"\\S+", {}).encode_ids(text) == parent)
    print("fork-ok")
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork on this platform")
def test_tiktoken_load_after_fork():
    _run_fork_script(TIKTOKEN_FORK_SCRIPT, env={**os.environ, "PIECEWORK_NUM_THREADS": "2"})
