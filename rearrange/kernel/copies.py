"""Running a copy plan: :func:`copy_into` and what asks :mod:`.builds` for runners.

Imported on the first copy that may need compiled loops (``rearrange.kernel`` serves
these names lazily): ``import rearrange`` loads none of the build machinery. See the
package's docstring for what a copy does.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentTypeError, RearrangeError
from .builds import POOL_KEY, build_everything, describe, runner_for
from .lowering import lower
from .loops import FAMILIES
from .pages import untouched
from .plan import LINE, NONTEMPORAL_MIN_BYTES, CopyKernel, lowbit, plan_aligned
from .threads import execute, find_pool_runner_with, get_num_threads

__all__ = ["copy_into", "compiled_runner", "path_now", "warmup"]

find_pool_runner_with(lambda: runner_for(*POOL_KEY))


def compiled_runner(kernel: CopyKernel):
    """The compiled runner a copy planned as ``kernel`` would run now, or None: a plan
    that needs no compiled loops, or a runner not ready yet (see :mod:`.builds`; in the
    background mode this starts its compilation)."""
    family = FAMILIES.get(kernel.variant)
    return None if family is None else runner_for(family, kernel.unit_bytes)


def path_now(kernel: CopyKernel) -> str | None:
    """What a copy planned as ``kernel`` does now and why (explain's ``now`` line); None
    for plans that never use compiled loops. Reads the state, changes nothing."""
    family = FAMILIES.get(kernel.variant)
    return None if family is None else describe(family, kernel.unit_bytes, kernel.fallback)


def warmup(parallel: int = 1, load: bool = True, progress=None) -> list[str]:
    """Compile (or load from the disk cache) every copy-kernel runner now: in this
    process, or spread over ``parallel`` worker processes and then loaded here (with
    ``load=False``: left on disk for the processes that copy). Returns their names;
    ``progress(name, ready, total)`` is told as each is ready (name None: starting)."""
    return build_everything(parallel, load, progress)


def copy_into(dst: np.ndarray, src: np.ndarray, kernel: CopyKernel | None = None) -> None:
    """Write ``src`` (any strides: negative, zero, unaligned) into ``dst`` (C-contiguous,
    writeable, same shape and dtype, not overlapping ``src``).

    ``kernel`` is a plan from :func:`plan_copy` for this source layout (it saves the
    planning, a few microseconds); without one the copy is planned here.

    >>> import numpy as np
    >>> x = np.arange(12.0).reshape(3, 4)
    >>> out = np.empty((4, 3))
    >>> copy_into(out, x.T)
    >>> bool((out == x.T).all())
    True
    """
    if not isinstance(dst, np.ndarray) or not isinstance(src, np.ndarray):
        raise ArgumentTypeError(f"copy_into: dst and src must be numpy arrays, got "
                                f"{type(dst).__name__} and {type(src).__name__}")
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise RearrangeError(f"copy_into: dst {dst.shape} {dst.dtype} does not match "
                             f"src {src.shape} {src.dtype}")
    if not dst.flags.c_contiguous or not dst.flags.writeable:
        raise RearrangeError("copy_into: dst must be C-contiguous and writeable")
    dtype = src.dtype
    # Native code runs only on a plan made for this very source: a plan handed in for
    # another shape, stride or item size (a stale cache entry, a caller's mistake) is
    # set aside and the source planned here, so the loops never leave its bounds.
    # The same check covers plans from this module's own cache.
    signature = (src.shape, src.strides, dtype.itemsize)
    if kernel is None or kernel.source != signature:
        kind = "O" if dtype.hasobject else dtype.kind
        threads = get_num_threads()
        key = (src.shape, src.strides, dtype.itemsize, kind, threads)
        kernel = _plans.get(key)
        if kernel is None or kernel.source != signature:
            if len(_plans) >= 256:
                _plans.clear()
            kernel = _plans[key] = plan_aligned(src.shape, src.strides, dtype.itemsize,
                                                kind, threads, LINE)
    if kernel.variant == "numpy" or dtype.hasobject:
        np.copyto(dst, src, casting="no")
        return
    if kernel.variant == "empty":
        return
    saddr = src.__array_interface__["data"][0]
    daddr = dst.__array_interface__["data"][0]
    aligned = not (saddr | daddr) % kernel.unit_bytes
    if not aligned:
        kernel = plan_aligned(src.shape, src.strides, dtype.itemsize, dtype.kind,
                              kernel.threads, lowbit(saddr | daddr))
        if kernel.variant in ("numpy", "empty"):
            np.copyto(dst, src, casting="no")
            return
    if kernel.variant == "contiguous-memcpy" and kernel.threads == 1:
        np.copyto(dst, src, casting="no")           # numpy's memcpy: the same thing
        return
    run = runner_for(FAMILIES[kernel.variant], kernel.unit_bytes)
    if run is None:         # not compiled yet (or kernels off): numpy's copy, at once
        np.copyto(dst, src, casting="no")
        return
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
            if len(_lowered) >= 256:
                _lowered.clear()
            low = _lowered[key] = (kernel,) + lower(kernel, daddr % LINE, fresh)
        low = low[1:]
    else:
        low = lower(kernel, daddr % LINE, fresh)
    execute(low, run, daddr, saddr, dst.nbytes if populate else 0)


# The plan variants whose fresh destinations are populated first and then streamed to
# (bench/fresh_ab.py measures the ways); every other variant writes fresh pages with
# regular stores as they fault.
POPULATE_FIRST = frozenset({"tiled-transpose", "staged-transpose"})
# Plans made by copy_into itself: (shape, strides, itemsize, kind, threads) -> plan.
_plans: dict[tuple, CopyKernel] = {}
# Lowered plans: (id(plan), destination address mod LINE, fresh) -> (plan, lowering). The
# entry holds the plan, so its id cannot be reused while the entry lives; every plan
# looked up here was checked against its source by copy_into.
_lowered: dict[tuple[int, int], tuple] = {}
