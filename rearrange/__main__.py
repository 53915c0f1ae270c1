"""Command line.

    rearrange explain 'b h t d -> b t (h d)' --shape 2,8,128,64 [--strides ...]
              [--dtype float32] [--op rearrange|reduce|repeat] [--reduction sum]
              [--copy auto|never|always] [--json | --emit numpy|torch] [h=8 ...]
    rearrange warmup
    rearrange demo
    rearrange --version

``python -m rearrange`` is the same program.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from .errors import RearrangeError


def _int_list(text: str) -> tuple[int, ...]:
    text = text.strip().strip("()[]")
    if not text:
        return ()
    try:
        return tuple(int(part) for part in text.replace(" ", "").split(",") if part != "")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 2,8,128,64; got {text!r}"
        ) from None


def _axis_length(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=LENGTH such as h=8; got {text!r}")
    try:
        return name, int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the length in {text!r} is not an integer") from None


def _version() -> str:
    from . import __version__

    return __version__


def _explain(args: argparse.Namespace) -> int:
    from .api import explain

    copy = {"auto": None, "never": False, "always": True}[args.copy]
    if args.op == "reduce" and args.reduction is None:
        raise RearrangeError("--op reduce needs --reduction (sum, mean, max, ...)")
    plan = explain(args.shape, args.pattern, op=args.op, reduction=args.reduction,
                   strides=args.strides, dtype=args.dtype, copy=copy, **dict(args.lengths))
    # A refused plan (--copy never, no view) is what the call would raise on: the table
    # and the JSON still print (they say "refused"), no code is emitted for it, and the
    # status is 1 either way.
    if args.json:
        print(plan.dump())
    elif args.emit and plan.refused is None:
        print(plan.to_source(args.emit))
    elif not args.emit:
        print(plan)
    if plan.refused is not None:
        print(f"rearrange: refused: {args.op} with --copy never raises NoViewError: "
              f"{plan.refused}", file=sys.stderr)
        return 1
    return 0


def _warmup(args: argparse.Namespace) -> int:
    """Compile every copy-kernel runner now (and cache it on disk)."""
    import time

    from . import kernel

    start = time.perf_counter()
    compiled = kernel.warmup(parallel=args.parallel)
    print(f"{len(compiled)} kernel runners ready in {time.perf_counter() - start:.1f} s "
          f"({args.parallel} compile process{'es' if args.parallel != 1 else ''}; cached "
          f"on disk; threads: {kernel.get_num_threads()})")
    for name in compiled:
        print(f"  {name}")
    return 0


def _demo(_: argparse.Namespace) -> int:
    """Walk through the memory model on a small tensor."""
    from . import arange

    x = arange(24).view(2, 3, 4)
    steps = [
        ("x = arange(24).view(2, 3, 4)", x),
        ("x.permute(2, 0, 1)", x.permute(2, 0, 1)),
        ("x.transpose(0, 1)[:, ::2]", x.transpose(0, 1)[:, ::2]),
        ("x.view(6, 4)", x.view(6, 4)),
        ("x.permute(2, 0, 1).reshape(4, 6)", x.permute(2, 0, 1).reshape(4, 6)),
    ]
    print(f"{'expression':<36} {'shape':<12} {'strides':<12} {'offset':>6}  contiguous  storage")
    for text, t in steps:
        shares = t.storage().data_ptr() == x.storage().data_ptr()
        print(
            f"{text:<36} {str(tuple(t.shape)):<12} {str(t.stride()):<12} "
            f"{t.storage_offset():>6}  {str(t.is_contiguous()):<10}  "
            f"{'x (view)' if shares else 'new (copy)'}"
        )
    try:
        x.permute(2, 0, 1).view(-1)
    except RearrangeError as error:
        print(f"\nx.permute(2, 0, 1).view(-1) -> {type(error).__name__}: {error}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rearrange", description="einops-style rearrangement compiler")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    explain = commands.add_parser(
        "explain", help="print the plan for a pattern and an input layout",
        description="Print how rearrange (or --op reduce/repeat) executes PATTERN on an "
                    "input of the given layout: every step, and why it is a view or a copy.",
    )
    explain.add_argument("pattern", help="an einops pattern, e.g. 'b h t d -> b t (h d)'")
    explain.add_argument("lengths", nargs="*", type=_axis_length, metavar="NAME=LENGTH",
                         help="axis lengths, e.g. h=8")
    explain.add_argument("--shape", type=_int_list, required=True, help="input shape, e.g. 2,8,128,64")
    explain.add_argument("--strides", type=_int_list, default=None,
                         help="input strides in elements (default: C-contiguous)")
    explain.add_argument("--dtype", default="float32", help="element type (default float32)")
    explain.add_argument("--copy", choices=("auto", "never", "always"), default="auto",
                         help="copy=None (auto), False (never) or True (always)")
    explain.add_argument("--op", choices=("rearrange", "reduce", "repeat"), default="rearrange",
                         help="the operation (default rearrange)")
    explain.add_argument("--reduction", default=None,
                         help="with --op reduce: sum, mean, max, min, prod, any, all, var, "
                              "std, logsumexp, argmax, argmin, count_nonzero")
    output = explain.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the plan as JSON")
    output.add_argument("--emit", choices=("numpy", "torch"),
                        help="print the equivalent numpy or torch code")
    explain.set_defaults(run=_explain)

    warmup = commands.add_parser(
        "warmup", help="compile every copy-kernel variant now (cached on disk)")
    warmup.add_argument("--parallel", type=int, default=min(2, os.cpu_count() or 1),
                        help="compile processes (default: min(2, CPUs))")
    warmup.set_defaults(run=_warmup)

    demo = commands.add_parser("demo", help="show views and copies on a small rearrange.Tensor")
    demo.set_defaults(run=_demo)

    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except RearrangeError as error:
        print(f"rearrange: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
