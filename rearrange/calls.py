"""What every public call shares before its array type matters: the first checks and
their order, canonical axis lengths, the error context that quotes the call, and
planning with that context.

The fronts (:mod:`rearrange.api`) and every backend (:mod:`rearrange.backends`) use
these, so a call is checked and reported the same way whatever array it gets. This
module imports no backend and no front: the stages below it (parsing, recipe, plan,
the kernel's pure-Python copy planner) are all it needs.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Mapping, Sequence, TypeVar

import numpy as np

from .errors import ArgumentTypeError, NoViewError, PatternError, RearrangeError
from .kernel.plan import CopyKernel, copies_with_numpy, plan_copy
from .layout import Layout, canonical_layout
from .parsing import (TransformPattern, parse_transform, parse_transform_cached,
                      pattern_error, shorten)
from .plan import REDUCTION_NAMES, Plan, plan_transform
from .recipe import Recipe, build_recipe, is_symbolic
from .records import record
from .tensor import Storage, Tensor, numpy_dtype

_PLAIN_INT = frozenset({int})

#: The caller's array type, as the public functions' annotations carry it through:
#: an ``ndarray`` in, an ``ndarray`` out; a ``torch.Tensor`` in, a ``torch.Tensor`` out.
ArrayT = TypeVar("ArrayT")


#: Every array type the public operations take, for messages about anything else.
SUPPORTED_ARRAYS = ("a numpy array, a rearrange.Tensor, a torch tensor, a dask array or an "
                    "array-API array (jax, cupy, array-api-strict, ...)")


def numpy_layout(array: np.ndarray) -> tuple[Layout, str]:
    """The layout of a numpy array in elements, or in bytes when its byte strides are
    not whole multiples of the itemsize (views of structured fields)."""
    # numpy gives shape and strides as tuples of plain ints, the sizes >= 0: canonical
    # values, which canonical_layout takes without the constructor's checks.
    itemsize, strides = array.itemsize, array.strides
    if itemsize == 1:
        return canonical_layout(array.shape, strides, 0), "elements"
    if itemsize and not any([s % itemsize for s in strides]):
        return canonical_layout(array.shape, tuple([s // itemsize for s in strides]), 0), \
            "elements"
    return canonical_layout(array.shape, strides, 0), "bytes"


_GERUND = {"rearrange": "rearranging", "reduce": "reducing", "repeat": "repeating"}


def context_line(pattern: str, shape: Sequence[int] | None, axes_lengths: Mapping[str, Any],
                 op: str = "rearrange") -> str:
    lengths = shorten("{" + ", ".join(f"{k}={v!r}" for k, v in axes_lengths.items()) + "}")
    where = "" if shape is None else f"input shape {tuple(shape)}, "
    return (f"  while {_GERUND[op]} with pattern '{shorten(pattern)}': {where}"
            f"axis lengths {lengths}")


def with_context(error: RearrangeError, pattern: str, shape: Sequence[int] | None,
                 axes_lengths: Mapping[str, Any], op: str = "rearrange") -> RearrangeError:
    """``error`` (of the same class) with the call's context line, unless it quotes the
    pattern already."""
    if f"pattern '{shorten(pattern)}'" in str(error):
        return error
    return type(error)(f"{error}\n{context_line(pattern, shape, axes_lengths, op)}")


def parse_first(pattern: Any, op: str, shape: Sequence[int] | None,
                axes_lengths: Mapping[str, Any]) -> TransformPattern:
    """The first checks of every transform, in einops' order once the array type is
    known: the pattern's type, then its syntax and meaning (no shapes needed). Only
    then come the other arguments (``copy=``, the reduction, the lengths' types) and
    the fit of the pattern to the input. Returns the parsed pattern."""
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__} {pattern!r}")
    try:
        return parse_transform_cached(pattern, op)
    except PatternError as error:
        raise with_context(error, pattern, shape, axes_lengths, op) from None


@record
class CopyDescriber:
    """How the copy kernel would copy a source layout of one dtype (for the plan): called
    with the source layout, it gives the :class:`CopyKernel` for the thread count set
    at that moment."""

    itemsize: int
    kind: str     # numpy's dtype.kind ("V" for names numpy does not know)
    scale: int    # bytes per stride unit: the itemsize for strides in elements, else 1

    def __call__(self, source: Layout) -> CopyKernel:
        scale = self.scale
        strides = source.strides if scale == 1 else tuple([s * scale for s in source.strides])
        return plan_copy(source.shape, strides, self.itemsize, self.kind)

    def numpy_copies(self, source: Layout) -> bool:
        """Whether the kernel leaves this copy to numpy (variant ``numpy`` or ``empty``)
        whatever the thread count: then its description may wait until it is read."""
        return copies_with_numpy(math.prod(source.shape), self.itemsize, self.kind)


@functools.lru_cache(maxsize=64)
def _copy_describer(dtype: str, itemsize: int, stride_unit: str) -> CopyDescriber:
    """The copy describer of this dtype: one per dtype serves every plan."""
    kind = np.dtype(dtype).kind if dtype in np.sctypeDict else "V"
    return CopyDescriber(itemsize, kind, itemsize if stride_unit == "elements" else 1)


def plan_for(
    pattern: str, layout: Layout, axes_lengths: Mapping[str, Any], copy: bool | None,
    dtype: str | None, itemsize: int | None, stride_unit: str = "elements",
    op: str = "rearrange", reduction: str | None = None,
) -> Plan:
    """Parse, recipe and plan, with every PatternError given the call's context."""
    parsed = parse_first(pattern, op, layout.shape, axes_lengths)
    if copy is not None and copy is not True and copy is not False:
        raise ArgumentTypeError(f"copy must be None, True or False, got {copy!r}")
    try:
        recipe = build_recipe(parsed, len(layout.shape))
        # (plan_recipe's work, written out: this is every cold call's path)
        return plan_transform(recipe, layout, axes_lengths, op=op, reduction=reduction,
                              copy=copy, dtype=dtype, itemsize=itemsize,
                              stride_unit=stride_unit,
                              describe_copy=_copy_describer(dtype, itemsize, stride_unit)
                              if dtype is not None and itemsize else None)
    except PatternError as error:
        raise with_context(error, pattern, layout.shape, axes_lengths, op) from None


def plan_recipe(
    recipe: Recipe, layout: Layout, axes_lengths: Mapping[str, Any], copy: bool | None,
    dtype: str | None, itemsize: int | None, stride_unit: str = "elements",
    op: str = "rearrange", reduction: str | None = None,
) -> Plan:
    """The plan of a recipe made without text (einsum builds its rearranges' recipes
    directly), with the copy kernel's account of any copy step, as :func:`plan_for`
    gives it. No context is added to a PatternError: the caller knows the call."""
    describe_copy = None
    if dtype is not None and itemsize:
        describe_copy = _copy_describer(dtype, itemsize, stride_unit)
    return plan_transform(recipe, layout, axes_lengths, op=op, reduction=reduction,
                          copy=copy, dtype=dtype, itemsize=itemsize,
                          stride_unit=stride_unit, describe_copy=describe_copy)


def no_view_error(plan: Plan) -> NoViewError:
    return NoViewError(
        f"copy=False, but no view of the input can express the result: {plan.copy_reason}\n"
        f"  pattern '{shorten(plan.pattern)}', input shape {plan.input.shape}, "
        f"strides {plan.input.strides} ({plan.stride_unit})"
    )


def as_array(tensor: Any, op: str = "rearrange") -> np.ndarray | Tensor:
    """numpy arrays and Tensors as they are; lists/tuples stacked on a new first axis."""
    if isinstance(tensor, (np.ndarray, Tensor)):
        return tensor
    if isinstance(tensor, (list, tuple)):
        if not tensor:
            raise RearrangeError(f"{op}() got an empty list; expected at least one array")
        if all(isinstance(item, Tensor) for item in tensor):
            stacked = np.stack([item.numpy() for item in tensor])
            return Tensor._wrap(Storage(stacked.reshape(-1)), Layout.contiguous(stacked.shape))
        try:
            return np.stack([np.asarray(item) for item in tensor])
        except ValueError as error:
            shapes = [np.shape(item) for item in tensor]
            raise RearrangeError(
                f"{op}() stacks a list of arrays, which needs equal shapes; got {shapes}"
            ) from error
    if isinstance(tensor, np.generic):
        return np.asarray(tensor)
    raise ArgumentTypeError(
        f"{op}() takes {SUPPORTED_ARRAYS}, or a list/tuple of them; "
        f"got {type(tensor).__module__}.{type(tensor).__name__}"
    )


def keyword_axes(pattern: Any, op: str, copy: Any, out: Any,
                 axes_lengths: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """einops patterns may name axes ``copy`` or ``out``, whose lengths then arrive in
    our ``copy=`` / ``out=`` keywords: an integer there (never a bool) is the length of
    the axis of that name, if the pattern has one. Anything else is left for the usual
    checks to report."""
    try:
        parsed = parse_transform(pattern, op)
    except RearrangeError:
        return copy, out, axes_lengths
    names = {*parsed.left.names, *parsed.right.names}
    lengths = dict(axes_lengths)
    if "copy" in names and isinstance(copy, (int, np.integer)) and not isinstance(copy, bool):
        lengths["copy"], copy = copy, None
    if "out" in names and isinstance(out, (int, np.integer)) and not isinstance(out, bool):
        lengths["out"], out = out, None
    return copy, out, lengths


def canonical_lengths(axes_lengths: Mapping[str, Any]) -> Mapping[str, Any]:
    """Axis lengths as plain ints where they are integers (numpy ints included; torch's
    symbolic ints stay symbolic), so that ``3``, ``np.int64(3)`` share cache entries while ``3.0`` or
    ``True`` never hit one (``3.0 == 3`` and ``True == 1`` in Python) and reach the
    planner's error instead."""
    if _PLAIN_INT.issuperset(map(type, axes_lengths.values())):
        return axes_lengths
    canonical: dict[str, Any] = {}
    for name, value in axes_lengths.items():
        if type(value) is not int:
            value = _as_length(value)
        canonical[name] = value
    return canonical


def _as_length(value: Any) -> Any:
    """An integer-like axis length as an int; anything else wrapped so that the planner
    rejects it with the original value in the message."""
    if isinstance(value, np.integer):
        return int(value)
    if is_symbolic(value):
        return value  # a traced size stays symbolic: int() would pin the trace to its value
    if not isinstance(value, (bool, float, np.bool_)) and hasattr(type(value), "__index__"):
        return operator.index(value)  # e.g. torch.SymInt under torch.compile
    return _InvalidLength(value)


class _InvalidLength:
    """Wraps a non-integer axis length: equal to nothing else, so never a cache hit; the
    planner rejects it with the original value in the message."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def layout_from(x_or_shape: Any, strides: Sequence[int] | None, dtype: Any) -> tuple[Layout, str | None, int | None, str]:
    if isinstance(x_or_shape, Tensor):
        return x_or_shape.layout, x_or_shape.dtype.name, x_or_shape.element_size(), "elements"
    if isinstance(x_or_shape, (np.ndarray, np.generic, list)) and not is_shape(x_or_shape):
        array = as_array(x_or_shape)
        if isinstance(array, Tensor):
            return array.layout, array.dtype.name, array.element_size(), "elements"
        layout, unit = numpy_layout(array)
        return layout, array.dtype.name, array.itemsize, unit
    if not is_shape(x_or_shape):
        raise ArgumentTypeError(
            f"explain() takes {SUPPORTED_ARRAYS}, or a shape (a tuple of ints); "
            f"got {type(x_or_shape).__name__}"
        )
    shape = tuple(int(s) for s in x_or_shape)
    layout = Layout.contiguous(shape) if strides is None else Layout(shape, tuple(strides), 0)
    if dtype is None:
        return layout, None, None, "elements"
    resolved = dtype_of(dtype)
    return layout, resolved.name, resolved.itemsize, "elements"


#: Element types of torch and jax arrays that numpy does not name by itself (jax's come
#: from ml_dtypes): name -> (bytes per element, numpy's kind letter). A plan needs only
#: the name and the size; the arrays' own library copies them.
NON_NUMPY_DTYPES = {
    "bfloat16": (2, "f"), "complex32": (4, "c"),
    "float8_e4m3fn": (1, "f"), "float8_e4m3fnuz": (1, "f"), "float8_e5m2": (1, "f"),
    "float8_e5m2fnuz": (1, "f"), "float8_e8m0fnu": (1, "f"),
}


@record
class ElementType:
    """A dtype of :data:`NON_NUMPY_DTYPES`: the attributes of numpy's dtypes a plan reads."""

    name: str
    itemsize: int
    kind: str


def dtype_of(value: Any) -> np.dtype | ElementType:
    """``value`` as ``explain(shape, dtype=value)`` means it: any numpy dtype (or what
    ``np.dtype`` takes: its name, a type), a torch dtype, or a name of
    :data:`NON_NUMPY_DTYPES` (also a jax/ml_dtypes type of that name). Neither torch nor
    ml_dtypes is imported."""
    name = value if isinstance(value, str) else None
    if type(value).__module__ == "torch":      # a torch.dtype, e.g. torch.bfloat16
        name = str(value).removeprefix("torch.")
    if name not in NON_NUMPY_DTYPES:
        dtype = numpy_dtype(value if name is None else name)
        if dtype.name not in NON_NUMPY_DTYPES:
            return dtype
        name = dtype.name                       # ml_dtypes' bfloat16, registered with numpy
    size, kind = NON_NUMPY_DTYPES[name]
    return ElementType(name, size, kind)


def is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    )


def check_reduction(reduction: Any) -> str:
    """The name the plan shows for ``reduction``; raises for anything else."""
    if isinstance(reduction, str):
        if reduction not in REDUCTION_NAMES:
            raise RearrangeError(
                f"unknown reduction {reduction!r}; expected one of "
                f"{', '.join(map(repr, REDUCTION_NAMES))}, or a callable f(x, axes)")
        return reduction
    if callable(reduction):
        return getattr(reduction, "__name__", type(reduction).__name__)
    raise ArgumentTypeError(
        f"reduction must be a str or a callable f(x, axes), got {type(reduction).__name__}")


def plan_layout(op: str, layout: Layout, dtype: str | None, itemsize: int | None, unit: str,
                pattern: str, reduction: Any, copy: bool | None,
                axes_lengths: Mapping[str, Any]) -> Plan:
    """The plan of ``op`` (reduce or repeat) for one input layout."""
    axes_lengths = canonical_lengths(axes_lengths)
    parse_first(pattern, op, layout.shape, axes_lengths)
    try:
        name = check_reduction(reduction) if op == "reduce" else None
        for axis, length in axes_lengths.items():
            if type(length) is not int:
                raise PatternError(f"axis length {axis}={length!r} must be a positive integer")
    except RearrangeError as error:
        raise with_context(error, pattern, layout.shape, axes_lengths, op) from None
    plan = plan_for(pattern, layout, axes_lengths, copy, dtype, itemsize, unit,
                     op=op, reduction=name)
    if name in ("argmax", "argmin"):
        reduced = next((len(step.args) for step in plan.steps if step.op == "reduce"), 0)
        if reduced != 1:
            left = parse_transform(pattern, "reduce").left
            error = pattern_error(
                f"{name} gives the position along one reduced axis; this pattern reduces "
                f"{reduced}", pattern, left.start, max(left.end, left.start + 1))
            raise PatternError(f"{error}\n{context_line(pattern, layout.shape, axes_lengths, op)}")
    return plan


