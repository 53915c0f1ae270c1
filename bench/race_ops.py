"""Every operation against the best peer, not only rearrange's copies (#39's table).

    python bench/race_ops.py [--rounds 7] [--min-sample 0.05] [--only max-pool] [--size quick]
    python bench/run.py --suite ops --threads 2      # the same cases in the harness:
                                                     # JSON, markdown and a plot

All contenders run in one process on the same data, interleaved round by round
(bench/timing.py), each checked against rearrange's result before it is timed; the table
gives each contender's median and rearrange against the best peer as a ratio of medians
(> 1: rearrange is faster), with the paired ratio (the median of per-round ratios) beside
it. Peers: numpy's best call, einops on numpy, torch on ``torch.from_numpy`` of the same
arrays (its own best call, and einops on torch), and XLA (``jax.jit`` of the jax.numpy
equivalent on arrays already on the device, ``block_until_ready``; XLA's CPU pool is
every available core, so it takes part only at that thread count).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:   # imported from elsewhere (run.py puts it there itself)
    sys.path.insert(0, str(BENCH))

if __name__ == "__main__":
    # torch's and OpenBLAS's idle workers sleep (timing.IDLE_WORKERS_SLEEP): before
    # numpy and torch are imported.
    from timing import idle_workers_sleep
    idle_workers_sleep()

import numpy as np  # noqa: E402

from timing import Timing, interleaved, paired_ratio  # noqa: E402

Call = Callable[[], Any]
OURS = "rearrange"
PEERS = ("numpy", "einops numpy", "torch", "einops torch", "jax")

# Per size, the lengths the cases scale: the full size is #39's table.
SHAPES = {
    "full": {"batch": 64, "heads": 8, "seq": 256, "dim": 64, "side": 256, "image": 56,
             "channels": 64, "images": 32, "tokens": 1024},
    "quick": {"batch": 16, "heads": 4, "seq": 128, "dim": 64, "side": 128, "image": 28,
              "channels": 32, "images": 8, "tokens": 256},
    "smoke": {"batch": 2, "heads": 2, "seq": 16, "dim": 8, "side": 16, "image": 8,
              "channels": 4, "images": 2, "tokens": 16},
}


@dataclass(frozen=True)
class OpCase:
    """One operation on one set of inputs: a call per contender (``rearrange`` first),
    and for each peer that cannot take part, why not."""
    name: str
    family: str                                   # einsum, reduce, repeat, pack
    calls: dict[str, Call]
    missing: dict[str, str] = field(default_factory=dict)
    exact: bool = True                            # results equal, or equal to float rounding


class MismatchError(AssertionError):
    """A contender's result differs from rearrange's: no timing is worth reporting."""


def _as_numpy(value: Any) -> np.ndarray:
    if isinstance(value, tuple):            # pack's (packed, shapes)
        value = value[0]
    if hasattr(value, "detach"):            # torch
        value = value.detach().numpy()
    return np.asarray(value)


def check(case: OpCase) -> None:
    """Every contender's result against rearrange's (shape, dtype and values)."""
    reference = _as_numpy(case.calls[OURS]())
    for name, call in case.calls.items():
        got = _as_numpy(call())
        same_shape = got.shape == reference.shape and got.dtype == reference.dtype
        if case.exact:
            ok = same_shape and np.array_equal(got, reference)
        else:   # sums in another order (BLAS, XLA, torch): float32 rounding
            ok = same_shape and np.allclose(got, reference, rtol=1e-4, atol=1e-4)
        if not ok:
            raise MismatchError(f"{case.name}: {name} gives {got.shape} {got.dtype}, "
                                f"rearrange {reference.shape} {reference.dtype}"
                                + ("" if not same_shape else ": values differ"))


def _jitted(jax: Any, fn: Callable[..., Any], *arrays: np.ndarray) -> Call:
    """XLA's call: ``fn`` jitted, on device copies of ``arrays`` made once here."""
    compiled = jax.jit(fn)
    on_device = [jax.device_put(a) for a in arrays]
    return lambda: compiled(*on_device).block_until_ready()


