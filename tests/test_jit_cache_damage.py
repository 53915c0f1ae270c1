"""The copy kernel's disk cache is verified, not trusted (rearrange.kernel.jit): a
damaged entry is discarded and compiled again, an unwritable cache directory costs
speed, never a call.

Every case runs fresh interpreters on cache directories of its own (REARRANGE_CACHE_DIR):
one process populates a cache (the module's fixture; each case copies it), the case
damages it, and later processes copy in ``eager`` and in ``background`` mode (the two
modes' processes run side by side, each on its own copy of the damaged cache). Each must
exit 0 with numpy's results, warn at most once, and have the kernel back in use by its
second process: which copy ran is read from the process's own state right after the
call (``builds.status``: "ready" once the call could use the runner) and from
``explain``'s ``now`` line.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX processes")

REPO = Path(__file__).resolve().parents[1]
MODES = ("eager", "background")

# One process's copies: a 2048x2048 float32 and a uint8 transpose (16 and 4 MiB: the
# kernel's, threaded), before and after waiting for any background compile; one JSON
# line of what it saw.
SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import rearrange as ra
    from rearrange import kernel as K
    from rearrange.kernel import builds

    x = (np.arange(2048 * 2048, dtype=np.uint64) * 2654435761 % 4093).reshape(2048, 2048)
    ARRAYS = [("float32", 4, (x.astype(np.float32) / 7)), ("uint8", 1, (x % 251).astype(np.uint8))]
    report = {"package": ra.__file__}

    def copies(when):
        for name, unit, a in ARRAYS:
            now = [l.strip() for l in str(ra.explain(a, "h w -> (w h)")).splitlines()
                   if l.strip().startswith("now")]
            y = ra.rearrange(a, "h w -> (w h)")
            report[f"{when} {name}"] = {
                "now": now, "status": builds.status("transpose", unit),
                "right": bool(np.array_equal(y, np.ascontiguousarray(a.T).reshape(-1)))}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        copies("first")
        report["waited"] = K.wait(600)
        copies("then")
    report["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    report["compiled"] = builds.compiles_started
    print(json.dumps(report))
""")

# Imported first by every interpreter of a case that sets REARRANGE_TEST_UNWRITABLE (the
# compile workers too: they inherit the environment): files opened for writing under
# that directory fail as on a full filesystem (ENOSPC: created, but no byte written) or a
# read-only one (EROFS: not even created). Reads, directory listings, unlinks and
# descriptor-level opens (tempfile's check that the directory takes files, the lock
# files) are left alone, as a full disk leaves them.
SITECUSTOMIZE = textwrap.dedent("""
    import builtins, errno, io, os

    _root = os.environ.get("REARRANGE_TEST_UNWRITABLE")
    if _root:
        _root = os.path.realpath(_root) + os.sep
        _code = getattr(errno, os.environ.get("REARRANGE_TEST_UNWRITABLE_ERRNO", "ENOSPC"))
        _open = builtins.open

        class _Full:
            def __init__(self, file):
                self._file = file
            def write(self, data):
                raise OSError(_code, os.strerror(_code))
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                self._file.close()
            def __getattr__(self, name):
                return getattr(self._file, name)

        def open(file, mode="r", *args, **kwargs):
            writes = any(c in mode for c in "wax+")
            inside = isinstance(file, (str, bytes, os.PathLike)) and \\
                os.path.realpath(os.fsdecode(file)).startswith(_root)
            if writes and inside and _code == errno.EROFS:
                raise OSError(_code, os.strerror(_code), os.fsdecode(file))
            handle = _open(file, mode, *args, **kwargs)
            return _Full(handle) if writes and inside else handle

        builtins.open = io.open = open
""")


def environment(cache: Path, mode: str, extra: dict[str, str] | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("REARRANGE_JIT", "NUMBA_CACHE_DIR", "REARRANGE_TEST_UNWRITABLE")}
    env["REARRANGE_CACHE_DIR"] = str(cache)
    env["REARRANGE_JIT"] = mode
    # This very rearrange, in the processes and in the workers they start.
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
    env.update(extra or {})
    return env


def start(cache: Path, mode: str, extra: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SCRIPT], env=environment(cache, mode, extra),
                            cwd=str(cache.parent), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=900)
    assert process.returncode == 0, f"exit {process.returncode}: {err[-3000:]}"
    report = json.loads(out.strip().splitlines()[-1])
    assert Path(report["package"]).resolve().is_relative_to(REPO), report["package"]
    return report


def later_processes(caches: dict[str, Path], count: int,
                    extra: dict[str, str] | None = None) -> dict[str, list[dict]]:
    """``count`` processes one after the other on each mode's cache, the two modes side
    by side; their reports, by mode."""
    reports: dict[str, list[dict]] = {mode: [] for mode in caches}
    for _ in range(count):
        running = {mode: start(cache, mode, extra) for mode, cache in caches.items()}
        for mode, process in running.items():
            reports[mode].append(finish(process))
    return reports


def copies_of(populated: Path, tmp_path: Path) -> dict[str, Path]:
    caches = {}
    for mode in MODES:
        caches[mode] = tmp_path / mode / "cache"
        shutil.copytree(populated, caches[mode])
    return caches


def assert_right(report: dict) -> None:
    for when in ("first", "then"):
        for name in ("float32", "uint8"):
            assert report[f"{when} {name}"]["right"], (when, name, report)


