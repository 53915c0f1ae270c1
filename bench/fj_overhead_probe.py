"""The per-call cost of a tiny 2-thread job on the pool, warm and right after 24 MB
streamed (cold); run with PYTHONPATH set to the tree to measure (issue #39)."""
import sys, time, ctypes, numpy as np
import rearrange as ra
from rearrange.kernel import builds, rowmax
from rearrange.kernel.abi import ControlBlock
from rearrange.kernel.modes import set_jit_mode
set_jit_mode("eager"); ra.set_num_threads(2)
x = np.random.default_rng(0).standard_normal((32, 64, 56, 56)).astype(np.float32)
big = np.random.default_rng(1).standard_normal(24 << 20 >> 2).astype(np.float32)
for _ in range(400):
    ra.reduce(x, "b c h w -> c", "max"); run = builds.runner_for(rowmax.FAMILY, 4)
    if run is not None: break
    time.sleep(0.05)
real = rowmax.reduce_runs
pc = time.perf_counter
small = np.zeros(16, np.float32); a = small.__array_interface__["data"][0]; out = small[:2]
P = rowmax._Parameters(0, 8, 1, 8, 8, 1, 0); ctrl = ControlBlock(); ctrl[0] = 2
def stub(*args): return 0
cases = {
  "front only (stub runner)": lambda: ra.reduce(x, "b c h w -> c", "max"),
  "reduce_runs tiny 2thr": lambda: real(run, out, a, 0, 8, 1, 8, 8, 2),
  "reduce_runs tiny 1thr": lambda: real(run, out, a, 0, 8, 1, 8, 8, 1),
  "bare ctypes runner call": lambda: run(ctrl, a, a, ctypes.addressof(P), 0, 0),
  "empty python call": lambda: None,
}
for name, f in cases.items():
    rowmax.reduce_runs = stub if name.startswith("front") else real
    for flush in (False, True):
        ts = []
        for _ in range(300):
            if flush: big.sum()
            s = pc(); f(); ts.append(pc() - s)
        print(f"{name:28s} {'cold' if flush else 'warm'} {np.median(ts)*1e6:7.1f} us")
