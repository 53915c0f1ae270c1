"""The pool's native fork-join (:mod:`rearrange.kernel.mailbox`'s OP_FORK_JOIN): with
every helper a job wants spinning, the job is one call of the pool's runner (posts, the
caller's share, the settle); with a helper asleep, or a worker that keeps its post past
the settle's spins, Python's path takes over. Which path ran is the pool's
``native_joins``; every result is checked against numpy's.
"""

from __future__ import annotations

import queue
import threading
import time

import numpy as np
import pytest

import rearrange as ra
from rearrange.kernel import abi
from rearrange.kernel import threads as kthreads

from test_kernel import _mailbox_state, _pool_runner, run_in_threads


def _spinning_pool(monkeypatch, spin: float = 0.5) -> kthreads._Pool:
    """A fresh pool whose workers spin ``spin`` seconds after each job, two threads."""
    pool = kthreads._Pool()
    monkeypatch.setattr(kthreads, "_pool", pool)
    monkeypatch.setattr(kthreads, "_spin", spin)
    monkeypatch.setattr(kthreads, "_num_threads", 2)
    return pool


@pytest.fixture
def spinning_pool(monkeypatch):
    pool = _spinning_pool(monkeypatch)
    yield pool
    pool.stop_spinning()            # not 0.5 s of a core spent after the test


def _until_spinning(pool: kthreads._Pool, call, seconds: float = 10.0) -> None:
    """Call ``call`` (a 2-thread job) until the pool's worker spins on its mailbox."""
    deadline = time.monotonic() + seconds
    call()
    while _mailbox_state(pool) != abi.IDLE:
        assert time.monotonic() < deadline, "the worker never spun"
        time.sleep(0.001)
        if not pool.spinning[0]:
            call()


def _until_asleep(pool: kthreads._Pool, call, seconds: float = 10.0) -> None:
    """Call ``call`` (a 2-thread job) with a 2 ms spin, then wait until the pool's
    worker, its spin run out, sleeps on the queue (the spin stays 2 ms)."""
    kthreads.set_spin_seconds(0.002)
    call()
    deadline = time.monotonic() + seconds
    while _mailbox_state(pool) != abi.ASLEEP:
        assert time.monotonic() < deadline, "the worker never slept"
        time.sleep(0.001)


def _channels(seed: int, dtype=np.float32) -> np.ndarray:
    """An 8 MiB (float32) array whose maximum per channel the reductions' runner takes."""
    return np.random.default_rng(seed).standard_normal((8, 64, 64, 64)).astype(dtype)


def test_a_job_whose_helper_spins_runs_in_one_native_call(spinning_pool) -> None:
    """A runner that is not a copy (execute_units: the maximum per channel) and a copy
    (execute: a transpose), with the worker spinning: each is one native fork-join,
    the worker stays in its spin, and the results are numpy's."""
    pool = spinning_pool
    x = _channels(0)
    square = np.random.default_rng(9).standard_normal((1024, 1024)).astype(np.float32)
    ra.rearrange(square, "a b -> b a", copy=True)   # its runner compiled (eager) beforehand:
    _until_spinning(pool, lambda: ra.reduce(x, "b c h w -> c", "max"))    # not in the spin
    before = pool.native_joins
    for seed in range(1, 4):
        x = _channels(seed)
        x_before = x.copy()
        got = ra.reduce(x, "b c h w -> c", "max")
        assert np.array_equal(got, x.max(axis=(0, 2, 3)))
        assert np.array_equal(x, x_before)
    assert pool.native_joins == before + 3
    got = ra.rearrange(square, "a b -> b a", copy=True)
    assert np.array_equal(got, square.T)
    assert pool.native_joins == before + 4
    assert _mailbox_state(pool) in (abi.IDLE, abi.TAKEN)    # spinning on, not asleep


