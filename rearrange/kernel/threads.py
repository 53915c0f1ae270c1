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

A worker that has just run a copy spins for the next one for :func:`spin_seconds`
(200 us; ``REARRANGE_SPIN_US``, 0 turns it off), in native code with the GIL released
(:mod:`.mailbox`): a copy made meanwhile is posted to it and starts on both threads at
once, where a sleeping worker takes 20-35 us to wake. Only a worker that was posted to
and has taken the post is waited for, and only until it is done with the job; a post
not taken yet is taken back. A job whose helpers all spin is one call of the pool's
runner (the posts, the caller's share and the settle: :mod:`.mailbox`'s OP_FORK_JOIN).

A destination to populate first (see :mod:`rearrange.kernel`) is cut into slices that
the copy's threads claim from the same control block before their chunks: its pages
then fault in parallel.

Several copies (a concatenation's parts) run as one job (:func:`execute_parts`): one
control block each, linked into a chain, which every thread of the job walks in order,
taking chunks of each copy as above; a thread done with one copy goes on to the next
without a join, and the job has one fork-join in all (a copy each had one).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time

import numpy as np

from ..errors import ArgumentTypeError, RearrangeError
from .abi import (C_BOXES, C_CHUNK, C_DONE, C_DST, C_HELPERS, C_ITER, C_MADVISE, C_NCHUNK,
                  C_NEXT, C_NRANGE, C_NWORK, C_PARAMS, C_POP_END, C_POP_N, C_POP_START,
                  C_POP_STEP, C_POSTED, C_POSTS, C_RUNNER, C_SCRATCH, C_SETTLED, C_SRC,
                  C_TICKET, C_UNIT, MAILBOX_WORDS, OP_FORK, OP_FORK_JOIN, OP_RUN_SERVE,
                  OP_SERVE, OP_SETTLE, OP_STOP, OP_TICKS, P_LEN, P_SCRATCH, POSTS_MAX,
                  RANGES_MAX, ControlBlock)
from .pages import PAGE, madvise_address

__all__ = ["set_num_threads", "get_num_threads", "execute", "execute_units", "execute_parts",
           "spin_seconds",
           "set_spin_seconds", "find_pool_runner_with", "CHUNKS_PER_THREAD", "SPIN_SECONDS"]

CHUNKS_PER_THREAD = 8            # threads take work in chunks of 1/(8 * threads) each
# After each job a worker spins this long for the next (see _Pool), unless
# REARRANGE_SPIN_US says otherwise.
SPIN_SECONDS = 200e-6
SPIN_MAX_SECONDS = 1.0           # the longest spin set_spin_seconds / the variable take
# Pauses per round of a caller's wait for a worker to finish with its post.
SETTLE_SPINS = 1 << 14
POPULATE_STEP_BYTES = 2 << 20    # destinations are populated in slices of whole huge pages


def _from_environment(name: str, convert, valid, expected: str):
    """The environment variable ``name`` converted, if it is set and valid; else None
    (a value that is not valid is ignored with a warning saying what was expected)."""
    env = os.environ.get(name, "").strip()
    if not env:
        return None
    try:
        value = convert(env)
    except ValueError:
        value = None
    if value is not None and valid(value):
        return value
    import warnings
    warnings.warn(f"{name}={env!r} is not {expected}; ignored", RuntimeWarning,
                  stacklevel=3)
    return None


def _default_threads() -> int:
    n = _from_environment("REARRANGE_NUM_THREADS", int, lambda n: n >= 1,
                          "a positive integer")
    if n is not None:
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_num_threads = _default_threads()


def _default_spin() -> float:
    us = _from_environment("REARRANGE_SPIN_US", float,
                           lambda us: 0 <= us <= SPIN_MAX_SECONDS * 1e6,
                           f"a number of microseconds from 0 to {SPIN_MAX_SECONDS * 1e6:.0f}")
    return SPIN_SECONDS if us is None else us * 1e-6


def spin_seconds() -> float:
    """How long a worker spins for its next job after each one: set_spin_seconds, else
    ``REARRANGE_SPIN_US`` (microseconds; 0: workers sleep at once), else
    :data:`SPIN_SECONDS`."""
    return _spin


def set_spin_seconds(seconds: float) -> None:
    """Set how long a worker spins for its next job after each one (0: it sleeps at
    once; at most a second). A worker spinning now keeps the spin it started with."""
    global _spin
    expected = f"expected seconds from 0 to {SPIN_MAX_SECONDS:g}, got {seconds!r}"
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.integer,
                                                                np.floating)):
        raise ArgumentTypeError(f"set_spin_seconds: {expected}")
    if not 0 <= seconds <= SPIN_MAX_SECONDS:
        raise RearrangeError(f"set_spin_seconds: {expected}")
    _spin = float(seconds)


