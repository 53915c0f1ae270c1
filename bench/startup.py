"""What a fresh process pays for rearrange, against einops in the same run (#37).

    PYTHONPATH=. python bench/startup.py [--runs 7] [--empty-runs 5]

Every figure is the median over fresh interpreters (``-c`` scripts), the libraries' runs
interleaved so that a busy machine slows both alike; bytecode is compiled first (a run
with ``-B`` would compile the sources every time). Printed as a markdown table:

* ``import``: ``import numpy; import X`` minus ``import numpy``.
* ``import + first copy``: a process that imports the library and makes one copying
  call — a 2048x2048 float32 transpose flattened (``'h w -> (w h)'``: a copy in both) —
  from start to exit; rearrange with its kernel compiled on disk already (default mode),
  and with an empty cache. Also its CPU time (user + system, the process's own), which a
  busy machine inflates less than the wall clock: both minus the process without the
  call.
* ``kernel in use after``: from the process's start until its copies run through the
  compiled kernel (loaded in the background, or compiled by a worker when the cache is
  empty), and then that transpose's time against numpy's own copy in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FIRST_COPY = {
    "rearrange": "import rearrange; rearrange.rearrange(x, 'h w -> (w h)')",
    "einops": "import einops; einops.rearrange(x, 'h w -> (w h)')",
}
SETUP = "import numpy as np; x = np.ones((2048, 2048), np.float32); "

# Copies until the kernel runs them; reports when (seconds since the parent started this
# process, on the wall clock both read) and the kernel's speed then.
UNTIL_KERNEL = textwrap.dedent("""
    import json, sys, time
    start = float(sys.argv[1])          # the parent's clock as it started this process
    import numpy as np
    import rearrange
    from rearrange.kernel import builds
    x = (np.arange(2048 * 2048, dtype=np.float32) % 251).reshape(2048, 2048)
    first = None
    while builds.status("transpose", 4) != "ready":
        rearrange.rearrange(x, "h w -> (w h)")
        first = first or time.time()
        time.sleep(0.005)
    ready = time.time() - start
    def best(f):
        times = []
        for _ in range(9):
            t = time.perf_counter(); f(); times.append(time.perf_counter() - t)
        return min(times)
    ours = best(lambda: rearrange.rearrange(x, "h w -> (w h)"))
    numpy = best(lambda: np.ascontiguousarray(x.T))
    print(json.dumps({"ready": ready, "ours": ours, "numpy": numpy}))
""")


def environment(cache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("REARRANGE_JIT", "NUMBA_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
    if cache is not None:
        env["REARRANGE_CACHE_DIR"] = str(cache)
    return env


# CPU seconds (user + system) of each process run by seconds(), by its code and cache
# directory: a figure a busy machine inflates less than the wall clock's (it does not
# count the time the process waited for a core).
cpu_seconds: dict[tuple[str, str | None], list[float]] = {}


def seconds(code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", code], env=env,
                               cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, code)
    cpu_seconds.setdefault((code, env.get("REARRANGE_CACHE_DIR")), []).append(
        usage.ru_utime + usage.ru_stime)
    return wall


def medians(cases: dict[str, tuple[str, dict]], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (code, env) in cases.items():
            times[name].append(seconds(code, env))
    return {name: statistics.median(t) for name, t in times.items()}


def cpu_median(code: str, env: dict[str, str]) -> float:
    return statistics.median(cpu_seconds[code, env.get("REARRANGE_CACHE_DIR")])


def until_kernel(cache: Path, runs: int, empty: bool) -> dict[str, float]:
    reports = []
    for _ in range(runs):
        if empty and cache.exists():
            shutil.rmtree(cache)
        out = subprocess.run([sys.executable, "-c", UNTIL_KERNEL, repr(time.time())],
                             env=environment(cache),
                             check=True, capture_output=True, text=True,
                             cwd=tempfile.gettempdir()).stdout
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return {key: statistics.median(r[key] for r in reports) for key in reports[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--empty-runs", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rearrange-startup-"))
    warm, empty = work / "warm", work / "empty"
    try:
        # Bytecode for this checkout; the runners these figures use (the float32
        # transpose's, the pool's) compiled into `warm`.
        subprocess.run([sys.executable, "-c", SETUP + FIRST_COPY["rearrange"]],
                       env={**environment(warm), "REARRANGE_JIT": "eager"}, check=True)
        plain = environment(warm)
        imports = medians({
            "numpy": ("import numpy", plain),
            "rearrange": ("import numpy; import rearrange", plain),
            "einops": ("import numpy; import einops", plain),
        }, args.runs)
        first = medians({
            "numpy": (SETUP, plain),
            "rearrange": (SETUP + FIRST_COPY["rearrange"], plain),
            "einops": (SETUP + FIRST_COPY["einops"], plain),
        }, args.runs)
        first_empty = []
        for _ in range(args.empty_runs):
            shutil.rmtree(empty, ignore_errors=True)
            first_empty.append(seconds(SETUP + FIRST_COPY["rearrange"], environment(empty)))
        time.sleep(1)
        warm_kernel = until_kernel(warm, args.runs, empty=False)
        cold_kernel = until_kernel(empty, args.empty_runs, empty=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms = lambda s: f"{1000 * s:.0f} ms"          # noqa: E731
    print(f"| figure (medians of fresh processes; {args.runs} runs, empty cache "
          f"{args.empty_runs}) | rearrange | einops |")
    print("|---|---|---|")
    print(f"| `import` minus `import numpy` | {ms(imports['rearrange'] - imports['numpy'])} "
          f"| {ms(imports['einops'] - imports['numpy'])} |")
    print(f"| import + first copy, kernel on disk (whole process) | {ms(first['rearrange'])} "
          f"| {ms(first['einops'])} |")
    print(f"| same, minus the process without the call | "
          f"{ms(first['rearrange'] - first['numpy'])} | {ms(first['einops'] - first['numpy'])} |")
    print(f"| same, CPU time (user + system) | "
          f"{ms(cpu_median(SETUP + FIRST_COPY['rearrange'], plain) - cpu_median(SETUP, plain))} | "
          f"{ms(cpu_median(SETUP + FIRST_COPY['einops'], plain) - cpu_median(SETUP, plain))} |")
    print(f"| import + first copy, empty cache (whole process) | "
          f"{ms(statistics.median(first_empty))} | |")
    print(f"| kernel in use after (kernel on disk) | {warm_kernel['ready']:.2f} s | |")
    print(f"| then the transpose vs numpy's copy | {warm_kernel['ours'] * 1e3:.1f} ms vs "
          f"{warm_kernel['numpy'] * 1e3:.1f} ms ({warm_kernel['numpy'] / warm_kernel['ours']:.1f}x) | |")
    print(f"| kernel in use after (empty cache: compiled by a worker) | "
          f"{cold_kernel['ready']:.2f} s | |")


if __name__ == "__main__":
    main()
