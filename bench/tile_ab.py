"""Register-tile geometry A/B: the copy kernel's 2-D transposes into a preallocated
output, one thread, for each unit size — run once per geometry, alternating processes:

    for i in 1 2 3; do for vb in 64 32; do
        REARRANGE_VECTOR_BYTES=$vb python bench/tile_ab.py
    done; done

Prints the geometry (vector bytes) and GB/s (read + write) per dtype: the median of
``REPS`` (default 9) copies of an 8192² array (4096² for 8- and 16-byte items).
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

import rearrange as ra
import rearrange.kernel as K
from rearrange.kernel import plan

ra.set_jit_mode("eager")
ra.set_num_threads(int(os.environ.get("THREADS", "1")))
reps = int(os.environ.get("REPS", "9"))
speeds = {}
for dtype, n in (("float32", 8192), ("uint8", 8192), ("uint16", 8192), ("float64", 4096),
                 ("complex128", 4096)):
    x = (np.arange(n * n) % 251).astype(dtype).reshape(n, n)
    out = np.empty((n, n), dtype)
    K.copy_into(out, x.T)
    assert np.array_equal(out, x.T), dtype
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        K.copy_into(out, x.T)
        times.append(time.perf_counter() - start)
    speeds[dtype] = 2 * x.nbytes / statistics.median(times) / 1e9
print(plan.VECTOR_BYTES, " ".join(f"{k} {v:.2f}" for k, v in speeds.items()))
