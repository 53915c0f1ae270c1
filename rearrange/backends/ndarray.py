"""numpy arrays: how a plan runs on them.

A view plan becomes numpy's own ``reshape``/``transpose`` calls — checked once, on the
first array of a layout, to give exactly the view the plan describes, else the view is
built from the plan's strides (``as_strided``) — so a warm call is those calls alone. A
copy step allocates a C-contiguous result and hands the strided view to the copy
kernel (:func:`rearrange.kernel.copy_into`), which checks on every call that its plan
fits the source. ``out=`` copies the permuted view into the caller's array. reduce
reduces the trailing axes of a view (:mod:`rearrange.reductions`), repeat is a
read-only broadcast view or its copy (``numpy.repeat`` along each repeated axis); pack
concatenates the inputs into a new array (or assigns each into its slice, where one is
split); large repeats and packs whose output rows are made of the inputs' rows are
written row by row by the compiled row assembly (:mod:`rearrange.kernel.rowjoin`, "row
assembly" below); unpack returns slices and splits (views), einsum runs
``numpy.einsum`` (on its optimize path, one pairwise step at a time) into a new array
between the operands' and the result's rearranges.

Entries are ``(code, first, second)``: the front door runs the commonest view plans
itself from the code (one call, no closure), and any other runner as ``first(x)``.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any, Callable, Mapping

import numpy as np

from .. import kernel
from ..calls import numpy_layout, plan_for
from ..errors import RearrangeError
from ..layout import Layout
from ..plan import Plan
from ..records import record
from ..reductions import (COMPILED_STRATEGIES, apply_reduction, compiled_reduction,
                          describe_strategy, plan_by_layout, reduce_by_layout, run_compiled)
from ..slabs import SLAB_MIN_BYTES, in_slabs, slab_threads
from ..tensor import Tensor
from . import ArrayInfo, refusal

Runner = Callable[[Any], Any]

CALL, TRANSPOSE, RESHAPE, TRANSPOSE_RESHAPE, RESHAPE_TRANSPOSE = 0, 1, 2, 3, 4


# ---------------------------------------------------------------------- the backend interface
# (rearrange.backends.protocol.Backend; the fronts key their caches with numpy arrays'
# layouts themselves, and stack lists through calls.as_array)

def matches(x: Any) -> bool:
    return type(x) is np.ndarray     # subclasses: backends._numpy_subclass


def cache_key(x: np.ndarray) -> tuple:
    return x.shape, x.strides, x.dtype


def stack(xs: list[np.ndarray]) -> np.ndarray:
    return np.stack(xs)


def reshape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return x.reshape(shape)


def concat(xs: list[np.ndarray], axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


def einsum(subscripts: str, *xs: np.ndarray) -> np.ndarray:
    return np.einsum(subscripts, *xs)


def describe(x: np.ndarray) -> ArrayInfo:
    layout, unit = numpy_layout(x)
    return ArrayInfo(layout, dtype_name(x.dtype), x.itemsize, unit)


# dtype -> dtype.name, which numpy computes afresh on every read (in Python, a few
# microseconds). Equal dtypes have equal names; bounded by clearing, as dtypes are few.
_DTYPE_NAMES: dict[np.dtype, str] = {}


def dtype_name(dtype: np.dtype) -> str:
    """``dtype.name``, remembered per dtype."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        name = dtype.name
        if len(_DTYPE_NAMES) >= 256:
            _DTYPE_NAMES.clear()
        _DTYPE_NAMES[dtype] = name
        return name
    except TypeError:  # pragma: no cover - every numpy dtype hashes
        return dtype.name


def lower(plan: Plan, reduction: Any, sample: np.ndarray) -> Runner:
    """The plan of any transform (rearrange, reduce, repeat) as ``x -> result`` for arrays
    of ``sample``'s layout. ``copy=False`` plans that need a copy raise when run."""
    refuse = refusal(plan)
    if refuse is not None:
        return refuse
    if plan.reduction is not None:
        return _reduce_runner(plan, reduction, sample)
    if plan.op == "repeat":
        return _repeat_runner(plan, sample)
    entry = lower_rearrange(plan, sample)
    return lambda x: run_entry(entry, x)


def _steps(plan: Plan) -> dict[str, Any]:
    return {step.op: step for step in plan.steps}


def _reduce_runner(plan: Plan, reduction: Any, sample: np.ndarray) -> Runner:
    """Split and permute as views, reduce the trailing axes into a fresh array (numpy's
    call, or planned by layout: reductions.plan_by_layout), merge."""
    steps = _steps(plan)
    split = steps["split"].args if "split" in steps else None
    perm = steps["permute"].args if "permute" in steps else None
    axis = steps["reduce"].args
    kept_shape = steps["reduce"].layout.shape
    merge = steps["merge"].args if "merge" in steps else None
    at = plan.steps.index(steps["reduce"])
    view = plan.steps[at - 1].layout if at else plan.input     # reduced axes: trailing
    strategy = plan_by_layout(reduction, view.shape, sample.dtype, len(axis),
                              kernel.get_num_threads(), view.strides)

    def reduced_view(x: np.ndarray) -> np.ndarray:
        y = x if split is None else x.reshape(split)
        return y if perm is None else y.transpose(perm)

    # A compiled strategy's layout, found once for the plan's arrays; it reads the view
    # from x's first element, which the view starts at where it is a view (always for a
    # layout that allows it: reshape's choice depends only on shape and strides).
    # ``lowered``: the runner was considered here, once, for every call (None: it cannot
    # take these arrays, and a call need not ask again); else (the view a copy) each
    # call's copy is offered to it by reduce_by_layout.
    compiled = None
    lowered = False
    if strategy in COMPILED_STRATEGIES:
        y = reduced_view(sample)
        if _address(y) == _address(sample):
            lowered = True
            compiled = compiled_reduction(strategy, reduction, y, len(axis))

    def run(x: np.ndarray) -> Any:
        threads = kernel.get_num_threads()
        if compiled is not None:
            y = run_compiled(compiled, x, threads, reduced_view)
            if y is not None:
                return y if merge is None else y.reshape(merge)
        y = reduced_view(x)
        if strategy == "numpy":
            y = apply_reduction(reduction, y, axis, kept_shape)
        else:
            y = reduce_by_layout(strategy, reduction, y, axis, threads,
                                 compiled_tried=lowered)
        if merge is not None:
            return y.reshape(merge)
        return y[()] if y.ndim == 0 else y   # a full reduction is a numpy scalar, as in numpy
    return run


def _address(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]


def _repeat_runner(plan: Plan, sample: np.ndarray) -> Runner:
    """The broadcast view (read-only), or a copy of it then the merge: the compiled row
    assembly where the view is rows of it and the call is its (:func:`repeat_rows`,
    :func:`row_join_threads`), else ``numpy.repeat`` along each repeated axis
    (:func:`repeated_axes`), ``numpy.copyto`` of the broadcast view in slabs on several
    threads where the output is large enough (:func:`repeat_slabs`), or the kernel
    where no axis repeats."""
    copy_index = next((k for k, step in enumerate(plan.steps) if step.is_copy), None)
    if copy_index is None:
        return strided_runner(plan, plan.output, writeable=False)
    source = plan.steps[copy_index - 1].layout if copy_index else plan.input
    axes = repeated_axes(source)
    if not axes:
        return kernel_runner(strided_runner(plan, source, writeable=False),
                             plan.steps[copy_index].kernel, plan.output.shape)
    one_thread = _numpy_repeat_runner(plan, sample, source, axes)
    joined = _repeat_row_join_runner(plan, sample, source)
    slab_axis = repeat_slab_axis(source, sample.dtype)
    if slab_axis is None:
        if joined is None:
            return one_thread

        def run_joined(x: np.ndarray) -> np.ndarray:
            result = joined(x)
            return one_thread(x) if result is None else result
        return run_joined
    broadcast = strided_runner(plan, source, writeable=False)
    nbytes = math.prod(source.shape) * sample.itemsize
    length = source.shape[slab_axis]
    before = (slice(None),) * slab_axis
    merged = plan.output.shape

    # Each thread copies its slab of the broadcast view into its slab of the result:
    # numpy's strided copy reads each value once per repeat from the cache (the source
    # is the output's size divided by the repeats) and writes the output once, in order.
    def run(x: np.ndarray) -> np.ndarray:
        if joined is not None:
            result = joined(x)
            if result is not None:
                return result
        count = slab_threads(nbytes, length, kernel.get_num_threads())
        if count < 2:
            return one_thread(x)
        view = broadcast(x)
        result = np.empty(view.shape, view.dtype)

        def copy_slab(lo: int, hi: int) -> None:
            index = before + (slice(lo, hi),)
            np.copyto(result[index], view[index], casting="no")
        in_slabs(copy_slab, length, count)
        return result.reshape(merged)
    return run


