"""When and where runners are compiled, so that no copy waits for the compiler.

A copy needs the runner of its plan's panel family (:data:`.loops.FAMILIES`) for its unit
size. :func:`runner_for` returns it when it is usable now, else None — and the caller then
copies with numpy (or torch) at once. What "usable now" means is the *mode*
(``REARRANGE_JIT``, :func:`set_jit_mode`):

* ``background`` (default): a runner compiled in this process, or compiled on this
  machine before (its ready marker is in the cache directory: it loads from the disk
  cache, ~10 ms once numba is imported), is used; any other is compiled *out of the
  caller's way*, in a worker process (``python -m rearrange.kernel.worker``), and used by
  the first copy after it is ready. The caller's thread only notes the runner as asked
  for and starts the service's thread, which looks at the disk cache and loads or
  starts a worker :data:`START_DELAY_SECONDS` later (the first time: numba's import
  would otherwise compete with the caller's first copy and a short script's exit).
  A separate process rather than a thread: numba's compiler is Python and would hold
  this process's GIL for seconds (measured in docs/copy.md). Without a writable cache
  directory the worker could not hand its work back, so the compile runs in a thread of
  this process instead (one warning says so).
* ``eager``: compile in the call that needs the runner (the behaviour before background
  compilation; benchmarks use it).
* ``off``: never compile nor run a compiled runner; copies use numpy's (or torch's).

Compile once per machine: each runner has a lock file beside the cache; whoever compiles
it holds the lock, writes the runner to numba's cache, then a ready marker. A process that
finds the lock taken waits for it in its background thread (the calls go on with numpy),
then loads what the other compiled. Markers name the kernel sources' stamp
(:func:`.jit.source_stamp`); they are hints only, numba's own cache lookup (which also
checks the CPU) decides whether a runner loads or needs compiling.

Fork: a child forked while a compile runs forgets that compile (its parent's thread and
worker are not its own), closes the inherited lock descriptors (a flock is shared with
the parent's open file otherwise) and asks again on its first copy. Exit: each runner
is compiled by a worker process of its own, which holds the runner's lock (inherited
from this process) until its entry and marker are written. A process that exits while
its worker compiles does not wait: the worker finishes that one runner (seconds; the
next process finds it on disk) and exits, and the OS reaps it. Each cache file is written
under a temporary name and renamed (:mod:`.jit`); a marker is written the same way after
the entry: nothing half-written is ever read.

A damaged entry (:mod:`.jit` checks each before loading it) is discarded there and, here,
simply not on disk: compiled again as the mode says. A cache directory that cannot be
written (full, or read-only underneath) costs speed, never a call: markers and locks are
best-effort, and once a save has failed (:func:`.jit.cache_writable`) runners are compiled
in memory — in eager mode in the call, in background mode in a thread of this process
(a worker's work could not be handed back).
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .jit import (UNIT_DTYPES, KernelUnavailable, cache_directory, cache_warning,
                  cache_writable, prepare, source_stamp, unavailable)
from .modes import MODES, get_jit_mode, set_jit_mode

if TYPE_CHECKING:
    import subprocess

__all__ = ["MODES", "set_jit_mode", "get_jit_mode", "runner_for", "status", "describe",
           "wait", "build_here", "build_everything", "marker_path", "lock_path", "POOL_KEY"]


Key = tuple[str, int]          # (panel family, unit bytes)


_lock = threading.Lock()
_ready: dict[Key, Any] = {}          # runners usable in this process
_pending: dict[Key, str] = {}        # asked for, not ready: "compiling" or "failed: ..."
_service: "_Service | None" = None
_lock_fds: set[int] = set()          # lock files this process holds open (see fork)
# Runners this process compiled, itself or through its worker (not loads): a diagnostic.
compiles_started = 0


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


def _some_marker(key: Key) -> bool:
    """Is a ready marker of ``key``'s runner in the cache, for any sources? (A listing:
    no hashing of the sources, unlike :func:`_on_disk`.)"""
    directory = cache_directory()
    if directory is None:
        return False
    prefix = f"{_name(key)}-"
    try:
        return any(name.startswith(prefix) and name.endswith(".ready")
                   for name in os.listdir(directory))
    except OSError:
        return False


def _on_disk(key: Key) -> bool:
    marker = marker_path(key)
    return marker is not None and marker.exists()


def write_marker(key: Key) -> None:
    """Say that ``key``'s runner is in the disk cache (after numba wrote it). Best-effort:
    a marker is a hint, and a directory that cannot take it (full) costs no call."""
    marker = marker_path(key)
    if marker is None or not cache_writable():
        return
    temporary = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(f"{sys.executable}\n")
        os.replace(temporary, marker)
    except OSError:
        try:
            temporary.unlink()
        except OSError:
            pass


class _FileLock:
    """An exclusive flock on a runner's lock file (no-op where flock is missing)."""

    def __init__(self, key: Key) -> None:
        self.path = lock_path(key)
        self.fd: int | None = None

    def __enter__(self) -> "_FileLock":
        self.acquire()
        return self

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock (waiting without the GIL); False: ``blocking`` is False and
        another process holds it."""
        if self.path is None:
            return True
        try:
            import fcntl
        except ImportError:          # not POSIX: no cross-process lock, at worst two compiles
            return True
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:              # a directory that takes no new file: unlocked, as above
            return True
        _lock_fds.add(self.fd)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            self.release()
            return False
        except BaseException:
            self.release()
            raise
        return True

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        if self.fd is not None:
            _lock_fds.discard(self.fd)
            os.close(self.fd)                        # releases the flock
            self.fd = None


def _load(key: Key, compile: bool) -> Any:
    from . import gemm, rowjoin, rowmax, rowsums
    from .loops import runner        # (registers the loops: only where runners load)

    if key[0] == rowjoin.FAMILY:     # pack's and repeat's row assembly
        return rowjoin.runner(key[1], key[0], compile=compile)
    if key[0] == gemm.FAMILY:        # einsum's batched products
        return gemm.runner(key[1], key[0], compile=compile)
    if key[0] == rowsums.FAMILY:     # the reductions' runners, same machinery
        return rowsums.runner(key[1], key[0], compile=compile)
    if key[0] in (rowmax.FAMILY, rowmax.COLUMN_SUMS, rowmax.WINDOWS, rowmax.WINDOW_SUMS):
        return rowmax.runner(key[1], key[0], compile=compile)
    return runner(key[1], key[0], compile=compile)


def runner_for(family: str, unit: int) -> Any:
    """The compiled runner for ``family`` and ``unit``-byte units if a copy may use it
    now, else None (the caller copies another way); see the module's docstring."""
    mode = get_jit_mode()
    if mode == "off":               # numpy's (or torch's) copy, even if a runner is loaded
        return None
    key = (family, unit)
    run = _ready.get(key)
    if run is not None:
        return run
    if unavailable() is not None:   # numba cannot be used in this process
        return None
    if mode == "eager":
        if _pending.get(key, "").startswith("failed"):
            return None
        try:
            return build_here(key)
        except Exception as error:  # noqa: BLE001 — never raised in a copy: numpy's copy
            _fail(key, error)
            return None
    # Background: this thread never imports numba nor loads a runner, nor even looks at
    # the disk cache (its directory, the sources' stamp: hashlib's import, file reads).
    # The service's thread does, after a start delay (START_DELAY_SECONDS): one on disk is
    # loaded there (numba's import, ~0.4 s, then ~10 ms a runner); any other is compiled
    # by a worker process. Until then: the array library's copy.
    with _lock:
        if key in _pending:
            return None
        _pending[key] = "queued"
    _get_service().submit(key)
    return None


