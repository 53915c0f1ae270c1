"""Recipes: what a rearrange pattern means for an input of a given rank, before shapes.

A :class:`Recipe` turns the pattern's two sides into *elementary axes* — the axes that
remain once every left-side group is decomposed and the ellipsis is expanded — and
records, for every input dim and every output dim, which elementary axes compose it.
It depends only on (pattern, ndim), so it is cached by exactly that; the planner
(:mod:`rearrange.plan`) binds it to a concrete layout and axis lengths.
"""

from __future__ import annotations

import dataclasses
import math
import re
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from .errors import PatternError, RearrangeError
from .layout import MAX_DIMS, MAX_SIZE, size_problem
from .parsing import (AnonymousAxis, AxisName, EllipsisAxis, Group, TransformPattern,
                      full_record, pattern_error, side_groups)
from .records import lazy_slots, record, slot_setter

__all__ = ["ElementaryAxis", "Recipe", "build_recipe", "solve_lengths", "check_result_size",
           "is_symbolic", "SizeCheck", "size_check", "shapes_check"]

ELLIPSIS_PREFIX = "…"  # ellipsis dims are named …0, …1, ... (not valid identifiers)
_PLAIN_INT = frozenset({int})


@record
class ElementaryAxis:
    """One axis of the fully decomposed input."""

    name: str         # an identifier, or …k for the k-th dim covered by the ellipsis
    start: int        # span in the pattern text of its left-side occurrence (for errors)
    end: int


@record
class Recipe:
    """The shape-free meaning of a transform pattern for an input of rank ``ndim``.

    Invariants: ``input_groups`` mentions every axis of the left side exactly once (the
    first ``len(axes) - len(added)`` axes, in left-side order); ``output_groups``
    mentions every axis that is not ``reduced`` exactly once. So rearrange has no
    reduced and no added axes; reduce has reduced axes (left-only, numbers included);
    repeat has added axes (right-only, numbers included), which come last in ``axes``.
    An empty group is a unit (size-1) dim.

    A recipe of a pattern of axis names alone (:func:`_named_recipe`) builds ``axes``,
    ``input_spans`` and ``output_spans`` from its pattern's scanner record when first
    read: planning reads ``names`` and the groups, errors the spans. Built or not,
    they are what :func:`_general_recipe` gives.
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
    names: tuple[str, ...] = ()                  # axes[i].name for every axis, in order
    # The input's axes in the order the plan permutes them to: the kept ones in output
    # order, then the reduced ones in input order (so a reduction runs over trailing
    # axes and leaves its result already in output order).
    permutation: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # names and permutation follow from the axes and groups; a builder that leaves
        # them out (einsum builds its recipes from objects) gets them derived here
        if self.axes and not self.names:
            object.__setattr__(self, "names", tuple(axis.name for axis in self.axes))
        if self.axes and not self.permutation:
            left_count = len(self.axes) - len(self.added)
            object.__setattr__(self, "permutation", tuple(
                [i for group in self.output_groups for i in group if i < left_count])
                + self.reduced)

    def group_text(self, group: tuple[int, ...]) -> str:
        """``(h d)`` for a composed group, ``h`` for a single axis, ``()`` for a unit."""
        names = [self.names[i] for i in group]
        return names[0] if len(names) == 1 else "(" + " ".join(names) + ")"


def _from_record(recipe: Recipe, name: str) -> Any:
    """The axes or the spans of a recipe that :func:`_named_recipe` made from its
    pattern's scanner record (it leaves those slots unset), built from that record."""
    if recipe.pattern.scanned is None:
        raise AttributeError(f"'Recipe' object has no attribute {name!r}")
    scanned = full_record(recipe.pattern)
    if name == "axes":
        return _record_axes(scanned)
    return _record_spans(scanned, name == "output_spans")


lazy_slots(Recipe, _from_record, "axes", "input_spans", "output_spans")


@lru_cache(maxsize=1024)
def build_recipe(pattern: TransformPattern, ndim: int) -> Recipe:
    """The recipe of a parsed rearrange pattern for an input of rank ``ndim``."""
    return _named_recipe(pattern, ndim) or _general_recipe(pattern, ndim)


