"""Warm-call overhead on tiny arrays: rearrange vs the bare numpy calls vs einops.

    python bench/overhead.py [--repeat 7] [--number 20000]
    python bench/run.py --suite overhead          # the same suite inside the harness

All contenders run in one process, interleaved round by round, on the same arrays; the
table reports the median per-call time and the ratios that the compiler issue sets
targets for: ``ra/numpy`` (rearrange's cost over the numpy calls it lowers to; 1.00 is no
overhead) and ``einops/ra`` (how many times faster than einops rearrange is), as ratios
of the median per-call times. A never-seen pattern (parse + recipe + plan, caches cleared) is timed
separately, and so is einops' equivalent (its recipe caches cleared).

``floor`` is the least any Python front door in front of numpy can cost: a function with
rearrange's signature that looks its entry up by pattern, checks that the input is the
layout it was made for (shape, strides, dtype, ``copy``, axis lengths) and makes the same
numpy calls — no counting, no other array types, no error handling. ``floor/numpy`` is
the lowest ``ra/numpy`` a warm call checked this way could reach.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

if __package__ in (None, ""):  # run as a script: bench/ is on sys.path already
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import interleaved, paired_ratio  # noqa: E402

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

NEVER_SEEN_PATTERN = "b h t d -> b t (h d)"


def _import_rearrange() -> Any:
    try:
        import rearrange
    except ImportError:  # a checkout without an install: the package is next to bench/
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        import rearrange
    return rearrange


def _einops_cache_clear(einops: Any) -> Callable[[], None] | None:
    """einops' recipe caches (private; None when this einops has other internals)."""
    module = getattr(einops, "einops", None)
    caches = [getattr(module, name, None) for name in
              ("_prepare_transformation_recipe", "_reconstruct_from_shape")]
    if module is None or not all(hasattr(c, "cache_clear") for c in caches):
        return None

    def clear() -> None:
        for cache in caches:
            cache.cache_clear()
    return clear


