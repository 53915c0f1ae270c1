"""``pack`` and ``unpack``: einops' packing, planned as views and copies of strided memory.

``pack(tensors, "b * d")`` flattens the dims each input has in place of ``*`` and
concatenates the inputs along that one packed dim; ``unpack(packed, packed_shapes,
"b * d")`` undoes it. As with ``rearrange``, a pattern is parsed once (cached), planned
for the shapes (cached by pattern, shapes and dtypes), and the plan executed:

* pack allocates one C-contiguous array and copies every input once, straight into its
  place — a slice of the packed dim (a view of the output), split into the input's
  packed dims (always a view) — so no input is reshaped and nothing is copied twice;
* unpack is views only: a slice of the packed dim, split into the packed dims.

This module parses and plans, and declares both operations for the door
(:data:`PACK`, :data:`UNPACK`: their inputs, keys, planners, lowerings and context
lines), which does the rest of a call (:func:`rearrange.front.run`: the cache, traced
sizes, errors). The plans run through a backend's lowering: ``lower_pack`` and
``lower_unpack`` in :mod:`rearrange.backends.ndarray` (numpy arrays) and
:mod:`rearrange.backends.tensor` (``rearrange.Tensor``); torch, dask and array-API
arrays are reshaped and concatenated by their own library (``backend.reshape``,
``backend.concat``), the hooks' default.

``explain_pack`` and ``explain_unpack`` return that plan (:class:`PackPlan`) without
touching data: printable, JSON-ready, and convertible to plain numpy or torch code.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from . import backends, front
from .backends import ndarray
from .backends import tensor as tensor_backend
from .calls import SUPPORTED_ARRAYS, ArrayT, ElementType, dtype_of, numpy_layout
from .backends.protocol import hook
from .caching import PLANS
from .front import PLAIN_INT
from .errors import ArgumentTypeError, PatternError, RearrangeError
from .layout import Layout
from .parsing import PackPattern, parse_pack, pattern_error, shorten
from .plan import JsonDump, layout_dict
from .recipe import SizeCheck, is_symbolic, shapes_check
from .records import record
from .shapes import ShapeMismatchError
from .tensor import Tensor

__all__ = ["pack", "unpack", "explain_pack", "explain_unpack", "PackPlan", "PackStep"]


# --------------------------------------------------------------------------- plans


@record
class PackStep:
    """One operation of a pack or unpack plan and the layout it produces.

    Layouts address the packed array's memory: pack's output, unpack's input.
    """

    op: str                     # slice | split | copy
    index: int                  # the input (pack) or output (unpack) this step is for
    layout: Layout              # the layout after this step
    is_copy: bool
    reason: str                 # why this step is a view, or what the copy does
    args: tuple[int, ...] = ()  # slice: (dim, start, stop); split: the new shape

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "index": self.index,
            "kind": "copy" if self.is_copy else "view",
            "args": list(self.args),
            "shape": list(self.layout.shape),
            "strides": list(self.layout.strides),
            "offset": self.layout.offset,
            "reason": self.reason,
        }


@record
class PackPlan(JsonDump):
    """A pack or unpack for given shapes: printable, serialisable, lowerable.

    For ``op == "pack"`` the inputs are the tensors and the one output the packed array;
    for ``op == "unpack"`` the one input is the packed array and the outputs its views.
    Strides and offsets are in elements (``stride_unit == "elements"``), or in bytes for
    arrays whose byte strides are not multiples of the itemsize.
    """

    op: str                                     # "pack" or "unpack"
    pattern: str
    dtype: str | None                           # the packed array's dtype; None: unknown
    itemsize: int | None
    inputs: tuple[Layout, ...]
    outputs: tuple[Layout, ...]
    input_dtypes: tuple[str | None, ...]        # one per input
    input_itemsizes: tuple[int | None, ...]     # one per input
    packed_shapes: tuple[tuple[int, ...], ...]  # per unpacked tensor: the dims '*' stands for
    axis: int                                   # the packed dim of the packed array
    axis_lengths: tuple[tuple[str, int], ...]   # the named axes
    steps: tuple[PackStep, ...]
    stride_unit: str = "elements"
    # How the copy runs, where a backend says (numpy's pack: the row assembly, slabs or
    # numpy's one call, at the thread count in force); None: not said.
    how: str | None = None

    # ------------------------------------------------------------------ summary

    @property
    def is_view(self) -> bool:
        """True when every result shares the input's memory (unpack); pack always copies."""
        return not any(step.is_copy for step in self.steps) and self.op == "unpack"

    @property
    def copies(self) -> int:
        return sum(step.is_copy for step in self.steps)

    @property
    def views(self) -> int:
        return sum(not step.is_copy for step in self.steps)

    @property
    def packed(self) -> Layout:
        """The layout of the packed array: pack's output, unpack's input."""
        return self.outputs[0] if self.op == "pack" else self.inputs[0]

    @property
    def bytes_moved(self) -> int | None:
        """Bytes read plus bytes written (0 for unpack); None when a dtype is unknown."""
        if self.op == "unpack":
            return 0
        if self.itemsize is None or None in self.input_itemsizes:
            return None
        read = sum(layout.numel * itemsize  # type: ignore[operator]
                   for layout, itemsize in zip(self.inputs, self.input_itemsizes))
        return read + self.packed.numel * self.itemsize

    # ------------------------------------------------------------------ rendering

    def __str__(self) -> str:
        return _format(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description of the plan."""
        return {
            "op": self.op,
            "pattern": self.pattern,
            "dtype": self.dtype,
            "itemsize": self.itemsize,
            "stride_unit": self.stride_unit,
            "inputs": [layout_dict(layout) for layout in self.inputs],
            "input_dtypes": list(self.input_dtypes),
            "outputs": [layout_dict(layout) for layout in self.outputs],
            "packed_shapes": [list(shape) for shape in self.packed_shapes],
            "axis": self.axis,
            "axis_lengths": dict(self.axis_lengths),
            "is_view": self.is_view,
            "views": self.views,
            "copies": self.copies,
            "bytes_moved": self.bytes_moved,
            "steps": [step.to_dict() for step in self.steps],
            **({"how": self.how} if self.how is not None else {}),
        }

    def to_svg(self) -> str:
        """A picture of the plan as SVG text: each input over its storage, the place
        each part takes in the packed array (or, for unpack, each view of it), every
        cell showing the storage index it reads (see :meth:`rearrange.Plan.to_svg`)."""
        from .picture import pack_svg

        return pack_svg(self)

    def to_source(self, library: str = "numpy", name: str | None = None,
                  names: Sequence[str] | None = None) -> str:
        """The same computation as one expression of plain library calls.

        pack: ``np.concatenate`` / ``torch.cat`` of the inputs reshaped to one packed dim,
        named ``xs[0]``, ``xs[1]``, ... (``name`` replaces ``xs``; ``names`` names each
        input); torch inputs whose dtype differs from the result get ``.to(...)``, as
        ``torch.cat`` promotes differently from numpy. unpack: a list of slices of ``x``
        (or ``name``) along the packed dim, each split with ``reshape`` (numpy) or
        ``view`` (torch: it never copies, and a split needs no copy).
        """
        if library not in ("numpy", "torch"):
            raise RearrangeError(f"to_source: library must be 'numpy' or 'torch', got {library!r}")
        if self.op == "unpack":
            return self._unpack_source(library, "x" if name is None else name)
        if names is None:
            base = "xs" if name is None else name
            names = [f"{base}[{i}]" for i in range(len(self.inputs))]
        elif len(names) != len(self.inputs):
            raise RearrangeError(f"to_source: {len(names)} names for {len(self.inputs)} inputs")
        parts = []
        before, after = self.packed.shape[:self.axis], self.packed.shape[self.axis + 1:]
        for source, layout, shape, dtype in zip(names, self.inputs, self.packed_shapes,
                                                self.input_dtypes):
            flat = (*before, math.prod(shape), *after)
            call = source if layout.shape == flat else f"{source}.reshape({_ints(flat)})"
            if library == "torch" and dtype is not None and dtype != self.dtype:
                call += f".to(torch.{self.dtype})"
            parts.append(call)
        if library == "numpy":
            return f"np.concatenate([{', '.join(parts)}], axis={self.axis})"
        return f"torch.cat([{', '.join(parts)}], dim={self.axis})"

    def _unpack_source(self, library: str, name: str) -> str:
        items = []
        for index in range(len(self.outputs)):
            call = name
            for step in self.steps:
                if step.index != index:
                    continue
                if step.op == "slice":
                    dim, start, stop = step.args
                    call += "[" + ":, " * dim + f"{start}:{stop}]"
                else:
                    verb = "reshape" if library == "numpy" else "view"
                    call += f".{verb}({_ints(step.args)})"
            items.append(call if call != name else f"{name}[:]")
        return "[" + ", ".join(items) + "]"


def _ints(values: Sequence[int]) -> str:
    """Arguments of reshape/view: ``2, 3``, ``4,``, or ``()`` for a 0-d shape."""
    if not values:
        return "()"
    if len(values) == 1:
        return f"{values[0]},"
    return ", ".join(str(v) for v in values)


def _fmt(values: Sequence[int]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _format(plan: PackPlan) -> str:
    """The explain table: a header (what, how big, what it costs) and one row per step."""
    if plan.dtype is None:
        dtype = "unknown"
    else:
        dtype = f"{plan.dtype} ({plan.itemsize} byte{'s' if plan.itemsize != 1 else ''})"
    if plan.stride_unit == "bytes":
        dtype += "; strides and offsets in bytes"
    packing = plan.op == "pack"
    rows = []  # (label, layout, note)
    for k, layout in enumerate(plan.inputs):
        label = f"input {k}" if packing else "input"
        rows.append((label, layout, f"* = {_fmt(plan.packed_shapes[k])}" if packing else ""))
    for k, layout in enumerate(plan.outputs):
        label = "output" if packing else f"output {k}"
        note = "a new C-contiguous array" if packing else f"* = {_fmt(plan.packed_shapes[k])}"
        rows.append((label, layout, note))
    if packing and any(d not in (None, plan.dtype) for d in plan.input_dtypes):
        # inputs of another dtype than the packed array's: say which, in a column
        width = max(len(note) for _, _, note in rows[:-1])
        rows[:-1] = [(label, layout, f"{note:<{width}}  {dtype_k}")
                     for (label, layout, note), dtype_k in zip(rows[:-1], plan.input_dtypes)]
    label_width = max(9, *(len(label) + 1 for label, _, _ in rows))
    shape_width = max(len(_fmt(layout.shape)) for _, layout, _ in rows)
    strides_width = max(len(_fmt(layout.strides)) for _, layout, _ in rows)
    offset_width = max(len(str(layout.offset)) for _, layout, _ in rows)
    axes = " ".join(f"{n}={l}" for n, l in plan.axis_lengths)
    axes = (axes + ", " if axes else "") + f"* = {plan.packed.shape[plan.axis]} at dim {plan.axis}"
    if packing:
        moved = plan.bytes_moved
        cost = "" if moved is None else f", {moved:,} bytes moved (read + write)"
        count = len(plan.inputs)
        verdict = f"copy: {count} input{'s' if count != 1 else ''} copied into a new array{cost}"
    else:
        count = len(plan.outputs)
        verdict = f"view: {count} view{'s' if count != 1 else ''} of the input, no data is moved"
    lines = [f"{plan.op} '{plan.pattern}'", f"  {'dtype'.ljust(label_width)}{dtype}"]
    for label, layout, note in rows:
        lines.append(
            f"  {label.ljust(label_width)}shape {_fmt(layout.shape):<{shape_width}}  "
            f"strides {_fmt(layout.strides):<{strides_width}}  "
            f"offset {layout.offset:<{offset_width}}  {note}".rstrip())
    lines += [f"  {'axes'.ljust(label_width)}{axes}", f"  {'result'.ljust(label_width)}{verdict}"]
    if plan.how is not None:
        lines.append(f"  {'runs'.ljust(label_width)}{plan.how}")
    if not plan.steps:
        lines.append("  (no steps: each result is the whole packed array)")
        return "\n".join(lines)
    table = [("#", "step", "input" if packing else "output", "shape", "strides", "offset",
              "kind", "reason")]
    for number, step in enumerate(plan.steps, 1):
        table.append((str(number), step.op, str(step.index), _fmt(step.layout.shape),
                      _fmt(step.layout.strides), str(step.layout.offset),
                      "copy" if step.is_copy else "view", step.reason))
    widths = [max(len(row[k]) for row in table) for k in range(7)]
    lines.append("")
    for row in table:
        cells = [row[k].ljust(widths[k]) for k in range(7)] + [row[7]]
        lines.append(("  " + "  ".join(cells)).rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------- planning


def _part_view(whole: Layout, k: int, axis: int, start: int, shape: tuple[int, ...],
               total: int, steps: list[PackStep], role: str, name: str,
               note: str = "") -> Layout:
    """The view of part ``k`` of ``whole`` along the packed ``axis``: the slice from
    ``start`` (unless the part is the whole axis), split into ``shape`` (unless it is
    one dim). Appends the steps taken; ``note`` ends the first step's reason."""
    size = math.prod(shape)
    view = whole
    if size != total:
        view = whole.slice_dim(axis, start, start + size, 1)
        steps.append(PackStep(
            "slice", k, view, False,
            f"{_slice_text(axis, start, start + size, name)}: {role}: a slice is always a "
            f"view{note}", (axis, start, start + size)))
        note = ""
    if shape != (size,):
        view = view.split(axis, shape)
        steps.append(PackStep("split", k, view, False, _split_reason(shape) + note, view.shape))
    return view


def _slice_text(dim: int, start: int, stop: int, name: str) -> str:
    return f"{name}[" + ":, " * dim + f"{start}:{stop}]"


def _split_reason(shape: tuple[int, ...]) -> str:
    if not shape:
        return "* -> (): drop the unit dim: always a view"
    return f"* -> {_fmt(shape)}: splitting one dim is always a view"


def _scaled(layout: Layout, factor: int) -> Layout:
    if factor == 1:
        return layout
    return Layout(layout.shape, tuple(s * factor for s in layout.strides), layout.offset * factor)


def plan_pack(pattern: PackPattern, layouts: Sequence[Layout], dtypes: Sequence[str | None],
              itemsizes: Sequence[int | None], dtype: str | None, itemsize: int | None,
              stride_unit: str = "elements") -> PackPlan:
    """Plan packing inputs of ``layouts`` (with ``dtypes`` and ``itemsizes``, None where
    unknown) into one array of ``dtype``.

    Raises :class:`ShapeMismatchError` when an input has too few dims or disagrees with
    the first input on a named axis.
    """
    text = pattern.text
    n_before, n_after = len(pattern.before), len(pattern.after)
    _check_pack_ranks(pattern, [layout.shape for layout in layouts])
    first = layouts[0].shape
    lengths = first[:n_before] + (first[len(first) - n_after:] if n_after else ())
    for k, layout in enumerate(layouts[1:], 1):
        shape = layout.shape
        mine = shape[:n_before] + (shape[len(shape) - n_after:] if n_after else ())
        for axis, want, got in zip((*pattern.before, *pattern.after), lengths, mine):
            if want != got:
                raise ShapeMismatchError(
                    f"input {k} has {axis.name}={got} (shape {_fmt(shape)}), but input 0 has "
                    f"{axis.name}={want} (shape {_fmt(first)}): the inputs must agree on every "
                    f"axis but '*'\n{_caret_text(text, axis.start, axis.end)}")
    packed_shapes = tuple(layout.shape[n_before:layout.ndim - n_after] for layout in layouts)
    sizes = [math.prod(shape) for shape in packed_shapes]
    total = sum(sizes)
    before, after = lengths[:n_before], lengths[n_before:]
    output = Layout.contiguous((*before, total, *after))
    steps: list[PackStep] = []
    position = 0
    for k, (shape, size) in enumerate(zip(packed_shapes, sizes)):
        place = _part_view(output, k, n_before, position, shape, total, steps,
                           f"input {k}'s place along *", "output")
        cast = "" if dtypes[k] in (None, dtype) else f", cast from {dtypes[k]} to {dtype}"
        steps.append(PackStep("copy", k, place, True, f"input {k} copied into its place{cast}"))
        position += size
    if stride_unit == "bytes":  # inputs are in bytes: so is everything else
        assert itemsize is not None
        output = _scaled(output, itemsize)
        steps = [PackStep(s.op, s.index, _scaled(s.layout, itemsize), s.is_copy, s.reason, s.args)
                 for s in steps]
    return PackPlan(
        op="pack", pattern=text, dtype=dtype, itemsize=itemsize, inputs=tuple(layouts),
        outputs=(output,), input_dtypes=tuple(dtypes), input_itemsizes=tuple(itemsizes),
        packed_shapes=packed_shapes,
        axis=n_before, axis_lengths=tuple(zip(pattern.names, lengths)), steps=tuple(steps),
        stride_unit=stride_unit,
    )


def _check_pack_ranks(pattern: PackPattern, shapes: Sequence[tuple[Any, ...]]) -> None:
    """Every input of pack has the named axes and zero or more dims for ``*``."""
    text = pattern.text
    named = len(pattern.before) + len(pattern.after)
    for k, shape in enumerate(shapes):
        if len(shape) < named:
            axes = shorten(", ".join(pattern.names))
            raise ShapeMismatchError(
                f"input {k} has shape {_fmt(shape)}, {len(shape)} dim"
                f"{'s' if len(shape) != 1 else ''}, but the pattern names {named} ax"
                f"{'es' if named != 1 else 'is'} besides '*' ({axes}): every input needs at "
                f"least {named}\n{_caret_text(text, 0, len(text))}")


def _check_unpack_rank(pattern: PackPattern, shape: tuple[Any, ...]) -> None:
    """unpack's input has the named axes and one packed dim for ``*``."""
    text = pattern.text
    expected = len(pattern.before) + 1 + len(pattern.after)
    if len(shape) != expected:
        raise ShapeMismatchError(
            f"the input has shape {_fmt(shape)}, {len(shape)} dim"
            f"{'s' if len(shape) != 1 else ''}, but the pattern describes {expected}: the "
            f"named axes and one packed dim for '*'\n{_caret_text(text, 0, len(text))}")


def plan_unpack(pattern: PackPattern, layout: Layout, packed_shapes: Sequence[tuple[int, ...]],
                dtype: str | None, itemsize: int | None,
                stride_unit: str = "elements") -> PackPlan:
    """Plan splitting an array of ``layout`` into views of ``packed_shapes`` (validated
    tuples of ints; at most one -1 among them all, which is inferred)."""
    text = pattern.text
    n_before, n_after = len(pattern.before), len(pattern.after)
    _check_unpack_rank(pattern, layout.shape)
    total = layout.shape[n_before]
    resolved = _resolve_minus_one(packed_shapes, total, text, pattern, layout.shape)
    steps: list[PackStep] = []
    outputs = []
    position = 0
    for k, shape in enumerate(resolved):
        size = math.prod(shape)
        inferred = ""
        if shape != tuple(packed_shapes[k]):
            value = shape[packed_shapes[k].index(-1)]
            inferred = f" (-1 inferred as {value}: {size} of the {total} along * are left for it)"
        outputs.append(_part_view(layout, k, n_before, position, shape, total, steps,
                                  f"output {k}'s part of *", "x", inferred))
        position += size
    names = pattern.names
    lengths = layout.shape[:n_before] + layout.shape[n_before + 1:]
    return PackPlan(
        op="unpack", pattern=text, dtype=dtype, itemsize=itemsize, inputs=(layout,),
        outputs=tuple(outputs), input_dtypes=(dtype,), input_itemsizes=(itemsize,),
        packed_shapes=tuple(resolved),
        axis=n_before, axis_lengths=tuple(zip(names, lengths)), steps=tuple(steps),
        stride_unit=stride_unit,
    )


def _resolve_minus_one(packed_shapes: Sequence[tuple[int, ...]], total: int, text: str,
                       pattern: PackPattern, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """``packed_shapes`` with its -1 (if any) replaced, checked to fill ``total``."""
    star = _caret_text(text, pattern.star_start, pattern.star_end)
    where = f"the input (shape {_fmt(shape)}) has {total} along '*'"
    unknown = [k for k, s in enumerate(packed_shapes) if -1 in s]
    known = sum(math.prod(s) for s in packed_shapes if -1 not in s)
    shown = [tuple(s) for s in packed_shapes]
    if not unknown:
        if known != total:
            raise ShapeMismatchError(
                f"the packed shapes {shown} take {known} along '*', but {where}\n{star}")
        return list(packed_shapes)
    k = unknown[0]
    others = math.prod(v for v in packed_shapes[k] if v != -1)
    rest = total - known
    if rest < 0:
        raise ShapeMismatchError(
            f"the packed shapes {shown} other than {_fmt(packed_shapes[k])} take {known} along "
            f"'*', but {where}\n{star}")
    if others == 0 or rest % others:
        why = ("its other lengths multiply to 0, so -1 could be any length" if others == 0
               else f"{rest} is not divisible by {others}")
        raise ShapeMismatchError(
            f"cannot infer -1 in {_fmt(packed_shapes[k])}: {rest} remain along '*' ({total} "
            f"minus {known} for the other shapes) and {why}\n{star}")
    value = rest // others
    result = list(packed_shapes)
    result[k] = tuple(value if v == -1 else v for v in packed_shapes[k])
    return result


def _caret_text(text: str, start: int, end: int) -> str:
    return str(pattern_error("", text, start, max(end, start + 1)))[1:]


# --------------------------------------------------------------------------- inputs


class _Input(NamedTuple):
    layout: Layout
    dtype: np.dtype | ElementType | None  # None: unknown (a shape given to explain
                                          # without dtype=)
    unit: str               # "elements" or "bytes": the unit of the layout's strides


def _describe(item: Any, where: str) -> _Input:
    """The layout, dtype and stride unit of a numpy array or a Tensor."""
    if isinstance(item, Tensor):
        return _Input(item.layout, item.dtype, "elements")
    if isinstance(item, np.generic):
        item = np.asarray(item)
    if isinstance(item, np.ndarray):
        layout, unit = numpy_layout(item)
        return _Input(layout, item.dtype, unit)
    raise ArgumentTypeError(
        f"{where} is a {type(item).__module__}.{type(item).__name__}; expected "
        f"{SUPPORTED_ARRAYS}")


def _shape_tuple(value: Any) -> tuple[int, ...] | None:
    """``value`` as a tuple of ints if it is a shape (a tuple or list of ints), else None."""
    if not isinstance(value, (tuple, list)):
        return None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return None
    return tuple(int(v) for v in value)


def _result_dtype(dtypes: Sequence[np.dtype | ElementType]) -> np.dtype | ElementType:
    """numpy's promotion, as np.concatenate does it; a dtype numpy does not know
    (bfloat16 from explain) only with itself."""
    if isinstance(dtypes[0], ElementType) and all(d == dtypes[0] for d in dtypes):
        return dtypes[0]
    try:
        return np.result_type(*dtypes)
    except TypeError:  # numpy's DTypePromotionError is a TypeError
        names = ", ".join(dtype.name for dtype in dtypes)
        raise ArgumentTypeError(f"pack(): the inputs' dtypes ({names}) have no common dtype "
                                "that numpy would concatenate them as") from None


def _check_sequence(tensors: Any, op: str) -> None:
    if not isinstance(tensors, (list, tuple)):
        raise ArgumentTypeError(
            f"{op}() takes a list or tuple of arrays; got {type(tensors).__module__}."
            f"{type(tensors).__name__}")
    if not tensors:
        raise RearrangeError(f"{op}() got an empty list; expected at least one array")


def _context(op: str, pattern: str, shapes: str) -> str:
    verb = "packing" if op == "pack" else "unpacking"
    return f"  while {verb} with pattern '{shorten(pattern)}': {shapes}"


def _normalise_packed_shapes(packed_shapes: Any) -> list[tuple[int, ...]]:
    """packed_shapes as a list of tuples of ints (numpy ints allowed), each entry >= -1,
    and -1 at most once among them all."""
    if not isinstance(packed_shapes, (list, tuple)):
        raise ArgumentTypeError(
            "unpack(): packed_shapes must be a list of shapes (tuples or lists of ints), as "
            f"pack returns; got {type(packed_shapes).__name__}")
    result = []
    for k, shape in enumerate(packed_shapes):
        if isinstance(shape, np.ndarray) and shape.ndim == 1:
            shape = shape.tolist()
        if not isinstance(shape, (list, tuple)) or not all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in shape):
            raise ArgumentTypeError(
                f"unpack(): packed_shapes[{k}] must be a tuple or list of ints; got {shape!r}")
        shape = tuple(int(v) for v in shape)
        if any(v < -1 for v in shape):
            raise RearrangeError(
                f"unpack(): packed_shapes[{k}] = {shape} has a negative length; only -1 "
                "(a length to infer) is allowed")
        result.append(shape)
    minus_ones = sum(shape.count(-1) for shape in result)
    if minus_ones > 1:
        raise RearrangeError(
            f"unpack(): packed_shapes {result} hold {minus_ones} times -1; at most one length "
            "can be inferred")
    return result


# --------------------------------------------------------------------------- pack


def pack(tensors: Sequence[ArrayT], pattern: str) -> tuple[ArrayT, list[tuple[int, ...]]]:
    """Pack several arrays into one, as einops' ``pack``: the dims each input has in place
    of ``*`` are flattened, and the inputs concatenated along that dim.

    Returns ``(packed, packed_shapes)``: a new C-contiguous array (a numpy array, or a
    :class:`rearrange.Tensor` when the first input is one) whose dtype is numpy's
    promotion of the inputs' dtypes, and per input the shape ``*`` stood for, which
    :func:`unpack` takes to undo the packing.

    >>> import numpy as np
    >>> packed, ps = pack([np.zeros((2, 3, 5)), np.zeros((2, 3, 7, 5))], 'i j * k')
    >>> packed.shape, ps
    ((2, 3, 8, 5), [(), (7,)])
    """
    if type(tensors) is list or type(tensors) is tuple:
        try:
            # _pack_key, written out: the warm path's one lookup (a miss: the door's)
            entry = PLANS.peek(("pack", pattern, *[(type(x), x.shape, x.dtype) for x in tensors]))
        except (TypeError, AttributeError, RuntimeError):  # not arrays (or tensors without
            entry = None        # sizes: nested), or an unhashable pattern: the door says
        if entry is not None:
            run, packed_shapes = entry
            try:
                return run(tensors), list(packed_shapes)
            except (RearrangeError, MemoryError, RuntimeError) as error:
                raised = front.failure(PACK, error, pattern, tensors, {}, None)
                if raised is None:
                    raise
                raise raised from None
    return front.run(PACK, tensors, pattern)


def _plan_pack(pattern: str, described: Sequence[_Input]
               ) -> tuple[PackPlan, np.dtype | ElementType | None]:
    """Parse and plan, with every PatternError given the call's context. Returns the
    plan and the packed array's dtype (None when some input's dtype is unknown)."""
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__} {pattern!r}")
    dtypes = [d.dtype for d in described]
    # `None in dtypes` would be wrong: np.dtype("float64") == None is True.
    known = not any(d is None for d in dtypes)
    packed = _result_dtype(dtypes) if known else None  # type: ignore[arg-type]
    unit = "bytes" if any(d.unit == "bytes" for d in described) else "elements"
    # a byte-strided input comes from numpy, so its dtype (and itemsize) is known
    layouts = [d.layout if d.unit == unit
               else _scaled(d.layout, d.dtype.itemsize)  # type: ignore[union-attr]
               for d in described]
    try:
        plan = plan_pack(
            parse_pack(pattern), layouts,
            [None if d is None else d.name for d in dtypes],
            [None if d is None else d.itemsize for d in dtypes],
            None if packed is None else packed.name, None if packed is None else packed.itemsize,
            unit)
    except PatternError as error:
        shapes = "input shapes [" + ", ".join(_fmt(d.layout.shape) for d in described) + "]"
        raise type(error)(f"{error}\n{_context('pack', pattern, shapes)}") from None
    return plan, packed


