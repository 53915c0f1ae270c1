"""Recipes: what a rearrange pattern means for an input of a given rank, before shapes.

A :class:`Recipe` turns the pattern's two sides into *elementary axes* — the axes that
remain once every left-side group is decomposed and the ellipsis is expanded — and
records, for every input dim and every output dim, which elementary axes compose it.
It depends only on (pattern, ndim), so it is cached by exactly that; the planner
(:mod:`rearrange.plan`) binds it to a concrete layout and axis lengths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from .errors import PatternError
from .layout import MAX_DIMS, MAX_SIZE, size_problem
from .parsing import AnonymousAxis, AxisName, EllipsisAxis, Group, TransformPattern, pattern_error

__all__ = ["ElementaryAxis", "Recipe", "build_recipe", "solve_lengths", "check_result_size",
           "is_symbolic"]

ELLIPSIS_PREFIX = "…"  # ellipsis dims are named …0, …1, ... (not valid identifiers)


@dataclass(frozen=True, slots=True)
class ElementaryAxis:
    """One axis of the fully decomposed input."""

    name: str         # an identifier, or …k for the k-th dim covered by the ellipsis
    start: int        # span in the pattern text of its left-side occurrence (for errors)
    end: int


@dataclass(frozen=True, slots=True)
class Recipe:
    """The shape-free meaning of a transform pattern for an input of rank ``ndim``.

    Invariants: ``input_groups`` mentions every axis of the left side exactly once (the
    first ``len(axes) - len(added)`` axes, in left-side order); ``output_groups``
    mentions every axis that is not ``reduced`` exactly once. So rearrange has no
    reduced and no added axes; reduce has reduced axes (left-only, numbers included);
    repeat has added axes (right-only, numbers included), which come last in ``axes``.
    An empty group is a unit (size-1) dim.
    """

    pattern: TransformPattern
    ndim: int
    axes: tuple[ElementaryAxis, ...]             # left-side axes in order, then added ones
    input_groups: tuple[tuple[int, ...], ...]    # per input dim: indices into axes
    output_groups: tuple[tuple[int, ...], ...]   # per output dim: indices into axes
    input_spans: tuple[tuple[int, int], ...]     # per input dim: its text span
    output_spans: tuple[tuple[int, int], ...]    # per output dim: its text span
    reduced: tuple[int, ...] = ()                # left-side axes absent from the output
    added: tuple[int, ...] = ()                  # output axes absent from the input
    fixed_lengths: tuple[tuple[int, int], ...] = ()  # (axis, length) of numbers like (h 2)

    @property
    def permutation(self) -> tuple[int, ...]:
        """The input's axes in the order the plan permutes them to: the kept ones in
        output order, then the reduced ones in input order (so a reduction runs over
        trailing axes and leaves its result already in output order)."""
        added = set(self.added)
        kept = tuple(i for group in self.output_groups for i in group if i not in added)
        return kept + self.reduced

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(axis.name for axis in self.axes)

    def group_text(self, group: tuple[int, ...]) -> str:
        """``(h d)`` for a composed group, ``h`` for a single axis, ``()`` for a unit."""
        names = [self.axes[i].name for i in group]
        return names[0] if len(names) == 1 else "(" + " ".join(names) + ")"


def _expand_side(
    text: str, groups: tuple[Group, ...], ellipsis_names: tuple[str, ...]
) -> list[tuple[list[tuple[str | AnonymousAxis, int, int]], tuple[int, int]]]:
    """Each group as ``([(name, start, end), ...], span)``, the ellipsis expanded.

    A bare ``...`` becomes one group per covered dim; ``(... h)`` puts the covered dims
    inside the one group. An anonymous axis stands as its AnonymousAxis node: each one
    is an axis of its own.
    """
    expanded = []
    for group in groups:
        span = (group.start, group.end)
        if not group.bracketed and len(group.members) == 1 and isinstance(group.members[0], EllipsisAxis):
            member = group.members[0]
            expanded.extend(([(name, member.start, member.end)], span) for name in ellipsis_names)
            continue
        names = []
        for member in group.members:
            if isinstance(member, EllipsisAxis):
                names.extend((name, member.start, member.end) for name in ellipsis_names)
            elif isinstance(member, AxisName):
                names.append((member.name, member.start, member.end))
            else:  # AnonymousAxis: parse_transform allows them only where the op may
                names.append((member, member.start, member.end))
        expanded.append((names, span))
    return expanded


@lru_cache(maxsize=1024)
def build_recipe(pattern: TransformPattern, ndim: int) -> Recipe:
    """The recipe of a parsed rearrange pattern for an input of rank ``ndim``."""
    left = pattern.left
    fixed_groups = sum(1 for g in left.groups if not _is_bare_ellipsis(g))
    if left.has_ellipsis:
        if ndim < fixed_groups:
            raise pattern_error(
                f"the input has {ndim} dims, but the left side needs at least {fixed_groups} "
                f"besides the ellipsis",
                pattern.text, left.start, left.end,
            )
        ellipsis_names = tuple(f"{ELLIPSIS_PREFIX}{k}" for k in range(ndim - fixed_groups))
    else:
        if ndim != len(left.groups):
            raise pattern_error(
                f"the input has {ndim} dim{'s' if ndim != 1 else ''}, but the left side "
                f"describes {len(left.groups)}: one group per input dim is expected",
                pattern.text, left.start, max(left.end, left.start + 1),
            )
        ellipsis_names = ()

    left_groups = _expand_side(pattern.text, left.groups, ellipsis_names)
    right_groups = _expand_side(pattern.text, pattern.right.groups, ellipsis_names)

    axes: list[ElementaryAxis] = []
    index_of: dict[str, int] = {}
    fixed: list[tuple[int, int]] = []
    anonymous_seen: dict[int, int] = {}

    def new_axis(name: str | AnonymousAxis, start: int, end: int) -> int:
        if isinstance(name, AnonymousAxis):
            # Each number is its own axis; its name (a number, so never an identifier
            # the caller could pass) only labels it in plans.
            count = anonymous_seen[name.value] = anonymous_seen.get(name.value, 0) + 1
            label = str(name.value) if count == 1 else f"{name.value}#{count}"
            fixed.append((len(axes), name.value))
            axes.append(ElementaryAxis(label, start, end))
            return len(axes) - 1
        index_of[name] = len(axes)
        axes.append(ElementaryAxis(name, start, end))
        return index_of[name]

    input_groups = [tuple(new_axis(*member) for member in names) for names, _ in left_groups]
    left_count = len(axes)
    output_groups = [
        tuple(index_of[name] if isinstance(name, str) and name in index_of
              else new_axis(name, start, end)
              for name, start, end in names)
        for names, _ in right_groups
    ]
    kept = {i for group in output_groups for i in group}
    return Recipe(
        pattern=pattern,
        ndim=ndim,
        axes=tuple(axes),
        input_groups=tuple(input_groups),
        output_groups=tuple(output_groups),
        input_spans=tuple(span for _, span in left_groups),
        output_spans=tuple(span for _, span in right_groups),
        reduced=tuple(i for i in range(left_count) if i not in kept),
        added=tuple(range(left_count, len(axes))),
        fixed_lengths=tuple(fixed),
    )


def _is_bare_ellipsis(group: Group) -> bool:
    return (not group.bracketed and len(group.members) == 1
            and isinstance(group.members[0], EllipsisAxis))


def solve_lengths(recipe: Recipe, shape: tuple[int, ...], axes_lengths: Mapping[str, int]) -> tuple[int, ...]:
    """The length of every elementary axis, from the input shape and the given lengths.

    Each input dim is the product of its group; at most one axis per group may be
    unknown, and it must divide evenly. Raises :class:`PatternError` pointing at the
    group that does not fit.
    """
    text = recipe.pattern.text
    names = recipe.names
    for name, length in axes_lengths.items():
        if is_symbolic(length) and name in names:
            continue  # a traced size: checking it would pin the trace to its value
        if name not in names or not name.isidentifier():  # not an ellipsis or numbered axis
            raise PatternError(
                f"axis length given for '{name}', which is not an axis of the pattern "
                f"(its axes: {', '.join(n for n in names if n.isidentifier()) or 'none'})"
            )
        if isinstance(length, bool) or not hasattr(length, "__index__") or length.__index__() <= 0:
            axis = recipe.axes[names.index(name)]
            raise pattern_error(
                f"axis length {name}={length!r} must be a positive integer",
                text, axis.start, axis.end,
            )
        if length.__index__() > MAX_SIZE:
            axis = recipe.axes[names.index(name)]
            raise pattern_error(
                f"axis length {name}={length!r} is too large: lengths must be below 2**63",
                text, axis.start, axis.end,
            )
    lengths: list[int | None] = [None] * len(recipe.axes)
    for axis, length in recipe.fixed_lengths:   # at most 18 digits: parsing checks
        lengths[axis] = length
    for name, length in axes_lengths.items():
        lengths[names.index(name)] = length if is_symbolic(length) else length.__index__()

    for dim, (group, size) in enumerate(zip(recipe.input_groups, shape)):
        start, end = recipe.input_spans[dim]
        if not group:
            if _known(size) and size != 1:
                raise pattern_error(
                    f"a unit axis matches input dim {dim}, which has size {size} (expected 1)",
                    text, start, end,
                )
            continue
        unknown = [i for i in group if lengths[i] is None]
        if len(group) == 1 and unknown:
            lengths[group[0]] = size
            continue
        known = math.prod(lengths[i] for i in group if lengths[i] is not None)
        if len(unknown) > 1:
            missing = ", ".join(f"{recipe.axes[i].name}=" for i in unknown)
            raise pattern_error(
                f"cannot infer the lengths of {recipe.group_text(group)} from input dim {dim} "
                f"of size {size}: {len(unknown)} axes are unknown; pass all but one of "
                f"them ({missing}...)",
                text, start, end,
            )
        if unknown:
            if _known(size, known) and size % known:
                raise pattern_error(
                    f"input dim {dim} of size {size} cannot be split into "
                    f"{recipe.group_text(group)}: {size} is not divisible by {known}",
                    text, start, end,
                )
            lengths[unknown[0]] = size // known
        elif _known(size, known) and known != size:
            given = ", ".join(f"{recipe.axes[i].name}={lengths[i]}" for i in group)
            if len(group) == 1:
                message = (f"axis '{recipe.axes[group[0]].name}' has length {size} in the input, "
                           f"but {given} was given")
            else:
                message = (f"input dim {dim} has size {size}, but {recipe.group_text(group)} "
                           f"with {given} has {known} elements")
            raise pattern_error(message, text, start, end)
    for axis in recipe.added:
        if lengths[axis] is None:
            name = recipe.axes[axis].name
            raise pattern_error(
                f"axis '{name}' is new on the right side, so its length cannot come from "
                f"the input; pass it as {name}=...",
                text, recipe.axes[axis].start, recipe.axes[axis].end,
            )
    return tuple(lengths)  # type: ignore[arg-type]


def is_symbolic(value: Any) -> bool:
    """Is ``value`` a size the caller's framework traces: a ``SymInt`` (torch.compile,
    torch.export) or a 0-d tensor (torch.jit.trace's sizes)? Told apart by type name, so
    that no framework is imported to ask."""
    return type(value).__name__ in ("SymInt", "Tensor")


def _known(*values: Any) -> bool:
    """Can these sizes be compared? Symbolic ones are not: each comparison would become a
    guard of the compiled graph, i.e. a recompile per shape; the framework's own reshape
    checks them instead."""
    return not any(map(is_symbolic, values))


def check_result_size(recipe: Recipe, lengths: tuple[int, ...], itemsize: int | None) -> None:
    """Raise :class:`PatternError` when the axes ``lengths`` (from :func:`solve_lengths`)
    describe arrays that cannot exist (see :func:`rearrange.layout.size_problem`): the
    input split into more than 64 axes, or a result of more than 64 dims, 2**63
    elements or 2**63 bytes. Called before any layout of the plan is built, so such a
    call fails here, before numpy or torch sees a shape and with nothing allocated.

    The largest arrays a plan builds are the split input (its elementary axes) and the
    output before its groups merge (the kept and added axes, unmerged: a size-0 axis
    inside a group must not hide a product numpy refuses in the unmerged view).
    """
    text = recipe.pattern.text
    left, right = recipe.pattern.left, recipe.pattern.right
    left_count = len(recipe.axes) - len(recipe.added)
    if left_count > MAX_DIMS:
        raise pattern_error(
            f"the left side splits the input into {left_count} axes; arrays have at most "
            f"{MAX_DIMS} dims (numpy's limit)", text, left.start, max(left.end, left.start + 1))
    unmerged = tuple(lengths[i] for group in recipe.output_groups for i in group)
    problem = (size_problem(unmerged, itemsize or 1)
               or size_problem(tuple(1 for _ in recipe.output_groups)))
    if problem is not None:
        raise pattern_error(f"no array can hold the result: {problem}",
                            text, right.start, max(right.end, right.start + 1))
