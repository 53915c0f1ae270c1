"""Warm eager calls on small torch CPU tensors: rearrange vs einops (issue #14, item 4).

    python bench/torch_overhead.py [--rounds 21] [--min-sample 0.01] [--only NAME]

Nine operations, each with and without ``requires_grad=True`` on the inputs, timed in one
process with the two contenders taking turns (:func:`timing.interleaved`), after a
check that rearrange's result equals einops'. The table gives the median per-call time
of each and ``einops/ours``, the median over rounds of the per-round ratio (both timed
within one round, so drift of the shared machine cancels); the geometric mean of those
ratios is the figure the issue sets a target for (>= 1.3, and no row below 1.0).
torch runs on one thread (``torch.set_num_threads(1)``): the tensors are tiny, and a
second thread only adds scheduling noise.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # run as a script: bench/ is on sys.path already
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import interleaved, paired_ratio  # noqa: E402


def _import_rearrange() -> Any:
    try:
        import rearrange
    except ImportError:  # a checkout without an install: the package is next to bench/
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        import rearrange
    return rearrange


Case = tuple[str, Callable[[], Any], Callable[[], Any]]


def cases(torch: Any, ra: Any, einops: Any, requires_grad: bool) -> list[Case]:
    """(name, rearrange's call, einops' call) on the issue's float32 inputs."""
    generator = torch.Generator().manual_seed(0)

    def tensor(*shape: int) -> Any:
        return torch.randn(*shape, generator=generator).requires_grad_(requires_grad)

    x, y, img, z = tensor(2, 8, 16, 4), tensor(2, 16, 32), tensor(2, 3, 16, 16), tensor(2, 256, 4)
    shapes = [[8, 16], [8, 16]]
    return [
        ("rearrange view", lambda: ra.rearrange(x, "b h t d -> b h (t d)"),
         lambda: einops.rearrange(x, "b h t d -> b h (t d)")),
        ("rearrange copy", lambda: ra.rearrange(x, "b h t d -> b t (h d)"),
         lambda: einops.rearrange(x, "b h t d -> b t (h d)")),
        ("rearrange split", lambda: ra.rearrange(y, "b t (h d) -> b h t d", h=4),
         lambda: einops.rearrange(y, "b t (h d) -> b h t d", h=4)),
        ("reduce mean", lambda: ra.reduce(x, "b h t d -> b t d", "mean"),
         lambda: einops.reduce(x, "b h t d -> b t d", "mean")),
        ("reduce max-pool", lambda: ra.reduce(img, "b c (h 2) (w 2) -> b c h w", "max"),
         lambda: einops.reduce(img, "b c (h 2) (w 2) -> b c h w", "max")),
        ("repeat", lambda: ra.repeat(y, "b t d -> b t d r", r=3),
         lambda: einops.repeat(y, "b t d -> b t d r", r=3)),
        ("pack", lambda: ra.pack([x, x], "b * d"), lambda: einops.pack([x, x], "b * d")),
        ("unpack", lambda: ra.unpack(z, shapes, "b * d"),
         lambda: einops.unpack(z, shapes, "b * d")),
        ("einsum", lambda: ra.einsum(x, x, "b h t d, b h s d -> b h t s"),
         lambda: einops.einsum(x, x, "b h t d, b h s d -> b h t s")),
    ]


def check_same(torch: Any, name: str, ours: Any, theirs: Any) -> None:
    """Equal values, dtypes and shapes (pack: and equal packed shapes)."""
    if name == "pack":
        (ours, our_shapes), (theirs, their_shapes) = ours, theirs
        assert [tuple(s) for s in our_shapes] == [tuple(s) for s in their_shapes], name
    if isinstance(ours, (list, tuple)):
        assert len(ours) == len(theirs), name
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, msg=lambda m: f"{name}: {m}")
        return
    torch.testing.assert_close(ours, theirs, msg=lambda m: f"{name}: {m}")


def run(rounds: int, min_sample: float, only: str | None = None,
        log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    import einops
    import torch

    ra = _import_rearrange()
    records = []
    for requires_grad in (False, True):
        for name, ours, theirs in cases(torch, ra, einops, requires_grad):
            if only is not None and only not in name:
                continue
            check_same(torch, name, ours(), theirs())
            t = interleaved({"ours": ours, "einops": theirs}, rounds, min_sample)
            record = {"case": name, "requires_grad": requires_grad,
                      "ours_us": t["ours"].median * 1e6, "einops_us": t["einops"].median * 1e6,
                      "ratio": paired_ratio(t["einops"], t["ours"]),
                      "spread": max(t["ours"].spread, t["einops"].spread)}
            records.append(record)
            log(f"  {name:<16} grad={requires_grad!s:<5} ours {record['ours_us']:7.2f} µs  "
                f"einops {record['einops_us']:7.2f} µs  einops/ours {record['ratio']:.2f}")
    return records


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def format_markdown(records: list[dict[str, Any]]) -> str:
    lines = ["| op | requires_grad | ours µs | einops µs | einops/ours |",
             "|---|---|---:|---:|---:|"]
    for r in records:
        lines.append(f"| {r['case']} | {r['requires_grad']} | {r['ours_us']:.2f} | "
                     f"{r['einops_us']:.2f} | {r['ratio']:.2f} |")
    lines.append("")
    for requires_grad in (False, True):
        ratios = [r["ratio"] for r in records if r["requires_grad"] is requires_grad]
        if ratios:
            lines.append(f"geometric mean of einops/ours, requires_grad={requires_grad}: "
                         f"{geomean(ratios):.2f} (lowest {min(ratios):.2f})")
    ratios = [r["ratio"] for r in records]
    lines.append(f"geometric mean of einops/ours, all rows: {geomean(ratios):.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="samples per contender")
    parser.add_argument("--min-sample", type=float, default=0.01,
                        help="seconds the slower contender's sample lasts at least")
    parser.add_argument("--only", help="run the cases whose name contains this")
    args = parser.parse_args()
    import einops
    import torch

    torch.set_num_threads(1)
    ra = _import_rearrange()
    print(f"torch {torch.__version__}, einops {einops.__version__}, rearrange from "
          f"{Path(ra.__file__).parent}; torch.set_num_threads(1); float32 CPU tensors; "
          f"{args.rounds} interleaved rounds; einops/ours is the median per-round ratio\n")
    records = run(args.rounds, args.min_sample, args.only, log=lambda line: None)
    print(format_markdown(records))


if __name__ == "__main__":
    main()