def explain_pack(tensors_or_shapes: Sequence[Any], pattern: str, *, dtype: Any = None) -> PackPlan:
    """The plan ``pack`` follows for these inputs, without touching any data.

    Each item is an array, a :class:`rearrange.Tensor` or a shape (a tuple of ints,
    C-contiguous, of ``dtype``; None: unknown).

    >>> plan = explain_pack([(2, 3, 5), (2, 3, 7, 5)], 'i j * k', dtype='float32')
    >>> plan.outputs[0].shape, plan.packed_shapes, plan.is_view
    ((2, 3, 8, 5), ((), (7,)), False)
    >>> plan.to_source()
    'np.concatenate([xs[0].reshape(2, 3, 1, 5), xs[1]], axis=2)'
    """
    if (isinstance(tensors_or_shapes, (tuple, list)) and tensors_or_shapes
            and all(type(v) is int for v in tensors_or_shapes)):
        raise ArgumentTypeError(
            f"explain_pack() takes a list of inputs (arrays, Tensors or shapes), not one shape; "
            f"for one input of shape {tuple(tensors_or_shapes)}, pass [{tuple(tensors_or_shapes)}]")
    _check_sequence(tensors_or_shapes, "explain_pack")
    resolved = None if dtype is None else dtype_of(dtype)
    described = []
    for k, item in enumerate(tensors_or_shapes):
        shape = _shape_tuple(item)
        if shape is None:
            described.append(_describe(item, f"explain_pack(): item {k}"))
        else:
            described.append(_Input(Layout.contiguous(shape), resolved, "elements"))
    return _plan_pack(pattern, described)[0]


