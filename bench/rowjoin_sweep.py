"""The row assembly's thresholds (rearrange/kernel/rowjoin.py, the "row assembly" of
rearrange/backends/ndarray.py), each measured in one process, interleaved
(bench/timing.py), against the path it replaces:

* ``--part sizes``: the runner / numpy's way (slabs or one-thread calls) at 1 and at 2
  threads, repeat ``t c -> t r c`` (rows of 4 x 256 B) and pack ``t *`` (rows of 256 +
  128 + 384 B), 12 KiB to 16 MiB of output: ROW_JOIN_MIN_BYTES and
  ROW_JOIN_ONE_THREAD_MIN_BYTES;
* ``--part streaming``: streaming against regular stores (paired regular / streaming;
  > 1: streaming faster), 2 to 24 MiB: NONTEMPORAL_MIN_BYTES;
* ``--part segments``: 8 MiB outputs of short segments (repeat of 4-128 B rows, pack of
  three 4-128 B columns), the runner against numpy's way: ROW_JOIN_MIN_SEGMENT_BYTES.

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
            for label, (nbytes, call) in (("repeat", repeat_case(rows * 4)[0:2]),
                                          ("pack", pack_case(rows * 4))):
                timings = interleaved(runner_and_numpy(call), rounds, 0.02)
                report(f"{label} {nbytes / 1024:8.0f} KiB x{threads} threads", timings,
                       "runner", "numpy")


def streaming(rounds: int) -> None:
    kernel.set_num_threads(2)

    def forced(call, nt: bool):
        def run():
            saved = rowjoin.NONTEMPORAL_MIN_BYTES
            rowjoin.NONTEMPORAL_MIN_BYTES = 0 if nt else 1 << 62
            try:
                return call()
            finally:
                rowjoin.NONTEMPORAL_MIN_BYTES = saved
        return run

    cases = [("repeat", repeat_case(rows)) for rows in (2048, 4096, 8192, 16384)] + \
        [("pack", pack_case(rows)) for rows in (4096, 8192, 16384, 32768)]
    for label, (nbytes, call) in cases:
        timings = interleaved({"streaming": forced(with_thresholds(call, 0), True),
                               "regular": forced(with_thresholds(call, 0), False)},
                              rounds, 0.05)
        report(f"{label} {nbytes / 2**20:5.1f} MiB", timings, "streaming", "regular")


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
