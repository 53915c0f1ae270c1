"""The two-thread read ceiling for "b c h w -> c" max at (32, 64, 56, 56) float32 (#39's
"global max per channel"), against ours and XLA, interleaved in one process.

    PYTHONPATH=. python bench/gmax_ceiling.py [--rounds 15] [--min-sample 0.05]
"""
from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange.kernel import builds, rowmax  # noqa: E402
from rearrange.kernel.modes import set_jit_mode  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.05)
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args()
    ra.set_num_threads(2)
    set_jit_mode("eager")
    x = np.random.default_rng(0).standard_normal((32, 64, 56, 56)).astype(np.float32)
    expected = x.max(axis=(0, 2, 3))
    run = None
    for _ in range(200):
        assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), expected)
        run = builds.runner_for(rowmax.FAMILY, 4)
        if run is not None:
            break
        import time
        time.sleep(0.05)
    assert run is not None
    address = x.__array_interface__["data"][0]
    half = x.size // 2
    out2 = np.empty(2, np.float32)
    out64 = np.empty(64, np.float32)
    flat = x.reshape(-1)
    pool = ThreadPoolExecutor(2)

    def halves_numpy():
        a = pool.submit(flat[:half].max)
        b = flat[half:].max()
        return max(a.result(), b)

    calls = {
        "ours": lambda: ra.reduce(x, "b c h w -> c", "max"),
        # two outputs, each one contiguous half: one stream a thread
        "runner 2 streams": lambda: rowmax.reduce_runs(run, out2, address, rowmax.OP_MAX,
                                                       half, 1, half, half, 2),
        # 64 outputs of one contiguous run each ("-> b c"-like: contiguous chunks)
        "runner 64 runs": lambda: rowmax.reduce_runs(run, out64, address, rowmax.OP_MAX,
                                                     x.size // 64, 1, x.size // 64,
                                                     x.size // 64, 2),
        # the case's own layout, the runner called directly (no planning, no output made)
        "runner case layout": lambda: rowmax.reduce_runs(run, out64, address, rowmax.OP_MAX,
                                                         3136, 32, 64 * 3136, 3136, 2),
        "numpy halves 2thr": halves_numpy,
        "numpy 1thr flat": flat.max,
    }
    try:
        import torch
        torch.set_num_threads(2)
        tx = torch.from_numpy(x)
        calls["torch amax"] = lambda: torch.amax(tx, dim=(0, 2, 3))
    except ImportError:
        pass
    if not args.no_jax:
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda a: jnp.max(a, axis=(0, 2, 3)))
        dx = jax.device_put(x)
        calls["jax"] = lambda: f(dx).block_until_ready()
    timings = interleaved(calls, args.rounds, args.min_sample)
    ours = timings["ours"]
    gb = x.nbytes / 1e9
    print(f"{'contender':22s} {'ms':>8s} {'GB/s':>7s} {'ours/it (paired)':>18s}")
    for name, t in timings.items():
        print(f"{name:22s} {t.median * 1e3:8.3f} {gb / t.median:7.1f} "
              f"{paired_ratio(ours, t):18.3f}")


if __name__ == "__main__":
    main()