def _named_recipe(pattern: TransformPattern, ndim: int) -> Recipe | None:
    """:func:`_general_recipe` for the commonest patterns, those of axis names alone with
    one left group per input dim, read from the scanner's record of the pattern (only
    such patterns keep one: see TransformPattern), whose axis numbers are that
    function's on this ground. None for any other pattern or rank. The recipe's ``axes`` and text
    spans are built from the record when first read (:func:`_record_axes`,
    :func:`_record_spans`): planning reads neither, errors do."""
    scanned = pattern.scanned
    if scanned is None:
        return None
    # the groups as axis numbers and every axis name, numbered as _general_recipe numbers
    # them (the scanner gathered them: parsing.Named); the left names come first
    input_groups, output_groups, names = scanned[6:9]
    if len(input_groups) != ndim:
        return None
    left_names = scanned[0]
    left_count = len(left_names)
    # The left axes in output order; the added ones are the rest.
    kept = [i for dim in output_groups for i in dim if i < left_count]
    if len(kept) == left_count:
        reduced: tuple[int, ...] = ()
    else:
        in_output = set(kept)
        reduced = tuple([i for i in range(left_count) if i not in in_output])
    recipe = _new_object(Recipe)        # every slot but axes and spans (see Recipe)
    _set_pattern(recipe, pattern)
    _set_ndim(recipe, ndim)
    _set_input_groups(recipe, input_groups)
    _set_output_groups(recipe, output_groups)
    _set_reduced(recipe, reduced)
    _set_added(recipe, tuple(range(left_count, len(names))) if len(names) > left_count else ())
    _set_fixed_lengths(recipe, ())
    _set_names(recipe, names)
    _set_permutation(recipe, tuple(kept) + reduced)
    return recipe


_new_object = object.__new__
(_set_pattern, _set_ndim, _set_input_groups, _set_output_groups, _set_input_spans,
 _set_output_spans, _set_reduced, _set_added, _set_fixed_lengths, _set_names,
 _set_permutation) = (slot_setter(Recipe, name) for name in (   # member descriptors
    "pattern", "ndim", "input_groups", "output_groups", "input_spans", "output_spans",
    "reduced", "added", "fixed_lengths", "names", "permutation"))


def _record_axes(scanned: tuple) -> tuple[ElementaryAxis, ...]:
    """The axes of a name-only pattern's recipe from the pattern's scanner record: the
    left side's names in order, then the right side's new ones (repeat), each with the
    span of its first occurrence, as :func:`_general_recipe` numbers them."""
    axes: list[ElementaryAxis] = []
    seen: set[str] = set()
    for values, layout in (scanned[0], scanned[1]), (scanned[2], scanned[3]):
        for first, count, _, _, _, at in side_groups(values, layout):
            for k in range(count):
                name = values[first + k]
                if name not in seen:
                    seen.add(name)
                    axes.append(ElementaryAxis(name, layout[at + 2 * k], layout[at + 2 * k + 1]))
    return tuple(axes)


def _record_spans(scanned: tuple, side: int) -> tuple[tuple[int, int], ...]:
    """The text span of each group of a side (0: left, 1: right) of a scanner record."""
    values, layout = scanned[2 * side], scanned[2 * side + 1]
    return tuple([(start, end) for _, _, _, start, end, _ in side_groups(values, layout)])


