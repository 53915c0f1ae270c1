"""When copy kernels are compiled (rearrange.kernel.builds): never in a call by default,
once per machine, safely across fork, exit and a read-only install.

Each test runs fresh interpreters on a cache directory of its own (REARRANGE_CACHE_DIR),
with REARRANGE_JIT unset (the default, background) unless it says otherwise: the state
under test is per process and per cache. Results are checked against numpy; which path a
copy took is read from the process's own status (``builds.status``), from ``explain`` and
from the cache directory (runner entries, ready markers, locks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import rearrange as ra
from rearrange.kernel import builds

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX processes")

# Four first copies of different kinds: (dtype, shape, pattern, runner family, unit bytes).
FIRST_COPIES = [
    ("float32", (1024, 1024), "h w -> (w h)", "transpose", 4),
    ("uint8", (16, 64, 64, 3), "b h w c -> b (c h w)", "tiles", 1),
    ("float64", (16, 16, 64, 32), "b h t d -> b t (h d)", "rows", 8),
    ("complex128", (512, 512), "a b -> (b a)", "transpose", 8),
]

PRELUDE = """
import json, os, sys, time
import numpy as np
import rearrange as ra
from rearrange import kernel as K
from rearrange.kernel import builds

def array(dtype, shape):
    x = np.arange(int(np.prod(shape))).reshape(shape) % 251
    return (x + 1j * x if dtype == "complex128" else x).astype(dtype)

def check(dtype, shape, pattern):
    import einops
    x = array(dtype, shape)
    assert np.array_equal(ra.rearrange(x, pattern), einops.rearrange(x, pattern)), pattern
"""


def environment(cache: Path, mode: str | None = None) -> dict[str, str]:
    """This process's environment for a fresh interpreter on ``cache``, in ``mode``
    (None: the default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("REARRANGE_JIT", "NUMBA_CACHE_DIR")}
    env["REARRANGE_CACHE_DIR"] = str(cache)
    if mode is not None:
        env["REARRANGE_JIT"] = mode
    return env