# --------------------------------------------------------------------------- unpack


def unpack(tensor: ArrayT, packed_shapes: Sequence[Sequence[int]], pattern: str) -> list[ArrayT]:
    """Split a packed array into views, as einops' ``unpack``: the packed dim (``*``)
    is cut into one slice per shape of ``packed_shapes``, and each slice split into that
    shape. One length among all of ``packed_shapes`` may be -1: it is inferred.

    Every result is a view of ``tensor`` (numpy array or :class:`rearrange.Tensor`).

    >>> import numpy as np
    >>> packed = np.arange(2 * 8).reshape(2, 8)
    >>> a, b, c = unpack(packed, [(3,), (2, 2), ()], 'b *')
    >>> a.shape, b.shape, c.shape, np.shares_memory(b, packed)
    ((2, 3), (2, 2, 2), (2,), True)
    """
    run = None
    try:
        shapes = tuple(map(tuple, packed_shapes))
        # 3.0 or True equals an int: only plain ints may hit (else the door's planner
        # rejects them); the keys are _unpack_key's, written out: the warm path's lookup
        if PLAIN_INT.issuperset(type(v) for s in shapes for v in s):
            if type(tensor) is np.ndarray:
                run = PLANS.peek(("unpack", pattern, tensor.shape, shapes))
            elif type(tensor) is Tensor:
                run = PLANS.peek(("unpack", pattern, tensor.layout, shapes))
            elif (backend := backends.by_type.get(type(tensor))) is not None:
                backends.check(backend, tensor)   # a cached runner slices before it reshapes
                run = PLANS.peek(("unpack", pattern, type(tensor), tuple(tensor.shape), shapes))
    except TypeError:  # not shapes, or an unhashable pattern: the door says which
        run = None
    if run is None:
        return front.run(UNPACK, tensor, pattern, extras=packed_shapes)
    try:
        return run(tensor)
    except (RearrangeError, MemoryError, RuntimeError) as error:
        raised = front.failure(UNPACK, error, pattern, tensor, {}, packed_shapes)
        if raised is None:
            raise
        raise raised from None


