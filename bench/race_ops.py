"""Every operation against the best peer, not only rearrange's copies (#39's table).

    PYTHONPATH=. python bench/race_ops.py [--rounds 7] [--min-sample 0.05] [--only max-pool]

All contenders run in one process on the same data (numpy inputs; torch on
``torch.from_numpy`` of the same arrays, 2 threads), interleaved round by round
(bench/timing.py); the table gives each contender's median and ours against the best
peer as a ratio of medians (> 1: ours is faster). Peers: numpy's best call, einops on
numpy, and torch (its own best call and einops on torch).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import interleaved  # noqa: E402

import rearrange as ra  # noqa: E402


def cases(rng: np.random.Generator) -> list[tuple[str, dict[str, Callable[[], Any]]]]:
    import einops
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(2)
    f32 = np.float32
    out = []

    q = rng.random((8, 8, 256, 64), dtype=f32)
    k = rng.random((8, 8, 256, 64), dtype=f32)
    tq, tk = torch.from_numpy(q), torch.from_numpy(k)
    attention = "b h t d, b h s d -> b h t s"
    out.append(("einsum attention (8,8,256,64)", {
        "ours": lambda: ra.einsum(q, k, attention),
        "numpy optimize": lambda: np.einsum("bhtd,bhsd->bhts", q, k, optimize=True),
        "einops numpy": lambda: einops.einsum(q, k, attention),
        "torch": lambda: torch.einsum("bhtd,bhsd->bhts", tq, tk),
    }))

    a = rng.random((64, 256, 256), dtype=f32)
    b = rng.random((256, 256), dtype=f32)
    c = rng.random((256, 256), dtype=f32)
    ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
    chain = "b i j, j k, k l -> b i l"
    out.append(("einsum chain (64,256,256)x2", {
        "ours": lambda: ra.einsum(a, b, c, chain),
        "numpy optimize": lambda: np.einsum("bij,jk,kl->bil", a, b, c, optimize=True),
        "einops numpy": lambda: einops.einsum(a, b, c, chain),
        "torch": lambda: torch.einsum("bij,jk,kl->bil", ta, tb, tc),
    }))

    x = rng.random((32, 64, 112, 112), dtype=f32)
    tx = torch.from_numpy(x)
    pool = "b c (h 2) (w 2) -> b c h w"
    for name, reduction, torch_call in (
            ("max-pool 2x2 (32,64,112,112)", "max", lambda: F.max_pool2d(tx, 2)),
            ("avg-pool 2x2 (32,64,112,112)", "mean", lambda: F.avg_pool2d(tx, 2))):
        out.append((name, {
            "ours": (lambda r=reduction: ra.reduce(x, pool, r)),
            "numpy": (lambda r=reduction: getattr(x.reshape(32, 64, 56, 2, 56, 2), r)(axis=(3, 5))),
            "einops numpy": (lambda r=reduction: einops.reduce(x, pool, r)),
            "torch": torch_call,
            "einops torch": (lambda r=reduction: einops.reduce(tx, pool, r)),
        }))

    y = rng.random((32, 64, 56, 56), dtype=f32)
    ty = torch.from_numpy(y)
    for name, pattern, reduction, axis in (
            ("mean over channels (32,64,56,56)", "b c h w -> b h w", "mean", (1,)),
            ("sum over the last axis (32,64,56,56)", "b c h w -> b c h", "sum", (3,)),
            ("global max per channel (32,64,56,56)", "b c h w -> c", "max", (0, 2, 3))):
        out.append((name, {
            "ours": (lambda p=pattern, r=reduction: ra.reduce(y, p, r)),
            "numpy": (lambda r=reduction, ax=axis: getattr(y, r)(axis=ax)),
            "einops numpy": (lambda p=pattern, r=reduction: einops.reduce(y, p, r)),
            "torch": (lambda r=reduction, ax=axis: getattr(torch, "amax" if r == "max" else r)(ty, dim=ax)),
            "einops torch": (lambda p=pattern, r=reduction: einops.reduce(ty, p, r)),
        }))

    v = rng.random((64, 256, 64), dtype=f32)
    tv = torch.from_numpy(v)
    out.append(("repeat copy=True (64,256,64) x4", {
        "ours": lambda: ra.repeat(v, "b t c -> b t r c", r=4, copy=True),
        "numpy": lambda: np.repeat(v[:, :, None, :], 4, axis=2),
        "einops numpy": lambda: einops.repeat(v, "b t c -> b t r c", r=4),
        "torch": lambda: tv[:, :, None, :].expand(64, 256, 4, 64).contiguous(),
    }))

    parts = [rng.random((32, 1024, n), dtype=f32) for n in (64, 32, 96)]
    tparts = [torch.from_numpy(p) for p in parts]
    out.append(("pack of 3 (32,1024,*)", {
        "ours": lambda: ra.pack(parts, "b t *"),
        "numpy": lambda: np.concatenate(parts, axis=2),
        "einops numpy": lambda: einops.pack(parts, "b t *"),
        "torch": lambda: torch.cat(tparts, dim=2),
    }))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-sample", type=float, default=0.05)
    parser.add_argument("--only", help="run the cases whose name contains this")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| case | ours ms | best peer | ms | ours vs best | all (ms) |")
    print("|---|---:|---|---:|---:|---|")
    for name, calls in cases(rng):
        if args.only and args.only not in name:
            continue
        timings = interleaved(calls, args.rounds, args.min_sample)
        ms = {who: t.median * 1e3 for who, t in timings.items()}
        best = min((who for who in ms if who != "ours"), key=ms.get)
        rest = ", ".join(f"{who} {value:.2f}" for who, value in ms.items())
        print(f"| {name} | {ms['ours']:.2f} | {best} | {ms[best]:.2f} | "
              f"{ms[best] / ms['ours']:.2f}x | {rest} |", flush=True)


if __name__ == "__main__":
    main()