def _fail(key: Key, error: BaseException) -> None:
    """``key``'s runner could not be loaded or compiled: copies of its kind use the
    array library's copy for the rest of the process (one warning per process, said by
    .jit already when numba itself is the reason)."""
    with _lock:
        _pending[key] = f"failed: {error}"
    if not isinstance(error, KernelUnavailable):
        cache_warning(f"rearrange: compiling the {_name(key)} copy kernel failed "
                      f"({error}); copies of that kind use the array library's copy")


def _publish(key: Key, run: Any) -> None:
    with _lock:
        _ready[key] = run
        _pending.pop(key, None)


def build_here(key: Key, lock: bool = True) -> Any:
    """Load or compile ``key``'s runner now, in this thread, and publish it: eager mode,
    holding its lock (one compile per machine); the worker, whose parent holds it."""
    global compiles_started
    if lock:
        with _FileLock(key):
            return build_here(key, lock=False)
    run = _load(key, compile=False)
    if run is None:
        compiles_started += 1
        run = _load(key, compile=True)
    if cache_directory() is not None and not _on_disk(key):
        write_marker(key)           # (not when the entry could not be saved: cache_writable)
    _publish(key, run)
    return run


def build_shared(keys: list[Key]) -> None:
    """Build ``keys`` together with other processes given the same list: each runner is
    compiled by whichever process takes its lock first; the others skip it and, once
    through the list, wait for the ones they skipped (loading them, or compiling one
    whose process died). Several such processes keep every core busy to the end, where
    a fixed share each would leave one idle while another works through the costliest
    runners."""
    skipped = []
    for key in keys:
        lock = _FileLock(key)
        if not lock.acquire(blocking=False):
            skipped.append(key)
            continue
        try:
            build_here(key, lock=False)
        finally:
            lock.release()
    for key in skipped:
        build_here(key)