# --------------------------------------------------------------------------- the door
# pack and unpack as the door (rearrange.front.run) takes them. Entries of the plan cache:
# * ("pack", pattern, per input (type, shape, dtype)) -> (runner, packed_shapes). The
#   runner allocates the packed array in the inputs' promoted dtype and assigns each
#   input into its slice (numpy reads the input's strides at each call), or has the
#   library reshape and concatenate, so strides are not needed; the type decides numpy
#   vs Tensor vs a foreign library.
# * ("unpack", pattern, the packed array's shape (numpy: indexing and a one-dim split,
#   which never depend on strides or dtype) or layout (Tensor: the results' layouts) or
#   (type, shape) (foreign), packed_shapes) -> runner. Kept only when packed_shapes are
#   plain ints (3.0 == 3), and not for subclasses of Tensor.
# Keys of traced sizes (torch.compile's SymInts) cannot be hashed: nothing is kept.
#
# numpy arrays and Tensors (numpy memory, which this package reads) get a plan over their
# layouts and dtypes; any other library's arrays a plan of the shapes alone, run by the
# backend's ``lower_pack`` / ``lower_unpack`` where it has them (torch), else by its
# ``reshape`` and ``concat`` (autograd, devices and laziness carry through; dtypes are the
# library's business).


def _planned_over_memory(backend: Any) -> bool:
    return backend is ndarray or backend is tensor_backend


