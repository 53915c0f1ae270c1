"""``reduce`` and ``repeat``: transforms whose two sides need not hold the same axes.

Both go through the same stages and the same front door as ``rearrange``
(:mod:`rearrange.front`): the pattern is parsed for the op, the recipe names the
reduced (left-only) or new (right-only) axes, and :func:`rearrange.plan.plan_transform`
binds it to the input's layout. What differs is the lowering of the two extra kinds of
step (each backend's ``lower``):

* ``reduce`` — the plan permutes the reduced axes to the end, so the reduction runs over
  the trailing dims of a view and its fresh result is already in output order: the
  final merge is always a view of it.
* ``repeat`` — new axes are stride-0 dims of a view. When every output group can merge
  by strides the result is that broadcast view, **read-only** (a write through it would
  land on every repeated copy of the element); otherwise, or with ``copy=True``, one
  copy materialises it.

This module holds what is theirs alone: the reductions' names and the plan ``explain``
shows for a shape.
"""

from __future__ import annotations

from typing import Any

from .calls import layout_from, plan_layout
from .errors import ArgumentTypeError
from .plan import REDUCTION_NAMES, Plan

__all__ = ["explain_transform", "REDUCTIONS"]

#: The reductions ``reduce`` takes by name; any callable ``f(x, axes)`` works too.
REDUCTIONS = REDUCTION_NAMES

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
