"""Notation operations (issue #38) against their contenders, in one process, interleaved.

A case is a name, a setup that makes the inputs, and contenders: ours (``rearrange``'s
notation), numpy's best call, einx on numpy, torch. Each contender is a function of the
inputs; a case checks that every contender's result equals ours before timing. Other
notation families add their cases to CASES.

    PYTHONPATH=. python bench/notation.py [--rounds 15] [--min-sample 0.05]
        [--contenders concatenate,einx] [name ...]

prints, per case, the median time of each contender, the paired ratio contender/ours
(above 1: ours is faster) and the memory order of the contender's result (C, F, or its
axes outermost first: a concatenation is laid out as its inputs are, numpy's order 'K').
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[], tuple[Any, ...]]          # the inputs (numpy)
    contenders: dict[str, Callable[..., Any]]     # name -> f(*inputs); "ours" first


def _einx(pattern: str) -> Callable[..., Any]:
    import einx

    def call(*xs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return einx.rearrange(pattern, *xs)
    return call


def _torch(call: Callable[..., Any]) -> Callable[..., Any]:
    """A torch contender: inputs converted once (cached by id), outside the timing."""
    import torch

    converted: dict[int, Any] = {}

    def run(*xs: Any) -> Any:
        key = tuple(id(x) for x in xs)
        if key not in converted:
            converted.clear()
            converted[key] = tuple(torch.from_numpy(x) for x in xs)
        return call(*converted[key])
    return run


def _pair(shape: tuple[int, ...]) -> Callable[[], tuple[Any, ...]]:
    def setup() -> tuple[Any, ...]:
        rng = np.random.default_rng(0)
        return (rng.standard_normal(shape, dtype=np.float32),
                rng.standard_normal(shape, dtype=np.float32))
    return setup


def _torch_cat(dim: int, transposed: bool) -> Callable[..., Any]:
    import torch

    return _torch(lambda x, y: torch.cat([x.T, y.T] if transposed else [x, y], dim=dim))


def _ours_torch(pattern: str) -> Callable[..., Any]:
    return _torch(lambda *xs: ra.rearrange(xs, pattern))


CONCAT_OUTER = "a b, a c -> (b + c) a"
CONCAT_INNER = "b a, c a -> a (b + c)"

def _numpy_into(axis: int) -> Callable[..., Any]:
    """numpy's call for a C-contiguous result: one transposing copy per input into its
    slice (np.concatenate, einx and ours keep the inputs' memory order instead, so
    ``concatenate([x.T, y.T])`` is Fortran-ordered: no transposition at all)."""
    def call(x: Any, y: Any) -> Any:
        xt, yt = x.T, y.T
        shape = list(xt.shape)
        shape[axis] += yt.shape[axis]
        out = np.empty(shape, dtype=np.result_type(x, y))
        split = xt.shape[axis]
        if axis == 0:
            out[:split], out[split:] = xt, yt
        else:
            out[:, :split], out[:, split:] = xt, yt
        return out
    return call


CASES: list[Case] = [
    Case("concat two transposed (1024, 2048) f32 -> (b + c) a", _pair((1024, 2048)), {
        "ours": lambda x, y: ra.rearrange((x, y), CONCAT_OUTER),
        "numpy concatenate([x.T, y.T])": lambda x, y: np.concatenate([x.T, y.T]),
        "numpy into C-order slices": _numpy_into(0),
        "einx (numpy)": _einx(CONCAT_OUTER),
        "torch.cat([x.T, y.T])": _torch_cat(0, True),
        "ours (torch)": _ours_torch(CONCAT_OUTER),
    }),
    Case("concat two transposed (2048, 1024) f32 -> a (b + c)", _pair((2048, 1024)), {
        "ours": lambda x, y: ra.rearrange((x, y), CONCAT_INNER),
        "numpy concatenate([x.T, y.T], 1)": lambda x, y: np.concatenate([x.T, y.T], axis=1),
        "numpy into C-order slices": _numpy_into(1),
        "einx (numpy)": _einx(CONCAT_INNER),
        "torch.cat([x.T, y.T], 1)": _torch_cat(1, True),
        "ours (torch)": _ours_torch(CONCAT_INNER),
    }),
    Case("concat two small (64, 32) f32 -> (b + c) a", _pair((64, 32)), {
        "ours": lambda x, y: ra.rearrange((x, y), CONCAT_OUTER),
        "numpy concatenate([x.T, y.T])": lambda x, y: np.concatenate([x.T, y.T]),
        "einx (numpy)": _einx(CONCAT_OUTER),
        "torch.cat([x.T, y.T])": _torch_cat(0, True),
    }),
]


def memory_order(result: Any) -> str:
    """'C', 'F', or the axes (longer than 1) outermost in memory first, of an array's
    strides (numpy's or torch's; elements or bytes alike)."""
    strides = result.stride() if callable(getattr(result, "stride", None)) else result.strides
    shape = tuple(result.shape)
    order = sorted((k for k, n in enumerate(shape) if n > 1), key=lambda k: -abs(strides[k]))
    long_axes = [k for k, n in enumerate(shape) if n > 1]
    if order == long_axes:
        return "C"
    if order == long_axes[::-1]:
        return "F"
    return "axes " + ",".join(map(str, order))


def _check(case: Case, inputs: tuple[Any, ...]) -> dict[str, str]:
    """Every contender's result equals ours; returns each one's memory order."""
    reference = np.asarray(case.contenders["ours"](*inputs))
    orders = {}
    for name, call in case.contenders.items():
        result = call(*inputs)
        orders[name] = memory_order(result)
        result = result.numpy() if hasattr(result, "numpy") and not isinstance(
            result, np.ndarray) else np.asarray(result)
        if result.shape != reference.shape or not np.array_equal(result, reference):
            raise AssertionError(f"{case.name}: {name} differs from ours")
    return orders


def run(cases: list[Case], rounds: int, min_sample: float) -> None:
    from rearrange.kernel import wait

    for case in cases:
        inputs = case.setup()
        orders = _check(case, inputs)
        wait(60)       # the kernel's runners ready: its speed, not numpy's stand-in
        calls = {name: (lambda call=call: call(*inputs)) for name, call in
                 case.contenders.items()}
        timings = interleaved(calls, rounds, min_sample)
        ours = timings["ours"]
        print(f"\n{case.name}")
        for name, timing in timings.items():
            ratio = "" if name == "ours" else f"  {paired_ratio(timing, ours):5.2f}x ours"
            print(f"  {name:38s} {timing.median * 1e6:10.1f} us ±{timing.spread:4.0%}"
                  f"{ratio or ' ' * 12}  result: {orders[name]} order")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="substrings of case names to run")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.05)
    parser.add_argument("--contenders", default="",
                        help="comma-separated substrings: keep only the contenders whose "
                             "names hold one (and ours); e.g. 'concatenate,einx' leaves "
                             "out those that leave threads spinning (torch's) or take 20x "
                             "longer and so shorten every sample (see docs/notation.md)")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.names or any(n in c.name for n in args.names)]
    if args.contenders:
        keep = args.contenders.split(",")
        cases = [Case(c.name, c.setup, {name: call for name, call in c.contenders.items()
                                        if name == "ours" or any(k in name for k in keep)})
                 for c in cases]
    run(cases, args.rounds, args.min_sample)


if __name__ == "__main__":
    main()