def _foreign_backend(x: Any) -> Any:
    """The backend of a torch, dask, array-API array or numpy subclass; None for exact
    numpy arrays, numpy scalars and Tensors."""
    if type(x) is np.ndarray or isinstance(x, (np.generic, Tensor)):
        return None
    return backends.backend_for(x)


def _pack_inputs(tensors: Any) -> tuple[Any, Sequence[Any]]:
    """A list of arrays of one backend: the first item's (numpy arrays, numpy scalars
    and Tensors mix, the first deciding the result's type)."""
    _check_sequence(tensors, "pack")
    backend = _foreign_backend(tensors[0])
    if backend is None:
        return (tensor_backend if isinstance(tensors[0], Tensor) else ndarray), tensors
    for k, x in enumerate(tensors):
        if not backend.matches(x):
            raise ArgumentTypeError(
                f"pack(): item {k} is a {type(x).__module__}.{type(x).__name__}; every item "
                f"must be of the first one's type ({type(tensors[0]).__name__})")
    return backend, tensors


def _pack_key(backend: Any, tensors: Sequence[Any], pattern: Any, lengths: Any,
              extras: Any) -> Any:
    try:
        return ("pack", pattern, *[(type(x), x.shape, x.dtype) for x in tensors])
    except (AttributeError, RuntimeError):  # not arrays, nested tensors: planning says which
        return front.NOT_KEPT


