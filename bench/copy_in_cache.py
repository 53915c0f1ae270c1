"""A copy whose data fits the caches against the limit there: ViT patchify of every other
image (the copy suite's "ViT patchify, every other image") at three batch sizes, into a
fresh result and into an existing one (``out=``), beside rearrange's contiguous copy of
the same bytes (the limit) — in one process, taking turns (docs/performance.md, "Intel
Xeon, Emerald Rapids").

    PYTHONPATH=. python bench/copy_in_cache.py [--rounds 9] [--min-sample 0.1]
                                               [--images 8,32,128] [--threads 2]

GB/s count the bytes read plus the bytes written.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import idle_workers_sleep, interleaved  # noqa: E402

idle_workers_sleep()
import numpy as np  # noqa: E402

import rearrange as ra  # noqa: E402
from rearrange.kernel.modes import set_jit_mode  # noqa: E402

PATTERN = "b c (h p1) (w p2) -> b (h w) (p1 p2 c)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--min-sample", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--images", default="8,32,128",
                        help="batch sizes, comma-separated (every other image is copied)")
    args = parser.parse_args()
    set_jit_mode("eager")
    ra.set_num_threads(args.threads)
    for images in (int(n) for n in args.images.split(",")):
        x = np.random.default_rng(0).random((images, 3, 224, 224), dtype=np.float32)
        src = x[::2]
        flat = np.ascontiguousarray(src).reshape(-1)
        out = np.empty((images // 2, 196, 768), np.float32)
        flat_out = np.empty_like(flat)
        expected = ra.rearrange(np.ascontiguousarray(src), PATTERN, p1=16, p2=16)
        assert np.array_equal(ra.rearrange(src, PATTERN, p1=16, p2=16), expected)
        calls = {
            "ours, fresh result": lambda: ra.rearrange(src, PATTERN, p1=16, p2=16),
            "limit, fresh result": lambda: ra.rearrange(flat, "n -> n", copy=True),
            "ours, out=": lambda: ra.rearrange(src, PATTERN, p1=16, p2=16, out=out),
            "limit, out=": lambda: ra.rearrange(flat, "n -> n", out=flat_out),
        }
        timings = interleaved(calls, args.rounds, args.min_sample)
        moved = 2 * src.nbytes
        print(f"{images // 2} of {images} images ({src.nbytes / 2**20:.1f} MiB in): " +
              ", ".join(f"{name} {moved / t.median / 1e9:.1f}" for name, t in timings.items())
              + " GB/s")


if __name__ == "__main__":
    main()
