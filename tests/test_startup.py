"""A fresh process starts as quickly as einops' (#37): ``import rearrange`` loads only
what a first view needs, and in the default mode the caller's thread never imports numba
nor loads a runner, whatever the state of the kernel cache.

Each case is a fresh interpreter on a cache directory of its own (REARRANGE_CACHE_DIR;
REARRANGE_JIT unset: background). Which thread imported numba is recorded by an import
hook installed before rearrange is imported, which thread loaded a runner by wrapping
``rearrange.kernel.jit.compile_runner``; which copy ran is read from the process's own
state (``builds.status``) and from explain's ``now`` line. Behaviour, not timing: the
figures are bench/startup.py's (docs/performance.md).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX processes")

REPO = Path(__file__).resolve().parents[1]

PRELUDE = textwrap.dedent("""
    import json, sys, threading
    MAIN = threading.get_ident()
    seen = {"numba": [], "loads": []}

    class _Watch:           # records the thread that runs numba's import (not a lookup)
        def find_spec(self, name, path=None, target=None):
            if name != "numba":
                return None
            import importlib.util
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            run = spec.loader.exec_module

            def exec_module(module):
                seen["numba"].append(threading.get_ident() == MAIN)
                run(module)
            spec.loader.exec_module = exec_module
            return spec
    sys.meta_path.insert(0, _Watch())

    import numpy as np
    import rearrange as ra
    from rearrange import kernel as K
    from rearrange.kernel import builds, jit

    _compile_runner = jit.compile_runner
    def compile_runner(*args, **kwargs):    # records the thread that loads a runner
        seen["loads"].append(threading.get_ident() == MAIN)
        return _compile_runner(*args, **kwargs)
    jit.compile_runner = compile_runner

    def now(x):
        return [l.strip() for l in str(ra.explain(x, "h w -> (w h)")).splitlines()
                if l.strip().startswith("now")]

    def copy(x):
        y = ra.rearrange(x, "h w -> (w h)")
        assert np.array_equal(y, np.ascontiguousarray(x.T).reshape(-1))

    big = (np.arange(2048 * 2048, dtype=np.float32) % 251).reshape(2048, 2048)
    small = big[:64, :64].copy()
    report = {"package": ra.__file__}
""")


def run(script: str, cache: Path, timeout: float = 900) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("REARRANGE_JIT", "NUMBA_CACHE_DIR")}
    env["REARRANGE_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
    done = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script)], env=env,
                          cwd=str(next(p for p in cache.parents if p.is_dir())),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(report["package"]).resolve().is_relative_to(REPO), report["package"]
    return report


# The first copy, its state, then (after waiting for the kernel) the same copy again.
FIRST_AND_THEN = """
    report["before"] = now(big)
    copy(big)
    report["first"] = builds.status("transpose", 4)
    report["during"] = now(big)
    report["waited"] = K.wait(600)
    copy(big)
    report["then"] = builds.status("transpose", 4)
    report.update(seen, compiled=builds.compiles_started)
    print(json.dumps(report))
"""


def assert_caller_never_touched_numba(report: dict) -> None:
    assert True not in report["numba"], report
    assert True not in report["loads"], report


@pytest.fixture(scope="module")
def on_disk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the float32 transpose runner and the pool's (one eager process)."""
    cache = tmp_path_factory.mktemp("on-disk") / "cache"
    env = {**os.environ, "REARRANGE_CACHE_DIR": str(cache), "REARRANGE_JIT": "eager",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", "import numpy as np, rearrange as ra; "
                    "ra.rearrange(np.ones((2048, 2048), np.float32), 'h w -> (w h)')"],
                   env=env, check=True, timeout=900)
    assert list(cache.glob("transpose-u4-*.ready")) and list(cache.glob("pool-u8-*.ready"))
    return cache


def test_import_loads_only_what_a_first_view_needs(tmp_path: Path) -> None:
    """No build machinery, process or metadata modules at import: compared with what
    ``import numpy`` alone loads in the same environment."""
    code = ("import json, sys, numpy; before = set(sys.modules); import rearrange; "
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    added = json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                                      capture_output=True, text=True, check=True)
                       .stdout.strip().splitlines()[-1])
    forbidden = {"subprocess", "importlib.metadata", "numba", "llvmlite", "uuid", "pickle",
                 "rearrange.kernel.builds", "rearrange.kernel.jit", "rearrange.kernel.loops",
                 "rearrange.kernel.lowering",
                 "rearrange.kernel.worker", "rearrange.kernel.numba_private", "lark", "torch"}
    assert not forbidden & set(added), sorted(forbidden & set(added))