def test_a_job_of_several_steps_in_one_native_call(spinning_pool, monkeypatch) -> None:
    """A concatenation of several large transposed parts: one job (execute_parts) of a
    step per part, which the native fork-join runs whole, each thread following C_NEXT;
    numpy's concatenation. (pack's row assembly, one step, too.)"""
    pool = spinning_pool
    jobs = []
    fork_join = kthreads._fork_join

    def spy(job, threads, meanwhile=None):
        jobs.append((len(job.steps), meanwhile))
        return fork_join(job, threads, meanwhile)

    monkeypatch.setattr(kthreads, "_fork_join", spy)
    rng = np.random.default_rng(1)
    pattern = "a b, a c, a d -> (b + c + d) a"

    def parts():
        return [rng.standard_normal((1024, 512 + 128 * k)).astype(np.float32)
                for k in range(3)]

    packs = [rng.standard_normal((512, 1024 + 256 * k)).astype(np.float32) for k in range(3)]
    ra.pack(packs, "h *")           # its runner compiled (eager) before the worker spins
    _until_spinning(pool, lambda: ra.rearrange(parts(), pattern))
    before, jobs[:] = pool.native_joins, []
    for _ in range(3):
        xs = parts()
        got = ra.rearrange(xs, pattern)
        assert np.array_equal(got, np.concatenate([x.T for x in xs]))
    assert jobs == [(3, None)] * 3
    assert pool.native_joins == before + 3
    xs = [x + 1 for x in packs]
    packed, shapes = ra.pack(xs, "h *")
    assert np.array_equal(packed, np.concatenate(xs, axis=1))
    assert shapes == [(1024 + 256 * k,) for k in range(3)]
    assert pool.native_joins == before + 4


def test_a_helper_asleep_gets_the_job_from_the_queue(monkeypatch) -> None:
    """Spin 0 (set_spin_seconds): the worker sleeps after every job, so no job is a
    native fork-join; each is queued for it, and the results are numpy's."""
    pool = _spinning_pool(monkeypatch)
    kthreads.set_spin_seconds(0)
    puts = []

    class Counted(queue.SimpleQueue):
        def put(self, job, *args, **kwargs):
            puts.append(job)
            super().put(job, *args, **kwargs)
    pool.jobs = Counted()           # before the first job starts the workers
    for seed in range(3):
        x = _channels(seed)
        assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), x.max(axis=(0, 2, 3)))
        time.sleep(0.002)
    assert pool.native_joins == 0 and len(puts) == 3
    assert _mailbox_state(pool) == abi.ASLEEP


def test_a_worker_whose_spin_ran_out_is_queued_then_posted_again(spinning_pool) -> None:
    """A worker whose (short) spin runs out between jobs sleeps: the next job is
    queued for it (no native fork-join); once it spins again, jobs are native again."""
    pool = spinning_pool
    x = _channels(4)
    expected = x.max(axis=(0, 2, 3))
    _until_spinning(pool, lambda: ra.reduce(x, "b c h w -> c", "max"))
    _until_asleep(pool, lambda: ra.reduce(x, "b c h w -> c", "max"))
    before = pool.native_joins
    assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), expected)
    assert pool.native_joins == before
    kthreads.set_spin_seconds(0.5)
    _until_spinning(pool, lambda: ra.reduce(x, "b c h w -> c", "max"))
    before = pool.native_joins
    assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), expected)
    assert pool.native_joins == before + 1