def status(family: str, unit: int) -> str:
    """Where ``family``'s runner for ``unit``-byte units stands in this process:
    ``"ready"``, ``"on disk"`` (compiled on this machine: loads at first use),
    ``"loading"`` (from the disk cache, in the background), ``"compiling"``,
    ``"failed: ..."`` or ``"not compiled"``."""
    key = (family, unit)
    if key in _ready:
        return "ready"
    pending = _pending.get(key)
    if pending == "queued":         # asked for; the service has not looked at it yet
        return "loading" if _on_disk(key) else "compiling"
    if pending is not None:
        return pending
    return "on disk" if _on_disk(key) else "not compiled"


def describe(family: str, unit: int, fallback: str = "numpy's copy") -> str:
    """What a copy of this family and unit does now, and why (explain's "now" line)."""
    if get_jit_mode() == "off":
        return f"{fallback}: kernels are off (REARRANGE_JIT=off)"
    state = status(family, unit)
    if state == "ready":
        return "the compiled kernel"
    if state.startswith("failed"):
        return f"{fallback}: the kernel {state}"
    why = unavailable()
    if why is not None:
        return f"{fallback}: no kernel in this process ({why})"
    if get_jit_mode() == "eager":
        if state == "on disk":
            return "the kernel, compiled on this machine before (loaded from the disk " \
                   "cache in the first call that needs it)"
        return "the kernel, compiled in the first call that needs it (REARRANGE_JIT=eager)"
    if state == "on disk":
        return f"{fallback} at first; the kernel, compiled on this machine before, is " \
               "loaded from the disk cache in the background and used once loaded"
    if state == "loading":
        return f"{fallback}: kernel loading from the disk cache in the background"
    if state == "compiling":
        return f"{fallback}: kernel compiling in the background"
    return f"{fallback} at first; the kernel is compiled in the background and used " \
           "once it is ready"


def wait(timeout: float | None = None) -> bool:
    """Block until every runner asked for so far is ready (or failed); True if none is
    still compiling. For tests, benchmarks and scripts that want the kernel's speed."""
    service = _service
    if service is None:
        return not any(state in ("queued", "compiling", "loading")
                       for state in _pending.values())
    return service.join(timeout)


# Costliest first (compile CPU seconds on a 2-core EPYC: tiles 3.5-4.5, the uint8
# transpose ~4, the other transposes ~2, rows ~1 each), so that the workers sharing
# them out finish together rather than one waiting on another's last, largest runner.
# Within a family unit sizes alternate between the workers as they go, and each unit's
# runners of the next family tend to land where its loops are already compiled.
_WARMUP_ORDER = ("tiles", "transpose", "rows")
# The pool's runner (.mailbox: spinning workers), one unit size; the smallest to compile.
POOL_KEY: Key = ("pool", 8)


