"""Workers that spin for the next copy against workers that sleep, in one process.

    python bench/spin_ab.py [--case TEXT] [--rounds 12] [--threads 2] [--size full]

The suite's copy cases (:mod:`cases`, ``--case`` keeps those whose name contains TEXT)
as users call them (``rearrange(x, pattern, copy=...)``, a new array per call). Samples
alternate between the default spin (:func:`rearrange.kernel.set_spin_seconds`) and none,
in an order that gives each the first place equally often; each sample is as many calls
in a row as last about 50 ms, after one call that is not timed. The copies are checked
against einops first. Prints GB/s (read + write) for both, and the median of the paired
ratios (spin / sleep, above 1: spinning is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", default="full", choices=("full", "quick", "smoke"))
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    import einops
    import numpy as np

    import rearrange as ra
    import rearrange.kernel as kernel
    from cases import CASES, case_label, make_input, select

    ra.set_jit_mode("eager")
    ra.set_num_threads(args.threads)
    spin = kernel.spin_seconds()
    print(f"threads={args.threads}, {args.rounds} rounds, allocating, GB/s (read + write); "
          f"spin {spin * 1e6:.0f} us against 0\n")
    print("| case | moved | spin | sleep | spin / sleep (paired) |")
    print("|---|---:|---:|---:|---:|")
    for case in select([c for c in CASES if c.copy or "view" not in c.name],
                       [args.case] if args.case else None):
        x = make_input(case, args.size)

        def call(case=case, x=x):
            return ra.rearrange(x, case.pattern, copy=case.copy, **case.lengths)

        result = call()
        assert np.array_equal(result, einops.rearrange(x, case.pattern, **case.lengths)), \
            f"{case_label(case)}: wrong values"
        if np.shares_memory(result, x):
            continue                                    # a view: no copy to time
        moved = 2 * result.nbytes
        del result
        number = max(2, int(0.05 * 15e9 / moved))
        times = {spin: [], 0.0: []}
        for r in range(args.rounds):
            for s in ((spin, 0.0) if r % 2 else (0.0, spin)):
                kernel.set_spin_seconds(s)
                call()
                start = time.perf_counter()
                for _ in range(number):
                    call()
                times[s].append((time.perf_counter() - start) / number)
        kernel.set_spin_seconds(spin)
        paired = statistics.median(b / a for a, b in zip(times[spin], times[0.0]))
        print(f"| {case_label(case)} | {moved / 2**20:.0f} MiB "
              f"| {moved / statistics.median(times[spin]) / 1e9:.1f} "
              f"| {moved / statistics.median(times[0.0]) / 1e9:.1f} | {paired:.3f}× |")


if __name__ == "__main__":
    main()