def _general_recipe(pattern: TransformPattern, ndim: int) -> Recipe:
    """The recipe of any parsed transform pattern for an input of rank ``ndim``."""
    left = pattern.left
    left_groups = left.groups
    bare_ellipsis = 0  # 1 when the left side holds a bare "..." (at most one: parsing)
    for group in left_groups:
        if not group.bracketed and len(group.members) == 1 and \
                type(group.members[0]) is EllipsisAxis:
            bare_ellipsis = 1
    fixed_groups = len(left_groups) - bare_ellipsis
    if left.has_ellipsis:
        if ndim < fixed_groups:
            raise pattern_error(
                f"the input has {ndim} dims, but the left side needs at least {fixed_groups} "
                f"besides the ellipsis",
                pattern.text, left.start, left.end,
            )
        ellipsis_names = tuple(f"{ELLIPSIS_PREFIX}{k}" for k in range(ndim - fixed_groups))
    else:
        if ndim != len(left_groups):
            raise pattern_error(
                f"the input has {ndim} dim{'s' if ndim != 1 else ''}, but the left side "
                f"describes {len(left_groups)}: one group per input dim is expected",
                pattern.text, left.start, max(left.end, left.start + 1),
            )
        ellipsis_names = ()

    # One pass per side, in text order: every left-side axis (a number is an axis of its
    # own, "..." stands for ellipsis_names) gets the next index; the right side reuses
    # the index of a name seen on the left, and appends an axis for anything else.
    axes: list[ElementaryAxis] = []
    names: list[str] = []
    index_of: dict[str, int] = {}
    fixed: list[tuple[int, int]] = []
    anonymous_seen: dict[int, int] = {}

    def new_axis(name: str, start: int, end: int) -> int:
        index_of[name] = len(axes)
        names.append(name)
        axes.append(ElementaryAxis(name, start, end))
        return len(axes) - 1

    def new_number(member: AnonymousAxis) -> int:
        # Each number is its own axis; its name (a number, so never an identifier the
        # caller could pass) only labels it in plans.
        value = member.value
        count = anonymous_seen[value] = anonymous_seen.get(value, 0) + 1
        label = str(value) if count == 1 else f"{value}#{count}"
        fixed.append((len(axes), value))
        names.append(label)
        axes.append(ElementaryAxis(label, member.start, member.end))
        return len(axes) - 1

    def expand(groups: tuple[Group, ...], dims: list[tuple[int, ...]],
               spans: list[tuple[int, int]], on_left: bool) -> None:
        for group in groups:
            span = (group.start, group.end)
            members = group.members
            if not group.bracketed and len(members) == 1 and type(members[0]) is EllipsisAxis:
                # a bare "...": one dim per covered axis
                member = members[0]
                for name in ellipsis_names:
                    dims.append((index_of[name] if not on_left else
                                 new_axis(name, member.start, member.end),))
                    spans.append(span)
                continue
            dim: list[int] = []
            for member in members:
                if isinstance(member, AxisName):
                    name = member.name
                    if on_left or name not in index_of:
                        dim.append(new_axis(name, member.start, member.end))
                    else:
                        dim.append(index_of[name])
                elif isinstance(member, EllipsisAxis):
                    for name in ellipsis_names:
                        dim.append(index_of[name] if not on_left else
                                   new_axis(name, member.start, member.end))
                else:  # AnonymousAxis: parse_transform allows them only where the op may
                    dim.append(new_number(member))
            dims.append(tuple(dim))
            spans.append(span)

    input_groups: list[tuple[int, ...]] = []
    input_spans: list[tuple[int, int]] = []
    expand(left_groups, input_groups, input_spans, True)
    left_count = len(axes)
    output_groups: list[tuple[int, ...]] = []
    output_spans: list[tuple[int, int]] = []
    expand(pattern.right.groups, output_groups, output_spans, False)
    kept = {i for group in output_groups for i in group}
    reduced = tuple([i for i in range(left_count) if i not in kept])
    return Recipe(
        pattern=pattern,
        ndim=ndim,
        axes=tuple(axes),
        input_groups=tuple(input_groups),
        output_groups=tuple(output_groups),
        input_spans=tuple(input_spans),
        output_spans=tuple(output_spans),
        reduced=reduced,
        added=tuple(range(left_count, len(axes))),
        fixed_lengths=tuple(fixed),
        names=tuple(names),
        permutation=tuple([i for group in output_groups for i in group if i < left_count])
        + reduced,
    )


