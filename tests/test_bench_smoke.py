"""The bench harness's own pieces (benches/compare.py): workloads, id checks, batch shapes.

The timings themselves are not tested (too slow and noisy for CI); these check that what the
bench compares is the same text for everyone and that a mismatch is counted, not hidden."""

import importlib.util
from pathlib import Path

import pytest

COMPARE = Path(__file__).resolve().parent.parent / "benches" / "compare.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("bench_compare", COMPARE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_are_disjoint_stretches_cut_at_line_ends(compare):
    text = "".join(f"line {i} é\n" for i in range(20000))
    c = compare.Corpus("t", text)
    sets = c.docs(20_000, 3_000, 3)
    assert len(sets) == 3 and not c.wrapped
    for docs in sets:
        assert sum(len(d.encode("utf-8")) for d in docs) >= 20_000
        # Cut at line ends, never inside a line.
        assert all(d.endswith("\n") for d in docs)
    # Consecutive stretches of the corpus, each used once: in order of position they tile
    # a prefix of the text.
    every = sorted((d for docs in sets for d in docs), key=text.index)
    assert text.startswith("".join(every))


def test_line_sets_share_no_line_and_stop_at_the_limit(compare):
    text = "".join(f"w{i} x\n\n   \n" for i in range(3000))
    c = compare.Corpus("t", text)
    sets = c.lines(100, 4)
    assert not c.wrapped
    seen = set()
    for lines in sets:
        assert all(line.strip() for line in lines)
        assert 100 <= sum(len(x) for x in lines) < 100 + 10
        assert seen.isdisjoint(lines)
        seen.update(lines)


def test_a_small_corpus_wraps_around_and_says_so(compare):
    c = compare.Corpus("t", "a b\nc d\n")
    sets = c.lines(40, 2)
    assert c.wrapped
    assert all(sum(len(x) for x in s) >= 40 for s in sets)


def test_flat_batch_results_split_back_into_texts(compare):
    ids = [1, 2, 3, 4, 5]
    assert compare.as_lists((ids, [0, 2, 2, 5])) == [[1, 2], [], [3, 4, 5]]
    assert compare.as_lists([[1], [2, 3]]) == [[1], [2, 3]]


def test_a_mismatch_is_counted_and_gets_no_speed(compare):
    d = compare.digest
    good = [d([1, 2]), d([3])]
    other = [d([5]), d([6, 7])]
    base = {"model": "llama2", "workload": "w", "texts": 2}

    def row(lib, secs, digests):
        # Variant 0 is the warm-up's (checked, not timed), variant 1 the timed run's.
        runs = [[1, 10, secs, 1.0]]
        return {**base, "lib": lib, "mode": "single", "runs": runs, "digests": digests}

    run = {
        "results": [
            row("sentencepiece", 1.0, [good, other]),
            row("kitoken", 0.5, [good, other]),
            # Right on the warm-up's texts, wrong on the timed run's: still a mismatch.
            row("piecework-sp", 0.1, [good, [d([5]), d([6])]]),
        ]
    }
    rows = {r["lib"]: r for r in compare.check_and_rate(run)}
    assert rows["kitoken"]["mismatch"] == 0
    assert rows["kitoken"]["mbps"] == pytest.approx(10 / 0.5 / 1e6)
    assert rows["piecework-sp"]["mismatch"] == 1
    ok, bad, _ = compare.best(list(rows.values()), "llama2", "w", "single", "piecework-sp")
    assert ok is None and bad is not None
