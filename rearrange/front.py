"""The front door of the transforms: one call path for ``rearrange``, ``reduce`` and
``repeat`` on every array type.

A call walks down once::

    backend_of(x)            which backend, and the array it takes (lists stacked)
    canonical lengths        3, np.int64(3) -> 3; 3.0, True -> refused by the planner
    key                      (op, backend, pattern, reduction, copy,
                              backend.cache_key(x), *lengths)   -> the plan cache
                             (first the last kept key with this pattern, compared
                             without hashing: PLANS.last_transform)
    miss: traced sizes?      a SymbolicPlan, lowered by the backend, never cached
          else               plan_for_array (parse, recipe, plan; the backend's
                             describe_copy) -> backend.lower -> cached
    run                      the runner, errors given the call's context; an
                             allocation failure is OutOfMemoryError

Everything array-type-specific is the backend's (:class:`rearrange.backends.protocol.
Backend`): its ``cache_key``, ``describe``, ``lower`` and optional hooks. numpy's
``rearrange`` has one warm path of its own ahead of this door, in
:func:`rearrange.api.rearrange` (an inline index of the last layout per pattern, and
its commonest view plans run as one numpy call), as the numpy backend's own.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from . import backends
from .backends import ndarray, plan_for_array, plan_traced, refusal
from .backends import tensor as tensor_backend
from .backends.protocol import hook
from .caching import PLANS
from .calls import as_array, canonical_lengths, with_context
from .errors import OutOfMemoryError, RearrangeError
from .tensor import Tensor

__all__ = ["backend_of", "run_transform"]

_PLAIN_INT = frozenset({int})
_by_type = backends.by_type     # a foreign type -> its backend, once seen
_ndarray = np.ndarray
_entries = PLANS.entries
_last_transform = PLANS.last_transform


def backend_of(x: Any, op: str) -> tuple[Any, Any]:
    """``(backend, array)`` for a call's input: exact numpy arrays, Tensors, numpy
    scalars (as 0-d arrays), foreign arrays (torch, dask, array API, numpy subclasses)
    and lists/tuples of any of them (stacked on a new first axis, as einops does).
    Anything else is an ArgumentTypeError naming what the operations take."""
    kind = type(x)
    if kind is _ndarray:
        return ndarray, x
    backend = _by_type.get(kind)
    if backend is not None:
        return backend, x
    if isinstance(x, Tensor):
        return tensor_backend, x
    foreign = backends.foreign_input(x, op)
    if foreign is not None:
        return foreign
    array = as_array(x, op)
    return (tensor_backend if isinstance(array, Tensor) else ndarray), array


def run_transform(op: str, x: Any, pattern: str, reduction: Any, copy: bool | None,
                  axes_lengths: Mapping[str, Any]) -> Any:
    """rearrange, reduce or repeat of any array (see the module's docstring)."""
    backend = _by_type.get(type(x))     # backend_of's answer for a foreign type seen before
    if backend is not None:
        array = x
    else:
        backend, array = backend_of(x, op)
    # copy=1 equals copy=True and hashes alike: only a real flag keys the cache (any
    # other value is the planner's to refuse)
    cacheable = comparable = copy is None or copy is True or copy is False
    if axes_lengths and not _PLAIN_INT.issuperset(map(type, axes_lengths.values())):
        axes_lengths = canonical_lengths(axes_lengths)
        # a symbolic length compared with an int would guard a trace on it
        comparable = cacheable and _PLAIN_INT.issuperset(map(type, axes_lengths.values()))
    key = (op, backend, pattern, reduction, copy, backend.cache_key(array))
    if axes_lengths:    # (a tuple display with *items() costs ~0.15 us more when empty)
        key += tuple(axes_lengths.items())
    # The inline index first: the last kept key with this pattern, compared without
    # hashing. It finds what the plan cache would: the keys are tuples of the same
    # fields, only hashable ones are remembered, and where an equality test could say
    # more than the cache's lookup it is not made — a reduction is the remembered one
    # itself (a callable's __eq__ is its own), lengths are plain ints, and a torch key
    # of symbolic sizes is unhashable (a list: unequal to any tuple, never compared
    # element by element). Then PLANS.get, inline. (An unhashable key — lengths or a
    # reduction, which planning reports, or traced sizes — is a miss never kept.)
    try:
        seen_key, runner = _last_transform[pattern]
    except (KeyError, TypeError):   # not seen, or an unhashable pattern
        seen_key = runner = None
    if seen_key is not None and comparable and seen_key[3] is reduction and seen_key == key:
        PLANS.hits += 1
    else:
        try:
            runner = _entries.get(key) if cacheable else None
        except TypeError:
            runner = None
        if runner is not None:
            PLANS.hits += 1
            PLANS.remember_last_transform(pattern, key, runner)
    if runner is None:
        PLANS.misses += 1
        if hook(backend, "traced")(array, axes_lengths):
            # never cached: a runner made for one trace's sizes would bake them into another
            runner = backend.lower_symbolic(
                plan_traced(array, op, pattern, reduction, copy, axes_lengths), reduction)
        else:
            plan = plan_for_array(backend, array, op, pattern, reduction, copy, axes_lengths)
            # a plan the call refuses (copy=False, no view) is kept as a runner that raises
            runner = refusal(plan) or backend.lower(plan, reduction, array)
            if PLANS.put(key, runner):
                PLANS.remember_last_transform(pattern, key, runner)
    try:
        return runner(array)
    except RearrangeError as error:  # a reduction that failed on these values, a refusal
        raise with_context(error, pattern, tuple(array.shape), axes_lengths, op) from None
    except (MemoryError, RuntimeError) as error:
        if not backends.is_out_of_memory(error):
            raise
        raise with_context(OutOfMemoryError(f"not enough memory for the result: {error}"),
                           pattern, tuple(array.shape), axes_lengths, op) from None