def _numpy_repeat_runner(plan: Plan, sample: np.ndarray, source: Layout,
                         axes: tuple[int, ...]) -> Runner:
    """The broadcast view ``source`` copied by ``numpy.repeat`` along each of ``axes``
    (the repeated ones), then merged: one thread."""
    # The view with every repeated axis cut to length 1 holds each value once: numpy
    # repeats its blocks (a memcpy per block and repeat, or a fixed-size move for small
    # blocks) into a fresh C-contiguous array, one axis after another, the innermost
    # first (the smallest intermediate arrays). The view is writeable (as writeable as
    # the input; numpy.repeat only reads it, and it never leaves this function) because
    # numpy.repeat first copies an input that is not C-contiguous, aligned and
    # writeable: a read-only view cost 1.5x.
    once = Layout(tuple(1 if k in axes else n for k, n in enumerate(source.shape)),
                  source.strides, source.offset)
    # Most often that view is the input with unit dims inserted: numpy's reshape (a
    # view, checked once on the first array of this layout) costs a tenth of building
    # it from the strides.
    # (A broadcast input's own stride-0 axes are repeated axes too: no reshape then.)
    view: Runner = lambda x, shape=once.shape: x.reshape(shape)  # noqa: E731
    try:
        reshaped = view(sample) if sample.size == math.prod(once.shape) else None
    except ValueError:
        reshaped = None
    if reshaped is None or not is_expected_view(reshaped, sample, plan, once):
        view = strided_runner(plan, once)
    counts = tuple((axis, source.shape[axis]) for axis in reversed(axes))
    merged = plan.output.shape

    def run(x: np.ndarray) -> np.ndarray:
        y = view(x)
        for axis, count in counts:
            y = y.repeat(count, axis)
        return y.reshape(merged)
    return run


def repeat_slab_axis(view: Layout, dtype: np.dtype) -> int | None:
    """The axis along which a repeat's broadcast view ``view`` is cut into slabs, one
    per thread (:mod:`rearrange.slabs`): its outermost axis longer than 1. None where
    no slab copy may run: object arrays (numpy holds the GIL to copy references: a slab
    per thread gains nothing), or a view with no axis to cut."""
    if dtype.hasobject:
        return None
    return next((k for k, n in enumerate(view.shape) if n > 1), None)


def repeat_slabs(view: Layout, dtype: np.dtype, threads: int) -> tuple[int, int] | None:
    """(slab axis, threads) of a repeat copy of the broadcast view ``view`` (one that
    repeats along some axis) at ``threads`` threads, or None where it is numpy.repeat's
    in one thread: too few bytes for two threads (``slabs.SLAB_MIN_BYTES`` each), an
    object array, or one thread allowed."""
    axis = repeat_slab_axis(view, dtype)
    if axis is None:
        return None
    count = slab_threads(math.prod(view.shape) * dtype.itemsize, view.shape[axis], threads)
    return (axis, count) if count >= 2 else None


def describe_copy(plan: Plan, x: Any, info: ArrayInfo) -> Plan:
    """numpy's account of who copies: a repeat whose broadcast view repeats along some
    axis is copied by ``numpy.repeat`` (:func:`_repeat_runner`), or by ``numpy.copyto``
    in slabs on several threads where it is large enough (:func:`repeat_slabs`, at the
    thread count in force now), not by the kernel; every other copy is the kernel's,
    as planned."""
    if plan.reduction is not None:
        return describe_reduction(plan, x)
    if plan.op != "repeat":
        return plan
    steps = list(plan.steps)
    for k, step in enumerate(steps):
        if not step.is_copy:
            continue
        source = steps[k - 1].layout if k else plan.input
        axes = repeated_axes(source)
        if not axes:
            continue
        dtype = _dtype_of(plan, x)
        threads = kernel.get_num_threads()
        slabs = None if dtype is None else repeat_slabs(source, dtype, threads)
        if slabs is not None:
            axis, count = slabs
            nbytes = math.prod(source.shape) * dtype.itemsize
            reason = (f"numpy.copyto of the broadcast view in {count} slabs along dim "
                      f"{axis}, one per thread ({nbytes:,} B >= {count} x "
                      f"{SLAB_MIN_BYTES:,} B): each thread writes its part of the result")
            fallback = f"numpy.copyto in {count} slabs"
        else:
            reason = (f"numpy.repeat along dim{'s' if len(axes) > 1 else ''} "
                      f"{', '.join(map(str, axes))} of the broadcast view, innermost first: "
                      "each value read once, copied block by block (faster than the kernel "
                      "over a stride-0 source)")
            fallback = "numpy.repeat"
        rows = None if dtype is None else _repeat_join_rows(plan, source, dtype)
        count = 0 if rows is None else \
            row_join_threads("repeat", rows.rows * rows.row_bytes, rows.rows, threads)
        if count:
            planned = kernel_numpy_copy(step.kernel, reason)
            joined = dataclasses.replace(
                planned, variant=ROW_JOIN, unit_bytes=1, threads=count, fallback=fallback,
                reason=(f"the compiled row assembly: {rows.rows:,} rows of "
                        f"{rows.row_bytes:,} B, each the source's {rows.block_bytes:,} B "
                        f"x {rows.times}, written once, in order"
                        f"{_streaming(rows.rows * rows.row_bytes, rows.block_bytes)}"
                        " (kernel/rowjoin.py)"))
            steps[k] = dataclasses.replace(step, kernel=joined)
            continue
        steps[k] = dataclasses.replace(step, kernel=kernel_numpy_copy(step.kernel, reason))
    return dataclasses.replace(plan, steps=tuple(steps))


def describe_reduction(plan: Plan, x: Any) -> Plan:
    """The plan with its reduce step's reason saying how the reduction runs at the thread
    count in force (reductions.describe_strategy: the choice :func:`_reduce_runner`
    makes for this layout); as it is where the dtype is unknown."""
    dtype = _dtype_of(plan, x)
    if dtype is None:
        return plan
    steps = list(plan.steps)
    at = next(k for k, step in enumerate(steps) if step.op == "reduce")
    view = steps[at - 1].layout if at else plan.input          # reduced axes: trailing
    strides = view.strides if plan.stride_unit == "elements" else None
    names = tuple(name for name, _ in plan.axis_lengths)
    permute = next((step for step in steps[:at] if step.op == "permute"), None)
    order = permute.args if permute is not None else range(len(view.shape))
    dim_names = tuple(names[k] for k in order) if len(order) == len(view.shape) else None
    words = describe_strategy(plan.reduction, view.shape, dtype, len(steps[at].args),
                              kernel.get_num_threads(), strides, dim_names)
    steps[at] = dataclasses.replace(steps[at], why=f"{steps[at].reason}; {words}")
    return dataclasses.replace(plan, steps=tuple(steps))


