"""The compiled batched product (rearrange/kernel/gemm.py) called directly against
numpy.matmul and torch.matmul on the same (batch, M, K, N) float32 products, written
into preallocated results, in alternated blocks (docs/performance.md, "The chain's
product: K in blocks, both threads on one product").

    PYTHONPATH=. python bench/gemm_blocks.py --threads 1 --cases 1x16384x256x256

Each contender is timed in blocks of ``--calls`` calls after a ``--pause`` (s), blocks
alternating, ``--rounds`` per contender (bench/gemm_sweep.py's ``block``); printed:
GFLOP/s of the median block (the blocks' range) and the paired per-round ratios
torch / ours and numpy / ours (> 1: the runner faster). Idle BLAS/OpenMP workers sleep
(bench/timing.py, IDLE_WORKERS_SLEEP).
"""

from __future__ import annotations

import argparse
import statistics

from timing import idle_workers_sleep

idle_workers_sleep()        # before numpy and torch are imported

import numpy as np  # noqa: E402

from gemm_sweep import block  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default="1x16384x256x256,64x256x64x256")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.15)
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    import rearrange as ra
    from rearrange.kernel import builds, gemm

    ra.set_jit_mode("eager")
    torch.set_num_threads(args.threads)
    run = builds.runner_for(gemm.FAMILY, 4)
    rng = np.random.default_rng(0)
    for case in args.cases.split(","):
        b, m, k, n = map(int, case.split("x"))
        left = rng.standard_normal((b, m, k), dtype=np.float32)
        right = rng.standard_normal((b, k, n), dtype=np.float32)
        out = np.empty((b, m, n), np.float32)
        torch_left, torch_right = torch.from_numpy(left), torch.from_numpy(right)
        torch_out = torch.empty(b, m, n)
        calls = {"ours": lambda: gemm.batched_product(run, left, right, out, args.threads),
                 "numpy": lambda: np.matmul(left, right, out=out),
                 "torch": lambda: torch.matmul(torch_left, torch_right, out=torch_out)}
        results: dict[str, list[float]] = {name: [] for name in calls}
        with threadpool_limits(args.threads):
            for _ in range(args.rounds):
                for name, call in calls.items():
                    results[name].append(block(call, args.calls, args.pause))
        flop = 2 * b * m * k * n
        rates = "  ".join(f"{name} {flop / statistics.median(t) / 1e9:.0f} "
                          f"({flop / max(t) / 1e9:.0f}-{flop / min(t) / 1e9:.0f})"
                          for name, t in results.items())
        ratios = []
        for peer in ("torch", "numpy"):
            paired = sorted(p / o for p, o in zip(results[peer], results["ours"]))
            ratios.append(f"{peer}/ours {statistics.median(paired):.2f} "
                          f"({paired[0]:.2f}-{paired[-1]:.2f})")
        print(f"{case} threads={args.threads} GFLOP/s: {rates}; {'  '.join(ratios)}",
              flush=True)


if __name__ == "__main__":
    main()
