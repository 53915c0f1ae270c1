"""Staged copies against their unstaged plans: the same copy planned both ways, in one
process, taking turns.

The kernel stages two kinds of copy through per-thread scratch memory:

* transposes of 1- and 2-byte units (``staged-transpose``), against the register tiles
  that wider units keep (``tiled-transpose``): ``--dtypes``, n x n transposes;
* large interleaves of short source rows (``staged-interleave``: ViT patchify's 16x3
  tiles woven into blocks of the destination), against panels along the source
  (``small-inner-dim``): ``--images``, float32 (b, 3, s, s) images cut into 16x16
  patches, ``b s`` each (staged from 24 MiB).

A plan of either variant runs the other's loops when its ``variant`` is replaced,
everything else equal. This script times both plans of each copy, into a preallocated
output (``out=``) and into a fresh array per call (``alloc``), at 1 and 2 threads,
interleaved (the order alternating every round), and prints the medians and the paired
ratio unstaged / staged (above 1: the staged plan is faster). Into fresh pages a staged
interleave is lowered as its panels (the two rows are the same loops). Units the kernel
does not stage in transposes (4 and 8 bytes) are staged here for the comparison.

    python bench/staged_ab.py [--n 8192] [--rounds 15] [--dtypes uint8,uint16,float32]
    python bench/staged_ab.py --dtypes= --images "64 224,16 448"
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

UNSTAGED = {"staged-transpose": "tiled-transpose", "staged-interleave": "small-inner-dim"}


def sources(args) -> list[tuple[str, np.ndarray]]:
    """(label, strided source) of every copy asked for."""
    out = []
    for name in filter(None, args.dtypes.split(",")):
        dtype = np.dtype(name)
        x = (np.arange(args.n * args.n) % 251).astype(dtype).reshape(args.n, args.n)
        out.append((f"{dtype} {args.n}² transpose", x.T))
    rng = np.random.default_rng(0)
    for spec in filter(None, args.images.split(",")):
        b, s = (int(v) for v in spec.split())
        x = rng.random((b, 3, s, s), dtype=np.float32)
        view = x.reshape(b, 3, s // 16, 16, s // 16, 16).transpose(0, 2, 4, 3, 5, 1)
        out.append((f"ViT patchify ({b}, 3, {s}, {s})", view))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192, help="the transposes' side")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtypes", default="uint8,uint16", help="transposes of these")
    parser.add_argument("--images", default="", help='ViT patchify of float32 images: '
                        '"b s" comma-separated, e.g. "64 224,16 448"')
    args = parser.parse_args(argv)
    ra.set_jit_mode("eager")
    widths = {np.dtype(d).itemsize for d in filter(None, args.dtypes.split(","))}
    # Stage every unit size asked for (the planner's own choice is 1 and 2 bytes).
    plan.STAGED_UNITS = tuple(sorted(widths | set(plan.STAGED_UNITS)))
    print(f"{args.rounds} samples each, {plan.VECTOR_BYTES}-byte vectors\n")
    print("| copy | threads | into | staged GB/s | unstaged GB/s | unstaged / staged |")
    print("|---|---:|---|---:|---:|---:|")
    for label, src in sources(args):
        for threads in (1, 2):
            ra.set_num_threads(threads)
            staged = kernel.plan_copy(src.shape, src.strides, src.itemsize)
            if staged.variant not in UNSTAGED:
                print(f"| {label} | {threads} | not staged: {staged.reason} | | | |")
                continue
            unstaged = dataclasses.replace(staged, variant=UNSTAGED[staged.variant])
            out = np.zeros(src.shape, src.dtype)
            for into in ("out=", "alloc"):
                def call(k, into=into):
                    dst = out if into == "out=" else np.empty(src.shape, src.dtype)
                    kernel.copy_into(dst, src, k)
                    return dst
                for k in (staged, unstaged):
                    assert np.array_equal(call(k), src), k.variant
                timings = interleaved({"staged": lambda: call(staged),
                                       "unstaged": lambda: call(unstaged)},
                                      args.rounds, min_sample=0.0, number=1)
                speed = {k: 2 * src.nbytes / t.median / 1e9 for k, t in timings.items()}
                ratio = paired_ratio(timings["unstaged"], timings["staged"])
                print(f"| {label} | {threads} | {into} | {speed['staged']:.1f} | "
                      f"{speed['unstaged']:.1f} | {ratio:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
