"""Operations along bracketed axes and brackets in reduce: ours against einx 0.4.3 and
the plain library call, side by side in one process (bench/timing.py's interleaved
rounds; the figure to quote is the paired ratio ours / einx).

    PYTHONPATH=. python bench/notation_along.py [--rounds 15] [--min-sample 0.02]
        [--backends np,torch] [--torch-threads 1]

Prints a markdown table: per case and backend the median time per call of each
contender and the ratios ours/einx and ours/plain (below 1: ours is faster).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from timing import interleaved, paired_ratio  # noqa: E402


def cases(xp: str) -> list[tuple[str, Callable[[], Any], Callable[[], Any], Callable[[], Any]]]:
    """(name, ours, einx, plain) for numpy ("np") or torch ("torch") inputs."""
    import einx
    import rearrange as ra

    rng = np.random.default_rng(0)
    small = rng.normal(size=(8, 16, 32)).astype(np.float32)
    big = rng.normal(size=(32, 256, 256)).astype(np.float32)
    if xp == "torch":
        import torch
        small, big = torch.from_numpy(small), torch.from_numpy(big)
        plain_softmax = lambda x: torch.softmax(x, dim=1)                 # noqa: E731
        plain_flip = lambda x: torch.flip(x, dims=(1,))                   # noqa: E731
        plain_argmax = lambda x: torch.argmax(x, dim=1)                   # noqa: E731
        plain_pool = lambda x: x.reshape(x.shape[0], x.shape[1] // 2, 2,  # noqa: E731
                                         x.shape[2] // 2, 2).amax(dim=(2, 4))
    else:
        def plain_softmax(x: Any) -> Any:
            top = np.max(x, axis=1, keepdims=True)
            e = np.exp(x - top)
            return e / np.sum(e, axis=1, keepdims=True)
        plain_flip = lambda x: x[:, ::-1]                                 # noqa: E731
        plain_argmax = lambda x: np.argmax(x, axis=1)                     # noqa: E731
        plain_pool = lambda x: x.reshape(x.shape[0], x.shape[1] // 2, 2,  # noqa: E731
                                         x.shape[2] // 2, 2).max(axis=(2, 4))
    found = []
    for label, x in (("small", small), ("big", big)):
        found += [
            (f"softmax 'a [b] c' {label}", lambda x=x: ra.softmax(x, "a [b] c"),
             lambda x=x: einx.softmax("a [b] c", x), lambda x=x: plain_softmax(x)),
            (f"flip 'a [b] c' {label}", lambda x=x: ra.flip(x, "a [b] c"),
             lambda x=x: einx.flip("a [b] c", x), lambda x=x: plain_flip(x)),
            (f"argmax 'a [b] c -> a c' {label}", lambda x=x: ra.argmax(x, "a [b] c -> a c"),
             lambda x=x: einx.argmax("a [b] c -> a c", x), lambda x=x: plain_argmax(x)),
            (f"reduce '(b [2]) (c [2])' max {label}",
             lambda x=x: ra.reduce(x, "a (b [2]) (c [2])", "max"),
             lambda x=x: einx.max("a (b [2]) (c [2])", x), lambda x=x: plain_pool(x)),
        ]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.02)
    parser.add_argument("--backends", default="np,torch")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch's intra-op threads for every contender (default 1: the "
                             "machine is shared; 0 leaves torch's default)")
    args = parser.parse_args()
    if args.torch_threads and "torch" in args.backends:
        import torch
        torch.set_num_threads(args.torch_threads)
    print("| case | backend | ours | einx | plain | ours/einx | ours/plain |")
    print("|---|---|---|---|---|---|---|")
    for xp in args.backends.split(","):
        for name, ours, theirs, plain in cases(xp):
            timings = interleaved({"ours": ours, "einx": theirs, "plain": plain},
                                  args.rounds, args.min_sample)
            print(f"| {name} | {xp} | {timings['ours'].median * 1e6:.1f} us | "
                  f"{timings['einx'].median * 1e6:.1f} us | "
                  f"{timings['plain'].median * 1e6:.1f} us | "
                  f"{paired_ratio(timings['ours'], timings['einx']):.2f} | "
                  f"{paired_ratio(timings['ours'], timings['plain']):.2f} |", flush=True)


if __name__ == "__main__":
    main()
