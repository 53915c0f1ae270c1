"""Plans: a recipe bound to a concrete input layout, as a list of Tensor-style steps.

Planning is pure metadata — no numpy, numba or torch here. For ``rearrange`` a plan is

    split      (view)  input dims decomposed into elementary axes, unit dims dropped
    permute    (view)  elementary axes put in output order
    copy       (copy)  only when some output group cannot merge by strides
    merge      (view)  output groups composed, unit dims inserted

with steps that would change nothing left out; ``reduce`` adds a reduction of the
trailing axes after the permute, ``repeat`` adds stride-0 axes (unsqueeze + expand)
before the merge (see :func:`plan_transform`). The one proof the planner owes: a copy
step is present **iff** some output group fails the merge test
``stride(i) == stride(j) * size(j)`` for consecutive non-unit axes ``i, j`` (see
:meth:`Layout.merge_obstacle`); then no strides whatsoever can express the result,
because that output dim would not step through storage by a constant amount.
"""

from __future__ import annotations

import math
import operator
from dataclasses import field
from typing import IO, Any, Callable, Mapping

from .errors import NoViewError, RearrangeError
from .layout import MAX_DIMS, MAX_SIZE, Layout, canonical_layout, row_major_strides, view_of
from .recipe import Recipe, check_result_size, solve_lengths
from .records import lazy_slots, record, slot_setter

_PLAIN_INT = frozenset({int})

__all__ = ["Step", "Plan", "JsonDump", "plan_transform"]


@record
class Step:
    """One Tensor-style operation of a plan and the layout it produces."""

    op: str                      # split | permute | reduce | expand | copy | merge
    layout: Layout               # the layout after this step
    is_copy: bool                # the one step that copies data into a fresh array
    # Why this step is (or can stay) a view, or needs a copy: the text, or, as the planner
    # gives it, ``(words, *values)`` with ``words(*values)`` the text — worded only when
    # someone reads ``reason`` (explain, errors), never on the call path. A function of
    # the plan's own inputs, so steps compare without it.
    why: str | tuple[Any, ...] = field(compare=False)
    args: tuple[int, ...] = ()   # split/merge/expand: the new shape; permute: the dim
                                 # order; reduce: the reduced (trailing) dims
    kernel: Any = None           # copy: how the executor copies (rearrange.kernel.CopyKernel)
    # A copy step whose kernel is described when first read: (describe_copy, the source
    # layout), set only by the planner (never a constructor argument: a step made with
    # Step(...) or dataclasses.replace has its kernel given) and only where the describer
    # says the kernel leaves the copy to numpy whatever the thread count (its
    # ``numpy_copies``), so that the description does not depend on when it is made;
    # None once described.
    deferred: tuple[Any, Layout] | None = field(default=None, init=False, compare=False,
                                                repr=False)

    @property
    def reason(self) -> str:
        """Why this step is (or can stay) a view, or needs a copy: one line."""
        why = self.why
        if isinstance(why, str):
            return why
        words, *values = why
        return words(*values)

    @property
    def kind(self) -> str:
        """``view`` (metadata only), ``copy`` (moves data) or ``compute`` (a reduction
        writes new values into a fresh array)."""
        if self.is_copy:
            return "copy"
        return "compute" if self.op == "reduce" else "view"

    def to_dict(self) -> dict[str, Any]:
        data = {
            "op": self.op,
            "kind": self.kind,
            "args": list(self.args),
            "shape": list(self.layout.shape),
            "strides": list(self.layout.strides),
            "offset": self.layout.offset,
            "reason": self.reason,
        }
        if self.kernel is not None:
            data["kernel"] = {
                "variant": self.kernel.variant,
                "unit_bytes": self.kernel.unit_bytes,
                "fused_shape": list(self.kernel.fused_shape),
                "src_strides": list(self.kernel.src_strides),
                "tile": None if self.kernel.tile is None else list(self.kernel.tile),
                "threads": self.kernel.threads,
                "reason": self.kernel.reason,
            }
        return data


def _deferred_kernel(step: Step, name: str) -> Any:
    """The kernel of a copy step the planner left undescribed (see ``Step.deferred``),
    described now; ``deferred`` is then None."""
    if step.deferred is None:
        raise AttributeError(f"'Step' object has no attribute {name!r}")
    describe_copy, source = step.deferred
    kernel = describe_copy(source)
    object.__setattr__(step, "deferred", None)
    return kernel


