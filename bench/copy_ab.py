"""Kernel A/B between two checkouts: copies into a preallocated output, one JSON line.

Run it in alternating processes, each with the package of one checkout first on the path,
and compare the medians over the rounds of each side:

    for i in 1 2 3 4; do for tree in ../old ../new; do
        PYTHONPATH=$tree python bench/copy_ab.py
    done; done

Each case is checked against numpy's copy, then copied ``REPS`` times (default 7) by the
copy kernel itself (``THREADS``, default 1); the line gives GB/s (read + write) of the
fastest copy per case. ``ONLY`` keeps the cases whose name contains it. The cases are the
ones the register tiles, the channel interleaves and the row blocking decide: 1-, 2- and
4-byte transposes, 3- and 4-channel interleaves, a 64-channel transpose, channels of one
tile column (and a part), 17-32 channels of bytes, a crop and attention heads.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

import rearrange as ra
import rearrange.kernel as K

ra.set_jit_mode("eager")
ra.set_num_threads(int(os.environ.get("THREADS", "1")))
reps = int(os.environ.get("REPS", "7"))
only = os.environ.get("ONLY")
rng = np.random.default_rng(0)


def ints(shape, dtype):
    return rng.integers(0, 250, shape).astype(dtype)


cases = {
    "transpose uint8 8192²": lambda: ints((8192, 8192), np.uint8).T,
    "transpose uint16 8192²": lambda: ints((8192, 8192), np.uint16).T,
    "transpose float32 8192²": lambda: rng.random((8192, 8192), dtype=np.float32).T,
    "NCHW->NHWC uint8 (64,3,224,224)":
        lambda: ints((64, 3, 224, 224), np.uint8).transpose(0, 2, 3, 1),
    "NCHW->NHWC uint16 (64,3,224,224)":
        lambda: ints((64, 3, 224, 224), np.uint16).transpose(0, 2, 3, 1),
    "NCHW->NHWC uint8 (64,4,224,224)":
        lambda: ints((64, 4, 224, 224), np.uint8).transpose(0, 2, 3, 1),
    "NHWC->NCHW C=64 float32":
        lambda: rng.random((64, 56, 56, 64), dtype=np.float32).transpose(0, 3, 1, 2),
    "NHWC->NCHW cropped float32": lambda: rng.random(
        (64, 224, 224, 3), dtype=np.float32)[:, 28:-28, 28:-28].transpose(0, 3, 1, 2),
    # channels of one tile column (Kb units): the destination rows the register tiles
    # take since they need one column block, not two
    "NCHW->NHWC uint8 (64,64,56,56)":
        lambda: ints((64, 64, 56, 56), np.uint8).transpose(0, 2, 3, 1),
    "NCHW->NHWC uint16 (64,32,56,56)":
        lambda: ints((64, 32, 56, 56), np.uint16).transpose(0, 2, 3, 1),
    "NCHW->NHWC float32 (64,16,56,56)":
        lambda: rng.random((64, 16, 56, 56), dtype=np.float32).transpose(0, 2, 3, 1),
    # rows of a tile column and a part: the columns after the last block
    "NCHW->NHWC uint8 (32,96,56,56)":
        lambda: ints((32, 96, 56, 56), np.uint8).transpose(0, 2, 3, 1),
    "NCHW->NHWC float32 (32,24,56,56)":
        lambda: rng.random((32, 24, 56, 56), dtype=np.float32).transpose(0, 2, 3, 1),
    "transpose float32 1000²": lambda: rng.random((1000, 1000), dtype=np.float32).T,
    # 17-32 channels of 1- and 2-byte items: small-inner-dim panels (were scalar tiles)
    "NCHW->NHWC uint8 (64,24,56,56)":
        lambda: ints((64, 24, 56, 56), np.uint8).transpose(0, 2, 3, 1),
    "NHWC->NCHW uint8 (64,56,56,24)":
        lambda: ints((64, 56, 56, 24), np.uint8).transpose(0, 3, 1, 2),
    "NHWC->NCHW uint16 (64,56,56,20)":
        lambda: ints((64, 56, 56, 20), np.uint16).transpose(0, 3, 1, 2),
    "transpose uint8 (24,200000)": lambda: ints((24, 200000), np.uint8).T,
    "heads permute float32 (32,64,512,64)":
        lambda: rng.random((32, 64, 512, 64), dtype=np.float32).transpose(0, 2, 1, 3),
}
speeds = {}
for name, make in cases.items():
    if only and only not in name:
        continue
    view = make()
    out = np.empty(view.shape, view.dtype)
    K.copy_into(out, view)
    assert np.array_equal(out, view), name
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        K.copy_into(out, view)
        times.append(time.perf_counter() - start)
    speeds[name] = round(2 * out.nbytes / min(times) / 1e9, 2)
print(json.dumps(speeds))
