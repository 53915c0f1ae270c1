"""Where a byte transpose's time goes: the memory system's rate for the access patterns
it is made of, beside the transposes themselves.

rearrange transposes large uint8 arrays in two phases per work unit (the plan variant
``staged-transpose``): 8 source rows read together along a band of 1024 columns, a line
of each in turn, transposed in vector registers into a per-thread staging buffer in L2;
then every destination row of the unit gets four whole lines (256 source rows),
non-temporally. Register tiles (``tiled-transpose``, what the other unit sizes use)
read 64 source rows a line each in turn and write one line to each destination row they
pass. This script times, at the thread count given, on an n x n uint8 array:

- reads alone: ``rows`` source rows of a column block read in turn, ``visit`` bytes of
  each per turn (staged: 8 rows, 64 B; the tiles: 64 rows, 64 B — the hardware
  prefetchers follow about 16 such streams), and one sequential read of the whole array
  (blocks of one row, each read in one visit);
- non-temporal line writes alone: ``run`` bytes written to each destination row in turn,
  32 rows at a time, a line of each, then the next line of each (the tiles: one line
  per destination row; staged: four);
- the transposes: rearrange's kernel (staged), and the same copy planned as register
  tiles, checked against numpy first;
- a contiguous copy of the array (rearrange's, into the same output): the limit.

    python bench/transpose_patterns.py [--threads 2] [--n 8192] [--rounds 9]

Prints a markdown table: GB/s of the bytes each pattern moves (reads or writes alone:
those bytes once; transposes and the copy: read + write), medians of interleaved
samples, and each transpose's paired ratio to the kernel's.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
import rearrange.kernel as kernel  # noqa: E402


def compile_probes():
    """The probes, compiled with numba from the kernel's own intrinsics (raw loads,
    non-temporal line stores)."""
    from numba import njit

    from rearrange.kernel.intrinsics import define_intrinsics

    intrinsics = define_intrinsics()
    load = intrinsics["_ld"]
    line_nt, fence = intrinsics["_line_nt"], intrinsics["_sfence"]
    word = np.uint64(0)

    @njit(nogil=True)
    def read_rows(s, n, rows, visit, b0, b1):
        # Column blocks b0..b1-1 of `rows` rows; a word per line makes the line come in.
        acc = np.uint64(0)
        for b in range(b0, b1):
            first = s + b * rows * n
            for c in range(0, n, visit):
                for r in range(rows):
                    for q in range(0, visit, 64):
                        acc ^= load(first + r * n + c + q, 0, word)
        return acc

    @njit(nogil=True)
    def write_lines(d, n, run, b0, b1, line):
        # Destination column blocks b0..b1-1, `run` bytes wide, 32 rows at a time.
        for b in range(b0, b1):
            for i0 in range(0, n, 32):
                for q in range(0, run, 64):
                    for i in range(i0, i0 + 32):
                        line_nt(d + i * n + b * run + q, line)
        fence()

    return read_rows, write_lines


def on_threads(threads: int, blocks: int, work) -> None:
    """work(b0, b1) for the threads' shares of ``blocks`` column blocks, the calling
    thread taking the first."""
    shares = [(blocks * t // threads, blocks * (t + 1) // threads) for t in range(threads)]
    helpers = [threading.Thread(target=work, args=share) for share in shares[1:]]
    for helper in helpers:
        helper.start()
    work(*shares[0])
    for helper in helpers:
        helper.join()


def aligned_empty(nbytes: int) -> np.ndarray:
    """nbytes of uint8 starting on a line (non-temporal stores write whole lines)."""
    raw = np.empty(nbytes + 64, np.uint8)
    return raw[(-raw.ctypes.data) % 64:][:nbytes]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=8192, help="a multiple of 256")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    n, threads = args.n, args.threads
    if n % 256:
        parser.error(f"--n must be a multiple of 256, got {n}")
    ra.set_jit_mode("eager")
    ra.set_num_threads(threads)
    read_rows, write_lines = compile_probes()
    x = (np.arange(n * n) % 251).astype(np.uint8).reshape(n, n)
    out = aligned_empty(n * n).reshape(n, n)
    out[...] = 0                     # resident: no contender pays its page faults
    line = aligned_empty(64)
    s, d = x.ctypes.data, out.ctypes.data

    def reads(rows, visit):
        return lambda: on_threads(threads, n // rows,
                                  lambda b0, b1: read_rows(s, n, rows, visit, b0, b1))

    def writes(run):
        return lambda: on_threads(threads, n // run, lambda b0, b1: write_lines(
            d, n, run, b0, b1, line.ctypes.data))

    staged = kernel.plan_copy(x.T.shape, x.T.strides, 1)
    tiles = dataclasses.replace(staged, variant="tiled-transpose")
    transposes = {f"transpose: rearrange's kernel ({staged.variant})":
                  lambda: kernel.copy_into(out, x.T, staged),
                  "transpose: register tiles (tiled-transpose)":
                  lambda: kernel.copy_into(out, x.T, tiles)}
    for call in transposes.values():
        out[...] = 0
        call()
        assert np.array_equal(out, x.T)
    calls = {
        "read: 8 rows, a line each in turn (staged)": reads(8, 64),
        "read: 16 rows, a line each in turn": reads(16, 64),
        "read: 64 rows, a line each in turn (the tiles' pattern)": reads(64, 64),
        "read: 64 rows, 4 lines each in turn": reads(64, 256),
        "read: 64 rows, 16 lines each in turn": reads(64, 1024),
        "read: sequential": reads(1, n),
        "write: a line per destination row (the tiles' pattern)": writes(64),
        "write: 2 lines per destination row": writes(128),
        "write: 4 lines per destination row (staged)": writes(256),
        "write: 16 lines per destination row": writes(1024),
        **transposes,
        "copy: contiguous (the limit)": lambda: kernel.copy_into(out, x),
    }
    timings = interleaved(calls, args.rounds, min_sample=0.0, number=1)
    kernel_timing = timings[next(iter(transposes))]
    print(f"threads={threads}, {n}x{n} uint8, {args.rounds} samples each\n")
    print("| pattern | GB/s | transposes: vs the kernel (paired) |")
    print("|---|---:|---:|")
    for name, timing in timings.items():
        moved = x.nbytes if name.startswith(("read", "write")) else 2 * x.nbytes
        ratio = f"{paired_ratio(kernel_timing, timing):.2f}×" if name in transposes else ""
        print(f"| {name} | {moved / timing.median / 1e9:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
