"""Benchmark harness: rearrange side by side with numpy, einops and PyTorch, against the
memory-bandwidth limit.

    python bench/run.py                      # every suite, threads 1 and 2 (many minutes)
    python bench/run.py --quick              # CI smoke run: small shapes, under a minute
    python bench/run.py --suite cases --threads 2 --case transpose
    python bench/run.py --suite overhead     # = python bench/overhead.py
    python bench/run.py --suite ops --threads 2   # every operation against the best peer

Suites: ``cases`` (the registry in cases.py: GB/s per contender, ratio to the best peer,
fraction of the limit), ``overhead`` (warm calls on tiny arrays), ``coldstart`` (fresh
processes: import, first call, first copy), ``scaling`` (one transpose from 4 KiB to
512 MiB) and ``ops`` (einsum, reduce, repeat and pack against numpy's best call, einops
on numpy and on torch, torch and XLA: race_ops.py's cases, each checked against
rearrange). Every contender runs in this one process on the same data, interleaved round
by round; each is checked against einops before it is timed. Writes ``<name>.json`` (machine
info and every sample), ``<name>.md`` (the tables) and PNG plots to ``--out``. Benchmarks
are not tests: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # run as `python bench/run.py` or imported by a test
    sys.path.insert(0, str(BENCH))

# Idle OpenMP workers (torch's) and OpenBLAS workers (numpy's) spin for a while after
# each parallel call. On a shared machine a spinning pool competes with the other jobs
# and with whichever contender runs next (under load, torch's 2-thread copy of a 1 MiB
# permuted array took 2-4 ms here instead of 40 us). So their idle workers sleep
# (timing.IDLE_WORKERS_SLEEP), unless --spin keeps the libraries' defaults; sleeping
# costs each parallel region a wake-up (tens of us). This must be set before torch and
# numpy start their thread pools, hence before importing them.
from timing import idle_workers_sleep  # noqa: E402

if "--spin" not in sys.argv:
    idle_workers_sleep()

import numpy as np  # noqa: E402

import race_ops  # noqa: E402
import suites  # noqa: E402
import tables  # noqa: E402
from overhead import _import_rearrange, format_markdown as overhead_markdown, run_overhead  # noqa: E402

SUITES = ("overhead", "coldstart", "cases", "scaling", "ops")
DEFAULT_OUT = BENCH / "results"
KIB, MIB = 2**10, 2**20

SIZES = {
    # threads, modes, samples, seconds per sample, scaling sizes, cold-start repeats (with
    # numba's disk cache; with an empty one), overhead calls per sample and samples,
    # scaling samples
    "full": suites.Config("full", (1, 2), ("alloc", "prealloc"), 12, 0.02,
                          tuple(4 * KIB * 2**k for k in range(18)), 7, 5, 20000, 7, 8),
    "quick": suites.Config("quick", (1, 2), ("alloc", "prealloc"), 5, 0.003,
                           tuple(4 * KIB * 4**k for k in range(6)), 3, 1, 2000, 3, 3),
    "smoke": suites.Config("smoke", (1, 2), ("alloc", "prealloc"), 1, 0.0005,
                           (4 * KIB, 64 * KIB), 1, 0, 200, 2, 1),
}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _caches() -> dict[str, int]:
    """Per-core data/unified cache sizes in bytes from sysfs (L1d, L2, L3)."""
    caches = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        kind = _read(str(index / "type")).strip()
        if kind == "Instruction":
            continue
        size = _read(str(index / "size")).strip()
        level = _read(str(index / "level")).strip()
        if size.endswith("K"):
            caches[f"L{level}" + ("d" if level == "1" else "")] = int(size[:-1]) * KIB
        elif size.endswith("M"):
            caches[f"L{level}"] = int(size[:-1]) * MIB
    return caches


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(BENCH.parent), *args], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info(libs: dict[str, Any]) -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                  if line.startswith("model name")), platform.processor() or platform.machine())
    meminfo = next((line for line in _read("/proc/meminfo").splitlines()
                    if line.startswith("MemTotal")), "")
    memory = int(meminfo.split()[1]) * KIB if meminfo else 0
    commit = _git("rev-parse", "--short", "HEAD") or "unknown commit"
    package = Path(libs["rearrange"].__file__).resolve().parent
    if package != BENCH.parent / "rearrange":
        # An installed rearrange, or a snapshot on PYTHONPATH: say which.
        commit = f"rearrange from {package}; bench/ at {commit}"
    elif commit != "unknown commit" and subprocess.run(
            ["git", "-C", str(BENCH.parent), "diff", "--quiet", "HEAD", "--", "rearrange"],
            capture_output=True).returncode:
        commit += " + uncommitted changes in rearrange/"
    versions = {"python": platform.python_version(), "numpy": np.__version__,
                "rearrange": getattr(libs["rearrange"], "__version__", "?")}
    for name in ("torch", "einops", "jax"):
        if libs.get(name) is not None:
            versions[name] = libs[name].__version__
    for name in ("numba", "matplotlib"):
        try:
            versions[name] = __import__(name).__version__ if name != "numba" else \
                __import__("importlib.metadata").metadata.version("numba")
        except Exception:  # noqa: BLE001 - optional
            pass
    caches = _caches()
    return {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": memory / 2**30,
        "caches": ", ".join(f"{k} {tables._size(v)}" for k, v in caches.items()) or "unknown",
        "cache_bytes": caches,
        "platform": platform.platform(),
        "libc": " ".join(platform.libc_ver()),
        "transparent_hugepage": _read("/sys/kernel/mm/transparent_hugepage/enabled").strip(),
        "versions": versions,
        "rearrange_path": str(package),
        "rearrange_snapshot": os.environ.get("REARRANGE_BENCH_SNAPSHOT", ""),
        "rearrange_accepts_out": __import__("contenders").rearrange_accepts_out(libs["rearrange"]),
        "git_commit": commit,
        "loadavg_start": [round(v, 2) for v in os.getloadavg()],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "argv": sys.argv[1:],
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT", "unset"),
    }


def load_libs(log: Any) -> dict[str, Any]:
    libs: dict[str, Any] = {"rearrange": _import_rearrange()}
    # The races measure the copy kernel: a runner is compiled in the first call that
    # needs it (the warm-up rounds), not in the background while numpy's copy stands in.
    libs["rearrange"].set_jit_mode("eager")
    for name in ("einops", "torch", "jax"):
        try:
            libs[name] = __import__(name)
        except ImportError:
            log(f"note: {name} is not installed; its column reads n/a "
                "(pip install '.[bench]' installs every contender)")
    if "jax" in libs:
        # float64/complex128 stay themselves (jax would make them 32-bit), on the CPU
        libs["jax"].config.update("jax_enable_x64", True)
        libs["jax"].config.update("jax_platforms", "cpu")
    return libs


def _parse_list(text: str, kind: type = str) -> tuple:
    return tuple(kind(part) for part in text.replace(" ", "").split(",") if part)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small shapes, few rounds: < 1 minute")
    size.add_argument("--smoke", action="store_true", help="tiny shapes, for the test suite")
    parser.add_argument("--suite", action="append", default=None,
                        help=f"suites to run, comma-separated or repeated: {', '.join(SUITES)} "
                             "(default: all)")
    parser.add_argument("--threads", default=None, help="thread counts, e.g. 1,2 (default 1,2)")
    parser.add_argument("--mode", default=None, help="alloc,prealloc (default both)")
    parser.add_argument("--case", action="append", default=None,
                        help="only cases whose name, dtype or pattern contains this text")
    parser.add_argument("--rounds", type=int, default=None,
                        help="samples per contender, at least (12; --quick 5)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--name", default=None,
                        help="output file stem (default: latest, quick or smoke)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plots")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="no run: tables and plots again from a run's JSON, next to it")
    parser.add_argument("--spin", action="store_true",
                        help="leave OMP_WAIT_POLICY and OPENBLAS_THREAD_TIMEOUT unset: idle OpenMP "
                             "and OpenBLAS workers spin (default: they sleep)")
    return parser.parse_args(argv)


def dump_json(result: dict[str, Any]) -> str:
    """Compact JSON; samples to 5 significant digits (timer noise is far above that)."""
    def rounded(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: rounded(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if key == "samples_s":
                return [float(f"{v:.5g}") for v in value]
            return [rounded(v) for v in value]
        return value
    return json.dumps(rounded(result), separators=(",", ":"), default=str)


def suite_markdown(suite: str, records: list[dict[str, Any]]) -> list[str]:
    if suite == "overhead":
        return ["## overhead: warm calls on tiny arrays", "", overhead_markdown(records)]
    if suite == "coldstart":
        return ["## cold start", "", tables.coldstart_markdown(records)]
    if suite == "cases":
        return ["## cases", "", tables.case_list_markdown(records), tables.cases_markdown(records)]
    if suite == "ops":
        return ["## ops: every operation against the best peer", "",
                race_ops.ops_markdown(records)]
    return ["## scaling", "", tables.scaling_markdown(records)]


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# rearrange benchmarks ({result['config']['size']})", "",
             tables.machine_markdown(result["machine"]), ""]
    for suite in SUITES:
        if suite in result["records"]:
            lines.extend(suite_markdown(suite, result["records"][suite]) + [""])
    return "\n".join(lines) + "\n"


def render(path: Path, out: Path | None, name: str | None, no_plot: bool) -> int:
    """Tables and plots again from a run's JSON (ratios recomputed from its samples)."""
    result = json.loads(path.read_text())
    for suite in ("cases", "scaling"):
        for record in result["records"].get(suite, []):
            suites.add_ratios(record)
    for record in result["records"].get("ops", []):
        race_ops.add_ratios(record)
    for record in result["records"].get("overhead", []):
        us = record["us"]
        if "numpy" in us:  # ratios of the medians, as the overhead suite computes them
            record["ra_over_numpy"] = us["rearrange"] / us["numpy"]
            if "floor" in us:
                record["floor_over_numpy"] = us["floor"] / us["numpy"]
            record["einops_over_ra"] = us["einops"] / us["rearrange"] if "einops" in us else math.nan
    out = out or path.parent
    name = name or path.stem
    out.mkdir(parents=True, exist_ok=True)
    result.pop("plots", None)
    if not no_plot:
        result["plots"] = make_plots(result, out, name, print)
    (out / f"{name}.json").write_text(dump_json(result))
    (out / f"{name}.md").write_text(markdown(result))
    print(f"rendered {out / name}.md, .json" + "".join(f", {p}" for p in result.get("plots", [])))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return render(args.render, args.out if args.out != DEFAULT_OUT else None, args.name,
                      args.no_plot)
    size = "quick" if args.quick else "smoke" if args.smoke else "full"
    config = SIZES[size]
    if args.threads:
        config = replace(config, threads=_parse_list(args.threads, int))
    if args.mode:
        config = replace(config, modes=_parse_list(args.mode))
    if args.rounds:
        config = replace(config, rounds=args.rounds, scaling_rounds=args.rounds)
    if args.case:
        config = replace(config, case_filters=tuple(args.case))
    chosen = [s for arg in (args.suite or [",".join(SUITES)]) for s in _parse_list(arg)]
    unknown = [s for s in chosen if s not in SUITES]
    if unknown:
        raise SystemExit(f"unknown suite(s) {unknown}; choose from {', '.join(SUITES)}")
    name = args.name or {"full": "latest", "quick": "quick", "smoke": "smoke"}[size]
    args.out.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.perf_counter()
    libs = load_libs(log)
    machine = machine_info(libs)
    result: dict[str, Any] = {"machine": machine, "config": asdict(config), "suites": chosen,
                              "records": {}}
    json_path, md_path = args.out / f"{name}.json", args.out / f"{name}.md"

    def save() -> None:
        machine["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
        result["elapsed_s"] = time.perf_counter() - started
        json_path.write_text(dump_json(result))
        md_path.write_text(markdown(result))

    print(markdown(result), flush=True)
    for suite in SUITES:  # a fixed order: cheap suites first
        if suite not in chosen:
            continue
        log(f"== {suite}")
        suite_started = time.perf_counter()
        if suite == "overhead":
            records = run_overhead(config.overhead_number, config.overhead_repeat, libs, log)
        elif suite == "coldstart":
            records = suites.run_coldstart(config, libs, log)
        elif suite == "cases":
            records = suites.run_cases(config, libs, log)
        elif suite == "ops":
            records = suites.run_ops(config, libs, log)
        else:
            records = suites.run_scaling(config, libs, log)
        result["records"][suite] = records
        log(f"== {suite}: {time.perf_counter() - suite_started:.1f} s")
        print("\n".join(suite_markdown(suite, records) + [""]), flush=True)
        save()

    if not args.no_plot:
        result["plots"] = make_plots(result, args.out, name, log)
    save()
    log(f"wrote {json_path}, {md_path}" + "".join(f", {p}" for p in result.get("plots", [])))
    log(f"elapsed {result['elapsed_s']:.1f} s")
    return 0


def make_plots(result: dict[str, Any], out: Path, name: str, log: Any) -> list[str]:
    try:
        import plots
        plots._pyplot()
    except ImportError:
        log("note: matplotlib is not installed; no plots (pip install '.[bench]')")
        return []
    machine = result["machine"]
    subtitle = (f"{machine['cpu_model']}, {machine['cpus_available']} CPUs · "
                f"numpy {machine['versions']['numpy']}, torch {machine['versions'].get('torch', '—')}, "
                f"einops {machine['versions'].get('einops', '—')} · {machine['date']}")
    written = []
    cases = result["records"].get("cases", [])
    for mode in ("alloc", "prealloc"):
        path = out / f"{name}-cases-{mode}.png"
        if plots.plot_cases(cases, mode, path, subtitle):
            written.append(str(path))
    path = out / f"{name}-ops.png"
    if plots.plot_ops(result["records"].get("ops", []), path, subtitle):
        written.append(str(path))
    path = out / f"{name}-scaling.png"
    if plots.plot_scaling(result["records"].get("scaling", []), path, subtitle,
                          machine["cache_bytes"]):
        written.append(str(path))
    return written


if __name__ == "__main__":
    sys.exit(main())