def solve_lengths(recipe: Recipe, shape: tuple[int, ...], axes_lengths: Mapping[str, int],
                  checks: list[SizeCheck] | None = None) -> tuple[int, ...]:
    """The length of every elementary axis, from the input shape and the given lengths.

    Each input dim is the product of its group; at most one axis per group may be
    unknown, and it must divide evenly. Raises :class:`PatternError` pointing at the
    group that does not fit. Where that fit depends on symbolic sizes it cannot be
    decided here (see :func:`is_symbolic`): it is appended to ``checks`` instead, as a
    :class:`SizeCheck` whose error is the one raised here for the same sizes (and not
    checked at all when ``checks`` is None).
    """
    groups = recipe.input_groups
    if (not axes_lengths and not recipe.fixed_lengths and not recipe.added
            and len(recipe.names) == len(groups) == len(shape) and () not in groups):
        # Every input dim is one axis (as many axes as dims, none a unit): input groups
        # mention the left axes once each, in order, so the lengths are the shape's.
        return tuple(shape)
    if not recipe.fixed_lengths and not recipe.added:
        lengths = _solve_plain(groups, recipe.names, shape, axes_lengths)
        if lengths is not None:
            return lengths
    return _solve_general(recipe, shape, axes_lengths, checks)


def _solve_plain(groups: tuple[tuple[int, ...], ...], names: tuple[str, ...],
                 shape: tuple[int, ...], axes_lengths: Mapping[str, Any]) -> tuple[int, ...] | None:
    """:func:`_solve_general` where nothing can go wrong or be symbolic: every given
    length a plain int in range for a named axis, every size a plain int, every group
    with at most one unknown axis that divides its dim exactly, every known one
    matching; None otherwise (the general path then decides, and says what is wrong).
    Its lengths are the general path's (tests/test_cold_path.py holds them equal)."""
    if len(groups) != len(shape):
        return None
    lengths: list[Any] = [None] * len(names)
    for name, length in axes_lengths.items():
        if (type(length) is not int or not 0 < length <= MAX_SIZE or name not in names
                or not name.isidentifier()):
            return None
        lengths[names.index(name)] = length
    for group, size in zip(groups, shape):
        if type(size) is not int:
            return None
        unknown = -1
        known = 1           # the product of the given lengths of the group (all positive)
        for i in group:
            length = lengths[i]
            if length is None:
                if unknown >= 0:
                    return None
                unknown = i
            else:
                known *= length
        if unknown >= 0:
            if size % known:
                return None
            lengths[unknown] = size // known
        elif known != size:
            return None
    return tuple(lengths)