def _pack_plan(backend: Any, tensors: Sequence[Any], pattern: Any, lengths: Any,
               extras: Any) -> tuple[PackPlan, Any]:
    """The plan and the packed array's dtype (None for a library's arrays)."""
    if not _planned_over_memory(backend):
        # the backend's own account of the shapes (it refuses the ones no plan can take)
        return _plan_pack(pattern, [
            _Input(Layout.contiguous(backend.describe(x).layout.shape), None, "elements")
            for x in tensors])
    described = [_describe(x, f"pack(): item {k}") for k, x in enumerate(tensors)]
    plan, dtype = _plan_pack(pattern, described)
    if backend is tensor_backend and dtype.kind not in "biufc":  # type: ignore[union-attr]
        raise ArgumentTypeError(f"pack(): a rearrange.Tensor cannot hold dtype {dtype}")
    return plan, dtype


def _pack_lower(backend: Any, planned: tuple[PackPlan, Any], tensors: Sequence[Any],
                lengths: Any, extras: Any) -> tuple[Any, tuple]:
    plan, dtype = planned
    lower_pack = hook(backend, "lower_pack")
    if lower_pack is not None:
        return lower_pack(plan, dtype), plan.packed_shapes
    axis = plan.axis
    shapes = [(layout.shape[:axis], math.prod(packed), layout.shape[axis + len(packed):])
              for layout, packed in zip(plan.inputs, plan.packed_shapes)]

    def run(xs: Sequence[Any]) -> Any:
        pieces = [backend.reshape(x, (*before, size, *after))
                  for x, (before, size, after) in zip(xs, shapes)]
        return backend.concat(pieces, axis)
    return run, plan.packed_shapes


def _pack_traced(backend: Any, tensors: Sequence[Any], pattern: Any, lengths: Any,
                 extras: Any) -> tuple[Any, tuple]:
    """pack over traced sizes: the steps depend on the ranks alone and sizes are
    carried as expressions, never compared in Python (see :mod:`rearrange.symbolic`).
    That the inputs agree on the named axes is asserted by the backend
    (``assert_sizes``) before the library's concatenation, with eager's error."""
    parsed = _parsed_with_context("pack", pattern, [tuple(x.shape) for x in tensors])
    shapes = [tuple(x.shape) for x in tensors]
    try:
        _check_pack_ranks(parsed, shapes)
    except RearrangeError as error:
        raise type(error)(f"{error}\n{_context('pack', pattern, _shapes_text(shapes))}") from None
    n_before, n_after = len(parsed.before), len(parsed.after)
    packed_shapes = tuple(shape[n_before:len(shape) - n_after] for shape in shapes)
    checks = _pack_checks(parsed, shapes)
    assert_sizes = hook(backend, "assert_sizes")

    def run(xs: Sequence[Any]) -> Any:
        if checks:
            assert_sizes(checks)
        pieces = [backend.reshape(x, (*shape[:n_before], math.prod(packed),
                                      *shape[len(shape) - n_after:]))
                  for x, shape, packed in zip(xs, shapes, packed_shapes)]
        return backend.concat(pieces, n_before)
    return run, packed_shapes


def _pack_context(error: RearrangeError, pattern: Any, tensors: Sequence[Any], lengths: Any,
                  extras: Any) -> RearrangeError:
    shapes = "input shapes [" + ", ".join(_fmt(tuple(x.shape)) for x in tensors) + "]"
    return _in_context(error, "pack", pattern, shapes)


def _call_pack(entry: tuple[Any, tuple], tensors: Sequence[Any]) -> tuple[Any, list]:
    run, packed_shapes = entry
    return run(tensors), list(packed_shapes)


def _in_context(error: RearrangeError, op: str, pattern: str, where: str) -> RearrangeError:
    """``error`` (of its class) with the call's context line, unless it has one."""
    if f"pattern '{shorten(pattern)}'" in str(error):
        return error
    return type(error)(f"{error}\n{_context(op, pattern, where)}")


