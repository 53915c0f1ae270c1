"""The copy kernel: a strided view copied into a fresh C-contiguous array.

When the planner has proved that no strides can express a rearrangement, the executor
allocates a C-contiguous ``dst`` and calls :func:`copy_into` with the strided source view.
The kernel is a package by stage, each module importing only the ones before it:

* :mod:`.plan` — :func:`plan_copy`: pure Python, no numba, a few microseconds. It picks
  a variant (the list is there) and returns a :class:`CopyKernel`, what ``explain()``
  prints. The tuning thresholds live there too.
* :mod:`.lowering` — a plan as the compiled loops' iteration space and parameters, for
  one destination (:mod:`.abi`: the layout of both).
* :mod:`.threads` — :func:`set_num_threads` / :func:`get_num_threads`,
  :func:`set_spin_seconds` / :func:`spin_seconds` and the pool of worker threads that
  runs a lowered copy, or a job of several; :mod:`.mailbox` — the compiled side of the pool (workers that
  spin for their next copy).
* :mod:`.pages` — what the OS says about a destination's pages (``mincore``) and
  ``madvise``.
* :mod:`.jit` — numba, imported when a runner is first loaded or compiled (never at
  import, and in the default mode never in the caller's thread), and the disk cache
  (:mod:`.sealed`: its verified files); :mod:`.numba_private` — every use of numba's
  private API, with a fallback to its public one; :mod:`.intrinsics` — the LLVM
  building blocks; :mod:`.loops` — the compiled loop nests.
* :mod:`.modes` — ``REARRANGE_JIT``; :mod:`.builds` — when runners are compiled or
  loaded: never in a copy by default (a copy whose runner is not ready uses numpy's copy
  while a thread loads it from the disk cache, or a worker process compiles it), once per
  machine (a lock beside the disk cache); :mod:`.worker` is that process.
* here — :func:`copy_into`, which runs a plan: small copies and object arrays go to
  ``np.copyto``, everything else to the compiled kernel once its runner is ready. The
  destination may also be a slice of a C-ordered array (rows with gaps: a concatenation's
  part); the kernel writes such a destination by row copies only (the row variants,
  planned with the destination's strides), numpy's copy does the rest. And
  :func:`copy_parts_into`: several copies (a concatenation's parts) by the same rules,
  those the kernel takes run as one job, one fork-join of the pool
  (:func:`.threads.execute_parts`).
  ``import rearrange`` loads :mod:`.plan`, :mod:`.threads`, :mod:`.pages`, :mod:`.abi`
  and :mod:`.modes` of the above; the rest (:mod:`.builds`, :mod:`.lowering`,
  :mod:`.loops`, :mod:`.jit`) loads with the first copy that may run compiled loops.

Fresh destinations: a destination of 24 MiB or more that the process has not touched
yet (a new ``np.empty`` of that size is a fresh mapping, ``mincore`` says) is page-faulted
as it is written, and the faults zero its lines into the caches. Row copies, panels and
staged interleaves then use regular stores (non-temporal ones would first evict those
lines; row copies: 1.07-1.19x faster than populating first and streaming, on the
attention-head permutes and merges). Tiled and staged transposes instead populate the
destination's pages first (``MADV_POPULATE_WRITE``, split over the copy's threads, which
then fault in parallel; where that is missing, one atomic write per page) and then
stream past the caches. Each was the fastest way for its case here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..caching import CacheLevel
from ..errors import ArgumentTypeError, RearrangeError
from .modes import get_jit_mode, set_jit_mode
from .pages import untouched
from .plan import (LINE, NONTEMPORAL_MIN_BYTES, CopyKernel, dst_rows_with_gaps, lowbit,
                   plan_aligned, plan_copy)
from .threads import (execute, execute_parts, find_pool_runner_with, get_num_threads,
                      set_num_threads, set_spin_seconds, spin_seconds)

__all__ = [
    "CopyKernel",
    "plan_copy",
    "copy_into",
    "copy_parts_into",
    "set_num_threads",
    "get_num_threads",
    "set_spin_seconds",
    "spin_seconds",
    "warmup",
    "set_jit_mode",
    "get_jit_mode",
    "compiled_runner",
    "path_now",
    "wait",
]


def _pool_runner():
    from .builds import POOL_KEY, runner_for

    return runner_for(*POOL_KEY)


find_pool_runner_with(_pool_runner)


def _families() -> dict[str, str]:
    from .loops import FAMILIES      # (registers the loops: with the first copy, not import)

    return FAMILIES


def wait(timeout: float | None = None) -> bool:
    """Block until every runner asked for so far is ready (or failed); True if none is
    still compiling or loading. For tests, benchmarks and scripts that want the kernel's
    speed."""
    from .builds import wait as wait_for_builds

    return wait_for_builds(timeout)


def compiled_runner(kernel: CopyKernel):
    """The compiled runner a copy planned as ``kernel`` would run now, or None: a plan
    that needs no compiled loops, or a runner not ready yet (see :mod:`.builds`; in the
    background mode this starts its compilation)."""
    from .builds import runner_for

    family = _families().get(kernel.variant)
    return None if family is None else runner_for(family, kernel.unit_bytes)


def path_now(kernel: CopyKernel) -> str | None:
    """What a copy planned as ``kernel`` does now and why (explain's ``now`` line); None
    for plans that never use compiled loops. Reads the state, changes nothing."""
    from .builds import describe

    from .rowjoin import FAMILY as ROW_JOIN     # (the row assembly: pack, repeat)

    family = ROW_JOIN if kernel.variant == ROW_JOIN else _families().get(kernel.variant)
    return None if family is None else describe(family, kernel.unit_bytes, kernel.fallback)


def warmup(parallel: int = 1, load: bool = True, progress=None) -> list[str]:
    """Compile (or load from the disk cache) every copy-kernel runner now: in this
    process, or spread over ``parallel`` worker processes and then loaded here (with
    ``load=False``: left on disk for the processes that copy). Returns their names;
    ``progress(name, ready, total)`` is told as each is ready (name None: starting)."""
    from .builds import build_everything

    return build_everything(parallel, load, progress)


def copy_into(dst: np.ndarray, src: np.ndarray, kernel: CopyKernel | None = None) -> None:
    """Write ``src`` (any strides: negative, zero, unaligned) into ``dst`` (C-contiguous,
    or a slice of a C-ordered array: rows with gaps; writeable, same shape and dtype, not
    overlapping ``src``). Into rows with gaps the kernel runs row copies
    (:data:`.plan.ROW_VARIANTS`); any other copy into them is numpy's.

    ``kernel`` is a plan from :func:`plan_copy` for this source layout (it saves the
    planning, a few microseconds); without one the copy is planned here.

    >>> import numpy as np
    >>> x = np.arange(12.0).reshape(3, 4)
    >>> out = np.empty((4, 3))
    >>> copy_into(out, x.T)
    >>> bool((out == x.T).all())
    True
    """
    part = _kernel_part(dst, src, kernel, "copy_into")
    if part is _NUMPY:
        np.copyto(dst, src, casting="no")
    elif part is not None:
        execute(*part)


def copy_parts_into(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
    """Write each ``(dst, src)`` pair as :func:`copy_into` would (the same rules, checks
    and plans: a pair the kernel does not take — small, object dtype, runner not ready,
    a copy into rows with gaps that is not a row copy — is numpy's copy), with every
    copy the kernel takes run as one job: one fork-join of the pool for all of them (a
    concatenation's parts), its work split over the threads by bytes, the calling
    thread's share included; numpy's copies run on the calling thread while the workers
    start on the kernel's. The pairs' destinations must not overlap each other or any
    source. A pair of numpy subclasses is numpy's copy (the kernel copies exact
    ndarrays only).

    >>> import numpy as np
    >>> x, y = np.arange(12.0).reshape(3, 4), np.arange(6.0).reshape(3, 2)
    >>> out = np.empty((6, 3))
    >>> copy_parts_into([(out[:4], x.T), (out[4:], y.T)])
    >>> bool((out == np.concatenate([x.T, y.T])).all())
    True
    """
    parts, numpy_pairs = [], []
    for dst, src in pairs:
        part = _kernel_part(dst, src, None, "copy_parts_into")
        if part is _NUMPY or part is not None and (type(dst) is not np.ndarray or
                                                   type(src) is not np.ndarray):
            numpy_pairs.append((dst, src))
        elif part is not None:
            parts.append(part + (dst.nbytes,))

    def numpy_copies() -> None:
        for dst, src in numpy_pairs:
            np.copyto(dst, src, casting="no")
    if not parts:
        numpy_copies()
    elif len(parts) == 1:       # one copy: exactly copy_into's
        execute(*parts[0][:5])
        numpy_copies()
    else:
        execute_parts(parts, numpy_copies if numpy_pairs else None)


# What _kernel_part returns for a copy that is numpy's.
_NUMPY = "numpy"


def _kernel_part(dst: np.ndarray, src: np.ndarray, kernel: CopyKernel | None, caller: str):
    """Check one copy and plan it: None if there is nothing to copy, _NUMPY if numpy's
    copy makes it, else what the kernel runs — ``(lowering, runner, destination address,
    source address, bytes to populate first)``, the arguments of
    :func:`.threads.execute`."""
    if not isinstance(dst, np.ndarray) or not isinstance(src, np.ndarray):
        raise ArgumentTypeError(f"{caller}: dst and src must be numpy arrays, got "
                                f"{type(dst).__name__} and {type(src).__name__}")
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise RearrangeError(f"{caller}: dst {dst.shape} {dst.dtype} does not match "
                             f"src {src.shape} {src.dtype}")
    if not dst.flags.writeable:
        raise RearrangeError(f"{caller}: dst must be writeable")
    dtype = src.dtype
    # Native code runs only on a plan made for this very source and destination: a plan
    # handed in for another shape, stride or item size (a stale cache entry, a caller's
    # mistake) is set aside and the copy planned here, so the loops never leave either's
    # bounds. The same check covers plans from this module's own cache.
    if dst.flags.c_contiguous:
        signature: tuple = (src.shape, src.strides, dtype.itemsize)
        gaps = None
    elif dst_rows_with_gaps(dst.shape, dst.strides, dtype.itemsize):
        gaps = dst.strides
        signature = (src.shape, src.strides, dtype.itemsize, gaps)
    else:
        raise RearrangeError(f"{caller}: dst must be C-contiguous or a slice of a "
                             f"C-ordered array (rows with gaps); got strides {dst.strides}")
    if kernel is None or kernel.source != signature:
        kind = "O" if dtype.hasobject else dtype.kind
        threads = get_num_threads()
        key = (src.shape, src.strides, dtype.itemsize, kind, threads, gaps)
        kernel = _plans.get(key)
        if kernel is None or kernel.source != signature:
            _counts[1] += 1
            if len(_plans) >= _CACHE_LIMIT:
                _plans.clear()
            kernel = _plans[key] = plan_aligned(src.shape, src.strides, dtype.itemsize,
                                                kind, threads, LINE, gaps)
        else:
            _counts[0] += 1
    if kernel.variant == "numpy" or dtype.hasobject:
        return _NUMPY
    if kernel.variant == "empty":
        return None
    saddr = src.__array_interface__["data"][0]
    daddr = dst.__array_interface__["data"][0]
    aligned = not (saddr | daddr) % kernel.unit_bytes
    if not aligned:
        kernel = plan_aligned(src.shape, src.strides, dtype.itemsize, dtype.kind,
                              kernel.threads, lowbit(saddr | daddr), gaps)
        if kernel.variant in ("numpy", "empty"):
            return _NUMPY
    if kernel.variant == "contiguous-memcpy" and kernel.threads == 1:
        return _NUMPY                               # numpy's memcpy: the same thing
    from .builds import runner_for

    run = runner_for(_families()[kernel.variant], kernel.unit_bytes)
    if run is None:         # not compiled yet (or kernels off): numpy's copy, at once
        return _NUMPY
    from .lowering import lower

    # A destination the process has not touched yet (a fresh np.empty of this size is a
    # new mapping) is page-faulted as it is written; the faults zero its lines into the
    # caches. Rows and panels then use regular stores (non-temporal ones would first
    # have to evict those lines); transposes have their pages populated first instead
    # (all of them, across the copy's threads), then stream past the caches.
    populate = False
    fresh = (kernel.variant != "contiguous-memcpy" and
             dst.nbytes >= NONTEMPORAL_MIN_BYTES and untouched(daddr, dst.nbytes))
    if fresh and kernel.variant in POPULATE_FIRST:
        populate, fresh = True, False
    if aligned:     # plans are kept (by the caller, or in _plans): so are their lowerings
        key = (id(kernel), daddr % LINE, fresh)
        low = _lowered.get(key)
        if low is None or low[0] is not kernel:
            _counts[1] += 1
            if len(_lowered) >= _CACHE_LIMIT:
                _lowered.clear()
            low = _lowered[key] = (kernel,) + lower(kernel, daddr % LINE, fresh)
        else:
            _counts[0] += 1
        low = low[1:]
    else:
        low = lower(kernel, daddr % LINE, fresh)
    return low, run, daddr, saddr, dst.nbytes if populate else 0


# The plan variants whose fresh destinations are populated first and then streamed to
# (bench/fresh_ab.py measures the ways); every other variant writes fresh pages with
# regular stores as they fault.
POPULATE_FIRST = frozenset({"tiled-transpose", "staged-transpose"})
# Plans made by copy_into itself: (shape, strides, itemsize, kind, threads, destination
# strides or None: C-contiguous) -> plan.
_plans: dict[tuple, CopyKernel] = {}
# Lowered plans: (id(plan), destination address mod LINE, fresh) -> (plan, lowering). The
# entry holds the plan, so its id cannot be reused while the entry lives; every plan
# looked up here was checked against its source by copy_into.
_lowered: dict[tuple[int, int], tuple] = {}
# [hits, misses] of the two lookups above, together: the kernel's level of
# rearrange.cache_info() (exact in one thread).
_counts = [0, 0]
_CACHE_LIMIT = 256


def cache_info() -> CacheLevel:
    """The kernel's cache (copy plans made here, lowered plans) as a
    :class:`rearrange.caching.CacheLevel`: hits, misses, the bound of each dict (each is
    emptied when full), entries held."""
    return CacheLevel(_counts[0], _counts[1], 2 * _CACHE_LIMIT, len(_plans) + len(_lowered))


def cache_clear() -> None:
    """Empty the kernel's plans and lowerings (compiled runners stay loaded: they depend
    on nothing but the code)."""
    _plans.clear()
    _lowered.clear()
    _counts[0] = _counts[1] = 0
