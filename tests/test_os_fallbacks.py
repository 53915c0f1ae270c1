"""The kernel where the operating system lacks a call it uses: ``madvise`` (populating
pages, asking for huge pages), ``mincore`` (is a destination fresh?) and
``os.sched_getaffinity`` (how many cores). Each has a fallback; a fresh interpreter with
those calls hidden must copy exactly what numpy copies, through the compiled kernel,
taking the fallbacks (checked through each lookup's answer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rearrange.kernel import pages

HIDE_CALLS = """
import ctypes, os
_real_cdll = ctypes.CDLL

class LibcWithout:
    # libc as ctypes sees it, minus the calls in HIDDEN (as on a system without them)
    def __init__(self, *args, **kwargs):
        self._lib = _real_cdll(*args, **kwargs)

    def __getattr__(self, name):
        if name in HIDDEN:
            raise AttributeError(name)
        return getattr(self._lib, name)

ctypes.CDLL = LibcWithout
if "sched_getaffinity" in HIDDEN:
    del os.sched_getaffinity
"""

CHECK = """
import json
import numpy as np
import torch
import rearrange as ra
from rearrange.kernel import builds, pages, threads

builds.set_jit_mode("eager")
fresh = np.empty(32 << 20, np.uint8)          # a fresh mapping: mincore would say so
rng = np.random.default_rng(0)
results = {}
cases = [("float32", (4096, 2048), "h w -> (w h)"),
         ("uint8", (64, 224, 224, 3), "b h w c -> b (c h w)"),
         ("float64", (8, 16, 256, 64), "b h t d -> b t (h d)")]
for dtype, shape, pattern in cases:
    x = rng.integers(0, 250, shape).astype(dtype)
    want = np.ascontiguousarray(np.asarray(__import__("einops").rearrange(x, pattern)))
    got = ra.rearrange(x, pattern)                              # numpy's fresh np.empty
    got_torch = ra.rearrange(torch.from_numpy(x), pattern).numpy()   # torch.empty
    results[pattern] = bool(np.array_equal(got, want) and np.array_equal(got_torch, want))
print(json.dumps({
    "equal": results,
    "runners": [builds.status(f, u) for f, u in (("transpose", 4), ("tiles", 1), ("rows", 8))],
    "madvise_address": pages.madvise_address(),
    "untouched": pages.untouched(fresh.ctypes.data, fresh.nbytes),
    "huge_pages": pages.advise_huge_pages(fresh.ctypes.data, fresh.nbytes),
    "threads": threads._default_threads(),
    "cpu_count": os.cpu_count(),
}))
"""


def run_without(hidden: set[str]) -> dict:
    script = f"HIDDEN = {sorted(hidden)!r}\n" + HIDE_CALLS + textwrap.dedent(CHECK)
    env = {k: v for k, v in os.environ.items() if k != "REARRANGE_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hides Linux calls")
def test_without_madvise_the_kernel_writes_a_byte_per_page():
    # mincore still says the destinations are fresh, so the copies populate their pages:
    # without madvise, by writing to each
    out = run_without({"madvise"})
    assert all(out["equal"].values()), out
    assert out["runners"] == ["ready"] * 3
    assert out["madvise_address"] == 0
    assert out["untouched"] is True
    assert out["huge_pages"] is False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hides Linux calls")
def test_without_any_of_the_calls_the_kernel_still_copies():
    out = run_without({"madvise", "mincore", "sched_getaffinity"})
    assert all(out["equal"].values()), out
    assert out["runners"] == ["ready"] * 3
    assert out["madvise_address"] == 0
    assert out["untouched"] is False            # not known: treated as touched
    assert out["huge_pages"] is False
    assert out["threads"] == out["cpu_count"]


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage"),
                    reason="no transparent huge pages")
def test_huge_page_advice_covers_only_whole_aligned_huge_pages():
    buf = np.arange(8 << 20, dtype=np.int64).astype(np.uint8)
    before = buf.copy()
    addr = buf.ctypes.data
    start = -(-addr // pages.HUGE_PAGE) * pages.HUGE_PAGE
    # [start + 1, start + 1 + 2 MiB) holds no whole aligned huge page: nothing to advise
    assert pages.advise_huge_pages(start + 1, pages.HUGE_PAGE) is False
    assert pages.advise_huge_pages(start, pages.HUGE_PAGE) is True
    assert np.array_equal(buf, before)          # advice only: nothing written