def run(script: str, cache: Path, mode: str | None = None, timeout: float = 600,
        background: bool = False) -> subprocess.Popen | dict:
    """Run ``script`` (after PRELUDE) in a fresh interpreter on ``cache``; it prints one
    JSON line last, returned parsed (or the Popen, with ``background``)."""
    code = PRELUDE + textwrap.dedent(script)
    cwd = next(p for p in cache.parents if p.is_dir())   # not the source tree
    process = subprocess.Popen([sys.executable, "-c", code], env=environment(cache, mode),
                               cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    if background:
        return process
    return finish(process, timeout)


def finish(process: subprocess.Popen, timeout: float = 600) -> dict:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def workers_alive(cache: Path) -> list[int]:
    """Compile workers still running for this cache (read from /proc)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(") ")[-1][0]
        except OSError:
            continue
        if b"rearrange.kernel.worker" in cmdline and \
                f"REARRANGE_CACHE_DIR={cache}".encode() in environ and state != "Z":
            alive.append(int(entry.name))
    return alive


def zombies() -> list[int]:
    """Zombie compile workers: a zombie keeps its name (``stat``), not its command line;
    the worker runs as python with ``-m rearrange.kernel.worker``, so any zombie python
    whose parent is init is a candidate left by an orphaned worker."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            stat = (entry / "stat").read_text()
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
            state, parent = rest.split()[:2]
            if state == "Z" and name.startswith("python") and parent == "1":
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache that the first test warms (the float32 transpose runner) and the next
    ones reuse: one compile for the module."""
    return tmp_path_factory.mktemp("kernels") / "cache"


@pytest.mark.slow
def test_first_copies_never_wait_and_the_kernel_takes_over(shared_cache: Path) -> None:
    """Empty cache, background mode: the four first copies (four dtypes, three runner
    families) return numpy's results at once while their runners compile; the process
    exits straight after; its worker finishes the runner in hand and exits (no zombie
    left, no half-written file); the process that comes next uses the kernel."""
    first = run(f"""
        copies = {FIRST_COPIES!r}
        states = []
        for dtype, shape, pattern, family, unit in copies:
            start = time.perf_counter()
            check(dtype, shape, pattern)
            states.append((time.perf_counter() - start, builds.status(family, unit)))
        now = [line.strip() for line in str(ra.explain(array("float32", (1024, 1024)),
               "h w -> (w h)")).splitlines() if line.strip().startswith("now")]
        print(json.dumps({{"states": states, "now": now}}))
    """, shared_cache)
    assert [state for _, state in first["states"]] == ["compiling"] * 4
    assert first["now"] == ["now    numpy's copy: kernel compiling in the background"]
    # The worker outlives the process by the one runner it had in hand, then exits; init
    # reaps it (within seconds here: this machine's init reaps on a timer).
    deadline = time.monotonic() + 300
    while (workers_alive(shared_cache) or zombies()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not workers_alive(shared_cache)
    assert not zombies()
    assert not list(shared_cache.glob("*.tmp*"))     # nothing half-written
    # The transpose runner it was compiling first is complete and marked ready.
    assert builds_marker(shared_cache, ("transpose", 4)).exists()
    later = run("""
        x = array("float32", (1024, 1024))
        before = builds.status("transpose", 4)
        now = [l.strip() for l in str(ra.explain(x, "h w -> (w h)")).splitlines()
               if l.strip().startswith("now")]
        check("float32", (1024, 1024), "h w -> (w h)")
        after = builds.status("transpose", 4)
        assert K.wait(600)
        check("float32", (1024, 1024), "h w -> (w h)")
        print(json.dumps({"before": before, "now": now, "after": after,
                          "then": builds.status("transpose", 4),
                          "compiled": builds.compiles_started}))
    """, shared_cache)
    assert later["before"] == "on disk"
    assert later["now"] == ["now    numpy's copy at first; the kernel, compiled on this machine "
                            "before, is loaded from the disk cache in the background and used "
                            "once loaded"]
    # The call itself copied with numpy; a thread of the process loads the runner.
    assert later["after"] in ("loading", "ready")
    assert later["then"] == "ready"      # (loaded: only the pool's runner may compile)


def builds_marker(cache: Path, key: tuple[str, int]) -> Path:
    """The marker path a process on ``cache`` would use (the stamp is the sources')."""
    from rearrange.kernel.jit import source_stamp

    return cache / f"{key[0]}-u{key[1]}-{source_stamp()}.ready"


@pytest.mark.slow
def test_a_copy_compiles_only_its_own_runner(tmp_path: Path) -> None:
    """A transpose compiles the transpose runner for its unit size, nothing else; once
    it is ready the same copy runs through it, with numpy's result."""
    cache = tmp_path / "cache"
    result = run("""
        x = array("float64", (256, 256))
        check("float64", (256, 256), "h w -> (w h)")
        assert K.wait(600)
        check("float64", (256, 256), "h w -> (w h)")
        print(json.dumps({"status": builds.status("transpose", 8),
                          "others": [builds.status(f, u) for f in ("rows", "tiles")
                                     for u in (1, 2, 4, 8)]}))
    """, cache)
    assert result["status"] == "ready"
    assert set(result["others"]) == {"not compiled"}
    entries = sorted(p.name for p in cache.iterdir() if p.suffix in (".nbi", ".nbc"))
    assert entries and all("_run_transpose_u8" in name for name in entries)


@pytest.mark.slow
def test_concurrent_processes_compile_each_runner_once(tmp_path: Path) -> None:
    """Three processes started together on an empty cache want the same runner: one
    compiles it (holding its lock), the others wait in their background threads, then
    load it; every copy's result is numpy's."""
    cache = tmp_path / "cache"
    script = """
        check("uint8", (16, 64, 64, 3), "b h w c -> b (c h w)")
        assert K.wait(600)
        check("uint8", (16, 64, 64, 3), "b h w c -> b (c h w)")
        print(json.dumps({"compiled": builds.compiles_started,
                          "status": builds.status("tiles", 1)}))
    """
    processes = [run(script, cache, background=True) for _ in range(3)]
    results = [finish(p) for p in processes]
    assert [r["status"] for r in results] == ["ready"] * 3
    assert sum(r["compiled"] for r in results) == 1
    assert (cache / "tiles-u1.lock").exists()


@pytest.mark.slow
def test_the_warmup_command_leaves_every_runner_on_disk(tmp_path: Path) -> None:
    """``rearrange warmup --parallel 2`` on an empty cache: two workers share the twelve
    copy runners, the pool's, the reductions' (row sums, row maxima, column sums), the
    row assembly's and einsum's batched products' out and the command reports them all; it does not load them itself, so the
    test is that a fresh process finds each on disk, compiles nothing, and copies
    through the kernel with numpy's results."""
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-m", "rearrange", "warmup", "--parallel", "2"],
                          env=environment(cache), cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    names = [line.strip() for line in done.stdout.splitlines() if line.startswith("  ")]
    assert sorted(names) == sorted([f"{family}[uint{8 * u}]" for family in
                                    ("rows", "transpose", "tiles") for u in (1, 2, 4, 8)]
                                   + ["pool[uint64]", "row-sums[float32]", "row-sums[float64]",
                                      "row-max[float32]", "row-max[float64]",
                                      "column-sums[float32]", "column-sums[float64]",
                                      "window-max[float32]", "window-max[float64]",
                                      "window-sums[float32]", "window-sums[float64]",
                                      "row-join[uint8]", "gemm[float32]", "gemm[float64]"])
    assert not workers_alive(cache)
    later = run(f"""
        on_disk = [builds.status(f, u) for f in ("rows", "transpose", "tiles")
                   for u in (1, 2, 4, 8)] + [builds.status(*builds.POOL_KEY)] + [
                   builds.status(f, u) for f in ("row-sums", "row-max", "column-sums",
                                                 "window-max", "window-sums")
                   for u in (4, 8)] + [builds.status("row-join", 1)] + [
                   builds.status("gemm", u) for u in (4, 8)]
        for dtype, shape, pattern, family, unit in {FIRST_COPIES!r}:
            check(dtype, shape, pattern)        # numpy's, while a thread loads the runner
        assert K.wait(600)
        for dtype, shape, pattern, family, unit in {FIRST_COPIES!r}:
            check(dtype, shape, pattern)
            assert builds.status(family, unit) == "ready", (family, unit)
        print(json.dumps({{"on_disk": on_disk, "compiled": builds.compiles_started}}))
    """, cache)
    assert set(later["on_disk"]) == {"on disk"}
    assert later["compiled"] == 0


def test_a_failing_worker_reports_why(tmp_path: Path) -> None:
    """A compile worker leaves with os._exit (no interpreter teardown): what it reports
    on stderr must still reach its parent, and its exit status say that it failed."""
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-m", "rearrange.kernel.worker", "nosuch:4"],
                          env=environment(cache), cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "KeyError: 'nosuch'"


@pytest.mark.slow
def test_fork_while_compiling(tmp_path: Path) -> None:
    """A child forked while its parent compiles forgets that compile and the parent's
    lock descriptors, copies correctly at once, and gets the kernel itself (waiting on
    the lock the parent's compile holds, then loading it)."""
    cache = tmp_path / "cache"
    result = run("""
        check("float32", (512, 512), "h w -> (w h)")
        assert builds.status("transpose", 4) == "compiling"
        time.sleep(1.0)                      # the parent's thread now holds the lock
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                report = {"child_state": builds.status("transpose", 4),
                          "child_locks": len(builds._lock_fds)}
                check("float32", (512, 512), "h w -> (w h)")
                report["child_waited"] = K.wait(600)
                report["child_after"] = builds.status("transpose", 4)
                os.write(write, json.dumps(report).encode())
            finally:
                os._exit(0)
        os.close(write)
        assert K.wait(600)
        child = json.loads(os.read(read, 4096))
        os.waitpid(pid, 0)
        print(json.dumps({**child, "parent": builds.status("transpose", 4),
                          "compiled": builds.compiles_started}))
    """, cache)
    assert result["child_state"] in ("not compiled", "on disk")
    assert result["child_locks"] == 0
    assert result["child_waited"] and result["child_after"] == "ready"
    assert result["parent"] == "ready" and result["compiled"] == 1


@pytest.mark.slow
def test_read_only_install_works_with_one_warning(tmp_path: Path) -> None:
    """No writable cache directory: copies still run (numpy's at first), the kernel is
    compiled in a thread of this process and used, and one warning says so."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                check("float64", (16, 16, 64, 32), "b h t d -> b t (h d)")
                check("float32", (512, 512), "h w -> (w h)")
            assert K.wait(900)
            check("float64", (16, 16, 64, 32), "b h t d -> b t (h d)")
        from rearrange.kernel.jit import cache_directory
        print(json.dumps({"warnings": [str(w.message) for w in caught],
                          "directory": cache_directory(),
                          "status": builds.status("rows", 8)}))
    """, blocker / "cache")
    assert result["directory"] is None
    assert len(result["warnings"]) == 1 and "no writable cache" in result["warnings"][0]
    assert result["status"] == "ready"


@pytest.mark.slow
def test_off_and_eager_modes(tmp_path: Path) -> None:
    """off: never compiles (explain says so; numpy's result); eager: the first call
    compiles, and the kernel is ready when it returns."""
    cache = tmp_path / "cache"
    off = run("""
        for _ in range(2):
            check("float32", (512, 512), "h w -> (w h)")
        now = [l.strip() for l in str(ra.explain(array("float32", (512, 512)),
               "h w -> (w h)")).splitlines() if l.strip().startswith("now")]
        print(json.dumps({"mode": ra.get_jit_mode(), "now": now,
                          "status": builds.status("transpose", 4)}))
    """, cache, mode="off")
    assert off == {"mode": "off", "now": ["now    numpy's copy: kernels are off "
                                          "(REARRANGE_JIT=off)"], "status": "not compiled"}
    assert not cache.exists() or not list(cache.glob("*.nbi"))
    eager = run("""
        check("float64", (256, 256), "h w -> (w h)")
        print(json.dumps({"mode": ra.get_jit_mode(), "status": builds.status("transpose", 8),
                          "compiled": builds.compiles_started}))
    """, cache, mode="eager")
    assert eager == {"mode": "eager", "status": "ready", "compiled": 1}


def test_mode_is_checked() -> None:
    before = ra.get_jit_mode()
    with pytest.raises(ra.RearrangeError, match="mode must be one of 'background', 'eager', "
                                                "'off', got 'later'"):
        ra.set_jit_mode("later")
    assert ra.get_jit_mode() == before


def test_a_bad_environment_value_warns_and_falls_back(tmp_path: Path) -> None:
    env = {**os.environ, "REARRANGE_JIT": "sometimes"}
    out = subprocess.run([sys.executable, "-W", "always", "-c",
                          "import rearrange as ra; print(ra.get_jit_mode())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "background"
    assert "REARRANGE_JIT='sometimes' is not one of background, eager, off" in out.stderr


@pytest.mark.slow
def test_torch_copies_use_torch_until_the_kernel_is_ready() -> None:
    """A torch tensor's copy whose runner is not ready is torch's own (and says so)."""
    torch = pytest.importorskip("torch")
    before = ra.get_jit_mode()
    ra.set_jit_mode("off")
    try:
        x = torch.arange(512 * 512, dtype=torch.float32).reshape(512, 512)
        plan = ra.explain(x, "h w -> (w h)")
        now = [line.strip() for line in str(plan).splitlines() if line.strip().startswith("now")]
        assert now == ["now    torch's copy: kernels are off (REARRANGE_JIT=off)"]
        torch.testing.assert_close(ra.rearrange(x, "h w -> (w h)"), x.T.reshape(-1))
    finally:
        ra.set_jit_mode(before)


def test_numpy_copy_while_off_matches_numpy() -> None:
    before = ra.get_jit_mode()
    ra.set_jit_mode("off")
    try:
        x = np.arange(300 * 700, dtype=np.uint16).reshape(300, 700)[:, ::-1]
        assert np.array_equal(ra.rearrange(x, "h w -> (w h)"), x.T.reshape(-1))
        assert builds.status("transpose", 2) in ("not compiled", "ready", "on disk")
    finally:
        ra.set_jit_mode(before)
