"""Plans: a recipe bound to a concrete input layout, as a list of Tensor-style steps.

Planning is pure metadata — no numpy, numba or torch here. For ``rearrange`` a plan is

    split      (view)  input dims decomposed into elementary axes, unit dims dropped
    permute    (view)  elementary axes put in output order
    copy       (copy)  only when some output group cannot merge by strides
    merge      (view)  output groups composed, unit dims inserted

with steps that would change nothing left out. The one proof the planner owes: a copy
step is present **iff** some output group fails the merge test
``stride(i) == stride(j) * size(j)`` for consecutive non-unit axes ``i, j`` (see
:meth:`Layout.merge_obstacle`); then no strides whatsoever can express the result,
because that output dim would not step through storage by a constant amount.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import IO, Any, Callable, Mapping

from .errors import RearrangeError
from .layout import Layout
from .recipe import Recipe, solve_lengths

__all__ = ["Step", "Plan", "plan_rearrange"]


@dataclass(frozen=True, slots=True)
class Step:
    """One Tensor-style operation of a plan and the layout it produces."""

    op: str                      # split | permute | copy | merge
    layout: Layout               # the layout after this step
    is_copy: bool
    reason: str                  # why this step is (or can stay) a view, or needs a copy
    args: tuple[int, ...] = ()   # split/merge: the new shape; permute: the dim order
    kernel: Any = None           # copy: how the executor copies (rearrange.kernel.CopyKernel)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "op": self.op,
            "kind": "copy" if self.is_copy else "view",
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


@dataclass(frozen=True, slots=True)
class Plan:
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

    # ------------------------------------------------------------------ summary

    @property
    def is_view(self) -> bool:
        """True when the result shares the input's memory (no copy step)."""
        return not any(step.is_copy for step in self.steps)

    @property
    def copies(self) -> int:
        return sum(step.is_copy for step in self.steps)

    @property
    def views(self) -> int:
        return sum(not step.is_copy for step in self.steps)

    @property
    def copy_reason(self) -> str | None:
        return next((step.reason for step in self.steps if step.is_copy), None)

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
            "input": _layout_dict(self.input),
            "output": _layout_dict(self.output),
            "axis_lengths": dict(self.axis_lengths),
            "is_view": self.is_view,
            "views": self.views,
            "copies": self.copies,
            "bytes_moved": self.bytes_moved,
            "copy_requested": self.copy_requested,
            "steps": [step.to_dict() for step in self.steps],
        }

    def dump(self, fp: IO[str] | None = None, **json_options: Any) -> str | None:
        """The plan as JSON: written to ``fp``, or returned as a string when ``fp`` is None."""
        json_options.setdefault("indent", 2)
        if fp is None:
            return json.dumps(self.to_dict(), **json_options)
        json.dump(self.to_dict(), fp, **json_options)
        return None

    def to_source(self, library: str = "numpy", name: str = "x") -> str:
        """The same computation as plain library calls on a variable ``name``.

        ``"numpy"`` gives ``reshape``/``transpose`` calls, ``"torch"`` gives
        ``view``/``permute``/``reshape``; where the plan copies, the merging ``reshape``
        is the call that copies (and ``copy=True`` adds an explicit copy).
        """
        if library not in ("numpy", "torch"):
            raise RearrangeError(f"to_source: library must be 'numpy' or 'torch', got {library!r}")
        calls = []
        copying = False
        for step in self.steps:
            if step.op == "copy" and step is not self.steps[-1]:
                copying = True
                continue
            if step.op == "copy":
                calls.append(".copy()" if library == "numpy" else ".clone(memory_format=torch.contiguous_format)")
            elif step.op == "permute":
                verb = "transpose" if library == "numpy" else "permute"
                calls.append(f".{verb}({_ints(step.args)})")
            else:
                verb = "reshape" if library == "numpy" or copying else "view"
                calls.append(f".{verb}({_ints(step.args)})")
                copying = False
        if not calls:
            calls.append(".view()" if library == "numpy" else ".view_as(" + name + ")")
        return name + "".join(calls)


def _ints(values: tuple[int, ...]) -> str:
    if len(values) == 1:
        return f"{values[0]},"
    return ", ".join(str(v) for v in values)


def _layout_dict(layout: Layout) -> dict[str, Any]:
    return {"shape": list(layout.shape), "strides": list(layout.strides), "offset": layout.offset}


# ---------------------------------------------------------------------- planning

