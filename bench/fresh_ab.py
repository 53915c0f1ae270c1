"""Copies into fresh pages: the ways of writing a result the process has never touched,
side by side in one process, taking turns.

A new large ``np.empty`` is a fresh mapping: each page faults when first written and
the kernel zeroes it. ``copy_into`` picks, per plan variant, one of

* ``regular``: regular stores into the pages as they fault (the zeroing leaves the
  lines in the caches, where the stores find them);
* ``populate+stream``: the pages populated first (``MADV_POPULATE_WRITE``, split over the
  copy's threads), then non-temporal stores past the caches;
* ``stream``: non-temporal stores into the pages as they fault;

and this script times all three on the same copy, beside numpy's copy into a fresh
array, rearrange's contiguous copy of the same bytes (the limit) and the page faults
alone (a fresh result populated by one thread, nothing copied), at 1 and 2 threads.
Each sample is ``--min-sample`` seconds of calls in a row; the ratios are paired: the
time of the way copy_into takes over each other way's.

    python bench/fresh_ab.py [--rounds 11] [--cases heads,transpose] [--quick]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import interleaved, paired_ratio  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange import kernel  # noqa: E402
from rearrange.kernel.builds import runner_for  # noqa: E402
from rearrange.kernel.loops import FAMILIES  # noqa: E402
from rearrange.kernel.lowering import lower  # noqa: E402
from rearrange.kernel.pages import MADV_POPULATE_WRITE, PAGE, madvise_address  # noqa: E402
from rearrange.kernel.threads import execute  # noqa: E402


def cases(rng, quick: bool) -> dict[str, np.ndarray]:
    """name -> strided source: the harness's shapes (--quick: smaller)."""
    b, n = (4, 2048) if quick else (32, 8192)
    heads = rng.random((b, 64, 512, 64), dtype=np.float32)
    heads64 = rng.random((b // 2, 32, 512, 64))
    t32 = rng.random((n, n), dtype=np.float32)
    t8 = rng.integers(0, 255, (n, n), dtype=np.uint8)
    images = rng.random((2 * b, 3, 224, 224), dtype=np.float32)
    nhwc = rng.random((2 * b, 224, 224, 3), dtype=np.float32)
    crop = nhwc[:, 28:-28, 28:-28, :]
    c64 = rng.random((2 * b, 56, 56, 64), dtype=np.float32)
    shuffle = rng.random((b // 2, 256, 64, 64), dtype=np.float32)
    r = 16 if quick else 64
    rev = rng.random((r, r, r, r), dtype=np.float32)
    return {
        f"heads permute float32 {heads.shape}": heads.transpose(0, 2, 1, 3),
        f"heads merge float64 {heads64.shape}": heads64.transpose(0, 2, 1, 3),
        f"transpose float32 {n}²": t32.T,
        f"transpose uint8 {n}²": t8.T,
        f"ViT patchify float32 {images.shape}": images.reshape(
            2 * b, 3, 14, 16, 14, 16).transpose(0, 2, 4, 3, 5, 1),
        f"NHWC->NCHW C=64 float32 {c64.shape}": c64.transpose(0, 3, 1, 2),
        f"NHWC->NCHW cropped float32 {crop.shape}": crop.transpose(0, 3, 1, 2),
        f"pixel shuffle float32 {shuffle.shape}": shuffle.reshape(
            b // 2, 64, 2, 2, 64, 64).transpose(0, 1, 4, 2, 5, 3),
        f"full reversal float32 {rev.shape}": rev.transpose(3, 2, 1, 0),
    }


def populate_pages(dst: np.ndarray) -> bool:
    """Populate dst's whole pages with one madvise(MADV_POPULATE_WRITE) (Linux 5.14+);
    False where that is missing or refused."""
    address = madvise_address()
    if not address:
        return False
    madvise = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                               ctypes.c_int)(address)
    addr = dst.__array_interface__["data"][0]
    start, end = -(-addr // PAGE) * PAGE, (addr + dst.nbytes) // PAGE * PAGE
    return end <= start or madvise(start, end - start, MADV_POPULATE_WRITE) == 0


def ours(k) -> str:
    """The way copy_into writes a fresh destination of plan k."""
    return "populate+stream" if k.variant in kernel.POPULATE_FIRST else "regular"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--min-sample", type=float, default=0.2)
    parser.add_argument("--cases", default="", help="only cases containing any of these")
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    args = parser.parse_args(argv)
    ra.set_jit_mode("eager")
    wanted = [w for w in args.cases.split(",") if w]
    print("| copy | plan | threads | regular GB/s | populate+stream | stream | numpy | "
          "limit | copy_into's way, ms | its page faults alone, ms | "
          "copy_into's way, its time / each other's (above 1: that one is faster) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, src in cases(np.random.default_rng(0), args.quick).items():
        if wanted and not any(w in name for w in wanted):
            continue
        saddr = src.__array_interface__["data"][0]
        flat = np.ascontiguousarray(src).reshape(-1)    # the limit's: the same bytes
        for threads in (1, 2):
            ra.set_num_threads(threads)
            k = kernel.plan_copy(src.shape, src.strides, src.itemsize)
            if k.variant not in FAMILIES:
                print(f"| {name} | {k.variant} | {threads} | not a kernel copy: {k.reason} "
                      f"| | | | | |")
                continue
            run = runner_for(FAMILIES[k.variant], k.unit_bytes)

            def write(fresh, populate):
                dst = np.empty(src.shape, src.dtype)
                daddr = dst.__array_interface__["data"][0]
                execute(lower(k, daddr % kernel.LINE, fresh), run, daddr, saddr,
                        dst.nbytes if populate else 0)
                return dst

            def faults():
                # The page faults alone: a fresh result populated, nothing copied
                # (one madvise, on this thread; where it fails, a write per page).
                dst = np.empty(src.shape, src.dtype)
                if not populate_pages(dst):
                    dst.reshape(-1).view(np.uint8)[::PAGE] = 0
                return dst

            calls = {"regular": lambda: write(True, False),
                     "populate+stream": lambda: write(False, True),
                     "stream": lambda: write(False, False),
                     "numpy": lambda: np.copyto(np.empty(src.shape, src.dtype), src),
                     "limit": lambda: ra.rearrange(flat, "n -> n", copy=True),
                     "faults": faults}
            for way in ("regular", "populate+stream", "stream"):
                assert np.array_equal(calls[way](), src), way
            t = interleaved(calls, args.rounds, min_sample=args.min_sample)
            gbps = {w: 2 * src.nbytes / t[w].median / 1e9 for w in calls}
            mine = ours(k)
            ratios = ", ".join(f"{w} {paired_ratio(t[mine], t[w]):.2f}"
                               for w in ("regular", "populate+stream", "stream", "numpy")
                               if w != mine)
            print(f"| {name} | {k.variant} | {threads} | {gbps['regular']:.1f} | "
                  f"{gbps['populate+stream']:.1f} | {gbps['stream']:.1f} | "
                  f"{gbps['numpy']:.1f} | {gbps['limit']:.1f} | "
                  f"{t[mine].median * 1e3:.1f} | {t['faults'].median * 1e3:.1f} | "
                  f"{mine}: {ratios} |", flush=True)


if __name__ == "__main__":
    main()
