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
  runs a lowered copy; :mod:`.mailbox` — the compiled side of the pool (workers that
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
* :mod:`.copies` — :func:`copy_into`, which runs a plan: small copies and object arrays
  go to ``np.copyto``, everything else to the compiled kernel once its runner is ready.
  Served lazily from here, like :func:`warmup`, :func:`compiled_runner`,
  :func:`path_now` and :func:`wait`: ``import rearrange`` loads none of the above but
  :mod:`.plan`, :mod:`.threads` and :mod:`.modes`.

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

from typing import Any

from .modes import get_jit_mode, set_jit_mode
from .plan import CopyKernel, plan_copy
from .threads import get_num_threads, set_num_threads, set_spin_seconds, spin_seconds

__all__ = [
    "CopyKernel",
    "plan_copy",
    "copy_into",
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

# Served on first use (``kernel.copy_into``): the copy's machinery — builds, lowering,
# the loops' registration — loads with the first copy that may need it, not with
# ``import rearrange``.
_LAZY = {"copy_into": "copies", "compiled_runner": "copies", "path_now": "copies",
         "warmup": "copies", "wait": "builds"}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__():
    return sorted({*globals(), *_LAZY})