def plan_rearrange(
    recipe: Recipe,
    layout: Layout,
    axes_lengths: Mapping[str, int],
    *,
    copy: bool | None = None,
    dtype: str | None = None,
    itemsize: int | None = None,
    stride_unit: str = "elements",
    describe_copy: Callable[[Layout], Any] | None = None,
) -> Plan:
    """Bind ``recipe`` to ``layout``: the fewest view steps, and a copy only if proved.

    ``describe_copy(source_layout)``, supplied by the executor, says how a copy step's
    strided source will be copied (the planner itself knows no kernels).
    """
    lengths = solve_lengths(recipe, layout.shape, axes_lengths)
    names = recipe.names
    steps: list[Step] = []
    current = layout

    # split: decompose every input dim into its elementary axes (units vanish).
    elementary_shape = tuple(lengths)
    if elementary_shape != current.shape:
        for dim in range(len(recipe.input_groups) - 1, -1, -1):
            group = recipe.input_groups[dim]
            if not group:
                current = current.squeeze(dim)
            elif len(group) > 1:
                current = current.split(dim, tuple(lengths[i] for i in group))
        parts = [f"{recipe.group_text(g)} -> {' '.join(names[i] for i in g)}"
                 for g in recipe.input_groups if len(g) > 1]
        units = sum(1 for g in recipe.input_groups if not g)
        if units:
            parts.append(f"drop {units} unit dim{'s' if units > 1 else ''}")
        steps.append(Step("split", current, False, "; ".join(parts) + ": always a view",
                          elementary_shape))

    # permute: elementary axes into output order.
    order = recipe.permutation
    if order != tuple(range(len(order))):
        current = current.permute(order)
        steps.append(Step(
            "permute", current, False,
            "axes to output order " + " ".join(names[i] for i in order), order,
        ))

    # merge: compose output groups; each must pass the stride test or a copy comes first.
    output_shape = tuple(math.prod(lengths[i] for i in g) for g in recipe.output_groups)
    obstacles = []
    position = 0
    for group in recipe.output_groups:
        obstacle = current.merge_obstacle(position, position + len(group))
        if obstacle is not None:
            outer, inner = obstacle
            obstacles.append(
                f"cannot merge {recipe.group_text(group)}: "
                f"stride({names[order[outer]]})={current.strides[outer]} != "
                f"stride({names[order[inner]]})*size({names[order[inner]]})="
                f"{current.strides[inner] * current.shape[inner]}"
            )
        position += len(group)

    if obstacles:
        kernel = describe_copy(current) if describe_copy else None
        current = Layout.contiguous(current.shape)
        steps.append(Step("copy", current, True, "; ".join(obstacles), kernel=kernel))
    if output_shape != current.shape:
        merged = current.try_view(output_shape)
        if merged is None:  # pragma: no cover - the merge test above is exact
            raise AssertionError(f"planner bug: no view for {output_shape} from {current}")
        parts = [f"compose {recipe.group_text(g)}" for g in recipe.output_groups if len(g) > 1]
        units = sum(1 for g in recipe.output_groups if not g)
        if units:
            parts.append(f"insert {units} unit dim{'s' if units > 1 else ''}")
        if obstacles:
            why = "contiguous after the copy"
        elif any(len(g) > 1 for g in recipe.output_groups):
            why = "every group passes the stride test"
        else:
            why = "always a view"
        steps.append(Step("merge", merged, False, f"{', '.join(parts)}: {why}", output_shape))
        current = merged

    if copy and not obstacles:
        kernel = describe_copy(current) if describe_copy else None
        current = Layout.contiguous(current.shape)
        steps.append(Step("copy", current, True, "copy=True: a fresh C-contiguous array",
                          kernel=kernel))

    return Plan(
        op="rearrange",
        pattern=recipe.pattern.text,
        dtype=dtype,
        itemsize=itemsize,
        input=layout,
        output=current,
        axis_lengths=tuple(zip(names, lengths)),
        steps=tuple(steps),
        copy_requested=copy,
        stride_unit=stride_unit,
    )



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
    if plan.is_view:
        verdict = "view: no data is moved"
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
            "copy" if step.is_copy else "view", step.reason,
        ))
    widths = [max(len(row[k]) for row in rows) for k in range(5)]
    lines.append("")
    for row, step in zip(rows, (None, *plan.steps)):
        cells = [row[k].ljust(widths[k]) for k in range(5)] + [row[5]]
        lines.append(("  " + "  ".join(cells)).rstrip())
        if step is not None and step.kernel is not None:
            indent = " " * (2 + sum(widths[:5]) + 2 * 5)
            lines.append(indent + "kernel " + _describe_kernel(step.kernel))
    return "\n".join(lines)


def _describe_kernel(kernel: Any) -> str:
    """One line: variant, unit, tile, threads and the kernel's own reason."""
    parts = [kernel.variant]
    if kernel.variant not in ("numpy", "empty"):
        parts.append(f"{kernel.unit_bytes}-byte units")
        if kernel.tile is not None:
            parts.append(f"tile {kernel.tile[0]}x{kernel.tile[1]}")
        parts.append(f"{kernel.threads} thread{'s' if kernel.threads != 1 else ''}")
    return ", ".join(parts) + f": {kernel.reason}"
