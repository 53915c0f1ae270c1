"""The attention einsum right after a call of its own and after a pause, rearrange and
torch at one and two threads (docs/performance.md, "The product's parameters held by
the plan"): what a call pays when the library's second core has gone idle.

    PYTHONPATH=. python bench/after_pause.py [--rounds 11] [--pauses 0,0.5,5,50]
                                             [--shape 8,8,256,64]

Each sample is one call, timed after one untimed call of the same library and then
``time.sleep(pause)`` (none for 0). Within a round, rearrange and torch take turns at
every thread count and pause. The table gives each library's median, in ms, and
torch's over ours (> 1: rearrange is faster). Each result is first checked against
numpy's product.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import idle_workers_sleep  # noqa: E402

idle_workers_sleep()
import numpy as np  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import kernel  # noqa: E402
from rearrange.kernel import builds  # noqa: E402

PATTERN = "b h t d, b h s d -> b h t s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--pauses", default="0,0.5,5,50", help="ms, comma-separated")
    parser.add_argument("--shape", default="8,8,256,64", help="b,h,t,d of q and k")
    args = parser.parse_args()
    import torch

    ra.set_jit_mode("eager")
    shape = tuple(int(n) for n in args.shape.split(","))
    pauses = [float(p) / 1e3 for p in args.pauses.split(",")]
    rng = np.random.default_rng(0)
    q = rng.standard_normal(shape, dtype=np.float32)
    k = rng.standard_normal(shape, dtype=np.float32)
    tq, tk = torch.from_numpy(q), torch.from_numpy(k)
    calls = {"ours": lambda: ra.einsum(q, k, PATTERN),
             "torch": lambda: torch.einsum("bhtd,bhsd->bhts", tq, tk)}
    want = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2).astype(np.float64))
    for call in calls.values():
        call()
    builds.wait()
    for name, call in calls.items():
        got = np.asarray(call())
        if not np.allclose(got, want, rtol=1e-4, atol=1e-3):
            raise SystemExit(f"{name}'s product differs from numpy's")
    samples: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):
        for threads in (1, 2):
            kernel.set_num_threads(threads)
            torch.set_num_threads(threads)
            for pause in pauses:
                for name, call in calls.items():
                    call()
                    if pause:
                        time.sleep(pause)
                    start = time.perf_counter()
                    result = call()
                    samples.setdefault((threads, pause, name), []).append(
                        time.perf_counter() - start)
                    del result
    print(f"attention einsum {shape}, medians of {args.rounds} single calls")
    print()
    print("| threads | pause ms | ours ms | torch ms | torch / ours |")
    print("|---:|---:|---:|---:|---:|")
    for threads in (1, 2):
        for pause in pauses:
            ours = statistics.median(samples[(threads, pause, "ours")])
            theirs = statistics.median(samples[(threads, pause, "torch")])
            print(f"| {threads} | {pause * 1e3:g} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} "
                  f"| {theirs / ours:.2f}× |")


if __name__ == "__main__":
    main()
