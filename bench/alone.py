"""One case of the registry, each contender in processes of its own: what XLA (or any
peer) reaches when nothing else runs beside it.

The harness times every contender in one process, taking turns (bench/timing.py): the
ratios then share the machine's drift. A contender can also pay for its neighbours —
their caches, their thread pools waking and sleeping — and XLA's own thread pool does:
on NCHW->NHWC uint8 it ran at a third of its speed alone in the harness's runs. This
script gives each contender ``--processes`` fresh processes of its own (alternating with
the others'), each timing only that contender (``--samples`` samples of at least
``--min-sample`` seconds after a first call), allocating as users call it, at
``--threads`` (rearrange and torch; XLA uses its pool of every core), and prints every
process's GB/s and their median.

    python bench/alone.py --case "NCHW->NHWC uint8" [--contenders rearrange,jax]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONTENDERS = ("rearrange", "numpy", "torch", "jax")


def copy_cases(text: str) -> list:
    """The registry's copy cases whose name, dtype or pattern contains text."""
    sys.path.insert(0, HERE)
    from cases import CASES, select
    return [c for c in select(CASES, [text]) if c.copy or "view" not in c.name]


def child(args) -> None:
    """Time one contender on the case; print its GB/s as JSON."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")     # as the harness
    sys.path.insert(0, HERE)
    import numpy as np

    import rearrange as ra
    from cases import case_label, make_input
    from timing import median_rate

    case = copy_cases(args.case)[0]
    x = make_input(case, args.size)
    plan = ra.explain(x, case.pattern, copy=case.copy, **case.lengths)
    source = plan.to_source("numpy")
    if args.child == "rearrange":
        ra.set_jit_mode("eager")
        ra.set_num_threads(args.threads)

        def call():
            return ra.rearrange(x, case.pattern, copy=case.copy, **case.lengths)
    elif args.child == "numpy":
        fn = eval("lambda x: " + source, {"np": np})   # noqa: S307 - the plan's own source

        def call():
            return fn(x)
    elif args.child == "torch":
        import torch
        torch.set_num_threads(args.threads)
        tx = torch.from_numpy(x)
        fn = eval("lambda x: " + plan.to_source("torch"), {"torch": torch})  # noqa: S307

        def call():
            return fn(tx)
    else:
        import jax
        jx = jax.device_put(x)
        fn = jax.jit(eval("lambda x: " + source, {"np": jax.numpy}))  # noqa: S307

        def call():
            return fn(jx).block_until_ready()
    expected = eval("lambda x: " + source, {"np": np})(x)  # noqa: S307
    result = np.asarray(call())
    assert np.array_equal(result, expected), f"{args.child}: wrong values"
    gbs = median_rate(call, 2 * expected.nbytes / 1e9, args.samples, args.min_sample)
    print(json.dumps({"case": case_label(case), "gbs": gbs}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, help="text of the case's name, dtype or pattern")
    parser.add_argument("--contenders", default="rearrange,jax")
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--min-sample", type=float, default=0.2)
    parser.add_argument("--size", default="full", choices=("full", "quick", "smoke"))
    parser.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    if not copy_cases(args.case):
        parser.error(f"no copy case of bench/cases.py contains {args.case!r}")
    names = [n for n in args.contenders.split(",") if n]
    unknown = sorted(set(names) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contenders {unknown}; expected some of {list(CONTENDERS)}")
    speeds: dict[str, list[float]] = {n: [] for n in names}
    label = ""
    for _ in range(args.processes):
        for name in names:
            argv = [sys.executable, os.path.abspath(__file__), "--child", name, "--case",
                    args.case, "--threads", str(args.threads), "--samples",
                    str(args.samples), "--min-sample", str(args.min_sample), "--size",
                    args.size]
            out = subprocess.run(argv, capture_output=True, text=True, check=True)
            line = json.loads(out.stdout.strip().splitlines()[-1])
            label = line["case"]
            speeds[name].append(line["gbs"])
    print(f"{label}: each contender alone in {args.processes} processes, threads="
          f"{args.threads}, allocating, GB/s (read + write)\n")
    print("| contender | every process | median |")
    print("|---|---|---:|")
    for name, values in speeds.items():
        each = ", ".join(f"{v:.1f}" for v in values)
        print(f"| {name} | {each} | {statistics.median(values):.1f} |")


if __name__ == "__main__":
    main()
