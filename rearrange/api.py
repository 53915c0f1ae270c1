"""The front door: ``rearrange``, ``reduce``, ``repeat``, ``explain``, ``compile``, their
argument checks and plan caches (``pack``, ``einsum`` and ``parse_shape`` have theirs in
their own modules).

Data flow (docs/architecture.md): pattern text --parse--> TransformPattern (cached by
text) --build_recipe--> Recipe (cached by pattern and rank) --plan_transform--> Plan,
lowered by the input's backend (:mod:`rearrange.backends`) to a runner, cached by
pattern, shape, strides, dtype, ``copy`` and axis lengths. A warm call is one dict
lookup plus the array calls of the plan.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Mapping, NamedTuple, Sequence, overload

import numpy as np

from . import backends, front, ops
from .backends import ndarray
from .backends import tensor as tensor_backend
from .backends.ndarray import CALL, RESHAPE, RESHAPE_TRANSPOSE, TRANSPOSE, TRANSPOSE_RESHAPE
from .caching import PLANS, CacheLevel
from .calls import (ArrayT, as_array, canonical_lengths, context_line, is_shape,
                    keyword_axes, layout_from, numpy_layout, parse_first, plan_for)
from .errors import ArgumentTypeError, PatternError, RearrangeError
from . import parsing
from .front import run_transform
from .parsing import parse_transform
from .plan import Plan
from .recipe import build_recipe
from .records import record
from .tensor import Tensor

__all__ = ["rearrange", "reduce", "repeat", "explain", "compile_pattern", "cache_info", "cache_clear",
           "CompiledRearrange"]

Runner = Callable[[Any], Any]

# ---------------------------------------------------------------------- plan cache

# Entries of the one plan cache (:data:`rearrange.caching.PLANS`) made here, by key:
# * ``("rearrange", pattern, shape, byte strides, dtype, copy, *lengths)`` — numpy
#   arrays: ``(code, first, second)``; the hot path calls ``transpose``/``reshape``
#   itself for the commonest view plans, and any other runner as ``first(x)``. The dtype
#   because a copy runner carries a kernel plan made for one item size (same shape and
#   byte strides with another item size is another copy: a complex64 array and its
#   ``.real``), and the strided fallback scales element strides by it.
# * ``("rearrange", "tensor", pattern, layout (elements), dtype, copy, *lengths)`` —
#   rearrange.Tensor: a runner.
# * ``("rearrange-out", ...)`` — ``out=``: as numpy (the entry holds a kernel plan and
#   the output's shape), or the Tensor's layout and dtype.
# Axis lengths are canonical (plain ints, or a wrapper equal to nothing) before any key
# is built, so that ``3.0`` or ``True`` never hit an entry made for ``3`` or ``1``.
# ``PLANS.last``: pattern -> the last numpy call with that pattern, a one-entry inline
# index that spares the warm path hashing the key: ``(shape, strides, dtype, copy, axis
# lengths, how, first, second)``, the entry's numpy calls in the inline form below
# (:func:`_inline_record`). It is hit only when all of these match the call: shape and
# strides equal, the dtype identical (numpy's builtin dtypes are singletons; any other
# dtype takes the general path), ``copy`` identical (``1`` is not ``True``), and the
# axis lengths equal and every one a plain int (``3.0``, ``True``, ``np.int64(3)`` equal
# 3 or 1 but take the general path, which canonicalises or refuses them).
_PLANS = PLANS
_last_seen = PLANS.last
_PLAN_ENTRIES = PLANS.entries   # (never rebound: PlanCache.clear empties it in place)
_ndarray = np.ndarray


class CacheInfo(NamedTuple):
    patterns: CacheLevel   # (kind, pattern text) -> parsed pattern
    recipes: CacheLevel    # (pattern, rank) -> recipe
    plans: CacheLevel      # (operation, input kind, pattern, layouts, dtypes, options,
                           # axis lengths) -> lowered plan, for every operation
    kernel: CacheLevel     # source layout -> the copy kernel's plan and its lowering


def cache_info() -> CacheInfo:
    """Sizes and hit counts of the four caches: parsed patterns, recipes, plans (every
    operation, every array type) and the copy kernel's."""
    from .kernel import cache_info as kernel_cache_info

    parsed = parsing.cache_info()
    recipes = build_recipe.cache_info()
    return CacheInfo(
        CacheLevel(parsed.hits, parsed.misses, parsed.maxsize, parsed.currsize),
        CacheLevel(recipes.hits, recipes.misses, recipes.maxsize, recipes.currsize),
        PLANS.info(),
        kernel_cache_info(),
    )


