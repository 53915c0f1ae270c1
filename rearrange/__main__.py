"""Command line: ``python -m rearrange demo`` (and, as the compiler lands, ``explain``)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import arange


def _demo(_: argparse.Namespace) -> int:
    """Walk through the memory model on a small tensor."""
    x = arange(24).view(2, 3, 4)
    steps = [
        ("x = arange(24).view(2, 3, 4)", x),
        ("x.permute(2, 0, 1)", x.permute(2, 0, 1)),
        ("x.transpose(0, 1)[:, ::2]", x.transpose(0, 1)[:, ::2]),
        ("x.view(6, 4)", x.view(6, 4)),
        ("x.permute(2, 0, 1).reshape(4, 6)", x.permute(2, 0, 1).reshape(4, 6)),
    ]
    print(f"{'expression':<36} {'shape':<12} {'strides':<12} {'offset':>6}  contiguous  shares x's storage")
    for text, t in steps:
        shares = t.storage().data_ptr() == x.storage().data_ptr()
        print(
            f"{text:<36} {str(tuple(t.shape)):<12} {str(t.stride()):<12} "
            f"{t.storage_offset():>6}  {str(t.is_contiguous()):<10}  "
            f"{'yes (view)' if shares else 'no (copy)'}"
        )
    try:
        x.permute(2, 0, 1).view(-1)
    except Exception as error:  # the point of the demo: view refuses, reshape copies
        print(f"\nx.permute(2, 0, 1).view(-1) -> {type(error).__name__}: {error}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rearrange", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="show views and copies on a small tensor")
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
