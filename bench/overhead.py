"""Warm-call overhead on tiny arrays: rearrange vs the bare numpy calls vs einops.

    python bench/overhead.py [--repeat 7] [--number 20000]

All contenders run in one process, interleaved, on the same arrays; the table reports
the median per-call time and the ratios that the compiler issue sets targets for.
A never-seen pattern (parse + recipe + plan, caches cleared) is timed separately.
"""

from __future__ import annotations

import argparse
import statistics
import timeit

import numpy as np

import rearrange as ra

try:
    import einops
except ImportError:  # einops is a test/bench extra
    einops = None

CASES = [
    # name, pattern, shape, axis lengths, the numpy calls rearrange lowers to
    ("view: transpose", "h w -> w h", (4, 5), {}, lambda x: x.transpose(1, 0)),
    ("view: merge", "b h w c -> b (h w) c", (2, 3, 4, 5), {}, lambda x: x.reshape(2, 12, 5)),
    ("view: split+permute", "b (h d) t -> b h t d", (2, 12, 5), {"h": 3},
     lambda x: x.reshape(2, 3, 4, 5).transpose(0, 1, 3, 2)),
    ("copy: heads merge", "b h t d -> b t (h d)", (2, 3, 4, 5), {},
     lambda x: x.transpose(0, 2, 1, 3).reshape(2, 4, 15)),
    ("copy: transpose+flatten", "h w -> (w h)", (4, 5), {}, lambda x: x.transpose(1, 0).reshape(20)),
]


def _median_us(stmt, number: int, repeat: int) -> float:
    times = timeit.repeat(stmt, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()

    print(f"{'case':<26} {'numpy µs':>9} {'rearrange µs':>13} {'einops µs':>10} "
          f"{'ra/numpy':>9} {'einops/ra':>10}")
    for name, pattern, shape, lengths, bare in CASES:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        np.testing.assert_array_equal(ra.rearrange(x, pattern, **lengths), bare(x))
        t_np = _median_us(lambda: bare(x), args.number, args.repeat)
        t_ra = _median_us(lambda: ra.rearrange(x, pattern, **lengths), args.number, args.repeat)
        if einops is not None:
            einops.rearrange(x, pattern, **lengths)
            t_ei = _median_us(lambda: einops.rearrange(x, pattern, **lengths), args.number, args.repeat)
        else:
            t_ei = float("nan")
        print(f"{name:<26} {t_np:>9.3f} {t_ra:>13.3f} {t_ei:>10.3f} "
              f"{t_ra / t_np:>9.2f} {t_ei / t_ra:>10.2f}")

    x = np.zeros((2, 3, 4, 5), dtype=np.float32)
    ra.rearrange(x, "b h t d -> b t (h d)")  # parser built, numpy warm

    def cold() -> None:
        ra.cache_clear()
        ra.rearrange(x, "b h t d -> b t (h d)")

    t_cold = _median_us(cold, 200, args.repeat)
    print(f"\nnever-seen pattern (parse + recipe + plan + first call): {t_cold:.1f} µs")


if __name__ == "__main__":
    main()