@pytest.mark.slow
def test_on_disk_the_caller_copies_with_numpy_while_a_thread_loads(on_disk: Path,
                                                                   tmp_path: Path) -> None:
    """The runner is on disk: the first copy is numpy's (explain says so), a thread of
    the process imports numba and loads the runner, the next copies use the kernel;
    nothing is compiled. Before, the first copy imported numba and loaded the runner in
    the caller's thread (~0.6 s of a short script)."""
    report = run(FIRST_AND_THEN, on_disk)
    assert report["before"] == ["now    numpy's copy at first; the kernel, compiled on this "
                                "machine before, is loaded from the disk cache in the "
                                "background and used once loaded"]
    assert report["first"] in ("loading", "ready")
    assert report["waited"] and report["then"] == "ready" and report["compiled"] == 0
    assert_caller_never_touched_numba(report)
    assert report["numba"] == [False] and False in report["loads"]


@pytest.mark.slow
def test_a_small_copy_never_loads_numba(on_disk: Path) -> None:
    """A copy numpy does as fast (64x64: the plan says numpy) with the kernel on disk:
    numba is never imported, no runner loaded, nothing started."""
    report = run("""
        for _ in range(3):
            copy(small)
        report["plan_now"] = now(small)
        report.update(seen, threads=threading.active_count(),
                      numba_loaded="numba" in sys.modules)
        print(json.dumps(report))
    """, on_disk)
    assert report["numba"] == [] and report["loads"] == [] and not report["numba_loaded"]
    assert report["threads"] == 1 and report["plan_now"] == []


@pytest.mark.slow
def test_empty_cache_the_caller_copies_while_a_worker_compiles(tmp_path: Path) -> None:
    report = run(FIRST_AND_THEN, tmp_path / "cache")
    assert report["before"] == ["now    numpy's copy at first; the kernel is compiled in the "
                                "background and used once it is ready"]
    assert report["first"] == "compiling"
    assert report["during"] == ["now    numpy's copy: kernel compiling in the background"]
    assert report["waited"] and report["then"] == "ready" and report["compiled"] >= 1
    assert_caller_never_touched_numba(report)


@pytest.mark.slow
def test_compiling_elsewhere_the_caller_does_not_wait(tmp_path: Path) -> None:
    """Another process holds the runner's lock (it is compiling it): the caller copies
    with numpy at once, its thread waits for the lock; the process leaves meanwhile."""
    cache = tmp_path / "cache"
    cache.mkdir()
    fd = os.open(cache / "transpose-u4.lock", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        report = run("""
            copy(big)
            copy(big)
            report["first"] = builds.status("transpose", 4)
            report["during"] = now(big)
            report.update(seen)
            print(json.dumps(report))
        """, cache)
    finally:
        os.close(fd)
    assert report["first"] == "compiling"
    assert report["during"] == ["now    numpy's copy: kernel compiling in the background"]
    assert_caller_never_touched_numba(report)


@pytest.mark.slow
def test_read_only_the_kernel_is_compiled_in_a_thread(tmp_path: Path) -> None:
    """No writable cache directory: the caller copies with numpy, a thread of the
    process compiles the runner in memory (one warning), the next copies use it."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    report = run("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            copy(big)
            report["first"] = builds.status("transpose", 4)
            report["waited"] = K.wait(900)
            copy(big)
        report["then"] = builds.status("transpose", 4)
        report["warnings"] = [str(w.message) for w in caught]
        report.update(seen)
        print(json.dumps(report))
    """, blocker / "cache")
    assert report["first"] == "compiling" and report["waited"] and report["then"] == "ready"
    assert len(report["warnings"]) == 1 and "no writable cache" in report["warnings"][0]
    assert_caller_never_touched_numba(report)
    assert report["numba"] == [False]


@pytest.mark.slow
def test_the_loader_waits_before_importing_numba_unless_asked(on_disk: Path) -> None:
    """The service's thread does nothing for its start delay (made a minute here): the
    copies meanwhile are numpy's, numba is not imported by anyone, nor the disk cache
    looked at (hashlib: the sources' stamp); kernel.wait() cuts the delay short and the
    runner loads in that thread. A process that ends within the delay never pays for
    numba's import."""
    report = run("""
        builds.START_DELAY_SECONDS = 60.0
        copy(big)
        copy(big)
        report["numba_loaded"] = "numba" in sys.modules
        report["hashlib_loaded"] = "hashlib" in sys.modules
        report["first"] = builds.status("transpose", 4)
        report["waited"] = K.wait(600)
        copy(big)
        report["then"] = builds.status("transpose", 4)
        report.update(seen, compiled=builds.compiles_started)
        print(json.dumps(report))
    """, on_disk)
    assert not report["numba_loaded"] and not report["hashlib_loaded"], report
    assert report["first"] == "loading"
    assert report["waited"] and report["then"] == "ready" and report["compiled"] == 0
    assert report["numba"] == [False] and set(report["loads"]) == {False}
