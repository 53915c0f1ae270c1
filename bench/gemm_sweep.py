"""einsum's batched products on the compiled runner (rearrange/kernel/gemm.py) against
numpy.matmul and torch.matmul (docs/performance.md, "A batched product of our own").

    PYTHONPATH=. python bench/gemm_sweep.py --part attention --threads 2
    PYTHONPATH=. python bench/gemm_sweep.py --part sizes --threads 1 \\
        --cases 16x64x64x64,4x64x64x64 [--dtype float64]

Each contender is timed in blocks of ``--calls`` back-to-back calls, each block after a
``--pause`` (s) so that the previous contender's idle threads (OpenBLAS's spin for ~0.1 s
after a call) are asleep; blocks alternate, ``--rounds`` of them per contender. Interleaving
call by call instead (bench/race_ops.py) measures each library slowed by the one before
it (the section above says by how much).

* ``attention``: ``ra.einsum(q, k, "b h t d, b h s d -> b h t s")`` at (8, 8, 256, 64)
  float32, numpy.matmul and torch.matmul of the same product: medians and GFLOP/s.
* ``sizes``: ``ra.einsum(left, right, "b t d, b s d -> b t s")`` per case ``BxMxKxN``
  with the runner (``REARRANGE_JIT=eager``) and without (``off``: numpy.matmul), the
  paired ratio numpy / ours per round (> 1: the runner faster); ``--force``: the runner
  also where its rule says numpy's (how the rule was set).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")     # before torch is imported

import numpy as np  # noqa: E402


def block(call, calls: int, pause: float) -> float:
    """The median seconds of ``calls`` calls, after one call and a pause."""
    call()
    time.sleep(pause)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def race(calls: dict, rounds: int, per_block: int, pause: float) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            results[name].append(block(call, per_block, pause))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=("attention", "sizes"), default="attention")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cases", default="16x64x64x64,4x64x64x64,64x256x64x256")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--force", action="store_true",
                        help="sizes: the runner whatever the rule says (how it was set)")
    args = parser.parse_args()
    import rearrange as ra
    from threadpoolctl import threadpool_limits

    ra.set_jit_mode("eager")
    ra.set_num_threads(args.threads)
    from rearrange.kernel import builds, gemm

    for unit in gemm.FLOAT_TOKENS:
        builds.runner_for(gemm.FAMILY, unit)
    rng = np.random.default_rng(0)
    if args.part == "attention":
        import torch

        torch.set_num_threads(args.threads)
        q = rng.standard_normal((8, 8, 256, 64), dtype=np.float32)
        k = rng.standard_normal((8, 8, 256, 64), dtype=np.float32)
        tq, tk = torch.from_numpy(q), torch.from_numpy(k)
        calls = {"rearrange": lambda: ra.einsum(q, k, "b h t d, b h s d -> b h t s"),
                 "numpy.matmul": lambda: np.matmul(q, k.swapaxes(-1, -2)),
                 "torch.matmul": lambda: torch.matmul(tq, tk.transpose(-1, -2))}
        with threadpool_limits(args.threads):
            results = race(calls, args.rounds, args.calls, args.pause)
        flop = 2 * 64 * 256 * 256 * 64
        for name, times in results.items():
            median = statistics.median(times)
            print(f"threads={args.threads} {name}: {median * 1e3:.2f} ms "
                  f"({min(times) * 1e3:.2f}-{max(times) * 1e3:.2f}), "
                  f"{flop / median / 1e9:.0f} GFLOP/s")
        return
    dtype = np.dtype(args.dtype)
    from rearrange.backends.ndarray import compiled_product_takes as rule

    if args.force:
        from rearrange.backends import ndarray

        ndarray.compiled_product_takes = lambda *sizes: True
    for case in args.cases.split(","):
        b, m, k, n = map(int, case.split("x"))
        left = rng.standard_normal((b, m, k)).astype(dtype)
        right = rng.standard_normal((b, n, k)).astype(dtype)

        def ours():
            ra.set_jit_mode("eager")
            return ra.einsum(left, right, "b t d, b s d -> b t s")

        def numpy_way():
            ra.set_jit_mode("off")
            return ra.einsum(left, right, "b t d, b s d -> b t s")
        with threadpool_limits(args.threads):
            results = race({"ours": ours, "numpy": numpy_way}, args.rounds, args.calls,
                           args.pause)
        ra.set_jit_mode("eager")
        ratios = [p / o for p, o in zip(results["numpy"], results["ours"])]
        taken = rule(b, m, k, n, dtype)
        print(f"{dtype.name} {case} threads={args.threads} (rule: "
              f"{'runner' if taken else 'numpy'}): ours "
              f"{statistics.median(results['ours']) * 1e6:.0f} us, numpy.matmul "
              f"{statistics.median(results['numpy']) * 1e6:.0f} us, numpy/ours "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
              flush=True)


if __name__ == "__main__":
    main()
