"""The public operations: ``rearrange``, ``explain``, ``compile`` and the caches.

Data flow (see DESIGN.md): pattern text --parse--> TransformPattern (cached by text)
--build_recipe--> Recipe (cached by pattern and rank) --plan_transform--> Plan, lowered
to a runner for the input's array type (cached by pattern, shape, strides, axis lengths
and ``copy``). A warm call is one dict lookup plus the array calls of the plan.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from . import backends, kernel
from .caching import remember
from .errors import ArgumentTypeError, NoViewError, PatternError, RearrangeError
from .layout import Layout
from .parsing import _parse_transform_cached, parse_transform, shorten
from .plan import Plan, plan_transform
from .recipe import build_recipe
from .tensor import Storage, Tensor, _dtype

__all__ = ["rearrange", "explain", "compile", "cache_info", "cache_clear", "CompiledRearrange"]

Runner = Callable[[Any], Any]

# ---------------------------------------------------------------------- plan cache

_PLAN_CACHE_SIZE = 4096
# key -> entry: the plan lowered for one array type. Reads are single dict lookups
# (atomic); inserts and evictions happen under the lock, oldest first once full.
# numpy entries are ``(code, argument)``: the hot path calls ``transpose``/``reshape``
# itself for the two commonest view plans, and any other runner as ``argument(x)``.
# What a key must hold, per entry kind (each key below says which it is):
# * numpy: pattern, shape, byte strides, **dtype**, ``copy`` and canonical axis lengths.
#   The dtype because a copy runner carries a kernel plan made for one item size (same
#   shape and byte strides with another item size is another copy: a complex64 array
#   and its ``.real``), and the strided fallback scales element strides by it.
# * Tensor: pattern, layout (elements), dtype, ``copy``, canonical axis lengths.
# * ``out=``: as numpy (the entry holds a kernel plan and the output's shape).
# Axis lengths are canonical (plain ints, or a wrapper equal to nothing) before any key
# is built, so that ``3.0`` or ``True`` never hit an entry made for ``3`` or ``1``.
_plans: dict[tuple, Any] = {}
_CALL, _TRANSPOSE, _RESHAPE, _TRANSPOSE_RESHAPE, _RESHAPE_TRANSPOSE = 0, 1, 2, 3, 4
_PLAIN_INT = frozenset({int})
# pattern -> (shape, strides, dtype, copy, axis lengths, code, argument) of the last numpy
# call with that pattern: a one-entry inline cache that spares the warm path hashing the
# key. It is hit only when all of these match the call (the dtype by identity: numpy's
# builtin dtypes are singletons, any other dtype takes the general path).
_last_seen: dict[str, tuple] = {}
_ndarray = np.ndarray
_foreign_types = backends.by_type   # torch.Tensor -> the torch backend, ... (once seen)
_plans_lock = threading.Lock()
_plan_misses = 0


class CacheLevel(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


class CacheInfo(NamedTuple):
    patterns: CacheLevel   # pattern text -> parsed pattern
    recipes: CacheLevel    # (pattern, rank) -> recipe
    plans: CacheLevel      # (pattern, shape, strides, dtype, copy, axis lengths) -> lowered plan


def cache_info() -> CacheInfo:
    """Sizes and hit counts of the three caches (pattern, recipe, plan)."""
    parsed = _parse_transform_cached.cache_info()
    recipes = build_recipe.cache_info()
    return CacheInfo(
        CacheLevel(parsed.hits, parsed.misses, parsed.maxsize, parsed.currsize),
        CacheLevel(recipes.hits, recipes.misses, recipes.maxsize, recipes.currsize),
        # Plan hits are not counted on the hot path: every call that did not miss hit.
        CacheLevel(-1, _plan_misses, _PLAN_CACHE_SIZE, len(_plans)),
    )


def cache_clear() -> None:
    """Empty every cache (patterns, recipes, plans)."""
    global _plan_misses
    with _plans_lock:
        _plans.clear()
        _last_seen.clear()
        _plan_misses = 0
    _parse_transform_cached.cache_clear()
    build_recipe.cache_clear()
    backends.cache_clear()
    import sys

    from . import ops

    ops.cache_clear()
    for name in ("contraction", "packing", "shapes"):  # only those already imported
        module = sys.modules.get(f"{__package__}.{name}")
        if module is not None and hasattr(module, "cache_clear"):
            module.cache_clear()


def _remember(key: tuple, entry: Any) -> None:
    global _plan_misses
    with _plans_lock:
        _plan_misses += 1
    remember(_plans, key, entry, _PLAN_CACHE_SIZE, _plans_lock)


# ---------------------------------------------------------------------- layouts of arrays

def _numpy_layout(array: np.ndarray) -> tuple[Layout, str]:
    """The layout of a numpy array in elements, or in bytes when its byte strides are
    not whole multiples of the itemsize (views of structured fields)."""
    itemsize = array.itemsize
    if itemsize and all(s % itemsize == 0 for s in array.strides):
        return Layout(array.shape, tuple(s // itemsize for s in array.strides), 0), "elements"
    return Layout(array.shape, array.strides, 0), "bytes"


_GERUND = {"rearrange": "rearranging", "reduce": "reducing", "repeat": "repeating"}


def _context(pattern: str, shape: Sequence[int] | None, axes_lengths: Mapping[str, Any],
             op: str = "rearrange") -> str:
    lengths = shorten("{" + ", ".join(f"{k}={v!r}" for k, v in axes_lengths.items()) + "}")
    where = "" if shape is None else f"input shape {tuple(shape)}, "
    return (f"  while {_GERUND[op]} with pattern '{shorten(pattern)}': {where}"
            f"axis lengths {lengths}")


def _with_context(error: RearrangeError, pattern: str, shape: Sequence[int] | None,
                  axes_lengths: Mapping[str, Any], op: str = "rearrange") -> RearrangeError:
    """``error`` (of the same class) with the call's context line, unless it quotes the
    pattern already."""
    if f"pattern '{shorten(pattern)}'" in str(error):
        return error
    return type(error)(f"{error}\n{_context(pattern, shape, axes_lengths, op)}")


def _parse_first(pattern: Any, op: str, shape: Sequence[int] | None,
                 axes_lengths: Mapping[str, Any]) -> None:
    """The first checks of every transform, in einops' order once the array type is
    known: the pattern's type, then its syntax and meaning (no shapes needed). Only
    then come the other arguments (``copy=``, the reduction, the lengths' types) and
    the fit of the pattern to the input."""
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__} {pattern!r}")
    try:
        parse_transform(pattern, op)
    except PatternError as error:
        raise _with_context(error, pattern, shape, axes_lengths, op) from None


def _plan_for(
    pattern: str, layout: Layout, axes_lengths: Mapping[str, Any], copy: bool | None,
    dtype: str | None, itemsize: int | None, stride_unit: str = "elements",
    op: str = "rearrange", reduction: str | None = None,
) -> Plan:
    """Parse, recipe and plan, with every PatternError given the call's context."""
    _parse_first(pattern, op, layout.shape, axes_lengths)
    if copy is not None and copy is not True and copy is not False:
        raise ArgumentTypeError(f"copy must be None, True or False, got {copy!r}")
    describe_copy = None
    if dtype is not None and itemsize:
        scale = itemsize if stride_unit == "elements" else 1
        kind = np.dtype(dtype).kind if dtype in np.sctypeDict else "V"

        def describe_copy(source: Layout) -> kernel.CopyKernel:
            return kernel.plan_copy(source.shape, tuple(s * scale for s in source.strides),
                                    itemsize, kind)
    try:
        parsed = parse_transform(pattern, op)
        recipe = build_recipe(parsed, layout.ndim)
        return plan_transform(recipe, layout, axes_lengths, op=op, reduction=reduction,
                              copy=copy, dtype=dtype, itemsize=itemsize,
                              stride_unit=stride_unit, describe_copy=describe_copy)
    except PatternError as error:
        raise _with_context(error, pattern, layout.shape, axes_lengths, op) from None


def _refuse_copy(plan: Plan) -> NoViewError:
    return NoViewError(
        f"copy=False, but no view of the input can express the result: {plan.copy_reason}\n"
        f"  pattern '{shorten(plan.pattern)}', input shape {plan.input.shape}, "
        f"strides {plan.input.strides} ({plan.stride_unit})"
    )


# ---------------------------------------------------------------------- numpy lowering

def _steps_args(plan: Plan) -> tuple[tuple | None, tuple | None, tuple | None, bool, bool]:
    """(split shape, permutation, merge shape, copies before merge, copy at end)."""
    split = perm = merge = None
    copy_before_merge = copy_at_end = False
    for step in plan.steps:
        if step.op == "split":
            split = step.args
        elif step.op == "permute":
            perm = step.args
        elif step.op == "merge":
            merge = step.args
        elif step.op == "copy" and step is plan.steps[-1]:
            copy_at_end = True
        else:
            copy_before_merge = True
    return split, perm, merge, copy_before_merge, copy_at_end


def _numpy_view_runner(split, perm, merge) -> Runner:
    """numpy calls for a view plan. Without a permutation, split and merge are one
    reshape (a view exists for the whole reshape because one exists step by step)."""
    if perm is None:
        shape = merge if merge is not None else split
        if shape is None:
            return lambda x: x.view()
        return lambda x: x.reshape(shape)
    if split is None and merge is None:
        return lambda x: x.transpose(perm)
    if split is None:
        return lambda x: x.transpose(perm).reshape(merge)
    if merge is None:
        return lambda x: x.reshape(split).transpose(perm)
    return lambda x: x.reshape(split).transpose(perm).reshape(merge)


def _numpy_strided_runner(plan: Plan, view: Layout, writeable: bool = True) -> Runner:
    """The view ``view`` of the input built directly from its strides (never copies);
    ``writeable=False`` makes it read-only."""
    scale = plan.itemsize if plan.stride_unit == "elements" else 1
    shape = view.shape
    strides = tuple(s * scale for s in view.strides)
    as_strided = np.lib.stride_tricks.as_strided
    return lambda x: as_strided(x, shape, strides, subok=True, writeable=writeable)


def _numpy_entry(plan: Plan, sample: np.ndarray) -> tuple[int, Any]:
    """Lower ``plan`` to numpy calls, checked once against ``sample`` (an input with the
    plan's exact shape and strides, so numpy decides the same way on every later call).
    Returns the cache entry ``(code, argument)``."""
    if plan.copy_requested is False and not plan.is_view:
        error = _refuse_copy(plan)

        def refuse(x: np.ndarray) -> np.ndarray:
            raise error
        return _CALL, refuse

    split, perm, merge, copy_before_merge, copy_at_end = _steps_args(plan)
    copy_step = next((step for step in plan.steps if step.is_copy), None)
    if copy_before_merge:
        if copy_step.kernel is not None and copy_step.kernel.variant not in ("numpy", "empty"):
            return _CALL, _kernel_runner(_numpy_view_runner(split, perm, None), copy_step.kernel, merge)
        # numpy's final reshape of the (non-contiguous) permuted view copies it in C
        # order: for tiny and object arrays that is the cheapest copy step.
        if perm is None:
            return _RESHAPE, merge
        if split is None:
            return _TRANSPOSE_RESHAPE, (perm, merge)
        return _CALL, _numpy_view_runner(split, perm, merge)
    runner = _numpy_view_runner(split, perm, merge)
    # The view the runner must produce: the output, or what copy=True then copies.
    view = plan.steps[-2].layout if copy_at_end and len(plan.steps) > 1 else (
        plan.input if copy_at_end else plan.output)
    if not _is_expected_view(runner(sample), sample, plan, view):
        runner = _numpy_strided_runner(plan, view)
    if copy_at_end:
        if copy_step.kernel is not None and copy_step.kernel.variant not in ("numpy", "empty"):
            return _CALL, _kernel_runner(runner, copy_step.kernel, None)
        return _CALL, lambda x: runner(x).copy()
    if perm is not None and split is None and merge is None:
        return _TRANSPOSE, perm
    if perm is not None and split is not None and merge is None:
        return _RESHAPE_TRANSPOSE, (split, perm)
    if perm is not None and split is None and merge is not None:
        return _TRANSPOSE_RESHAPE, (perm, merge)
    if perm is None and (split or merge) is not None:
        return _RESHAPE, merge if merge is not None else split
    return _CALL, runner


def _kernel_runner(view_part: Runner, planned: kernel.CopyKernel, merge: tuple | None) -> Runner:
    """view_part(x) copied by the kernel into a fresh C-contiguous array (then merged).

    ``planned`` was made for the thread count in force at planning time; a later
    ``set_num_threads`` makes the kernel plan again."""
    threads = kernel.get_num_threads()

    def run(x: np.ndarray) -> np.ndarray:
        source = view_part(x)
        result = np.empty(source.shape, source.dtype)
        kernel.copy_into(result, source,
                         planned if kernel.get_num_threads() == threads else None)
        return result if merge is None else result.reshape(merge)
    return run


def _run_entry(entry: tuple[int, Any], array: np.ndarray) -> Any:
    code, argument = entry
    if code == _TRANSPOSE:
        return array.transpose(argument)
    if code == _RESHAPE:
        return array.reshape(argument)
    if code == _TRANSPOSE_RESHAPE:
        return array.transpose(argument[0]).reshape(argument[1])
    if code == _RESHAPE_TRANSPOSE:
        return array.reshape(argument[0]).transpose(argument[1])
    return argument(array)


def _is_expected_view(result: np.ndarray, source: np.ndarray, plan: Plan, view: Layout) -> bool:
    """Did numpy return the very view the plan describes (same memory, same strides)?"""
    if result.size == 0:
        return True
    scale = plan.itemsize if plan.stride_unit == "elements" else 1
    expected = tuple(s * scale for s in view.strides)
    same_strides = all(
        size == 1 or got == want
        for size, got, want in zip(result.shape, result.strides, expected)
    )
    address = result.__array_interface__["data"][0]
    return same_strides and address == source.__array_interface__["data"][0]


# ---------------------------------------------------------------------- Tensor lowering

def _tensor_runner(plan: Plan) -> Runner:
    if plan.copy_requested is False and not plan.is_view:
        error = _refuse_copy(plan)

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


# ---------------------------------------------------------------------- public API

def _as_array(tensor: Any, op: str = "rearrange") -> np.ndarray | Tensor:
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
        f"{op}() takes {backends.SUPPORTED_ARRAYS}, or a list/tuple of them; "
        f"got {type(tensor).__module__}.{type(tensor).__name__}"
    )