def assert_kernel_first(report: dict, mode: str) -> None:
    """The process's runners were loaded from the cache — by its first copies (eager), or
    by a thread while they copied with numpy (background) — nothing compiled, nothing to
    warn about."""
    for name in ("float32", "uint8"):
        first = report[f"first {name}"]
        if mode == "eager":
            assert first["now"] == ["now    the kernel, compiled on this machine before "
                                    "(loaded from the disk cache in the first call that "
                                    "needs it)"], report
            assert first["status"] == "ready", report
        else:
            assert first["now"] == ["now    numpy's copy at first; the kernel, compiled on "
                                    "this machine before, is loaded from the disk cache in "
                                    "the background and used once loaded"], report
            assert first["status"] in ("loading", "ready"), report
        assert report[f"then {name}"]["status"] == "ready", report
    assert report["compiled"] == 0 and report["warnings"] == [], report


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the float32 and uint8 transpose runners and the pool's, written
    by one eager process (the cases copy it)."""
    cache = tmp_path_factory.mktemp("populated") / "cache"
    report = finish(start(cache, "eager"))
    assert report["first float32"]["status"] == report["first uint8"]["status"] == "ready"
    assert report["warnings"] == []
    assert len(entries(cache, ".nbc")) == 3 and len(entries(cache, ".nbi")) == 3
    return cache


def entries(cache: Path, suffix: str) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.suffix == suffix)


def empty_indexes(cache: Path) -> None:
    for path in entries(cache, ".nbi"):
        path.write_bytes(b"")


def halve_data(cache: Path) -> None:
    for path in entries(cache, ".nbc"):
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def flip_bytes(cache: Path) -> None:
    """64 bytes of every index and data file inverted, at places fixed by a seed."""
    chance = random.Random(35)
    for path in entries(cache, ".nbi") + entries(cache, ".nbc"):
        data = bytearray(path.read_bytes())
        for place in chance.sample(range(len(data)), 64):
            data[place] ^= 0xFF
        path.write_bytes(bytes(data))


def swap_runners(cache: Path) -> None:
    """The uint8 and the float32 transpose runners' data files, each well-formed, each
    in the other's place (their indexes untouched)."""
    [u1] = [p for p in entries(cache, ".nbc") if "_run_transpose_u1-" in p.name]
    [u4] = [p for p in entries(cache, ".nbc") if "_run_transpose_u4-" in p.name]
    one, four = u1.read_bytes(), u4.read_bytes()
    u1.write_bytes(four)
    u4.write_bytes(one)


@pytest.mark.slow
@pytest.mark.parametrize("damage", [empty_indexes, halve_data, flip_bytes, swap_runners],
                         ids=["empty-index", "half-data", "flipped-bytes", "swapped-runners"])
def test_a_damaged_entry_is_discarded_and_compiled_again(populated: Path, tmp_path: Path,
                                                          damage) -> None:
    """Before: eager processes raised (EOFError, UnpicklingError, ...) on every later
    run, background ones turned the kernel off for good, and a swapped runner gave
    wrong results or a segfault. Now the first process names the damage in one warning,
    discards the entry and compiles it again (in the call, or in the background); the
    second one loads it and copies through the kernel at once."""
    caches = copies_of(populated, tmp_path)
    for cache in caches.values():
        damage(cache)
    reports = later_processes(caches, 2)
    for mode, (first, second) in reports.items():
        assert_right(first)
        assert_right(second)
        assert len(first["warnings"]) == 1, (mode, first["warnings"])
        assert first["warnings"][0].startswith("RuntimeWarning: rearrange: the disk cache "
                                               "entry of the transpose-u4 copy kernel")
        assert "was damaged" in first["warnings"][0]
        assert first["compiled"] >= 1
        # In eager mode the very call that found the damage compiled and used the kernel;
        # in background mode the call copied with numpy while a thread found the damage
        # (loading the entry its marker names) and a worker compiled it again.
        expected = ("ready",) if mode == "eager" else ("loading", "compiling")
        assert first["first float32"]["status"] in expected, (mode, first)
        assert first["then float32"]["status"] == first["then uint8"]["status"] == "ready"
        assert_kernel_first(second, mode)
    assert not list(tmp_path.glob("*/cache/*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("code", ["ENOSPC", "EROFS"])
def test_an_unwritable_cache_directory_costs_speed_not_a_call(tmp_path: Path,
                                                              code: str) -> None:
    """A cache directory whose files cannot be written (a full filesystem: ENOSPC on
    write; read-only underneath: EROFS on open) while it looks writable. Before: eager
    copies raised OSError and background mode turned the kernel off. Now each process
    copies right, compiles in memory (in the call, or in a thread of its own once its
    worker's entry did not land), uses the kernel, warns once, and leaves no file
    half-written."""
    caches = {mode: tmp_path / mode / "cache" for mode in MODES}
    for cache in caches.values():
        cache.mkdir(parents=True)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    reports = {}
    for mode, cache in caches.items():
        env = environment(cache, mode)
        reports[mode] = start(cache, mode, {
            "REARRANGE_TEST_UNWRITABLE": str(cache),
            "REARRANGE_TEST_UNWRITABLE_ERRNO": code,
            "PYTHONPATH": os.pathsep.join([str(site), env["PYTHONPATH"]])})
    for mode, process in reports.items():
        report = finish(process)
        assert_right(report)
        assert len(report["warnings"]) == 1, (mode, report["warnings"])
        assert report["warnings"][0].startswith("RuntimeWarning: rearrange: could not write "
                                                "the transpose-u4 copy kernel to the disk "
                                                "cache")
        assert os.strerror(getattr(errno, code)) in report["warnings"][0]
        expected = "ready" if mode == "eager" else "compiling"
        assert report["first float32"]["status"] == expected, (mode, report)
        assert report["then float32"]["status"] == report["then uint8"]["status"] == "ready"
        # Nothing but (empty) lock files: no entry, no marker, no temporary file.
        assert {p.suffix for p in caches[mode].iterdir()} <= {".lock"}, mode
