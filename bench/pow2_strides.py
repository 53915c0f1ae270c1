"""Power-of-two strides against their neighbours: the same kind of copy with source rows
a power of two bytes apart and a little further, in one process, taking turns.

A tiled transpose reads 16 source rows at a time (float32), part of a line of each in
turn; rows a multiple of 4 KiB apart (8192 float32: 32 KiB) fall in the same L1 cache
set, so the lines read ahead of each row evict each other. This script times float32
transposes of n² and of a neighbour whose rows are whole lines but not a power of two
apart (uint8 too: staged transposes, 8 source rows at a time), and the full
reversal of 64⁴ beside shapes one longer in one dim, into a preallocated output at 1 and
2 threads (GB/s, read + write; the speed ratio is paired against the power-of-two case,
per byte moved).

    python bench/pow2_strides.py [--n 8192] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import kernel  # noqa: E402


def cases(n: int, side: int) -> dict[str, tuple[str, np.ndarray]]:
    """label -> (group, strided source): each group's first entry has power-of-two
    strides, the others are its neighbours."""
    rng = np.random.default_rng(0)
    out = {}
    for m in (n, n + 64):
        x = rng.random((m, m), dtype=np.float32)
        out[f"transpose float32 {m}²"] = ("transpose", x.T)
    for m in (n, n + 64):
        x = rng.integers(0, 255, (m, m), dtype=np.uint8)
        out[f"transpose uint8 {m}²"] = ("transpose uint8", x.T)
    for shape in ((side,) * 4, (side, side, side + 1, side), (side + 1, side, side, side)):
        x = rng.random(shape, dtype=np.float32)
        out[f"full reversal float32 {shape}"] = ("reversal", x.transpose(3, 2, 1, 0))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192, help="the transposes' power of two")
    parser.add_argument("--side", type=int, default=64, help="the reversal's power of two")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-sample", type=float, default=0.2)
    args = parser.parse_args(argv)
    ra.set_jit_mode("eager")
    sources = cases(args.n, args.side)
    print("| copy | threads | GB/s | vs the power-of-two case (paired) |")
    print("|---|---:|---:|---:|")
    for threads in (1, 2):
        ra.set_num_threads(threads)
        calls, first = {}, {}
        for label, (group, src) in sources.items():
            out = np.empty(src.shape, src.dtype)
            k = kernel.plan_copy(src.shape, src.strides, src.itemsize)
            kernel.copy_into(out, src, k)
            assert np.array_equal(out, src), label
            calls[label] = lambda out=out, src=src, k=k: kernel.copy_into(out, src, k)
            first.setdefault(group, label)
        t = interleaved(calls, args.rounds, min_sample=args.min_sample)
        for label, (group, src) in sources.items():
            gbps = 2 * src.nbytes / t[label].median / 1e9
            # speed over the power-of-two case's: per-round time ratio, per byte moved
            ratio = paired_ratio(t[first[group]], t[label]) * src.nbytes / \
                sources[first[group]][1].nbytes
            print(f"| {label} | {threads} | {gbps:.1f} | {ratio:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