def test_a_worker_from_the_queue_runs_its_job_and_spins_in_one_native_call(
        spinning_pool) -> None:
    """A worker woken through the queue runs the job and goes on to spin in one call of
    the pool's runner (OP_RUN_SERVE): it needs no GIL between the two, so the caller's
    next job, made while the caller holds the GIL, finds it spinning and is one native
    fork-join."""
    pool = spinning_pool
    x = _channels(6)
    expected = x.max(axis=(0, 2, 3))
    _until_spinning(pool, lambda: ra.reduce(x, "b c h w -> c", "max"))
    real = pool.run_pool
    ops = []
    pool.run_pool = lambda box, op, *args: ops.append(op) or real(box, op, *args)
    _until_asleep(pool, lambda: ra.reduce(x, "b c h w -> c", "max"))
    deadline = time.monotonic() + 10
    kthreads.set_spin_seconds(0.5)
    ops.clear()
    assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), expected)   # queued
    while _mailbox_state(pool) != abi.IDLE:
        assert time.monotonic() < deadline, "the worker never spun"
        time.sleep(0.001)
    assert abi.OP_RUN_SERVE in ops and abi.OP_SERVE not in ops
    before = pool.native_joins
    assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), expected)
    assert pool.native_joins == before + 1


def test_mixed_jobs_in_one_process(spinning_pool) -> None:
    """Reductions of several dtypes and sizes, transposes and packs, back to back with
    the worker spinning: state carried from one native fork-join to the next (tickets,
    control-block words) never mixes two jobs; every result is numpy's."""
    pool = spinning_pool
    rng = np.random.default_rng(7)
    _until_spinning(pool, lambda: ra.reduce(_channels(0), "b c h w -> c", "max"))
    before = pool.native_joins
    for k in range(12):
        dtype = (np.float32, np.float64)[k % 2]
        x = rng.standard_normal((4 + k % 3, 32, 64, 128)).astype(dtype)
        assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), x.max(axis=(0, 2, 3)))
        y = rng.standard_normal((768 + 128 * (k % 3), 1024)).astype(dtype)
        assert np.array_equal(ra.rearrange(y, "a b -> b a", copy=True), y.T)
        parts = [y[:, :512], y[:, 512:].copy()]
        assert np.array_equal(ra.pack(parts, "h *")[0], np.concatenate(parts, axis=1))
    assert pool.native_joins > before


def test_jobs_from_two_python_threads_at_once(spinning_pool) -> None:
    """Two Python threads with 2-thread jobs at once share the one spinning worker: a
    post one of them finds taken falls back to the queue; none hangs, every result is
    numpy's."""
    pool = spinning_pool
    errors = []

    def work(i: int) -> None:
        rng = np.random.default_rng(20 + i)
        try:
            for k in range(15):
                x = rng.standard_normal((4, 32, 64, 128)).astype(np.float32)
                if not np.array_equal(ra.reduce(x, "b c h w -> c", "max"),
                                      x.max(axis=(0, 2, 3))):
                    errors.append((i, k))
                y = rng.standard_normal((1024, 1024)).astype(np.float32)
                if not np.array_equal(ra.rearrange(y, "a b -> b a", copy=True), y.T):
                    errors.append((i, k, "T"))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    _until_spinning(pool, lambda: ra.reduce(_channels(0), "b c h w -> c", "max"))
    done = threading.Event()
    watchdog = threading.Timer(60, lambda: done.is_set() or errors.append("hang"))
    watchdog.start()
    run_in_threads(work)
    done.set()
    watchdog.cancel()
    assert not errors
    assert pool.native_joins > 0


@pytest.fixture
def driven_pool(monkeypatch):
    """A pool of ``helpers`` mailboxes whose workers never start (thread objects not
    run): the test drives the mailboxes. Spinning is on (the pool runner loaded)."""
    def make(helpers: int) -> kthreads._Pool:
        monkeypatch.setattr(kthreads, "_MAX_HELPERS", helpers)
        pool = kthreads._Pool()
        pool.workers = [threading.Thread(target=lambda: None) for _ in range(helpers)]
        pool.run_pool = _pool_runner()
        pool.tick_rate = 1e9
        monkeypatch.setattr(kthreads, "_pool", pool)
        monkeypatch.setattr(kthreads, "_spin", 0.5)
        monkeypatch.setattr(kthreads, "_num_threads", helpers + 1)
        monkeypatch.setattr(kthreads, "_wait", lambda job: pytest.fail("chunks left undone"))
        return pool
    return make


