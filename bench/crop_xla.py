"""Where a crop's transpose loses its time: the strided read, not the transpose.

The harness's "NHWC->NCHW, cropped input" case hands every contender the centre crop of
(64, 224, 224, 3) float32 images. numpy, einops, torch and rearrange read that strided
view as it is. jax cannot hold a strided view: ``jax.device_put`` of the crop makes a
contiguous copy on the device before the timing, so XLA transposes contiguous memory.
This script times, in one process and in a balanced interleaved order, allocating,
at the thread count given (rearrange and torch; XLA uses its own pool of every core):

- the transpose of the crop as the harness times it (rearrange: strided view; XLA: its
  contiguous device copy);
- the same transpose with both on the same footing: rearrange from a contiguous copy of
  the crop, XLA from the full images with the crop sliced inside the jitted function
  (as a jax user writes it; XLA fuses the slice into the transpose's reads);
- plain copies of the strided crop, without any transpose (rearrange's row copy and
  XLA's slice): what reading the crop costs by itself;
- torch's ``clone`` of the contiguous crop: the harness's limit for this case.

    python bench/crop_xla.py [--threads 2] [--rounds 24]

Prints a markdown table (GB/s counting read + write bytes of the crop, medians of the
samples) and each contender's ratio to rearrange's transpose of the strided crop.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import interleaved  # noqa: E402

import rearrange as ra  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    # As the harness: idle OpenMP workers (torch's) sleep instead of spinning on the
    # cores XLA's threads run on next.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import jax
    import jax.numpy as jnp
    import torch

    ra.set_jit_mode("eager")
    ra.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    full = np.random.default_rng(0).random((args.batch, 224, 224, 3), dtype=np.float32)
    crop = full[:, 28:-28, 28:-28]
    dense = np.ascontiguousarray(crop)
    on_device_crop, on_device_full = jax.device_put(crop), jax.device_put(full)
    transpose = jax.jit(lambda a: jnp.transpose(a, (0, 3, 1, 2)))
    slice_transpose = jax.jit(lambda a: jnp.transpose(a[:, 28:-28, 28:-28], (0, 3, 1, 2)))
    slice_only = jax.jit(lambda a: a[:, 28:-28, 28:-28] + 0)   # + 0: a fresh buffer
    dense_torch = torch.from_numpy(dense)
    pattern = "b h w c -> b c h w"
    calls = {
        "rearrange: transpose of the strided crop (harness)":
            lambda: ra.rearrange(crop, pattern, copy=True),
        "XLA: transpose of its contiguous device copy (harness)":
            lambda: transpose(on_device_crop).block_until_ready(),
        "rearrange: transpose of a contiguous crop":
            lambda: ra.rearrange(dense, pattern, copy=True),
        "XLA: slice + transpose of the full images, one jit":
            lambda: slice_transpose(on_device_full).block_until_ready(),
        "rearrange: copy of the strided crop, no transpose":
            lambda: ra.rearrange(crop, "b h w c -> b h w c", copy=True),
        "XLA: slice of the full images, no transpose":
            lambda: slice_only(on_device_full).block_until_ready(),
        "torch: clone of the contiguous crop (the limit)": lambda: dense_torch.clone(),
    }
    expected = crop.transpose(0, 3, 1, 2)
    assert np.array_equal(np.asarray(calls[next(iter(calls))]()), expected)
    assert np.array_equal(np.asarray(slice_transpose(on_device_full)), expected)
    timings = interleaved(calls, args.rounds, min_sample=0.05)
    moved = 2 * dense.nbytes
    first = timings[next(iter(calls))].median
    print(f"threads={args.threads}, {args.batch} images, {moved / 2**20:.0f} MiB moved, "
          f"{args.rounds} samples each\n")
    print("| contender | GB/s | vs rearrange's transpose of the strided crop |")
    print("|---|---:|---:|")
    for name, timing in timings.items():
        print(f"| {name} | {moved / timing.median / 1e9:.2f} | {first / timing.median:.2f}× |")


if __name__ == "__main__":
    main()