def _dtype_of(plan: Plan, x: Any) -> np.dtype | None:
    """The dtype of ``x`` (an array), else the one the plan names (a shape's plan given
    a dtype); None where neither says."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype
    try:
        return np.dtype(plan.dtype) if plan.dtype is not None else None
    except TypeError:       # a name numpy does not know (bfloat16): no slab copy said
        return None


def kernel_numpy_copy(planned: Any, reason: str) -> Any:
    """A copy plan that says numpy copies (``variant="numpy"``), and why."""
    if planned is None:
        return kernel.CopyKernel("numpy", 0, (), (), None, 1, reason)
    return dataclasses.replace(planned, variant="numpy", reason=reason)


def repeated_axes(view: Layout) -> tuple[int, ...]:
    """The axes a repeat's broadcast view repeats along (stride 0, length > 1), in order;
    none for an empty view (the kernel's allocation alone) or a copy that repeats
    nothing (a permuting copy: the kernel's own case).

    numpy.repeat, axis by axis, beat the kernel's copy of the broadcast view at 2
    threads: 1.9x on #39's repeat (64, 256, 64) x4 (rows of 256 bytes), 1.8x repeating
    single elements, 1.1x tiling whole arrays, 5.8x on two repeated axes
    (docs/performance.md, "Every operation against the best peer")."""
    if 0 in view.shape:
        return ()
    return tuple(k for k, (length, stride) in enumerate(zip(view.shape, view.strides))
                 if stride == 0 and length > 1)


def run_into(entry: "IntoEntry", array: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``rearrange(array, ..., out=out)`` for a checked ``out``: the permuted view of
    ``array`` copied into it."""
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


# ---------------------------------------------------------------------- rearrange


def steps_args(plan: Plan) -> tuple[tuple | None, tuple | None, tuple | None, bool, bool]:
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


def view_runner(split, perm, merge) -> Runner:
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


def strided_runner(plan: Plan, view: Layout, writeable: bool = True) -> Runner:
    """The view ``view`` of the input built directly from its strides (never copies);
    ``writeable=False`` makes it read-only."""
    scale = plan.itemsize if plan.stride_unit == "elements" else 1
    shape = view.shape
    strides = tuple(s * scale for s in view.strides)
    as_strided = np.lib.stride_tricks.as_strided
    return lambda x: as_strided(x, shape, strides, subok=True, writeable=writeable)


def lower_rearrange(plan: Plan, sample: np.ndarray) -> tuple[int, Any, Any]:
    """Lower ``plan`` to numpy calls, checked once against ``sample`` (an input with the
    plan's exact shape and strides, so numpy decides the same way on every later call).
    Returns the cache entry ``(code, first, second)`` (see :func:`run_entry`)."""
    refuse = refusal(plan)
    if refuse is not None:
        return CALL, refuse, None

    split, perm, merge, copy_before_merge, copy_at_end = steps_args(plan)
    copy_step = next((step for step in plan.steps if step.is_copy), None)
    if copy_before_merge:
        if _kernel_copies(copy_step):
            return CALL, kernel_runner(view_runner(split, perm, None), copy_step.kernel, merge), None
        # numpy's final reshape of the (non-contiguous) permuted view copies it in C
        # order: for tiny and object arrays that is the cheapest copy step.
        if perm is None:
            return RESHAPE, merge, None
        if split is None:
            return TRANSPOSE_RESHAPE, perm, merge
        return CALL, view_runner(split, perm, merge), None
    runner = view_runner(split, perm, merge)
    # The view the runner must produce: the output, or what copy=True then copies.
    view = plan.steps[-2].layout if copy_at_end and len(plan.steps) > 1 else (
        plan.input if copy_at_end else plan.output)
    if not is_expected_view(runner(sample), sample, plan, view):
        runner = strided_runner(plan, view)
    if copy_at_end:
        if _kernel_copies(copy_step):
            return CALL, kernel_runner(runner, copy_step.kernel, None), None
        return CALL, lambda x: runner(x).copy(), None
    if perm is not None and split is None and merge is None:
        return TRANSPOSE, perm, None
    if perm is not None and split is not None and merge is None:
        return RESHAPE_TRANSPOSE, split, perm
    if perm is not None and split is None and merge is not None:
        return TRANSPOSE_RESHAPE, perm, merge
    if perm is None and (split or merge) is not None:
        return RESHAPE, merge if merge is not None else split, None
    return CALL, runner, None


def _kernel_copies(step: Any) -> bool:
    """Whether the compiled kernel makes this copy step's copy (else numpy's reshape or
    copy does). A kernel still deferred is one that leaves the copy to numpy (see
    rearrange.plan.Step): it is not described for this."""
    if step.deferred is not None:
        return False
    kernel = step.kernel
    return kernel is not None and kernel.variant not in ("numpy", "empty")


def kernel_runner(view_part: Runner, planned: kernel.CopyKernel, merge: tuple | None) -> Runner:
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


def run_entry(entry: tuple[int, Any, Any], array: np.ndarray) -> Any:
    """The numpy calls of a cache entry ``(code, first, second)`` on ``array``: a
    transpose (``first`` the permutation), a reshape (``first`` the shape), a transpose
    then a reshape or a reshape then a transpose (``first`` and ``second`` their
    arguments, in that order), or a runner (``CALL``: ``first(array)``). One flat tuple
    per entry (the plan cache keeps every one: the fewer objects, the less the garbage
    collector visits)."""
    code, first, second = entry
    if code == TRANSPOSE:
        return array.transpose(first)
    if code == RESHAPE:
        return array.reshape(first)
    if code == TRANSPOSE_RESHAPE:
        return array.transpose(first).reshape(second)
    if code == RESHAPE_TRANSPOSE:
        return array.reshape(first).transpose(second)
    return first(array)


def is_expected_view(result: np.ndarray, source: np.ndarray, plan: Plan, view: Layout) -> bool:
    """Did numpy return the very view the plan describes (same memory, same strides)?"""
    if result.size == 0:
        return True
    scale = plan.itemsize if plan.stride_unit == "elements" else 1
    for size, got, want in zip(result.shape, result.strides, view.strides):
        if got != want * scale and size != 1:
            return False
    # Same memory: numpy points a view's base at the array that owns the memory, so a
    # view of `source` has `source` (or the owner `source` itself views) as its base; a
    # copy never does. Anything else (subclasses may keep longer base chains) compares
    # the data addresses, which is exact but costs two dicts.
    base = result.base
    if base is not None and (base is source or base is source.base):
        return True
    return result.__array_interface__["data"][0] == source.__array_interface__["data"][0]


@record
class IntoEntry:
    """How ``out=`` runs for one input layout: ``view`` makes the permuted view of the
    input (every step before the merge, never a copy), which ``kernel`` copies into
    ``out`` seen with ``copy_shape``; ``kernel`` was planned under the thread setting
    ``threads`` (it may itself use fewer)."""
    output_shape: tuple[int, ...]
    copy_shape: tuple[int, ...]
    view: Runner
    kernel: kernel.CopyKernel
    threads: int


def into_entry(array: np.ndarray, pattern: str,
               axes_lengths: Mapping[str, Any]) -> IntoEntry:
    info = describe(array)
    plan = plan_for(pattern, info.layout, axes_lengths, None, info.dtype, info.itemsize,
                    info.unit)
    split, perm, _, _, _ = steps_args(plan)
    permuted = before_merge(plan)
    view = view_runner(split, perm, None)
    sample = view(array)
    if not is_expected_view(sample, array, plan, permuted):
        view = strided_runner(plan, permuted)
        sample = view(array)
    kind = "O" if array.dtype.hasobject else array.dtype.kind
    threads = kernel.get_num_threads()
    copy_plan = kernel.plan_copy(sample.shape, sample.strides, array.itemsize, kind, threads)
    return IntoEntry(plan.output.shape, permuted.shape, view, copy_plan, threads)


def before_merge(plan: Plan) -> Layout:
    """The permuted view: the input split and permuted, before any merge (all views)."""
    return next((step.layout for step in reversed(plan.steps)
                 if step.op in ("split", "permute")), plan.input)


def check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if out.shape != shape or out.dtype != dtype:
        raise RearrangeError(
            f"out has shape {tuple(out.shape)} and dtype {out.dtype}; the result has shape "
            f"{shape} and dtype {dtype}")
    if not out.flags.c_contiguous:
        raise RearrangeError("out must be C-contiguous: the result is written in row-major order")
    if not out.flags.writeable:
        raise RearrangeError("out is read-only")


# --------------------------------------------------------------------------- pack, unpack, einsum
# The plans (packing.PackPlan, contraction.EinsumPlan) are taken by their fields alone:
# this module does not import the modules that make them.


def lower_pack(plan: Any, dtype: np.dtype) -> Runner:
    """A pack plan as numpy calls, ``Sequence[array] -> np.ndarray``: a new C-contiguous
    array of ``dtype`` holding each input in its place along the packed dim. Where every
    input fills its place as it is (one dim in ``*``: no split), that is one
    ``numpy.concatenate`` (numpy's loop over the inputs; einops' call); else a new array
    and per input a view of its place (slice, split) assigned from the input. Where the
    packed array is large enough (:func:`pack_slabs`), the same calls run on slabs of it
    along a dim before the packed one, one slab per thread — unless the compiled row
    assembly takes the call (:func:`row_join_threads`, :func:`_pack_row_join`: inputs
    of the packed dtype whose rows are one stride apart). numpy casts, and reads the
    inputs' strides on every call. Items may be numpy arrays, numpy scalars or Tensors
    (through their numpy view)."""
    shape = plan.packed.shape
    places = packed_places(plan)
    concatenated = all(split is None for _, split in places)
    axis = plan.axis

    def fill(arrays: list[Any], out: np.ndarray, before: tuple, lo: int, hi: int) -> None:
        """Every input's part ``[lo, hi)`` along the dim after ``before`` written into
        the same part of ``out`` (``before`` empty: every input whole)."""
        part = before + (slice(lo, hi),) if before is not None else ()
        if concatenated:
            # into a C-contiguous out: on its own numpy orders the result's strides
            # as the inputs' (transposed inputs, a transposed result)
            np.concatenate([x[part] for x in arrays], axis=axis, out=out[part],
                           casting="unsafe")
            return
        for x, (key, split) in zip(arrays, places):
            place = out[part][key] if part else out[key]
            if split is not None:   # a one-dim split: always a view
                if part:
                    split = split[:len(before)] + (hi - lo,) + split[len(before) + 1:]
                place = place.reshape(split)
            np.copyto(place, x[part] if part else x, casting="unsafe")

    slab_axis = pack_slab_axis(shape, axis, dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    length = shape[slab_axis] if slab_axis is not None else 0
    before = (slice(None),) * (slab_axis or 0)

    rows = math.prod(shape[:axis])
    row_bytes = math.prod(shape[axis:]) * dtype.itemsize
    joins = _row_join_dtype(dtype)

    def run(tensors: Any) -> np.ndarray:
        arrays = [x.numpy() if type(x) is Tensor else x for x in tensors]
        if joins:
            threads = row_join_threads("pack", nbytes, rows, kernel.get_num_threads())
            if threads:
                out = _pack_row_join(arrays, shape, axis, dtype, rows, row_bytes, threads)
                if out is not None:
                    return out
        out = np.empty(shape, dtype)
        count = slab_threads(nbytes, length, kernel.get_num_threads()) if length else 1
        if count < 2:
            fill(arrays, out, None, 0, 0)
        else:
            in_slabs(partial(fill, arrays, out, before), length, count)
        return out
    return run


def describe_pack(plan: Any) -> Any:
    """The pack plan with how :func:`lower_pack`'s runner copies for inputs of these
    layouts at the thread count in force (``plan.how``): the compiled row assembly and
    what runs until it is compiled, or numpy's calls in slabs or in one call. The plan
    as it is where a dtype is unknown. (A plan knows no addresses: the runner also
    needs every input aligned, which arrays and shapes of a plain dtype are.)"""
    if plan.op != "pack" or plan.dtype is None or None in plan.input_dtypes:
        return plan
    try:
        dtype = np.dtype(plan.dtype)
    except TypeError:       # a name numpy does not know (bfloat16)
        return plan
    shape, axis = plan.packed.shape, plan.axis
    threads = kernel.get_num_threads()
    nbytes = math.prod(shape) * dtype.itemsize
    concatenated = all(split is None for _, split in packed_places(plan))
    calls = ("numpy.concatenate" if concatenated
             else "numpy.copyto of each input into its place")
    slabs = pack_slabs(shape, axis, dtype, threads)
    numpy_way = (f"{calls} in {slabs[1]} slabs along dim {slabs[0]}, one per thread"
                 if slabs is not None else f"{calls}, on one thread")
    rows = math.prod(shape[:axis])
    joined = row_join_threads("pack", nbytes, rows, threads) if _row_join_dtype(dtype) else 0
    segments = []
    for layout, name, itemsize in zip(plan.inputs, plan.input_dtypes, plan.input_itemsizes):
        scale = itemsize if plan.stride_unit == "elements" else 1
        segment = (_joinable_segment(layout.shape, tuple(s * scale for s in layout.strides),
                                     axis, itemsize)
                   if name == plan.dtype and not layout.offset else None)
        if segment is None:
            joined = 0
            break
        segments.append(segment[1])
    if not joined:
        return dataclasses.replace(plan, how=numpy_way)
    from ..kernel.modes import get_jit_mode   # (no numba: the mode is an environment word)

    if get_jit_mode() == "off":
        return dataclasses.replace(
            plan, how=f"{numpy_way} (the compiled row assembly's case, but REARRANGE_JIT is off)")
    row_bytes = math.prod(shape[axis:]) * dtype.itemsize
    parts = " + ".join(f"{n:,}" for n in segments)
    return dataclasses.replace(plan, how=(
        f"the compiled row assembly ({ROW_JOIN}) on {joined} thread{'s' if joined > 1 else ''}: "
        f"{rows:,} rows of {row_bytes:,} B, each its inputs' {parts} B, written once, in "
        f"order; until it is compiled, {numpy_way}"))


def pack_slab_axis(shape: tuple[int, ...], axis: int, dtype: np.dtype) -> int | None:
    """The dim along which a packed array of ``shape`` (packed along ``axis``) is cut
    into slabs, one per thread (:mod:`rearrange.slabs`): the outermost dim before the
    packed one longer than 1, where each input's part of a slab is the same slice of
    it. None where no slab copy may run: object arrays (numpy holds the GIL to copy
    references), or no such dim (``'* c'``: one thread)."""
    if dtype.hasobject:
        return None
    return next((k for k in range(axis) if shape[k] > 1), None)


def pack_slabs(shape: tuple[int, ...], axis: int, dtype: np.dtype,
               threads: int) -> tuple[int, int] | None:
    """(slab dim, threads) of a pack into ``shape`` at ``threads`` threads, or None
    where numpy's calls run on the whole array in one thread: too few bytes for two
    threads (``slabs.SLAB_MIN_BYTES`` each), an object array, no dim to cut."""
    slab_axis = pack_slab_axis(shape, axis, dtype)
    if slab_axis is None:
        return None
    count = slab_threads(math.prod(shape) * dtype.itemsize, shape[slab_axis], threads)
    return (slab_axis, count) if count >= 2 else None


# --------------------------------------------------------------------------- row assembly
# Pack along a ``*`` and repeat inside a row, compiled (kernel/rowjoin.py): the output
# viewed as (rows, row bytes), each row written once, in order, by one thread of the
# kernel's pool, as the concatenation of segments (an input's part of the row; the
# source row ``times`` over). numpy's copies in slabs write each input (each repeat) in
# a pass of its own through the caches (docs/performance.md, "repeat and pack at two
# threads" and "The row assembly"). Only exact, aligned, native-order ndarrays of a
# plain dtype whose rows are one stride apart, each row's part contiguous; the runner
# only once it is ready (numpy's ways until then, and with REARRANGE_JIT=off).

ROW_JOIN = "row-join"           # the runner's family (kernel/rowjoin.FAMILY) and variant
# Outputs from this many bytes are assembled by the runner at two threads or more
# (bench/rowjoin_sweep.py --part sizes, docs/performance.md "The row assembly": at 1 MiB
# 0.94-1.17x numpy.repeat, at 768 KiB 1.03-1.46x numpy.concatenate, at 4 MiB 1.6-1.9x,
# at 192-256 KiB 0.4-0.7x: the pool's hand-off).
ROW_JOIN_MIN_BYTES = 1 << 20
# At one thread only pack's: it wrote 1.2-1.5x numpy.concatenate from 3 MiB, 1.0x at
# 768 KiB; repeat's measured 0.8-1.1x numpy.repeat at every size (not taken).
ROW_JOIN_ONE_THREAD_MIN_BYTES = 2 << 20
# Fewer rows than this leave the threads' chunks unbalanced (and a row of a few
# megabytes is numpy's memcpy anyway).
ROW_JOIN_MIN_ROWS = 64
# Segments shorter than this cost the runner more per segment than numpy's loops
# (bench/rowjoin_sweep.py --part segments, 7 MiB out at two threads: pack of three
# 4-byte columns 0.15-0.28x numpy.concatenate, from 8 bytes 1.3-3.3x; repeat of 8-byte
# rows 2.1x numpy.repeat): numpy's ways keep them.
ROW_JOIN_MIN_SEGMENT_BYTES = 8


def row_join_threads(op: str, nbytes: int, rows: int, threads: int) -> int:
    """The threads the row assembly runs ``op`` ("pack", "repeat") on for an output of
    ``nbytes`` in ``rows`` rows at ``threads`` threads allowed; 0: numpy's way."""
    if rows < ROW_JOIN_MIN_ROWS or nbytes <= 0:
        return 0
    if threads >= 2:
        return threads if nbytes >= ROW_JOIN_MIN_BYTES else 0
    return 1 if op == "pack" and nbytes >= ROW_JOIN_ONE_THREAD_MIN_BYTES else 0


def _row_join_dtype(dtype: np.dtype) -> bool:
    """Whether the runner may move this dtype's bytes: no objects (references, counted),
    native byte order (the others keep numpy's ways, as every kernel copy does)."""
    return not dtype.hasobject and dtype.isnative


def _streaming(nbytes: int, block_bytes: int) -> str:
    """explain's word on the stores (kernel/rowjoin.streams: the output's address
    decides, which a plan does not know)."""
    from ..kernel.rowjoin import NONTEMPORAL_MIN_BYTES
    from ..kernel.plan import LINE

    if nbytes < NONTEMPORAL_MIN_BYTES or block_bytes % LINE:
        return ""
    return ", whole lines as streaming stores where the result is 64-byte aligned"


def _byte_strides(plan: Plan, view: Layout) -> tuple[int, ...]:
    scale = plan.itemsize if plan.stride_unit == "elements" else 1
    return tuple(s * scale for s in view.strides)


@record
class RepeatRows:
    """A repeat's broadcast view as rows of the row assembly: ``rows`` output rows of
    ``row_bytes``, row ``r`` the ``block_bytes`` at ``r * row_stride`` bytes from the
    view's start, ``times`` over. Invariant: ``block_bytes * times == row_bytes``."""
    rows: int
    row_stride: int          # bytes (0: every row the same block)
    block_bytes: int
    times: int
    row_bytes: int


def repeat_rows(shape: tuple[int, ...], strides: tuple[int, ...],
                itemsize: int) -> RepeatRows | None:
    """A repeat's broadcast view (``strides`` in bytes) as rows of the row assembly, or
    None where it is not one: its innermost axes (after size-1 ones are dropped) a
    contiguous block, the stride-0 axes just outside it the block's repeats within a
    row, and every axis outside those fused into one row stride. Where no axis is left
    outside the repeats (``c -> r c``: the whole view one row) the repeats are the rows
    (stride 0). None also where nothing repeats inside a row and nothing outside it
    (a plain copy), or the innermost axis repeats (``c -> (c r)``: single elements, a
    loop of another shape)."""
    axes = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not axes or 0 in shape:
        return None
    block = itemsize
    k = len(axes)
    while k and axes[k - 1][1] == block:        # the contiguous block, innermost first
        block *= axes[k - 1][0]
        k -= 1
    if block == itemsize and (k == len(axes)):
        return None                             # the innermost axis repeats
    times = 1
    while k and axes[k - 1][1] == 0:            # its repeats within the row
        times *= axes[k - 1][0]
        k -= 1
    outer = axes[:k]
    if not outer:
        if times == 1:
            return None                         # a plain copy: the kernel's
        rows, stride, times = times, 0, 1       # the repeats are the rows
    else:
        rows, stride = outer[-1]
        for n, s in reversed(outer[:-1]):       # fused into one stride, or not rows
            if s != stride * rows:
                return None
            rows *= n
        if times == 1 and stride == block:
            return None                         # a plain copy: the kernel's
    return RepeatRows(rows, stride, block, times, block * times)


def _repeat_join_rows(plan: Plan, source: Layout, dtype: np.dtype) -> RepeatRows | None:
    """The rows of the row assembly a repeat's broadcast view ``source`` of ``dtype``
    is, where the runner may take it at some size (:func:`repeat_rows`, a dtype it
    moves, a view that starts where its input does, segments of
    ``ROW_JOIN_MIN_SEGMENT_BYTES`` or more); None: never the runner's."""
    if not _row_join_dtype(dtype) or source.offset:
        return None
    rows = repeat_rows(source.shape, _byte_strides(plan, source), dtype.itemsize)
    return None if rows is None or rows.block_bytes < ROW_JOIN_MIN_SEGMENT_BYTES else rows


def _repeat_row_join_runner(plan: Plan, sample: np.ndarray,
                            source: Layout) -> Callable[[Any], Any] | None:
    """The repeat as the row assembly where its broadcast view is rows of it
    (:func:`repeat_rows`): ``x -> result``, or None from the runner for a call it does
    not take (too small for the threads in force, a subclass, an unaligned input, the
    runner not ready), which the caller then copies its way. None where no call could
    be taken (the dtype, the layout)."""
    dtype = sample.dtype
    rows = _repeat_join_rows(plan, source, dtype)
    if rows is None:
        return None
    nbytes = rows.rows * rows.row_bytes
    merged = plan.output.shape

    def run(x: np.ndarray) -> np.ndarray | None:
        threads = row_join_threads("repeat", nbytes, rows.rows, kernel.get_num_threads())
        if not threads or type(x) is not np.ndarray or not x.flags.aligned:
            return None
        from ..kernel import builds, rowjoin

        runner = builds.runner_for(ROW_JOIN, rowjoin.UNIT)
        if runner is None:          # not ready (compiling, loading) or kernels off
            return None
        out = np.empty(merged, dtype)
        # the broadcast view starts where the input does (as strided_runner's)
        base = x.__array_interface__["data"][0]
        rowjoin.join_rows(runner, out.reshape(rows.rows, -1),
                          [(base, rows.row_stride, rows.block_bytes, rows.times)], threads)
        return out
    return run


def _pack_row_join(arrays: list[Any], shape: tuple[int, ...], axis: int, dtype: np.dtype,
                   rows: int, row_bytes: int, threads: int) -> np.ndarray | None:
    """The packed array by the row assembly, each input a segment of every row (its
    part of the packed dim and the dims after it); None (nothing written) where an
    input is not an exact, aligned ndarray of ``dtype`` whose dims before ``axis`` fuse
    into one row stride and whose part of a row is contiguous (and, unless empty, of
    ``ROW_JOIN_MIN_SEGMENT_BYTES`` or more), or the runner is not ready."""
    segments = []
    for x in arrays:
        if type(x) is not np.ndarray or x.dtype != dtype or not x.flags.aligned:
            return None
        segment = _joinable_segment(x.shape, x.strides, axis, dtype.itemsize)
        if segment is None:
            return None
        stride, nbytes = segment
        segments.append((x.__array_interface__["data"][0], stride, nbytes, 1))
    if sum(segment[2] for segment in segments) != row_bytes:
        return None                 # (never: the plan checked the shapes)
    from ..kernel import builds, rowjoin

    runner = builds.runner_for(ROW_JOIN, rowjoin.UNIT)
    if runner is None:
        return None
    out = np.empty(shape, dtype)
    rowjoin.join_rows(runner, out.reshape(rows, row_bytes // dtype.itemsize), segments,
                      threads)
    return out


def _joinable_segment(shape: tuple[int, ...], strides: tuple[int, ...], axis: int,
                      itemsize: int) -> tuple[int, int] | None:
    """:func:`_pack_segment` where the runner takes it: empty, or of
    ``ROW_JOIN_MIN_SEGMENT_BYTES`` or more (the one rule for the call and for explain)."""
    segment = _pack_segment(shape, strides, axis, itemsize)
    if segment is None or 0 < segment[1] < ROW_JOIN_MIN_SEGMENT_BYTES:
        return None
    return segment


def _pack_segment(shape: tuple[int, ...], strides: tuple[int, ...], axis: int,
                  itemsize: int) -> tuple[int, int] | None:
    """(row stride, bytes) of a pack input's part of each row: its dims from ``axis``
    on contiguous, its dims before ``axis`` one stride apart (size-1 dims aside); None
    where it is not so. A size-0 part is a segment of 0 bytes (whatever its strides:
    numpy gives an empty array's dims any)."""
    if 0 in shape[axis:]:
        return 0, 0
    nbytes = itemsize
    for n, s in zip(reversed(shape[axis:]), reversed(strides[axis:])):
        if n != 1 and s != nbytes:
            return None
        nbytes *= n
    stride = None
    count = 1
    for n, s in zip(reversed(shape[:axis]), reversed(strides[:axis])):
        if n == 1:
            continue
        if stride is None:
            stride = s
        elif s != stride * count:
            return None
        count *= n
    return (nbytes if stride is None else stride), nbytes


def lower_unpack(plan: Any) -> Runner:
    """An unpack plan as numpy calls, ``np.ndarray -> list[np.ndarray]``: per output its
    slice of the packed dim, reshaped to split it; a split of one dim is always a view,
    so every result is a view of the input whatever its strides."""
    places = packed_places(plan)

    def run(x: np.ndarray) -> list[np.ndarray]:
        return [x[key] if split is None else x[key].reshape(split) for key, split in places]
    return run


def packed_places(plan: Any) -> list[tuple[Any, tuple[int, ...] | None]]:
    """Per unpacked array of a pack or unpack plan (pack's inputs, unpack's outputs), its
    place in the packed array: the index of its slice of the packed dim (``...`` when it
    is the whole dim) and the shape that slice splits into (None: it is not split)."""
    count = len(plan.inputs if plan.op == "pack" else plan.outputs)
    keys: list[Any] = [Ellipsis] * count
    splits: list[tuple[int, ...] | None] = [None] * count
    for step in plan.steps:
        if step.op == "slice":
            dim, start, stop = step.args
            keys[step.index] = (slice(None),) * dim + (slice(start, stop),)
        elif step.op == "split":
            splits[step.index] = step.args
    return list(zip(keys, splits))


def lower_contraction(plan: Any) -> Callable[[Any], np.ndarray]:
    """An einsum plan's contraction, ``Sequence[np.ndarray] -> np.ndarray``: a fresh
    C-contiguous array (``plan.contraction``) from numpy.einsum of the prepared operands,
    or, for the ``numpy.matmul`` engine, from BLAS's batched product (its operands
    permuted and grouped as views where strides allow; the product permuted to the
    output's order by the copy kernel)."""
    shape, dtype = plan.contraction.shape, np.dtype(plan.dtype)
    if plan.engine == "numpy.matmul":
        return _matmul_contraction(plan, shape, dtype)
    subscripts, optimize = plan.subscripts, plan.optimize
    steps = None
    if optimize is not False and math.prod(shape) * dtype.itemsize >= PAIRWISE_MIN_BYTES:
        steps = pairwise_steps(subscripts, plan.path)
    if steps is None:
        # numpy.einsum writes into a fresh array: below PAIRWISE_MIN_BYTES its copy of
        # a permuted last product into out= costs less than a call per step; '...' in
        # the subscripts, numpy runs its path itself
        def contract(operands: Any) -> np.ndarray:
            result = np.empty(shape, dtype)
            np.einsum(subscripts, *operands, out=result, optimize=optimize)
            return result
        return contract
    run_path = _path_runner(steps)

    # numpy's optimize path, without out=: given out=, numpy.einsum copies its last
    # step's array into out in one more pass (#39: the chain took 1.5x as long). Every
    # step contracts two or more operands into a new array, but the result may be a
    # permuted view of it (numpy 2.4 runs pairs as a batched matmul and transposes the
    # product), a numpy scalar, or of numpy's promotion step by step: the contraction's
    # invariant (a fresh C-contiguous array of ``dtype``, sharing no memory with an
    # input) is restored by one copy only where it does not already hold.
    def contract_optimized(operands: Any) -> np.ndarray:
        result = run_path(operands)
        if type(result) is not np.ndarray or result.dtype != dtype or \
                not result.flags.c_contiguous or any(
                np.may_share_memory(result, x) for x in operands):
            fresh = np.empty(shape, dtype)
            np.copyto(fresh, result, casting="unsafe")
            return fresh
        return result
    return contract_optimized


# The smallest result (bytes) whose contraction runs numpy's path one step at a time
# (a numpy.einsum call each, ~15 us) rather than as one numpy.einsum call into out=
# (which copies a permuted last product once more). Measured both sides at 2 threads:
# docs/performance.md, "Every operation against the best peer".
PAIRWISE_MIN_BYTES = 1 << 18


Step = tuple[tuple[int, ...], str, str]


def pairwise_steps(subscripts: str, path: Any) -> list[Step] | None:
    """numpy's contraction path as calls: per step, the positions it takes from the list
    of operands (numpy's order: highest first; its result goes to the end of the list),
    its subscripts, and the same with its two operands swapped (other steps: the same).
    None where the subscripts hold '...' (numpy's own loop handles those)."""
    if "..." in subscripts:
        return None
    inputs, output = subscripts.split("->")
    terms = inputs.split(",")
    steps = []
    for number, step in enumerate(path):
        taken = tuple(sorted(step, reverse=True))
        popped = [terms.pop(k) for k in taken]
        if number == len(path) - 1:
            result = output
        else:   # the step's letters still wanted by another operand or the output
            wanted = set("".join(terms) + output)
            result = "".join(dict.fromkeys(
                letter for term in popped for letter in term if letter in wanted))
        swapped = ",".join(popped[::-1] if len(popped) == 2 else popped) + "->" + result
        steps.append((taken, ",".join(popped) + "->" + result, swapped))
        terms.append(result)
    return steps if terms == [output] else None


def _path_runner(steps: list[Step]) -> Callable[[Any], Any]:
    """The path's steps through numpy.einsum, one pair (or group) at a time. The last
    step's two operands are taken in the order in which numpy's batched matmul writes the
    product in the output's order (a C-contiguous array, no copy after): learnt on the
    first call of this runner (one layout of the inputs: the same order every call),
    switched when the product came back permuted. A two-operand step that is a batched
    matrix product the compiled runner takes (:func:`step_product`,
    :func:`compiled_product_takes`) runs there instead, its result a fresh C-contiguous
    array in the step's letter order (numpy.einsum where it does not: runner not ready,
    REARRANGE_JIT=off, subclasses, other dtypes, strides a reshape cannot view)."""
    swap = [False]
    # a step's own path: all its operands at once (numpy then skips the path search)
    whole = {len(taken): ["einsum_path", tuple(range(len(taken)))] for taken, _, _ in steps}
    # Each two-operand step's product form (or None), found on its first call: (step,
    # operand shapes, dtype) -> _step_form's answer, which depends on nothing else; with
    # it, the holder of the compiled product's parameters (_held_call).
    forms: dict[tuple, tuple[StepProduct | None, list[Any]]] = {}

    def run(operands: Any) -> Any:
        arrays = list(operands)
        for k, (taken, subscripts, swapped) in enumerate(steps):
            taken_arrays = [arrays.pop(i) for i in taken]
            result = None
            if len(taken) == 2:
                left, right = taken_arrays
                if type(left) is np.ndarray and type(right) is np.ndarray:
                    key = (k, left.shape, right.shape, left.dtype, right.dtype)
                    found = forms.get(key)
                    if found is None:
                        found = forms[key] = (_step_form(subscripts, left, right),
                                              [_UNSEEN])
                    form, held = found
                    if form is not None:
                        result = _compiled_step(form, left, right, held)
            if result is None:
                last = k == len(steps) - 1
                if last and swap[0]:
                    subscripts, taken_arrays = swapped, taken_arrays[::-1]
                result = np.einsum(subscripts, *taken_arrays, optimize=whole[len(taken)])
                if last and len(taken) == 2 and type(result) is np.ndarray and \
                        not result.flags.c_contiguous:
                    swap[0] = not swap[0]
            arrays.append(result)
        return result
    return run


@record
class StepProduct:
    """A two-operand einsum step ``left,right->out`` as one batched matrix product: the
    left operand's axes permuted to (batch, rows, summed) and its rows grouped into M,
    its summed letters into K; the right's to (batch, summed, columns), N its columns'
    product. ``transposed``: the output's letters are (batch, columns, rows), so the
    product is computed as right^T @ left^T, which writes them in that order.

    Invariant: every letter is in both operands or in the output (none summed within
    one operand), once per term, with one length in both operands (no size-1
    broadcast), and the output is batch + rows + columns or batch + columns + rows: the
    product's C-contiguous (*batch, M, N) array is the step's result in its letter order,
    reshaped without a copy."""

    left_order: tuple[int, ...]
    right_order: tuple[int, ...]
    batch: tuple[int, ...]          # the batch letters' lengths, in the output's order
    rows: int                       # M: the rows' letters' lengths multiplied
    inner: int                      # K
    columns: int                    # N
    out_shape: tuple[int, ...]      # the step's result, in its letters' order
    transposed: bool


def step_product(subscripts: str, left_shape: tuple[int, ...],
                 right_shape: tuple[int, ...]) -> StepProduct | None:
    """``left,right->out`` on operands of these shapes as a batched matrix product
    (:class:`StepProduct`), or None where it is not one: rearrange/matmul.py's
    ``product_letters`` (``matmul_form``'s analysis), on a step's subscripts and shapes,
    with the output's letters in one of the two orders the product writes."""
    from ..matmul import product_letters     # (einsum's lowering only: not at import)

    terms, out = subscripts.split("->")
    if "." in subscripts or terms.count(",") != 1:
        return None
    left, right = terms.split(",")
    if len(left) != len(left_shape) or len(right) != len(right_shape) or \
            len(set(out)) != len(out) or any(c not in left + right for c in out):
        return None
    letters = product_letters(left, right, out, left_shape, right_shape)
    if letters is None:
        return None
    batch, rows, inner, columns, sizes = letters
    if out == batch + rows + columns:
        transposed = False
    elif out == batch + columns + rows:
        transposed = True
    else:
        return None

    def length(letters: str) -> int:
        return math.prod(sizes[c] for c in letters)
    return StepProduct(tuple(left.index(c) for c in batch + rows + inner),
                       tuple(right.index(c) for c in batch + inner + columns),
                       tuple(sizes[c] for c in batch), length(rows), length(inner),
                       length(columns), tuple(sizes[c] for c in out), transposed)


def _view_as(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``x`` reshaped to ``shape`` as a view of its strides, or None where only a copy
    could have that shape."""
    try:
        return x.reshape(shape, copy=False)
    except ValueError:
        return None
    except TypeError:           # numpy < 2.1: no copy= keyword
        view = x.view()
        try:
            view.shape = shape      # in place: refused where a copy would be needed
        except AttributeError:
            return None
        return view


_UNSEEN = object()      # not found yet (a step's form, a product's call; None: found, none)


def _step_form(subscripts: str, left: np.ndarray, right: np.ndarray) -> StepProduct | None:
    """The step ``left,right->out`` on exact ndarrays as the batched product the compiled
    runner takes (:func:`step_product`, :func:`compiled_product_takes`), or None where
    it is not one, or its operands' dtypes differ or are not the runner's."""
    if left.dtype != right.dtype or left.dtype.name not in GEMM_DTYPES:
        return None
    form = step_product(subscripts, left.shape, right.shape)
    if form is None or not compiled_product_takes(
            math.prod(form.batch), form.rows, form.inner, form.columns, left.dtype):
        return None
    return form


def _compiled_step(form: StepProduct, left: np.ndarray, right: np.ndarray,
                   held: list[Any]) -> np.ndarray | None:
    """The step ``form`` (:func:`_step_form` of these operands' shapes and dtypes) by the
    compiled batched product, a fresh C-contiguous array in the output's letter order;
    None (nothing done) where a grouping of rows or summed letters is not a view of an
    operand's strides, or :func:`_compiled_product` does not take it. ``held``: the
    step's product parameters (:func:`_held_call`)."""
    a = _view_as(left.transpose(form.left_order), (*form.batch, form.rows, form.inner))
    b = _view_as(right.transpose(form.right_order), (*form.batch, form.inner, form.columns))
    if a is None or b is None:
        return None
    if form.transposed:
        a, b = b.swapaxes(-1, -2), a.swapaxes(-1, -2)
    call = _held_call(held, a, b)
    product = None if call is None else _compiled_product(a, b, call)
    return None if product is None else product.reshape(form.out_shape)


# --------------------------------------------------------------------------- batched products
# einsum's batched matrix products, compiled (kernel/gemm.py): float32 and float64 with a
# short summed dim, each product's rows tiled in registers, B packed per panel of columns
# on the kernel's pool — the attention einsum ``b h t d, b h s d -> b h t s`` at
# (8, 8, 256, 64) 2.46-2.57 ms against numpy.matmul's 5.3-5.5 and torch's 3.1-3.3 at
# two threads (docs/performance.md, "A batched product of our own"). Where the kernel is
# built for AVX-512, for exact, aligned, native-order ndarrays whose strides are whole
# elements; the runner only once it is ready (numpy.matmul until then, and with
# REARRANGE_JIT=off).

GEMM = "gemm"                   # the runner's family (kernel/gemm.FAMILY)
GEMM_DTYPES = ("float32", "float64")
# The summed dims the runner takes: up to kernel/gemm.MAX_INNER (the same number: K in
# blocks that keep the packed panel's part in L1; (1, 4096, 1024, 256) 1.11x and (8, 256,
# 1024, 256) 1.28x numpy.matmul at two threads, (1, 4096, 2048, 256) 1.12x at one: not
# taken beyond 1024, not measured at two threads), from 32 (K = 16: 0.76-0.92x
# numpy.matmul at one thread, each tile's stores and set-up against 16 steps of sums).
GEMM_MAX_INNER = 1024
GEMM_MIN_INNER = 32
# Products with fewer multiply-adds than this stay numpy.matmul's: the call's set-up
# (~25-40 us here) against BLAS's small-matrix loops (1M multiply-adds, (4, 64, 64, 64):
# 0.64-0.69x; 4M, (16, 64, 64, 64): 1.13-1.38x).
GEMM_MIN_MULTIPLY_ADDS = 1 << 22
# Rows: fewer than this are mostly an edge tile (kernel/gemm: 6 rows a tile; (256, 8,
# 64, 16): 0.31x). Columns: at least one whole panel (kernel/gemm.tile_shape's NR: 64
# float32 on AVX-512), and the last panel's padding at most a quarter of the panels'
# width: every column of a panel is computed, and an edge panel's part of C is copied
# element by element ((2, 300, 100, 70): 0.69x; (64, 32, 64, 32): 0.67x).
GEMM_MIN_ROWS = 16
GEMM_MAX_PADDING = 0.25
# Only where the runners are built for 64-byte vectors (AVX-512: kernel/plan.VECTOR_BYTES),
# where it was measured ahead. Built for AVX2 (``NUMBA_CPU_NAME=haswell`` on the same
# machine: 6 x 2 tiles of 8 lanes) it ran the attention case in 6.22 ms at two threads
# against numpy.matmul's 6.47 (whose BLAS still used AVX-512 there) and torch's 3.37: not
# taken until measured on an AVX2 machine.
GEMM_MIN_VECTOR_BYTES = 64


def compiled_product_takes(batch: int, m: int, k: int, n: int, dtype: Any,
                           vector_bytes: int | None = None) -> bool:
    """Whether einsum's batched product of ``batch`` (M, K) @ (K, N) products of
    ``dtype`` runs on the compiled runner (when it is ready), with the runners built for
    ``vector_bytes``-byte vectors (None: this build's, kernel/plan.VECTOR_BYTES): the
    one rule for the call and for explain (which asks it for AVX-512's, and says so).
    The same at any thread count (measured ahead of numpy.matmul at one thread and at
    two: docs/performance.md, "A batched product of our own")."""
    if vector_bytes is None:
        from ..kernel.plan import VECTOR_BYTES as vector_bytes
    dtype = np.dtype(dtype)
    if vector_bytes < GEMM_MIN_VECTOR_BYTES or dtype.name not in GEMM_DTYPES or \
            not GEMM_MIN_INNER <= k <= GEMM_MAX_INNER or \
            m < GEMM_MIN_ROWS or batch * m * k * n < GEMM_MIN_MULTIPLY_ADDS:
        return False
    from ..kernel.gemm import tile_shape     # (numpy only: no numba)

    columns = tile_shape(dtype.itemsize, vector_bytes)[1]
    padded = -(-n // columns) * columns
    return n >= columns and padded - n <= GEMM_MAX_PADDING * padded


def _product_call(left: np.ndarray, right: np.ndarray, threads: int) -> Any:
    """The compiled runner's parameters (kernel/gemm.ProductCall) for ``left @ right``
    (the product's operands: exact ndarrays, batch shapes equal) on ``threads``
    threads, or None where the runner does not take them (:func:`compiled_product_takes`,
    the operands' dtypes and strides)."""
    dtype = left.dtype
    if right.dtype != dtype or not dtype.isnative or dtype.name not in GEMM_DTYPES or \
            left.ndim != right.ndim or left.ndim < 2 or \
            left.shape[:-2] != right.shape[:-2]:
        return None
    *batch, m, k = left.shape
    n = right.shape[-1]
    if not compiled_product_takes(math.prod(batch), m, k, n, dtype):
        return None
    itemsize = dtype.itemsize
    if any(s % itemsize for s in left.strides[-2:] + right.strides[-2:]):
        return None
    from ..kernel import gemm

    return gemm.product_call(left, right, itemsize, threads)


def _held_call(held: list[Any], left: np.ndarray, right: np.ndarray) -> Any:
    """The compiled product's parameters (:func:`_product_call`) for ``left @ right``
    at the kernel's thread count, kept in the one-slot ``held`` of a plan's product (a
    contraction, a path's step): found on the first call, and again only where the
    thread count (or, which the plan's key rules out, the operands' layout) changed
    (``ProductCall.fits``). None where the runner does not take them: a plan is keyed
    by its inputs' layouts and dtypes, which decide that."""
    call = held[0]
    threads = kernel.get_num_threads()
    if call is _UNSEEN or (call is not None and not call.fits(left, right, threads)):
        call = held[0] = _product_call(left, right, threads)
    return call


def _compiled_product(left: np.ndarray, right: np.ndarray, call: Any
                      ) -> np.ndarray | None:
    """``left @ right`` (the product's operands: exact ndarrays, batch shapes equal) by
    the compiled runner with ``call``'s parameters (:func:`_held_call`'s for their
    layout), a fresh C-contiguous array; None — nothing done — where the runner is not
    ready or the operands are not aligned. Its values are numpy.matmul's within the
    rounding of a K-term sum (each element summed in order, a fused multiply-add a step:
    not BLAS's order, so not bit for bit)."""
    if not (left.flags.aligned and right.flags.aligned):
        return None
    from ..kernel import builds, gemm

    dtype = left.dtype
    runner = builds.runner_for(GEMM, dtype.itemsize)
    if runner is None:          # not ready (compiling, loading) or kernels off
        return None
    out = np.empty(call.out_shape, dtype)
    gemm.run_product(runner, call, left, right, out)
    return out


def _matmul_contraction(plan: Any, shape: tuple[int, ...], dtype: np.dtype
                        ) -> Callable[[Any], np.ndarray]:
    from ..matmul import matmul_form     # (einsum's lowering only: not at import)

    form = matmul_form(plan)

    def shaped(x: np.ndarray, order: Any, grouped: Any) -> np.ndarray:
        if type(x) is not np.ndarray:   # a subclass's data, as numpy.einsum reads it
            x = np.asarray(x)
        if order is not None:
            x = x.transpose(order)
        return x if grouped is None else x.reshape(grouped)

    held: list[Any] = [_UNSEEN]        # the compiled product's parameters (_held_call)

    def product_of(left: np.ndarray, right: np.ndarray) -> np.ndarray | None:
        call = _held_call(held, left, right)
        return None if call is None else _compiled_product(left, right, call)

    def contract(operands: Any) -> np.ndarray:
        left, right = operands
        exact = type(left) is np.ndarray and type(right) is np.ndarray   # no subclasses
        left = shaped(left, form.left_order, form.left_shape)
        right = shaped(right, form.right_order, form.right_shape)
        product = product_of(left, right) if exact else None
        if product is None:
            product = np.matmul(left, right)
        grouped = product.reshape(form.result_shape) if form.result_shape is not None \
            else product
        if form.output_order is None:
            return grouped.reshape(shape)
        result = np.empty(shape, dtype)
        kernel.copy_into(result, grouped.transpose(form.output_order))
        return result
    return contract


def lower_einsum(plan: Any) -> Runner:
    """An einsum plan as numpy calls, ``Sequence[np.ndarray] -> result``: each input's
    rearrange, the contraction, the output's rearrange. A 0-d result with no output
    rearrange is a numpy scalar, as numpy's (and einops') einsum returns.

    Each rearrange is lowered on its first array (``lower_rearrange`` checks numpy's
    views against a sample): the runner is cached per input layout and dtype, so every
    later array has that layout."""
    contract = lower_contraction(plan)
    # Empty when no input needs a rearrange (the common case: plain names).
    preparations = tuple(None if p is None else p.plan for p in plan.preparations) \
        if any(plan.preparations) else ()
    output_plan = plan.output_plan if plan.output_pattern is not None else None
    scalar = not plan.contraction.shape and output_plan is None
    lowered: list[Any] = [None] * (len(plan.preparations) + 1)  # inputs', then the output's

    def rearranged(k: int, step_plan: Plan, array: np.ndarray) -> Any:
        run = lowered[k]
        if run is None:
            run = lowered[k] = partial(run_entry, lower_rearrange(step_plan, array))
        return run(array)

    def run(arrays: Any) -> Any:
        if preparations:
            arrays = [array if p is None else rearranged(k, p, array)
                      for k, (array, p) in enumerate(zip(arrays, preparations))]
        result = contract(arrays)
        if output_plan is not None:
            return rearranged(-1, output_plan, result)
        return result[()] if scalar else result
    return run
