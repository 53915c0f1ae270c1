"""numpy's own copies on several threads: an output cut into slabs along one axis, each
slab written by one thread with a numpy call that releases the GIL (``numpy.copyto``,
``numpy.concatenate`` into ``out=``: numpy drops the GIL in its copy loops for every
dtype but objects).

The output is cut into a few chunks per thread, which the caller's thread and a pool of
worker threads take in turn; a call returns when every chunk is done. One pool for the process, as wide as the widest call
yet, made by the first call that needs it (not at import). Nothing here imports numba:
these are numpy's loops.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

# The fewest bytes of output each thread of a slab copy writes: below 2x this an output
# is written by one thread (numpy's single call). On a quiet 2-core machine
# (bench/packrepeat_ab.py --sweep, docs/performance.md "repeat and pack at two threads")
# two threads lost at 2 MiB of output (repeat 0.74x, pack 0.87x of one thread), were even
# or ahead at 4 MiB (repeat 0.96x, pack 1.36x) and ahead from 8 MiB (1.11x, 1.73x); on a
# loaded one they lose more (a preempted worker holds the caller): 4 MiB a thread keeps
# every size that lost on one thread.
SLAB_MIN_BYTES = 4 << 20
# Chunks per thread: a thread that starts late (or runs slower) leaves its chunks to the
# others.
CHUNKS_PER_THREAD = 4

_pool: list[Any] = []          # [(its workers, the executor)], made by the first slab copy
_pool_lock = threading.Lock()


def slab_threads(nbytes: int, length: int, threads: int) -> int:
    """How many threads write an output of ``nbytes`` cut along an axis of ``length``:
    at most ``threads``, one slab of the axis each, and ``SLAB_MIN_BYTES`` each."""
    return max(1, min(threads, length, nbytes // SLAB_MIN_BYTES))


def slab_bounds(length: int, count: int) -> list[int]:
    """``range(length)`` cut into ``count`` slabs as equal as whole indices allow: the
    ``count + 1`` bounds, from 0 to ``length``."""
    return [length * k // count for k in range(count + 1)]


def in_slabs(work: Callable[[int, int], None], length: int, count: int) -> None:
    """``work(lo, hi)`` over ``range(length)`` cut into ``CHUNKS_PER_THREAD * count``
    chunks (at most ``length``), written by the caller's thread and ``count - 1``
    workers of the pool: each thread takes the next chunk no thread has taken yet. The
    caller waits only for chunks a worker has started, never for a worker the OS has not
    run yet (on a busy machine the caller then writes nearly everything, at one thread's
    speed: a fixed slab per thread would wait for it). Returns when every chunk is done;
    an error in any is raised here, after every chunk has finished."""
    if count <= 1 or length < 2:
        work(0, length)
        return
    chunks = min(length, CHUNKS_PER_THREAD * count)
    bounds = slab_bounds(length, chunks)
    lock = threading.Lock()
    everything_done = threading.Event()
    progress = [0, 0]               # [chunks taken, chunks finished]
    errors: list[BaseException] = []

    def drain() -> None:
        while True:
            with lock:
                k = progress[0]
                if k == chunks:
                    return
                progress[0] = k + 1
            try:
                work(bounds[k], bounds[k + 1])
            except BaseException as error:      # raised in the caller's thread
                errors.append(error)
            finally:
                with lock:
                    progress[1] += 1
                    if progress[1] == chunks:
                        everything_done.set()

    with _pool_lock:
        if not _pool or _pool[0][0] < count - 1:
            from concurrent.futures import ThreadPoolExecutor  # not at import: a pool
            if _pool:   # a narrower pool (work it was given still runs: shutdown
                _pool.pop()[1].shutdown(wait=False)            # cancels nothing)
            _pool.append((count - 1, ThreadPoolExecutor(
                max_workers=count - 1, thread_name_prefix="rearrange-slabs")))
        executor = _pool[0][1]
        for _ in range(count - 1):
            executor.submit(drain)
    drain()
    # every chunk is done before the output is returned (or the error raised): no
    # worker writes into an array its caller has already been handed; a worker that
    # starts later finds no chunk left
    everything_done.wait()
    if errors:
        raise errors[0]