def cache_clear() -> None:
    """Empty every cache: parsed patterns, recipes, plans and the copy kernel's."""
    from .kernel import cache_clear as kernel_cache_clear

    PLANS.clear()
    parsing.cache_clear()
    build_recipe.cache_clear()
    kernel_cache_clear()


# ---------------------------------------------------------------------- public API


@overload
def rearrange(tensor: list[ArrayT] | tuple[ArrayT, ...], pattern: str, *,
              copy: bool | None = None, out: ArrayT | None = None,
              **axes_lengths: int) -> ArrayT: ...
@overload
def rearrange(tensor: ArrayT, pattern: str, *, copy: bool | None = None,
              out: ArrayT | None = None, **axes_lengths: int) -> ArrayT: ...
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
            shape, strides, dtype, seen_copy, seen_lengths, how, first, second = \
                _last_seen[pattern]
        except (KeyError, TypeError):   # not seen, or unhashable: the general path says what is wrong
            how = None
        if (how is not None and shape == tensor.shape and strides == tensor.strides
                and dtype is tensor.dtype and seen_copy is copy
                and (not axes_lengths if seen_lengths is None
                     else _same_plain_lengths(seen_lengths, axes_lengths))):
            _PLANS.hits += 1
            # (the likeliest first; the view plans' forms before the small copies')
            if how == _RUN_T:
                return tensor.T
            if how == _RUN_RESHAPE:
                return tensor.reshape(first)
            if how == _RUN_TRANSPOSE:
                return tensor.transpose(first)
            if how == _RUN_RESHAPE_MT:
                return tensor.reshape(first).mT
            if how == _RUN_MT:
                return tensor.mT
            if how == _RUN_TRANSPOSE_RESHAPE:
                return tensor.transpose(first).reshape(second)
            if how == _RUN_T_RESHAPE:
                return tensor.T.reshape(first)
            if how == _RUN_RESHAPE_TRANSPOSE:
                return tensor.reshape(first).transpose(second)
            if how == _RUN_RESHAPE_T:
                return tensor.reshape(first).T
            if how == _RUN_MT_RESHAPE:
                return tensor.mT.reshape(first)
            return first(tensor)
    if type(pattern) is str and ("," in pattern or pattern in _NOTATION_PATTERNS):
        return _rearrange_notation(tensor, pattern, copy, out, axes_lengths)
    if (copy is not None and copy is not True and copy is not False) or type(out) is int:
        copy, out, axes_lengths = keyword_axes(pattern, "rearrange", copy, out, axes_lengths)
    try:
        if out is not None:
            return _rearrange_into(tensor, pattern, copy, axes_lengths, out)
        if type(tensor) is not _ndarray:
            return run_transform("rearrange", tensor, pattern, None, copy, axes_lengths)
        return _rearrange_numpy(tensor, pattern, copy, axes_lengths)
    except PatternError:
        # a diagonal ('a a -> a') or a '+' without a comma: einx's notation, which the
        # transform parser refuses (rearrange/concatenation.py)
        from .concatenation import is_notation_rearrange

        if not is_notation_rearrange(pattern):
            raise
    if len(_NOTATION_PATTERNS) >= 1024:
        _NOTATION_PATTERNS.clear()
    _NOTATION_PATTERNS.add(pattern)
    return _rearrange_notation(tensor, pattern, copy, out, axes_lengths)


# Patterns without a comma that only the notation reads (diagonals), once seen: later
# calls go straight to it rather than through the transform parser's refusal.
_NOTATION_PATTERNS: set[str] = set()


