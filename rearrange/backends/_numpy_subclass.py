"""numpy subclasses (masked arrays, ``np.matrix``, users' own): the plan as the array's
own methods, in the order einops calls them.

The numpy backend's fast paths (the copy kernel into a fresh ``np.empty``, views built
with ``as_strided``, broadcast views for repeat, ``np.empty`` + assignment for pack)
would hand back a plain ndarray, or one whose mask no longer fits its data. A subclass
only keeps its meaning through its own methods, so for it every step is one:
``reshape`` for splits and merges (a copying reshape is the copy step), ``transpose``,
the reduction's method, ``np.expand_dims`` and ``np.tile`` for repeat's new axes (as
einops does: a copy, where a plain ndarray gets a read-only broadcast view), pack's
``reshape`` + ``np.concatenate``. The result is what einops gives on the same array, at
every size: nothing here depends on how large the array is.

The planner still checks the pattern against the shape and says, in ``explain``, which
steps run; whether a step copies is the subclass's own business.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from ..errors import RearrangeError
from ..plan import Plan
from ..reductions import reduce_values
from . import ArrayInfo, ndarray, refusal

Runner = Callable[[Any], Any]

_ndarray = np.ndarray


def matches(x: Any) -> bool:
    # exact ndarrays take the numpy backend (rearrange.backends.backend_for)
    return isinstance(x, _ndarray)


def cache_key(x: Any) -> tuple:
    return type(x), x.shape, x.strides, x.dtype


def describe(x: Any) -> ArrayInfo:
    return ndarray.describe(x)


def describe_copy(plan: Plan, x: Any, info: ArrayInfo) -> Plan:
    """A copy step is the subclass's own ``reshape`` (or ``copy``), never the kernel."""
    from ..kernel import CopyKernel

    why = (f"x.reshape() / x.copy() of {type(x).__module__}.{type(x).__qualname__}: a numpy "
           f"subclass keeps its type (and a mask) only through its own methods")
    steps = tuple(dataclasses.replace(step, kernel=CopyKernel("numpy", 0, (), (), None, 1, why))
                  if step.is_copy else step for step in plan.steps)
    return dataclasses.replace(plan, steps=steps)


def stack(xs: list[Any]) -> Any:
    return np.stack(xs)


def reshape(x: Any, shape: tuple[int, ...]) -> Any:
    return _checked(lambda: x.reshape(shape), "reshape", x)


def concat(xs: list[Any], axis: int) -> Any:
    return np.concatenate(xs, axis=axis)


def einsum(subscripts: str, *xs: Any) -> Any:
    return np.einsum(subscripts, *xs)


def to_numpy(x: Any) -> Any:
    return x


def lower(plan: Plan, reduction: Any, sample: Any = None) -> Runner:
    """The plan's steps as the subclass's methods (see the module's docstring)."""
    refuse = refusal(plan)
    if refuse is not None:
        return refuse
    stages: list[Runner] = []
    materialised = False    # has a step already made a fresh array (reduce, tile)?
    previous = plan.input.shape
    for step in plan.steps:
        if step.op in ("split", "merge"):
            stages.append(_reshape(step.args))
        elif step.op == "permute":
            stages.append(_transpose(step.args))
        elif step.op == "reduce":
            stages.append(_reducer(reduction, step.args))
            materialised = True
        elif step.op == "unsqueeze":
            stages.append(_expand_dims(_inserted(previous, step.args)))
        elif step.op == "expand":
            stages.append(_tile(tuple(n if m != n else 1 for m, n in zip(previous, step.args))))
            materialised = True
        elif step.op == "copy" and step is plan.steps[-1] and not materialised:
            stages.append(_copy)    # copy=True; a copy before a merge is the merge's reshape
        previous = step.layout.shape

    def run(x: Any) -> Any:
        for stage in stages:
            x = stage(x)
        return x
    return run


def _checked(call: Callable[[], Any], what: str, x: Any) -> Any:
    """``call()``, with the subclass's refusal (``np.matrix`` is 2-d only) as ours."""
    try:
        return call()
    except (ValueError, TypeError) as error:
        raise RearrangeError(
            f"{type(x).__module__}.{type(x).__qualname__}.{what} refused: {error}") from None


def _reshape(shape: tuple[int, ...]) -> Runner:
    return lambda x: reshape(x, shape)


def _transpose(order: tuple[int, ...]) -> Runner:
    return lambda x: _checked(lambda: x.transpose(order), "transpose", x)


def _reducer(reduction: Any, axis: tuple[int, ...]) -> Runner:
    return lambda x: reduce_values(reduction, x, axis)


def _expand_dims(positions: tuple[int, ...]) -> Runner:
    return lambda x: _checked(lambda: np.expand_dims(x, positions), "expand_dims", x)


def _tile(repeats: tuple[int, ...]) -> Runner:
    return lambda x: _checked(lambda: np.tile(x, repeats), "tile", x)


def _copy(x: Any) -> Any:
    return x.copy()


def _inserted(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    """The positions in ``after`` of the size-1 dims inserted into ``before`` (its dims in
    order, with new 1s among them; where an existing 1 could be either, the existing one
    is taken first: the arrays are the same either way)."""
    positions, k = [], 0
    for position, size in enumerate(after):
        if k < len(before) and before[k] == size:
            k += 1
        else:
            positions.append(position)
    return tuple(positions)