_spin = _default_spin()


def set_num_threads(n: int) -> None:
    """Set the number of threads copies may use (at most; small copies use fewer)."""
    global _num_threads
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ArgumentTypeError(f"set_num_threads: expected a positive integer, got {n!r}")
    if n < 1:
        raise RearrangeError(f"set_num_threads: expected a positive integer, got {n!r}")
    _num_threads = int(n)


def get_num_threads() -> int:
    """Threads copies may use: set_num_threads, else REARRANGE_NUM_THREADS, else the CPUs
    this process may run on."""
    return _num_threads


# Returns the pool's runner once it is usable, else None (and sees to its compile):
# given by the package (builds' runner_for), which this module does not import.
_pool_runner = None


def find_pool_runner_with(lookup) -> None:
    """Where the pool finds its runner (:mod:`.mailbox`): ``lookup()`` returns it once
    it is usable, else None. Until then, and without a lookup, workers only sleep."""
    global _pool_runner
    _pool_runner = lookup


def execute(low: tuple, runner, daddr: int, saddr: int, populate_bytes: int,
            chunks: int | None = None) -> None:
    """Run a lowered copy (``low``: what :func:`.lowering.lower` returns) with the
    compiled ``runner`` of its family and unit size on this thread, joined by pool
    workers if it has several; ``populate_bytes`` of the destination are populated first
    (0: none); ``chunks``: how many chunks the work units are cut into (None:
    CHUNKS_PER_THREAD a thread).

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
        _plan_populate(ctrl, daddr, populate_bytes, threads)
    args = (ctrl, daddr, saddr, ita, pa, 0)
    if threads > 1:
        _cut_into_chunks(ctrl, nwork, quantum, threads,
                         threads * CHUNKS_PER_THREAD if chunks is None else chunks)
        _fork_join(_Job(((runner, args),), (itv, pv, scratch)), threads)
    else:
        ctrl[C_CHUNK], ctrl[C_NCHUNK], ctrl[C_NRANGE] = nwork, 1, 1
        runner(*args)


# The parameter vector of a job that needs no scratch memory (P_SCRATCH 0), for runners
# that read their own parameters at ``itp`` (the reductions', the row assembly's): one for
# every such job, never written.
_NO_SCRATCH = np.zeros(P_LEN, np.int64)
_NO_SCRATCH.flags.writeable = False
_NO_SCRATCH_ADDRESS = _NO_SCRATCH.__array_interface__["data"][0]


def execute_units(runner, units: int, threads: int, parameters, parameters_address: int,
                  daddr: int, saddr: int = 0, populate_bytes: int = 0, pp=None,
                  pp_address: int | None = None, chunks: int | None = None) -> None:
    """Run ``units`` work units of a compiled runner that is not a copy (the reductions',
    the row assembly's, the batched product's) on at most ``threads`` threads, chunks of
    one unit at least (``chunks`` of them; None: as :func:`execute` cuts a copy), as
    :func:`execute` runs a copy: ``parameters`` (kept alive for the workers) at
    ``parameters_address`` are the runner's ``itp``; ``pp`` the parameter vector
    :func:`execute` reads (its scratch size; None: no scratch) and ``pp_address`` what
    the runner gets as ``pp`` (None: ``pp``'s address)."""
    if pp is None:
        pp = _NO_SCRATCH
        if pp_address is None:
            pp_address = _NO_SCRATCH_ADDRESS
    elif pp_address is None:
        pp_address = ctypes.addressof(pp) if isinstance(pp, ctypes.Array) else \
            pp.__array_interface__["data"][0]
    execute((units, max(1, min(threads, units)), parameters, pp, None, parameters_address,
             pp_address, 1), runner, daddr, saddr, populate_bytes, chunks)


def execute_parts(parts, meanwhile=None) -> None:
    """Run several lowered copies as one job, in one fork-join of the pool: each part is
    ``(low, runner, daddr, saddr, populate_bytes, nbytes)``, the arguments of
    :func:`execute` and the bytes the part moves. The job has the most threads any
    part was lowered for. Every thread of it runs the parts in turn (the caller's thread
    and the workers: each part's chunks are claimed from its own control block, linked
    to the next by C_NEXT), so a thread done with its share of one part goes on to the
    next without waiting, and the job's only join is at its end. Its work is split by
    bytes: the job's ``threads * CHUNKS_PER_THREAD`` chunks per part (parts of one size:
    each cut as a copy of its own is) are dealt to the parts in proportion to their
    bytes, at least one each, so that a part of any size is shared by whichever threads
    reach it, and the last chunks, which the threads may wait on, stay short (one job
    against a copy each, two 8 MiB parts, quiet machine: 0.99-1.01x with as many
    chunks in all as one copy has, 1.01-1.03x with this many). ``meanwhile()`` (if given) runs on the calling thread
    once the workers have the job, before its own share: copies the kernel does not
    take."""
    threads = max(part[0][1] for part in parts)
    total = sum(part[5] for part in parts)
    chunks = threads * CHUNKS_PER_THREAD * len(parts)
    # Each part its own scratch memory (a slot per thread): threads run parts at once.
    scratch_bytes = [-(-threads * int(part[0][3][P_SCRATCH]) // _SCRATCH_ALIGN) *
                     _SCRATCH_ALIGN for part in parts]
    scratch = _scratch(sum(scratch_bytes)) if any(scratch_bytes) else None
    scratch_at = 0 if scratch is None else scratch.__array_interface__["data"][0]
    steps = []
    keep: list = [scratch]
    for (low, runner, daddr, saddr, populate_bytes, nbytes), slot in zip(parts,
                                                                        scratch_bytes):
        nwork, _, itv, pv, _, ita, pa, quantum = low
        ctrl = ControlBlock()
        ctrl[C_NWORK] = nwork
        if slot:
            ctrl[C_SCRATCH] = scratch_at
            scratch_at += slot
        if populate_bytes:
            _plan_populate(ctrl, daddr, populate_bytes, threads)
        if threads > 1:
            share = max(1, round(chunks * nbytes / total)) if total > 0 else chunks
            _cut_into_chunks(ctrl, nwork, quantum, threads, share)
        else:
            ctrl[C_CHUNK], ctrl[C_NCHUNK], ctrl[C_NRANGE] = nwork, 1, 1
        if steps:       # the previous part's threads go on to this one
            steps[-1][1][0][C_NEXT] = ctypes.addressof(ctrl)
        steps.append((runner, (ctrl, daddr, saddr, ita, pa, 0)))
        keep.append((itv, pv))
    if threads > 1:
        _fork_join(_Job(steps, keep), threads, meanwhile)
    else:
        if meanwhile is not None:
            meanwhile()
        for runner, args in steps:
            runner(*args)


def _cut_into_chunks(ctrl, nwork: int, quantum: int, threads: int, chunks: int) -> None:
    """A copy's ``nwork`` work units as about ``chunks`` chunks (each a multiple of
    ``quantum`` units), in one range of chunks per thread (ctrl's C_CHUNK, C_NCHUNK,
    C_NRANGE)."""
    chunk = -(-nwork // min(nwork, chunks))
    chunk = -(-chunk // quantum) * quantum
    ctrl[C_CHUNK], ctrl[C_NCHUNK] = chunk, -(-nwork // chunk)
    ctrl[C_NRANGE] = min(threads, RANGES_MAX, ctrl[C_NCHUNK])


def _fork_join(job: "_Job", threads: int, meanwhile=None) -> None:
    """Hand ``job`` to ``threads - 1`` pool workers, run its copies on this thread too
    (after ``meanwhile()``, if given), and return once every work unit is done: posts
    the workers have not taken are taken back, those taken waited for, and chunks of
    workers from the queue waited for only if they are not done yet. Without
    ``meanwhile``, a job whose helpers all spin runs whole in the pool's native
    fork-join (:meth:`_Pool.submit` with ``join``)."""
    pool = _the_pool()
    posts = pool.submit(job, threads - 1, join=meanwhile is None)
    if posts is None:           # the pool's native fork-join ran the whole job
        return
    if meanwhile is not None:
        meanwhile()
    for runner, args in job.steps:
        runner(*args)
    if posts:
        pool.settle(posts, job.steps[0][1][0])
    if not job.done():
        _wait(job)


def _plan_populate(ctrl, daddr: int, populate_bytes: int, threads: int) -> None:
    """The destination's whole pages in [daddr, daddr + populate_bytes) as slices the
    copy's threads claim (ctrl's C_POP_* fields) and populate before their chunks."""
    start = -(-daddr // PAGE) * PAGE
    end = (daddr + populate_bytes) // PAGE * PAGE
    if end > start:
        step = max(POPULATE_STEP_BYTES, -(-(end - start) // (threads * 4)))
        step = -(-step // POPULATE_STEP_BYTES) * POPULATE_STEP_BYTES
        ctrl[C_POP_N] = -(-(end - start) // step)
        ctrl[C_POP_START], ctrl[C_POP_END], ctrl[C_POP_STEP] = start, end, step
        ctrl[C_MADVISE] = madvise_address()


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
    is raised after it): a worker must not write the destination after the copy returns.
    Only for a job that was queued: chunks still undone once the posts are settled are
    those of workers from the queue, which each started (a chunk is claimed as it is
    begun), so the wait is short; it yields the CPU between looks (a worker may have
    been descheduled)."""
    interrupted = None
    while not job.done():
        try:
            _yield()
        except BaseException as error:  # noqa: BLE001 - re-raised below
            interrupted = error
    if interrupted is not None:
        raise interrupted


class _Job:
    """One multithreaded job as the pool workers see it: its copies (``steps``: each a
    runner and its arguments, the control block first; the blocks are linked by
    C_NEXT), which every thread runs in turn. It holds what the runners read (the
    control blocks in the arguments, the iteration spaces, parameters and scratch
    memory in ``keep``), so that a worker that starts after the job has returned still
    reads valid memory."""

    __slots__ = ("steps", "keep", "native")

    def __init__(self, steps, keep):
        self.steps = steps
        self.keep = keep
        # Its control blocks hold what a worker's native side calls (C_RUNNER ..
        # C_PARAMS, filled by the pool's submit): a worker from the queue then runs it
        # and goes on to spin in one native call, without the GIL between the two.
        self.native = False

    def done(self) -> bool:
        """Every work unit of every copy done (and published by its thread)."""
        for _, args in self.steps:
            ctrl = args[0]
            if ctrl[C_DONE] != ctrl[C_NWORK]:
                return False
        return True

    def work(self) -> None:
        """Run the job's copies in turn on this thread (through ctypes, from Python)."""
        for runner, args in self.steps:
            runner(*args)


class _Pool:
    """Worker threads (Python threads that call the compiled runner with the GIL
    released), started as copies ask for them: the largest thread count asked for minus
    one, at most one fewer than the CPUs. After fork the child starts its own.

    A worker sleeps on the pool's queue until a job comes, runs it, and then spins for
    its next one in native code (:mod:`.mailbox`) for :func:`spin_seconds`, where a copy
    hands it a job by posting to its mailbox instead of the queue: it starts within a
    microsecond instead of the 20-35 us an operating-system wake-up took. Spinning needs
    the pool's runner (compiled like the copies' runners; until it is ready, where it
    cannot be built, and where the CPU has no cycle counter, workers only sleep)."""

    def __init__(self) -> None:
        import queue

        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.workers: list[threading.Thread] = []
        self.lock = threading.Lock()
        # One mailbox per worker (MAILBOX_WORDS int64 each, 64-byte aligned): all ASLEEP.
        slots = max(1, _MAX_HELPERS)
        self.boxes = (ctypes.c_int64 * (MAILBOX_WORDS * slots + 8))()
        self.first = (-ctypes.addressof(self.boxes) % 64) // 8     # first word of box 0
        self.box_pointers = [self._box(w) for w in range(slots)]
        self.run_pool = None            # the pool's runner, once usable
        self.no_runner = False          # its load or compile failed: workers only sleep
        self.addresses: dict[int, tuple] = {}   # id(runner) -> (runner, address, unit)
        self.spinning = [False] * slots     # worker w is in its spin
        self.stopping = False               # set at exit: no more spins
        self.tick_rate = -1.0           # cycle-counter ticks per second (-1: not known)
        # Jobs run whole by one native fork-join (every helper spinning): what tests
        # read to see which path a job took.
        self.native_joins = 0

    def submit(self, job: _Job, helpers: int, join: bool = False) -> list | None:
        """Hand ``job`` to ``helpers`` workers: posted to those spinning, queued for the
        rest. Returns the posts, which :meth:`settle` must take back or see done before
        the job's memory may go.

        With ``join``, when every helper is spinning, the job is run whole instead, in
        one call of the pool's runner (:mod:`.mailbox`'s OP_FORK_JOIN: the posts, this
        thread's share, the posts settled), and None is returned; else (a helper
        asleep, or no pool runner) the job is handed out as without ``join``, nothing
        of it run yet."""
        helpers = min(helpers, _MAX_HELPERS)
        if len(self.workers) < helpers:
            with self.lock:
                while len(self.workers) < helpers:
                    t = threading.Thread(target=self._serve, args=(len(self.workers),),
                                         name="rearrange-copy", daemon=True)
                    t.start()
                    self.workers.append(t)
        run = self._spinning_runner()
        if self.run_pool is not None:
            address = self._address
            for runner, args in job.steps:      # each copy as the native side calls it
                step = args[0]
                step[C_RUNNER], step[C_UNIT] = address(runner)
                step[C_DST], step[C_SRC], step[C_ITER], step[C_PARAMS] = args[1:5]
            job.native = True
        if run is None:
            for _ in range(helpers):
                self.jobs.put(job)
            return []
        ctrl = job.steps[0][1][0]               # the first copy's: the posts'
        ctrl[C_HELPERS] = wanted = min(helpers, POSTS_MAX)
        ctrl[C_BOXES] = len(self.workers)
        if join and wanted == helpers:
            run(self.box_pointers[0], OP_FORK_JOIN, SETTLE_SPINS, ctrl, None, 0)
            if ctrl[C_POSTS] == wanted:         # forked, run and joined
                self.native_joins += 1
                if ctrl[C_SETTLED] < wanted:    # a worker still on its post: settle on
                    self.settle(self._posts(ctrl, ctrl[C_SETTLED]), ctrl)
                return None
        else:
            run(self.box_pointers[0], OP_FORK, 0, ctrl, None, 0)
        posts = self._posts(ctrl, 0)
        for _ in range(helpers - len(posts)):
            self.jobs.put(job)
        return posts

    def _posts(self, ctrl, first: int) -> list:
        """The posts the native fork made (ctrl's C_POSTED pairs) from the ``first``-th
        on, as (mailbox, word) for :meth:`settle`."""
        boxes = self.box_pointers
        return [(boxes[ctrl[C_POSTED + 2 * i]], ctrl[C_POSTED + 2 * i + 1])
                for i in range(first, ctrl[C_POSTS])]

    def settle(self, posts: list, ctrl) -> None:
        """Take back each post of the copy of control block ``ctrl`` that its worker has
        not taken; wait until the others' workers are done with theirs (yielding the CPU
        between rounds of spins: a worker that took a post may have been descheduled)."""
        run = self.run_pool
        for box, word in posts:
            while True:
                ctrl[C_TICKET] = word
                run(box, OP_SETTLE, SETTLE_SPINS, ctrl, None, 0)
                if ctrl[C_TICKET]:
                    break
                _yield()

    def _address(self, runner) -> tuple[int, int]:
        """A runner's address and unit size (its token's width)."""
        known = self.addresses.get(id(runner))
        if known is None or known[0] is not runner:
            known = self.addresses[id(runner)] = (
                runner, ctypes.cast(runner, ctypes.c_void_p).value,
                ctypes.sizeof(runner.argtypes[-1]))
        return known[1], known[2]

    def _box(self, worker: int):
        address = ctypes.addressof(self.boxes) + 8 * (self.first + worker * MAILBOX_WORDS)
        return ctypes.cast(address, ctypes.POINTER(ctypes.c_int64))

    def _spinning_runner(self):
        """The pool's runner if workers may spin (it is usable and the spin known and
        positive), else None. Loads or asks for it (builds decides when it compiles)."""
        if self.run_pool is None and _pool_runner is not None and not self.no_runner:
            try:
                self.run_pool = _pool_runner()
            except Exception:  # noqa: BLE001 - spinning only saves time: copies go on
                self.no_runner = True
        return self.run_pool if self.tick_rate > 0 and _spin > 0 else None

    def _serve(self, worker: int) -> None:
        jobs = self.jobs
        box = self.box_pointers[worker]
        while True:
            job = jobs.get()
            run = self.run_pool
            if run is None or not job.native or self.tick_rate < 0:
                job.work()
                if run is None:
                    continue
                if _spin > 0 and self.tick_rate < 0:
                    self.tick_rate = _tick_rate(run)
                job = None
            ticks = int(_spin * self.tick_rate)
            self.spinning[worker] = True        # before the check: see stop_spinning
            try:
                if job is not None:     # the job, then the spin: one native call
                    run(box, OP_RUN_SERVE, ticks if not self.stopping else 0,
                        job.steps[0][1][0], None, 0)
                elif ticks > 0 and not self.stopping:
                    run(box, OP_SERVE, ticks, None, None, 0)
            finally:
                self.spinning[worker] = False
            job = None          # (the job's memory is the caller's to free once done)

    def stop_spinning(self, timeout: float = 0.05) -> None:
        """End every worker's spin and wait (at most ``timeout`` seconds) until none is
        in compiled code: at exit, before the interpreter tears numba's code down."""
        self.stopping = True
        run = self.run_pool
        if run is None:
            return
        deadline = time.monotonic() + timeout
        while any(self.spinning) and time.monotonic() < deadline:
            for box in self.box_pointers:
                run(box, OP_STOP, 0, None, None, 0)
            time.sleep(0.0002)


def _tick_rate(run) -> float:
    """The cycle counter's ticks per second, measured against the clock over 2 ms; 0
    where it does not count (the spin is then off)."""
    block = ControlBlock()
    run(None, OP_TICKS, 0, block, None, 0)
    t0, c0 = time.perf_counter(), block[C_TICKET]
    time.sleep(0.002)
    run(None, OP_TICKS, 0, block, None, 0)
    t1, c1 = time.perf_counter(), block[C_TICKET]
    if c1 <= c0 or t1 <= t0:
        return 0.0
    return (c1 - c0) / (t1 - t0)


def _yield() -> None:
    sched_yield = getattr(os, "sched_yield", None)
    if sched_yield is not None:
        sched_yield()
    else:
        time.sleep(0)


# More workers than CPUs would only take turns.
_MAX_HELPERS = max(1, os.cpu_count() or 1) - 1
# The pool is ``_pool`` in this module's namespace once made: by the first multithreaded
# copy (or a look-up of ``threads._pool``), not at import, so that a process that never
# splits a copy never builds one. A forked child makes its own.
_pool_lock = threading.Lock()


def _the_pool() -> _Pool:
    """The process's pool, made at the first ask."""
    pool = globals().get("_pool")
    if pool is None:
        with _pool_lock:            # one pool, whichever threads copy first
            pool = globals().get("_pool")
            if pool is None:
                pool = globals()["_pool"] = _Pool()
    return pool


def __getattr__(name: str):
    if name == "_pool":          # (tests reach for the pool as threads._pool)
        return _the_pool()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@atexit.register
def _stop_spinning_at_exit() -> None:
    pool = globals().get("_pool")
    if pool is not None:
        pool.stop_spinning()


def _reset_pool_in_child() -> None:
    global _pool_lock
    _pool_lock = threading.Lock()
    globals().pop("_pool", None)    # the parent's workers are not the child's


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pool_in_child)
