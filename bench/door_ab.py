"""Warm call time of the notation operations, one checkout against another, in one process.

    python bench/door_ab.py OLD_TREE NEW_TREE [--rounds 40] [--min-sample 0.01]

``OLD_TREE`` and ``NEW_TREE`` are source trees of the project (``git worktree add ../old
<commit>``). Both packages are loaded into this process, the old one under the name
``rearrange_old`` (the package imports itself relatively; torch's backend imports
``rearrange`` by name, so the torch cases of the old tree run partly on the new one's
glue — the calls timed here never reach it). Each case is a warm call on small arrays (a
plan cache hit: the call overhead is most of its time), timed by :mod:`timing`'s
interleaved rounds: each round times the old and the new call back to back. Printed per
case: each tree's median microseconds per call, and the median (and the range of the
middle half) of the per-round ratios new / old — rounds share the machine's drift.

Written for the move of indexing, along and the notation rearrange onto the front door
(rearrange/front.py, issue #38): a warm fast path stays ahead of the door where these
numbers say it matters.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(tree: str, name: str):
    """The package of ``tree`` imported as ``name``."""
    path = os.path.join(os.path.abspath(tree), "rearrange")
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(path, "__init__.py"), submodule_search_locations=[path])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def cases(ra, torch):
    """(name, call) pairs of one package: warm calls on small arrays."""
    import numpy as np

    rng = np.random.default_rng(0)
    table = rng.standard_normal((16, 8))
    ids = rng.integers(0, 16, size=(2, 3))
    x = rng.standard_normal((4, 6))
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 5))
    square = rng.standard_normal((5, 5))
    t_table, t_ids = torch.from_numpy(table), torch.from_numpy(ids)
    t_x, t_a, t_b = torch.from_numpy(x), torch.from_numpy(a), torch.from_numpy(b)
    values = rng.standard_normal((2, 3, 8))
    return [
        ("get_at numpy", lambda: ra.get_at(table, ids, "[v] d, b t -> b t d")),
        ("set_at numpy", lambda: ra.set_at(table, ids, values, "[v] d, b t, b t d")),
        ("get_at torch", lambda: ra.get_at(t_table, t_ids, "[v] d, b t -> b t d")),
        ("softmax numpy", lambda: ra.softmax(x, "a [b]")),
        ("flip numpy", lambda: ra.flip(x, "a [b]")),
        ("roll numpy", lambda: ra.roll(x, "a [b]", shift=1)),
        ("argmax numpy", lambda: ra.argmax(x, "a [b] -> a")),
        ("softmax torch", lambda: ra.softmax(t_x, "a [b]")),
        ("concat numpy", lambda: ra.rearrange((a, b), "r c1, r c2 -> r (c1 + c2)")),
        ("split numpy", lambda: ra.rearrange(x, "r (c1 + c2) -> r c1, r c2", c1=2)),
        ("diagonal numpy", lambda: ra.rearrange(square, "i i -> i")),
        ("concat torch", lambda: ra.rearrange((t_a, t_b), "r c1, r c2 -> r (c1 + c2)")),
        ("rearrange numpy", lambda: ra.rearrange(x, "a b -> b a")),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--min-sample", type=float, default=0.01)
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    from timing import interleaved

    import numpy as np
    import torch

    torch.set_num_threads(1)    # tiny tensors: a thread pool on a shared machine costs ms
    old = load(args.old, "rearrange_old")
    new = load(args.new, "rearrange")
    print(f"old {os.path.dirname(old.__file__)}  new {os.path.dirname(new.__file__)}")
    print(f"{'case':18} {'old us':>8} {'new us':>8}  new/old median [p25, p75]")
    for (name, old_call), (_, new_call) in zip(cases(old, torch), cases(new, torch)):
        np.testing.assert_allclose(*(np.asarray(r) for r in _pair(old_call(), new_call())))
        timings = interleaved({"old": old_call, "new": new_call}, args.rounds, args.min_sample)
        ratios = sorted(n / o for n, o in zip(timings["new"].samples, timings["old"].samples))
        q = statistics.quantiles(ratios, n=4)
        print(f"{name:18} {timings['old'].median * 1e6:8.2f} {timings['new'].median * 1e6:8.2f}"
              f"  {statistics.median(ratios):.3f} [{q[0]:.3f}, {q[2]:.3f}]")


def _pair(old, new):
    """The results as two arrays (a split's tuple of views concatenated)."""
    import numpy as np

    if isinstance(old, tuple):
        return (np.concatenate([np.asarray(a).ravel() for a in old]),
                np.concatenate([np.asarray(a).ravel() for a in new]))
    return old, new


if __name__ == "__main__":
    main()
