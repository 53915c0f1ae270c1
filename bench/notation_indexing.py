"""get_at and add_at against einx and the plain library call, in one process.

Cases (issue #38): an embedding lookup ``'[v] d, b t -> b t d'`` (a 50000 x 512 float32
table, 32 x 128 ids) and a 2-d gather ``'b [h w] c, b p [2] -> b p c'`` (16 x 64 x 64 x
32, 256 points per batch element), plus the 2-d scatter-add of the same shapes. On numpy
and torch (CPU, one thread: the machine is shared), each contender takes turns with the
others (bench/timing.py's balanced interleaving); the figure is the median per-round
ratio to ours (> 1: the contender is slower).

    PYTHONPATH=. python bench/notation_indexing.py [--rounds 15] [--min-sample 0.05]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import interleaved, paired_ratio  # noqa: E402


def cases(library: str):
    import einx
    import rearrange as ra

    rng = np.random.default_rng(0)
    table = rng.normal(size=(50000, 512)).astype(np.float32)
    ids = rng.integers(0, 50000, (32, 128))
    b, h, w, c, p = 16, 64, 64, 32, 256
    image = rng.normal(size=(b, h, w, c)).astype(np.float32)
    points = rng.integers(0, 64, (b, p, 2))
    updates = rng.normal(size=(b, p, c)).astype(np.float32)
    if library == "torch":
        import torch

        torch.set_num_threads(1)
        table, ids, image, points, updates = (torch.from_numpy(a) for a in
                                              (table, ids, image, points, updates))
        batch = torch.arange(b)[:, None]

        def plain_embedding():
            return torch.nn.functional.embedding(ids, table)

        def plain_gather():
            return image[batch, points[..., 0], points[..., 1]]

        def plain_add():
            return image.index_put((batch, points[..., 0], points[..., 1]), updates,
                                   accumulate=True)
    else:
        batch = np.arange(b)[:, None]

        def plain_embedding():
            return table[ids]

        def plain_gather():
            return image[batch, points[..., 0], points[..., 1]]

        def plain_add():
            result = image.copy()
            np.add.at(result, (batch, points[..., 0], points[..., 1]), updates)
            return result

    def clone(a):
        return a.clone() if library == "torch" else a.copy()

    embedding = "[v] d, b t -> b t d"
    gather = "b [h w] c, b p [2] -> b p c"
    scatter = "b [h w] c, b p [2], b p c"
    return {
        f"embedding {embedding!r} 50000x512, 32x128": {
            "ours": lambda: ra.get_at(table, ids, embedding),
            "einx": lambda: einx.get_at(embedding, table, ids),
            "plain": plain_embedding,
        },
        f"2-d gather {gather!r} 16x64x64x32, 16x256x2": {
            "ours": lambda: ra.get_at(image, points, gather),
            "einx": lambda: einx.get_at(gather, image, points),
            "plain": plain_gather,
        },
        # einx writes into the array it is given: it gets a fresh copy each call, like
        # ours makes one
        f"2-d add_at {scatter!r}": {
            "ours": lambda: ra.add_at(image, points, updates, scatter),
            "einx": lambda: einx.add_at(scatter, clone(image), points, updates),
            "plain": plain_add,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.05)
    parser.add_argument("--library", choices=["numpy", "torch", "both"], default="both")
    args = parser.parse_args()
    libraries = ["numpy", "torch"] if args.library == "both" else [args.library]
    print("| library | case | ours (us) | einx / ours | plain / ours |")
    print("|---|---|---:|---:|---:|")
    for library in libraries:
        for name, calls in cases(library).items():
            timings = interleaved(calls, args.rounds, args.min_sample)
            ours = timings["ours"]
            print(f"| {library} | {name} | {ours.median * 1e6:.0f} "
                  f"| {paired_ratio(timings['einx'], ours):.2f} "
                  f"| {paired_ratio(timings['plain'], ours):.2f} |", flush=True)


if __name__ == "__main__":
    main()