def run_overhead(number: int, repeat: int, libs: dict[str, Any],
                 log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    ra, einops = libs["rearrange"], libs.get("einops")
    records = []
    for name, pattern, shape, lengths, bare in CASES:
        x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
        expected = bare(x)
        np.testing.assert_array_equal(ra.rearrange(x, pattern, **lengths), expected,
                                      err_msg=f"overhead {name}: rearrange")
        floor = _floor_call(x, pattern, lengths, bare)
        np.testing.assert_array_equal(floor(x, pattern, **lengths), expected)
        calls = {"numpy": lambda: bare(x),
                 "rearrange": lambda: ra.rearrange(x, pattern, **lengths),
                 "floor": lambda: floor(x, pattern, **lengths)}
        if einops is not None:
            np.testing.assert_array_equal(einops.rearrange(x, pattern, **lengths), expected,
                                          err_msg=f"overhead {name}: einops")
            calls["einops"] = lambda: einops.rearrange(x, pattern, **lengths)
        t = interleaved(calls, repeat, 0.0, number=number)
        record = {"suite": "overhead", "case": name, "pattern": pattern, "shape": list(shape),
                  "lengths": lengths, "number": number, "repeat": repeat,
                  "us": {k: v.median * 1e6 for k, v in t.items()},
                  "spread": {k: v.spread for k, v in t.items()},
                  "ra_over_numpy": t["rearrange"].median / t["numpy"].median,
                  "floor_over_numpy": t["floor"].median / t["numpy"].median,
                  "einops_over_ra": t["einops"].median / t["rearrange"].median if "einops" in t else math.nan,
                  "paired_ra_over_numpy": paired_ratio(t["rearrange"], t["numpy"])}
        records.append(record)
        log("  " + format_row(record))

    x = np.zeros((2, 3, 4, 5), dtype=np.float32)
    ra.rearrange(x, NEVER_SEEN_PATTERN)  # parser built, numpy warm

    def cold_ra() -> None:
        ra.cache_clear()
        ra.rearrange(x, NEVER_SEEN_PATTERN)

    cold = {"rearrange": cold_ra}
    clear_einops = _einops_cache_clear(einops) if einops is not None else None
    if clear_einops is not None:
        def cold_einops() -> None:
            clear_einops()
            einops.rearrange(x, NEVER_SEEN_PATTERN)
        cold["einops"] = cold_einops
    t = interleaved(cold, repeat, 0.0, number=max(1, number // 100))
    never = {"suite": "overhead", "case": "never-seen pattern", "pattern": NEVER_SEEN_PATTERN,
             "us": {k: v.median * 1e6 for k, v in t.items()},
             "spread": {k: v.spread for k, v in t.items()}}
    records.append(never)
    log(f"  never-seen pattern: " + ", ".join(f"{k} {v:.1f} µs" for k, v in never["us"].items()))
    return records


def _floor_call(x: np.ndarray, pattern: str, lengths: dict[str, int],
                bare: Callable[[np.ndarray], Any]) -> Callable[..., Any]:
    """The floor (see the module's docstring): one entry, for ``x``'s layout."""
    seen = {pattern: (x.shape, x.strides, x.dtype, None, lengths or None, bare)}

    def floor(tensor: Any, pattern: str, *, copy: bool | None = None, out: Any = None,
              **axes_lengths: int) -> Any:
        if type(tensor) is np.ndarray and out is None:
            shape, strides, dtype, seen_copy, seen_lengths, run = seen[pattern]
            if (shape == tensor.shape and strides == tensor.strides and dtype is tensor.dtype
                    and seen_copy is copy
                    and (not axes_lengths if seen_lengths is None else seen_lengths == axes_lengths)):
                return run(tensor)
        raise AssertionError("the floor knows one layout only")
    return floor


HEADER = (f"{'case':<26} {'numpy µs':>9} {'rearrange µs':>13} {'einops µs':>10} "
          f"{'floor µs':>9} {'ra/numpy':>9} {'floor/numpy':>12} {'einops/ra':>10}")


def format_row(r: dict[str, Any]) -> str:
    us = r["us"]
    return (f"{r['case']:<26} {us['numpy']:>9.3f} {us['rearrange']:>13.3f} "
            f"{us.get('einops', math.nan):>10.3f} {us['floor']:>9.3f} {r['ra_over_numpy']:>9.2f} "
            f"{r['floor_over_numpy']:>12.2f} {r['einops_over_ra']:>10.2f}")


def format_markdown(records: list[dict[str, Any]]) -> str:
    """The overhead table in markdown (the docs' form of HEADER/format_row)."""
    lines = ["| case | pattern | numpy µs | rearrange µs | einops µs | floor µs | ra/numpy "
             "| floor/numpy | einops/ra |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    never = None
    for r in records:
        if r["case"] == "never-seen pattern":
            never = r
            continue
        us = r["us"]
        lines.append(f"| {r['case']} | `{r['pattern']}` | {us['numpy']:.3f} | {us['rearrange']:.3f} "
                     f"| {us.get('einops', math.nan):.3f} | {us.get('floor', math.nan):.3f} "
                     f"| {r['ra_over_numpy']:.2f} | {r.get('floor_over_numpy', math.nan):.2f} "
                     f"| {r['einops_over_ra']:.2f} |")
    if never is not None:
        us = never["us"]
        einops_part = f"; einops (recipe caches cleared): {us['einops']:.1f} µs" if "einops" in us else ""
        lines.append("")
        lines.append(f"Never-seen pattern `{never['pattern']}` (parse + recipe + plan + first call, "
                     f"caches cleared): rearrange {us['rearrange']:.1f} µs{einops_part}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    libs: dict[str, Any] = {"rearrange": _import_rearrange()}
    try:
        import einops
        libs["einops"] = einops
    except ImportError:  # einops is a bench extra
        pass
    print(HEADER)
    records = run_overhead(args.number, args.repeat, libs, log=lambda line: None)
    for r in records[:-1]:
        print(format_row(r))
    us = records[-1]["us"]
    print(f"\nnever-seen pattern (parse + recipe + plan + first call): {us['rearrange']:.1f} µs")
    if "einops" in us:
        print(f"einops, recipe caches cleared: {us['einops']:.1f} µs")


if __name__ == "__main__":
    main()
