"""A never-seen pattern: the whole cold path of one call, rearrange against einops.

Every call uses a pattern neither library has seen (a fresh axis name per call), so no
cache of either hits: parse, recipe, plan, lower and run, each time. Both run in this
one process on the same small numpy input, taking turns call by call (which of the two
goes first alternates from round to round), and the table gives each one's median over
``--calls`` calls per case, and the median of the per-round ratios ours / einops.

    python bench/cold_call.py [--calls 400] [--json out.json] [--against CHECKOUT]
    python bench/cold_call.py --blocks 6 [--calls 5000]

``--blocks K`` measures what a program that keeps meeting new patterns pays: each
library in turn makes ``--calls`` cold calls in a row, K blocks each (alternating which
goes first), and the table gives the mean time per call over the blocks after the first
— the garbage collector's passes included, which per-call medians leave out: the
objects a cold call leaves in the caches are what the collector's next pass visits,
and in a block only that library's calls make them. To compare two checkouts, copy this
script out of the repository (beside it, it imports the package of its own checkout,
whatever ``PYTHONPATH`` says) and run the copy with each checkout on ``PYTHONPATH`` in turn.

``--against`` adds a third contender in the same rounds: the ``rearrange`` package of
another checkout (e.g. a worktree of the commit before a change), imported under another
name; the table then also gives its ratio to einops and ours / it (the before/after A/B).

Cases (x: float32, shape (2, 8, 16, 4) as b h t d):

* transpose view   ``b hN t d -> b t hN d``          (a view for both)
* merge copy       ``b hN t d -> b t (hN d)``        (a copy for both)
* split+permute    ``b (hN d) t -> b t hN d``, hN=4  on x reshaped to (2, 32, 16)
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
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


def import_checkout(checkout: str) -> object:
    """The ``rearrange`` package of another checkout, as module ``rearrange_baseline``
    (its imports are relative, so it runs beside ours)."""
    package = os.path.join(os.path.abspath(checkout), "rearrange")
    spec = importlib.util.spec_from_file_location(
        "rearrange_baseline", os.path.join(package, "__init__.py"),
        submodule_search_locations=[package])
    if spec is None or spec.loader is None:
        raise SystemExit(f"no rearrange package in {checkout}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["rearrange_baseline"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per case and library")
    parser.add_argument("--json", help="write every sample here")
    parser.add_argument("--blocks", type=int, default=0,
                        help="blocks of --calls calls per library: mean per call, GC included")
    parser.add_argument("--against", metavar="CHECKOUT",
                        help="also time the rearrange package of this checkout")
    args = parser.parse_args()

    contenders = {"rearrange": ra.rearrange, "einops": einops.rearrange}
    if args.against:
        contenders["baseline"] = import_checkout(args.against).rearrange
    # Warm-up: imports, lark's parser, numpy's first calls; not part of any sample.
    for name, x, template, needs_length in cases():
        for function in contenders.values():
            for _ in range(20):
                one_call(function, x, template, needs_length)
            a = function(x, template.format(h="h"), **({"h": 4} if needs_length else {}))
            b = einops.rearrange(x, template.format(h="h"), **({"h": 4} if needs_length else {}))
            assert a.shape == b.shape and np.array_equal(a, b), name

    if args.blocks:
        blocks(contenders, args.blocks, args.calls)
        return

    def paired(top: list[float], bottom: list[float]) -> float:
        return statistics.median(t / b for t, b in zip(top, bottom))

    results = {}
    gc.collect()
    names = list(contenders)
    for name, x, template, needs_length in cases():
        samples: dict[str, list[float]] = {key: [] for key in contenders}
        for round_ in range(args.calls):
            # each contender first, then each after each other, equally often
            shift = round_ % len(names)
            order = names[shift:] + names[:shift]
            if round_ // len(names) % 2:
                order.reverse()
            for key in order:
                samples[key].append(one_call(contenders[key], x, template, needs_length))
        results[name] = {
            "rearrange_us": statistics.median(samples["rearrange"]) * 1e6,
            "einops_us": statistics.median(samples["einops"]) * 1e6,
            "ratio": paired(samples["rearrange"], samples["einops"]),
            "samples_s": samples,
        }
        if "baseline" in samples:
            results[name].update({
                "baseline_us": statistics.median(samples["baseline"]) * 1e6,
                "baseline_ratio": paired(samples["baseline"], samples["einops"]),
                "ours_over_baseline": paired(samples["rearrange"], samples["baseline"]),
            })

    print(f"Python {platform.python_version()}, numpy {np.__version__}, einops "
          f"{einops.__version__}; {args.calls} calls per case and library, interleaved\n")
    if args.against:
        print(f"baseline: the rearrange package of {os.path.abspath(args.against)}\n")
        print("| case | baseline (µs) | rearrange (µs) | einops (µs) | baseline / einops "
              "| ours / einops | ours / baseline |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, result in results.items():
            print(f"| {name} | {result['baseline_us']:.1f} | {result['rearrange_us']:.1f} | "
                  f"{result['einops_us']:.1f} | {result['baseline_ratio']:.2f} | "
                  f"{result['ratio']:.2f} | {result['ours_over_baseline']:.2f} |")
    else:
        print("| case | rearrange (µs) | einops (µs) | ours / einops |")
        print("|---|---:|---:|---:|")
        for name, result in results.items():
            print(f"| {name} | {result['rearrange_us']:.1f} | {result['einops_us']:.1f} | "
                  f"{result['ratio']:.2f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle)


def blocks(contenders: dict, count: int, calls: int) -> None:
    """Mean time per cold call (and the collector's share of it) in blocks of ``calls``."""
    collecting = [0.0, 0.0]     # [seconds in the collector, when the current pass started]

    def on_collect(phase: str, info: dict) -> None:
        if phase == "start":
            collecting[1] = time.perf_counter()
        else:
            collecting[0] += time.perf_counter() - collecting[1]

    gc.callbacks.append(on_collect)
    print(f"Python {platform.python_version()}, numpy {np.__version__}, einops "
          f"{einops.__version__}; {count} blocks of {calls} cold calls per case and library "
          f"(the first block of each left out)\n")
    print("| case | rearrange µs/call | of which GC | einops µs/call | of which GC "
          "| ours / einops |")
    print("|---|---:|---:|---:|---:|---:|")
    names = ["rearrange", "einops"]
    for name, x, template, needs_length in cases():
        means: dict[str, list[float]] = {key: [] for key in names}
        in_gc: dict[str, list[float]] = {key: [] for key in names}
        for block in range(count):
            for key in names if block % 2 == 0 else names[::-1]:
                collecting[0] = 0.0
                total = sum(one_call(contenders[key], x, template, needs_length)
                            for _ in range(calls))
                means[key].append(total / calls * 1e6)
                in_gc[key].append(collecting[0] / calls * 1e6)
        ours, theirs = (statistics.median(means[key][1:]) for key in names)
        ours_gc, theirs_gc = (statistics.median(in_gc[key][1:]) for key in names)
        print(f"| {name} | {ours:.1f} | {ours_gc:.1f} | {theirs:.1f} | {theirs_gc:.1f} "
              f"| {ours / theirs:.2f} |")
    gc.callbacks.remove(on_collect)


if __name__ == "__main__":
    main()