def build_everything(parallel: int = 1, load: bool = True, progress=None) -> list[str]:
    """Compile (or load) every runner for every unit size now: in this process with
    ``parallel == 1``, else shared out among ``parallel`` worker processes as they go
    (:func:`build_shared`) and then loaded here — or, with ``load=False``, only checked
    to be on disk (the command line's warmup, whose process ends there). Returns their
    names, as ``warmup`` reports them. ``progress(name, ready, total)``, if given, is
    called once at the start (name None) and as each runner is ready."""
    import time

    from .gemm import FAMILY as GEMM, FLOAT_TOKENS as GEMM_TOKENS
    from .rowjoin import FAMILY as ROW_JOIN, UNIT as ROW_JOIN_UNIT
    from .rowmax import COLUMN_SUMS, FLOAT_DTYPES, FAMILY as ROW_MAX, WINDOW_SUMS, WINDOWS
    from .rowsums import FAMILY as ROW_SUMS, FLOAT_TOKENS

    # the reductions' runners (.rowsums, .rowmax), named by the floats they read; pack's
    # and repeat's row assembly (.rowjoin), one runner moving bytes; einsum's batched
    # products (.gemm), named by their floats
    keys = [(family, u) for family in _WARMUP_ORDER for u in UNIT_DTYPES] + [POOL_KEY] + \
        [(ROW_SUMS, u) for u in FLOAT_TOKENS] + \
        [(family, u) for family in (ROW_MAX, COLUMN_SUMS, WINDOWS, WINDOW_SUMS)
         for u in FLOAT_DTYPES] + \
        [(ROW_JOIN, ROW_JOIN_UNIT)] + [(GEMM, u) for u in GEMM_TOKENS]
    tokens = {family: UNIT_DTYPES for family, _ in keys} | {
        ROW_SUMS: FLOAT_TOKENS, ROW_MAX: FLOAT_DTYPES, COLUMN_SUMS: FLOAT_DTYPES,
        WINDOWS: FLOAT_DTYPES, WINDOW_SUMS: FLOAT_DTYPES, GEMM: GEMM_TOKENS}
    names = {key: f"{key[0]}[{tokens[key[0]][key[1]].__name__}]" for key in keys}
    done: set[Key] = set()

    def ready(key: Key) -> None:
        if key not in done:
            done.add(key)
            if progress is not None:
                progress(names[key], len(done), len(keys))

    if progress is not None:
        progress(None, 0, len(keys))
    if parallel > 1 and cache_directory() is not None:
        todo = [k for k in keys if k not in _ready and not _on_disk(k)]
        for key in keys:
            if key not in todo:
                ready(key)
        if todo:
            workers = [_spawn_worker(todo, shared=True) for _ in range(parallel)]
            # Each runner is reported as its marker lands (the workers write it last).
            while any(worker.poll() is None for worker in workers):
                for key in todo:
                    if key not in done and _on_disk(key):
                        ready(key)
                time.sleep(0.1)
            for worker in workers:
                _finish_worker(worker)
    for key in keys:
        if load or not _on_disk(key):
            build_here(key)
        ready(key)
    return [names[key] for key in keys]


# --------------------------------------------------------------------------- the service


def _spawn_worker(keys: list[Key], locked_fd: int | None = None,
                  shared: bool = False) -> subprocess.Popen:
    """A worker process compiling ``keys`` into the disk cache (see :mod:`.worker`).
    With ``locked_fd`` (one key): the worker inherits that lock, held for it, so it
    stays held until the worker is done even if this process exits first. ``shared``:
    workers given the same keys share them out as they go (:func:`build_shared`)."""
    import subprocess

    env = dict(os.environ)
    env["REARRANGE_CACHE_DIR"] = cache_directory() or ""
    env["REARRANGE_JIT"] = "eager"
    args = [sys.executable, "-m", "rearrange.kernel.worker"]
    if locked_fd is not None:
        args.append(f"--locked={locked_fd}")
    if shared:
        args.append("--shared")
    args += [f"{family}:{unit}" for family, unit in keys]
    # Run from the package's parent directory: the worker imports this very rearrange.
    # Its own session: a Ctrl-C meant for this process does not cut a compile short
    # (it ends by itself in seconds).
    return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(Path(__file__).resolve().parents[2]),
                            pass_fds=() if locked_fd is None else (locked_fd,),
                            start_new_session=True)


