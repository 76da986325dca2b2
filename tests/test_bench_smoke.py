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


def test_chunks_cover_a_prefix_in_order(compare):
    text = "".join(f"line {i} é\n" for i in range(5000))
    docs = compare._chunks(text, 20_000, 3_000)
    joined = "".join(docs)
    assert text.startswith(joined)
    assert len(joined.encode("utf-8")) >= 20_000
    # Cut at line ends, never inside a line.
    assert all(d.endswith("\n") for d in docs)


def test_lines_skip_blank_lines_and_stop_at_the_limit(compare):
    text = "a b\n\n   \nc d\n" * 100
    lines = compare._lines(text, 30)
    assert all(line.strip() for line in lines)
    assert sum(len(x) for x in lines) >= 30
    assert len(lines) < 100


def test_flat_batch_results_split_back_into_texts(compare):
    ids = [1, 2, 3, 4, 5]
    assert compare.as_lists((ids, [0, 2, 2, 5])) == [[1, 2], [], [3, 4, 5]]
    assert compare.as_lists([[1], [2, 3]]) == [[1], [2, 3]]


def test_a_mismatch_is_counted_and_gets_no_speed(compare):
    d = compare.digest
    good = [d([1, 2]), d([3])]
    base = {"model": "llama2", "workload": "w", "bytes": 10, "texts": 2, "cpu": 1.0}
    run = {
        "results": [
            {**base, "lib": "sentencepiece", "mode": "single", "secs": 1.0, "digests": good},
            {**base, "lib": "kitoken", "mode": "single", "secs": 0.5, "digests": good},
            {
                **base,
                "lib": "piecework-sp",
                "mode": "single",
                "secs": 0.1,
                "digests": [d([1, 2]), d([4])],
            },
        ]
    }
    rows = {r["lib"]: r for r in compare.check_and_rate(run)}
    assert rows["kitoken"]["mismatch"] == 0
    assert rows["piecework-sp"]["mismatch"] == 1
    ok, bad, _ = compare.best(list(rows.values()), "llama2", "w", "single", "piecework-sp")
    assert ok is None and bad is not None
