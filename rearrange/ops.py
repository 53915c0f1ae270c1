"""``reduce`` and ``repeat``: transforms whose two sides need not hold the same axes.

Both go through the same stages as ``rearrange`` (see :mod:`rearrange.api`): the pattern
is parsed for the op, the recipe names the reduced (left-only) or new (right-only) axes,
and :func:`rearrange.plan.plan_transform` binds it to the input's layout. What differs is
the lowering of the two extra kinds of step:

* ``reduce`` — the plan permutes the reduced axes to the end, so the reduction runs over
  the trailing dims of a view and its fresh result is already in output order: the
  final merge is always a view of it.
* ``repeat`` — new axes are stride-0 dims of a view. When every output group can merge
  by strides the result is that broadcast view, **read-only** (a write through it would
  land on every repeated copy of the element); otherwise, or with ``copy=True``, one
  copy materialises it.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from . import backends
from .backends import ndarray
from .backends import tensor as tensor_backend
from .calls import (as_array, canonical_lengths, layout_from, plan_layout,
                    with_context)
from .caching import PLANS
from .errors import ArgumentTypeError, OutOfMemoryError, RearrangeError
from .plan import REDUCTION_NAMES, Plan
from .tensor import Tensor

__all__ = ["run_transform", "explain_transform", "REDUCTIONS"]

#: The reductions ``reduce`` takes by name; any callable ``f(x, axes)`` works too.
REDUCTIONS = REDUCTION_NAMES

Runner = Callable[[Any], Any]

# Entries of the plan cache made here: (op, pattern, reduction, array type, shape,
# strides, dtype, copy, axis lengths) -> runner, for numpy arrays; (op, pattern,
# reduction, Tensor, layout, dtype, copy, axis lengths) for Tensors. Everything a runner
# depends on: the reduction (a name or the callable itself), the layout and dtype
# (reducers' result types, the kernel plan of a repeat copy), and the canonical axis
# lengths (see run_transform).


# ---------------------------------------------------------------------- shared front

def run_transform(op: str, tensor: Any, pattern: str, reduction: Any, copy: bool | None,
                  axes_lengths: Mapping[str, Any]) -> Any:
    """reduce or repeat of any array: the runner cache lookup (and, on a miss, planning
    and lowering for the array's type)."""
    if type(tensor) is not np.ndarray and not isinstance(tensor, Tensor):
        backend = backends.by_type.get(type(tensor))
        foreign = (backend, tensor) if backend is not None else backends.foreign_input(tensor, op)
        if foreign is not None:
            if axes_lengths and not all(type(v) is int for v in axes_lengths.values()):
                axes_lengths = canonical_lengths(axes_lengths)
            return backends.run_transform(*foreign, op, pattern, reduction, copy, axes_lengths)
    array = as_array(tensor, op)
    is_tensor = isinstance(array, Tensor)
    # Canonical lengths before the key: 3.0 or True must never hit an entry made for 3
    # or 1 (they are equal and hash alike), so the planner sees and refuses them.
    axes_lengths = canonical_lengths(axes_lengths)
    if is_tensor:
        key = (op, pattern, reduction, Tensor, array.layout, array.dtype, copy,
               *axes_lengths.items())
    else:
        key = (op, pattern, reduction, type(array), array.shape, array.strides, array.dtype,
               copy, *axes_lengths.items())
    runner = PLANS.get(key)
    if runner is None:  # (an unhashable pattern, length or reduction: the planner says which)
        runner = _lower(op, array, pattern, reduction, copy, axes_lengths)
        PLANS.put(key, runner)
    try:
        return runner(array)
    except RearrangeError as error:  # a reduction that failed on these values
        raise with_context(error, pattern, array.shape, axes_lengths, op) from None
    except MemoryError as error:     # a repeat's copy bigger than the memory
        raise with_context(OutOfMemoryError(f"not enough memory for the result: {error}"),
                            pattern, array.shape, axes_lengths, op) from None


def _lower(op: str, array: np.ndarray | Tensor, pattern: str, reduction: Any,
           copy: bool | None, axes_lengths: Mapping[str, Any]) -> Runner:
    backend = tensor_backend if isinstance(array, Tensor) else ndarray
    info = backend.describe(array)
    plan = plan_layout(op, info.layout, info.dtype, info.itemsize, info.unit, pattern,
                       reduction, copy, axes_lengths)
    return backend.lower(plan, reduction, array)


# ---------------------------------------------------------------------- public API


def explain_transform(op: str, x_or_shape: Any, pattern: str, *, reduction: Any = None,
                      strides: Any = None, dtype: Any = None, copy: bool | None = None,
                      **axes_lengths: int) -> Plan:
    """The plan of ``reduce`` or ``repeat`` (see :func:`rearrange.explain`)."""
    if op != "reduce" and reduction is not None:
        raise ArgumentTypeError(f"reduction= applies to op='reduce', not op={op!r}")
    layout, dtype_name, itemsize, unit = layout_from(x_or_shape, strides, dtype)
    return plan_layout(op, layout, dtype_name, itemsize, unit, pattern, reduction, copy,
                        axes_lengths)
