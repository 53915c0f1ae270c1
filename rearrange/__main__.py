"""Command line.

    rearrange explain 'b h t d -> b t (h d)' --shape 2,8,128,64 [--strides ...]
              [--dtype float32] [--op rearrange|reduce|repeat|pack|unpack|einsum|
              check_shape|parse_shape] [--reduction sum] [--packed-shape 3 ...]
              [--copy auto|never|always] [--json | --emit numpy|torch]
              [--svg FILE] [--html FILE] [h=8 ...]
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

from .errors import ArgumentTypeError, RearrangeError


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


#: The ops ``explain`` plans, as ``rearrange.explain(op=...)`` names them.
OPS = ("rearrange", "reduce", "repeat", "pack", "unpack", "einsum", "check_shape", "parse_shape",
       "add", "subtract", "multiply", "divide", "maximum", "minimum", "logaddexp", "where",
       "softmax", "log_softmax", "flip", "roll", "sort", "argsort", "argmax", "argmin",
       "get_at", "set_at", "add_at", "subtract_at")
#: Ops that take several arrays: one ``--shape`` (and ``--strides``, ``--dtype``) each.
SEVERAL_INPUTS = ("pack", "einsum")
#: Ops of einx's notation that take several arrays, given by their shapes alone (one
#: ``--shape`` each; C-contiguous, no --strides or --dtype): elementwise and indexing.
SHAPES_ONLY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "logaddexp",
               "where", "get_at", "set_at", "add_at", "subtract_at")


def _one(values: list | None, option: str, op: str) -> object:
    """The one value an option takes for a single-input op (None when not given)."""
    if not values:
        return None
    if len(values) > 1:
        raise ArgumentTypeError(
            f"--op {op} takes one {option}, got {len(values)}; several are for "
            f"--op {' or --op '.join(SEVERAL_INPUTS)}, one per input")
    return values[0]


def _explain_arguments(args: argparse.Namespace) -> tuple[object, dict]:
    """What ``rearrange.explain`` gets for these options: the input(s) and keywords."""
    op = args.op
    if op == "reduce" and args.reduction is None:
        raise RearrangeError("--op reduce needs --reduction (sum, mean, max, ...)")
    if args.packed_shape is not None and op != "unpack":
        raise ArgumentTypeError(f"--packed-shape is for --op unpack, not --op {op}")
    if op in SHAPES_ONLY:
        if args.strides or args.dtype or args.copy != "auto" or args.reduction is not None:
            raise ArgumentTypeError(f"--op {op} takes one --shape per input (C-contiguous) and "
                                    "axis lengths, nothing else")
        return list(args.shape), {"op": op, **dict(args.lengths)}
    if op == "rearrange" and len(args.shape) > 1 and "," in args.pattern:
        # a concatenation: one --shape (and --strides) per input
        options = {"op": op, "copy": {"auto": None, "never": False, "always": True}[args.copy],
                   "dtype": _one(args.dtype, "--dtype", op) or "float32"}
        if args.strides:
            options["strides"] = args.strides
        if options["copy"] is None:
            del options["copy"]
        return list(args.shape), {**options, **dict(args.lengths)}
    options: dict = {"op": op, "copy": {"auto": None, "never": False, "always": True}[args.copy]}
    if args.shift is not None:
        if op != "roll":
            raise ArgumentTypeError(f"--shift is for --op roll, not --op {op}")
        options["shift"] = args.shift[0] if len(args.shift) == 1 else tuple(args.shift)
    if args.reduction is not None:
        options["reduction"] = args.reduction
    if op in ("check_shape", "parse_shape"):
        if args.dtype:
            raise ArgumentTypeError(f"--dtype does not apply to --op {op}: it reads a shape")
    elif op in SEVERAL_INPUTS:
        dtypes = args.dtype or ["float32"]
        options["dtype"] = dtypes[0] if len(dtypes) == 1 or op == "pack" else dtypes
    else:
        options["dtype"] = _one(args.dtype, "--dtype", op) or "float32"
    if op in SEVERAL_INPUTS:
        x = list(args.shape)
        if args.strides:
            options["strides"] = args.strides if op == "einsum" else args.strides[0]
    else:
        x = _one(args.shape, "--shape", op)
        strides = _one(args.strides, "--strides", op)
        if strides is not None:
            options["strides"] = strides
    if op == "unpack":
        if args.packed_shape is None:
            raise ArgumentTypeError("--op unpack needs --packed-shape, once per output "
                                    "(e.g. --packed-shape 3 --packed-shape 2,2 --packed-shape '')")
        options["packed_shapes"] = args.packed_shape
    if options["copy"] is None:
        del options["copy"]
    return x, {**options, **dict(args.lengths)}


def _explain(args: argparse.Namespace) -> int:
    from .api import explain

    x, options = _explain_arguments(args)
    plan = explain(x, args.pattern, **options)
    to_svg = getattr(plan, "to_svg", None)
    if args.svg is not None and to_svg is None:
        # every plan that moves memory draws itself; parse_shape/check_shape only read a shape
        what = (f"a {args.op} plan has no picture (it reads a shape and moves no memory)"
                if args.op in ("check_shape", "parse_shape") else
                f"this {args.op} plan ({type(plan).__name__}) has no picture")
        raise ArgumentTypeError(f"--svg: {what}; --html writes its table")
    if args.emit and not hasattr(plan, "to_source"):
        raise ArgumentTypeError(f"--emit: a {args.op} plan has no code (it reads a shape and "
                                "moves no data)")
    if args.svg is not None or args.html is not None:
        from .picture import html_page

        svg = None if to_svg is None else to_svg()
        if args.svg is not None:
            _write(args.svg, svg)
        if args.html is not None:
            _write(args.html, html_page(str(plan), svg, f"{args.op} '{args.pattern}'"))
    refused = getattr(plan, "refused", None)
    # A refused plan (--copy never, no view) is what the call would raise on: the table,
    # the JSON and the pictures still say so, no code is emitted for it, and the status
    # is 1 either way.
    if args.json:
        print(plan.dump())
    elif args.emit and refused is None:
        print(plan.to_source(args.emit))
    elif not args.emit:
        print(plan)
    if refused is not None:
        print(f"rearrange: refused: {args.op} with --copy never raises NoViewError: "
              f"{refused}", file=sys.stderr)
        return 1
    return 0


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise RearrangeError(f"cannot write {path}: {error.strerror}") from None


def _warmup(args: argparse.Namespace) -> int:
    """Compile every copy-kernel runner now (and cache it on disk). On a terminal one
    line shows what is ready and how many are left; otherwise a plain line per runner."""
    import time

    from . import kernel
    from .kernel import loops  # noqa: F401 - registers the kernels before numba wraps them
    from .kernel.jit import KernelUnavailable, disk_cache_supported

    start = time.perf_counter()
    try:
        if not disk_cache_supported():
            print("rearrange: this numba cannot cache the copy kernels on disk: each "
                  "process compiles the ones it needs, in the background", file=sys.stderr)
            return 0
    except KernelUnavailable as error:
        print(f"rearrange: no copy kernels here: {error}", file=sys.stderr)
        return 1
    terminal = sys.stdout.isatty()

    def progress(name: str | None, ready: int, total: int) -> None:
        left = total - ready
        if terminal:
            last = f"; last: {name}" if name else ""
            print(f"\r\x1b[Kcompiling {total} kernel runners ({args.parallel} "
                  f"process{'es' if args.parallel != 1 else ''}): {ready} ready, {left} "
                  f"left{last}", end="", flush=True)
        elif name is None:
            print(f"compiling {total} kernel runners", flush=True)
        else:
            print(f"ready {ready}/{total}: {name} ({left} left)", flush=True)

    # This process ends here: the runners the workers compiled are left on disk for
    # the processes that copy, not loaded into this one.
    compiled = kernel.warmup(parallel=args.parallel, load=False, progress=progress)
    if terminal:
        print()
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
        description="Print how rearrange (or another --op) executes PATTERN on inputs of "
                    "the given layouts: every step, and why it is a view or a copy; "
                    "--svg and --html draw it.",
    )
    explain.add_argument("pattern", help="an einops pattern, e.g. 'b h t d -> b t (h d)'")
    explain.add_argument("lengths", nargs="*", type=_axis_length, metavar="NAME=LENGTH",
                         help="axis lengths, e.g. h=8")
    explain.add_argument("--shape", type=_int_list, required=True, action="append",
                         help="input shape, e.g. 2,8,128,64; once per input for --op pack "
                              "and einsum")
    explain.add_argument("--strides", type=_int_list, default=None, action="append",
                         help="input strides in elements (default: C-contiguous); once per "
                              "input for --op einsum")
    explain.add_argument("--dtype", default=None, action="append",
                         help="element type (default float32): any numpy dtype, or bfloat16, "
                              "float8_e4m3fn, float8_e5m2, ..., complex32; once per input "
                              "for --op einsum")
    explain.add_argument("--copy", choices=("auto", "never", "always"), default="auto",
                         help="copy=None (auto), False (never) or True (always)")
    explain.add_argument("--op", choices=OPS, default="rearrange",
                         help="the operation (default rearrange)")
    explain.add_argument("--reduction", default=None,
                         help="with --op reduce: sum, mean, max, min, prod, any, all, var, "
                              "std, logsumexp, argmax, argmin, count_nonzero")
    explain.add_argument("--shift", type=_int_list, default=None,
                         help="with --op roll: the shift, one int or one per bracketed axis")
    explain.add_argument("--packed-shape", type=_int_list, default=None, action="append",
                         metavar="SHAPE",
                         help="with --op unpack: the shape '*' stands for in one output "
                              "(once per output; '' for none)")
    output = explain.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the plan as JSON")
    output.add_argument("--emit", choices=("numpy", "torch"),
                        help="print the equivalent numpy or torch code")
    explain.add_argument("--svg", metavar="FILE", default=None,
                         help="also write the plan's picture to FILE (SVG)")
    explain.add_argument("--html", metavar="FILE", default=None,
                         help="also write a standalone page with the table and the picture")
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
    except BrokenPipeError:
        # the reader went away (``rearrange explain ... | head``): no traceback, and
        # nothing more written at exit, where Python would flush into the closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