def rearrange(tensor: Any, pattern: str, *, copy: bool | None = None, out: Any = None,
              **axes_lengths: int) -> Any:
    """Reorder, split and merge the axes of ``tensor`` as ``pattern`` says.

    The result is a view of ``tensor`` whenever any strides can express it; otherwise a
    new C-contiguous array. ``copy=None`` (default): a view if possible, else a copy.
    ``copy=False``: a view, or :class:`NoViewError` naming the group that forced a
    copy. ``copy=True``: always a fresh C-contiguous array. ``out=``: write the result
    into this C-contiguous array of the output's shape and dtype (which must not
    overlap the input) and return it. The input is never written.

    >>> import numpy as np, rearrange as ra
    >>> x = np.zeros((2, 8, 16, 4), dtype=np.float32)
    >>> ra.rearrange(x, 'b h t d -> b t (h d)').shape
    (2, 16, 32)
    >>> np.shares_memory(ra.rearrange(x, 'b h t d -> b h (t d)'), x)
    True
    """
    if type(tensor) is _ndarray and out is None:
        try:
            seen = _last_seen.get(pattern)
        except TypeError:  # an unhashable pattern: the general path says what is wrong
            seen = None
        if seen is not None:
            shape, strides, dtype, seen_copy, seen_lengths, code, argument = seen
            if (shape == tensor.shape and strides == tensor.strides and dtype is tensor.dtype
                    and seen_copy is copy
                    and seen_lengths == axes_lengths
                    and (not axes_lengths or _PLAIN_INT.issuperset(map(type, axes_lengths.values())))):
                if code == _TRANSPOSE:
                    return tensor.transpose(argument)
                if code == _RESHAPE:
                    return tensor.reshape(argument)
                if code == _RESHAPE_TRANSPOSE:
                    return tensor.reshape(argument[0]).transpose(argument[1])
                if code == _TRANSPOSE_RESHAPE:
                    return tensor.transpose(argument[0]).reshape(argument[1])
                return argument(tensor)
    if (copy is not None and copy is not True and copy is not False) or type(out) is int:
        copy, out, axes_lengths = _keyword_axes(pattern, "rearrange", copy, out, axes_lengths)
    if out is not None:
        return _rearrange_into(tensor, pattern, copy, axes_lengths, out)
    backend = _foreign_types.get(type(tensor))
    if backend is not None:
        if axes_lengths and not _PLAIN_INT.issuperset(map(type, axes_lengths.values())):
            axes_lengths = _canonical_lengths(axes_lengths)
        return backends.run_transform(backend, tensor, "rearrange", pattern, None, copy,
                                      axes_lengths)
    return _rearrange_general(tensor, pattern, copy, axes_lengths)


