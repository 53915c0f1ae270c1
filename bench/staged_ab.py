"""Staged against register-tile transposes: the same copy planned both ways, in one
process, taking turns.

The kernel stages transposes of 1- and 2-byte units (``staged-transpose``) and moves
wider ones through register tiles (``tiled-transpose``); a plan of either variant runs
the other's loops when its ``variant`` is replaced, everything else equal. This script
times both plans of each copy, into a preallocated output (``out=``) and into a fresh
array per call (``alloc``), at 1 and 2 threads, interleaved (the order alternating
every round), and prints the medians and the paired ratio tiles / staged (above 1: the
staged plan is faster). Units the kernel does not stage (4 and 8 bytes) are staged here
for the comparison (``--units``).

    python bench/staged_ab.py [--n 8192] [--rounds 15] [--dtypes uint8,uint16,float32]
    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES= python bench/staged_ab.py   # AVX2 code
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
import rearrange.kernel as kernel  # noqa: E402
from rearrange.kernel import plan  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192, help="the square's side")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtypes", default="uint8,uint16")
    args = parser.parse_args(argv)
    ra.set_jit_mode("eager")
    dtypes = [np.dtype(d) for d in args.dtypes.split(",")]
    # Stage every unit size asked for (the planner's own choice is 1 and 2 bytes).
    plan.STAGED_UNITS = tuple(sorted({d.itemsize for d in dtypes} | set(plan.STAGED_UNITS)))
    print(f"{args.n}x{args.n} transposes, {args.rounds} samples each, "
          f"{plan.VECTOR_BYTES}-byte vectors\n")
    print("| dtype | threads | into | staged GB/s | tiles GB/s | tiles / staged |")
    print("|---|---:|---|---:|---:|---:|")
    for dtype in dtypes:
        x = (np.arange(args.n * args.n) % 251).astype(dtype).reshape(args.n, args.n)
        src = x.T
        for threads in (1, 2):
            ra.set_num_threads(threads)
            staged = kernel.plan_copy(src.shape, src.strides, dtype.itemsize)
            if staged.variant != "staged-transpose":
                print(f"| {dtype} | {threads} | not staged: {staged.reason} | | | |")
                continue
            tiles = dataclasses.replace(staged, variant="tiled-transpose")
            out = np.zeros(src.shape, dtype)
            for into in ("out=", "alloc"):
                def call(k, into=into):
                    dst = out if into == "out=" else np.empty(src.shape, dtype)
                    kernel.copy_into(dst, src, k)
                    return dst
                for k in (staged, tiles):
                    assert np.array_equal(call(k), src), k.variant
                timings = interleaved({"staged": lambda: call(staged),
                                       "tiles": lambda: call(tiles)},
                                      args.rounds, min_sample=0.0, number=1)
                speed = {k: 2 * x.nbytes / t.median / 1e9 for k, t in timings.items()}
                ratio = paired_ratio(timings["tiles"], timings["staged"])
                print(f"| {dtype} | {threads} | {into} | {speed['staged']:.1f} | "
                      f"{speed['tiles']:.1f} | {ratio:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