def test_posts_nobody_takes_are_taken_back_natively(driven_pool) -> None:
    """Every mailbox IDLE but no worker behind it: the native fork-join posts to each,
    runs the whole job on the caller and takes every post back (the mailbox IDLE under
    the next ticket); nothing is queued."""
    pool = driven_pool(2)
    for ticket in range(1, 4):
        for worker in range(2):
            pool.box_pointers[worker][abi.M_WORD] = (ticket - 1) * abi.STATE_BITS + abi.IDLE
        x = _channels(ticket)
        assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), x.max(axis=(0, 2, 3)))
        for worker in range(2):
            assert pool.box_pointers[worker][abi.M_WORD] == ticket * abi.STATE_BITS + abi.IDLE
        assert pool.native_joins == ticket and pool.jobs.qsize() == 0


def test_one_helper_asleep_the_other_posted(driven_pool) -> None:
    """Of two helpers, one spinning and one asleep: the fork posts to the first and
    returns without running anything; Python queues the job for the second, runs its
    share and takes the post back. Not a native fork-join; the result is numpy's."""
    pool = driven_pool(2)
    pool.box_pointers[0][abi.M_WORD] = 5 * abi.STATE_BITS + abi.IDLE
    pool.box_pointers[1][abi.M_WORD] = abi.ASLEEP
    x = _channels(5)
    assert np.array_equal(ra.reduce(x, "b c h w -> c", "max"), x.max(axis=(0, 2, 3)))
    assert pool.native_joins == 0 and pool.jobs.qsize() == 1
    assert pool.box_pointers[0][abi.M_WORD] == 6 * abi.STATE_BITS + abi.IDLE
    assert pool.box_pointers[1][abi.M_WORD] == abi.ASLEEP


def test_a_worker_that_keeps_its_post_past_the_spins(driven_pool, monkeypatch) -> None:
    """A worker that has taken its post and is not done when the native settle's spins
    run out (here a stand-in that holds the post 50 ms): the native call reports it,
    and Python's settle (yielding between rounds) waits until the worker lets go; the
    job returns only then."""
    pool = driven_pool(1)
    monkeypatch.setattr(kthreads, "SETTLE_SPINS", 64)
    box = pool.box_pointers[0]
    box[abi.M_WORD] = 3 * abi.STATE_BITS + abi.IDLE
    settles = []
    settle = pool.settle
    pool.settle = lambda posts, ctrl: settles.append(list(posts)) or settle(posts, ctrl)
    released = threading.Event()
    returned = threading.Event()

    def worker() -> None:             # takes the post (the caller's share is ms long)
        while box[abi.M_WORD] % abi.STATE_BITS != abi.POSTED:
            if returned.is_set():     # too late: the caller took its post back
                return
        word = box[abi.M_WORD]
        box[abi.M_WORD] = word - abi.POSTED + abi.TAKEN
        time.sleep(0.05)
        released.set()
        box[abi.M_WORD] = word - abi.POSTED + abi.IDLE

    x = _channels(6)
    for attempt in range(400):  # until the stand-in, a thread the OS may run late, takes it
        released.clear()
        returned.clear()
        settles.clear()
        word = box[abi.M_WORD]
        stand_in = threading.Thread(target=worker)
        stand_in.start()
        got = ra.reduce(x, "b c h w -> c", "max")
        taken = released.is_set()
        returned.set()
        stand_in.join()
        assert np.array_equal(got, x.max(axis=(0, 2, 3)))
        assert pool.native_joins == attempt + 1
        assert box[abi.M_WORD] == word + abi.STATE_BITS       # IDLE, the next ticket
        if taken:
            break
        assert settles == []        # taken back natively: nothing left to Python
    assert taken, "the stand-in never took a post"
    assert len(settles) == 1 and len(settles[0]) == 1 and settles[0][0][0] is box
