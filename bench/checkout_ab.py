"""The suite's copies as users call them, one checkout of rearrange against another.

    python bench/checkout_ab.py OLD_TREE NEW_TREE [--threads 1] [--rounds 4] [--case TEXT]

``OLD_TREE`` and ``NEW_TREE`` are source trees of the project (``git worktree add ../old
<commit>``). Each round runs one child process per tree, in alternating order, with that
tree's package first on the path; a child times every copy case of :mod:`cases`
(``rearrange(x, pattern, copy=...)``, a new array per call, as the harness's
allocation-inclusive tables) at ``--threads``, and prints GB/s (read + write bytes) per
case, each copy checked against einops first: the median of ``--samples`` samples of at
least ``--min-sample`` seconds each, after a first call that compiles
(``set_jit_mode("eager")``). The parent prints, per case, each tree's median over the
rounds and the median (and range) of the per-round ratios new / old: rounds that ran in
the same minutes share the machine's drift.

This is how "no case slower than before" is checked on one machine, whatever the
figures of another run say.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def child(args) -> None:
    """Time the cases with the package on sys.path (the tree the parent put first)."""
    sys.path.insert(0, HERE)
    import einops
    import numpy as np

    import rearrange as ra
    from cases import CASES, case_label, make_input, select
    from timing import median_rate

    ra.set_jit_mode("eager")
    ra.set_num_threads(args.threads)
    speeds = {}
    for case in select([c for c in CASES if c.copy or "view" not in c.name], args.case):
        x = make_input(case, args.size)

        def call(case=case, x=x):
            return ra.rearrange(x, case.pattern, copy=case.copy, **case.lengths)

        result = call()                                 # compiles, or loads the runner
        expected = einops.rearrange(x, case.pattern, **case.lengths)
        assert np.array_equal(result, expected), f"{case_label(case)}: wrong values"
        if np.shares_memory(result, x):
            continue                                    # a view: no copy to time
        speeds[case_label(case)] = median_rate(call, 2 * result.nbytes / 1e9,
                                               args.samples, args.min_sample)
        del x, result, expected
    print(json.dumps(speeds))


def run_tree(tree: str, args) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    argv = [sys.executable, os.path.abspath(__file__), "--child", "--threads",
            str(args.threads), "--samples", str(args.samples), "--min-sample",
            str(args.min_sample), "--size", args.size]
    for text in args.case or []:
        argv += ["--case", text]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="OLD_TREE NEW_TREE")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--min-sample", type=float, default=0.2)
    parser.add_argument("--size", default="full", choices=("full", "quick", "smoke"))
    parser.add_argument("--case", action="append", help="only cases containing this text")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    if len(args.trees) != 2:
        parser.error("give two source trees: OLD_TREE NEW_TREE")
    old, new = args.trees
    runs: dict[str, list[dict[str, float]]] = {old: [], new: []}
    for r in range(args.rounds):
        for tree in ((old, new) if r % 2 == 0 else (new, old)):
            runs[tree].append(run_tree(tree, args))
    print(f"threads={args.threads}, {args.rounds} rounds, allocating, GB/s (read + write)\n")
    print("| case | old | new | range of new / old | new / old (paired) |")
    print("|---|---:|---:|---|---:|")
    for label in runs[old][0]:
        a = [run[label] for run in runs[old]]
        b = [run[label] for run in runs[new]]
        ratios = [y / x for x, y in zip(a, b)]
        print(f"| {label} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | "
              f"{min(ratios):.2f}–{max(ratios):.2f} | {statistics.median(ratios):.2f}× |")


if __name__ == "__main__":
    main()