lazy_slots(Step, _deferred_kernel, "kernel")


class JsonDump:
    """What every plan class shares: ``dump()``, its ``to_dict()`` as JSON, and
    ``_repr_html_()``, how notebooks show it."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every plan defines it
        raise NotImplementedError

    def dump(self, fp: IO[str] | None = None, **json_options: Any) -> str | None:
        """The plan as JSON: written to ``fp``, or returned as a string when ``fp`` is None."""
        import json

        json_options.setdefault("indent", 2)
        if fp is None:
            return json.dumps(self.to_dict(), **json_options)
        json.dump(self.to_dict(), fp, **json_options)
        return None

    def _repr_html_(self) -> str:
        """Notebooks (Jupyter, VS Code): the explain table, escaped in ``<pre>``, and the
        picture (``to_svg()``) where the plan class has one."""
        from .picture import html_fragment

        to_svg = getattr(self, "to_svg", None)
        return html_fragment(str(self), None if to_svg is None else to_svg())


@record
class Plan(JsonDump):
    """A compiled rearrangement for one input layout: printable, serialisable, lowerable.

    Layout units: strides and offsets are in elements (``stride_unit == "elements"``),
    or in bytes for arrays whose byte strides are not multiples of the itemsize.
    """

    op: str
    pattern: str
    dtype: str | None
    itemsize: int | None
    input: Layout
    output: Layout
    axis_lengths: tuple[tuple[str, int], ...]   # every elementary axis, left-side order
    steps: tuple[Step, ...]
    copy_requested: bool | None = None
    stride_unit: str = "elements"
    reduction: str | None = None   # reduce: the reduction's name (a callable's __name__)
    notes: tuple[str, ...] = ()    # what a backend adds, e.g. dask's chunks, one line each

    # ------------------------------------------------------------------ summary

    @property
    def is_view(self) -> bool:
        """True when the result shares the input's memory (no copy, no reduction)."""
        return all(step.kind == "view" for step in self.steps)

    @property
    def copies(self) -> int:
        return sum(step.is_copy for step in self.steps)

    @property
    def views(self) -> int:
        return sum(step.kind == "view" for step in self.steps)

    @property
    def read_only(self) -> bool:
        """True when the result is a view that must not be written: repeat's views,
        whose broadcast (stride-0) axes would alias writes silently."""
        return self.op == "repeat" and self.is_view

    @property
    def copy_reason(self) -> str | None:
        return next((step.reason for step in self.steps if step.is_copy), None)

    @property
    def refused(self) -> str | None:
        """Why the call refuses this plan, or None when it runs it.

        Invariant: non-None exactly when the operation, called with this input and
        ``copy=False``, raises :class:`NoViewError` — the very test every lowering
        applies before running (``copy_requested is False and not is_view``). The steps
        still show the copy that ``copy=None`` would make."""
        if self.copy_requested is False and not self.is_view:
            return f"copy=False but no view: {self.copy_reason}"
        return None

    @property
    def bytes_moved(self) -> int | None:
        """Bytes read plus bytes written by the copy step (0 for a view plan)."""
        if self.itemsize is None:
            return None
        return 2 * self.output.numel * self.itemsize * self.copies

    # ------------------------------------------------------------------ rendering

    def __str__(self) -> str:
        return format_plan(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description of the plan."""
        return {
            "op": self.op,
            "pattern": self.pattern,
            "dtype": self.dtype,
            "itemsize": self.itemsize,
            "stride_unit": self.stride_unit,
            "input": layout_dict(self.input),
            "output": layout_dict(self.output),
            "axis_lengths": dict(self.axis_lengths),
            "is_view": self.is_view,
            "views": self.views,
            "copies": self.copies,
            "bytes_moved": self.bytes_moved,
            "copy_requested": self.copy_requested,
            "refused": self.refused,
            "reduction": self.reduction,
            "read_only": self.read_only,
            "steps": [step.to_dict() for step in self.steps],
            "notes": list(self.notes),
        }

    def to_svg(self) -> str:
        """A picture of the plan as a self-contained SVG document: the input's storage as
        a strip of cells, the input as a grid over it, then the array each step produces,
        every cell showing the storage index it reads (a copy starts a new storage, a
        failing merge's stride jump is outlined, stride-0 repeats are dashed). Large
        arrays are abbreviated, so the text stays small whatever the shape.

        >>> import rearrange as ra
        >>> svg = ra.explain((2, 3), 'a b -> b a').to_svg()
        >>> svg.startswith('<svg'), 'data-step="1"' in svg
        (True, True)
        """
        from .picture import plan_svg

        return plan_svg(self)

    def to_source(self, library: str = "numpy", name: str = "x") -> str:
        """The same computation as plain library calls on a variable ``name``.

        ``"numpy"`` gives ``reshape``/``transpose`` calls (``np.broadcast_to`` for
        repeat, the reduction's method for reduce), ``"torch"`` gives
        ``view``/``permute``/``reshape``/``expand`` and torch reductions; where the plan
        copies, the merging ``reshape`` is the call that copies (and ``copy=True`` adds
        an explicit copy). A callable reduction appears as ``reduction(tensor, dims)``.
        """
        if library not in ("numpy", "torch"):
            raise RearrangeError(f"to_source: library must be 'numpy' or 'torch', got {library!r}")
        if self.refused is not None:
            raise NoViewError(f"to_source: the plan is refused ({self.refused}); "
                              f"{self.op} with copy=False raises, so there is no code for it")
        expr = name
        copying = False
        for step in self.steps:
            if step.op == "copy" and step is not self.steps[-1]:
                copying = True
                continue
            if step.op == "copy":
                expr += ".copy()" if library == "numpy" else ".clone(memory_format=torch.contiguous_format)"
            elif step.op == "permute":
                verb = "transpose" if library == "numpy" else "permute"
                expr += f".{verb}({_ints(step.args)})"
            elif step.op == "reduce":
                expr = reduction_source(expr, library, self.reduction, step.args,
                                         step.layout.shape, self.dtype)
            elif step.op == "expand":
                expr = (f"np.broadcast_to({expr}, ({_ints(step.args)}))" if library == "numpy"
                        else f"{expr}.expand({_ints(step.args)})")
            else:
                verb = "reshape" if library == "numpy" or copying else "view"
                expr += f".{verb}({_ints(step.args)})"
                copying = False
        if expr == name:
            expr += ".view()" if library == "numpy" else ".view_as(" + name + ")"
        return expr


_TORCH_REDUCTIONS = {"min": "amin", "max": "amax"}


def reduction_source(expr: str, library: str, reduction: str | None, dims: tuple[int, ...],
                      kept_shape: tuple[int, ...], dtype: str | None) -> str:
    """``expr`` reduced over its trailing ``dims`` by the named reduction."""
    if reduction not in REDUCTION_NAMES:  # a callable, by its name
        return f"reduction({expr}, ({_ints(dims)}))"
    if library == "numpy":
        if reduction == "count_nonzero":
            return f"np.count_nonzero({expr}, axis=({_ints(dims)}))"
        if reduction == "logsumexp":
            return f"np.logaddexp.reduce({expr}.reshape({_ints((*kept_shape, -1))}), axis=-1)"
        if reduction in ("argmax", "argmin"):
            return f"{expr}.{reduction}(axis={dims[0]})"
        return f"{expr}.{reduction}(axis=({_ints(dims)}))"
    if len(dims) > 1:
        expr += f".flatten({dims[0]})"
    if reduction in ("mean", "var", "std", "logsumexp") and dtype is not None and (
            dtype == "bool" or dtype.startswith(("int", "uint"))):
        expr += ".double()"   # numpy promotes integers to float64 here; torch refuses them
    method = _TORCH_REDUCTIONS.get(reduction, reduction)
    extra = ", correction=0" if reduction in ("var", "std") else ""
    return f"{expr}.{method}(dim=-1{extra})"


# The reductions that reduce() accepts by name (plus any callable f(x, axes)).
REDUCTION_NAMES = ("min", "max", "sum", "mean", "prod", "any", "all", "var", "std",
                    "logsumexp", "argmax", "argmin", "count_nonzero")


def _ints(values: tuple[int, ...]) -> str:
    if not values:
        return "()"
    if len(values) == 1:
        return f"{values[0]},"
    return ", ".join(str(v) for v in values)


def layout_dict(layout: Layout) -> dict[str, Any]:
    return {"shape": list(layout.shape), "strides": list(layout.strides), "offset": layout.offset}


# ---------------------------------------------------------------------- planning

def plan_transform(
    recipe: Recipe,
    layout: Layout,
    axes_lengths: Mapping[str, int],
    *,
    op: str = "rearrange",
    reduction: str | None = None,
    copy: bool | None = None,
    dtype: str | None = None,
    itemsize: int | None = None,
    stride_unit: str = "elements",
    describe_copy: Callable[[Layout], Any] | None = None,
) -> Plan:
    """Bind ``recipe`` to ``layout``: the fewest view steps, and a copy only if proved.

    The steps, each left out when it would change nothing:

        split      (view)     input dims decomposed into axes, unit dims dropped
        permute    (view)     kept axes in output order, then the reduced ones
        reduce     (compute)  reduce: the trailing reduced axes, into a fresh array
        unsqueeze  (view)     repeat: a size-1 dim where each new axis goes
        expand     (view)     repeat: the new axes at their lengths, with stride 0
        copy       (copy)     only when some output group cannot merge by strides
        merge      (view)     output groups composed, unit dims inserted

    ``describe_copy(source_layout)``, supplied by the executor, says how a copy step's
    strided source will be copied (the planner itself knows no kernels).
    """
    lengths = solve_lengths(recipe, layout.shape, axes_lengths)
    if not _PLAIN_INT.issuperset(map(type, lengths)):
        lengths = tuple(map(operator.index, lengths))  # sizes torch traces, as ints
    names = recipe.names
    output_groups = recipe.output_groups
    output_shape = tuple([lengths[g[0]] if len(g) == 1 else math.prod([lengths[i] for i in g])
                          for g in output_groups])
    # check_result_size passes whenever this holds (fewer axes than dims allowed, and a
    # result of positive size within bounds: the unmerged axes multiply to the same
    # product as the output shape); only otherwise need it look closer, and maybe raise.
    if not (len(names) <= MAX_DIMS and len(output_shape) <= MAX_DIMS
            and 0 < math.prod(output_shape) * (itemsize or 1) <= MAX_SIZE):
        check_result_size(recipe, lengths, itemsize)
    steps: list[Step] = []
    current = layout
    # Every layout below is built from `layout`'s (checked) values and the lengths that
    # solve_lengths checked against them: canonical_layout skips the checks.

    # split: decompose every input dim into its elementary axes (units vanish).
    left_count = len(names) - len(recipe.added)
    elementary_shape = lengths[:left_count]
    if elementary_shape != current.shape:
        shape: list[int] = []
        strides: list[int] = []
        for group, size, stride in zip(recipe.input_groups, current.shape, current.strides):
            if len(group) == 1 or (not group and size != 1):
                shape.append(size)
                strides.append(stride)
            elif group:  # a row-major walk of the dim, as Layout.split (row_major_strides)
                at = len(strides)
                for i in group:
                    shape.append(lengths[i])
                    strides.append(0)
                for k in range(len(strides) - 1, at - 1, -1):
                    strides[k] = stride
                    if shape[k] > 1:
                        stride *= shape[k]
        current = canonical_layout(tuple(shape), tuple(strides), current.offset)
        steps.append(_step("split", current, (_split_reason, recipe), elementary_shape))

    # permute: kept axes into output order, reduced axes last.
    order = recipe.permutation
    if order != tuple(range(len(order))):
        # (a permutation that moves something has two or more dims: itemgetter's tuples)
        pick = operator.itemgetter(*order)
        current = canonical_layout(pick(current.shape), pick(current.strides), current.offset)
        steps.append(_step("permute", current, (_permute_reason, recipe, order), order))

    # reduce: the trailing axes, into a fresh C-contiguous array of the kept axes.
    if recipe.reduced:
        kept = len(order) - len(recipe.reduced)
        reduced_dims = tuple(range(kept, len(order)))
        current = Layout.contiguous(current.shape[:kept])
        steps.append(Step("reduce", current, False, (_reduce_reason, recipe, reduction),
                          reduced_dims))

    # unsqueeze + expand: each new axis of repeat, as a stride-0 dim.
    axis_order = order[:len(order) - len(recipe.reduced)]   # axes of `current`, in order
    if recipe.added:
        added = set(recipe.added)
        axis_order = tuple(i for group in recipe.output_groups for i in group)
        shape, strides, source = [], [], iter(zip(current.shape, current.strides))
        for axis in axis_order:
            if axis in added:
                shape.append(1)
                strides.append(0)
            else:
                size, stride = next(source)
                shape.append(size)
                strides.append(stride)
        current = canonical_layout(tuple(shape), tuple(strides), current.offset)
        steps.append(Step("unsqueeze", current, False, (_unsqueeze_reason, recipe),
                          current.shape))
        expanded = tuple(lengths[i] for i in axis_order)
        if expanded != current.shape:
            current = current.expand(expanded)
            steps.append(Step("expand", current, False, (_expand_reason, recipe), expanded))

    # merge: compose output groups; each must pass the stride test or a copy comes first:
    # consecutive non-unit dims i, j of a group need stride(i) == stride(j) * size(j)
    # (Layout.merge_obstacle; a zero-element layout merges anywhere).
    obstacles = []  # (group, outer axis, inner axis, stride(outer), stride(inner) * size(inner))
    if 0 not in current.shape:
        shape_now, strides_now = current.shape, current.strides
        position = 0
        for group in recipe.output_groups:
            stop = position + len(group)
            outer = -1  # the previous non-unit dim of the group
            for dim in range(position, stop) if len(group) > 1 else ():
                if shape_now[dim] == 1:
                    continue
                if outer >= 0 and strides_now[outer] != strides_now[dim] * shape_now[dim]:
                    obstacles.append((group, axis_order[outer], axis_order[dim],
                                      strides_now[outer], strides_now[dim] * shape_now[dim]))
                    break
                outer = dim
            position = stop

    if obstacles:
        source = current
        current = canonical_layout(current.shape, row_major_strides(current.shape))
        steps.append(_copy_step(current, (_copy_reason, recipe, tuple(obstacles)),
                                describe_copy, source))
    if output_shape != current.shape:
        # a C-contiguous copy merges into the C-contiguous layout of the output (what
        # view_of gives it, size-1 and size-0 dims included)
        merged = (canonical_layout(output_shape, row_major_strides(output_shape))
                  if obstacles else view_of(current, output_shape, math.prod(output_shape)))
        if merged is None:  # pragma: no cover - the merge test above is exact
            raise AssertionError(f"planner bug: no view for {output_shape} from {current}")
        steps.append(_step("merge", merged, (_merge_reason, recipe, bool(obstacles)),
                           output_shape))
        current = merged

    if copy and not obstacles and not recipe.reduced:
        source = current
        current = canonical_layout(current.shape, row_major_strides(current.shape))
        steps.append(_copy_step(current, "copy=True: a fresh C-contiguous array",
                                describe_copy, source))

    return _plan(op, recipe.pattern.text, dtype, itemsize, layout, current,
                 tuple(zip(names, lengths)), tuple(steps), copy, stride_unit,
                 reduction if recipe.reduced else None)


# Steps and plans made by the planner: their values are canonical by construction (as
# canonical_layout's), so they are set through the slots' member descriptors, as the
# frozen dataclasses' own __init__ does, without the keyword handling (a plan has twelve
# fields and is made on every cold call).
_new_object = object.__new__
(_set_op, _set_layout, _set_is_copy, _set_why, _set_args, _set_kernel, _set_deferred) = (
    slot_setter(Step, name) for name in (
        "op", "layout", "is_copy", "why", "args", "kernel", "deferred"))
_PLAN_SETTERS = tuple(Plan.__dict__[name].__set__ for name in (
    "op", "pattern", "dtype", "itemsize", "input", "output", "axis_lengths", "steps",
    "copy_requested", "stride_unit", "reduction", "notes"))


def _step(op: str, layout: Layout, why: Any, args: tuple[int, ...]) -> Step:
    """``Step(op, layout, False, why, args)``: a view step."""
    step = _new_object(Step)
    _set_op(step, op)
    _set_layout(step, layout)
    _set_is_copy(step, False)
    _set_why(step, why)
    _set_args(step, args)
    _set_kernel(step, None)
    _set_deferred(step, None)
    return step


def _plan(op: str, pattern: str, dtype: str | None, itemsize: int | None, input: Layout,
          output: Layout, axis_lengths: tuple[tuple[str, int], ...], steps: tuple[Step, ...],
          copy_requested: bool | None, stride_unit: str, reduction: str | None) -> Plan:
    """``Plan(...)`` of these fields, without notes."""
    plan = _new_object(Plan)
    (set_op, set_pattern, set_dtype, set_itemsize, set_input, set_output, set_axis_lengths,
     set_steps, set_copy_requested, set_stride_unit, set_reduction, set_notes) = _PLAN_SETTERS
    set_op(plan, op)
    set_pattern(plan, pattern)
    set_dtype(plan, dtype)
    set_itemsize(plan, itemsize)
    set_input(plan, input)
    set_output(plan, output)
    set_axis_lengths(plan, axis_lengths)
    set_steps(plan, steps)
    set_copy_requested(plan, copy_requested)
    set_stride_unit(plan, stride_unit)
    set_reduction(plan, reduction)
    set_notes(plan, ())
    return plan


def _copy_step(layout: Layout, why: Any, describe_copy: Callable[[Layout], Any] | None,
               source: Layout) -> Step:
    """The copy step of ``source`` into ``layout`` (its C-contiguous layout), its kernel
    described now, or when first read where the describer allows it (see Step)."""
    numpy_copies = getattr(describe_copy, "numpy_copies", None)
    if numpy_copies is None or not numpy_copies(source):
        kernel = describe_copy(source) if describe_copy else None
        return Step("copy", layout, True, why, kernel=kernel)
    step = _new_object(Step)               # every slot but kernel
    _set_op(step, "copy")
    _set_layout(step, layout)
    _set_is_copy(step, True)
    _set_why(step, why)
    _set_args(step, ())
    _set_deferred(step, (describe_copy, source))
    return step


# The words of each step's reason (Step.why): called only when the reason is read.

def _split_reason(recipe: Recipe) -> str:
    names = recipe.names
    parts = [f"{recipe.group_text(g)} -> {' '.join(names[i] for i in g)}"
             for g in recipe.input_groups if len(g) > 1]
    units = sum(1 for g in recipe.input_groups if not g)
    if units:
        parts.append(f"drop {units} unit dim{'s' if units > 1 else ''}")
    return "; ".join(parts) + ": always a view"


def _permute_reason(recipe: Recipe, order: tuple[int, ...]) -> str:
    names = recipe.names
    reason = "axes to output order " + " ".join(
        names[i] for i in order[:len(order) - len(recipe.reduced)])
    if recipe.reduced:
        reason += ", reduced axes last"
    return reason


def _reduce_reason(recipe: Recipe, reduction: str | None) -> str:
    return f"{reduction} over {' '.join(recipe.names[i] for i in recipe.reduced)}: a new array"


def _unsqueeze_reason(recipe: Recipe) -> str:
    new_names = " ".join(recipe.names[i] for i in recipe.added)
    return f"a size-1 dim for each new axis {new_names}: always a view"


def _expand_reason(recipe: Recipe) -> str:
    new_names = " ".join(recipe.names[i] for i in recipe.added)
    return f"new axes {new_names} repeat with stride 0: a view"


def _copy_reason(recipe: Recipe, obstacles: tuple[tuple[Any, ...], ...]) -> str:
    names = recipe.names
    return "; ".join(
        f"cannot merge {recipe.group_text(group)}: "
        f"stride({names[outer]})={outer_stride} != "
        f"stride({names[inner]})*size({names[inner]})={inner_extent}"
        for group, outer, inner, outer_stride, inner_extent in obstacles
    )


def _merge_reason(recipe: Recipe, copied: bool) -> str:
    parts = [f"compose {recipe.group_text(g)}" for g in recipe.output_groups if len(g) > 1]
    units = sum(1 for g in recipe.output_groups if not g)
    if units:
        parts.append(f"insert {units} unit dim{'s' if units > 1 else ''}")
    if copied or recipe.reduced and not recipe.added:
        why = "contiguous after the copy" if copied else "contiguous after the reduction"
    elif any(len(g) > 1 for g in recipe.output_groups):
        why = "every group passes the stride test"
    else:
        why = "always a view"
    return f"{', '.join(parts)}: {why}"


# ---------------------------------------------------------------------- printing

def _fmt_ints(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def format_plan(plan: Plan) -> str:
    """The explain table: a header (what, how big, what it costs) and one row per step."""
    unit = "" if plan.stride_unit == "elements" else "  (strides in bytes)"
    if plan.dtype is None:
        dtype = "unknown"
    else:
        dtype = f"{plan.dtype} ({plan.itemsize} byte{'s' if plan.itemsize != 1 else ''})"
    axes = " ".join(f"{n}={l}" for n, l in plan.axis_lengths) or "(none)"
    if plan.refused is not None:
        verdict = f"refused: {plan.refused}"
    elif plan.is_view:
        verdict = "view: no data is moved"
        if plan.read_only:
            verdict += "; read-only, since repeated elements share memory"
    elif plan.reduction is not None:
        k = next(k for k, step in enumerate(plan.steps) if step.op == "reduce")
        before = plan.steps[k - 1].layout.shape if k else plan.input.shape
        count = math.prod(before[d] for d in plan.steps[k].args)
        verdict = (f"new array: each element is the '{plan.reduction}' of {count:,} "
                   f"input element{'s' if count != 1 else ''}")
    else:
        moved = plan.bytes_moved
        cost = "" if moved is None else f", {moved:,} bytes moved (read + write)"
        verdict = f"copy: {plan.views} view step{'s' if plan.views != 1 else ''}, 1 copy{cost}"
    width = max(len(_fmt_ints(plan.input.shape)), len(_fmt_ints(plan.output.shape)))
    lines = [
        f"{plan.op} '{plan.pattern}'",
        f"  dtype    {dtype}",
        f"  input    shape {_fmt_ints(plan.input.shape):<{width}}  "
        f"strides {_fmt_ints(plan.input.strides)}  offset {plan.input.offset}{unit}",
        f"  output   shape {_fmt_ints(plan.output.shape):<{width}}  "
        f"strides {_fmt_ints(plan.output.strides)}",
        f"  axes     {axes}",
        f"  result   {verdict}",
    ]
    if not plan.steps:
        lines.append("  (no steps: the input already has the output layout; a view)")
        return "\n".join(lines)
    rows = [("#", "step", "shape", "strides", "kind", "reason")]
    for number, step in enumerate(plan.steps, 1):
        rows.append((
            str(number), step.op, _fmt_ints(step.layout.shape), _fmt_ints(step.layout.strides),
            step.kind, step.reason,
        ))
    widths = [max(len(row[k]) for row in rows) for k in range(5)]
    lines.append("")
    for row, step in zip(rows, (None, *plan.steps)):
        cells = [row[k].ljust(widths[k]) for k in range(5)] + [row[5]]
        lines.append(("  " + "  ".join(cells)).rstrip())
        if step is not None and step.kernel is not None:
            indent = " " * (2 + sum(widths[:5]) + 2 * 5)
            lines.append(indent + "kernel " + _describe_kernel(step.kernel))
            now = _path_now(step.kernel)
            if now is not None:
                lines.append(indent + "now    " + now)
    if plan.notes:
        lines.append("")
        lines.extend(f"  note     {note}" for note in plan.notes)
    return "\n".join(lines)


def _path_now(kernel: Any) -> str | None:
    """What the copy does at this moment (compiled kernel, or numpy's/torch's copy while
    it compiles): process state, not part of the plan."""
    from .kernel import path_now

    return path_now(kernel)


def _describe_kernel(kernel: Any) -> str:
    """One line: variant, unit, tile, threads and the kernel's own reason."""
    parts = [kernel.variant]
    if kernel.variant not in ("numpy", "empty", "torch"):
        parts.append(f"{kernel.unit_bytes}-byte units")
        if kernel.tile is not None:
            parts.append(f"tile {kernel.tile[0]}x{kernel.tile[1]}")
        parts.append(f"{kernel.threads} thread{'s' if kernel.threads != 1 else ''}")
    return ", ".join(parts) + f": {kernel.reason}"
