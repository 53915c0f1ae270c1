"""A never-seen pattern: the whole cold path of one call, rearrange against einops.

Every call uses a pattern neither library has seen (a fresh axis name per call), so no
cache of either hits: parse, recipe, plan, lower and run, each time. Both run in this
one process on the same small numpy input, taking turns call by call (which of the two
goes first alternates from round to round), and the table gives each one's median over
``--calls`` calls per case, and the median of the per-round ratios ours / einops.

    python bench/cold_call.py [--calls 400] [--json out.json]

Cases (x: float32, shape (2, 8, 16, 4) as b h t d):

* transpose view   ``b hN t d -> b t hN d``          (a view for both)
* merge copy       ``b hN t d -> b t (hN d)``        (a copy for both)
* split+permute    ``b (hN d) t -> b t hN d``, hN=4  on x reshaped to (2, 32, 16)
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import einops  # noqa: E402

import rearrange as ra  # noqa: E402

_fresh = itertools.count()


def cases() -> list[tuple[str, np.ndarray, str, bool]]:
    """(name, input, pattern with {h} for the fresh axis name, takes h=4)."""
    x = np.random.default_rng(0).random((2, 8, 16, 4), dtype=np.float32)
    merged = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).reshape(2, 32, 16)
    return [
        ("transpose view", x, "b {h} t d -> b t {h} d", False),
        ("merge copy", x, "b {h} t d -> b t ({h} d)", False),
        ("split+permute", merged, "b ({h} d) t -> b t {h} d", True),
    ]


def one_call(function, x: np.ndarray, template: str, needs_length: bool) -> float:
    """Seconds for one call of ``function`` on a pattern never seen before."""
    name = f"h{next(_fresh)}"
    pattern = template.format(h=name)
    lengths = {name: 4} if needs_length else {}
    start = time.perf_counter()
    function(x, pattern, **lengths)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per case and library")
    parser.add_argument("--json", help="write every sample here")
    args = parser.parse_args()

    contenders = {"rearrange": ra.rearrange, "einops": einops.rearrange}
    # Warm-up: imports, lark's parser, numpy's first calls; not part of any sample.
    for name, x, template, needs_length in cases():
        for function in contenders.values():
            for _ in range(20):
                one_call(function, x, template, needs_length)
            a = function(x, template.format(h="h"), **({"h": 4} if needs_length else {}))
            b = einops.rearrange(x, template.format(h="h"), **({"h": 4} if needs_length else {}))
            assert a.shape == b.shape and np.array_equal(a, b), name

    results = {}
    gc.collect()
    for name, x, template, needs_length in cases():
        samples: dict[str, list[float]] = {key: [] for key in contenders}
        for round_ in range(args.calls):
            order = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
            for key in order:
                samples[key].append(one_call(contenders[key], x, template, needs_length))
        ratios = [ours / theirs for ours, theirs in zip(samples["rearrange"], samples["einops"])]
        results[name] = {
            "rearrange_us": statistics.median(samples["rearrange"]) * 1e6,
            "einops_us": statistics.median(samples["einops"]) * 1e6,
            "ratio": statistics.median(ratios),
            "samples_s": samples,
        }

    print(f"Python {platform.python_version()}, numpy {np.__version__}, einops "
          f"{einops.__version__}; {args.calls} calls per case and library, interleaved\n")
    print("| case | rearrange (µs) | einops (µs) | ours / einops |")
    print("|---|---:|---:|---:|")
    for name, result in results.items():
        print(f"| {name} | {result['rearrange_us']:.1f} | {result['einops_us']:.1f} | "
              f"{result['ratio']:.2f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle)


if __name__ == "__main__":
    main()
