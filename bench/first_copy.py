"""The first copy on a fresh install: how long a user waits, and when the kernel arrives.

    python bench/first_copy.py [--repeats 3] [--only fresh,concurrent,later,ready,warmup,gil]

Every measurement runs fresh interpreters on a cache directory of their own (an empty
``REARRANGE_CACHE_DIR``, as after ``pip install``), from a neutral working directory:

* ``fresh``: ``import rearrange`` and four first copies of different kinds (float32
  transpose, uint8 NHWC -> N(CHW), float64 heads merge, complex128 transpose), each
  checked against einops; rearrange in the default (background) mode, rearrange with
  ``REARRANGE_JIT=eager`` (compile in the call: the behaviour before background
  compilation) and einops, interleaved.
* ``concurrent``: six such processes started together on one empty cache: each one's
  time for import + the four copies, how many runners were compiled, and the CPU time
  the machine spent (from /proc/stat, until the last compile worker exits) against the
  same six processes with kernels off: the difference is what compiling cost.
* ``later``: ~90 s after ``concurrent`` started, a new process on that cache: a
  4096x4096 float32 transpose against numpy's copy, and explain's ``now`` line.
* ``ready``: one copy of each kind in a process of its own on an empty cache: the
  time from the call until the copy's runner is ready (polled every 50 ms).
* ``warmup``: ``rearrange warmup`` on an empty cache, with 1 and 2 compile processes.
* ``gil``: what a compile costs the caller's own Python work: a fixed pure-Python loop
  (~1 s) timed alone, while a worker process compiles, and while a thread of the same
  process compiles (what a thread-based design would cost).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

COPIES = [  # (label, dtype, shape, pattern, family, unit bytes)
    ("float32 transpose", "float32", (2048, 2048), "h w -> (w h)", "transpose", 4),
    ("uint8 NHWC->N(CHW)", "uint8", (64, 224, 224, 3), "b h w c -> b (c h w)", "tiles", 1),
    ("float64 heads merge", "float64", (16, 16, 256, 64), "b h t d -> b t (h d)", "rows", 8),
    ("complex128 transpose", "complex128", (1024, 1024), "a b -> (b a)", "transpose", 8),
]

_ARRAYS = """
import numpy as np
def array(dtype, shape):
    x = (np.arange(int(np.prod(shape))) % 251).reshape(shape)
    return (x + 1j * x if dtype == "complex128" else x).astype(dtype)
"""

_FIRST = _ARRAYS + """
import json, sys, time
copies = {copies!r}
arrays = [array(dtype, shape) for _, dtype, shape, *_ in copies]   # not timed
t0 = time.perf_counter()
import {module} as lib
t1 = time.perf_counter()
times = []
for x, (_, _, _, pattern, *_) in zip(arrays, copies):
    s = time.perf_counter()
    lib.rearrange(x, pattern)
    times.append(time.perf_counter() - s)
done = time.perf_counter()
check = {check}
if check:
    import einops
    for x, (_, _, _, pattern, *_) in zip(arrays, copies):
        assert np.array_equal(lib.rearrange(x, pattern), einops.rearrange(x, pattern))
compiled = 0
if "{module}" == "rearrange":
    from rearrange.kernel import builds
    compiled = builds.compiles_started
print(json.dumps({{"import": t1 - t0, "copies": times, "import_and_copies": done - t0,
                  "compiled": compiled}}))