# A worker's exit status when this numba has no disk cache (.numba_private's public
# path): it compiled nothing, and its parent compiles in memory instead.
NO_DISK_CACHE = 3


def _finish_worker(worker: subprocess.Popen) -> None:
    """Wait for a worker (without the GIL) and reap it; raise what it reported."""
    _, errors = worker.communicate()
    if worker.returncode not in (0, NO_DISK_CACHE):
        lines = [line for line in (errors or "").splitlines() if line.strip()]
        raise RuntimeError(lines[-1] if lines else
                           f"the compile worker exited with {worker.returncode}")


# The service's thread starts its work this long after it was started (by a copy that
# asked for a runner; a wait() cuts it short), unless numba is imported already. Until
# then it takes no CPU time nor the GIL, and the copy that started it has long returned.
# A process that ends sooner could not have used the kernel anyway (numba's import alone
# takes ~0.4 s): numba's import would only have competed with it for the GIL and the
# CPU, in its first copy and at its exit (#37). Its first runner that is not on disk
# goes to a worker process as it exits (_Service.hand_over_at_exit): a short script on a
# fresh install still leaves it compiled for the next process.
START_DELAY_SECONDS = 0.2


class _Service:
    """This process's background builder: one thread (which, like a daemon thread, does
    not hold up the exit) taking runners off a queue after its start delay, each loaded
    from the disk cache or compiled by a worker process of its own (or, without a disk
    cache, in the thread itself)."""

    def __init__(self) -> None:
        self.jobs: deque[Key] = deque()     # (under self.lock)
        self.running = False                # the thread is serving (under self.lock)
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.outstanding = 0
        self.hurry = threading.Event()      # set by join(): no start delay any more
        self.at_work = False                # past the start delay (under self.lock)
        self.exit_hook = False              # hand_over_at_exit registered
        self.handed_over = False            # the exit gave a runner to a worker

    def submit(self, key: Key) -> None:
        with self.lock:
            self.outstanding += 1
            self.jobs.append(key)
            if not self.running:
                # A thread of the low-level API: threading.Thread.start() waits until
                # the new thread has run, one scheduling delay of the OS in the caller's
                # copy (0.5-14 ms on a busy 2-core machine, #37). Like a daemon thread,
                # it does not hold up the process's exit.
                self.running = True
                if not self.exit_hook:
                    import atexit

                    atexit.register(self.hand_over_at_exit)
                    self.exit_hook = True
                _thread.start_new_thread(self._serve, ())

    def join(self, timeout: float | None) -> bool:
        self.hurry.set()
        with self.idle:
            return self.idle.wait_for(lambda: self.outstanding == 0, timeout)

    def _serve(self) -> None:
        busy: set[Key] = set()      # runners another process is compiling, seen once
        if "numba" not in sys.modules:      # the first runner of the process
            self.hurry.wait(START_DELAY_SECONDS)
        with self.lock:
            self.at_work = True
        while True:
            with self.lock:
                if not self.jobs:
                    self.running = False
                    return
                key = self.jobs.popleft()
                others = bool(self.jobs)
            try:
                # A runner another process compiles goes to the back of the queue once
                # (this process compiles the next one meanwhile); the second time, or
                # with nothing else to do, the thread waits for it.
                if not self._build(key, wait=key in busy or not others):
                    busy.add(key)
                    with self.lock:
                        self.jobs.append(key)
                    continue
                busy.discard(key)
            except Exception as error:  # noqa: BLE001 — reported, never raised in a copy
                _fail(key, error)
            with self.idle:
                self.outstanding -= 1
                self.idle.notify_all()

    def hand_over_at_exit(self) -> None:
        """At exit, within the start delay: the first runner asked for, if no ready marker
        of it is in the cache (of any sources: a cheap look, no hashing), goes to a worker
        process of its own, which outlives this one (as a worker does whose process exits
        while it compiles), so that a short script on a fresh install still leaves its
        runner compiled for the next process. Nothing when the thread is at work already
        (it compiles or loads its runners itself) or another process compiles it."""
        global compiles_started
        with self.lock:
            if self.at_work or not self.jobs or self.handed_over:
                return
            self.handed_over = True
            key = self.jobs[0]
        if unavailable() is not None or cache_directory() is None or not cache_writable() \
                or _some_marker(key):
            return
        lock = _FileLock(key)
        if not lock.acquire(blocking=False):
            return
        try:
            compiles_started += 1
            _spawn_worker([key], lock.fd)
        finally:
            lock.release()      # the worker holds it now (it shares the open file)

    def _build(self, key: Key, wait: bool) -> bool:
        """Load or compile ``key``'s runner and publish it; False (nothing done) when
        another process holds its lock and ``wait`` is False."""
        global compiles_started
        if unavailable() is not None:
            raise KernelUnavailable(unavailable())
        on_disk = _on_disk(key)
        with _lock:
            _pending[key] = "loading" if on_disk else "compiling"
        if on_disk:
            # No lock needed to load: entries are renamed into place whole (.sealed).
            try:
                run = _load(key, compile=False)
            except KernelUnavailable:
                raise
            except Exception as error:  # noqa: BLE001 — compiled again below
                run = None
                cache_warning(f"rearrange: loading the {_name(key)} copy kernel failed "
                              f"({error!r}); compiling it again in the background")
            if run is not None:
                _publish(key, run)
                return True
            # (damaged, discarded by .jit; or compiled for another CPU): compiled below
        if cache_directory() is None or not cache_writable():
            if cache_directory() is None:
                _warn_no_cache()
            # (an entry already on disk still loads; else compiled in memory, here)
            _publish(key, _load(key, compile=True))
            return True
        lock = _FileLock(key)
        if not lock.acquire(blocking=wait):
            return False
        worker = None
        try:
            # (a marker whose entry does not load here, e.g. from another CPU, is redone)
            run = _load(key, compile=False) if _on_disk(key) else None
            if run is None:
                compiles_started += 1
                with _lock:
                    _pending[key] = "compiling"
                worker = _spawn_worker([key], lock.fd)
        finally:
            lock.release()
        # The worker holds the lock now (it shares the open file) until it is done.
        if worker is not None:
            run = _await_worker(key, worker)
        _publish(key, run)
        return True


