"""The pool's native fork-join against the Python one, in one process (issue #39).

    PYTHONPATH=. python bench/fork_join_ab.py [--rounds 200] [--spin-us 50000]

"native": the default path, one call of the pool's runner (OP_FORK_JOIN: posts, the
caller's share, the settle) when every helper spins. "python": the same tree with the
job only posted natively (OP_FORK) and the caller's share and the settle made from Python
as before the native fork-join (three ctypes calls and the loops between them; the
switch is one extra Python call for it). Calls alternate between the two, one each per
round, in an order that puts each first equally often; prints the medians and the median
of the paired ratios (python / native, above 1: the native fork-join is faster).

Cases: a tiny 2-thread reduction job (the overhead: 8 outputs of 8 floats), warm (calls
back to back) and cold (each call right after 24 MB streamed, which evicts the
interpreter's working set from L1/L2; the workers' spin is ``--spin-us`` so that they
still spin after the streaming), a (1024, 1024) float32 transpose and the maximum per
channel of a (32, 64, 56, 56) float32 array, both at 2 threads.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--spin-us", type=float, default=50000.0)
    args = parser.parse_args()

    import rearrange as ra
    from rearrange.kernel import builds, rowmax, threads

    ra.set_jit_mode("eager")
    ra.set_num_threads(2)
    threads.set_spin_seconds(args.spin_us * 1e-6)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64, 56, 56)).astype(np.float32)
    square = rng.standard_normal((1024, 1024)).astype(np.float32)
    big = rng.standard_normal(24 << 20 >> 2).astype(np.float32)
    for _ in range(400):
        ra.reduce(x, "b c h w -> c", "max")
        run = builds.runner_for(rowmax.FAMILY, 4)
        if run is not None:
            break
        time.sleep(0.05)
    assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), x.max(axis=(0, 2, 3)))
    assert np.array_equal(ra.rearrange(square, "a b -> b a", copy=True), square.T)
    small = np.zeros(16, np.float32)
    address = small.__array_interface__["data"][0]
    out = small[:2]
    pool = threads._pool
    submit = pool.submit

    def python_path(job, helpers, join=False):
        return submit(job, helpers, False)

    def use(path: str) -> None:
        if path == "python":
            pool.submit = python_path
        else:
            pool.__dict__.pop("submit", None)

    cases = {
        "tiny job, warm": (lambda: rowmax.reduce_runs(run, out, address, 0, 8, 1, 8, 8, 2),
                           False),
        "tiny job, cold": (lambda: rowmax.reduce_runs(run, out, address, 0, 8, 1, 8, 8, 2),
                           True),
        "transpose (1024, 1024) f32": (
            lambda: ra.rearrange(square, "a b -> b a", copy=True), False),
        "max per channel 25.7 MB": (lambda: ra.reduce(x, "b c h w -> c", "max"), False),
    }
    print(f"2 threads, spin {args.spin_us:.0f} us, {args.rounds} rounds; medians (us)\n")
    print("| case | native | python | python / native (paired) | native joins |")
    print("|---|---:|---:|---:|---:|")
    pc = time.perf_counter
    for name, (call, cold) in cases.items():
        times = {"native": [], "python": []}
        joins_before = pool.native_joins
        for order in range(args.rounds):
            for path in (("native", "python") if order % 2 else ("python", "native")):
                use(path)
                call()                  # the worker back in its spin, this path warm
                if cold:
                    big.sum()
                start = pc()
                call()
                times[path].append(pc() - start)
        use("native")
        ratios = [p / n for p, n in zip(times["python"], times["native"])]
        print(f"| {name} | {statistics.median(times['native']) * 1e6:.1f} | "
              f"{statistics.median(times['python']) * 1e6:.1f} | "
              f"{statistics.median(ratios):.3f} | {pool.native_joins - joins_before} |")


if __name__ == "__main__":
    main()
