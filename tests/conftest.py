"""Shared test set-up: Hypothesis profiles and a guard that CI tests the built wheel."""

from __future__ import annotations

import os
import pathlib

import hypothesis
import pytest

# The kernel's differential tests must run the compiled loops, not numpy's copy while
# they compile in the background: the suite compiles in the call (tests of the
# background mode start their own processes with REARRANGE_JIT unset).
os.environ.setdefault("REARRANGE_JIT", "eager")

import rearrange  # noqa: E402

# "dev" keeps a local run quick; "ci" (set by .ci/run) runs thousands of examples;
# "quick" is the quick tier's (``pytest -m "not slow"`` with no HYPOTHESIS_PROFILE set,
# see pytest_configure): fewer drawn examples, every explicit @example still runs.
hypothesis.settings.register_profile("dev", max_examples=100, deadline=None)
hypothesis.settings.register_profile(
    "ci", max_examples=400, deadline=None, print_blob=True, derandomize=False
)
hypothesis.settings.register_profile("quick", max_examples=40, deadline=None)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def pytest_report_header(config: pytest.Config) -> str:
    return f"rearrange {rearrange.__version__} from {pathlib.Path(rearrange.__file__).parent}"


def pytest_configure(config: pytest.Config) -> None:
    quick_tier = " ".join(str(config.getoption("markexpr", "") or "").split()) == "not slow"
    if quick_tier and "HYPOTHESIS_PROFILE" not in os.environ:
        hypothesis.settings.load_profile("quick")
    if os.environ.get("REARRANGE_REQUIRE_INSTALLED"):
        package = pathlib.Path(rearrange.__file__).resolve().parent
        if package.parent == REPO_ROOT:
            raise pytest.UsageError(
                f"testing the source tree ({package}) instead of the installed wheel"
            )


@pytest.fixture
def two_threads():
    """The copy kernel at two threads for the test, the caller's count restored after."""
    from rearrange import kernel

    before = kernel.get_num_threads()
    kernel.set_num_threads(2)
    yield
    kernel.set_num_threads(before)