def _rearrange_notation(tensor: Any, pattern: str, copy: Any, out: Any,
                        axes_lengths: Mapping[str, Any]) -> Any:
    if out is not None:
        raise ArgumentTypeError("out= is not supported with a notation pattern (',', '+' "
                                "or a repeated axis)")
    if copy is not None and copy is not True and copy is not False:
        raise ArgumentTypeError(f"copy must be None, True or False, got {copy!r}")
    return (_notation_runner or _load_notation())(tensor, pattern, copy, axes_lengths)


_notation_runner: Callable[..., Any] | None = None


def _load_notation() -> Callable[..., Any]:
    """rearrange/concatenation.py's entry, imported on the first notation call."""
    global _notation_runner
    from .concatenation import rearrange_notation

    _notation_runner = rearrange_notation
    return rearrange_notation


def _rearrange_numpy(array: np.ndarray, pattern: str, copy: bool | None,
                     axes_lengths: Mapping[str, Any]) -> Any:
    """numpy's own warm path behind the door: the plan cache's entry for this layout
    (``(code, first, second)``), remembered in the inline index once it is found there."""
    # Canonical lengths before any key: 3.0 or True must never hit an entry made for 3 or
    # 1 (they are equal and hash alike), so the planner sees and refuses them.
    axes_lengths = canonical_lengths(axes_lengths) if axes_lengths else axes_lengths
    shape, strides = array.shape, array.strides   # (each read makes a new tuple)
    key = ("rearrange", pattern, shape, strides, array.dtype, copy, *axes_lengths.items())
    # copy=1 equals copy=True and hashes alike: only a real flag looks the key up (the
    # planner refuses any other value). A key that cannot be hashed is the caller's
    # pattern or axis lengths, which the error names before anything else is checked.
    entry = None
    if copy is None or copy is True or copy is False:
        try:
            entry = _PLAN_ENTRIES.get(key)
        except TypeError:
            _check_hashable(key, pattern, axes_lengths)
    else:
        _check_hashable(key, pattern, axes_lengths)
    if entry is None:
        # a pattern enters the inline index at its second call with this layout (from
        # the plan cache, below): a pattern met once costs the index nothing
        _PLANS.misses += 1
        return ndarray.run_entry(_numpy_plan_entry(key, array, pattern, copy, axes_lengths),
                                 array)
    _PLANS.hits += 1
    if type(pattern) is str:
        # (axes_lengths: the call's own ** dict, or canonical_lengths' new one: kept as is)
        _PLANS.remember_last(pattern, (shape, strides, array.dtype, copy,
                                       axes_lengths if axes_lengths else None,
                                       *_inline_record(*entry)))
    return ndarray.run_entry(entry, array)


def _same_plain_lengths(seen: dict[str, int], given: Mapping[str, Any]) -> bool:
    """Are ``given`` the axis lengths ``seen`` (plain ints), each one a plain int too?
    (``3.0``, ``True`` and ``np.int64(3)`` equal 3 or 1, and take the general path.)"""
    if seen != given:
        return False
    for length in given.values():
        if type(length) is not int:
            return False
    return True


# How the inline index runs an entry: numpy's own calls, with a permutation that
# reverses every axis as ``.T`` and one that swaps the last two as ``.mT`` (attribute
# reads: the same views as ``transpose(perm)``, in half its time); anything else
# (``_RUN_CALL``) through the entry's runner.
(_RUN_CALL, _RUN_T, _RUN_MT, _RUN_TRANSPOSE, _RUN_RESHAPE, _RUN_RESHAPE_T, _RUN_RESHAPE_MT,
 _RUN_RESHAPE_TRANSPOSE, _RUN_T_RESHAPE, _RUN_MT_RESHAPE, _RUN_TRANSPOSE_RESHAPE) = range(11)


# ``ndarray.mT`` is numpy 2's (the package takes numpy >= 1.26)
_HAS_MT = hasattr(np.ndarray, "mT")


# Per rank (numpy's arrays have at most 64 dims): the permutation that reverses every
# axis, and the one that swaps the last two of at least three (None below three).
_REVERSAL = tuple(tuple(range(rank - 1, -1, -1)) for rank in range(65))
_LAST_TWO_SWAPPED = tuple((*range(rank - 2), rank - 1, rank - 2) if rank > 2 else None
                          for rank in range(65))