def _solve_general(recipe: Recipe, shape: tuple[int, ...], axes_lengths: Mapping[str, int],
                   checks: list[SizeCheck] | None) -> tuple[int, ...]:
    """:func:`solve_lengths` in full: every check, symbolic sizes, the errors."""
    text = recipe.pattern.text
    names = recipe.names
    for name, length in axes_lengths.items():
        if type(length) is int and 0 < length <= MAX_SIZE and name in names \
                and name.isidentifier():
            continue  # the commonest: a plain positive int for a named axis (passes below)
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
    lengths: list[int | None] = [None] * len(names)
    for axis, length in recipe.fixed_lengths:   # at most 18 digits: parsing checks
        lengths[axis] = length
    for name, length in axes_lengths.items():
        lengths[names.index(name)] = length if type(length) is int or is_symbolic(length) \
            else length.__index__()

    def require(lhs: Any, relation: str, rhs: Any, message: Callable[..., str],
                quoted: tuple[Any, ...], dim: int) -> None:
        # message(*quoted) is the error's text: called with the sizes when they are known;
        # it points at input dim `dim`'s group (its span read only then: a recipe built
        # from a scanner record finds spans by scanning again)
        if _known(lhs, rhs):
            if not _holds(lhs, relation, rhs):
                start, end = recipe.input_spans[dim]
                raise pattern_error(message(*quoted), text, start, end)
        elif checks is not None:
            start, end = recipe.input_spans[dim]
            checks.append(size_check(lhs, relation, rhs, lambda *values: str(
                pattern_error(message(*values), text, start, end)), quoted))

    for dim, (group, size) in enumerate(zip(recipe.input_groups, shape)):
        if len(group) == 1 and lengths[group[0]] is None:
            lengths[group[0]] = size  # one unknown axis: the dim's size (the commonest)
            continue
        if not group:
            require(size, "==", 1, lambda size: f"a unit axis matches input dim {dim}, which "
                    f"has size {size} (expected 1)", (size,), dim)
            continue
        if len(group) == 1:   # its length is known (given): checked below
            unknown: list[int] = []
            known = lengths[group[0]]
        else:
            unknown = []
            known = 1         # the product of the known lengths, in order
            for i in group:
                length = lengths[i]
                if length is None:
                    unknown.append(i)
                else:
                    known *= length
        if len(unknown) > 1:
            missing = ", ".join(f"{recipe.axes[i].name}=" for i in unknown)
            start, end = recipe.input_spans[dim]
            raise pattern_error(
                f"cannot infer the lengths of {recipe.group_text(group)} from input dim {dim} "
                f"of size {size}: {len(unknown)} axes are unknown; pass all but one of "
                f"them ({missing}...)",
                text, start, end,
            )
        if unknown:
            if type(size) is int and type(known) is int and not size % known:
                lengths[unknown[0]] = size // known   # divisible: require() would pass
                continue
            require(size % known, "==", 0, lambda size, known: (
                f"input dim {dim} of size {size} cannot be split into "
                f"{recipe.group_text(group)}: {size} is not divisible by {known}"),
                (size, known), dim)
            lengths[unknown[0]] = size // known
            continue
        given = tuple(lengths[i] for i in group)

        def contradiction(size: Any, known: Any, *given: Any) -> str:
            stated = ", ".join(f"{recipe.axes[i].name}={v}" for i, v in zip(group, given))
            if len(group) == 1:
                return (f"axis '{recipe.axes[group[0]].name}' has length {size} in the input, "
                        f"but {stated} was given")
            return (f"input dim {dim} has size {size}, but {recipe.group_text(group)} "
                    f"with {stated} has {known} elements")
        require(known, "==", size, contradiction, (size, known, *given), dim)
    for axis in recipe.added:
        if lengths[axis] is None:
            name = recipe.axes[axis].name
            raise pattern_error(
                f"axis '{name}' is new on the right side, so its length cannot come from "
                f"the input; pass it as {name}=...",
                text, recipe.axes[axis].start, recipe.axes[axis].end,
            )
    return tuple(lengths)  # type: ignore[arg-type]


@record
class SizeCheck:
    """A condition the pattern puts on sizes that are symbolic (traced by torch.compile,
    torch.export, torch.jit.trace), so that planning cannot decide it: ``lhs == rhs`` or
    ``lhs >= rhs`` (expressions of the sizes) must hold when the plan runs. A backend
    asserts it in the traced program (torch: ``torch._check_with``), so that compiled
    code raises where eager code raises, and with eager's error: :meth:`failure`.

    ``message`` is that error's text as a ``str.format`` template whose fields ``{0}``,
    ``{1}``, ... stand for ``quoted``'s values: the sizes the text names, which are
    expressions until the check fails and the backend makes them numbers.
    """

    lhs: Any
    relation: str                   # "==" or ">="
    rhs: Any
    message: str
    quoted: tuple[Any, ...] = ()
    error: type[RearrangeError] = PatternError

    def text(self, values: Sequence[Any]) -> str:
        """The error's text for ``quoted``'s values ``values``."""
        return self.message.format(*values)

    def failure(self, values: Sequence[Any]) -> RearrangeError:
        return self.error(self.text(values))

    def to_text(self) -> str:
        return f"{self.lhs} {self.relation} {self.rhs}"

    def with_line(self, line: Callable[..., str], quoted: tuple[Any, ...]) -> SizeCheck:
        """This check with ``line(*quoted)`` (e.g. the call's context) added to its text
        as a line of its own."""
        fields = tuple(_Field(k) for k in range(len(self.quoted), len(self.quoted) + len(quoted)))
        return dataclasses.replace(self, message=f"{self.message}\n{_template(line(*fields))}",
                                   quoted=self.quoted + tuple(quoted))


