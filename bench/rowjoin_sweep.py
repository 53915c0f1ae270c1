"""The row assembly's thresholds (rearrange/kernel/rowjoin.py, the "row assembly" of
rearrange/backends/ndarray.py), each measured in one process, interleaved
(bench/timing.py), against the path it replaces:

* ``--part sizes``: the runner / numpy's way (slabs or one-thread calls) at 2 threads
  (and pack's at 1), repeat ``b t c -> b t r c`` (rows of 4 x 256 B) and pack ``b *``
  (rows of 256 + 128 + 384 B), 48 KiB to 64 MiB of output: ROW_JOIN_MIN_BYTES and
  ROW_JOIN_ONE_THREAD_MIN_BYTES;
* ``--part streaming``: streaming against regular stores (paired regular / streaming;
  > 1: streaming faster) into outputs on a line and 16 or 32 bytes past one: the
  alignment rule of ``rowjoin.streams``;
* ``--part segments``: 7-8 MiB outputs of short segments (repeat of 8-128 B rows —
  4 B rows are single elements, never the runner's — and pack of three 4-128 B
  columns), the runner against numpy's way: ROW_JOIN_MIN_SEGMENT_BYTES.

    PYTHONPATH=. python bench/rowjoin_sweep.py [--part sizes,streaming,segments]

Each line: the case, the medians, the paired ratio (> 1: the runner faster).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("REARRANGE_JIT", "eager")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import kernel  # noqa: E402
from rearrange.backends import ndarray  # noqa: E402
from rearrange.kernel import builds, rowjoin  # noqa: E402

THRESHOLDS = ("ROW_JOIN_MIN_BYTES", "ROW_JOIN_ONE_THREAD_MIN_BYTES", "ROW_JOIN_MIN_ROWS",
              "ROW_JOIN_MIN_SEGMENT_BYTES")


def with_thresholds(call, value: int | None):
    """``call`` with every row-assembly threshold at ``value`` (0: the runner wherever
    it applies; 1 << 62: never), or as shipped (None)."""
    if value is None:
        return call

    def run():
        saved = {name: getattr(ndarray, name) for name in THRESHOLDS}
        for name in THRESHOLDS:
            setattr(ndarray, name, value if name != "ROW_JOIN_MIN_SEGMENT_BYTES" or
                    value > 1 else 1)
        try:
            return call()
        finally:
            for name, old in saved.items():
                setattr(ndarray, name, old)
    return run


def runner_and_numpy(call):
    return {"runner": with_thresholds(call, 0), "numpy": with_thresholds(call, 1 << 62)}


def repeat_case(rows: int, c: int = 64):
    v = np.random.default_rng(0).random((rows, 1, c), dtype=np.float32)
    return v.nbytes * 4, lambda: ra.repeat(v, "b t c -> b t r c", r=4, copy=True)


def pack_case(rows: int, widths=(64, 32, 96)):
    rng = np.random.default_rng(1)
    parts = [rng.random((rows, w), dtype=np.float32) for w in widths]
    return sum(p.nbytes for p in parts), lambda: ra.pack(parts, "b *")


def report(name: str, timings, numerator: str, denominator: str) -> None:
    print(f"{name:34s} {numerator} {timings[numerator].median * 1e3:8.3f} ms  "
          f"{denominator} {timings[denominator].median * 1e3:8.3f} ms  "
          f"{denominator}/{numerator} {paired_ratio(timings[denominator], timings[numerator]):.2f}",
          flush=True)


def sizes(rounds: int) -> None:
    for threads in (1, 2):
        kernel.set_num_threads(threads)
        for rows in (16, 64, 256, 1024, 4096, 16384):
            # (a repeat at one thread is numpy.repeat's whatever the thresholds: not run)
            for label, (nbytes, call) in ((("repeat", repeat_case(rows * 4)),)
                                          if threads > 1 else ()) + \
                    (("pack", pack_case(rows * 4)),):
                timings = interleaved(runner_and_numpy(call), rounds, 0.02)
                report(f"{label} {nbytes / 1024:8.0f} KiB x{threads} threads", timings,
                       "runner", "numpy")


def streaming(rounds: int) -> None:
    """join_rows itself, streaming forced on and off, into outputs 0, 16 and 32 bytes
    past a line: #39's repeat (rows of 4 x 256 B) and pack (256 + 128 + 384 B)."""
    kernel.set_num_threads(2)
    run = builds.runner_for(rowjoin.FAMILY, rowjoin.UNIT)
    rng = np.random.default_rng(2)
    v = rng.random((64, 256, 64), dtype=np.float32)
    parts = [rng.random((32, 1024, n), dtype=np.float32) for n in (64, 32, 96)]
    cases = [("repeat (64, 256, 64) x4", 16 << 20, 16384,
              [(v.__array_interface__["data"][0], 256, 256, 4)]),
             ("pack of 3 (32, 1024, *)", 24 << 20, 32768,
              [(p.__array_interface__["data"][0], p.shape[2] * 4, p.shape[2] * 4, 1)
               for p in parts])]

    def join(nbytes, rows, segments, shift, streaming):
        def call():
            buffer = np.empty(nbytes + 128, np.uint8)
            start = (-buffer.__array_interface__["data"][0]) % 64 + shift
            rowjoin.join_rows(run, buffer[start:start + nbytes].reshape(rows, -1),
                              segments, 2, streaming)
            return buffer
        return call

    for label, nbytes, rows, segments in cases:
        for shift in (0, 16, 32):
            timings = interleaved({"streaming": join(nbytes, rows, segments, shift, True),
                                   "regular": join(nbytes, rows, segments, shift, False)},
                                  rounds, 0.05)
            report(f"{label} +{shift} B", timings, "streaming", "regular")


def segments(rounds: int) -> None:
    kernel.set_num_threads(2)
    for c in (1, 2, 4, 8, 16, 32):
        nbytes, call = repeat_case((2 << 20) // (4 * c), c)
        timings = interleaved(runner_and_numpy(call), rounds, 0.03)
        report(f"repeat rows of {4 * c} B x4, {nbytes >> 20} MiB", timings, "runner", "numpy")
    for w in (1, 2, 4, 8, 16, 32):
        nbytes, call = pack_case((8 << 20) // (12 * w), (w, w, w))
        timings = interleaved(runner_and_numpy(call), rounds, 0.03)
        report(f"pack 3 x {4 * w} B, {nbytes >> 20} MiB", timings, "runner", "numpy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="sizes,streaming,segments")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if builds.runner_for(rowjoin.FAMILY, rowjoin.UNIT) is None:
        raise SystemExit("no row-join runner here (numba missing, or REARRANGE_JIT=off)")
    print(f"load {os.getloadavg()[0]:.2f}")
    for part in args.part.split(","):
        print(f"== {part}")
        {"sizes": sizes, "streaming": streaming, "segments": segments}[part](args.rounds)


if __name__ == "__main__":
    main()
