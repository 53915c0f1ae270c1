"""Elementwise operations by axis name: rearrange against einx and the plain call.

For each case and backend (numpy, torch), three contenders run interleaved in one process
(bench/timing.py): ``rearrange`` (``ra.add(x, bias, 'b t c, c')``), einx 0.4.3
(``einx.add('b t c, c', x, bias)``) and the plain library call with the broadcasting
written by hand (``x + bias``). The table gives each median per call and the paired
ratios ours/einx and ours/plain (below 1: ours faster).

    PYTHONPATH=. python bench/notation_elementwise.py [--rounds 15] [--min-sample 0.02]
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from timing import interleaved, paired_ratio  # noqa: E402


def cases(lib: str) -> list[tuple[str, dict[str, Callable[[], Any]]]]:
    """(name, contenders) per case, on numpy or torch arrays."""
    import einx

    import rearrange as ra

    rng = np.random.default_rng(0)
    if lib == "numpy":
        def make(*shape: int) -> Any:
            return rng.standard_normal(shape, dtype=np.float32)

        where_plain = np.where
    else:
        import torch

        def make(*shape: int) -> Any:
            return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))

        where_plain = torch.where
    result = []
    for b, t, c in ((4, 8, 16), (16, 256, 512)):
        x, bias = make(b, t, c), make(c)
        result.append((f"bias add 'b t c, c' {b}x{t}x{c}", {
            "rearrange": lambda x=x, bias=bias: ra.add(x, bias, "b t c, c"),
            "einx": lambda x=x, bias=bias: einx.add("b t c, c", x, bias),
            "plain": lambda x=x, bias=bias: x + bias,
        }))
    for n, m in ((16, 32), (1024, 2048)):
        u, v = make(n), make(m)
        result.append((f"outer product 'a, b -> a b' {n}x{m}", {
            "rearrange": lambda u=u, v=v: ra.multiply(u, v, "a, b -> a b"),
            "einx": lambda u=u, v=v: einx.multiply("a, b -> a b", u, v),
            "plain": lambda u=u, v=v: u[:, None] * v[None, :],
        }))
    for b, t, c in ((4, 8, 16), (16, 256, 512)):
        x, mask = make(b, t, c), make(b, t) > 0
        result.append((f"where 'b t, b t c, -> b t c' {b}x{t}x{c}", {
            "rearrange": lambda x=x, m=mask: ra.where(m, x, 0.0, "b t, b t c, -> b t c"),
            "einx": lambda x=x, m=mask: einx.where("b t, b t c, -> b t c", m, x, 0.0),
            "plain": lambda x=x, m=mask: where_plain(m[:, :, None], x, 0.0),
        }))
    return result


def _time(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.02)
    parser.add_argument("--libs", default="numpy,torch")
    args = parser.parse_args()
    print("| backend | case | rearrange | einx | plain | ours/einx | ours/plain |")
    print("|---|---|---|---|---|---|---|")
    for lib in args.libs.split(","):
        if lib == "torch":
            import torch

            torch.set_num_threads(1)
        for name, calls in cases(lib):
            timings = interleaved(calls, args.rounds, args.min_sample)
            ours = timings["rearrange"]
            print(f"| {lib} | {name} | {_time(ours.median)} | "
                  f"{_time(timings['einx'].median)} | {_time(timings['plain'].median)} | "
                  f"{paired_ratio(ours, timings['einx']):.2f} | "
                  f"{paired_ratio(ours, timings['plain']):.2f} |", flush=True)


if __name__ == "__main__":
    main()
