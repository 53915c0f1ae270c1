"""dask arrays: the plan lowered lazily to dask's own ops, chunked to run out of core.

dask hides memory layout, so the plan is made for a C-contiguous array of the input's
shape (its copy step, if any, is where a C-ordered merge must move data). Every step is a
dask op that builds a graph and computes nothing: ``reshape`` for split / unsqueeze /
merge, ``transpose`` for permute, ``broadcast_to`` for expand, dask reductions for reduce.

Chunks. A reshape is done block by block, which keeps C order only when every block of a
group of dims being merged (or split) is one contiguous run of that group: some dim ``k``
of the group may be chunked freely, the dims before it must be chunked by 1 and the dims
after it must be whole. Call that the *k-form*. Before each reshape, chunks already in a
k-form are kept; otherwise that group alone is rechunked to the k-form whose blocks are
no larger than the largest block before it (nor than ``array.chunk-size`` when the
array's other dims leave less room), rather than leaving the choice to dask's reshape,
which may make whole dims one chunk. So a reshape never makes a block larger, and only
``repeat``'s broadcast axes can grow one, up to ``array.chunk-size``. The chunking is a pure function of the
plan, the input's chunks and the itemsize (:func:`step_chunks`); the runner applies it to
the chunks it meets and explain prints it as notes.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import RearrangeError
from ..layout import Layout
from ..plan import Plan, Step
from ..records import record
from . import ArrayInfo, reduction_error

Runner = Callable[[Any], Any]
Chunks = tuple[tuple[int, ...], ...]


def _da() -> Any:
    return sys.modules["dask.array"]


def matches(x: Any) -> bool:
    # a dask array exists only once the caller has imported dask.array
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(x, da.Array)


def cache_key(x: Any) -> tuple:
    # chunks are not in it: the runner fits the chunking to the chunks it meets
    return type(x), x.shape, x.dtype.str


def to_numpy(x: Any) -> np.ndarray:
    """The computed values of ``x`` (all its chunks, in memory)."""
    return np.asarray(x.compute())


def describe(x: Any) -> ArrayInfo:
    dtype = np.dtype(x.dtype)
    return ArrayInfo(Layout.contiguous(_known_shape(x)), dtype.name, dtype.itemsize)


def _known_shape(x: Any) -> tuple[int, ...]:
    if any(math.isnan(s) for s in x.shape):
        raise RearrangeError(
            f"dask array of unknown shape {x.shape}: some chunk sizes are unknown (nan); "
            f"call x.compute_chunk_sizes() first")
    return tuple(int(s) for s in x.shape)


def stack(xs: list[Any]) -> Any:
    return _da().stack(xs)


def chunk_target() -> int:
    """The block size dask aims for, in bytes (its ``array.chunk-size`` setting)."""
    from dask import config
    from dask.utils import parse_bytes

    value = config.get("array.chunk-size")
    return parse_bytes(value) if isinstance(value, str) else int(value)


# ---------------------------------------------------------------------- chunk planning

@record
class StepChunks:
    """How one plan step meets dask's chunks."""

    rechunk: Chunks | None   # what the step's input is rechunked to first; None: as it is
    output: Chunks | None    # the chunks the step produces; None: zero-size, dask decides


def step_chunks(step: Step, shape: tuple[int, ...], chunks: Chunks, itemsize: int,
                target: int) -> StepChunks:
    """The rechunk (if any) before ``step`` and the chunks after it, for an input of
    ``shape`` chunked as ``chunks``; ``target`` bounds new blocks, in bytes."""
    if 0 in shape:
        return StepChunks(None, None)
    if step.op in ("split", "unsqueeze", "merge"):
        return _reshape_chunks(shape, chunks, step.args, itemsize, target)
    if step.op == "permute":
        return StepChunks(None, tuple(chunks[d] for d in step.args))
    if step.op == "reduce":
        return StepChunks(None, chunks[:len(shape) - len(step.args)])
    if step.op == "expand":
        return StepChunks(None, _expand_chunks(shape, chunks, step.args, itemsize, target))
    return StepChunks(None, chunks)   # copy: dask copies block by block, chunks unchanged


