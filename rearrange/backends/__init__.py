"""Backends: how a plan runs on each array type.

One module per array type — :mod:`.ndarray` (exact numpy arrays), :mod:`.tensor`
(``rearrange.Tensor``), ``_numpy_subclass`` (instances of numpy subclasses: their own
methods), ``_torch``, ``_dask`` and ``_array_api`` — each implementing the declared
interface :class:`~rearrange.backends.protocol.Backend` (``matches``, ``cache_key``,
``describe``, ``lower``, ``stack``, ``reshape``, ``concat``, ``einsum``); the optional
hooks (``check``, ``traced`` + ``lower_symbolic``, ``assert_sizes``, ``describe_copy``,
``describe_einsum``, ``lower_einsum``, ``lower_pack``, ``lower_unpack``, ``to_numpy``)
are called through :func:`~rearrange.backends.protocol.hook`, which holds their
defaults. The same plan (:func:`rearrange.plan.plan_transform`) drives every one of
them, and every operation reaches them through one door (:func:`rearrange.front.run`).

numpy arrays and Tensors are known to the door without a lookup (and numpy's rearrange
has a warm path of its own); the other types are detected from the array's type alone,
never by importing a framework: a torch tensor can only exist once the caller has
imported torch, so those modules are loaded on the first array no numpy or Tensor path
takes, and a type's backend is then one dict lookup (:data:`by_type`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from ..calls import (SUPPORTED_ARRAYS, check_reduction, no_view_error, parse_first, plan_for,
                     plan_layout, with_context)
from ..errors import ArgumentTypeError, RearrangeError
from ..layout import Layout
from ..plan import Plan
from ..records import record
from ..tensor import Tensor
from .protocol import hook

if TYPE_CHECKING:
    from ..symbolic import SymbolicPlan

__all__ = ["ArrayInfo", "backend_for", "plan_for_array", "asnumpy",
           "SUPPORTED_ARRAYS"]


@record
class ArrayInfo:
    """What the planner needs to know about an array."""

    layout: Layout          # strides in elements (or bytes: see unit); C-contiguous where
                            # the framework hides memory layout (dask, array API)
    dtype: str              # the dtype's name, e.g. "float32", "bfloat16"
    itemsize: int
    unit: str = "elements"  # "bytes" for numpy views whose strides are not whole items


# Checked in order: the first whose ``matches`` accepts the array wins (the generic
# array-API backend last, since torch and dask arrays may also expose the protocol).
# Exact numpy arrays never get here; instances of numpy subclasses go to the first.
_BACKEND_MODULES = ("_numpy_subclass", "_torch", "_dask", "_array_api")
_loaded: list[Any] = []


def _backends() -> list[Any]:
    if not _loaded:
        _loaded.extend(importlib.import_module(f".{name}", __name__) for name in _BACKEND_MODULES)
    return _loaded


#: type -> its backend, for types seen before: the warm path's one lookup. A type's
#: backend never changes (``matches`` depends on the type alone).
by_type: dict[type, Any] = {}


def backend_for(x: Any) -> Any | None:
    """The backend module for ``x``, or None for exact numpy arrays, numpy scalars,
    Tensors (the package's own paths, although numpy arrays expose
    ``__array_namespace__`` too) and types no backend knows. Instances of numpy
    subclasses (masked arrays, ``np.matrix``) have a backend of their own: their
    methods keep their type, the numpy path's fast copies would not."""
    if type(x) is np.ndarray or isinstance(x, (np.generic, Tensor)):
        return None
    for backend in _backends():
        if backend.matches(x):
            by_type[type(x)] = backend
            return backend
    return None


def check(backend: Any, x: Any) -> None:
    """``backend.check(x)``: refuses an array of its type that no plan can describe."""
    hook(backend, "check")(x)


def foreign_input(x: Any, op: str) -> tuple[Any, Any] | None:
    """``(backend, array)`` for a foreign array or a list/tuple of them (stacked on a
    new first axis, as einops does), else None."""
    if isinstance(x, (list, tuple)) and x:
        backend = backend_for(x[0])
        if backend is None:
            return None
        if not all(backend.matches(item) for item in x):
            kinds = sorted({type(item).__name__ for item in x})
            raise ArgumentTypeError(f"{op}() got a list mixing array types: {', '.join(kinds)}")
        for item in x:
            check(backend, item)
        shapes = {tuple(item.shape) for item in x}
        if len(shapes) > 1:
            raise RearrangeError(
                f"{op}() stacks a list of arrays, which needs equal shapes; got "
                f"{[tuple(item.shape) for item in x]}")
        return backend, backend.stack(list(x))
    backend = backend_for(x)
    return None if backend is None else (backend, x)


