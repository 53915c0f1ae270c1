"""When and where runners are compiled, so that no copy waits for the compiler.

A copy needs the runner of its plan's panel family (:data:`.loops.FAMILIES`) for its unit
size. :func:`runner_for` returns it when it is usable now, else None — and the caller then
copies with numpy (or torch) at once. What "usable now" means is the *mode*
(``REARRANGE_JIT``, :func:`set_jit_mode`):

* ``background`` (default): a runner compiled in this process, or compiled on this
  machine before (its ready marker is in the cache directory: it loads from the disk
  cache, ~10 ms once numba is imported), is used; any other is compiled *out of the
  caller's way*, in a worker process (``python -m rearrange.kernel.worker``), and used by
  the first copy after it is ready. A separate process rather than a thread: numba's
  compiler is Python and would hold this process's GIL for seconds (measured in
  docs/copy.md). Without a writable cache directory the worker could not hand its work
  back, so the compile runs in a thread of this process instead (one warning says so).
* ``eager``: compile in the call that needs the runner (the behaviour before background
  compilation; benchmarks use it).
* ``off``: never compile; copies use numpy's (or torch's).

Compile once per machine: each runner has a lock file beside the cache; whoever compiles
it holds the lock, writes the runner to numba's cache, then a ready marker. A process that
finds the lock taken waits for it in its background thread (the calls go on with numpy),
then loads what the other compiled. Markers name the kernel sources' stamp
(:func:`.jit.source_stamp`); they are hints only, numba's own cache lookup (which also
checks the CPU) decides whether a runner loads or needs compiling.

Fork: a child forked while a compile runs forgets that compile (its parent's thread and
worker are not its own), closes the inherited lock descriptors (a flock is shared with
the parent's open file otherwise) and asks again on its first copy. Exit: the worker
reads its jobs from a pipe; when this process exits the pipe closes, the worker finishes
the runner it is compiling (the next process then finds it on disk) and exits — the OS
reaps it. numba writes each cache file under a temporary name and renames it; a marker is
written the same way after the entry: nothing half-written is ever read.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Callable

from .jit import UNIT_DTYPES, cache_directory, forget_cache_directory, source_stamp

__all__ = ["MODES", "set_jit_mode", "get_jit_mode", "runner_for", "status", "describe",
           "wait", "build_here", "build_everything", "marker_path", "lock_path"]

MODES = ("background", "eager", "off")
# A worker left without jobs this long exits (a new one starts for the next job).
WORKER_IDLE_SECONDS = 10.0

Key = tuple[str, int]          # (panel family, unit bytes)


def _mode_from_environment() -> str:
    value = os.environ.get("REARRANGE_JIT", "background").strip().lower() or "background"
    if value not in MODES:
        warnings.warn(f"REARRANGE_JIT={value!r} is not one of {', '.join(MODES)}: "
                      f"using 'background'", RuntimeWarning, stacklevel=3)
        return "background"
    return value


_mode = _mode_from_environment()
_lock = threading.Lock()
_ready: dict[Key, Any] = {}          # runners usable in this process
_pending: dict[Key, str] = {}        # asked for, not ready: "compiling" or "failed: ..."
_service: "_Service | None" = None
_lock_fds: set[int] = set()          # lock files this process holds open (see fork)
_warned_no_cache = False


def set_jit_mode(mode: str) -> None:
    """Choose when copy kernels are compiled: ``"background"`` (default: never in a
    call; numpy copies until the kernel is ready), ``"eager"`` (in the first call that
    needs one) or ``"off"`` (never: numpy's copy). ``REARRANGE_JIT`` sets the initial
    mode."""
    global _mode
    if mode not in MODES:
        from ..errors import RearrangeError

        raise RearrangeError(f"set_jit_mode: mode must be one of {', '.join(map(repr, MODES))}, "
                             f"got {mode!r}")
    _mode = mode


def get_jit_mode() -> str:
    """The current mode: ``"background"``, ``"eager"`` or ``"off"``."""
    return _mode


def _name(key: Key) -> str:
    return f"{key[0]}-u{key[1]}"


def marker_path(key: Key) -> Path | None:
    """The ready marker of a runner compiled from these sources (None: no cache)."""
    directory = cache_directory()
    return None if directory is None else \
        Path(directory) / f"{_name(key)}-{source_stamp()}.ready"


def lock_path(key: Key) -> Path | None:
    directory = cache_directory()
    return None if directory is None else Path(directory) / f"{_name(key)}.lock"


def _on_disk(key: Key) -> bool:
    marker = marker_path(key)
    return marker is not None and marker.exists()


def write_marker(key: Key) -> None:
    """Say that ``key``'s runner is in the disk cache (after numba wrote it)."""
    marker = marker_path(key)
    if marker is None:
        return
    temporary = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    temporary.write_text(f"{sys.executable}\n")
    os.replace(temporary, marker)


class _FileLock:
    """An exclusive flock on a runner's lock file (no-op where flock is missing)."""

    def __init__(self, key: Key) -> None:
        self.path = lock_path(key)
        self.fd: int | None = None

    def __enter__(self) -> "_FileLock":
        if self.path is None:
            return self
        try:
            import fcntl
        except ImportError:          # not POSIX: no cross-process lock, at worst two compiles
            return self
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        _lock_fds.add(self.fd)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)     # blocks without the GIL
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        if self.fd is not None:
            _lock_fds.discard(self.fd)
            os.close(self.fd)                        # releases the flock
            self.fd = None


