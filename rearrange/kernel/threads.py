"""Threads: how many a copy may use, and the pool of workers that run it.

Copies from 2 MiB are split over threads. The destination's chunks are cut into one
range per thread. The calling thread starts at once and takes the chunks of the first
range in order; worker threads of this module (Python threads that run the compiled
kernel with the GIL released, started on the first multithreaded copy) each take the
next range as they wake up, and a thread whose range is done takes the chunks left in
the others'. From one copy to the next, each thread then writes the part of the
destination it wrote before, where the caches hold its lines. The copy returns
when every chunk is done; the caller waits only for chunks a worker has started, never
for a worker the OS has not run yet — on a busy machine a multithreaded copy then costs
about what a single-threaded one does (with OpenMP's barrier it could cost many times
more). The count is :func:`set_num_threads`; its default is the environment variable
``REARRANGE_NUM_THREADS``, else the CPUs this process may run on
(``os.sched_getaffinity``, else ``os.cpu_count()``); workers are capped at one fewer than
the CPUs. numba's own thread pool (OpenMP, TBB) is not used, so nothing here sets or
reads ``OMP_*`` / ``NUMBA_NUM_THREADS``; copies from several Python threads at once share
the workers, and a forked child starts its own.

A destination to populate first (see :mod:`rearrange.kernel`) is cut into slices that
the copy's threads claim from the same control block before their chunks: its pages
then fault in parallel.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from .abi import (C_CHUNK, C_DONE, C_MADVISE, C_NCHUNK, C_NRANGE, C_NWORK, C_POP_END,
                  C_POP_N, C_POP_START, C_POP_STEP, C_SCRATCH, P_SCRATCH, RANGES_MAX,
                  ControlBlock)
from .pages import PAGE, madvise_address

__all__ = ["set_num_threads", "get_num_threads", "execute", "CHUNKS_PER_THREAD"]

CHUNKS_PER_THREAD = 8            # threads take work in chunks of 1/(8 * threads) each
POPULATE_STEP_BYTES = 2 << 20    # destinations are populated in slices of whole huge pages


def _default_threads() -> int:
    env = os.environ.get("REARRANGE_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n >= 1:
            return n
        import warnings
        warnings.warn(f"REARRANGE_NUM_THREADS={env!r} is not a positive integer; ignored",
                      RuntimeWarning, stacklevel=2)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_num_threads = _default_threads()


def set_num_threads(n: int) -> None:
    """Set the number of threads copies may use (at most; small copies use fewer)."""
    global _num_threads
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    _num_threads = int(n)


def get_num_threads() -> int:
    """Threads copies may use: set_num_threads, else REARRANGE_NUM_THREADS, else the CPUs
    this process may run on."""
    return _num_threads


def execute(low: tuple, runner, daddr: int, saddr: int, populate_bytes: int) -> None:
    """Run a lowered copy (``low``: what :func:`.lowering.lower` returns) with the
    compiled ``runner`` of its family and unit size on this thread, joined by pool
    workers if it has several; ``populate_bytes`` of the destination are populated first
    (0: none).

    The calling thread works from the start and takes whatever the workers have not
    taken: a worker that the OS wakes late finds nothing left and touches nothing, so a
    busy machine costs the copy at most its single-thread time, not a wait for a
    descheduled thread. It waits only for chunks a worker has started."""
    nwork, threads, itv, pv, _, ita, pa, quantum = low
    ctrl = ControlBlock()
    ctrl[C_NWORK] = nwork
    scratch = None
    if pv[P_SCRATCH]:
        scratch = _scratch(threads * int(pv[P_SCRATCH]))
        ctrl[C_SCRATCH] = scratch.__array_interface__["data"][0]
    if populate_bytes:
        start = -(-daddr // PAGE) * PAGE
        end = (daddr + populate_bytes) // PAGE * PAGE
        if end > start:
            step = max(POPULATE_STEP_BYTES, -(-(end - start) // (threads * 4)))
            step = -(-step // POPULATE_STEP_BYTES) * POPULATE_STEP_BYTES
            ctrl[C_POP_N] = -(-(end - start) // step)
            ctrl[C_POP_START], ctrl[C_POP_END], ctrl[C_POP_STEP] = start, end, step
            ctrl[C_MADVISE] = madvise_address()
    args = (ctrl, daddr, saddr, ita, pa, 0)
    if threads > 1:
        chunk = -(-nwork // min(nwork, threads * CHUNKS_PER_THREAD))
        chunk = -(-chunk // quantum) * quantum
        ctrl[C_CHUNK], ctrl[C_NCHUNK] = chunk, -(-nwork // chunk)
        ctrl[C_NRANGE] = min(threads, RANGES_MAX, ctrl[C_NCHUNK])
        job = _Job(runner, args, (itv, pv, scratch))
        _pool.submit(job, threads - 1)
        runner(*args)
        if ctrl[C_DONE] != nwork:
            _wait(job)
    else:
        ctrl[C_CHUNK], ctrl[C_NCHUNK], ctrl[C_NRANGE] = nwork, 1, 1
        runner(*args)


_SCRATCH_ALIGN = 4096           # scratch memory starts on a page
_scratch_local = threading.local()


def _scratch(nbytes: int) -> np.ndarray:
    """nbytes of scratch memory, page-aligned, for a copy made by this Python thread: the
    thread's own buffer, kept for its next copies (its pages then stay mapped and warm),
    grown when a copy needs more. Copies from different Python threads never share one;
    the copies of one Python thread follow each other."""
    buf = getattr(_scratch_local, "buf", None)
    if buf is None or buf.nbytes < nbytes:
        raw = np.empty(nbytes + _SCRATCH_ALIGN, dtype=np.uint8)
        start = (-raw.__array_interface__["data"][0]) % _SCRATCH_ALIGN
        buf = _scratch_local.buf = raw[start:start + nbytes]
    return buf


def _wait(job: "_Job") -> None:
    """Until the workers' chunks are done, whatever interrupts the wait (KeyboardInterrupt
    is raised after it): a worker must not write the destination after the copy returns."""
    interrupted = None
    while True:
        try:
            job.finished.wait()
            break
        except BaseException as error:  # noqa: BLE001 - re-raised below
            interrupted = error
    if interrupted is not None:
        raise interrupted


class _Job:
    """One multithreaded copy as the pool workers see it. It holds what the runner
    reads (the control block in ``args``, the iteration space and parameters in
    ``keep``), so that a worker that starts after the copy has returned still reads
    valid memory."""

    __slots__ = ("runner", "args", "keep", "finished")

    def __init__(self, runner, args, keep):
        self.runner = runner
        self.args = args
        self.keep = keep
        self.finished = threading.Event()

    def work(self) -> None:
        self.runner(*self.args)
        ctrl = self.args[0]
        if ctrl[C_DONE] == ctrl[C_NWORK]:
            self.finished.set()


class _Pool:
    """Worker threads (Python threads that call the compiled runner with the GIL
    released), started as copies ask for them: the largest thread count asked for minus
    one, at most one fewer than the CPUs. After fork the child starts its own."""

    def __init__(self) -> None:
        import queue
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.workers: list[threading.Thread] = []
        self.lock = threading.Lock()

    def submit(self, job: _Job, helpers: int) -> None:
        helpers = min(helpers, _MAX_HELPERS)
        if len(self.workers) < helpers:
            with self.lock:
                while len(self.workers) < helpers:
                    t = threading.Thread(target=self._serve, name="rearrange-copy",
                                         daemon=True)
                    t.start()
                    self.workers.append(t)
        for _ in range(helpers):
            self.jobs.put(job)

    def _serve(self) -> None:
        jobs = self.jobs
        while True:
            jobs.get().work()


# More workers than CPUs would only take turns.
_MAX_HELPERS = max(1, os.cpu_count() or 1) - 1
_pool = _Pool()


def _reset_pool_in_child() -> None:
    global _pool
    _pool = _Pool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pool_in_child)