def _keyword_axes(pattern: Any, op: str, copy: Any, out: Any,
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


def _rearrange_general(tensor: Any, pattern: str, copy: bool | None,
                       axes_lengths: Mapping[str, Any]) -> Any:
    """The plan cache lookup (and, on a miss, planning) for every input type."""
    if type(tensor) is not _ndarray and not isinstance(tensor, (np.ndarray, Tensor)):
        foreign = backends.foreign_input(tensor, "rearrange")
        if foreign is not None:
            return backends.run_transform(*foreign, "rearrange", pattern, None, copy,
                                          _canonical_lengths(axes_lengths))
    array = tensor if type(tensor) is _ndarray else _as_array(tensor)
    if not isinstance(array, np.ndarray):
        return _rearrange_other(array, pattern, copy, axes_lengths)
    axes_lengths = _canonical_lengths(axes_lengths)
    key = (pattern, array.shape, array.strides, array.dtype, copy, *axes_lengths.items())
    if type(array) is not _ndarray:
        key = ("subclass", type(array), *key)
    try:
        entry = _plans.get(key)
    except TypeError:  # unhashable pattern or axis lengths: the cold path says which
        entry = None
    if entry is None:
        entry = _numpy_plan_entry(key, array, pattern, copy, axes_lengths)
    if type(array) is _ndarray and type(pattern) is str:
        if len(_last_seen) >= _PLAN_CACHE_SIZE:
            _last_seen.clear()
        _last_seen[pattern] = (array.shape, array.strides, array.dtype, copy,
                               dict(axes_lengths), *entry)
    return _run_entry(entry, array)


def _canonical_lengths(axes_lengths: Mapping[str, Any]) -> Mapping[str, Any]:
    """Axis lengths as plain ints where they are integers (numpy ints and torch's symbolic
    ints included), so that ``3``, ``np.int64(3)`` share cache entries while ``3.0`` or
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


def _rearrange_into(tensor: Any, pattern: str, copy: bool | None,
                    axes_lengths: Mapping[str, Any], out: Any) -> Any:
    """``rearrange(..., out=out)``: the plan's views, then one copy into ``out``."""
    if copy is False:
        _parse_first(pattern, "rearrange", None, axes_lengths)     # the pattern comes first
        raise ArgumentTypeError("copy=False asks for a view, out= for a copy into out; pass one")
    if not isinstance(tensor, (np.ndarray, Tensor, list, tuple)) and backends.backend_for(tensor):
        raise ArgumentTypeError(
            f"out= writes into a numpy array or a rearrange.Tensor, for an input of the same "
            f"type; for a {type(tensor).__module__}.{type(tensor).__name__} input, copy the "
            f"returned array into yours (out.copy_(...) for torch)")
    array = _as_array(tensor)
    axes_lengths = _canonical_lengths(axes_lengths)     # plain ints: hashable cache keys
    if isinstance(array, Tensor):
        return _tensor_into(array, pattern, axes_lengths, out)
    if not isinstance(out, np.ndarray):
        raise ArgumentTypeError(
            f"out must be a numpy array for a numpy input (a rearrange.Tensor for a Tensor "
            f"input); got {type(out).__module__}.{type(out).__name__}")
    key = ("out", pattern, array.shape, array.strides, array.dtype, *axes_lengths.items())
    try:
        entry = _plans.get(key)
    except TypeError:
        entry = None
    if entry is None:
        entry = _numpy_into_entry(array, pattern, axes_lengths)
        _remember(key, entry)
    _check_out(out, entry.output_shape, array.dtype)
    source = entry.view(array)
    if np.may_share_memory(out, source) and np.shares_memory(out, source):
        raise RearrangeError("out overlaps the input; rearrange never writes to its input")
    if kernel.get_num_threads() != entry.threads:
        kernel.copy_into(out.reshape(entry.copy_shape), source)     # plans for the new count
    elif entry.kernel.variant == "numpy":       # tiny (or object) arrays: numpy's loop
        np.copyto(out.reshape(entry.copy_shape), source, casting="no")
    else:
        kernel.copy_into(out.reshape(entry.copy_shape), source, entry.kernel)
    return out


@dataclass(frozen=True, slots=True)
class _IntoEntry:
    """How ``out=`` runs for one input layout: ``view`` makes the permuted view of the
    input (every step before the merge, never a copy), which ``kernel`` copies into
    ``out`` seen with ``copy_shape``; ``kernel`` was planned under the thread setting
    ``threads`` (it may itself use fewer)."""
    output_shape: tuple[int, ...]
    copy_shape: tuple[int, ...]
    view: Runner
    kernel: kernel.CopyKernel
    threads: int


def _numpy_into_entry(array: np.ndarray, pattern: str,
                      axes_lengths: Mapping[str, Any]) -> _IntoEntry:
    layout, unit = _numpy_layout(array)
    plan = _plan_for(pattern, layout, axes_lengths, None, array.dtype.name, array.itemsize, unit)
    split, perm, _, _, _ = _steps_args(plan)
    before_merge = _before_merge(plan)
    view = _numpy_view_runner(split, perm, None)
    sample = view(array)
    if not _is_expected_view(sample, array, plan, before_merge):
        view = _numpy_strided_runner(plan, before_merge)
        sample = view(array)
    kind = "O" if array.dtype.hasobject else array.dtype.kind
    threads = kernel.get_num_threads()
    copy_plan = kernel.plan_copy(sample.shape, sample.strides, array.itemsize, kind, threads)
    return _IntoEntry(plan.output.shape, before_merge.shape, view, copy_plan, threads)


def _before_merge(plan: Plan) -> Layout:
    """The permuted view: the input split and permuted, before any merge (all views)."""
    return next((step.layout for step in reversed(plan.steps)
                 if step.op in ("split", "permute")), plan.input)


def _check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if out.shape != shape or out.dtype != dtype:
        raise RearrangeError(
            f"out has shape {tuple(out.shape)} and dtype {out.dtype}; the result has shape "
            f"{shape} and dtype {dtype}")
    if not out.flags.c_contiguous:
        raise RearrangeError("out must be C-contiguous: the result is written in row-major order")
    if not out.flags.writeable:
        raise RearrangeError("out is read-only")


def _tensor_into(array: Tensor, pattern: str, axes_lengths: Mapping[str, Any], out: Any) -> Any:
    if not isinstance(out, Tensor):
        raise ArgumentTypeError(
            f"out must be a rearrange.Tensor for a rearrange.Tensor input, got {type(out).__name__}")
    layout, itemsize = array.layout, array.element_size()
    key = ("out", pattern, layout, array.dtype, *axes_lengths.items())
    try:
        plan = _plans.get(key)
    except TypeError:
        plan = None
    if plan is None:
        plan = _plan_for(pattern, layout, axes_lengths, None, array.dtype.name, itemsize, "elements")
        _remember(key, plan)
    target = out.numpy()        # out's memory as numpy sees it: checked like a numpy out
    _check_out(target, plan.output.shape, array.dtype)
    before_merge = _before_merge(plan)
    source = array._with(before_merge).numpy()
    if np.may_share_memory(target, source) and np.shares_memory(target, source):
        raise RearrangeError("out overlaps the input; rearrange never writes to its input")
    kernel.copy_into(target.reshape(before_merge.shape), source)
    return out


def _numpy_plan_entry(key: tuple, array: np.ndarray, pattern: str, copy: bool | None,
                      axes_lengths: Mapping[str, Any]) -> tuple[int, Any]:
    try:
        hash(key)
    except TypeError:
        if not isinstance(pattern, str):
            raise ArgumentTypeError(
                f"pattern must be a str, got {type(pattern).__name__} {pattern!r}") from None
        raise ArgumentTypeError(
            f"axis lengths must be integers, got {dict(axes_lengths)!r}"
        ) from None
    layout, unit = _numpy_layout(array)
    plan = _plan_for(pattern, layout, axes_lengths, copy, array.dtype.name, array.itemsize, unit)
    entry = _numpy_entry(plan, array)
    _remember(key, entry)
    return entry


def _rearrange_other(tensor: Any, pattern: str, copy: bool | None,
                     axes_lengths: Mapping[str, Any]) -> Any:
    """rearrange.Tensor inputs (later: torch, dask, array-API)."""
    layout = tensor.layout
    key = ("tensor", pattern, layout, tensor.dtype, copy, *axes_lengths.items())
    runner = _plans.get(key)
    if runner is None:
        plan = _plan_for(pattern, layout, axes_lengths, copy, tensor.dtype.name, tensor.element_size())
        runner = _tensor_runner(plan)
        _remember(key, runner)
    return runner(tensor)


def _layout_from(x_or_shape: Any, strides: Sequence[int] | None, dtype: Any) -> tuple[Layout, str | None, int | None, str]:
    if isinstance(x_or_shape, Tensor):
        return x_or_shape.layout, x_or_shape.dtype.name, x_or_shape.element_size(), "elements"
    if isinstance(x_or_shape, (np.ndarray, np.generic, list)) and not _is_shape(x_or_shape):
        array = _as_array(x_or_shape)
        if isinstance(array, Tensor):
            return array.layout, array.dtype.name, array.element_size(), "elements"
        layout, unit = _numpy_layout(array)
        return layout, array.dtype.name, array.itemsize, unit
    if not _is_shape(x_or_shape):
        raise ArgumentTypeError(
            f"explain() takes {backends.SUPPORTED_ARRAYS}, or a shape (a tuple of ints); "
            f"got {type(x_or_shape).__name__}"
        )
    shape = tuple(int(s) for s in x_or_shape)
    layout = Layout.contiguous(shape) if strides is None else Layout(shape, tuple(strides), 0)
    if dtype is None:
        return layout, None, None, "elements"
    resolved = _dtype(dtype)
    return layout, resolved.name, resolved.itemsize, "elements"


def _no_lengths(op: str, axes_lengths: Mapping[str, Any]) -> None:
    if axes_lengths:
        raise ArgumentTypeError(
            f"explain(op={op!r}) takes no axis lengths; got {', '.join(axes_lengths)}")


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    )