def _permutation_kind(perm: tuple[int, ...]) -> str:
    """"T" when ``perm`` reverses every axis, "mT" when it swaps the last two of at
    least three (two: that is "T") and keeps the others (numpy 2), else "transpose"."""
    rank = len(perm)
    if rank > 64:
        return "transpose"
    if perm == _REVERSAL[rank]:
        return "T"
    if _HAS_MT and perm == _LAST_TWO_SWAPPED[rank]:
        return "mT"
    return "transpose"


def _inline_record(code: int, first: Any, second: Any) -> tuple[int, Any, Any]:
    """``(how, first, second)``: the plan cache entry ``(code, first, second)`` of
    :mod:`rearrange.backends.ndarray` in the inline index's form (same results)."""
    if code == TRANSPOSE:
        kind = _permutation_kind(first)
        if kind == "T":
            return _RUN_T, None, None
        if kind == "mT":
            return _RUN_MT, None, None
        return _RUN_TRANSPOSE, first, None
    if code == RESHAPE:
        return _RUN_RESHAPE, first, None
    if code == RESHAPE_TRANSPOSE:     # first: the shape, second: the permutation
        kind = _permutation_kind(second)
        if kind == "T":
            return _RUN_RESHAPE_T, first, None
        if kind == "mT":
            return _RUN_RESHAPE_MT, first, None
        return _RUN_RESHAPE_TRANSPOSE, first, second
    if code == TRANSPOSE_RESHAPE:     # first: the permutation, second: the shape
        kind = _permutation_kind(first)
        if kind == "T":
            return _RUN_T_RESHAPE, second, None
        if kind == "mT":
            return _RUN_MT_RESHAPE, second, None
        return _RUN_TRANSPOSE_RESHAPE, first, second
    if code == CALL:
        return _RUN_CALL, first, None
    return _RUN_CALL, partial(ndarray.run_entry, (code, first, second)), None   # any other code


def _rearrange_into(tensor: Any, pattern: str, copy: bool | None,
                    axes_lengths: Mapping[str, Any], out: Any) -> Any:
    """``rearrange(..., out=out)``: the plan's views, then one copy into ``out``."""
    if copy is False:
        parse_first(pattern, "rearrange", None, axes_lengths)     # the pattern comes first
        raise ArgumentTypeError("copy=False asks for a view, out= for a copy into out; pass one")
    if not isinstance(tensor, (np.ndarray, Tensor, list, tuple)) and backends.backend_for(tensor):
        raise ArgumentTypeError(
            f"out= writes into a numpy array or a rearrange.Tensor, for an input of the same "
            f"type; for a {type(tensor).__module__}.{type(tensor).__name__} input, copy the "
            f"returned array into yours (out.copy_(...) for torch)")
    array = as_array(tensor)
    axes_lengths = canonical_lengths(axes_lengths)     # plain ints: hashable cache keys
    if isinstance(array, Tensor):
        return _tensor_into(array, pattern, axes_lengths, out)
    if not isinstance(out, np.ndarray):
        raise ArgumentTypeError(
            f"out must be a numpy array for a numpy input (a rearrange.Tensor for a Tensor "
            f"input); got {type(out).__module__}.{type(out).__name__}")
    key = ("rearrange-out", pattern, array.shape, array.strides, array.dtype,
           *axes_lengths.items())
    entry = _PLANS.get(key)
    if entry is None:
        entry = front.lower_miss(_INTO["numpy"], ndarray, array, pattern, axes_lengths, None,
                                 key)
    ndarray.check_out(out, entry.output_shape, array.dtype)
    return ndarray.run_into(entry, array, out)


