"""``rearrange.Tensor``: how a plan runs on it.

A Tensor is a storage seen through a :class:`~rearrange.layout.Layout`, so a view plan
is the plan's output layout on the same storage, and a copy step copies the numpy view
of the storage through that layout with the copy kernel into a new storage.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import kernel
from ..calls import no_view_error
from ..plan import Plan
from ..tensor import Storage, Tensor

Runner = Callable[[Any], Any]


def lower_rearrange(plan: Plan) -> Runner:
    """The plan (of rearrange, or of a repeat: the same steps) as ``Tensor -> Tensor``."""
    if plan.copy_requested is False and not plan.is_view:
        error = no_view_error(plan)

        def refuse(t: Tensor) -> Tensor:
            raise error
        return refuse
    copy_index = next((k for k, s in enumerate(plan.steps) if s.is_copy), None)
    output = plan.output
    if copy_index is None:
        return lambda t: t._with(output)
    before_copy = plan.steps[copy_index - 1].layout if copy_index else plan.input

    def run(t: Tensor) -> Tensor:
        source = t._with(before_copy).numpy()
        flat = np.empty(source.size, source.dtype)
        kernel.copy_into(flat.reshape(source.shape), source)
        return Tensor._wrap(Storage(flat), output)
    return run