#: pack, as the door takes it.
PACK = front.Operation(name="pack", parse_kind="pack", inputs=_pack_inputs, key=_pack_key,
                       plan=_pack_plan, lower=_pack_lower, context=_pack_context,
                       traced=front.any_traced, lower_traced=_pack_traced, call=_call_pack)


def _unpack_inputs(tensor: Any) -> tuple[Any, Any]:
    backend = _foreign_backend(tensor)
    if backend is not None:
        backends.check(backend, tensor)
        return backend, tensor
    if isinstance(tensor, np.generic):
        tensor = np.asarray(tensor)
    elif not isinstance(tensor, (np.ndarray, Tensor)):
        _describe(tensor, "unpack(): the packed array")  # raises: what unpack takes
    return (tensor_backend if isinstance(tensor, Tensor) else ndarray), tensor


def _unpack_key(backend: Any, tensor: Any, pattern: Any, lengths: Any,
                packed_shapes: Any) -> Any:
    try:
        shapes = tuple(map(tuple, packed_shapes))
    except TypeError:  # not shapes: the planner says so
        return front.NOT_KEPT
    if not PLAIN_INT.issuperset(type(v) for s in shapes for v in s):
        return front.NOT_KEPT
    if backend is ndarray:
        return ("unpack", pattern, tensor.shape, shapes)
    if backend is tensor_backend:
        return ("unpack", pattern, tensor.layout, shapes) if type(tensor) is Tensor \
            else front.NOT_KEPT
    return ("unpack", pattern, type(tensor), tuple(tensor.shape), shapes)


def _unpack_is_traced(backend: Any, tensor: Any, lengths: Any, packed_shapes: Any) -> bool:
    """Traced sizes, or packed shapes that are (as a compiled pack returns them)."""
    if hook(backend, "traced")(tensor, lengths):
        return True
    try:
        return any(is_symbolic(v) for s in packed_shapes for v in s)
    except TypeError:  # not shapes: the planner says so
        return False


def _unpack_plan(backend: Any, tensor: Any, pattern: Any, lengths: Any,
                 packed_shapes: Any) -> PackPlan:
    if not _planned_over_memory(backend):
        shape = backend.describe(tensor).layout.shape
        return _plan_unpack(pattern, Layout.contiguous(shape), packed_shapes, None, None,
                            "elements")[0]
    layout, dtype, unit = _describe(tensor, "unpack(): the packed array")
    return _plan_unpack(pattern, layout, packed_shapes, dtype.name,  # type: ignore[union-attr]
                        dtype.itemsize, unit)[0]  # type: ignore[union-attr]


def _unpack_lower(backend: Any, plan: PackPlan, tensor: Any, lengths: Any,
                  packed_shapes: Any) -> Any:
    lower_unpack = hook(backend, "lower_unpack")
    if lower_unpack is not None:
        return lower_unpack(plan)
    # slices then reshapes, by the library (views wherever the library makes them:
    # torch always can here)
    axis = plan.axis
    places = []
    start = 0
    for output, packed in zip(plan.outputs, plan.packed_shapes):
        size = math.prod(packed)
        index = (slice(None),) * axis + (slice(start, start + size), Ellipsis)
        places.append((index, output.shape))
        start += size

    def run(x: Any) -> list[Any]:
        return [backend.reshape(x[index], out_shape) for index, out_shape in places]
    return run


def _unpack_context(error: RearrangeError, pattern: Any, tensor: Any, lengths: Any,
                    packed_shapes: Any) -> RearrangeError:
    where = (f"input shape {_fmt(tuple(tensor.shape))}, packed_shapes "
             f"{shorten(repr(packed_shapes))}")
    return _in_context(error, "unpack", pattern, where)


