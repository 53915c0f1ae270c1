"""The suites: ``cases`` (the registry), ``scaling`` (one transpose, 4 KiB to 512 MiB),
``ops`` (every operation against the best peer: race_ops.py's cases) and ``coldstart``
(fresh processes). ``overhead`` lives in overhead.py. Each suite returns
JSON-ready records; tables.py turns them into markdown."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cases import CASES, Case, case_label, make_input, select
from contenders import LIMITS, PEERS, build
from timing import Timing, interleaved, paired_ratio

Log = Callable[[str], None]


@dataclass(frozen=True)
class Config:
    size: str                       # "full", "quick" or "smoke": shapes of the registry
    threads: tuple[int, ...]
    modes: tuple[str, ...]          # "alloc", "prealloc"
    rounds: int                     # samples per contender and measurement (at least)
    min_sample: float               # seconds per sample (calls are batched up to this)
    scaling_sizes: tuple[int, ...]  # input bytes of the scaling sweep
    coldstart_repeats: int
    coldstart_empty_cache_repeats: int  # fresh processes that compile the kernel from scratch
    overhead_number: int
    overhead_repeat: int
    scaling_rounds: int             # samples per contender and size in the scaling sweep
    case_filters: tuple[str, ...] = ()


def jax_threads() -> int:
    """XLA's CPU thread pool: every available core, fixed when jax starts."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def at_threads(calls: dict[str, Callable[[], Any]], missing: dict[str, str],
               threads: int) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """The calls that can run at ``threads``: jax only at its own pool's size."""
    if "jax" in calls and threads != jax_threads():
        calls = {name: call for name, call in calls.items() if name != "jax"}
        missing = {**missing, "jax": f"n/a (XLA runs {jax_threads()} threads)"}
    return calls, missing


def set_threads(n: int, libs: dict[str, Any]) -> dict[str, int]:
    """One thread count for every library that has one; returns what each was set to."""
    applied = {}
    ra = libs["rearrange"]
    if hasattr(ra, "set_num_threads"):  # the copy kernel's thread count
        ra.set_num_threads(n)
        applied["rearrange"] = ra.get_num_threads()
    torch = libs.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
        applied["torch"] = torch.get_num_threads()
    if libs.get("jax") is not None:
        applied["jax"] = jax_threads()   # fixed: jax takes part only where it equals n
    # numba's own thread count is left alone: the copy kernel runs on its own workers,
    # and setting it would start numba's OpenMP pool next to torch's for nothing.
    return applied


def _gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9 if nbytes and seconds > 0 else math.nan


def summarise(base: dict[str, Any], timings: dict[str, Timing], bytes_moved: int,
              first_calls: dict[str, float]) -> dict[str, Any]:
    """One record: every contender's timing, then the limit and rearrange's ratios."""
    record = dict(base)
    contenders = {}
    for name, timing in timings.items():
        if name in first_calls:
            timing.first_call = first_calls[name]
        entry = timing.to_dict()
        entry["gbps"] = _gbps(bytes_moved, timing.median)
        contenders[name] = entry
    record["contenders"] = contenders
    return add_ratios(record)


def add_ratios(record: dict[str, Any]) -> dict[str, Any]:
    """The limit (the fastest contiguous copy), the best peer (lowest median), and
    rearrange's ratios to both: of medians (the tables' figures), and paired sample by
    sample (JSON only). Recomputable from a record's samples (``run.py --render``)."""
    timings = {name: Timing(samples=list(entry["samples_s"]), number=entry["number"])
               for name, entry in record["contenders"].items()}
    bytes_moved = record["bytes_moved"]
    limits = [name for name in LIMITS if name in timings]
    for key in ("limit", "best_peer", "ratio_vs_best_peer", "fraction_of_limit",
                "paired_ratio_vs_best_peer", "paired_fraction_of_limit"):
        record.pop(key, None)
    if limits:
        fastest = min(limits, key=lambda name: timings[name].median)
        record["limit"] = {"source": fastest.split(":")[1],
                           "median_s": timings[fastest].median,
                           "gbps": _gbps(bytes_moved, timings[fastest].median)}
    peers = [name for name in PEERS if name in timings]
    if peers:
        best = min(peers, key=lambda name: timings[name].median)
        record["best_peer"] = best
        if "rearrange" in timings:
            ra = timings["rearrange"]
            # > 1: rearrange is faster.
            record["ratio_vs_best_peer"] = timings[best].median / ra.median
            record["paired_ratio_vs_best_peer"] = paired_ratio(timings[best], ra)
            if limits:
                record["fraction_of_limit"] = timings[fastest].median / ra.median
                record["paired_fraction_of_limit"] = paired_ratio(timings[fastest], ra)
    return record