def _load(key: Key, compile: bool) -> Any:
    from .loops import runner

    return runner(key[1], key[0], compile=compile)


def runner_for(family: str, unit: int) -> Any:
    """The compiled runner for ``family`` and ``unit``-byte units if a copy may use it
    now, else None (the caller copies another way); see the module's docstring."""
    key = (family, unit)
    run = _ready.get(key)
    if run is not None:
        return run
    mode = _mode
    if mode == "off":
        return None
    if mode == "eager":
        return build_here(key)
    with _lock:
        if key in _pending:
            return None
        _pending[key] = "compiling"
    if _on_disk(key):
        try:
            run = _load(key, compile=False)
        except Exception as error:   # a broken cache entry: compile it again, aside
            run = None
            _warn_once(f"rearrange: loading the {_name(key)} copy kernel failed ({error!r}); "
                       "compiling it again in the background")
        if run is not None:
            _publish(key, run)
            return run
    _get_service().submit(key)
    return None


def _publish(key: Key, run: Any) -> None:
    with _lock:
        _ready[key] = run
        _pending.pop(key, None)


def build_here(key: Key, lock: bool = True) -> Any:
    """Load or compile ``key``'s runner now, in this thread, and publish it: eager mode,
    holding its lock (one compile per machine); the worker, whose parent holds it."""
    if lock:
        with _FileLock(key):
            return build_here(key, lock=False)
    run = _load(key, compile=True)
    if cache_directory() is not None and not _on_disk(key):
        write_marker(key)
    _publish(key, run)
    return run


def status(family: str, unit: int) -> str:
    """Where ``family``'s runner for ``unit``-byte units stands in this process:
    ``"ready"``, ``"on disk"`` (compiled on this machine: loads at first use),
    ``"compiling"``, ``"failed: ..."`` or ``"not compiled"``."""
    key = (family, unit)
    if key in _ready:
        return "ready"
    pending = _pending.get(key)
    if pending is not None:
        return pending
    return "on disk" if _on_disk(key) else "not compiled"


def describe(family: str, unit: int, fallback: str = "numpy's copy") -> str:
    """What a copy of this family and unit does now, and why (explain's "now" line)."""
    state = status(family, unit)
    if state == "ready":
        return "the compiled kernel"
    if _mode == "off":
        return f"{fallback}: kernels are off (REARRANGE_JIT=off)"
    if state == "on disk":
        return "the kernel, compiled on this machine before (loads from the disk cache " \
               "at first use)"
    if _mode == "eager":
        return "the kernel, compiled in the first call that needs it (REARRANGE_JIT=eager)"
    if state == "compiling":
        return f"{fallback}: kernel compiling in the background"
    if state.startswith("failed"):
        return f"{fallback}: the kernel {state}"
    return f"{fallback} at first; the kernel is compiled in the background and used " \
           "once it is ready"


def wait(timeout: float | None = None) -> bool:
    """Block until every runner asked for so far is ready (or failed); True if none is
    still compiling. For tests, benchmarks and scripts that want the kernel's speed."""
    service = _service
    if service is None:
        return not any(state == "compiling" for state in _pending.values())
    return service.join(timeout)