def asnumpy(x: Any) -> np.ndarray:
    """``x``'s values as a numpy array, as einops' ``asnumpy``: a numpy array as it is, a
    ``rearrange.Tensor`` as the numpy view of its memory, a torch tensor detached and
    moved to the CPU, a dask array computed, an array-API array through numpy's
    ``asarray`` (or DLPack). No framework is imported: ``x``'s type says which it is.

    >>> import rearrange as ra
    >>> ra.asnumpy(ra.arange(6).view(2, 3))
    array([[0, 1, 2],
           [3, 4, 5]])
    """
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, Tensor):
        return x.numpy()
    backend = backend_for(x)
    if backend is None:
        raise ArgumentTypeError(
            f"asnumpy() takes {SUPPORTED_ARRAYS}; got {type(x).__module__}.{type(x).__name__}")
    return hook(backend, "to_numpy")(x)


# ---------------------------------------------------------------------- runners



def plan_for_array(backend: Any, x: Any, op: str, pattern: str, reduction: Any,
                   copy: bool | None, axes_lengths: Mapping[str, Any]) -> Any:
    """The plan of ``op`` for a foreign array ``x`` (explain and the runners use it)."""
    if _is_traced(backend, x, axes_lengths):
        return plan_traced(x, op, pattern, reduction, copy, axes_lengths)
    info = backend.describe(x)
    if op == "rearrange":
        plan = plan_for(pattern, info.layout, axes_lengths, copy, info.dtype, info.itemsize,
                        info.unit)
    else:
        plan = plan_layout(op, info.layout, info.dtype, info.itemsize, info.unit, pattern,
                           reduction, copy, axes_lengths)
    return hook(backend, "describe_copy")(plan, x, info)


def _is_traced(backend: Any, x: Any, axes_lengths: Mapping[str, Any]) -> bool:
    return hook(backend, "traced")(x, axes_lengths)


def plan_traced(x: Any, op: str, pattern: str, reduction: Any, copy: bool | None,
                axes_lengths: Mapping[str, Any]) -> SymbolicPlan:
    """The plan of ``op`` for an array whose sizes are traced: steps from the pattern
    alone, sizes as expressions (see :mod:`rearrange.symbolic`)."""
    from ..symbolic import plan_symbolic       # (traced calls only: not at import)

    shape = tuple(x.shape)
    parse_first(pattern, op, shape, axes_lengths)
    if copy is not None and copy is not True and copy is not False:
        raise ArgumentTypeError(f"copy must be None, True or False, got {copy!r}")
    try:
        name = check_reduction(reduction) if op == "reduce" else None
        plan = plan_symbolic(op, pattern, shape, axes_lengths, name, copy)
        reduced = next((len(step.args) for step in plan.steps if step.op == "reduce"), 0)
        if name in ("argmax", "argmin") and reduced != 1:
            raise RearrangeError(f"{name} gives the position along one reduced axis; this "
                                 f"pattern reduces {reduced}")
        return plan
    except RearrangeError as error:
        raise with_context(error, pattern, shape, axes_lengths, op) from None


def refusal(plan: Plan) -> Callable[[Any], Any] | None:
    """For a plan the call refuses (``copy=False`` and no view: ``plan.refused``), the
    runner every backend caches in its place: it raises :class:`NoViewError` on each
    call. None for a plan that runs."""
    if plan.refused is None:
        return None
    error = no_view_error(plan)

    def refuse(x: Any) -> Any:
        raise error
    return refuse


def is_out_of_memory(error: BaseException) -> bool:
    """Is ``error`` an allocation failure: numpy's MemoryError, torch's
    ``OutOfMemoryError`` (CUDA) or its CPU allocator's RuntimeError?"""
    return (isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in str(error))


# ---------------------------------------------------------------------- reductions

def reduction_error(reduction: Any, error: Exception) -> RearrangeError:
    name = reduction if isinstance(reduction, str) else repr(reduction)
    return RearrangeError(f"reduction {name} failed: {type(error).__name__}: {error}")