def _unpack_traced(backend: Any, tensor: Any, pattern: Any, lengths: Any,
                   packed_shapes: Any) -> Any:
    """unpack over traced sizes (and packed shapes that may be traced, as a compiled
    pack returns them): slices and reshapes whose sizes are expressions; a -1 is what
    the other shapes leave of the packed dim. That the shapes fill the packed dim is
    asserted by the backend (``assert_sizes``), with eager's error."""
    shape = tuple(tensor.shape)
    parsed = _parsed_with_context("unpack", pattern, [shape])
    try:
        _check_unpack_rank(parsed, shape)
        if not isinstance(packed_shapes, (list, tuple)) or not all(
                isinstance(s, (list, tuple)) for s in packed_shapes):
            raise ArgumentTypeError(
                "unpack(): packed_shapes must be a list of shapes (tuples or lists of ints), "
                f"as pack returns; got {packed_shapes!r}")
    except RearrangeError as error:
        raise type(error)(f"{error}\n{_context('unpack', pattern, _shapes_text([shape]))}") from None
    n_before, n_after = len(parsed.before), len(parsed.after)
    shapes = [tuple(s) for s in packed_shapes]
    known = sum(math.prod(s) for s in shapes if not any(_is_minus_one(v) for v in s))
    resolved = []
    checks = _unpack_checks(parsed, shape, packed_shapes, known)
    for s in shapes:
        if any(_is_minus_one(v) for v in s):
            others = math.prod(v for v in s if not _is_minus_one(v))
            s = tuple((shape[n_before] - known) // others if _is_minus_one(v) else v for v in s)
        resolved.append(s)
    before, after = shape[:n_before], shape[n_before + 1:]
    assert_sizes = hook(backend, "assert_sizes")

    def run(x: Any) -> list[Any]:
        if checks:
            assert_sizes(checks)
        parts, start = [], 0
        for packed in resolved:
            size = math.prod(packed)
            index = (slice(None),) * n_before + (slice(start, start + size), Ellipsis)
            parts.append(backend.reshape(x[index], (*before, *packed, *after)))
            start = start + size
        return parts
    return run


#: unpack, as the door takes it (``extras``: the packed shapes).
UNPACK = front.Operation(name="unpack", parse_kind="pack", inputs=_unpack_inputs,
                         key=_unpack_key, plan=_unpack_plan, lower=_unpack_lower,
                         context=_unpack_context, traced=_unpack_is_traced,
                         lower_traced=_unpack_traced)


def _pack_checks(pattern: PackPattern, shapes: Sequence[tuple[Any, ...]]) -> list[SizeCheck]:
    """That every input has input 0's lengths of the named axes, as :func:`plan_pack`
    checks them (and words its error); raises that error where both sizes are ints."""
    text = pattern.text
    n_before, n_after = len(pattern.before), len(pattern.after)
    first = shapes[0]
    named = [*range(n_before), *range(-n_after, 0)]
    checks = []
    for k, shape in enumerate(shapes[1:], 1):
        for axis, dim in zip((*pattern.before, *pattern.after), named):
            def message(shapes: list[tuple[Any, ...]], k: int = k, dim: int = dim,
                        axis: Any = axis) -> str:
                shape, first = shapes[k], shapes[0]
                return (f"input {k} has {axis.name}={shape[dim]} (shape {_fmt(shape)}), but "
                        f"input 0 has {axis.name}={first[dim]} (shape {_fmt(first)}): the inputs "
                        f"must agree on every axis but '*'\n{_caret_text(text, axis.start, axis.end)}"
                        f"\n{_context('pack', text, 'input shapes [' + ', '.join(map(_fmt, shapes)) + ']')}")
            check = shapes_check(ShapeMismatchError, shape[dim], "==", first[dim], shapes, message)
            if check is not None:
                checks.append(check)
    return checks


def _unpack_checks(pattern: PackPattern, shape: tuple[Any, ...], packed_shapes: Any,
                   known: Any) -> list[SizeCheck]:
    """That ``packed_shapes`` fill the packed dim of ``shape`` (``known``: what the shapes
    without -1 take of it), as :func:`_resolve_minus_one` checks it and words its
    error; raises that error where the sizes are ints."""
    text = pattern.text
    n_before = len(pattern.before)
    total = shape[n_before]
    star = _caret_text(text, pattern.star_start, pattern.star_end)
    unknown = next((k for k, s in enumerate(packed_shapes) if any(map(_is_minus_one, s))), None)
    call = [shape, *packed_shapes]

    def worded(why: Any) -> Any:
        def message(shapes: list[Any], *sizes: Any) -> str:
            shape, given = shapes[0], shapes[1:]
            where = f"the input (shape {_fmt(shape)}) has {shape[n_before]} along '*'"
            shown = [tuple(s) for s in given]
            # eager quotes packed_shapes as given: a list, or a tuple
            as_given = given if isinstance(packed_shapes, list) else tuple(given)
            context = _context("unpack", text, f"input shape {_fmt(shape)}, packed_shapes "
                                               f"{shorten(repr(as_given))}")
            return f"{why(shown, where, *sizes)}\n{star}\n{context}"
        return message

    if unknown is None:
        check = shapes_check(ShapeMismatchError, known, "==", total, call, worded(
            lambda shown, where, known: f"the packed shapes {shown} take {known} along '*', "
                                        f"but {where}"), (known,))
        return [] if check is None else [check]
    others = math.prod(v for v in packed_shapes[unknown] if not _is_minus_one(v))
    rest = total - known
    checks = [shapes_check(ShapeMismatchError, rest, ">=", 0, call, worded(
        lambda shown, where, known: f"the packed shapes {shown} other than "
                                    f"{_fmt(shown[unknown])} take {known} along '*', but {where}"),
        (known,))]

    def indivisible(why: str) -> Any:
        return lambda shown, where, rest, total, known, others: (
            f"cannot infer -1 in {_fmt(shown[unknown])}: {rest} remain along '*' ({total} "
            f"minus {known} for the other shapes) and {why.format(rest, others)}")
    if not is_symbolic(others) and others == 0:
        zero = worded(indivisible("its other lengths multiply to 0, so -1 could be any length"))
        raise ShapeMismatchError(zero(call, rest, total, known, others))
    checks.append(shapes_check(ShapeMismatchError, rest % others, "==", 0, call, worded(
        indivisible("{} is not divisible by {}")), (rest, total, known, others)))
    return [check for check in checks if check is not None]


def _is_minus_one(value: Any) -> bool:
    return not is_symbolic(value) and value == -1


def _parsed_with_context(op: str, pattern: str, shapes: Sequence[tuple[Any, ...]]) -> PackPattern:
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__} {pattern!r}")
    try:
        return parse_pack(pattern)
    except RearrangeError as error:
        raise type(error)(f"{error}\n{_context(op, pattern, _shapes_text(shapes))}") from None


def _shapes_text(shapes: Sequence[tuple[Any, ...]]) -> str:
    if len(shapes) == 1:
        return f"input shape {_fmt(shapes[0])}"
    return "input shapes [" + ", ".join(_fmt(shape) for shape in shapes) + "]"


def _plan_unpack(pattern: str, layout: Layout, packed_shapes: Any, dtype: str | None,
                 itemsize: int | None, unit: str) -> tuple[PackPlan, list[tuple[int, ...]]]:
    """The plan and the packed shapes as plain tuples. The pattern is checked first, then
    the packed shapes, then how both fit the input; each error quotes the pattern."""
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__} {pattern!r}")
    try:
        parsed = parse_pack(pattern)
        shapes = _normalise_packed_shapes(packed_shapes)
        return plan_unpack(parsed, layout, shapes, dtype, itemsize, unit), shapes
    except RearrangeError as error:
        where = f"input shape {_fmt(layout.shape)}, packed_shapes {shorten(repr(packed_shapes))}"
        raise type(error)(f"{error}\n{_context('unpack', pattern, where)}") from None


def explain_unpack(x_or_shape: Any, packed_shapes: Sequence[Sequence[int]], pattern: str, *,
                   dtype: Any = None) -> PackPlan:
    """The plan ``unpack`` follows, without touching any data. ``x_or_shape`` is an
    array, a :class:`rearrange.Tensor` or a shape (C-contiguous, of ``dtype``).

    >>> plan = explain_unpack((2, 8), [(3,), (2, 2), ()], 'b *')
    >>> [layout.shape for layout in plan.outputs], plan.is_view
    ([(2, 3), (2, 2, 2), (2,)], True)
    >>> plan.to_source('torch')
    '[x[:, 0:3], x[:, 3:7].view(2, 2, 2), x[:, 7:8].view(2,)]'
    """
    shape = _shape_tuple(x_or_shape)
    if shape is None:
        layout, resolved, unit = _describe(x_or_shape, "explain_unpack(): the input")
    else:
        layout, unit = Layout.contiguous(shape), "elements"
        resolved = None if dtype is None else dtype_of(dtype)
    dtype_name = None if resolved is None else resolved.name
    itemsize = None if resolved is None else resolved.itemsize
    return _plan_unpack(pattern, layout, packed_shapes, dtype_name, itemsize, unit)[0]