def _await_worker(key: Key, worker: Any) -> Any:
    """``key``'s runner once its worker process is done: numba imported meanwhile, the
    worker reaped, the entry it wrote loaded (or, where it did not land, compiled here)."""
    try:
        from . import loops  # noqa: F401 - registers the kernels before numba wraps them

        prepare()           # numba, while it compiles: the load after takes ~5 ms
    except BaseException:
        worker.communicate()        # (it fails the same way: reaped, not read)
        raise
    _finish_worker(worker)
    run = _load(key, compile=False)
    if run is None:
        # The worker's entry did not land (a full disk: it could not save it) or does not
        # load here: compiled in memory, in this thread (.jit warns once if this save fails
        # too, and saves nothing more in this process).
        run = _load(key, compile=True)
    return run


def _warn_no_cache() -> None:
    cache_warning("rearrange: no writable cache directory for compiled copy kernels "
                  "(set REARRANGE_CACHE_DIR to one): they are compiled in a background "
                  "thread of each process and not kept")


def _get_service() -> _Service:
    global _service
    with _lock:
        if _service is None:
            _service = _Service()
        return _service


def _forget_in_child() -> None:
    """After fork: the parent's builder thread and worker are not this process's; what
    they had yet to make ready is asked for again by the child's first copy."""
    global _service, _lock, _pending
    for fd in list(_lock_fds):
        try:
            os.close(fd)
        except OSError:
            pass
    _lock_fds.clear()
    _service = None
    _lock = threading.Lock()
    _pending = {key: state for key, state in _pending.items() if state.startswith("failed")}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