_EXPLAINED_OPS = ("rearrange", "reduce", "repeat", "einsum", "pack", "unpack",
                  "parse_shape", "check_shape")


def explain(x_or_shape: Any, pattern: str, *, op: str = "rearrange", reduction: Any = None,
            strides: Sequence[int] | None = None, dtype: Any = None,
            copy: bool | None = None, packed_shapes: Sequence[Sequence[int]] | None = None,
            **axes_lengths: int) -> Any:
    """The plan an operation follows for this input, without touching any data.

    ``x_or_shape`` is an array (numpy, ``rearrange.Tensor``, torch, dask, array API) or
    a shape; with a shape, ``strides`` (in elements, default C-contiguous) and ``dtype``
    describe the rest. ``op`` is ``"rearrange"`` (default), ``"reduce"`` (with
    ``reduction=``), ``"repeat"``, ``"einsum"`` and ``"pack"`` (``x_or_shape`` a list
    of arrays or shapes), ``"unpack"`` (with ``packed_shapes=``), ``"parse_shape"`` or
    ``"check_shape"``.

    >>> import rearrange as ra
    >>> plan = ra.explain((2, 8, 128, 64), 'b h t d -> b t (h d)', dtype='float32')
    >>> plan.is_view, plan.output.shape
    (False, (2, 128, 512))
    >>> plan.to_source('torch')
    'x.permute(0, 2, 1, 3).reshape(2, 128, 512)'
    >>> ra.explain((2, 3, 4), 'b h w -> b w', op='reduce', reduction='mean').to_source()
    'x.transpose(0, 2, 1).mean(axis=(2,))'
    """
    if op not in _EXPLAINED_OPS:
        raise RearrangeError(f"explain: op must be one of {', '.join(map(repr, _EXPLAINED_OPS))}, "
                             f"got {op!r}")
    if op not in ("rearrange", "repeat") and copy is not None:
        raise ArgumentTypeError(f"copy= applies to op='rearrange' or 'repeat', not op={op!r}")
    if op != "reduce" and reduction is not None:
        raise ArgumentTypeError(f"reduction= applies to op='reduce', not op={op!r}")
    if op != "unpack" and packed_shapes is not None:
        raise ArgumentTypeError(f"packed_shapes= applies to op='unpack', not op={op!r}")
    if op == "einsum":
        from .contraction import explain_einsum

        return explain_einsum(x_or_shape, pattern, strides=strides, dtype=dtype, **axes_lengths)
    if op in ("pack", "unpack", "parse_shape", "check_shape") and strides is not None:
        raise ArgumentTypeError(f"strides= does not apply to op={op!r}")
    if op == "pack":
        from .packing import explain_pack

        _no_lengths(op, axes_lengths)
        return explain_pack(x_or_shape, pattern, dtype=dtype)
    if op == "unpack":
        from .packing import explain_unpack

        _no_lengths(op, axes_lengths)
        if packed_shapes is None:
            raise ArgumentTypeError("explain(op='unpack') needs packed_shapes=")
        return explain_unpack(x_or_shape, packed_shapes, pattern, dtype=dtype)
    if op in ("parse_shape", "check_shape"):
        from .shapes import explain_shape

        if dtype is not None:
            raise ArgumentTypeError(f"dtype= does not apply to op={op!r}")
        if op == "parse_shape":
            _no_lengths(op, axes_lengths)
        return explain_shape(x_or_shape, pattern, **axes_lengths)
    if not isinstance(x_or_shape, (np.ndarray, Tensor)) and not _is_shape(x_or_shape):
        foreign = backends.foreign_input(x_or_shape, "explain")
        if foreign is not None:
            return backends.plan_for_array(*foreign, op, pattern, reduction, copy, axes_lengths)
    if op != "rearrange":
        from .ops import explain_transform

        return explain_transform(op, x_or_shape, pattern, reduction=reduction, strides=strides,
                                 dtype=dtype, copy=copy, **axes_lengths)
    layout, dtype_name, itemsize, unit = _layout_from(x_or_shape, strides, dtype)
    return _plan_for(pattern, layout, axes_lengths, copy, dtype_name, itemsize, unit)


