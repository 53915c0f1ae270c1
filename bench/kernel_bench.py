"""The copy kernel against its peers: strided view -> fresh C-contiguous array.

Standalone: ``PYTHONPATH=. python bench/kernel_bench.py [--threads 1,2] [--cases vit,nhwc]
[--rounds 7] [--out results.md]``.

For each case (the input is the *permuted view* that needs copying, built with numpy
reshape/transpose) and each thread count, in one process and interleaved round by round:

* ``kernel``        rearrange.kernel.copy_into into a preallocated C-contiguous output
* ``kernel+alloc``  the same with ``np.empty`` for the output inside the timed call
* ``numpy``         ``np.copyto(out, view)``; ``numpy+alloc``: ``np.ascontiguousarray``
* ``torch``         ``out.copy_(view)``; ``torch+alloc``: ``view.contiguous()``
                    (``torch.set_num_threads`` equal to the kernel's)
* ``limit``         ``np.copyto(out, contiguous_source)``: the same bytes, no permutation
* ``memcpy``        the kernel's own ``contiguous-memcpy`` of those bytes at the thread
                    count (at 1 thread that is np.copyto, so ``limit`` again)

Figures are GB/s of read + write bytes (2 x nbytes) from the median of per-round samples;
``vs peer`` is the kernel's speed over the best of numpy and torch at the same thread
count (preallocated against preallocated, allocating against allocating), ``of limit``
the kernel's speed over the contiguous copy's (``of memcpy``: over the faster of
``limit`` and ``memcpy``, the contiguous-copy limit at that thread count). numpy is single-threaded whatever the
thread count. JIT compilation is excluded (``warmup()`` first; its time is reported).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
from typing import Callable

# Idle OpenMP workers (torch's; the copy kernel's own workers sleep) spin for a while
# after every parallel call; on a shared machine that steals the cores from whichever
# contender runs next. They sleep instead, unless the caller chose (--spin keeps torch's
# default).
if "--spin" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rearrange import kernel as K  # noqa: E402


def _rand(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return rng.random(shape) + 1j * rng.random(shape)
    if dtype.kind == "f":
        return rng.random(shape, dtype=np.float64).astype(dtype)
    return rng.integers(0, 255, shape, dtype=np.uint8).astype(dtype)


def cases(rng):
    """(name, pattern, view) — the views are what a rearrange copy step hands the kernel."""
    x = _rand(rng, (8192, 8192), np.float32)
    yield "transpose f32 8192²", "h w -> w h", x.T
    x = _rand(rng, (8192, 8192), np.uint8)
    yield "transpose u8 8192²", "h w -> w h", x.T
    x = _rand(rng, (32, 64, 512, 64), np.float32)
    yield "bhtd->bthd f32", "b h t d -> b t h d", x.transpose(0, 2, 1, 3)
    for dt in ("uint8", "float32"):
        x = _rand(rng, (64, 224, 224, 3), dt)
        yield f"NHWC->NCHW {dt} C=3", "b h w c -> b c h w", x.transpose(0, 3, 1, 2)
    for dt in ("uint8", "float32"):
        x = _rand(rng, (64, 3, 224, 224), dt)
        yield f"NCHW->NHWC {dt} C=3", "b c h w -> b h w c", x.transpose(0, 2, 3, 1)
    x = _rand(rng, (16, 112, 112, 64), np.float32)
    yield "NHWC->NCHW f32 C=64", "b h w c -> b c h w", x.transpose(0, 3, 1, 2)
    x = _rand(rng, (64, 3, 224, 224), np.float32)
    yield ("ViT patchify p=16 f32", "b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
           x.reshape(64, 3, 14, 16, 14, 16).transpose(0, 2, 4, 3, 5, 1))
    yield ("ViT patchify p=16 f32 x[::2]", "b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
           x[::2].reshape(32, 3, 14, 16, 14, 16).transpose(0, 2, 4, 3, 5, 1))
    x = _rand(rng, (16, 256, 64, 64), np.float32)
    yield ("pixel shuffle r=2 f32", "b (c r1 r2) h w -> b c (h r1) (w r2)",
           x.reshape(16, 64, 2, 2, 64, 64).transpose(0, 1, 4, 2, 5, 3))
    x = _rand(rng, (64, 64, 64, 64), np.float32)
    yield "reverse axes f32 64⁴", "a b c d -> d c b a", x.transpose(3, 2, 1, 0)
    x = _rand(rng, (4096, 4096), np.float64)
    yield "transpose f64 4096²", "h w -> w h", x.T
    x = _rand(rng, (4096, 4096), np.complex128)
    yield "transpose c128 4096²", "h w -> w h", x.T


def race(contenders: dict[str, Callable], nbytes: int, rounds: int,
         min_sample: float) -> dict[str, float]:
    """Median seconds per call. Each round runs every contender once (a sample of
    ``number`` back-to-back calls), starting each round at a different contender and
    alternating direction, so that drift and predecessor effects spread evenly."""
    names = list(contenders)
    number = {}
    for name, f in contenders.items():
        f()
        t0 = time.perf_counter()
        f()
        dt = time.perf_counter() - t0
        number[name] = max(1, math.ceil(min_sample / max(dt, 1e-9)))
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order.reverse()
        for name in order:
            f = contenders[name]
            k = number[name]
            gc.disable()
            t0 = time.perf_counter()
            for _ in range(k):
                f()
            dt = (time.perf_counter() - t0) / k
            gc.enable()
            samples[name].append(dt)
    return {n: statistics.median(v) for n, v in samples.items()}


def bench_case(name, pattern, v, threads, rounds, min_sample, torch):
    out = np.empty(v.shape, v.dtype)
    cont = np.ascontiguousarray(v)
    nbytes = 2 * v.nbytes
    kern = K.plan_copy(v.shape, v.strides, v.dtype.itemsize, v.dtype.kind, threads=threads)
    c = {
        "kernel": lambda: K.copy_into(out, v, kern),
        "kernel+alloc": lambda: K.copy_into(np.empty(v.shape, v.dtype), v, kern),
        "numpy": lambda: np.copyto(out, v),
        "numpy+alloc": lambda: np.ascontiguousarray(v),
        "limit": lambda: np.copyto(out, cont),
    }
    if threads > 1:
        flat, flat_out = cont.reshape(-1), out.reshape(-1)
        mk = K.plan_copy(flat.shape, flat.strides, v.dtype.itemsize, v.dtype.kind,
                         threads=threads)
        c["memcpy"] = lambda: K.copy_into(flat_out, flat, mk)
    if torch is not None:
        torch.set_num_threads(threads)
        tv = torch.from_numpy(v)
        to = torch.from_numpy(out)
        c["torch"] = lambda: to.copy_(tv)
        c["torch+alloc"] = lambda: tv.contiguous()
    K.copy_into(out, v, kern)
    assert np.array_equal(out, cont), name
    sec = race(c, nbytes, rounds, min_sample)
    gbs = {k: nbytes / t / 1e9 for k, t in sec.items()}
    peer = max(gbs["numpy"], gbs.get("torch", 0.0))
    peer_alloc = max(gbs["numpy+alloc"], gbs.get("torch+alloc", 0.0))
    return {
        "case": name, "pattern": pattern, "threads": threads, "mb": v.nbytes / 1e6,
        "variant": kern.variant, "gbs": gbs,
        "vs_peer": gbs["kernel"] / peer, "vs_peer_alloc": gbs["kernel+alloc"] / peer_alloc,
        "of_limit": gbs["kernel"] / gbs["limit"],
        "of_memcpy": gbs["kernel"] / max(gbs["limit"], gbs.get("memcpy", 0.0)),
    }


def table(rows) -> str:
    head = ("| case | thr | MB | variant | kernel | +alloc | numpy | +alloc | torch | +alloc "
            "| limit | memcpy | vs peer | vs peer (alloc) | of limit | of memcpy |")
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        g = r["gbs"]
        lines.append(
            f"| {r['case']} | {r['threads']} | {r['mb']:.0f} | {r['variant']} "
            f"| {g['kernel']:.2f} | {g['kernel+alloc']:.2f} | {g['numpy']:.2f} "
            f"| {g['numpy+alloc']:.2f} | {g.get('torch', math.nan):.2f} "
            f"| {g.get('torch+alloc', math.nan):.2f} | {g['limit']:.2f} "
            f"| {g.get('memcpy', g['limit']):.2f} "
            f"| {r['vs_peer']:.2f}x | {r['vs_peer_alloc']:.2f}x | {r['of_limit']:.0%} "
            f"| {r['of_memcpy']:.0%} |")
    for t in sorted({r["threads"] for r in rows}):
        sel = [r for r in rows if r["threads"] == t]
        gm = math.exp(statistics.fmean(math.log(r["vs_peer"]) for r in sel))
        gma = math.exp(statistics.fmean(math.log(r["vs_peer_alloc"]) for r in sel))
        worst = min(sel, key=lambda r: r["vs_peer"])
        lines.append(f"\n{t} thread(s): geometric mean vs best peer {gm:.2f}x "
                     f"(allocating {gma:.2f}x); worst {worst['vs_peer']:.2f}x "
                     f"({worst['case']})")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--cases", default="", help="comma-separated substrings of case names")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-sample", type=float, default=0.05,
                    help="seconds per sample (back-to-back calls)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--spin", action="store_true",
                    help="leave OMP_WAIT_POLICY unset (idle OpenMP threads spin)")
    ap.add_argument("--out", help="also write the markdown table here")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    want = [w.strip().lower() for w in args.cases.split(",") if w.strip()]
    torch = None
    if not args.no_torch:
        try:
            import torch  # noqa: F811
        except ImportError:
            torch = None

    t0 = time.perf_counter()
    compiled = K.warmup(parallel=min(2, os.cpu_count() or 1))
    jit = time.perf_counter() - t0
    header = (f"# copy kernel benchmark\n\n{platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} CPUs, numpy {np.__version__}"
              + (f", torch {torch.__version__}" if torch else "")
              + f"; warmup() {jit:.2f} s ({len(compiled)} kernels)"
              + f"; rounds {args.rounds}, ≥{args.min_sample}s per sample"
              + f"; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}\n")
    print(header, flush=True)
    rows = []
    rng = np.random.default_rng(0)
    for name, pattern, v in cases(rng):
        if want and not any(w in name.lower() for w in want):
            continue
        for t in threads:
            r = bench_case(name, pattern, v, t, args.rounds, args.min_sample, torch)
            rows.append(r)
            g = r["gbs"]
            print(f"{name:24} t={t} {r['variant']:18} kernel {g['kernel']:6.2f} "
                  f"numpy {g['numpy']:5.2f} torch {g.get('torch', math.nan):5.2f} "
                  f"limit {g['limit']:5.2f} memcpy {g.get('memcpy', g['limit']):5.2f} GB/s  "
                  f"vs peer {r['vs_peer']:.2f}x (alloc {r['vs_peer_alloc']:.2f}x)  "
                  f"of limit {r['of_limit']:.0%} of memcpy {r['of_memcpy']:.0%}",
                  flush=True)
        del v
        gc.collect()
    text = header + "\n" + table(rows) + "\n"
    print("\n" + table(rows))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
