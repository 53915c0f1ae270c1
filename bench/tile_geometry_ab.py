"""Register-tile geometries A/B for one unit size: float32 (or any unit's) tiled
transposes into a preallocated output, each geometry in its own processes, taking turns.

A process compiles one tile geometry per unit size (``plan.SIMD_TILE``, read when the
runners are compiled), so the geometries cannot share a process: this script starts a
child per geometry and round, alternating (A B A B ...), and each child times every copy
of the set interleaved (``--rounds`` samples of ``--min-sample`` seconds) at 1 and 2
threads. The table: GB/s (read + write) per geometry, the median over the children, and
each geometry's speed over the first one's, per copy.

    python bench/tile_geometry_ab.py [--unit 4] [--tiles 8x16,16x32] [--processes 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DTYPES = {1: np.uint8, 2: np.uint16, 4: np.float32, 8: np.float64}


def sources(unit: int, quick: bool) -> dict[str, np.ndarray]:
    """label -> strided source: square transposes (power-of-two rows and not), a
    rectangular one, batched transposes (attention's k.T, NHWC<->NCHW with many
    channels; batches of 12-64 MiB) and a full reversal. ``quick``: small ones."""
    rng = np.random.default_rng(0)
    dt = DTYPES[unit]

    def array(*shape):
        return (rng.random(shape) * 100).astype(dt)

    div = 4 if quick else 1                 # batch divisor
    squares = (128, 200) if quick else (512, 1000, 2048, 4096, 8192, 8256)
    rect = (300, 500) if quick else (3000, 5000)
    out = {f"transpose {n}²": array(n, n).T for n in squares}
    out[f"transpose {rect[0]}x{rect[1]}"] = array(*rect).T
    heads = (32 // div, 64 // div, 512, 64)
    out[f"b h t d -> b h d t {heads}"] = array(*heads).transpose(0, 1, 3, 2)
    for c in (16, 64, 256):
        nhwc = ((64 if c < 256 else 16) // (4 * div), 56, 56, c)
        out[f"NHWC->NCHW {nhwc}"] = array(*nhwc).transpose(0, 3, 1, 2)
    nchw = (64 // div, 64, 56, 56)
    out[f"NCHW->NHWC {nchw}"] = array(*nchw).transpose(0, 2, 3, 1)
    r = 16 if quick else 64
    out[f"full reversal {(r,) * 4}"] = array(r, r, r, r).transpose(3, 2, 1, 0)
    return out


def child(args) -> None:
    """Time every copy of the set with this process's geometry; print one JSON line."""
    from rearrange.kernel import plan
    ka, kb = (int(x) for x in args.child.split("x"))
    # Before anything is compiled: the runners read the geometry when they compile (and
    # the compile cache keys on it).
    plan.SIMD_TILE[args.unit] = (ka, kb)
    import rearrange as ra
    from rearrange import kernel
    from timing import interleaved
    ra.set_jit_mode("eager")
    srcs = sources(args.unit, args.quick)
    speeds = {}
    for threads in (1, 2):
        ra.set_num_threads(threads)
        calls = {}
        for label, src in srcs.items():
            out = np.empty(src.shape, src.dtype)
            k = kernel.plan_copy(src.shape, src.strides, src.itemsize)
            kernel.copy_into(out, src, k)
            assert np.array_equal(out, src), label
            calls[label] = lambda out=out, src=src, k=k: kernel.copy_into(out, src, k)
            speeds[f"{label}|variant"] = k.variant
        t = interleaved(calls, args.rounds, min_sample=args.min_sample)
        for label, src in srcs.items():
            speeds[f"{label}|{threads}"] = 2 * src.nbytes / t[label].median / 1e9
    print(json.dumps(speeds))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit", type=int, default=4, choices=sorted(DTYPES))
    parser.add_argument("--tiles", default="8x16,16x32",
                        help="Ka x Kb geometries, comma-separated; the first is the base")
    parser.add_argument("--processes", type=int, default=2, help="children per geometry")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-sample", type=float, default=0.15)
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    tiles = [t for t in args.tiles.split(",") if t]
    runs: dict[str, list[dict]] = {t: [] for t in tiles}
    for _ in range(args.processes):
        for t in tiles:
            cmd = [sys.executable, os.path.abspath(__file__), "--child", t,
                   "--unit", str(args.unit), "--rounds", str(args.rounds),
                   "--min-sample", str(args.min_sample)] + (["--quick"] if args.quick else [])
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[t].append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = tiles[0]
    labels = list(sources(args.unit, args.quick))
    print(f"| {DTYPES[args.unit].__name__} copy | plan | threads | "
          + " | ".join(f"{t} GB/s" for t in tiles) + " | "
          + " | ".join(f"{t} / {base}" for t in tiles[1:]) + " |")
    print("|---|---|---:|" + "---:|" * (2 * len(tiles) - 1))
    for threads in (1, 2):
        for label in labels:
            key = f"{label}|{threads}"
            med = {t: statistics.median(r[key] for r in runs[t]) for t in tiles}
            print(f"| {label} | {runs[base][0][f'{label}|variant']} | {threads} | "
                  + " | ".join(f"{med[t]:.1f}" for t in tiles) + " | "
                  + " | ".join(f"{med[t] / med[base]:.2f}×" for t in tiles[1:]) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
