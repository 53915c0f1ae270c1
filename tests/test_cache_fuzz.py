"""The differential cache-state fuzz (tests/cache_fuzz.py) in a subprocess: a crash of
native code fails the test instead of killing the test run. Each seed is thousands of
calls with caches never cleared; see that module for what is mixed and what the oracles
are. A failure prints the seed and the calls before it: replay with
``python tests/cache_fuzz.py --seed N --calls M``."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

DRIVER = pathlib.Path(__file__).with_name("cache_fuzz.py")
# CI runs more calls than a local run (HYPOTHESIS_PROFILE=ci is set by .ci/run).
CALLS = 2000 if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else 800


# The quick tier (-m "not slow") runs one seed; the full suite all four.
@pytest.mark.parametrize("seed", [1, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (2, 3, 4))])
def test_no_wrong_result_and_no_crash_in_any_cache_state(seed: int) -> None:
    result = subprocess.run(
        [sys.executable, str(DRIVER), "--seed", str(seed), "--calls", str(CALLS)],
        capture_output=True, text=True, timeout=1200,
    )
    assert result.returncode == 0, (
        f"exit code {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}")
    assert "0 wrong results" in result.stdout