def _tensor_into(array: Tensor, pattern: str, axes_lengths: Mapping[str, Any], out: Any) -> Any:
    if not isinstance(out, Tensor):
        raise ArgumentTypeError(
            f"out must be a rearrange.Tensor for a rearrange.Tensor input, got {type(out).__name__}")
    layout = array.layout
    key = ("rearrange-out", "tensor", pattern, layout, array.dtype, *axes_lengths.items())
    plan = _PLANS.get(key)
    if plan is None:
        plan = front.lower_miss(_INTO["tensor"], tensor_backend, array, pattern, axes_lengths,
                                None, key)
    target = out.numpy()        # out's memory as numpy sees it: checked like a numpy out
    ndarray.check_out(target, plan.output.shape, array.dtype)
    tensor_backend.run_into(plan, array, target)
    return out


def _into_operation(kind: str, plan: Callable[..., Any]) -> front.Operation:
    """``rearrange(..., out=)`` of a numpy array or a Tensor as the door's miss
    (:func:`front.lower_miss`) takes it: the entry is planned for the input alone; its
    call — ``out`` checked, then written — is :func:`_rearrange_into`'s and
    :func:`_tensor_into`'s, after their own lookup of this key."""
    def key(backend: Any, array: Any, pattern: Any, axes_lengths: Mapping[str, Any],
            extras: Any) -> tuple:
        if kind == "tensor":
            return ("rearrange-out", "tensor", pattern, array.layout, array.dtype,
                    *axes_lengths.items())
        return ("rearrange-out", pattern, array.shape, array.strides, array.dtype,
                *axes_lengths.items())
    return front.Operation(
        name="rearrange", parse_kind="transform",
        inputs=lambda array: (tensor_backend if kind == "tensor" else ndarray, array),
        key=key, plan=plan, lower=lambda backend, entry, array, axes_lengths, extras: entry,
        context=front.TRANSFORMS["rearrange"].context, traced=lambda *call: False)


#: out= for numpy arrays (an ``IntoEntry``) and for Tensors (the plan), through the
#: door's miss.
_INTO = {
    "numpy": _into_operation("numpy", lambda backend, array, pattern, axes_lengths, extras:
                             ndarray.into_entry(array, pattern, axes_lengths)),
    "tensor": _into_operation("tensor", lambda backend, array, pattern, axes_lengths, extras:
                              plan_for(pattern, array.layout, axes_lengths, None,
                                       array.dtype.name, array.element_size(), "elements")),
}


def _check_hashable(key: tuple, pattern: Any, axes_lengths: Mapping[str, Any]) -> None:
    """A plan cache key that cannot be hashed is the caller's pattern or axis lengths:
    the error says which (never a bare TypeError from the cache)."""
    try:
        hash(key)
    except TypeError:
        if not isinstance(pattern, str):
            raise ArgumentTypeError(
                f"pattern must be a str, got {type(pattern).__name__} {pattern!r}") from None
        raise ArgumentTypeError(
            f"axis lengths must be integers, got {dict(axes_lengths)!r}"
        ) from None


def _numpy_key(backend: Any, array: np.ndarray, pattern: Any, axes_lengths: Mapping[str, Any],
               copy: bool | None) -> tuple:
    """numpy rearrange's plan cache key, as :func:`_rearrange_numpy` writes it out."""
    return ("rearrange", pattern, array.shape, array.strides, array.dtype, copy,
            *axes_lengths.items())


def _numpy_plan(backend: Any, array: np.ndarray, pattern: Any, axes_lengths: Mapping[str, Any],
                copy: bool | None) -> Plan:
    # (the key is hashable: _rearrange_numpy, the one caller, checked it)
    layout, unit = numpy_layout(array)
    return plan_for(pattern, layout, axes_lengths, copy, ndarray.dtype_name(array.dtype),
                    array.itemsize, unit)


#: numpy's rearrange as the door takes it: its entries are ``(code, first, second)``
#: that :func:`rearrange.backends.ndarray.run_entry` runs (its warm path and the inline
#: index are :func:`_rearrange_numpy`'s; a miss is the door's :func:`front.lower_miss`).
NUMPY_REARRANGE = front.Operation(
    name="rearrange", parse_kind="transform", inputs=lambda array: (ndarray, array),
    key=_numpy_key, plan=_numpy_plan,
    lower=lambda backend, plan, array, axes_lengths, copy: ndarray.lower_rearrange(plan, array),
    context=front.TRANSFORMS["rearrange"].context, traced=lambda *call: False,
    call=lambda entry, array: ndarray.run_entry(entry, array))


