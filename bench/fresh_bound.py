"""How close can a transpose into fresh pages come to the limit? Its ways side by side.

A transpose's stores land a line at a time across many destination rows, so it cannot
write each new page while the kernel's zeroing of it is still in the caches, as a
contiguous copy does; ``copy_into`` populates the result's pages first
(``MADV_POPULATE_WRITE`` over the copy's threads) and then streams past the caches
(``bench/fresh_ab.py`` compares it with writing into the pages as they fault). This
script times, at 2 threads, in one process taking turns (``--rounds`` samples of
``--min-sample`` seconds each), for the copies that populate first:

* ``limit``: the fastest contiguous copy of the same bytes into a fresh array (numpy's,
  or rearrange's memcpy at 2 threads);
* ``faults 1t`` / ``faults 2t``: the result's page faults alone (populated by one thread,
  or by two, each half), nothing copied;
* ``copy alone``: the transpose into a destination populated long before (the copy
  without any page fault);
* ``as called``: the transpose as users call it (``copy_into`` into a fresh result);
* ``pipelined``: one thread populates the result a band at a time (the destination's
  first dim cut in ``--bands``), the other transposes each band once it is populated,
  and the first joins in when it has populated all;
* ``band by band``: each thread takes the next band, populates it, then transposes it.

The last two run the kernel at one thread per band. Each way's time is also given as
the limit's share of it (the harness's "of limit").

    python bench/fresh_bound.py [--rounds 11] [--bands 8] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fresh_ab import cases, populate_pages  # noqa: E402
from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import kernel  # noqa: E402

THREADS = 2


def in_threads(*jobs) -> None:
    """Run each job on a thread of its own and wait for all."""
    threads = [threading.Thread(target=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def populate_halves(dst: np.ndarray) -> None:
    """dst's pages populated by two threads, each half of its first dim."""
    half = dst.shape[0] // 2
    in_threads(lambda: populate_pages(dst[:half]), lambda: populate_pages(dst[half:]))


def banded(src: np.ndarray, bands: int, pipelined: bool) -> np.ndarray:
    """A fresh result written band by band (bands of its first dim), the kernel at one
    thread per band: ``pipelined``, one thread populates every band in order and the
    other copies behind it; else each thread populates, then copies, the next band."""
    dst = np.empty(src.shape, src.dtype)
    edges = np.linspace(0, src.shape[0], bands + 1).astype(int)
    populated = [threading.Event() for _ in range(bands)]
    lock, taken = threading.Lock(), [0]

    def take() -> int:
        with lock:
            taken[0] += 1
            return taken[0] - 1

    def copy_bands(populating: bool) -> None:
        while (band := take()) < bands:
            part = slice(edges[band], edges[band + 1])
            if populating:
                populate_pages(dst[part])
            else:
                populated[band].wait()
            kernel.copy_into(dst[part], src[part])

    def populate_then_copy() -> None:
        for band in range(bands):
            populate_pages(dst[edges[band]:edges[band + 1]])
            populated[band].set()
        copy_bands(populating=False)

    ra.set_num_threads(1)
    try:
        if pipelined:
            in_threads(populate_then_copy, lambda: copy_bands(populating=False))
        else:
            in_threads(lambda: copy_bands(populating=True),
                       lambda: copy_bands(populating=True))
    finally:
        ra.set_num_threads(THREADS)
    return dst


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--min-sample", type=float, default=0.2)
    parser.add_argument("--bands", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    args = parser.parse_args(argv)
    ra.set_jit_mode("eager")
    ways = ("faults 1t", "faults 2t", "copy alone", "as called", "pipelined", "band by band")
    print(f"| copy | limit, ms | {' | '.join(f'{w}, ms (of limit)' for w in ways)} | "
          f"as called / pipelined, / band by band (paired) |")
    print(f"|---|---:|{'---:|' * len(ways)}---|")
    for name, src in cases(np.random.default_rng(0), args.quick).items():
        ra.set_num_threads(THREADS)
        plan = kernel.plan_copy(src.shape, src.strides, src.itemsize)
        if plan.variant not in kernel.POPULATE_FIRST:
            continue
        flat = np.ascontiguousarray(src).reshape(-1)    # the limit's: the same bytes
        populated_long_before = np.empty(src.shape, src.dtype)
        populated_long_before.fill(0)

        def faults(populate):
            dst = np.empty(src.shape, src.dtype)
            populate(dst)
            return dst

        def as_called():
            dst = np.empty(src.shape, src.dtype)
            kernel.copy_into(dst, src)
            return dst

        calls = {"limit numpy": lambda: flat.copy(),
                 "limit rearrange": lambda: ra.rearrange(flat, "n -> n", copy=True),
                 "faults 1t": lambda: faults(populate_pages),
                 "faults 2t": lambda: faults(populate_halves),
                 "copy alone": lambda: kernel.copy_into(populated_long_before, src),
                 "as called": as_called,
                 "pipelined": lambda: banded(src, args.bands, pipelined=True),
                 "band by band": lambda: banded(src, args.bands, pipelined=False)}
        for way in ("as called", "pipelined", "band by band"):
            assert np.array_equal(calls[way](), src), way
        t = interleaved(calls, args.rounds, min_sample=args.min_sample)
        limit = min(t["limit numpy"].median, t["limit rearrange"].median)
        cells = " | ".join(f"{t[w].median * 1e3:.1f} ({limit / t[w].median:.0%})" for w in ways)
        ratios = ", ".join(f"{paired_ratio(t['as called'], t[w]):.2f}"
                           for w in ("pipelined", "band by band"))
        print(f"| {name} | {limit * 1e3:.1f} | {cells} | {ratios} |", flush=True)


if __name__ == "__main__":
    main()
