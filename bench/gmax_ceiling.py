"""The two-thread read ceiling for #39's memory-bound reductions of (32, 64, 56, 56)
float32 — "global max per channel" (``b c h w -> c``), "mean over channels" (``-> b h
w``) and "sum over the last axis" (``-> b c h``) — against ours, torch and XLA,
interleaved in one process.

    PYTHONPATH=. python bench/gmax_ceiling.py [--case max|mean|sum|all] [--rounds 15]
                                              [--min-sample 0.05] [--no-jax]

The ceiling is the fastest read of the same bytes at two threads this machine gives:
the faster (by median) of the compiled run maxima (kernel/rowmax.py) over one
contiguous half of the input a thread (two outputs) and numpy's maximum of a
contiguous half in each of two threads, the cheapest work per byte of the three. Each case's table gives
every contender's median, its rate (bytes read per second), its time over ours, paired
(> 1: ours is faster; until 2026-11-28 the column was ours over it, < 1 where ours was
faster, under this same heading's claim) and the ceiling's time over its (its share of
the ceiling's speed); a reduction that reads every byte once cannot beat the ceiling,
so a contender at 1.0x of it has nothing left to win but the rest of its call.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import idle_workers_sleep, interleaved, paired_ratio  # noqa: E402

idle_workers_sleep()                    # before numpy and torch are imported
import numpy as np  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange.kernel import builds, rowmax  # noqa: E402
from rearrange.kernel.modes import set_jit_mode  # noqa: E402

# name -> (pattern, reduction, numpy's axes, torch's function)
CASES = {
    "max": ("b c h w -> c", "max", (0, 2, 3), "amax"),
    "mean": ("b c h w -> b h w", "mean", (1,), "mean"),
    "sum": ("b c h w -> b c h", "sum", (3,), "sum"),
}


def _ready_runner(x: np.ndarray):
    """The run-maxima runner for float32, once the public call has had it built."""
    for _ in range(400):
        ra.reduce(x, "b c h w -> c", "max")
        run = builds.runner_for(rowmax.FAMILY, 4)
        if run is not None:
            return run
        time.sleep(0.05)
    raise RuntimeError("the run-maxima runner did not become ready")


def race(name: str, x: np.ndarray, run, rounds: int, min_sample: float, use_jax: bool
         ) -> None:
    pattern, reduction, axis, torch_name = CASES[name]
    expected = getattr(x, reduction)(axis=axis)
    got = ra.reduce(x, pattern, reduction)
    assert np.allclose(got, expected, rtol=1e-5, atol=1e-5), name
    address = x.__array_interface__["data"][0]
    half = x.size // 2
    out2 = np.empty(2, np.float32)
    flat = x.reshape(-1)
    pool = ThreadPoolExecutor(2)
    method = getattr(np.ndarray, reduction)

    def halves_max():
        a = pool.submit(flat[:half].max)
        b = flat[half:].max()
        return a.result(), b

    def halves_numpy():
        a = pool.submit(method, flat[:half])
        b = method(flat[half:])
        return a.result(), b

    calls = {
        "ours": lambda: ra.reduce(x, pattern, reduction),
        # two outputs, each one contiguous half: one stream a thread
        "runner 2 streams": lambda: rowmax.reduce_runs(
            run, out2, address, rowmax.OP_MAX, half, 1, half, half, 2),
        "numpy max halves 2thr": halves_max,
        f"numpy {reduction} halves 2thr": halves_numpy,
        "numpy 1thr": lambda: method(x, axis=axis),
    }
    try:
        import torch
        torch.set_num_threads(2)
        tx = torch.from_numpy(x)
        torch_call = getattr(torch, torch_name)
        assert np.allclose(torch_call(tx, dim=axis).numpy(), expected, rtol=1e-4, atol=1e-4)
        calls["torch"] = lambda: torch_call(tx, dim=axis)
    except ImportError:
        pass
    if use_jax:
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda a: getattr(jnp, reduction)(a, axis=axis))
        dx = jax.device_put(x)
        calls["jax"] = lambda: f(dx).block_until_ready()
    timings = interleaved(calls, rounds, min_sample)
    ours = timings["ours"]
    ceiling = min((timings["runner 2 streams"], timings["numpy max halves 2thr"]),
                  key=lambda t: t.median)
    gb = x.nbytes / 1e9
    print(f"\n{name}: ra.reduce(x, {pattern!r}, {reduction!r}), x {x.shape} float32")
    print(f"{'contender':22s} {'ms':>8s} {'GB/s':>7s} {'it/ours (paired)':>18s} "
          f"{'of ceiling':>11s}")
    for contender, t in timings.items():     # (paired_ratio(a, b): a's time over b's)
        print(f"{contender:22s} {t.median * 1e3:8.3f} {gb / t.median:7.1f} "
              f"{paired_ratio(t, ours):18.3f} {1 / paired_ratio(t, ceiling):11.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=(*CASES, "all"), default="max")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.05)
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args()
    ra.set_num_threads(2)
    set_jit_mode("eager")
    x = np.random.default_rng(0).standard_normal((32, 64, 56, 56)).astype(np.float32)
    run = _ready_runner(x)
    for name in CASES if args.case == "all" else (args.case,):
        race(name, x, run, args.rounds, args.min_sample, not args.no_jax)


if __name__ == "__main__":
    main()