def _numpy_plan_entry(key: tuple, array: np.ndarray, pattern: str, copy: bool | None,
                      axes_lengths: Mapping[str, Any]) -> tuple[int, Any]:
    return front.lower_miss(NUMPY_REARRANGE, ndarray, array, pattern, axes_lengths, copy, key)


def _no_lengths(op: str, axes_lengths: Mapping[str, Any]) -> None:
    if axes_lengths:
        raise ArgumentTypeError(
            f"explain(op={op!r}) takes no axis lengths; got {', '.join(axes_lengths)}")


def _notation_only(pattern: Any) -> bool:
    """A pattern only the notation reads: a comma, '+' or a diagonal (no brackets)."""
    from .concatenation import is_notation_rearrange

    return is_notation_rearrange(pattern)


_EXPLAINED_OPS = ("rearrange", "reduce", "repeat", "einsum", "pack", "unpack",
                  "parse_shape", "check_shape")
_ELEMENTWISE_OPS = ("add", "subtract", "multiply", "divide", "maximum", "minimum",
                    "logaddexp", "where")
_ALONG_OPS = ("softmax", "log_softmax", "flip", "roll", "sort", "argsort", "argmax", "argmin")
_INDEXING_OPS = ("get_at", "set_at", "add_at", "subtract_at")
#: Every op explain plans (the CLI's --op choices).
EXPLAINED_OPS = _EXPLAINED_OPS + _ELEMENTWISE_OPS + _ALONG_OPS + _INDEXING_OPS