def cases(rng: np.random.Generator, size: str = "full",
          libs: dict[str, Any] | None = None) -> list[OpCase]:
    """#39's table at ``size``; ``libs`` (name -> module or None) chooses the peers, by
    default every one that imports."""
    libs = dict(libs or {})
    for name in ("rearrange", "einops", "torch", "jax"):
        if name not in libs:
            try:
                libs[name] = __import__(name)
            except ImportError:
                libs[name] = None
    ra, einops, torch, jax = (libs[n] for n in ("rearrange", "einops", "torch", "jax"))
    jnp = jax.numpy if jax is not None else None
    F = torch.nn.functional if torch is not None else None
    t = (lambda a: torch.from_numpy(a)) if torch is not None else None
    n = SHAPES[size]
    f32 = np.float32
    out: list[OpCase] = []

    needs = {"einops numpy": ("einops",), "einops torch": ("einops", "torch"),
             "torch": ("torch",), "jax": ("jax",)}

    def case(name: str, family: str, calls: dict[str, Call | None],
             missing: dict[str, str] | None = None, exact: bool = True) -> None:
        absent = dict(missing or {})
        for peer, modules in needs.items():
            lacking = [m for m in modules if libs[m] is None]
            if lacking and peer not in absent:
                absent[peer] = f"{' and '.join(lacking)} not available"
        kept = {who: call for who, call in calls.items()
                if call is not None and who not in absent}
        out.append(OpCase(name, family, kept, absent, exact))

    b, h, s, d = n["batch"], n["heads"], n["seq"], n["dim"]
    q = rng.random((b // 8 or 1, h, s, d), dtype=f32)
    k = rng.random((b // 8 or 1, h, s, d), dtype=f32)
    attention = "b h t d, b h s d -> b h t s"
    case(f"einsum attention {q.shape}", "einsum", {
        OURS: lambda: ra.einsum(q, k, attention),
        "numpy": lambda: np.einsum("bhtd,bhsd->bhts", q, k, optimize=True),
        "einops numpy": einops and (lambda: einops.einsum(q, k, attention)),
        "torch": torch and (lambda tq=t(q), tk=t(k): torch.einsum("bhtd,bhsd->bhts", tq, tk)),
        "einops torch": einops and torch and (
            lambda tq=t(q), tk=t(k): einops.einsum(tq, tk, attention)),
        "jax": jax and _jitted(jax, lambda x, y: jnp.einsum("bhtd,bhsd->bhts", x, y), q, k),
    }, exact=False)

    side = n["side"]
    a = rng.random((b, side, side), dtype=f32)
    m1 = rng.random((side, side), dtype=f32)
    m2 = rng.random((side, side), dtype=f32)
    chain = "b i j, j k, k l -> b i l"
    case(f"einsum chain {a.shape}x2", "einsum", {
        OURS: lambda: ra.einsum(a, m1, m2, chain),
        "numpy": lambda: np.einsum("bij,jk,kl->bil", a, m1, m2, optimize=True),
        "torch": torch and (lambda ta=t(a), tb=t(m1), tc=t(m2):
                            torch.einsum("bij,jk,kl->bil", ta, tb, tc)),
        "einops torch": einops and torch and (
            lambda ta=t(a), tb=t(m1), tc=t(m2): einops.einsum(ta, tb, tc, chain)),
        "jax": jax and _jitted(jax, lambda x, y, z: jnp.einsum("bij,jk,kl->bil", x, y, z),
                               a, m1, m2),
    }, missing={"einops numpy": "n/a (numpy.einsum without optimize: a naive loop, "
                                "minutes)"},
        exact=False)

    images, channels, image = n["images"], n["channels"], n["image"]
    x = rng.random((images, channels, 2 * image, 2 * image), dtype=f32)
    pool = "b c (h 2) (w 2) -> b c h w"
    windows = (images, channels, image, 2, image, 2)
    for name, reduction, torch_pool in (("max-pool", "max", "max_pool2d"),
                                        ("avg-pool", "mean", "avg_pool2d")):
        case(f"{name} 2x2 {x.shape}", "reduce", {
            OURS: lambda r=reduction: ra.reduce(x, pool, r),
            "numpy": lambda r=reduction: getattr(x.reshape(windows), r)(axis=(3, 5)),
            "einops numpy": einops and (lambda r=reduction: einops.reduce(x, pool, r)),
            "torch": torch and (lambda tx=t(x), p=torch_pool: getattr(F, p)(tx, 2)),
            "einops torch": einops and torch and (
                lambda r=reduction, tx=t(x): einops.reduce(tx, pool, r)),
            "jax": jax and _jitted(jax, lambda v, r=reduction: getattr(
                v.reshape(windows), r)(axis=(3, 5)), x),
        }, exact=reduction == "max")

    y = rng.random((images, channels, image, image), dtype=f32)
    for name, pattern, reduction, axis in (
            ("mean over channels", "b c h w -> b h w", "mean", (1,)),
            ("sum over the last axis", "b c h w -> b c h", "sum", (3,)),
            ("global max per channel", "b c h w -> c", "max", (0, 2, 3))):
        torch_name = "amax" if reduction == "max" else reduction
        case(f"{name} {y.shape}", "reduce", {
            OURS: lambda p=pattern, r=reduction: ra.reduce(y, p, r),
            "numpy": lambda r=reduction, ax=axis: getattr(y, r)(axis=ax),
            "einops numpy": einops and (lambda p=pattern, r=reduction: einops.reduce(y, p, r)),
            "torch": torch and (
                lambda ty=t(y), r=torch_name, ax=axis: getattr(torch, r)(ty, dim=ax)),
            "einops torch": einops and torch and (
                lambda p=pattern, r=reduction, ty=t(y): einops.reduce(ty, p, r)),
            "jax": jax and _jitted(
                jax, lambda v, r=reduction, ax=axis: getattr(jnp, r)(v, axis=ax), y),
        }, exact=reduction == "max")

    tokens = n["tokens"]
    v = rng.random((b, tokens // 4, d), dtype=f32)
    shape = (b, tokens // 4, 4, d)
    case(f"repeat copy=True {v.shape} x4", "repeat", {
        OURS: lambda: ra.repeat(v, "b t c -> b t r c", r=4, copy=True),
        "numpy": lambda: np.repeat(v[:, :, None, :], 4, axis=2),
        "einops numpy": einops and (lambda: einops.repeat(v, "b t c -> b t r c", r=4)),
        "torch": torch and (lambda tv=t(v): tv[:, :, None, :].expand(shape).contiguous()),
        "einops torch": einops and torch and (
            lambda tv=t(v): einops.repeat(tv, "b t c -> b t r c", r=4).contiguous()),
        "jax": jax and _jitted(jax, lambda w: jnp.repeat(w[:, :, None, :], 4, axis=2), v),
    })

    parts = [rng.random((images, tokens, width), dtype=f32) for width in (d, d // 2, 3 * d // 2)]
    case(f"pack of 3 ({images}, {tokens}, *)", "pack", {
        OURS: lambda: ra.pack(parts, "b t *"),
        "numpy": lambda: np.concatenate(parts, axis=2),
        "einops numpy": einops and (lambda: einops.pack(parts, "b t *")),
        "torch": torch and (lambda ts=[t(p) for p in parts]: torch.cat(ts, dim=2)),
        "einops torch": einops and torch and (
            lambda ts=[t(p) for p in parts]: einops.pack(ts, "b t *")),
        "jax": jax and _jitted(jax, lambda *ps: jnp.concatenate(ps, axis=2), *parts),
    })
    return out


# ---------------------------------------------------------------------- records

def add_ratios(record: dict[str, Any]) -> dict[str, Any]:
    """The best peer (lowest median) and rearrange against it: the ratio of medians and
    the paired ratio (> 1: rearrange is faster). Recomputable from the samples."""
    timings = {name: Timing(samples=list(entry["samples_s"]), number=entry["number"])
               for name, entry in record["contenders"].items()}
    peers = [name for name in PEERS if name in timings]
    for key in ("best_peer", "ratio_vs_best_peer", "paired_ratio_vs_best_peer"):
        record.pop(key, None)
    if peers and OURS in timings:
        best = min(peers, key=lambda name: timings[name].median)
        record["best_peer"] = best
        record["ratio_vs_best_peer"] = timings[best].median / timings[OURS].median
        record["paired_ratio_vs_best_peer"] = paired_ratio(timings[best], timings[OURS])
    return record


def race(case: OpCase, rounds: int, min_sample: float,
         base: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JSON-ready record: the case checked, then timed, contenders interleaved."""
    check(case)
    timings = interleaved(case.calls, rounds, min_sample)
    record = {**(base or {}), "suite": "ops", "case": case.name, "family": case.family,
              "missing": dict(case.missing),
              "contenders": {name: timing.to_dict() for name, timing in timings.items()}}
    return add_ratios(record)


def ops_markdown(records: list[dict[str, Any]]) -> str:
    """One table per thread count: medians in ms, rearrange against the best peer."""
    lines: list[str] = []
    for threads in sorted({r.get("threads", 0) for r in records}):
        group = [r for r in records if r.get("threads", 0) == threads]
        if threads:
            lines += [f"#### threads={threads} (rearrange and torch set to {threads}; numpy's "
                      "BLAS at its default; XLA on its own pool, so only at that count)", ""]
        lines += ["Milliseconds per call: the median of interleaved samples. ra vs best: the "
                  "best peer's median over rearrange's (> 1: rearrange is faster), then the "
                  "paired ratio.", "",
                  "| case | " + " | ".join((OURS, *PEERS)) + " | ra vs best | paired |",
                  "|---|" + "---:|" * (len(PEERS) + 3)]
        for r in group:
            cells = []
            for name in (OURS, *PEERS):
                entry = r["contenders"].get(name)
                cells.append(f"{entry['median_s'] * 1e3:.3g}" if entry else
                             r["missing"].get(name, "n/a"))
            ratio = r.get("ratio_vs_best_peer")
            vs = "—" if ratio is None else f"{ratio:.2f}× {r['best_peer']}"
            paired = r.get("paired_ratio_vs_best_peer")
            lines.append(f"| {r['case']} | " + " | ".join(cells) + f" | {vs} | "
                         + ("—" if paired is None or math.isnan(paired) else f"{paired:.2f}×")
                         + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-sample", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", choices=tuple(SHAPES), default="full")
    parser.add_argument("--only", help="run the cases whose name contains this")
    args = parser.parse_args()
    import rearrange as ra

    ra.set_jit_mode("eager")     # the kernel compiled in the warm-up, not in the timing
    ra.set_num_threads(args.threads)
    libs: dict[str, Any] = {"rearrange": ra}
    try:
        import torch
        torch.set_num_threads(args.threads)
        libs["torch"] = torch
    except ImportError:
        libs["torch"] = None
    try:
        import jax
        jax.config.update("jax_platforms", "cpu")
        libs["jax"] = jax
        xla_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count()
        if xla_threads != args.threads:
            libs["jax"] = None
            print(f"note: XLA runs {xla_threads} threads; jax left out at {args.threads}")
    except ImportError:
        libs["jax"] = None
    records = []
    for case in cases(np.random.default_rng(0), args.size, libs):
        if args.only and args.only not in case.name:
            continue
        record = race(case, args.rounds, args.min_sample, {"threads": args.threads})
        records.append(record)
        print(ops_markdown([record]).splitlines()[-1], flush=True)
    print()
    print(ops_markdown(records))


if __name__ == "__main__":
    main()