def size_check(lhs: Any, relation: str, rhs: Any, message: Callable[..., str],
               quoted: tuple[Any, ...], error: type[RearrangeError] = PatternError) -> SizeCheck:
    """The :class:`SizeCheck` ``lhs relation rhs`` whose error text is ``message(*quoted)``
    (the very function that words the error where sizes are known, so that the texts
    match): it is called once here, with stand-ins that become the template's fields."""
    fields = tuple(_Field(k) for k in range(len(quoted)))
    return SizeCheck(lhs, relation, rhs, _template(message(*fields)), tuple(quoted), error)


def shapes_check(error: type[RearrangeError], lhs: Any, relation: str, rhs: Any,
                 shapes: Sequence[Sequence[Any]], message: Callable[..., str],
                 sizes: tuple[Any, ...] = ()) -> SizeCheck | None:
    """The check ``lhs relation rhs`` whose ``error`` says ``message(shapes, *sizes)``
    (``shapes``: the call's shapes, lists or tuples; ``sizes``: others the text quotes),
    for a call over symbolic sizes. Where ``lhs`` and ``rhs`` are ints nothing need be
    deferred: None if it holds, else its error is raised here, or by the backend when
    the text quotes symbolic sizes (the backend quotes them as numbers)."""
    ranks = [len(shape) for shape in shapes]
    kinds = [list if isinstance(shape, list) else tuple for shape in shapes]

    def text(*values: Any) -> str:
        quoted = iter(values)
        call = [kind(next(quoted) for _ in range(rank)) for kind, rank in zip(kinds, ranks)]
        return message(call, *quoted)
    quoted = (*(v for shape in shapes for v in shape), *sizes)
    if _known(lhs, rhs):
        if _holds(lhs, relation, rhs):
            return None
        if _known(*quoted):
            raise error(text(*quoted))
    return size_check(lhs, relation, rhs, text, quoted, error)


class _Field:
    """Stands for the ``k``-th quoted size in a message: it prints as a marker that
    :func:`_template` turns into ``{k}``, whatever formatting the message applies."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k

    def __repr__(self) -> str:
        return f"\x00{self.k}\x00"

    __str__ = __repr__


def _template(text: str) -> str:
    """``text`` as a ``str.format`` template: its own braces doubled, each marker of a
    :class:`_Field` a field."""
    return re.sub("\x00([0-9]+)\x00", r"{\1}", text.replace("{", "{{").replace("}", "}}"))


def _holds(lhs: Any, relation: str, rhs: Any) -> bool:
    return lhs == rhs if relation == "==" else lhs >= rhs


def is_symbolic(value: Any) -> bool:
    """Is ``value`` a size the caller's framework traces: a ``SymInt`` (torch.compile,
    torch.export) or a 0-d tensor (torch.jit.trace's sizes)? Told apart by type name, so
    that no framework is imported to ask."""
    return type(value).__name__ in ("SymInt", "Tensor")


def _known(*values: Any) -> bool:
    """Can these sizes be compared? Symbolic ones are not: each comparison would become a
    guard of the compiled graph, i.e. a recompile per shape; the framework's own reshape
    checks them instead."""
    return _PLAIN_INT.issuperset(map(type, values)) or not any(map(is_symbolic, values))


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
    left_count = len(recipe.names) - len(recipe.added)
    if left_count > MAX_DIMS:
        left = recipe.pattern.left
        raise pattern_error(
            f"the left side splits the input into {left_count} axes; arrays have at most "
            f"{MAX_DIMS} dims (numpy's limit)", text, left.start, max(left.end, left.start + 1))
    unmerged = tuple([lengths[i] for group in recipe.output_groups for i in group])
    if (len(unmerged) <= MAX_DIMS and len(recipe.output_groups) <= MAX_DIMS
            and 0 < math.prod(unmerged) * (itemsize or 1) <= MAX_SIZE):
        return  # no size 0 (the product is positive), so every size and count is below it
    problem = (size_problem(unmerged, itemsize or 1)
               or size_problem(tuple(1 for _ in recipe.output_groups)))
    if problem is not None:
        right = recipe.pattern.right
        raise pattern_error(f"no array can hold the result: {problem}",
                            text, right.start, max(right.end, right.start + 1))