def explain(x_or_shape: Any, pattern: str, *, op: str = "rearrange", reduction: Any = None,
            strides: Sequence[int] | None = None, dtype: Any = None,
            copy: bool | None = None, packed_shapes: Sequence[Sequence[int]] | None = None,
            shift: Any = None, **axes_lengths: int) -> Any:
    """The plan an operation follows for this input, without touching any data.

    ``x_or_shape`` is an array (numpy, ``rearrange.Tensor``, torch, dask, array API) or
    a shape; with a shape, ``strides`` (in elements, default C-contiguous) and ``dtype``
    describe the rest. ``op`` is ``"rearrange"`` (default), ``"reduce"`` (with
    ``reduction=``), ``"repeat"``, ``"einsum"`` and ``"pack"`` (``x_or_shape`` a list
    of arrays or shapes), ``"unpack"`` (with ``packed_shapes=``), ``"parse_shape"`` or
    ``"check_shape"``; einx's notation: ``"rearrange"`` with a list (concatenation),
    the elementwise ops (``"add"``, ... ``"where"``) and the indexing ops (``"get_at"``,
    ... ``"subtract_at"``) with a list of inputs, the ops along bracketed axes
    (``"softmax"``, ... ``"argmin"``; ``"roll"`` with ``shift=``) with one.

    >>> import rearrange as ra
    >>> plan = ra.explain((2, 8, 128, 64), 'b h t d -> b t (h d)', dtype='float32')
    >>> plan.is_view, plan.output.shape
    (False, (2, 128, 512))
    >>> plan.to_source('torch')
    'x.permute(0, 2, 1, 3).reshape(2, 128, 512)'
    >>> ra.explain((2, 3, 4), 'b h w -> b w', op='reduce', reduction='mean').to_source()
    'x.transpose(0, 2, 1).mean(axis=(2,))'
    """
    if op in _ELEMENTWISE_OPS:   # x_or_shape: the list of inputs (arrays, shapes, numbers)
        from .elementwise import explain_elementwise

        if any(v is not None for v in (reduction, strides, dtype, copy, packed_shapes)):
            raise ArgumentTypeError(f"explain(op={op!r}) takes the inputs (arrays, shapes or "
                                    "numbers) as a list and axis lengths, nothing else")
        return explain_elementwise(*x_or_shape, pattern, op=op, **axes_lengths)
    if op in _INDEXING_OPS:   # x_or_shape: the list [x, *index arrays(, values)]
        from .indexing import explain_indexing

        if any(v is not None for v in (reduction, strides, dtype, copy, packed_shapes)):
            raise ArgumentTypeError(f"explain(op={op!r}) takes the arrays (or shapes) as a "
                                    "list and axis lengths, nothing else")
        if not isinstance(x_or_shape, (list, tuple)) or len(x_or_shape) < 2:
            raise ArgumentTypeError(f"explain(op={op!r}) takes a list: the indexed array and "
                                    "the index arrays (and the values), arrays or shapes")
        return explain_indexing(*x_or_shape, pattern, op=op, **axes_lengths)
    if op in _ALONG_OPS:      # operations along bracketed axes (rearrange/along.py)
        from .along import explain_along

        if reduction is not None or copy is not None or packed_shapes is not None:
            raise ArgumentTypeError(f"explain(op={op!r}) takes no reduction=, copy= or "
                                    f"packed_shapes=")

        return explain_along(x_or_shape, pattern, op=op, strides=strides, dtype=dtype,
                             shift=shift, **axes_lengths)
    if shift is not None:
        raise ArgumentTypeError(f"shift= applies to op='roll', not op={op!r}")
    if op == "reduce" and type(pattern) is str and "[" in pattern:
        from .along import reduce_pattern

        pattern = reduce_pattern(pattern)
    if op not in _EXPLAINED_OPS:
        raise RearrangeError(f"explain: op must be one of {', '.join(map(repr, EXPLAINED_OPS))}, "
                             f"got {op!r}")
    if op not in ("rearrange", "repeat") and copy is not None:
        raise ArgumentTypeError(f"copy= applies to op='rearrange' or 'repeat', not op={op!r}")
    if op != "reduce" and reduction is not None:
        raise ArgumentTypeError(f"reduction= applies to op='reduce', not op={op!r}")
    if op != "unpack" and packed_shapes is not None:
        raise ArgumentTypeError(f"packed_shapes= applies to op='unpack', not op={op!r}")
    if op == "rearrange" and _notation_only(pattern):
        from .concatenation import explain_concatenation

        return explain_concatenation(x_or_shape, pattern, strides=strides, dtype=dtype,
                                     copy=copy, **axes_lengths)
    if op == "einsum":
        from .contraction import explain_einsum

        return explain_einsum(x_or_shape, pattern, strides=strides, dtype=dtype, **axes_lengths)
    if op in ("pack", "unpack", "parse_shape", "check_shape") and strides is not None:
        raise ArgumentTypeError(f"strides= does not apply to op={op!r}")
    if op == "pack":
        from .packing import explain_pack

        _no_lengths(op, axes_lengths)
        plan = explain_pack(x_or_shape, pattern, dtype=dtype)
        # numpy arrays and shapes (numpy's layout): the numpy backend's account of how the
        # copy runs, as the call's runner decides it
        if isinstance(x_or_shape, (list, tuple)) and all(
                type(item) is np.ndarray or is_shape(item) for item in x_or_shape):
            return ndarray.describe_pack(plan)
        return plan
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
    if type(x_or_shape) is not np.ndarray and not isinstance(x_or_shape, Tensor) \
            and not is_shape(x_or_shape):
        foreign = backends.foreign_input(x_or_shape, "explain")
        if foreign is not None:
            return backends.plan_for_array(*foreign, op, pattern, reduction, copy, axes_lengths)
    if op != "rearrange":
        plan = ops.explain_transform(op, x_or_shape, pattern, reduction=reduction,
                                     strides=strides, dtype=dtype, copy=copy, **axes_lengths)
    else:
        layout, dtype_name, itemsize, unit = layout_from(x_or_shape, strides, dtype)
        plan = plan_for(pattern, layout, axes_lengths, copy, dtype_name, itemsize, unit)
    # a numpy array or a shape (numpy's layout): the numpy backend's account of who
    # copies, as the call's plan gets it at the door (a Tensor's copies are the kernel's)
    if isinstance(x_or_shape, Tensor):
        return plan
    return ndarray.describe_copy(plan, x_or_shape, None)


@record
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


