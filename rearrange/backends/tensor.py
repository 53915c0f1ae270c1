"""``rearrange.Tensor``: how a plan runs on it.

A Tensor is a storage seen through a :class:`~rearrange.layout.Layout`, so a view plan
is the plan's output layout on the same storage, and a copy step copies the numpy view
of the storage through that layout with the copy kernel into a new storage. Data
steps of the other ops (a reduction, pack's copies, einsum's contraction) run on the
numpy view of the storage, through the numpy backend's lowering.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import kernel
from ..errors import RearrangeError
from ..layout import Layout
from ..plan import Plan
from ..reductions import apply_reduction
from ..tensor import Storage, Tensor, from_numpy
from . import ArrayInfo, ndarray, refusal
from .ndarray import before_merge

Runner = Callable[[Any], Any]


# ---------------------------------------------------------------------- the backend interface
# (rearrange.backends.protocol.Backend; the fronts key their caches with Tensors'
# layouts themselves, and stack lists through calls.as_array)

def matches(x: Any) -> bool:
    return isinstance(x, Tensor)


def cache_key(x: Tensor) -> tuple:
    return x.layout, x.dtype


def describe(x: Tensor) -> ArrayInfo:
    return ArrayInfo(x.layout, x.dtype.name, x.element_size())


def _wrap_array(array: np.ndarray) -> Tensor:
    # a fresh copy: numpy's einsum may return a view of an operand
    return from_numpy(np.array(array, order="C"))


def stack(xs: list[Tensor]) -> Tensor:
    return _wrap_array(np.stack([x.numpy() for x in xs]))


def reshape(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return x.reshape(shape)


def concat(xs: list[Tensor], axis: int) -> Tensor:
    return _wrap_array(np.concatenate([x.numpy() for x in xs], axis=axis))


def einsum(subscripts: str, *xs: Tensor) -> Tensor:
    return _wrap_array(np.einsum(subscripts, *[x.numpy() for x in xs]))


def lower(plan: Plan, reduction: Any, sample: Tensor | None = None) -> Runner:
    """The plan of any transform (rearrange, reduce, repeat) as ``Tensor -> Tensor``:
    views are the plan's layouts on the same storage; data steps run on numpy views."""
    reduce_step = next((step for step in plan.steps if step.op == "reduce"), None)
    if reduce_step is None:
        return lower_rearrange(plan)    # views, then at most one kernel copy (or refusal)
    k = plan.steps.index(reduce_step)
    permuted = plan.steps[k - 1].layout if k else plan.input   # what the reduction reads
    axis, kept_shape = reduce_step.args, reduce_step.layout.shape
    output = Layout.contiguous(plan.output.shape)

    def run_reduce(t: Tensor) -> Tensor:
        result = apply_reduction(reduction, t._with(permuted).numpy(), axis, kept_shape)
        return Tensor._wrap(Storage(np.ascontiguousarray(result).reshape(-1)), output)
    return run_reduce


def run_into(plan: Plan, array: Tensor, out: np.ndarray) -> None:
    """``rearrange(array, ..., out=...)`` with ``out`` seen as numpy (checked): the
    permuted view of ``array`` copied into it."""
    permuted = before_merge(plan)
    source = array._with(permuted).numpy()
    if np.may_share_memory(out, source) and np.shares_memory(out, source):
        raise RearrangeError("out overlaps the input; rearrange never writes to its input")
    kernel.copy_into(out.reshape(permuted.shape), source)


# ---------------------------------------------------------------------- rearrange


def lower_rearrange(plan: Plan) -> Runner:
    """The plan (of rearrange, or of a repeat: the same steps) as ``Tensor -> Tensor``."""
    refuse = refusal(plan)
    if refuse is not None:
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


# --------------------------------------------------------------------------- pack, unpack, einsum
# Tensor data is numpy underneath: pack and einsum run numpy's lowering on the Tensors'
# numpy views, and the fresh C-contiguous array it returns becomes the new storage.


def lower_pack(plan: Any, dtype: np.dtype) -> Runner:
    """A pack plan as ``Sequence[Tensor | array] -> Tensor``: numpy's pack, whose new
    C-contiguous array is the result's storage."""
    pack = ndarray.lower_pack(plan, dtype)
    layout = Layout.contiguous(plan.packed.shape)
    return lambda tensors: Tensor._wrap(Storage(pack(tensors).reshape(-1)), layout)


def lower_unpack(plan: Any) -> Runner:
    """An unpack plan as ``Tensor -> list[Tensor]``: the plan's output layouts on the
    packed Tensor's storage (all views)."""
    outputs = plan.outputs
    return lambda t: [t._with(layout) for layout in outputs]


def lower_einsum(plan: Any) -> Runner:
    """An einsum plan as ``Sequence[Tensor] -> Tensor``: each input's rearrange (on
    Tensors), numpy's contraction of their numpy views into a new storage, the output's
    rearrange (a view of it)."""
    contract = ndarray.lower_contraction(plan)
    preparations = [None if p is None else lower_rearrange(p.plan) for p in plan.preparations]
    output = plan.contraction
    finish = None if plan.output_pattern is None else lower_rearrange(plan.output_plan)

    def run(tensors: Any) -> Tensor:
        operands = [(t if p is None else p(t)).numpy() for t, p in zip(tensors, preparations)]
        result = Tensor._wrap(Storage(contract(operands).reshape(-1)), output)
        return result if finish is None else finish(result)
    return run