# ---------------------------------------------------------------------- cases

def run_cases(config: Config, libs: dict[str, Any], log: Log) -> list[dict[str, Any]]:
    ra = libs["rearrange"]
    ra.rearrange(np.zeros((2, 3)), "a b -> b a")  # the grammar is built: first calls are per case
    records = []
    cases: list[Case] = select(CASES, list(config.case_filters))
    for case in cases:
        label = case_label(case)
        x = make_input(case, config.size)
        contest = build(x, case.pattern, case.lengths, case.copy, label, libs)
        base = {
            "suite": "cases", "case": label, "name": case.name, "pattern": case.pattern,
            "dtype": case.dtype, "lengths": case.lengths, "copy": case.copy,
            "input_shape": list(x.shape),
            "input_strides": [s // x.itemsize for s in x.strides],
            "input_contiguous": bool(x.flags.c_contiguous),
            "prepare": case.prepare_note, "kind": contest.kind,
            "bytes_moved": contest.bytes_moved, "sources": contest.sources,
            "copy_kernel": contest.copy_kernel, "plan": contest.plan_text,
            "result_is_view": contest.result_is_view,
        }
        for threads in config.threads:
            applied = set_threads(threads, libs)
            for mode in config.modes:
                calls = contest.calls.get(mode)
                if not calls:
                    continue
                calls, missing = at_threads(calls, contest.missing.get(mode, {}), threads)
                timings = interleaved(calls, config.rounds, config.min_sample)
                record = summarise(
                    {**base, "mode": mode, "threads": threads, "threads_set": applied,
                     "missing": missing},
                    timings, contest.bytes_moved,
                    contest.first_calls if mode == "alloc" else {})
                records.append(record)
                log(_progress(record))
        del x, contest  # the arrays go now (reference counting), before the next case
    return records


def _progress(record: dict[str, Any]) -> str:
    parts = []
    for name, entry in record["contenders"].items():
        if record["kind"] == "view":
            parts.append(f"{name} {entry['median_s'] * 1e6:.2f}us")
        else:
            parts.append(f"{name} {entry['gbps']:.2f}")
    unit = "" if record["kind"] == "view" else " GB/s"
    return (f"  {record.get('case', record.get('bytes'))} [{record['mode']}, "
            f"{record['threads']}t]: " + ", ".join(parts) + unit)


# ---------------------------------------------------------------------- scaling

SCALING_PATTERN = "h w -> w h"


def scaling_shape(nbytes: int, itemsize: int = 4) -> tuple[int, int]:
    """A near-square (h, w) holding ``nbytes``: h = 2**floor(k/2), w = 2**ceil(k/2)."""
    k = int(math.log2(nbytes // itemsize))
    return 2 ** (k // 2), 2 ** (k - k // 2)


def run_scaling(config: Config, libs: dict[str, Any], log: Log) -> list[dict[str, Any]]:
    records = []
    rng = np.random.default_rng(1)
    for nbytes in config.scaling_sizes:
        shape = scaling_shape(nbytes)
        x = rng.random(shape, dtype=np.float32)
        contest = build(x, SCALING_PATTERN, {}, True, f"scaling {nbytes} B", libs)
        for threads in config.threads:
            applied = set_threads(threads, libs)
            for mode in config.modes:
                calls = contest.calls.get(mode)
                if not calls:
                    continue
                calls, missing = at_threads(calls, contest.missing.get(mode, {}), threads)
                timings = interleaved(calls, config.scaling_rounds, config.min_sample)
                record = summarise(
                    {"suite": "scaling", "pattern": SCALING_PATTERN, "copy": True,
                     "dtype": "float32", "input_shape": list(shape), "bytes": nbytes,
                     "kind": contest.kind, "bytes_moved": contest.bytes_moved,
                     "mode": mode, "threads": threads, "threads_set": applied,
                     "missing": missing},
                    timings, contest.bytes_moved, {})
                records.append(record)
                log(_progress(record))
        del x, contest  # the arrays go now (reference counting), before the next case
    return records


# ---------------------------------------------------------------------- ops

def run_ops(config: Config, libs: dict[str, Any], log: Log) -> list[dict[str, Any]]:
    """race_ops.py's cases (einsum, reduce, repeat, pack) at the config's size, at each
    thread count: every contender checked against rearrange, then timed interleaved."""
    import race_ops

    records = []
    size = config.size if config.size in race_ops.SHAPES else "full"
    for threads in config.threads:
        applied = set_threads(threads, libs)
        # the arrays and jitted calls are made again per thread count (XLA's are only
        # at its pool's size), then go before the next
        for case in race_ops.cases(np.random.default_rng(0), size, libs):
            if config.case_filters and not any(f in case.name for f in config.case_filters):
                continue
            calls, missing = at_threads(case.calls, case.missing, threads)
            case = race_ops.OpCase(case.name, case.family, calls, missing, case.exact)
            record = race_ops.race(case, config.rounds, config.min_sample,
                                   {"threads": threads, "threads_set": applied,
                                    "size": size})
            records.append(record)
            log(f"  {record['case']} [{threads}t]: " + ", ".join(
                f"{name} {entry['median_s'] * 1e3:.3g} ms"
                for name, entry in record["contenders"].items())
                + (f" ({record['ratio_vs_best_peer']:.2f}x {record['best_peer']})"
                   if "best_peer" in record else ""))
    return records


# ---------------------------------------------------------------------- cold start

# Runs in a fresh interpreter: import numpy, import the library, a first call that only
# builds a view, then a first call that copies: a 4 MiB transpose, big enough for
# rearrange's copy kernel (compiled, or loaded from numba's disk cache, right there).
_COLD_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
{import_line}
t2 = time.perf_counter()
x = np.arange(2 * 8 * 128 * 64, dtype=np.float32).reshape(2, 8, 128, 64)
y = np.arange(1024 * 1024, dtype=np.float32).reshape(1024, 1024)
t3 = time.perf_counter()
v = {call}(x, "b h t d -> b h (t d)")
t4 = time.perf_counter()
c = {call}(y, "h w -> (w h)")
t5 = time.perf_counter()
assert np.shares_memory(v, x) and not np.shares_memory(c, y)
print(json.dumps({{"import_numpy": t1 - t0, "import": t2 - t1, "first_call": t4 - t3,
                  "first_copy": t5 - t4, "numba_loaded": "numba" in sys.modules,
                  "torch_loaded": "torch" in sys.modules}}))
"""

COLD_CONTENDERS = {
    # name: (import line, call, the child's numba disk cache is fresh and empty)
    "rearrange": ("import rearrange", "rearrange.rearrange", False),
    "rearrange, empty JIT cache": ("import rearrange", "rearrange.rearrange", True),
    "einops": ("import einops", "einops.rearrange", False),
}


def run_coldstart(config: Config, libs: dict[str, Any], log: Log) -> list[dict[str, Any]]:
    """Fresh processes, interleaved rearrange/einops, ``coldstart_repeats`` each."""
    env = dict(os.environ)
    # The child imports the very rearrange this process benchmarks, from a neutral cwd.
    package_root = str(Path(libs["rearrange"].__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    names = [n for n in COLD_CONTENDERS if n.startswith("rearrange") or libs.get(n) is not None]
    if not config.coldstart_empty_cache_repeats:
        names = [n for n in names if not COLD_CONTENDERS[n][2]]
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for repeat in range(config.coldstart_repeats):
        for name in names:
            import_line, call, empty_cache = COLD_CONTENDERS[name]
            if empty_cache and repeat >= config.coldstart_empty_cache_repeats:
                continue  # seconds of compilation each: fewer of these
            script = _COLD_SCRIPT.format(import_line=import_line, call=call)
            with tempfile.TemporaryDirectory(prefix="bench-numba-cache-") as cache:
                child_env = {**env, "NUMBA_CACHE_DIR": cache} if empty_cache else env
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-c", script], env=child_env,
                                      capture_output=True, text=True, cwd=tempfile.gettempdir())
                wall = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"cold start of {name} failed:\n{done.stderr}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["process"] = wall
            runs[name].append(result)
    records = []
    for name in names:
        metrics = {}
        for key in ("import_numpy", "import", "first_call", "first_copy", "process"):
            values = [r[key] for r in runs[name]]
            metrics[key] = {"median_s": statistics.median(values), "min_s": min(values),
                            "max_s": max(values), "samples_s": values}
        records.append({"suite": "coldstart", "contender": name, "repeats": len(runs[name]),
                        "numba_loaded": any(r["numba_loaded"] for r in runs[name]),
                        "torch_loaded": any(r["torch_loaded"] for r in runs[name]),
                        "metrics": metrics})
        m = metrics
        log(f"  {name}: import {m['import']['median_s'] * 1e3:.0f} ms, first call "
            f"{m['first_call']['median_s'] * 1e3:.1f} ms, first copy "
            f"{m['first_copy']['median_s'] * 1e3:.1f} ms, process {m['process']['median_s'] * 1e3:.0f} ms")
    return records