@dataclass(frozen=True)
class CompiledRearrange:
    """A pattern parsed once, with fixed axis lengths: call it like ``rearrange``.

    >>> import numpy as np, rearrange as ra
    >>> to_heads = ra.compile('b t (h d) -> b h t d', h=4)
    >>> to_heads(np.zeros((2, 16, 32))).shape
    (2, 4, 16, 8)
    """

    pattern: str
    axes_lengths: tuple[tuple[str, int], ...]

    def __call__(self, tensor: Any, *, copy: bool | None = None) -> Any:
        return rearrange(tensor, self.pattern, copy=copy, **dict(self.axes_lengths))

    def explain(self, x_or_shape: Any, *, strides: Sequence[int] | None = None,
                dtype: Any = None, copy: bool | None = None) -> Plan:
        return explain(x_or_shape, self.pattern, strides=strides, dtype=dtype, copy=copy,
                       **dict(self.axes_lengths))

    def __repr__(self) -> str:
        lengths = "".join(f", {k}={v}" for k, v in self.axes_lengths)
        return f"rearrange.compile({self.pattern!r}{lengths})"


def compile(pattern: str, **axes_lengths: int) -> CompiledRearrange:  # noqa: A001 - the public name
    """Parse ``pattern`` now (errors surface here) and return a reusable callable."""
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__}")
    try:
        parse_transform(pattern, "rearrange")
    except PatternError as error:
        raise PatternError(f"{error}\n{_context(pattern, None, axes_lengths)}") from None
    for name, length in axes_lengths.items():
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length <= 0:
            raise PatternError(f"axis length {name}={length!r} must be a positive integer\n"
                               f"{_context(pattern, None, axes_lengths)}")
    return CompiledRearrange(pattern, tuple((k, int(v)) for k, v in axes_lengths.items()))
