"""Plans over symbolic sizes: a transform whose input sizes are not numbers yet.

Under ``torch.compile`` and ``torch.export`` an input's sizes are ``torch.SymInt`` s, and
under ``torch.jit.trace`` they are ints the tracer records as reads of the shape. The
planner (:mod:`rearrange.plan`) proves view or copy from concrete sizes and strides;
doing that here would compare symbolic sizes, and every comparison becomes a guard that
pins the compiled graph to one shape: a recompile for every new shape (or, under
``torch.jit.trace``, constants baked into the trace). So this plan decides nothing from
sizes:

* its steps follow from the recipe alone (the pattern and the input's rank): a
  ``reshape`` into the elementary axes when some input dim is split or is a unit, a
  ``permute`` into output order, the ``reduce`` of the trailing axes, ``unsqueeze`` +
  ``expand`` for repeat's new axes, a ``reshape`` into the output groups;
* sizes are carried as expressions (products and quotients of the input's sizes and the
  given lengths), never compared here: what the pattern fixes about them (a given
  length against the input's dim, a number like ``(h 2)``, a split that must divide)
  becomes a :class:`SizeCheck` of the plan (``checks``), data that the backend asserts
  in the traced program (torch: ``torch._check_with``, a guard on the relation between
  sizes, never on the example's values, or a runtime assert), so compiled code raises
  eager's error where eager raises and is still one graph for every shape that fits;
* the backend lowers each ``reshape`` to an op that decides view or copy itself at run
  time (torch's ``reshape``), which is what ``explain`` says of it.

Eager calls never come here: they keep the proved plans and their caches.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from .calls import context_line
from .errors import RearrangeError
from .parsing import parse_transform
from .plan import JsonDump, reduction_source
from .recipe import SizeCheck, build_recipe, is_symbolic, solve_lengths
from .records import record

__all__ = ["SymbolicStep", "SymbolicPlan", "SizeCheck", "plan_symbolic", "is_symbolic"]

#: The reason every symbolic reshape gives: torch decides at run time, not the planner.
RUNTIME_DECIDES = "symbolic sizes: torch's reshape decides view or copy when it runs"


@record
class SymbolicStep:
    """One op of a symbolic plan; sizes may be symbolic expressions."""

    op: str          # reshape | permute | reduce | unsqueeze | expand | copy
    args: tuple      # reshape/expand: sizes; permute: dim order; reduce: trailing dims;
                     # unsqueeze: the positions of new size-1 dims, in increasing order
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "args": [_text(a) for a in self.args], "reason": self.reason}


@record
class SymbolicPlan(JsonDump):
    """The plan of ``rearrange``/``reduce``/``repeat`` for an input with symbolic sizes.

    Whether the result is a view is decided when the ops run, not here: ``is_view`` is
    None unless the steps cannot copy (no reshape, reduce or copy among them).
    ``checks`` must hold before the steps run (each is eager's error where it fails).
    """

    op: str
    pattern: str
    input_shape: tuple[Any, ...]
    output_shape: tuple[Any, ...]
    axis_lengths: tuple[tuple[str, Any], ...]
    steps: tuple[SymbolicStep, ...]
    copy_requested: bool | None = None
    reduction: str | None = None
    checks: tuple[SizeCheck, ...] = ()

    @property
    def is_view(self) -> bool | None:
        if any(step.op in ("reduce", "copy") for step in self.steps):
            return False
        if any(step.op == "reshape" for step in self.steps):
            return None
        return True

    def __str__(self) -> str:
        lines = [
            f"{self.op} '{self.pattern}'",
            f"  input    shape {_shape_text(self.input_shape)}  (symbolic sizes)",
            f"  output   shape {_shape_text(self.output_shape)}",
            "  axes     " + (" ".join(f"{n}={_text(v)}" for n, v in self.axis_lengths) or "(none)"),
            "  result   " + {True: "view: no data is moved", False: "new array"}.get(
                self.is_view, "decided at run time (torch's reshape: a view where strides allow)"),
        ]
        if not self.steps:
            lines.append("  (no steps: the input already has the output layout; a view)")
            return "\n".join(lines)
        rows = [("#", "step", "args", "reason")]
        rows += [(str(k), s.op, _shape_text(s.args), s.reason) for k, s in enumerate(self.steps, 1)]
        widths = [max(len(row[k]) for row in rows) for k in range(3)]
        lines.append("")
        for row in rows:
            lines.append(("  " + "  ".join(row[k].ljust(widths[k]) for k in range(3))
                          + "  " + row[3]).rstrip())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op, "pattern": self.pattern, "symbolic": True,
            "input_shape": [_text(v) for v in self.input_shape],
            "output_shape": [_text(v) for v in self.output_shape],
            "axis_lengths": {n: _text(v) for n, v in self.axis_lengths},
            "is_view": self.is_view, "copy_requested": self.copy_requested,
            "reduction": self.reduction, "steps": [s.to_dict() for s in self.steps],
            "checks": [check.to_text() for check in self.checks],
        }

    def to_source(self, library: str = "torch", name: str = "x") -> str:
        """The ops as torch calls on ``name`` (sizes printed as their expressions)."""
        if library != "torch":
            raise RearrangeError(f"to_source: a plan over symbolic sizes is torch code; "
                                 f"got library={library!r}")
        expr = name
        for step in self.steps:
            args = ", ".join(_text(a) for a in step.args)
            if step.op == "unsqueeze":
                for position in step.args:
                    expr += f".unsqueeze({position})"
            elif step.op == "reduce":
                expr = reduction_source(expr, "torch", self.reduction, step.args, (), None)
            elif step.op == "copy":
                expr += ".clone(memory_format=torch.contiguous_format)"
            else:
                expr += f".{step.op}({args})"
        return expr


def _text(value: Any) -> str:
    return str(value)


def _shape_text(values: tuple[Any, ...]) -> str:
    return "(" + ", ".join(map(_text, values)) + ("," if len(values) == 1 else "") + ")"


def plan_symbolic(op: str, pattern: str, shape: tuple[Any, ...], axes_lengths: Mapping[str, Any],
                  reduction: str | None = None, copy: bool | None = None) -> SymbolicPlan:
    """The steps of ``op`` for an input of ``shape`` (ints and symbolic sizes), decided
    from the pattern and the rank only. Raises :class:`PatternError` for what can be
    checked without comparing a symbolic size; the rest is the plan's ``checks``."""
    recipe = build_recipe(parse_transform(pattern, op), len(shape))
    checks: list[SizeCheck] = []
    lengths = solve_lengths(recipe, tuple(shape), axes_lengths, checks)
    given = tuple(axes_lengths.items())
    # eager's context line (the call's shape and lengths), made of the same sizes
    call = tuple(shape) + tuple(length for _, length in given)
    checks = [check.with_line(lambda *sizes: context_line(
        pattern, sizes[:len(shape)], dict(zip((n for n, _ in given), sizes[len(shape):])), op),
        call) for check in checks]
    names = recipe.names
    steps: list[SymbolicStep] = []
    left_count = len(recipe.axes) - len(recipe.added)
    if any(len(group) != 1 for group in recipe.input_groups):
        steps.append(SymbolicStep("reshape", tuple(lengths[:left_count]),
                                  "split into " + " ".join(names[:left_count]) + f"; {RUNTIME_DECIDES}"))
    order = recipe.permutation
    if order != tuple(range(len(order))):
        steps.append(SymbolicStep("permute", order, "axes to output order: always a view"))
    if recipe.reduced:
        kept = len(order) - len(recipe.reduced)
        steps.append(SymbolicStep("reduce", tuple(range(kept, len(order))),
                                  f"{reduction} over {' '.join(names[i] for i in recipe.reduced)}"))
    if recipe.added:
        added = set(recipe.added)
        axis_order = [i for group in recipe.output_groups for i in group]
        positions = tuple(k for k, axis in enumerate(axis_order) if axis in added)
        steps.append(SymbolicStep("unsqueeze", positions,
                                  "a size-1 dim for each new axis: always a view"))
        # -1 keeps an input axis's size: only the new axes' lengths are written out
        steps.append(SymbolicStep("expand", tuple(lengths[a] if a in added else -1 for a in axis_order),
                                  "new axes repeat with stride 0: a view"))
    output_shape = tuple(math.prod(lengths[i] for i in group) for group in recipe.output_groups)
    if any(len(group) != 1 for group in recipe.output_groups):
        steps.append(SymbolicStep("reshape", output_shape,
                                  f"compose the output groups; {RUNTIME_DECIDES}"))
    if copy and not recipe.reduced:
        steps.append(SymbolicStep("copy", (), "copy=True: a fresh C-contiguous array"))
    return SymbolicPlan(op=op, pattern=pattern, input_shape=tuple(shape),
                        output_shape=output_shape, axis_lengths=tuple(zip(names, lengths)),
                        steps=tuple(steps), copy_requested=copy,
                        reduction=reduction if recipe.reduced else None, checks=tuple(checks))