"""


def _env(cache: str | None, mode: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REARRANGE_JIT", "NUMBA_CACHE_DIR")}
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if cache is not None:
        env["REARRANGE_CACHE_DIR"] = cache
    if mode is not None:
        env["REARRANGE_JIT"] = mode
    return env


def _python(code: str, env: dict[str, str], wait: bool = True):
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    if not wait:
        return process
    return _result(process)


def _result(process: subprocess.Popen) -> dict:
    out, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(err)
    return json.loads(out.strip().splitlines()[-1])


def _workers_running(cache: str) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"rearrange.kernel.worker" in \
                    (entry / "cmdline").read_bytes() and \
                    f"REARRANGE_CACHE_DIR={cache}".encode() in (entry / "environ").read_bytes():
                return True
        except OSError:
            continue
    return False


def _cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat: user+nice+system...)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = sum(int(f) for i, f in enumerate(fields) if i not in (3, 4))   # not idle, iowait
    return ticks / os.sysconf("SC_CLK_TCK")


def fresh(repeats: int, log) -> dict:
    runs: dict[str, list[dict]] = {"rearrange": [], "rearrange eager": [], "einops": []}
    for _ in range(repeats):
        for name in runs:
            with tempfile.TemporaryDirectory(prefix="first-copy-") as cache:
                module = "einops" if name == "einops" else "rearrange"
                mode = "eager" if name == "rearrange eager" else None
                code = _FIRST.format(module=module, copies=COPIES, check=True)
                runs[name].append(_python(code, _env(cache, mode)))
                while _workers_running(cache):       # its worker: not into the next run
                    time.sleep(0.2)
            log(f"  {name}: " + ", ".join(f"{t * 1e3:.0f}" for t in runs[name][-1]["copies"])
                + " ms")
    return {name: {"import_ms": statistics.median(r["import"] for r in rs) * 1e3,
                   "copies_ms": [statistics.median(r["copies"][k] for r in rs) * 1e3
                                 for k in range(len(COPIES))],
                   "max_copy_ms": max(max(r["copies"]) for r in rs) * 1e3}
            for name, rs in runs.items()}


def concurrent(log) -> tuple[dict, str, float]:
    """Returns the figures, the cache it left and when it started."""
    code = _FIRST.format(module="rearrange", copies=COPIES, check=False)
    figures = {}
    cache_left = ""
    started_background = 0.0
    for mode in ("off", None):
        cache = tempfile.mkdtemp(prefix="first-copy-six-")
        cpu0, t0 = _cpu_seconds(), time.perf_counter()
        processes = [_python(code, _env(cache, mode), wait=False) for _ in range(6)]
        results = [_result(p) for p in processes]
        all_done = time.perf_counter() - t0
        while _workers_running(cache):
            time.sleep(0.2)
        compiles_done = time.perf_counter() - t0
        cpu = _cpu_seconds() - cpu0
        name = "off" if mode == "off" else "background"
        figures[name] = {
            "import_and_copies_s": [r["import_and_copies"] for r in results],
            "processes_done_s": all_done, "compiles_done_s": compiles_done,
            "machine_cpu_s": cpu, "compiled": sum(r["compiled"] for r in results),
            "markers": len(list(Path(cache).glob("*.ready")))}
        log(f"  six processes, {name}: import+copies "
            + ", ".join(f"{t:.2f}" for t in figures[name]["import_and_copies_s"])
            + f" s; workers done after {compiles_done:.1f} s; machine CPU {cpu:.1f} s; "
            f"{figures[name]['compiled']} compile(s)")
        if mode is None:
            cache_left, started_background = cache, t0
    return figures, cache_left, started_background


def later(cache: str, started: float, log) -> dict:
    time.sleep(max(0.0, 90 - (time.perf_counter() - started)))
    code = _ARRAYS + textwrap.dedent("""
        import json, time
        import rearrange as ra
        x = array("float32", (4096, 4096))
        now = [l.strip() for l in str(ra.explain(x, "h w -> (w h)")).splitlines()
               if l.strip().startswith("now")]
        def best(f, n=9):
            ts = []
            for _ in range(n):
                s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
            return sorted(ts)[n // 2]
        first = time.perf_counter(); ra.rearrange(x, "h w -> (w h)")
        first = time.perf_counter() - first
        ra.kernel.wait(60)      # the runner loads in the background (after a start delay)
        ours = best(lambda: ra.rearrange(x, "h w -> (w h)"))
        theirs = best(lambda: np.ascontiguousarray(x.T))
        print(json.dumps({"now": now, "first_ms": first * 1e3, "ours_ms": ours * 1e3,
                          "numpy_ms": theirs * 1e3}))
    """)
    result = _python(code, _env(cache, None))
    log(f"  later process: {result['now']}; first {result['first_ms']:.1f} ms, median "
        f"{result['ours_ms']:.2f} ms vs numpy {result['numpy_ms']:.2f} ms "
        f"({result['numpy_ms'] / result['ours_ms']:.2f}x)")
    return result


def ready(log) -> dict:
    out = {}
    for label, dtype, shape, pattern, family, unit in COPIES:
        code = _ARRAYS + textwrap.dedent(f"""
            import json, time
            import rearrange as ra
            from rearrange.kernel import builds
            x = array({dtype!r}, {shape!r})
            start = time.perf_counter()
            ra.rearrange(x, {pattern!r})
            while builds.status({family!r}, {unit}) != "ready":
                time.sleep(0.05)
                ra.rearrange(x, {pattern!r})
            print(json.dumps({{"ready_s": time.perf_counter() - start}}))
        """)
        with tempfile.TemporaryDirectory(prefix="first-copy-ready-") as cache:
            out[label] = _python(code, _env(cache, None))["ready_s"]
        log(f"  {label}: kernel in use {out[label]:.1f} s after the first call")
    return out


def warmup(log) -> dict:
    out = {}
    for parallel in (1, 2):
        with tempfile.TemporaryDirectory(prefix="first-copy-warmup-") as cache:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "rearrange", "warmup", "--parallel",
                            str(parallel)], env=_env(cache, None), check=True,
                           capture_output=True, cwd=tempfile.gettempdir())
            out[parallel] = time.perf_counter() - start
        log(f"  rearrange warmup --parallel {parallel}: {out[parallel]:.1f} s")
    return out


def gil(log) -> dict:
    code = textwrap.dedent("""
        import json, threading, time, os
        from rearrange.kernel import builds, loops
        def work():                     # a fixed amount of pure-Python work: ~1 s
            s = time.perf_counter(); t = 0
            for _ in range(4):
                for i in range(1_000_000): t += i % 7
            return time.perf_counter() - s
        from rearrange.kernel import jit
        jit.prepare()                   # numba imported: the thread below only compiles
        alone = work()
        # a worker process compiles the transpose runner for 2-byte units
        worker = builds._spawn_worker([("transpose", 2)])
        time.sleep(1.5)                 # past its start-up: compiling
        beside_process = work()
        overlapped_process = worker.poll() is None
        worker.communicate()
        # a thread of this process compiles the tiles runner for 2-byte units
        thread = threading.Thread(target=loops.runner, args=(2, "tiles"))
        thread.start(); time.sleep(0.2)
        beside_thread = work()
        overlapped_thread = thread.is_alive()
        thread.join()
        assert overlapped_process and overlapped_thread, "the compiles ended too soon"
        print(json.dumps({"alone": alone, "beside_process": beside_process,
                          "beside_thread": beside_thread}))
    """)
    with tempfile.TemporaryDirectory(prefix="first-copy-gil-") as cache:
        result = _python(code, _env(cache, "eager"))
    log(f"  Python loop alone {result['alone']:.2f} s, beside a compiling worker process "
        f"{result['beside_process']:.2f} s, beside a compiling thread "
        f"{result['beside_thread']:.2f} s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="gil,fresh,ready,concurrent,later,warmup")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    wanted = args.only.split(",")
    figures: dict = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}

    def log(line: str) -> None:
        print(line, flush=True)

    if "gil" in wanted:
        log("gil:")
        figures["gil"] = gil(log)
    if "fresh" in wanted:
        log("fresh processes, empty cache (first copies, ms):")
        figures["fresh"] = fresh(args.repeats, log)
    if "ready" in wanted:
        log("time until the kernel is in use:")
        figures["ready"] = ready(log)
    if "concurrent" in wanted:
        log("six processes at once on one empty cache:")
        figures["concurrent"], cache, started = concurrent(log)
        if "later" in wanted:
            log("a process ~90 s later on that cache:")
            figures["later"] = later(cache, started, log)
    if "warmup" in wanted:
        log("warmup:")
        figures["warmup"] = warmup(log)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