def _reshape_groups(old: Sequence[int], new: Sequence[int]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The non-unit dims of ``old`` and ``new`` paired into consecutive runs of equal
    size: ``((i,), (j,))`` an unchanged dim, ``((i, ...), (j,))`` a merge, ``((i,), (j,
    ...))`` a split (or, never from a plan, several to several). Sizes are non-zero;
    size-1 dims belong to no group."""
    olds = [d for d, s in enumerate(old) if s != 1]
    news = [d for d, s in enumerate(new) if s != 1]
    groups = []
    i = j = 0
    while i < len(olds):
        group_old, group_new = [olds[i]], [news[j]]
        old_size, new_size = old[olds[i]], new[news[j]]
        i, j = i + 1, j + 1
        while old_size != new_size:
            if old_size < new_size:
                group_old.append(olds[i])
                old_size *= old[olds[i]]
                i += 1
            else:
                group_new.append(news[j])
                new_size *= new[news[j]]
                j += 1
        groups.append((tuple(group_old), tuple(group_new)))
    return groups


def _splits_and_merges(old: Sequence[int], new: Sequence[int]) -> bool:
    """True for a reshape no single plan step makes: some run of dims is both split
    and merged, e.g. (6, 4) -> (4, 6)."""
    return any(len(a) > 1 and len(b) > 1 for a, b in _reshape_groups(old, new))


def _regular(size: int, width: int) -> tuple[int, ...]:
    """``size`` in chunks of ``width``, the last one shorter if need be."""
    if size == 0:
        return (0,)
    return (width,) * (size // width) + ((size % width,) if size % width else ())


def _k_form(sizes: Sequence[int], limit: int) -> tuple[tuple[int, ...], ...]:
    """Chunks of a group of dims in the coarsest k-form whose blocks hold at most
    ``limit`` elements of the group (at least one)."""
    inner = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
    k = next(d for d in range(len(sizes)) if inner[d] <= limit)
    width = max(1, min(sizes[k], limit // inner[k]))
    return (*((1,) * s for s in sizes[:k]), _regular(sizes[k], width),
            *((s,) for s in sizes[k + 1:]))


def _merged(sizes: Sequence[int], group_chunks: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The chunks of the group merged into one dim when its chunks are in a k-form,
    else None."""
    n = len(sizes)
    k = next((d for d in range(n) if len(group_chunks[d]) != sizes[d]), n - 1)
    if any(len(c) != 1 for c in group_chunks[k + 1:]):
        return None
    inner = math.prod(sizes[k + 1:])
    return tuple(c * inner for c in group_chunks[k]) * math.prod(sizes[:k])


def _split(sizes: Sequence[int], dim_chunks: tuple[int, ...]) -> tuple[tuple[int, ...], ...] | None:
    """The chunks of the dims a dim chunked as ``dim_chunks`` splits into, when every
    block becomes a k-form block of them; else None."""
    for k in range(len(sizes)):
        inner = math.prod(sizes[k + 1:])
        periods = math.prod(sizes[:k])      # each period: one index of the dims before k
        if len(dim_chunks) % periods:
            continue
        pattern = dim_chunks[:len(dim_chunks) // periods]
        if any(c % inner for c in pattern) or pattern * periods != dim_chunks:
            continue
        return (*((1,) * s for s in sizes[:k]), tuple(c // inner for c in pattern),
                *((s,) for s in sizes[k + 1:]))
    return None


def _room(chunks: Chunks, group: Sequence[int], itemsize: int, target: int) -> int:
    """Elements of the group a block may hold within ``target`` bytes, given the
    other dims' largest chunks."""
    others = math.prod(max(c) for d, c in enumerate(chunks) if d not in group)
    return max(1, target // (itemsize * others))


def _reshape_chunks(shape: tuple[int, ...], chunks: Chunks, new_shape: tuple[int, ...],
                    itemsize: int, target: int) -> StepChunks:
    wanted = list(chunks)
    output: list[tuple[int, ...]] = [(1,)] * len(new_shape)
    for old_dims, new_dims in _reshape_groups(shape, new_shape):
        if len(old_dims) > 1 and len(new_dims) > 1:  # pragma: no cover - plans never do
            raise AssertionError(f"planner bug: a reshape {shape} -> {new_shape} that both "
                                 f"splits and merges")
        if len(old_dims) == len(new_dims) == 1:
            output[new_dims[0]] = chunks[old_dims[0]]
        elif len(new_dims) == 1:
            sizes = [shape[d] for d in old_dims]
            group_chunks = [chunks[d] for d in old_dims]
            merged = _merged(sizes, group_chunks)
            if merged is None:
                largest = math.prod(max(c) for c in group_chunks)
                limit = min(largest, _room(chunks, old_dims, itemsize, target))
                group_chunks = list(_k_form(sizes, limit))
                for d, c in zip(old_dims, group_chunks):
                    wanted[d] = c
                merged = _merged(sizes, group_chunks)
            output[new_dims[0]] = merged
        else:
            (old,) = old_dims
            sizes = [new_shape[d] for d in new_dims]
            parts = _split(sizes, chunks[old])
            if parts is None:
                limit = min(max(chunks[old]), _room(chunks, old_dims, itemsize, target))
                parts = _k_form(sizes, limit)
                wanted[old] = _merged(sizes, parts)
            for d, c in zip(new_dims, parts):
                output[d] = c
    rechunk = tuple(wanted) if tuple(wanted) != chunks else None
    return StepChunks(rechunk, tuple(output))


def _expand_chunks(shape: tuple[int, ...], chunks: Chunks, new_shape: tuple[int, ...],
                   itemsize: int, target: int) -> Chunks:
    """Chunks for broadcast axes that grow a block by at most what ``target`` allows
    (innermost axes whole first); the other dims keep theirs."""
    room = max(1, target // (itemsize * math.prod(max(c) for c in chunks)))
    output = list(chunks)
    for d in reversed(range(len(new_shape))):
        if shape[d] == 1 and new_shape[d] != 1:
            width = max(1, min(new_shape[d], room))
            output[d] = _regular(new_shape[d], width)
            room = max(1, room // width)
    return tuple(output)


# ---------------------------------------------------------------------- explain

def describe_copy(plan: Plan, x: Any, info: ArrayInfo) -> Plan:
    """The plan with dask's chunking as notes: the input's chunks, every rechunk before
    a step, the output's chunks. The copy kernel is dropped: dask copies the blocks."""
    steps = tuple(dataclasses.replace(step, kernel=None) if step.kernel is not None else step
                  for step in plan.steps)
    notes = chunk_notes(plan, tuple(x.chunks), info.itemsize, chunk_target())
    return dataclasses.replace(plan, steps=steps, notes=plan.notes + notes)


def chunk_notes(plan: Plan, chunks: Chunks, itemsize: int, target: int) -> tuple[str, ...]:
    notes = ["dask array: the plan is for a C-contiguous layout of its shape; every step "
             "is a lazy dask op",
             f"dask input chunks {_chunks_text(chunks)}: {_blocks_text(chunks, itemsize)}; "
             f"target {_bytes_text(target)} a block (array.chunk-size)"]
    shape = plan.input.shape
    rechunks = 0
    for number, step in enumerate(plan.steps, 1):
        planned = step_chunks(step, shape, chunks, itemsize, target)
        if planned.rechunk is not None:
            rechunks += 1
            changes = ", ".join(f"dim {d} {_dim_text(before)} -> {_dim_text(after)}"
                                for d, (before, after) in enumerate(zip(chunks, planned.rechunk))
                                if before != after)
            notes.append(f"dask rechunk before step {number} ({step.op}): {changes}")
        if step.is_copy:
            how = ("copy=True: each block copied (map_blocks(np.copy))"
                   if step is plan.steps[-1] and plan.copy_requested
                   else "no pass of its own; blocks are copied as the merge reshapes them")
            notes.append(f"dask step {number} (copy): {how}")
        shape = step.layout.shape
        if planned.output is None:
            notes.append(f"dask zero-size from step {number}: chunks as dask makes them")
            return tuple(notes)
        chunks = planned.output
    if not rechunks:
        notes.append("dask no rechunk: every reshape maps whole blocks to whole blocks")
    notes.append(f"dask output chunks {_chunks_text(chunks)}: {_blocks_text(chunks, itemsize)}; "
                 f"lazy until .compute() or da.store()")
    return tuple(notes)


def _dim_text(chunks: tuple[int, ...]) -> str:
    """``3x1024+512`` for chunks (1024, 1024, 1024, 512): runs of equal chunks."""
    runs: list[list[int]] = []
    for c in chunks:
        if runs and runs[-1][1] == c:
            runs[-1][0] += 1
        else:
            runs.append([1, c])
    if len(runs) > 4:
        return f"{len(chunks)} chunks of {min(chunks)}..{max(chunks)}"
    return "+".join(f"{n}x{c}" if n > 1 else str(c) for n, c in runs)


def _chunks_text(chunks: Chunks) -> str:
    parts = [_dim_text(c) for c in chunks]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _blocks_text(chunks: Chunks, itemsize: int) -> str:
    blocks = math.prod(len(c) for c in chunks)
    largest = math.prod(max(c) for c in chunks) * itemsize
    return f"{blocks:,} block{'s' if blocks != 1 else ''}, the largest {_bytes_text(largest)}"


def _bytes_text(n: int) -> str:
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n >= 1024 ** power:
            return f"{n / 1024 ** power:.3g} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------- lowering

def lower(plan: Plan, reduction: Any, sample: Any = None) -> Runner:
    itemsize = plan.itemsize or 1
    steps = plan.steps
    copy_requested = plan.copy_requested is True

    def run(x: Any) -> Any:
        target = chunk_target()
        for step in steps:
            planned = step_chunks(step, tuple(x.shape), tuple(x.chunks), itemsize, target)
            if planned.rechunk is not None:
                x = x.rechunk(planned.rechunk)
            x = _apply(step, x, planned.output, reduction)
        if copy_requested and steps and steps[-1].is_copy:
            x = x.map_blocks(np.copy, dtype=x.dtype)
        return x
    return run


def _apply(step: Step, x: Any, chunks: Chunks | None, reduction: Any) -> Any:
    if step.op in ("split", "unsqueeze", "merge"):
        return _reshape(x, step.args, chunks)
    if step.op == "permute":
        return x.transpose(step.args)
    if step.op == "expand":
        return _da().broadcast_to(x, step.args, chunks=chunks)
    if step.op == "reduce":
        return _reduce(x, reduction, step.args, step.layout.shape)
    return x   # copy: see lower (copy=True) and the merging reshape (a copy before a merge)


def _reshape(x: Any, shape: tuple[int, ...], chunks: Chunks | None) -> Any:
    """``x`` reshaped in C order, block by block: its chunks are already in the k-form
    :func:`step_chunks` chose, and ``chunks`` are the output's."""
    if tuple(x.shape) == shape:
        return x
    if chunks is None:   # zero-size: no data to move (and dask's reshape may refuse)
        return _da().zeros_like(x, shape=shape)
    da = _da()
    if 1 in x.shape:
        x = x[tuple(0 if s == 1 else slice(None) for s in x.shape)]
    core = tuple(s for s in shape if s != 1)
    if core != tuple(x.shape):
        blockwise = getattr(da, "reshape_blockwise", None)
        if blockwise is None:    # dask < 2024.10: its own reshape, chunks of its choosing
            x = x.reshape(core)
        elif len(core) > x.ndim:
            x = blockwise(x, core, chunks=tuple(c for c, s in zip(chunks, shape) if s != 1))
        else:
            x = blockwise(x, core)
    if len(core) != len(shape):
        x = x[tuple(None if s == 1 else slice(None) for s in shape)]
    return x


# ---------------------------------------------------------------------- pack, unpack, einsum

def reshape(x: Any, shape: tuple[int, ...]) -> Any:
    """``x`` reshaped in C order, rechunked first as a plan's reshape step would be."""
    shape = tuple(shape)
    old_shape = _known_shape(x)
    if old_shape == shape:
        return x
    if 0 not in shape and _splits_and_merges(old_shape, shape):
        return x.reshape(shape)     # not one of ours: dask's reshape, chunks of its choosing
    step = Step("merge", Layout.contiguous(shape), False, "reshape", shape)
    planned = step_chunks(step, old_shape, tuple(x.chunks), np.dtype(x.dtype).itemsize,
                          chunk_target())
    if planned.rechunk is not None:
        x = x.rechunk(planned.rechunk)
    return _reshape(x, shape, planned.output)


def concat(xs: list[Any], axis: int) -> Any:
    return _da().concatenate(xs, axis=axis)


def einsum(subscripts: str, *xs: Any) -> Any:
    return _da().einsum(subscripts, *xs)


def describe_einsum(plan: Any, xs: Any) -> Any:
    from ..contraction import with_engine

    return with_engine(plan, "dask.array.einsum", "dask.array.einsum: numpy.einsum on "
                       "each block, lazily")


# ---------------------------------------------------------------------- reductions

def _to_float(x: Any) -> Any:
    # numpy's promotion: integer and bool means (and var, std) are float64
    kind = np.dtype(x.dtype).kind
    return x if kind in "fc" else x.astype(np.float64)


def _quiet_log(block: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):  # log(0) = -inf for an all -inf slice, as wanted
        return np.log(block)


def _logsumexp(x: Any, dims: tuple[int, ...]) -> Any:
    """log(sum(exp(x))) shifted by the maximum so exp never overflows; an infinite
    maximum is not shifted. Dtypes as in the numpy lowering: integers and bools in
    float64, float16 computed in float32 and returned as float16."""
    da = _da()
    kind = np.dtype(x.dtype).kind
    if kind in "biu":
        x = x.astype(np.float64)
    elif np.dtype(x.dtype) == np.float16:
        return _logsumexp(x.astype(np.float32), dims).astype(np.float16)
    peak = x.max(axis=dims, keepdims=True)
    peak = da.where(da.isfinite(peak), peak, 0)
    total = da.exp(x - peak).sum(axis=dims)
    return total.map_blocks(_quiet_log, dtype=total.dtype) + da.squeeze(peak, axis=dims)


_DASK_REDUCERS: dict[str, Callable[[Any, tuple[int, ...]], Any]] = {
    "sum": lambda x, dims: x.sum(axis=dims),
    "mean": lambda x, dims: _to_float(x).mean(axis=dims),
    "min": lambda x, dims: x.min(axis=dims),
    "max": lambda x, dims: x.max(axis=dims),
    "prod": lambda x, dims: x.prod(axis=dims),
    "any": lambda x, dims: x.any(axis=dims),
    "all": lambda x, dims: x.all(axis=dims),
    "var": lambda x, dims: _to_float(x).var(axis=dims, ddof=0),
    "std": lambda x, dims: _to_float(x).std(axis=dims, ddof=0),
    "logsumexp": _logsumexp,
    "argmax": lambda x, dims: x.argmax(axis=dims[0]),
    "argmin": lambda x, dims: x.argmin(axis=dims[0]),
    "count_nonzero": lambda x, dims: _da().count_nonzero(x, axis=dims),
}


def _reduce(x: Any, reduction: Any, dims: tuple[int, ...], kept_shape: tuple[int, ...]) -> Any:
    da = _da()
    if callable(reduction):
        result = reduction(x, dims)
        if not isinstance(result, da.Array):
            result = da.asarray(result)
        if tuple(result.shape) != kept_shape:
            raise RearrangeError(
                f"the reduction callable returned {tuple(result.shape)}; expected an array of "
                f"shape {kept_shape} (the input of shape {tuple(x.shape)} reduced over axes {dims})")
        return result
    if 0 in x.shape:
        # no data: the result is whatever numpy gives for an empty input (or its error)
        from ..reductions import apply_reduction

        return da.from_array(apply_reduction(reduction, np.empty(x.shape, x.dtype), dims,
                                              kept_shape))
    try:
        return _DASK_REDUCERS[reduction](x, dims)
    except (ValueError, TypeError) as error:
        raise reduction_error(reduction, error) from None
