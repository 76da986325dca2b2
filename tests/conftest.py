"""Shared test configuration: the shared data fixture, hypothesis profiles, the sweep switch.

Helpers for test modules live in `oracle.py` (data_path, compare_encodings) and `strategies.py`
(hypothesis strategies for Unicode corner cases); import them directly.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from oracle import DATA_DIR, SWEEP

# `ci`: bounded, the default. `sweep`: large, for a manual run (PIECEWORK_SWEEP=1).
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "sweep",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("sweep" if SWEEP else "ci"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sweep: a large differential sweep, run only with PIECEWORK_SWEEP=1"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if SWEEP:
        return
    skip = pytest.mark.skip(reason="large sweep: set PIECEWORK_SWEEP=1 to run it")
    for item in items:
        if "sweep" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def DATA() -> Path:
    """The shared data folder (../shared/data beside the repo); skips when it is absent."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"shared test data not found at {DATA_DIR} (expected ../shared/data)")
    return DATA_DIR
