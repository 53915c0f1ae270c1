"""repeat ``copy=True`` and pack at two threads (#39): rearrange's slab copies against its
one-thread path (numpy.repeat / numpy.concatenate: main's), the peers, and the
two-thread copy limit of the same bytes, in one process, interleaved (bench/timing.py).

    PYTHONPATH=. python bench/packrepeat_ab.py [--rounds 15] [--min-sample 0.05]
    PYTHONPATH=. python bench/packrepeat_ab.py --sweep     # both sides of SLAB_MIN_BYTES

Contenders per case: ``ours`` (rearrange at 2 threads), ``one thread`` (rearrange at
``set_num_threads(1)``: the single-thread path), ``torch`` (2 threads), ``XLA``, and
the limits: ``memcpy x2`` (numpy.copyto of a C-contiguous array of the output's size
into a fresh array, half on each thread: every byte read once and written once) and
``fill x2`` (the output's bytes written alone, two threads). Each prints its median and
min, the paired ratio against ours (> 1: ours is faster), the GB/s of the bytes the case
moves, and the minor page faults per call.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import kernel  # noqa: E402
from rearrange.slabs import in_slabs  # noqa: E402


def one_thread(call):
    def run():
        kernel.set_num_threads(1)
        try:
            return call()
        finally:
            kernel.set_num_threads(2)
    return run


def limits(shape: tuple[int, ...], rng: np.random.Generator) -> dict:
    source = rng.random(shape, dtype=np.float32)

    def memcpy2():
        out = np.empty(shape, np.float32)
        in_slabs(lambda lo, hi: np.copyto(out[lo:hi], source[lo:hi]), shape[0], 2)
        return out

    def fill2():
        out = np.empty(shape, np.float32)
        in_slabs(lambda lo, hi: out[lo:hi].fill(1.0), shape[0], 2)
        return out
    return {"memcpy x2": memcpy2, "fill x2": fill2}


def faults(call, calls: int = 20) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        call()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def race(title: str, calls: dict, moved: dict, rounds: int, min_sample: float) -> None:
    timings = interleaved(calls, rounds, min_sample)
    print(f"\n{title}")
    print(f"{'contender':12s} {'median ms':>9s} {'min ms':>8s} {'ours paired':>11s} "
          f"{'GB/s':>6s} {'faults':>7s}")
    for name, timing in timings.items():
        rate = moved.get(name, moved["case"]) / timing.median / 1e9
        print(f"{name:12s} {timing.median * 1e3:9.3f} {min(timing.samples) * 1e3:8.3f} "
              f"{paired_ratio(timing, timings['ours']):11.2f} {rate:6.1f} "
              f"{faults(calls[name]):7.0f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.05)
    parser.add_argument("--sweep", action="store_true",
                        help="ours against one thread from 256 KiB to 8 MiB of output")
    args = parser.parse_args(argv)
    kernel.set_num_threads(2)
    rng = np.random.default_rng(0)
    try:
        import torch
        torch.set_num_threads(2)
    except ImportError:
        torch = None
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None

    if args.sweep:
        for rows in (16, 32, 64, 128, 256, 512):     # output: rows x 16 KiB
            v = rng.random((rows, 16, 64), dtype=np.float32)
            parts = [rng.random((rows, 16, w), dtype=np.float32) for w in (64, 32, 160)]
            for title, call in (
                    (f"repeat {v.shape} x4", lambda: ra.repeat(v, "b t c -> b t r c", r=4,
                                                              copy=True)),
                    (f"pack of 3 ({rows}, 16, *)", lambda: ra.pack(parts, "b t *"))):
                timings = interleaved({"ours": call, "one thread": one_thread(call)},
                                      args.rounds, args.min_sample)
                ratio = paired_ratio(timings["one thread"], timings["ours"])
                print(f"{title:28s} output {rows * 16:5d} KiB  one thread "
                      f"{timings['one thread'].median * 1e6:8.1f} us  ours "
                      f"{timings['ours'].median * 1e6:8.1f} us  one thread / ours {ratio:.2f}")
        return

    v = rng.random((64, 256, 64), dtype=np.float32)
    shape = (64, 256, 4, 64)
    repeat = lambda: ra.repeat(v, "b t c -> b t r c", r=4, copy=True)  # noqa: E731
    calls = {"ours": repeat, "one thread": one_thread(repeat),
             "np.repeat": lambda: np.repeat(v[:, :, None, :], 4, axis=2)}
    if torch is not None:
        calls["torch"] = lambda tv=torch.from_numpy(v): tv[:, :, None, :].expand(
            shape).contiguous()
    if jax is not None:
        jitted, on_device = jax.jit(lambda w: jnp.repeat(w[:, :, None, :], 4, axis=2)), \
            jax.device_put(v)
        calls["XLA"] = lambda: jitted(on_device).block_until_ready()
    calls.update(limits(shape, rng))
    out_bytes = v.nbytes * 4
    race(f"repeat copy=True {v.shape} x4: reads {v.nbytes >> 20} MiB, writes "
         f"{out_bytes >> 20} MiB", calls,
         {"case": v.nbytes + out_bytes, "memcpy x2": 2 * out_bytes, "fill x2": out_bytes},
         args.rounds, args.min_sample)

    parts = [rng.random((32, 1024, w), dtype=np.float32) for w in (64, 32, 96)]
    pack = lambda: ra.pack(parts, "b t *")  # noqa: E731
    calls = {"ours": pack, "one thread": one_thread(pack),
             "np.concat": lambda: np.concatenate(parts, axis=2)}
    if torch is not None:
        calls["torch"] = lambda ts=[torch.from_numpy(p) for p in parts]: torch.cat(ts, dim=2)
    if jax is not None:
        jitted_cat = jax.jit(lambda *ps: jnp.concatenate(ps, axis=2))
        on_device_parts = [jax.device_put(p) for p in parts]
        calls["XLA"] = lambda: jitted_cat(*on_device_parts).block_until_ready()

    edges = np.cumsum([0, 64, 32, 96])

    def kernel_parts():     # the copy kernel into each input's gapped slice (2 threads)
        out = np.empty((32, 1024, 192), np.float32)
        for p, lo, hi in zip(parts, edges, edges[1:]):
            kernel.copy_into(out[:, :, lo:hi], p)
        return out
    kernel_parts()
    kernel.wait()
    calls["kernel parts"] = kernel_parts
    packed_shape = (32, 1024, 192)
    calls.update(limits(packed_shape, rng))
    nbytes = 32 * 1024 * 192 * 4
    race(f"pack of 3 (32, 1024, *): reads and writes {nbytes >> 20} MiB", calls,
         {"case": 2 * nbytes, "fill x2": nbytes}, args.rounds, args.min_sample)


if __name__ == "__main__":
    main()