def compile_pattern(pattern: str, **axes_lengths: int) -> CompiledRearrange:
    """Parse ``pattern`` now (errors surface here) and return a reusable callable.
    Public as ``rearrange.compile`` (einops' and torch's name; not bound here, where it
    would shadow the builtin)."""
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__}")
    try:
        parse_transform(pattern, "rearrange")
    except PatternError as error:
        raise PatternError(f"{error}\n{context_line(pattern, None, axes_lengths)}") from None
    for name, length in axes_lengths.items():
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length <= 0:
            raise PatternError(f"axis length {name}={length!r} must be a positive integer\n"
                               f"{context_line(pattern, None, axes_lengths)}")
    return CompiledRearrange(pattern, tuple((k, int(v)) for k, v in axes_lengths.items()))


@overload
def reduce(tensor: list[ArrayT] | tuple[ArrayT, ...], pattern: str,
           reduction: str | Callable[..., Any], **axes_lengths: int) -> ArrayT: ...
@overload
def reduce(tensor: ArrayT, pattern: str, reduction: str | Callable[..., Any],
           **axes_lengths: int) -> ArrayT: ...
def reduce(tensor: Any, pattern: str, reduction: str | Callable[..., Any],
           **axes_lengths: int) -> Any:
    """Rearrange and reduce: axes on the left side only are reduced with ``reduction``.

    ``reduction`` is one of ``min max sum mean prod any all var std logsumexp argmax
    argmin count_nonzero`` or a callable ``f(x, axes)`` that reduces ``x`` over the tuple
    ``axes``. Numbers on the left name anonymous axes (``'b (h 2) -> b h'`` pools pairs).
    Results follow numpy's dtype rules (an integer mean is float64). Without any
    reduced axis, ``reduce`` is ``rearrange`` (a view where possible).

    >>> import numpy as np, rearrange as ra
    >>> x = np.arange(24).reshape(2, 3, 4)
    >>> ra.reduce(x, 'b h w -> b', 'sum')
    array([ 66, 210])
    >>> ra.reduce(x, 'b h (w 2) -> b h w', 'max').shape
    (2, 3, 2)

    As in einops, ``reduction='rearrange'`` and ``'repeat'`` run those operations.
    """
    if type(pattern) is str and "[" in pattern:     # einx's brackets: the reduced axes
        from .along import reduce_pattern
        pattern = reduce_pattern(pattern)
    if type(reduction) is str and reduction in ("rearrange", "repeat"):
        return (rearrange if reduction == "rearrange" else repeat)(tensor, pattern, **axes_lengths)
    return run_transform("reduce", tensor, pattern, reduction, None, axes_lengths)


@overload
def repeat(tensor: list[ArrayT] | tuple[ArrayT, ...], pattern: str, *,
           copy: bool | None = None, **axes_lengths: int) -> ArrayT: ...
@overload
def repeat(tensor: ArrayT, pattern: str, *, copy: bool | None = None,
           **axes_lengths: int) -> ArrayT: ...
def repeat(tensor: Any, pattern: str, *, copy: bool | None = None, **axes_lengths: int) -> Any:
    """Rearrange and repeat: axes on the right side only are new, of the given lengths.

    The result is a **read-only** broadcast view (new axes have stride 0) whenever every
    output group can be expressed by strides, else a new C-contiguous array.
    ``copy=True`` always returns a fresh, writable array; ``copy=False`` raises
    :class:`NoViewError` where a view is impossible.

    >>> import numpy as np, rearrange as ra
    >>> x = np.arange(3)
    >>> y = ra.repeat(x, 'w -> h w', h=2)
    >>> y, y.flags.writeable, np.shares_memory(x, y)
    (array([[0, 1, 2],
           [0, 1, 2]]), False, True)
    >>> ra.repeat(x, 'w -> (w 2)')
    array([0, 0, 1, 1, 2, 2])
    """
    if copy is not None and copy is not True and copy is not False:
        # an axis named copy; any other value is refused by planning, after the pattern
        copy, _, axes_lengths = keyword_axes(pattern, "repeat", copy, None, axes_lengths)
    return run_transform("repeat", tensor, pattern, None, copy, axes_lengths)