def build_everything(parallel: int = 1, log: Callable[[str], None] | None = None) -> list[str]:
    """Compile (or load) every runner for every unit size now: in this process with
    ``parallel == 1``, else spread over ``parallel`` worker processes and then loaded
    here. Returns their names, as ``warmup`` reports them."""
    from .loops import RUNS

    keys = [(family, u) for u in UNIT_DTYPES for family in RUNS]
    if parallel > 1 and cache_directory() is not None:
        todo = [k for k in keys if k not in _ready and not _on_disk(k)]
        shares = [todo[i::parallel] for i in range(parallel)]
        threads = [threading.Thread(target=_build_in_worker, args=(share, log))
                   for share in shares if share]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    names = []
    for key in keys:
        build_here(key)
        names.append(f"{key[0]}[{UNIT_DTYPES[key[1]].__name__}]")
    return names


def _build_in_worker(keys: list[Key], log: Callable[[str], None] | None) -> None:
    worker = _Worker()
    try:
        for key in keys:
            with _FileLock(key):
                if not _on_disk(key):
                    worker.build(key)
            if log is not None:
                log(_name(key))
    finally:
        worker.close()


def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=4)


# --------------------------------------------------------------------------- the service


class _Worker:
    """A compile worker process: reads ``family unit`` lines, compiles each runner into
    the disk cache, writes its marker and answers ``ok`` (or ``error <reason>``)."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["REARRANGE_CACHE_DIR"] = cache_directory() or ""
        env["REARRANGE_JIT"] = "eager"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rearrange.kernel.worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
            cwd=str(Path(__file__).resolve().parents[2]), start_new_session=True)

    def build(self, key: Key) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{key[0]} {key[1]}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()   # waits without the GIL
        if answer != "ok":
            raise RuntimeError(answer.removeprefix("error ").strip()
                               or f"the compile worker exited ({self.process.poll()})")

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


class _Service:
    """This process's background builder: one thread taking runners off a queue, one
    worker process while there is work (or, without a disk cache, compiling in the
    thread itself)."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[Key] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.worker: _Worker | None = None
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.outstanding = 0

    def submit(self, key: Key) -> None:
        with self.lock:
            self.outstanding += 1
            self.jobs.put(key)
            if self.thread is None:
                self.thread = threading.Thread(target=self._serve, daemon=True,
                                               name="rearrange-kernel-builds")
                self.thread.start()

    def join(self, timeout: float | None) -> bool:
        with self.idle:
            return self.idle.wait_for(lambda: self.outstanding == 0, timeout)

    def _serve(self) -> None:
        while True:
            try:
                key = self.jobs.get(timeout=WORKER_IDLE_SECONDS)
            except queue.Empty:
                with self.lock:
                    if self.jobs.empty():
                        self.thread = None
                        worker, self.worker = self.worker, None
                        break
                continue
            try:
                self._build(key)
            except Exception as error:  # noqa: BLE001 — reported, never raised in a copy
                with _lock:
                    _pending[key] = f"failed: {error}"
                _warn_once(f"rearrange: compiling the {_name(key)} copy kernel failed "
                           f"({error}); copies of that kind use numpy's copy")
            finally:
                with self.idle:
                    self.outstanding -= 1
                    self.idle.notify_all()
        if worker is not None:
            worker.close()

    def _build(self, key: Key) -> None:
        if cache_directory() is None:
            _warn_no_cache()
            _publish(key, _load(key, compile=True))
            return
        with _FileLock(key):        # another process compiling it: wait here, then load
            # (a marker whose entry does not load here, e.g. from another CPU, is redone)
            run = _load(key, compile=False) if _on_disk(key) else None
            if run is None:
                if self.worker is None or self.worker.process.poll() is not None:
                    self.worker = _Worker()
                self.worker.build(key)
                run = _load(key, compile=False)
                if run is None:
                    raise RuntimeError("compiled, but its cache entry does not load here")
        _publish(key, run)


def _warn_no_cache() -> None:
    global _warned_no_cache
    if not _warned_no_cache:
        _warned_no_cache = True
        warnings.warn("rearrange: no writable cache directory for compiled copy kernels "
                      "(set REARRANGE_CACHE_DIR to one): they are compiled in a background "
                      "thread of each process and not kept", RuntimeWarning, stacklevel=2)


def _get_service() -> _Service:
    global _service
    with _lock:
        if _service is None:
            _service = _Service()
        return _service


def _forget_in_child() -> None:
    """After fork: the parent's builder thread and worker are not this process's."""
    global _service, _lock, _pending
    for fd in list(_lock_fds):
        try:
            os.close(fd)
        except OSError:
            pass
    _lock_fds.clear()
    _service = None
    _lock = threading.Lock()
    _pending = {key: state for key, state in _pending.items() if state != "compiling"}
    forget_cache_directory()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
