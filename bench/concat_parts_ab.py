"""A concatenation's parts: one job of the copy kernel against a copy per part (#38).

In one process, interleaved (bench/timing.py), each call into a fresh output as the
notation makes it: two float32 inputs of 8 MiB copied into their slices by
``copy_into`` per part (a fork-join of the kernel's pool each: how concatenations ran
before) and by one ``copy_parts_into`` (one fork-join for both), numpy's concatenate
of the transposes beside them.

    PYTHONPATH=. python bench/concat_parts_ab.py [--rounds 15]

prints per layout the median of each and the paired ratios (above 1: the second is
faster).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import interleaved, paired_ratio  # noqa: E402

from rearrange import kernel  # noqa: E402


def cases(rng):
    """(name, the new output, its slices' (destination, source) pairs, numpy's call)."""
    x, y = rng.random((1024, 2048), np.float32), rng.random((1024, 2048), np.float32)
    # 'a b, a c -> (b + c) a': the output laid out (a, b + c), each input's rows into
    # its rows with gaps
    yield ("'(b + c) a': rows into gapped rows", lambda: np.empty((1024, 4096), np.float32),
           lambda o: [(o[:, :2048], x), (o[:, 2048:], y)],
           lambda: np.concatenate([x.T, y.T]))
    u, v = rng.random((2048, 1024), np.float32), rng.random((2048, 1024), np.float32)
    # 'b a, c a -> a (b + c)': the output laid out (b + c, a), each input one block
    yield ("'a (b + c)': blocks", lambda: np.empty((4096, 1024), np.float32),
           lambda o: [(o[:2048], u), (o[2048:], v)],
           lambda: np.concatenate([u.T, v.T], axis=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.05)
    args = parser.parse_args()
    for name, new, slices, numpy_call in cases(np.random.default_rng(0)):
        def per_part(new=new, slices=slices):
            for dst, src in slices(new()):
                kernel.copy_into(dst, src)

        def one_job(new=new, slices=slices):
            kernel.copy_parts_into(slices(new()))

        one_job()
        kernel.wait(120)            # the runners ready: the kernel's speed
        t = interleaved({"per part": per_part, "one job": one_job, "numpy": numpy_call},
                        args.rounds, args.min_sample)
        medians = {k: np.median(v.samples) * 1e6 for k, v in t.items()}
        print(f"{name}: copy_into per part {medians['per part']:.0f} us, "
              f"copy_parts_into {medians['one job']:.0f} us, numpy {medians['numpy']:.0f} us;"
              f" per part / one job {paired_ratio(t['per part'], t['one job']):.3f}x,"
              f" numpy / one job {paired_ratio(t['numpy'], t['one job']):.2f}x,"
              f" numpy / per part {paired_ratio(t['numpy'], t['per part']):.2f}x")


if __name__ == "__main__":
    main()
