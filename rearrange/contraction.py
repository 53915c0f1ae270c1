"""``einsum`` with einops-style named axes, and the compositions einops refuses.

``einsum(x, y, "b (h d) t, b h s d -> b h t s", h=4)`` runs in three stages, like
``rearrange``:

* **parse** (:func:`parse_einsum`, cached by text): the grammar's ``einsum`` start rule,
  then every check that needs no shapes — valid names, one ``...`` per side, no ``...``
  inside parentheses on an input, each output axis once and taken from some input;
* **plan** (:func:`explain_einsum`, cached by pattern, layouts, dtypes and lengths): the
  length of every axis, then, per input, the ``rearrange`` that splits its compositions
  into elementary axes and drops its unit dims (always a view); one ``numpy.einsum`` with
  single-letter subscripts over elementary axes, written into a fresh C-contiguous array;
  and the ``rearrange`` that composes the output groups and inserts unit dims (a view of
  that array);
* **execute**: exactly those calls, on numpy arrays or on :class:`rearrange.Tensor`,
  by the backend's lowering — ``lower_einsum`` in :mod:`rearrange.backends.ndarray` and
  :mod:`rearrange.backends.tensor` — or, for torch, dask and array-API arrays, by the
  array's own library (its ``einsum`` and rearranges). This module holds parsing and
  planning, and declares einsum for the door (:data:`EINSUM`), which does the rest of a
  call (:func:`rearrange.front.run`: the cache, traced sizes, errors).

Semantics are numpy's (and so einops'): an axis repeated within one input takes the
diagonal; an axis absent from the output is summed; a dim of size 1 broadcasts against
the same axis of another input; the dims ``...`` stands for broadcast across inputs.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import string
from typing import Any, Callable, Mapping, Sequence, overload

import numpy as np

from . import backends, calls, front
from .calls import ArrayT
from .backends import ndarray
from .backends import tensor as tensor_backend
from .backends.protocol import hook
from .caching import PLANS
from .front import PLAIN_INT
from .errors import ArgumentTypeError, PatternError, RearrangeError
from .layout import Layout, size_problem
from .parsing import (
    AnonymousAxis,
    AxisName,
    EllipsisAxis,
    Group,
    Member,
    Side,
    TransformPattern,
    get_parser,
    invalid_name_reason,
    parse_cached,
    register_kind,
    syntax_error,
    pattern_error,
    shorten,
)
from .matmul import matmul_form, shape_arg as _shape_arg
from .plan import JsonDump, Plan, layout_dict
from .recipe import ELLIPSIS_PREFIX, ElementaryAxis, Recipe, SizeCheck, is_symbolic, shapes_check
from .records import record
from .tensor import Tensor

__all__ = ["einsum", "explain_einsum", "parse_einsum", "EinsumPattern", "EinsumPlan", "EinsumStep"]

# numpy.einsum names axes by single letters: at most 52 distinct elementary axes.
_LETTERS = string.ascii_letters

# Below this many multiply-adds (the product of every axis length), numpy.einsum's
# plain C loop beats the optimize path, whose Python bookkeeping costs about 10 µs per
# call; above it, pairwise contraction through BLAS matmul wins by up to 10x for two
# inputs and by orders of magnitude for three or more (measured with numpy 2.4).
_OPTIMIZE_MIN_COST = 1 << 15

_ndarray = np.ndarray


# --------------------------------------------------------------------------- parse


@record
class EinsumPattern:
    """A checked einsum pattern ``"in0, in1, ... -> out"``: one Side per input, spans
    into ``text`` kept for errors."""

    text: str
    inputs: tuple[Side, ...]
    output: Side

    @property
    def names(self) -> tuple[str, ...]:
        """Every axis name of the inputs, once each, in order of first appearance."""
        return tuple(dict.fromkeys(name for side in self.inputs for name in side.names))


def parse_einsum(text: str) -> EinsumPattern:
    """Parse and check an einsum pattern without knowing shapes; results are cached.

    >>> p = parse_einsum("b (h d), (h d) e -> b e")
    >>> len(p.inputs), p.names, p.output.names
    (2, ('b', 'h', 'd', 'e'), ('b', 'e'))
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"an einsum pattern must be a str, not {type(text).__name__}")
    return parse_cached("einsum", text)


def _parse_einsum_uncached(text: str, op: None = None) -> EinsumPattern:
    parser = get_parser("einsum")
    from .parsing import LARK_ERRORS  # bound once the parser exists

    try:
        tree = parser.parse(text)
    except LARK_ERRORS as error:
        raise syntax_error(error, text) from None
    inputs: list[Side] = []
    output: Side | None = None
    pending: Any = None  # the side tree waiting for the token that follows it
    for child in tree.children:
        if hasattr(child, "children"):
            pending = child
        elif child.type in ("COMMA", "ARROW"):
            inputs.append(_build_side(pending, text, empty_at=child.start_pos))
            if child.type == "ARROW":
                arrow_end = child.end_pos
    output = _build_side(pending, text, empty_at=arrow_end)
    pattern = EinsumPattern(text, tuple(inputs), output)
    _check_pattern(pattern)
    return pattern


register_kind("einsum", _parse_einsum_uncached)  # cached in parsing's one parse cache


def _build_side(tree: Any, text: str, empty_at: int) -> Side:
    """A Side from lark's ``side`` tree; an empty side spans nothing at ``empty_at``."""
    groups: list[Group] = []
    previous: Any = None  # the previous bare token, for the spacing check
    for node in tree.children:
        if hasattr(node, "children"):  # a parenthesised group: LPAR member* RPAR
            tokens = node.children
            members = []
            for token in tokens[1:-1]:
                _check_spacing(previous, token, text)
                previous = token
                member = _member(token, text)
                if member is not None:  # a 1 inside a group is dropped, as einops does
                    members.append(member)
            previous = None
            groups.append(Group(tuple(members), True, tokens[0].start_pos, tokens[-1].end_pos))
        else:
            _check_spacing(previous, node, text)
            previous = node
            member = _member(node, text)
            members = () if member is None else (member,)
            groups.append(Group(members, False, node.start_pos, node.end_pos))
    if groups:
        return Side(tuple(groups), groups[0].start, groups[-1].end)
    return Side((), empty_at, empty_at)


def _check_spacing(previous: Any, token: Any, text: str) -> None:
    # "a..." lexes as `a` then `...`; einops reads one identifier "a…" and rejects it.
    if previous is not None and previous.end_pos == token.start_pos:
        raise pattern_error(
            f"expected a space between {previous.value!r} and {token.value!r}",
            text, previous.start_pos, token.end_pos,
        )


def _member(token: Any, text: str) -> Member | None:
    """The AST node of one NAME / INT / ELLIPSIS token; None for the number 1."""
    if token.type == "NAME":
        return AxisName(token.value, token.start_pos, token.end_pos)
    if token.type == "ELLIPSIS":
        return EllipsisAxis(token.start_pos, token.end_pos)
    if len(token.value) > 18:  # also keeps int() below Python's digit limit
        raise pattern_error(
            f"anonymous axis of {len(token.value)} digits; expected an axis length of at "
            "most 18 digits", text, token.start_pos, token.end_pos,
        )
    value = int(token.value)
    return None if value == 1 else AnonymousAxis(value, token.start_pos, token.end_pos)


def _check_pattern(pattern: EinsumPattern) -> None:
    """Everything a pattern must satisfy before shapes are known, in text order."""
    text = pattern.text
    sides = [(f"input {k}", side) for k, side in enumerate(pattern.inputs)]
    for label, side in [*sides, ("the output", pattern.output)]:
        seen: set[str] = set()
        ellipsis_seen = False
        for group in side.groups:
            for member in group.members:
                kind = type(member)
                if kind is AxisName:
                    reason = invalid_name_reason(member.name)
                    if reason is not None and member.name != "_":  # einops allows `_` here
                        raise pattern_error(f"invalid axis name {member.name!r}: {reason}",
                                            text, member.start, member.end)
                    if label == "the output" and member.name in seen:
                        raise pattern_error(
                            f"axis {member.name!r} appears twice in the output; each output "
                            "axis appears once (an input may repeat an axis to take a diagonal)",
                            text, member.start, member.end,
                        )
                    seen.add(member.name)
                elif kind is AnonymousAxis:
                    raise pattern_error(
                        f"anonymous axis {member.value} is not allowed in einsum (only 1 is); "
                        "name the axis and pass its length as a keyword",
                        text, member.start, member.end,
                    )
                else:
                    if ellipsis_seen:
                        raise pattern_error(
                            f"'...' appears twice in {label}; a side may hold one ellipsis "
                            "at most", text, member.start, member.end,
                        )
                    ellipsis_seen = True
                    if label != "the output" and group.bracketed:
                        raise pattern_error(
                            f"'...' inside parentheses in {label}; it may be grouped only in "
                            "the output", text, member.start, member.end,
                        )
    known = set(pattern.names)
    for group in pattern.output.groups:
        for member in group.members:
            if type(member) is AxisName and member.name not in known:
                raise pattern_error(
                    f"axis {member.name!r} appears only in the output; every output axis "
                    "must appear in some input",
                    text, member.start, member.end,
                )
    if len(known) > len(_LETTERS):
        extra = pattern.names[len(_LETTERS)]
        first = next(m for side in pattern.inputs for g in side.groups for m in g.members
                     if type(m) is AxisName and m.name == extra)
        raise pattern_error(
            f"too many axes: the pattern has {len(known)} distinct axes, numpy.einsum "
            f"names at most {len(_LETTERS)} (one letter each); {extra!r} is the "
            f"{len(_LETTERS) + 1}rd", text, first.start, first.end,
        )


# --------------------------------------------------------------------------- plan


@record
class EinsumStep:
    """One row of an einsum plan: a step of an input's or the output's rearrange, or the
    contraction itself."""

    op: str          # split | permute | copy | merge (rearrange steps) | einsum
    on: str          # "x0", "x1", ...: an input; "out": the contraction and its result
    layout: Layout   # the layout this step produces
    kind: str        # view | copy | new (a freshly computed array)
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "on": self.on, "kind": self.kind,
                "shape": list(self.layout.shape), "strides": list(self.layout.strides),
                "offset": self.layout.offset, "reason": self.reason}


@record
class InputPreparation:
    """The ``rearrange`` that brings one input to its elementary axes."""

    pattern: str   # display text, in the einsum's own names (explain, to_dict): the
                   # planner built its recipe as objects, and nothing parses this
    plan: Plan     # rearrange's plan for this input: splits and unit dims dropped, a view


@record
class EinsumPlan(JsonDump):
    """The calls ``einsum`` makes for these inputs: printable, serialisable, lowerable.

    Invariant: ``contraction`` is C-contiguous (numpy.einsum writes into a fresh array)
    and ``output_pattern`` only composes its consecutive axes and inserts unit dims, so
    the result is a view of that fresh array and never shares memory with an input.
    """

    pattern: str
    inputs: tuple[Layout, ...]                 # each input's layout (strides in elements,
    input_dtypes: tuple[str | None, ...]       # or bytes: see stride_units)
    stride_units: tuple[str, ...]
    dtype: str | None                          # the result's: numpy's promotion of the inputs'
    itemsize: int | None
    output: Layout
    axis_lengths: tuple[tuple[str, int], ...]  # every named axis, first-appearance order
    ellipsis_shape: tuple[int, ...] | None     # what '...' stands for in the output (None: no '...')
    summed: tuple[str, ...]                    # axes absent from the output
    letters: tuple[tuple[str, str], ...]       # (letter, axis name) of the numpy subscripts
    preparations: tuple[InputPreparation | None, ...]  # per input; None: used as it is
    subscripts: str                            # numpy.einsum's, over elementary axes
    path: tuple[tuple[int, ...], ...] | None   # numpy's contraction order; None: optimize=False
    cost: int                                  # multiply-adds of the naive loop
    contraction: Layout                        # numpy.einsum's result (C-contiguous)
    output_pattern: str | None                 # rearrange of that result; None: it is the result
    output_plan: Plan | None
    steps: tuple[EinsumStep, ...]
    engine: str = "numpy.einsum"               # the call that contracts: numpy's, or a
                                               # foreign array library's (its backend says)

    op = "einsum"

    # ------------------------------------------------------------------ summary

    @property
    def is_view(self) -> bool:
        """Always False: an einsum computes a new array."""
        return False

    @property
    def copies(self) -> int:
        return sum(step.kind == "copy" for step in self.steps)

    @property
    def views(self) -> int:
        return sum(step.kind == "view" for step in self.steps)

    @property
    def optimize(self) -> Any:
        """What ``numpy.einsum(optimize=...)`` receives."""
        return False if self.path is None else ["einsum_path", *self.path]

    # ------------------------------------------------------------------ rendering

    def __str__(self) -> str:
        return _format_plan(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description of the plan."""
        return {
            "op": "einsum",
            "pattern": self.pattern,
            "dtype": self.dtype,
            "itemsize": self.itemsize,
            "inputs": [
                {**layout_dict(layout), "dtype": dtype, "stride_unit": unit}
                for layout, dtype, unit in zip(self.inputs, self.input_dtypes, self.stride_units)
            ],
            "output": layout_dict(self.output),
            "axis_lengths": dict(self.axis_lengths),
            "ellipsis_shape": None if self.ellipsis_shape is None else list(self.ellipsis_shape),
            "summed": list(self.summed),
            "letters": dict(self.letters),
            "input_patterns": [None if p is None else p.pattern for p in self.preparations],
            "subscripts": self.subscripts,
            "optimize": False if self.path is None else ["einsum_path", *map(list, self.path)],
            "cost": self.cost,
            "output_pattern": self.output_pattern,
            "engine": self.engine,
            "is_view": False,
            "views": self.views,
            "copies": self.copies,
            "steps": [step.to_dict() for step in self.steps],
        }

    def to_svg(self) -> str:
        """A picture of the plan as SVG text: each input and its rearrange into
        elementary axes, the contraction's fresh array and the output's view of it
        (see :meth:`rearrange.Plan.to_svg`)."""
        from .picture import einsum_svg

        return einsum_svg(self)

    def to_source(self, library: str = "numpy", names: Sequence[str] | None = None) -> str:
        """The same computation as one expression of plain library calls on the inputs
        ``names`` (default ``x0``, ``x1``, ...): ``np.einsum`` or ``torch.einsum`` with
        the reshapes around it.

        Each input's rearrange only splits dims and drops unit dims, so it is one
        ``reshape`` (numpy) or ``view`` (torch); the output's only merges and inserts unit
        dims, so it is one ``reshape`` (torch's einsum may return a non-contiguous tensor).
        """
        if library not in ("numpy", "torch"):
            raise RearrangeError(f"to_source: library must be 'numpy' or 'torch', got {library!r}")
        if names is None:
            names = [f"x{k}" for k in range(len(self.inputs))]
        names = list(names)
        if len(names) != len(self.inputs) or not all(isinstance(n, str) for n in names):
            raise ArgumentTypeError(
                f"to_source: names must be {len(self.inputs)} str, one per input; got {names!r}")
        verb = "reshape" if library == "numpy" else "view"
        operands = [name if prep is None else f"{name}.{verb}({_shape_arg(prep.plan.output.shape)})"
                    for name, prep in zip(names, self.preparations)]
        form = matmul_form(self) if self.engine == f"{library}.matmul" else None
        if library == "numpy" and form is not None:
            if self.output_pattern is not None and form.output_order is None:
                form = dataclasses.replace(form, result_shape=None)
            call = form.source(*operands, library="numpy")
            if form.output_order is not None:
                call = f"np.ascontiguousarray({call})"
        elif library == "numpy":
            extra = "" if self.path is None else f", optimize={self.optimize!r}"
            call = f"np.einsum({self.subscripts!r}, {', '.join(operands)}{extra})"
        elif form is not None:
            if self.output_pattern is not None and form.output_order is None:
                form = dataclasses.replace(form, result_shape=None)  # the reshape below does it
            call = form.source(*operands)
        else:
            call = f"torch.einsum({self.subscripts!r}, {', '.join(operands)})"
        if self.output_pattern is not None:
            call += f".reshape({_shape_arg(self.output.shape)})"
        return call


@record
class _Operand:
    """What planning knows of one input: its layout and dtype, and, for a foreign array,
    its backend's account of copies bound to it (``describe_copy(plan, x, info)``), which
    its rearrange's plan goes through as ``backends.plan_for_array``'s does."""

    layout: Layout
    dtype: str | None
    itemsize: int | None
    unit: str
    describe_copy: Callable[[Plan], Plan] | None = None


@record
class _Occurrence:
    """One elementary axis of one input: a name in a group of an input side."""

    name: str
    operand: int
    dim: int          # the input dim whose group holds it
    bare: bool        # the group is this axis alone
    start: int
    end: int


def _plan(pattern: EinsumPattern, operands: Sequence[_Operand],
          axes_lengths: Mapping[str, Any]) -> EinsumPlan:
    """Bind a parsed pattern to its inputs; PatternError for anything that does not fit."""
    text = pattern.text
    if len(operands) != len(pattern.inputs):
        sides = len(pattern.inputs)
        raise pattern_error(
            f"the pattern describes {sides} input{'s' if sides != 1 else ''}, but "
            f"{len(operands)} tensor{'s were' if len(operands) != 1 else ' was'} given",
            text, pattern.inputs[0].start, max(pattern.inputs[-1].end, pattern.inputs[0].start + 1),
        )
    dims = [_input_dims(side, operand.layout.ndim, k, text)
            for k, (side, operand) in enumerate(zip(pattern.inputs, operands))]
    ellipsis_shape = _ellipsis_shape(pattern, operands, dims)
    try:
        lengths = _solve_lengths(pattern, operands, dims, axes_lengths)
    except _UnknownLengths as unknown:
        fused = _fuse_unsplit_run(pattern, unknown.group, unknown.unknown)
        if fused is None:
            raise PatternError(str(unknown)) from None
        return _plan(fused, operands, axes_lengths)
    _check_keyword_lengths_kept(pattern, operands, dims, lengths, axes_lengths)

    # Letters in order of first appearance over the elementary axes, as einops assigns them.
    letter_of = {name: _LETTERS[k] for k, name in enumerate(pattern.names)}
    names = list(pattern.names)
    preparations = []
    input_subscripts = []
    steps: list[EinsumStep] = []
    for k, (side, operand) in enumerate(zip(pattern.inputs, operands)):
        preparation, kept, notes = _prepare_input(side, operand, lengths, text)
        preparations.append(preparation)
        input_subscripts.append("".join("..." if n is None else letter_of[n] for n in kept))
        if preparation is not None:
            for number, step in enumerate(preparation.plan.steps):
                reason = step.reason
                if notes and number == 0:
                    reason += "; " + "; ".join(notes)
                steps.append(EinsumStep(step.op, f"x{k}", step.layout,
                                        "copy" if step.is_copy else "view", reason))

    output_elements: list[str | None] = [
        None if type(m) is EllipsisAxis else m.name
        for group in pattern.output.groups for m in group.members
    ]
    subscripts = ",".join(input_subscripts) + "->" + "".join(
        "..." if n is None else letter_of[n] for n in output_elements)
    contraction_shape = tuple(
        length for n in output_elements
        for length in (ellipsis_shape if n is None else (lengths[n],)))
    contraction = Layout.contiguous(contraction_shape)

    summed = tuple(n for n in names if n not in output_elements)
    cost = math.prod(lengths[n] for n in names) * math.prod(ellipsis_shape)
    dtypes = [operand.dtype for operand in operands]
    dtype = itemsize = None
    if all(d is not None for d in dtypes):
        dtype, itemsize = _result_dtype(dtypes)  # type: ignore[arg-type]
    problem = size_problem(contraction_shape, itemsize or 1)
    if problem is not None:     # refused before numpy allocates (or refuses) it
        output = pattern.output
        raise pattern_error(f"no array can hold the result: {problem}", text, output.start,
                            max(output.end, output.start + 1))
    path = None
    if len(operands) > 1 and cost >= _OPTIMIZE_MIN_COST and _pairwise_dtype(dtype):
        path = _contraction_path(subscripts, preparations, operands)
    how = (f"optimize path {', '.join(map(str, path))}: {cost:,} multiply-adds naive"
           if path is not None else f"optimize=False: {cost:,} multiply-adds"
           + (f", below {_OPTIMIZE_MIN_COST:,}" if len(operands) > 1 else ""))
    sums = f"sum over {' '.join(summed)}" if summed else "no axis summed"
    steps.append(EinsumStep("einsum", "out", contraction, "new",
                            f"{subscripts!r}: {sums}; {how}"))

    output_pattern = output_plan = None
    output_layout = contraction
    if any(not g.members or (g.bracketed and (len(g.members) > 1 or _has_ellipsis(g)))
           for g in pattern.output.groups):
        recipe = _output_recipe(pattern.output, len(ellipsis_shape))
        output_pattern = recipe.pattern.text
        output_plan = calls.plan_recipe(recipe, contraction, {}, None, dtype, itemsize)
        output_layout = output_plan.output
        for step in output_plan.steps:
            steps.append(EinsumStep(step.op, "out", step.layout, "copy" if step.is_copy
                                    else "view", step.reason))
    return EinsumPlan(
        pattern=text,
        inputs=tuple(o.layout for o in operands),
        input_dtypes=tuple(dtypes),
        stride_units=tuple(o.unit for o in operands),
        dtype=dtype,
        itemsize=itemsize,
        output=output_layout,
        axis_lengths=tuple((n, lengths[n]) for n in names),
        ellipsis_shape=ellipsis_shape if pattern.output.has_ellipsis else None,
        summed=summed,
        letters=tuple((letter_of[n], n) for n in names),
        preparations=tuple(preparations),
        subscripts=subscripts,
        path=path,
        cost=cost,
        contraction=contraction,
        output_pattern=output_pattern,
        output_plan=output_plan,
        steps=tuple(steps),
    )


def _input_dims(side: Side, ndim: int, operand: int, text: str) -> list[Group | int]:
    """Per input dim: its group, or the index (0, 1, ...) of the ellipsis dim it is."""
    fixed = [g for g in side.groups if not _is_bare_ellipsis(g)]
    if side.has_ellipsis:
        if ndim < len(fixed):
            raise pattern_error(
                f"input {operand} has {ndim} dim{'s' if ndim != 1 else ''}, but its pattern "
                f"needs at least {len(fixed)} besides the ellipsis",
                text, side.start, max(side.end, side.start + 1),
            )
    elif ndim != len(side.groups):
        raise pattern_error(
            f"input {operand} has {ndim} dim{'s' if ndim != 1 else ''}, but its pattern "
            f"describes {len(side.groups)}: one group per dim is expected",
            text, side.start, max(side.end, side.start + 1),
        )
    dims: list[Group | int] = []
    for group in side.groups:
        if _is_bare_ellipsis(group):
            dims.extend(range(ndim - len(fixed)))
        else:
            dims.append(group)
    return dims


def _has_ellipsis(group: Group) -> bool:
    return any(type(m) is EllipsisAxis for m in group.members)


def _is_bare_ellipsis(group: Group) -> bool:
    return (not group.bracketed and len(group.members) == 1
            and type(group.members[0]) is EllipsisAxis)


def _ellipsis_member(side: Side) -> EllipsisAxis:
    return next(m for g in side.groups for m in g.members if type(m) is EllipsisAxis)


def _ellipsis_shape(pattern: EinsumPattern, operands: Sequence[_Operand],
                    dims: list[list[Group | int]]) -> tuple[int, ...]:
    """The dims '...' stands for in the output: the inputs' broadcast (numpy's rule:
    dims aligned from the right, size 1 broadcasting)."""
    text = pattern.text
    reversed_result: list[int] = []   # the broadcast so far, last dim first
    set_by: list[int] = []            # which input gave each of those dims its size
    shapes: dict[int, tuple[int, ...]] = {}
    for k, (side, operand) in enumerate(zip(pattern.inputs, operands)):
        if not side.has_ellipsis:
            continue
        shape = tuple(size for size, d in zip(operand.layout.shape, dims[k]) if type(d) is int)
        shapes[k] = shape
        member = _ellipsis_member(side)
        if shape and not pattern.output.has_ellipsis:
            raise pattern_error(
                f"'...' stands for {len(shape)} dim{'s' if len(shape) != 1 else ''} "
                f"{_fmt(shape)} of input {k}, but the output has no '...'; einsum sums only "
                "named axes: name these dims, or keep '...' in the output",
                text, member.start, member.end,
            )
        for position, size in enumerate(reversed(shape)):
            if position == len(reversed_result):
                reversed_result.append(size)
                set_by.append(k)
            elif reversed_result[position] == 1:
                reversed_result[position] = size
                set_by[position] = k
            elif size not in (1, reversed_result[position]):
                other = set_by[position]
                raise pattern_error(
                    f"'...' stands for dims {_fmt(shapes[other])} in input {other} and "
                    f"{_fmt(shape)} in input {k}, which do not broadcast",
                    text, member.start, member.end,
                )
    return tuple(reversed(reversed_result))


def _fmt(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"


def _occurrences(pattern: EinsumPattern, dims: list[list[Group | int]]) -> list[_Occurrence]:
    found = []
    for k, groups in enumerate(dims):
        for dim, group in enumerate(groups):
            if type(group) is int:
                continue
            for member in group.members:
                found.append(_Occurrence(member.name, k, dim, len(group.members) == 1
                                         and not group.bracketed, member.start, member.end))
    return found


def _solve_lengths(pattern: EinsumPattern, operands: Sequence[_Operand],
                   dims: list[list[Group | int]], axes_lengths: Mapping[str, Any]) -> dict[str, int]:
    """The length of every named axis, from the given lengths and the inputs' shapes.

    A bare dim of size other than 1 fixes its axis; sizes that differ are an error.
    Composed groups with one unknown axis are then solved until nothing changes; only
    then do bare size-1 dims (which broadcast against any length) fix what is left.
    """
    text = pattern.text
    names = pattern.names
    lengths: dict[str, int] = {}
    source: dict[str, str] = {}  # axis -> where its length came from, for messages
    for name, length in axes_lengths.items():
        if name not in names:
            raise PatternError(
                f"axis length given for {name!r}, which is not an axis of the pattern's "
                f"inputs (its axes: {', '.join(names) or 'none'})")
        if isinstance(length, bool) or not hasattr(length, "__index__") or length.__index__() <= 0:
            first = next(m for side in pattern.inputs for g in side.groups for m in g.members
                         if type(m) is AxisName and m.name == name)
            raise pattern_error(f"axis length {name}={length!r} must be a positive integer",
                                text, first.start, first.end)
        lengths[name] = length.__index__()
        source[name] = f"{name}={lengths[name]} was given"

    occurrences = _occurrences(pattern, dims)
    _check_diagonals([o for o in occurrences if o.bare], operands, lengths, text)
    for occ in occurrences:
        size = operands[occ.operand].layout.shape[occ.dim]
        if not occ.bare or size == 1:
            continue
        known = lengths.get(occ.name)
        if known is None:
            lengths[occ.name] = size
            source[occ.name] = f"it has length {size} in input {occ.operand}"
        elif known != size:
            raise pattern_error(
                f"axis {occ.name!r} has length {size} in input {occ.operand}, but "
                f"{source[occ.name]}; lengths must agree (or be 1, which broadcasts)",
                text, occ.start, occ.end,
            )

    composed = [(k, dim, group) for k, groups in enumerate(dims)
                for dim, group in enumerate(groups)
                if type(group) is not int and (group.bracketed and group.members)]
    _solve_compositions(composed, operands, lengths, source, text)
    for occ in occurrences:
        if occ.bare and occ.name not in lengths:
            lengths[occ.name] = 1
            source[occ.name] = f"it has length 1 in input {occ.operand}"
    _solve_compositions(composed, operands, lengths, source, text)

    for k, dim, group in composed:
        size = operands[k].layout.shape[dim]
        unknown = [m.name for m in group.members if m.name not in lengths]
        if len(unknown) == 1:  # the others' product is 0: any length would fit
            raise pattern_error(
                f"cannot infer the length of {unknown[0]} in {_group_text(group)} from dim "
                f"{dim} of input {k} (size {size}): the other axes have no elements; pass "
                f"{unknown[0]}=", text, group.start, group.end,
            )
        if unknown:
            missing = ", ".join(f"{n}=" for n in dict.fromkeys(unknown))
            error = pattern_error(
                f"cannot infer the lengths of {_group_text(group)} from dim {dim} of input {k} "
                f"(size {size}): {len(unknown)} axes are unknown; pass all but one of them "
                f"({missing}...)",
                text, group.start, group.end,
            )
            raise _UnknownLengths(str(error), group, frozenset(unknown))
        product = math.prod(lengths[m.name] for m in group.members)
        if product != size:
            given = ", ".join(f"{m.name}={lengths[m.name]}" for m in group.members)
            raise pattern_error(
                f"dim {dim} of input {k} has size {size}, but {_group_text(group)} with "
                f"{given} has {product} elements",
                text, group.start, group.end,
            )
    for k, groups in enumerate(dims):
        for dim, group in enumerate(groups):
            size = operands[k].layout.shape[dim]
            if type(group) is not int and not group.members and size != 1:
                raise pattern_error(
                    f"a unit axis matches dim {dim} of input {k}, which has size {size} "
                    "(expected 1)", text, group.start, group.end,
                )
    _check_diagonals(occurrences, operands, lengths, text)
    return lengths


class _UnknownLengths(PatternError):
    """A composed group whose axes' lengths no input or keyword determines."""

    def __init__(self, message: str, group: Group, unknown: frozenset[str]) -> None:
        super().__init__(message)
        self.group = group
        self.unknown = unknown


def _fuse_unsplit_run(pattern: EinsumPattern, group: Group,
                      unknown: frozenset[str]) -> EinsumPattern | None:
    """The pattern with the unknown axes of ``group`` fused into one axis, when no side
    ever separates them; None when some side does (then their lengths matter).

    ``b (h d), (h d) e -> b e`` needs neither ``h`` nor ``d``: both inputs hold them as the
    same run ``h d`` inside a group and the output drops both, so ``(h d)`` acts as one
    axis. The fused axis is named after the run, ``(h d)``.
    """
    names = [m.name if type(m) is AxisName else None for m in group.members]
    positions = [i for i, name in enumerate(names) if name in unknown]
    run = tuple(names[positions[0]:positions[-1] + 1])
    if len(positions) != len(run) or len(set(run)) != len(run):
        return None  # the unknown axes are not one contiguous run of distinct names

    def fuse(side: Side) -> Side | None:
        groups = []
        for g in side.groups:
            members = [m.name if type(m) is AxisName else None for m in g.members]
            hits = [i for i, name in enumerate(members) if name in run]
            if not hits:
                groups.append(g)
                continue
            first = hits[0]
            if (not g.bracketed or len(hits) != len(run)
                    or tuple(members[first:first + len(run)]) != run):
                return None
            fused = AxisName("(" + " ".join(run) + ")", g.members[first].start,
                             g.members[first + len(run) - 1].end)
            groups.append(Group((*g.members[:first], fused, *g.members[first + len(run):]),
                                True, g.start, g.end))
        return Side(tuple(groups), side.start, side.end)

    sides = [fuse(side) for side in (*pattern.inputs, pattern.output)]
    if any(side is None for side in sides):
        return None
    return EinsumPattern(pattern.text, tuple(sides[:-1]), sides[-1])  # type: ignore[arg-type]


def _solve_compositions(composed: list, operands: Sequence[_Operand], lengths: dict[str, int],
                        source: dict[str, str], text: str) -> None:
    """Infer the one unknown axis of composed groups, repeatedly, until none is left to
    infer (an axis inferred in one input may unlock a group of another)."""
    progress = True
    while progress:
        progress = False
        for k, dim, group in composed:
            unknown = [m for m in group.members if m.name not in lengths]
            if len(unknown) != 1:
                continue
            size = operands[k].layout.shape[dim]
            known = math.prod(lengths[m.name] for m in group.members if m.name in lengths)
            if known == 0:
                continue  # any length fits a group that already has no elements
            if size % known:
                raise pattern_error(
                    f"dim {dim} of input {k} has size {size}, which {_group_text(group)} cannot "
                    f"split: {size} is not divisible by {known}",
                    text, group.start, group.end,
                )
            member = unknown[0]
            lengths[member.name] = size // known
            source[member.name] = f"it has length {size // known} in input {k}"
            progress = True


def _check_diagonals(occurrences: list[_Occurrence], operands: Sequence[_Operand],
                     lengths: dict[str, int], text: str) -> None:
    """An axis repeated within one input takes a diagonal: no broadcasting there."""
    first: dict[tuple[int, str], tuple[int, _Occurrence]] = {}
    for occ in occurrences:
        size = operands[occ.operand].layout.shape[occ.dim] if occ.bare else lengths[occ.name]
        seen = first.setdefault((occ.operand, occ.name), (size, occ))
        if seen[0] != size:
            raise pattern_error(
                f"axis {occ.name!r} appears twice in input {occ.operand} with lengths "
                f"{seen[0]} and {size}; a repeated axis takes the diagonal, which needs "
                "equal lengths", text, occ.start, occ.end,
            )


def _group_text(group: Group) -> str:
    names = [m.name for m in group.members]
    return names[0] if len(names) == 1 and not group.bracketed else "(" + " ".join(names) + ")"


# One dim of a rearrange the planner builds: whether it is bracketed, and its members,
# each an axis of that rearrange (an index into its display names) or None for '...'.
# A bare dim with no members is a unit dim, shown as ``1``.
_BuiltGroup = tuple[bool, tuple[int | None, ...]]


def _built_recipe(names: Sequence[str], left: Sequence[_BuiltGroup],
                  right: Sequence[_BuiltGroup], ellipsis_dims: int,
                  fixed: Mapping[int, int]) -> Recipe:
    """The recipe of the rearrange ``left -> right``, built as objects: nothing is
    written to be parsed, so its axes may bear any einsum name (``_``, a fused ``(h d)``,
    or one name twice: the two occurrences of a diagonal are two axes).

    Axis ``i`` of this rearrange is shown as ``names[i]``; ``left`` holds each axis once,
    in order ``0, 1, ...``, with ``...`` only as a dim of its own; ``right`` holds each
    axis once; ``...`` stands for ``ellipsis_dims`` dims (named ``…0``, ``…1``, ... as
    :func:`rearrange.recipe.build_recipe` names them); ``fixed`` gives the lengths of
    axes by index, which the recipe takes as it takes the numbers of ``(h 2)``. The
    pattern's text is a rendering for explain and messages, its nodes' spans into it.
    """
    pieces: list[str] = []
    position = 0

    def write(piece: str) -> tuple[int, int]:
        nonlocal position
        pieces.append(piece)
        position += len(piece)
        return position - len(piece), position

    def side(groups: Sequence[_BuiltGroup]) -> Side:
        empty_at = position
        built = []
        for k, (bracketed, members) in enumerate(groups):
            if k:
                write(" ")
            start = position
            write("(" if bracketed else "")
            nodes: list[Member] = []
            for j, member in enumerate(members):
                if j:
                    write(" ")
                if member is None:
                    nodes.append(EllipsisAxis(*write("...")))
                else:
                    nodes.append(AxisName(names[member], *write(names[member])))
            write(")" if bracketed else "" if members else "1")
            built.append(Group(tuple(nodes), bracketed, start, position))
        return Side(tuple(built), built[0].start, built[-1].end) if built \
            else Side((), empty_at, empty_at)

    left_side = side(left)
    write(" -> ")
    right_side = side(right)
    axes: list[ElementaryAxis] = []
    index: dict[int, int] = {}      # this rearrange's axis -> its recipe axis
    dots: list[int] = []            # the recipe axes '...' stands for
    input_groups: list[tuple[int, ...]] = []
    input_spans: list[tuple[int, int]] = []
    for (_, members), group in zip(left, left_side.groups):
        if members == (None,):       # '...': a dim for each of its axes
            for k in range(ellipsis_dims):
                dots.append(len(axes))
                axes.append(ElementaryAxis(f"{ELLIPSIS_PREFIX}{k}", group.start, group.end))
                input_groups.append((dots[-1],))
                input_spans.append((group.start, group.end))
            continue
        group_axes = []
        for member, node in zip(members, group.members):
            assert member is not None   # '...' is a dim of its own on the left
            index[member] = len(axes)
            group_axes.append(len(axes))
            axes.append(ElementaryAxis(names[member], node.start, node.end))
        input_groups.append(tuple(group_axes))
        input_spans.append((group.start, group.end))
    output_groups: list[tuple[int, ...]] = []
    output_spans: list[tuple[int, int]] = []
    for (bracketed, members), group in zip(right, right_side.groups):
        axes_of = [dots if m is None else [index[m]] for m in members]
        if bracketed or not members or members[0] is not None:
            output_groups.append(tuple(i for found in axes_of for i in found))
            output_spans.append((group.start, group.end))
        else:                       # a bare '...': a dim for each of its axes
            output_groups.extend((i,) for i in dots)
            output_spans.extend((group.start, group.end) for _ in dots)
    return Recipe(
        pattern=TransformPattern("".join(pieces), left_side, right_side),
        ndim=len(input_groups),
        axes=tuple(axes),
        input_groups=tuple(input_groups),
        output_groups=tuple(output_groups),
        input_spans=tuple(input_spans),
        output_spans=tuple(output_spans),
        fixed_lengths=tuple((index[axis], length) for axis, length in fixed.items()),
    )


def _prepare_input(side: Side, operand: _Operand, lengths: dict[str, int], text: str,
                   ) -> tuple[InputPreparation | None, list[str | None], list[str]]:
    """The rearrange of one input to its elementary axes (None when it has them already),
    the elementary axes it keeps in order (None for '...'), and notes on the broadcast
    dims it drops."""
    shape = operand.layout.shape
    ellipsis_dims = len(shape) - sum(1 for g in side.groups if not _is_bare_ellipsis(g))
    names: list[str] = []           # the rearrange's axes, in order: their einsum names
    left: list[_BuiltGroup] = []
    fixed: dict[int, int] = {}      # the lengths that split the groups, by axis
    kept: list[str | None] = []
    notes: list[str] = []
    changes = False
    dim = 0
    for group in side.groups:
        if _is_bare_ellipsis(group):
            left.append((False, (None,)))
            kept.append(None)
            dim += ellipsis_dims
            continue
        size = shape[dim]
        dim += 1
        if not group.members:  # a unit dim: rearrange drops it
            left.append((False, ()))
            changes = True
            continue
        if not group.bracketed or len(group.members) == 1:  # `h` or `(h)`: no split
            name = group.members[0].name
            if not group.bracketed and size == 1 and lengths[name] != 1:
                # Broadcast: constant along this axis, so the input need not carry it.
                left.append((False, ()))
                notes.append(f"{name} has size 1 here and broadcasts to {lengths[name]}")
                changes = True
                continue
            left.append((False, (len(names),)))
            names.append(name)
            kept.append(name)
            continue
        members = []
        zero_length = []
        for member in group.members:
            if lengths[member.name]:
                fixed[len(names)] = lengths[member.name]
            else:  # left for the recipe to infer from the dim, as rearrange does a 0
                zero_length.append(member.name)
            members.append(len(names))
            names.append(member.name)
            kept.append(member.name)
        if len(zero_length) > 1:
            raise pattern_error(
                f"cannot split {_group_text(group)}: {' and '.join(zero_length)} have length "
                "0, and rearrange infers at most one unknown axis per group",
                text, group.start, group.end,
            )
        left.append((True, tuple(members)))
        changes = True
    if not changes:
        return None, kept, notes
    right = [(False, (axis,)) for _, axes in left for axis in axes]
    recipe = _built_recipe(names, left, right, ellipsis_dims, fixed)
    plan = calls.plan_recipe(recipe, operand.layout, {}, None, operand.dtype,
                             operand.itemsize, operand.unit)
    if operand.describe_copy is not None:
        plan = operand.describe_copy(plan)
    return InputPreparation(recipe.pattern.text, plan), kept, notes


def _check_keyword_lengths_kept(pattern: EinsumPattern, operands: Sequence[_Operand],
                                dims: list[list[Group | int]], lengths: dict[str, int],
                                axes_lengths: Mapping[str, Any]) -> None:
    """A length given as a keyword must be some input's: a size-1 dim broadcasts against
    another input's longer dim, never against a keyword alone (numpy could not express it).

    Lengths that come from the inputs are safe: an axis longer than 1 has a composed
    occurrence or a bare dim of its full length, and both stay in their input.
    """
    for name in axes_lengths:
        length = lengths[name]
        if length == 1:
            continue
        occurrences = [o for o in _occurrences(pattern, dims) if o.name == name]
        if any(not o.bare or operands[o.operand].layout.shape[o.dim] == length
               for o in occurrences):
            continue
        first = occurrences[0]
        raise pattern_error(
            f"axis {name!r} has length 1 in input {first.operand}, but {name}={length} was "
            f"given and no input has it at length {length}",
            pattern.text, first.start, first.end,
        )


def _output_recipe(output: Side, ellipsis_dims: int) -> Recipe:
    """The rearrange from numpy.einsum's elementary result (one dim per axis, ``...``'s
    dims in place) to the output's groups: it only composes consecutive dims and inserts
    unit dims."""
    names: list[str] = []
    left: list[_BuiltGroup] = []
    right: list[_BuiltGroup] = []
    for group in output.groups:
        members: list[int | None] = []
        for member in group.members:
            if type(member) is EllipsisAxis:
                members.append(None)
            else:
                members.append(len(names))
                names.append(member.name)
            left.append((False, (members[-1],)))
        if group.bracketed and members:
            right.append((True, tuple(members)))
        else:       # a bare axis, a bare '...', or a unit dim
            right.append((False, tuple(members)))
    return _built_recipe(names, left, right, ellipsis_dims, {})


def _pairwise_dtype(dtype: str | None) -> bool:
    """numpy's optimize path contracts through matmul: numbers only (not object, not
    bool, whose matmul is a logical or rather than einsum's sum)."""
    return dtype is None or calls.dtype_of(dtype).kind in "iufc"


def _result_dtype(dtypes: Sequence[str]) -> tuple[str, int]:
    """The result's dtype name and item size: numpy's promotion of the inputs' dtypes,
    or the one dtype numpy does not know (bfloat16, ...) that they all have."""
    if dtypes[0] in calls.NON_NUMPY_DTYPES and all(d == dtypes[0] for d in dtypes):
        return dtypes[0], calls.NON_NUMPY_DTYPES[dtypes[0]][0]
    try:
        # Mixed with a dtype numpy does not know, refused whether or not a library that
        # teaches numpy its name (ml_dtypes, imported by jax) happens to be loaded.
        if any(d in calls.NON_NUMPY_DTYPES for d in dtypes):
            raise TypeError(dtypes)
        result = np.result_type(*dtypes)
    except TypeError:
        raise ArgumentTypeError(
            f"einsum: the inputs' dtypes ({', '.join(dtypes)}) have no common dtype that "
            "numpy knows; give them one dtype") from None
    return result.name, result.itemsize


def _contraction_path(subscripts: str, preparations: Sequence[InputPreparation | None],
                      operands: Sequence[_Operand]) -> tuple[tuple[int, ...], ...]:
    """numpy's greedy contraction order, worked out from shapes alone: the operands are
    zero-stride stand-ins of the prepared inputs' shapes (no data is read)."""
    stand_ins = []
    for preparation, operand in zip(preparations, operands):
        shape = operand.layout.shape if preparation is None else preparation.plan.output.shape
        stand_ins.append(np.broadcast_to(np.zeros((), np.float64), shape))
    path, _ = np.einsum_path(subscripts, *stand_ins, optimize="greedy")
    return tuple(tuple(step) for step in path[1:])


# --------------------------------------------------------------------------- printing


def _format_plan(plan: EinsumPlan) -> str:
    """The explain table: a header (what, how big) and one row per step."""
    if plan.dtype is None:
        dtype = "unknown"
    else:
        dtype = f"{plan.dtype} ({plan.itemsize} byte{'s' if plan.itemsize != 1 else ''})"
    parsed = parse_einsum(plan.pattern)
    sides = [plan.pattern[side.start:side.end] for side in parsed.inputs]
    output_side = plan.pattern[parsed.output.start:parsed.output.end]
    shapes = [_fmt(layout.shape) for layout in (*plan.inputs, plan.output)]
    strides = [_fmt(layout.strides) for layout in (*plan.inputs, plan.output)]
    shape_width = max(map(len, shapes))
    stride_width = max(map(len, strides))
    lines = [f"einsum '{plan.pattern}'", f"  dtype    {dtype}"]
    for k, layout in enumerate(plan.inputs):
        unit = "" if plan.stride_units[k] == "elements" else " (strides in bytes)"
        what = plan.input_dtypes[k] or "unknown"
        lines.append(
            f"  {'x' + str(k):<7}  shape {shapes[k]:<{shape_width}}  strides "
            f"{strides[k]:<{stride_width}}  offset {layout.offset}{unit}  {what}  "
            f"'{sides[k]}'")
    lines.append(f"  output   shape {shapes[-1]:<{shape_width}}  strides "
                 f"{strides[-1]:<{stride_width}}  offset 0  {plan.dtype or 'unknown'}  "
                 f"'{output_side}'")
    axes = " ".join(f"{n}={l}" for n, l in plan.axis_lengths) or "(none)"
    if plan.ellipsis_shape is not None:
        axes += f"  ...={_fmt(plan.ellipsis_shape)}"
    lines.append(f"  axes     {axes}")
    if plan.letters and any(letter != name for letter, name in plan.letters):
        lines.append("  letters  " + " ".join(f"{letter}:{name}" for letter, name in plan.letters))
    views = plan.views
    copies = plan.copies
    lines.append(
        f"  result   a new array: {plan.engine}, {views} view step{'s' if views != 1 else ''}, "
        f"{copies} cop{'ies' if copies != 1 else 'y'}")
    rows = [("#", "step", "on", "shape", "strides", "kind", "reason")]
    for number, step in enumerate(plan.steps, 1):
        rows.append((str(number), step.op, step.on, _fmt(step.layout.shape),
                     _fmt(step.layout.strides), step.kind, step.reason))
    widths = [max(len(row[k]) for row in rows) for k in range(6)]
    lines.append("")
    for row in rows:
        cells = [row[k].ljust(widths[k]) for k in range(6)] + [row[6]]
        lines.append(("  " + "  ".join(cells)).rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------- cache


# Entries of the plan cache made here (through the door, rearrange.front.run):
# * ("einsum", backend module, pattern, per input backend.cache_key, axis lengths) ->
#   the plan's lowering (the backend's ``lower_einsum``; for backends without one, the
#   plan's rearranges and the library's einsum step by step): numpy's key holds each
#   input's shape, byte strides and dtype, a Tensor's its layout and dtype, a foreign
#   array's what its backend says (shape, dtype, and strides/device where the library
#   has them);
# * ("einsum-plan", backend module name, ...) -> the plan itself (torch, dask, array-API
#   inputs: explain shares it).
# The dtype is in the key because the runner's einsum and result type depend on it;
# the axis lengths are canonical (plain ints) before a key is built, so 3.0 or True
# never hit an entry made for 3 or 1; keys whose sizes are traced (SymInts,
# torch.jit.trace) are unhashable: those calls are never kept.


def _context(pattern: str, shapes: Sequence[tuple[int, ...]], axes_lengths: Mapping[str, Any]) -> str:
    lengths = "{" + ", ".join(f"{k}={v!r}" for k, v in axes_lengths.items()) + "}"
    described = ", ".join(str(tuple(s)) for s in shapes) or "none"
    return f"  while computing einsum with pattern '{shorten(pattern)}': input shapes {described}, " \
           f"axis lengths {lengths}"


def _plan_with_context(pattern: str, operands: Sequence[_Operand],
                       axes_lengths: Mapping[str, Any], numpy_data: bool = True) -> EinsumPlan:
    """The plan, PatternErrors with the call's context; ``numpy_data``: numpy contracts
    it (numpy arrays, Tensors, shapes), so a batched matrix product goes to matmul."""
    try:
        plan = _plan(parse_einsum(pattern), operands, axes_lengths)
        return with_numpy_matmul(plan) if numpy_data else plan
    except PatternError as error:
        shapes = [o.layout.shape for o in operands]
        raise PatternError(f"{error}\n{_context(pattern, shapes, axes_lengths)}") from None


# --------------------------------------------------------------------------- public API


def _split_arguments(arguments: tuple) -> tuple[list[Any], str]:
    """einops' calling convention: tensors first, the pattern string last."""
    if len(arguments) < 2:
        found = "no arguments" if not arguments else f"only one argument ({_kind(arguments[0])})"
        raise ArgumentTypeError(
            "rearrange.einsum takes at least two arguments: one or more tensors, followed by "
            f"the pattern, e.g. einsum(x, y, 'a b, b c -> a c'); got {found}")
    *tensors, pattern = arguments
    if not isinstance(pattern, str):
        where = next((k for k, t in enumerate(tensors) if isinstance(t, str)), None)
        hint = "" if where is None else f" (argument {where} is a str: put the pattern last)"
        raise ArgumentTypeError(
            "rearrange.einsum takes the tensors first and the pattern last; the last "
            f"argument must be the pattern string, got {_kind(pattern)}{hint}")
    return tensors, pattern


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return f"the str {value!r}"
    return f"{type(value).__module__}.{type(value).__name__}".replace("builtins.", "")


@overload
def einsum(x: ArrayT, pattern: str, /, **axes_lengths: int) -> ArrayT: ...
@overload
def einsum(x: ArrayT, y: ArrayT, pattern: str, /, **axes_lengths: int) -> ArrayT: ...
@overload
def einsum(x: ArrayT, y: ArrayT, z: ArrayT, pattern: str, /, **axes_lengths: int) -> ArrayT: ...
@overload
def einsum(*tensors_and_pattern: Any, **axes_lengths: int) -> Any: ...
def einsum(*tensors_and_pattern: Any, **axes_lengths: int) -> Any:
    """Sum of products over named axes: ``einsum(x, y, "b h w, h w c -> b c")``.

    Tensors come first and the pattern last, as in einops. Axis names are words, not
    letters; ``...`` stands for the same leading/trailing dims in every input that has
    it; an axis repeated within one input takes the diagonal; axes missing from the output
    are summed. Beyond einops, groups may be composed — ``"b (h d), (h d) e -> b e"``,
    ``"a b, b c -> (a c)"`` — and ``()`` or ``1`` are unit dims; pass as keywords the
    lengths that the shapes do not determine (``h=4``).

    Inputs are of one array type: numpy arrays (the result is a new numpy array, or a
    numpy scalar for a 0-d result, as numpy's einsum gives), ``rearrange.Tensor`` (a new
    Tensor), torch tensors (torch's einsum or matmul: autograd, devices, torch.compile),
    dask arrays (lazy) or array-API arrays (the namespace's einsum, or a broadcasting
    stand-in where it has none).

    >>> import numpy as np, rearrange as ra
    >>> x, w = np.ones((2, 12)), np.ones((12, 5))
    >>> ra.einsum(x, w, "b (h d), (h d) e -> b h e", h=3).shape
    (2, 3, 5)
    """
    runner = None
    if tensors_and_pattern and (not axes_lengths
                                or PLAIN_INT.issuperset(map(type, axes_lengths.values()))):
        # The warm paths: one key (_einsum_key's, written out), one lookup, the runner;
        # a miss goes through the door.
        pattern = tensors_and_pattern[-1]
        tensors = tensors_and_pattern[:-1]
        kind = type(tensors_and_pattern[0])
        if kind is _ndarray:
            key = ["einsum", ndarray, pattern]
            for tensor in tensors:
                if type(tensor) is not _ndarray:
                    break
                key.append((tensor.shape, tensor.strides, tensor.dtype))
            else:
                if len(key) > 3 and type(pattern) is str:
                    runner = PLANS.peek((*key, *axes_lengths.items()))
        elif type(pattern) is str and (backend := backends.by_type.get(kind)) is not None:
            # torch (and other foreign) tensors of one type: their backend's runner
            for tensor in tensors:
                if type(tensor) is not kind:
                    break
            else:
                # (traced sizes are unhashable: a miss, then the door)
                runner = PLANS.peek(("einsum", backend, pattern,
                                     *map(backend.cache_key, tensors), *axes_lengths.items()))
    if runner is None:
        tensors, pattern = _split_arguments(tensors_and_pattern)
        if type(pattern) is str and "[" in pattern:     # einx's brackets: the contracted axes
            from .along import einsum_pattern
            pattern = einsum_pattern(pattern)
        return front.run(EINSUM, tensors, pattern, axes_lengths)
    try:
        return runner(tensors)
    except (RearrangeError, MemoryError, RuntimeError) as error:
        raised = front.failure(EINSUM, error, pattern, tensors, axes_lengths, None)
        if raised is None:
            raise
        raise raised from None


# --------------------------------------------------------------------------- the door
# einsum as the door (rearrange.front.run) takes it.


def _einsum_inputs(tensors: list[Any]) -> tuple[Any, list[Any]]:
    """Inputs of one backend: numpy arrays (numpy scalars as 0-d arrays), Tensors, or
    one foreign type."""
    if not isinstance(tensors[0], (np.ndarray, np.generic, Tensor)):
        backend = backends.backend_for(tensors[0])
        if backend is not None:
            _one_type(backend, tensors)
            return backend, tensors
    arrays, as_tensor = _checked_inputs(tensors)
    return (tensor_backend if as_tensor else ndarray), arrays


def _einsum_key(backend: Any, tensors: Sequence[Any], pattern: str,
                axes_lengths: Mapping[str, Any], extras: Any) -> Any:
    if type(pattern) is not str:   # a str subclass: planned on every call
        return front.NOT_KEPT
    return ("einsum", backend, pattern, *map(backend.cache_key, tensors), *axes_lengths.items())


def _einsum_plan(backend: Any, tensors: Sequence[Any], pattern: str,
                 axes_lengths: Mapping[str, Any], extras: Any) -> EinsumPlan:
    """numpy arrays and Tensors: a plan over their strides and dtypes; a library's
    arrays: over their backend's account of them (:func:`_foreign_plan`)."""
    if backend is ndarray or backend is tensor_backend:
        return _plan_with_context(pattern, [_describe(t) for t in tensors], axes_lengths)
    return _foreign_plan(backend, tensors, pattern, axes_lengths)


def _einsum_lower(backend: Any, plan: EinsumPlan, tensors: Sequence[Any],
                  axes_lengths: Mapping[str, Any], extras: Any) -> Callable[[Any], Any]:
    lower_einsum = hook(backend, "lower_einsum")
    if lower_einsum is not None:
        return lower_einsum(plan)
    return functools.partial(_einsum_steps, backend, plan)


def _einsum_steps(backend: Any, plan: EinsumPlan, tensors: Sequence[Any]) -> Any:
    """einsum of a library's arrays without a lowering of the plan (dask, array API):
    each input's rearrange and the contraction, by the array's own library."""
    # Each rearrange's plan, lowered by the backend: its steps carry their shapes and
    # axis orders, so they run on any layout the library's einsum returns.
    operands = [t if p is None else backend.lower(p.plan, None, t)(t)
                for t, p in zip(tensors, plan.preparations or (None,) * len(tensors))]
    result = backend.einsum(plan.subscripts, *operands)
    if plan.output_plan is not None:
        result = backend.lower(plan.output_plan, None, result)(result)
    return result


def _einsum_traced(backend: Any, tensors: Sequence[Any], pattern: str,
                   axes_lengths: Mapping[str, Any], extras: Any) -> Callable[[Any], Any]:
    """einsum over traced sizes: the library's einsum over subscripts from the pattern
    and the ranks alone, after the backend asserts the sizes agree."""
    subscripts, checks = _traced_subscripts(pattern, tensors, axes_lengths)
    assert_sizes = hook(backend, "assert_sizes")

    def run(xs: Sequence[Any]) -> Any:
        if checks:
            assert_sizes(checks)
        return backend.einsum(subscripts, *xs)
    return run


def _einsum_context(error: RearrangeError, pattern: str, tensors: Sequence[Any],
                    axes_lengths: Mapping[str, Any], extras: Any) -> RearrangeError:
    if f"pattern '{shorten(pattern)}'" in str(error):
        return error
    shapes = [tuple(t.shape) for t in tensors]
    return type(error)(f"{error}\n{_context(pattern, shapes, axes_lengths)}")


#: einsum, as the door takes it.
EINSUM = front.Operation(name="einsum", parse_kind="einsum", inputs=_einsum_inputs,
                         key=_einsum_key, plan=_einsum_plan, lower=_einsum_lower,
                         context=_einsum_context, traced=front.any_traced,
                         lower_traced=_einsum_traced)


def _one_type(backend: Any, tensors: Sequence[Any]) -> None:
    """Every input is of ``backend``'s type."""
    for k, tensor in enumerate(tensors):
        if not backend.matches(tensor):
            raise ArgumentTypeError(
                f"rearrange.einsum takes inputs of one array type; argument 0 is "
                f"{_kind(tensors[0])}, argument {k} is {_kind(tensor)}")


def _traced_subscripts(pattern: str, tensors: Sequence[Any], axes_lengths: Mapping[str, Any]
                       ) -> tuple[str, list[SizeCheck]]:
    """The library einsum's subscripts for inputs whose sizes are traced (torch.compile,
    torch.export, torch.jit.trace): einops' subset of patterns — one axis name or ``...``
    per dim — whose subscripts follow from the pattern and the ranks alone, so no size is
    compared. Composed groups and unit dims need the sizes: refused with that reason.
    With them, the checks that the inputs agree on each named axis (:func:`_traced_checks`)."""
    parsed = parse_einsum(pattern)
    shapes = [tuple(t.shape) for t in tensors]
    try:
        if len(tensors) != len(parsed.inputs):
            sides = len(parsed.inputs)
            raise pattern_error(
                f"the pattern describes {sides} input{'s' if sides != 1 else ''}, but "
                f"{len(tensors)} tensor{'s were' if len(tensors) != 1 else ' was'} given",
                parsed.text, parsed.inputs[0].start, max(parsed.inputs[-1].end, parsed.inputs[0].start + 1))
        for side in (*parsed.inputs, parsed.output):
            for group in side.groups:
                if not _is_bare_ellipsis(group) and (len(group.members) != 1 or group.bracketed
                                                     and _has_ellipsis(group)):
                    raise pattern_error(
                        "with traced sizes (torch.compile, torch.export, torch.jit.trace) einsum "
                        "takes one axis name or '...' per dim, as einops does: composed groups "
                        "and unit dims are split by their sizes, which are not known yet; "
                        "rearrange the inputs first", parsed.text, group.start, group.end)
        if axes_lengths:
            raise PatternError(
                f"axis lengths ({', '.join(axes_lengths)}) only split composed groups, which "
                f"einsum over traced sizes does not take")
        dims = [_input_dims(side, len(shape), k, parsed.text)   # the ranks fit the pattern
                for k, (side, shape) in enumerate(zip(parsed.inputs, shapes))]
    except PatternError as error:
        raise PatternError(f"{error}\n{_context(pattern, shapes, axes_lengths)}") from None
    letter_of = {name: _LETTERS[k] for k, name in enumerate(parsed.names)}

    def side_subscripts(side: Side) -> str:
        return "".join("..." if _is_bare_ellipsis(g) or type(g.members[0]) is EllipsisAxis
                       else letter_of[g.members[0].name] for g in side.groups)
    subscripts = ",".join(map(side_subscripts, parsed.inputs)) + "->" + side_subscripts(parsed.output)
    return subscripts, _traced_checks(pattern, parsed, dims, shapes)


def _traced_checks(pattern: str, parsed: EinsumPattern, dims: list[list[Group | int]],
                   shapes: list[tuple[Any, ...]]) -> list[SizeCheck]:
    """That the inputs agree on each named axis, as :func:`_check_diagonals` and
    :func:`_solve_lengths` check it and word their errors (every group here is one
    name): an axis repeated in one input has one length; across inputs, every length
    of an axis that is not 1 is the first such one. A symbolic size is taken not to be
    1, as dynamo and torch.export take a dynamic size to be (they specialise 0 and 1);
    the ellipsis's dims are left to the library's einsum, which broadcasts them."""
    text = parsed.text

    def worded(why: Callable[..., str], start: int, end: int) -> Callable[..., str]:
        def message(call: list[tuple[Any, ...]]) -> str:
            return f"{pattern_error(why(call), text, start, end)}\n{_context(pattern, call, {})}"
        return message

    checks: list[SizeCheck | None] = []
    first: dict[tuple[int, str], _Occurrence] = {}
    occurrences = _occurrences(parsed, dims)
    for occ in occurrences:
        seen = first.setdefault((occ.operand, occ.name), occ)
        if seen is not occ:
            checks.append(shapes_check(
                PatternError, shapes[occ.operand][occ.dim], "==", shapes[seen.operand][seen.dim],
                shapes, worded(lambda call, occ=occ, seen=seen: (
                    f"axis {occ.name!r} appears twice in input {occ.operand} with lengths "
                    f"{call[seen.operand][seen.dim]} and {call[occ.operand][occ.dim]}; a "
                    "repeated axis takes the diagonal, which needs equal lengths"),
                    occ.start, occ.end)))
    source: dict[str, _Occurrence] = {}
    for occ in occurrences:
        size = shapes[occ.operand][occ.dim]
        if not is_symbolic(size) and size == 1:
            continue        # broadcasts against any length
        seen = source.setdefault(occ.name, occ)
        if seen.operand != occ.operand:
            checks.append(shapes_check(
                PatternError, size, "==", shapes[seen.operand][seen.dim], shapes,
                worded(lambda call, occ=occ, seen=seen: (
                    f"axis {occ.name!r} has length {call[occ.operand][occ.dim]} in input "
                    f"{occ.operand}, but it has length {call[seen.operand][seen.dim]} in input "
                    f"{seen.operand}; lengths must agree (or be 1, which broadcasts)"),
                    occ.start, occ.end)))
    return [check for check in checks if check is not None]


def _foreign_plan(backend: Any, tensors: Sequence[Any], pattern: str,
                  axes_lengths: Mapping[str, Any]) -> EinsumPlan:
    """The plan for foreign inputs (all of ``backend``'s type), with the backend's
    account of the contraction (``describe_einsum``) when it has one."""
    key = ("einsum-plan", backend.__name__, pattern, *map(backend.cache_key, tensors),
           *axes_lengths.items())
    plan = PLANS.get(key)
    if plan is None:
        describe_copy = hook(backend, "describe_copy")
        operands = []
        for tensor in tensors:
            info = backend.describe(tensor)
            operands.append(_Operand(
                info.layout, _numpy_name(info.dtype), info.itemsize, "elements",
                functools.partial(_described, describe_copy, x=tensor, info=info)))
        plan = _plan_with_context(pattern, operands, axes_lengths, numpy_data=False)
        plan = hook(backend, "describe_einsum")(plan, tensors)
        PLANS.put(key, plan)
    return plan


def _described(describe_copy: Callable[..., Plan], plan: Plan, x: Any, info: Any) -> Plan:
    return describe_copy(plan, x, info)


def with_engine(plan: EinsumPlan, engine: str, how: str) -> EinsumPlan:
    """``plan`` contracted by ``engine`` (a foreign library's einsum, or a stand-in for
    it) instead of numpy.einsum: the header names it, the contraction step says
    ``how`` it runs, and numpy's contraction path (which ``engine`` does not take) goes."""
    sums = f"sum over {' '.join(plan.summed)}" if plan.summed else "no axis summed"
    reason = f"{plan.subscripts!r}: {sums}; {how}"
    steps = tuple(dataclasses.replace(step, reason=reason) if step.op == "einsum" else step
                  for step in plan.steps)
    return dataclasses.replace(plan, engine=engine, path=None, steps=steps)


# numpy's matmul runs BLAS (its threads) for these dtypes; its other loops are plain C.
_BLAS_DTYPES = frozenset({"float32", "float64", "complex64", "complex128"})


def with_numpy_matmul(plan: EinsumPlan) -> EinsumPlan:
    """``plan`` contracted by ``numpy.matmul`` where it is a batched matrix product of
    two inputs of one BLAS dtype worth BLAS's start-up (the cost at which numpy's optimize
    path would contract through BLAS too): numpy.einsum's optimize path hands a product
    with batch axes to its own C loop, one thread, ~10x slower than BLAS (#39). Numerics
    are BLAS's, as they are on numpy's optimize path."""
    if plan.path is None or plan.dtype not in _BLAS_DTYPES \
            or any(d != plan.dtype for d in plan.input_dtypes):
        return plan
    if len(plan.inputs) != 2:
        return _with_compiled_steps(plan)
    form = matmul_form(plan)
    if form is None:
        return plan
    how = form.describe(dict(plan.letters), "numpy")
    if _compiled_product_takes(plan, form):
        how += ("; where the kernel is built for AVX-512, in its place the compiled "
                "batched product (kernel/gemm.py: register tiles, the summed axis inside "
                "each) once its runner is ready, for exact, aligned, native-order "
                "ndarrays whose strides are whole elements (numpy.matmul until then and "
                "with REARRANGE_JIT=off)")
    return with_engine(plan, "numpy.matmul", how)


def _with_compiled_steps(plan: EinsumPlan) -> EinsumPlan:
    """``plan`` with its contraction's words naming the steps of numpy's path that the
    numpy lowering runs on the compiled batched product where the kernel is built for
    AVX-512 (backends/ndarray: the path run step by step, ``step_product`` and
    ``compiled_product_takes`` on each two-operand step, at 64-byte vectors: the same
    words on every machine); ``plan`` itself where there is none."""
    from .backends.ndarray import (PAIRWISE_MIN_BYTES, compiled_product_takes,
                                   pairwise_steps, step_product)

    if math.prod(plan.contraction.shape) * (plan.itemsize or 0) < PAIRWISE_MIN_BYTES:
        return plan
    steps = pairwise_steps(plan.subscripts, plan.path)
    if steps is None:
        return plan
    terms = plan.subscripts.split("->")[0].split(",")
    shapes = [layout.shape if prep is None else prep.plan.output.shape
              for layout, prep in zip(plan.inputs, plan.preparations)]
    sizes = {c: n for term, shape in zip(terms, shapes) for c, n in zip(term, shape)}
    taken = []
    for number, (positions, subscripts, _) in enumerate(steps, 1):
        if len(positions) != 2:
            continue
        left, right = subscripts.split("->")[0].split(",")
        form = step_product(subscripts, tuple(sizes[c] for c in left),
                            tuple(sizes[c] for c in right))
        if form is not None and compiled_product_takes(
                math.prod(form.batch), form.rows, form.inner, form.columns, plan.dtype,
                64):                                    # AVX-512's
            taken.append(f"{number} {subscripts!r}")
    if not taken:
        return plan
    words = (f"; path step{'s' if len(taken) > 1 else ''} {', '.join(taken)}: where the "
             "kernel is built for AVX-512, by the compiled batched product (kernel/gemm.py:"
             " register tiles, K in blocks) once its runner is ready, for exact, aligned, "
             "native-order ndarrays whose grouped axes are views and whose strides are "
             "whole elements (numpy.einsum until then and with REARRANGE_JIT=off)")
    steps_out = tuple(dataclasses.replace(step, reason=step.reason + words)
                      if step.op == "einsum" else step for step in plan.steps)
    return dataclasses.replace(plan, steps=steps_out)


def _compiled_product_takes(plan: EinsumPlan, form: Any) -> bool:
    """Whether the numpy lowering runs ``plan``'s batched product on the compiled runner
    where the kernel is built for AVX-512 (backends/ndarray.compiled_product_takes, the
    call's own rule, on the plan's sizes and 64-byte vectors: explain's words are the
    same on every machine and name that condition)."""
    from .backends.ndarray import compiled_product_takes

    terms = plan.subscripts.split("->")[0].split(",")
    shapes = [layout.shape if prep is None else prep.plan.output.shape
              for layout, prep in zip(plan.inputs, plan.preparations)]
    sizes = {c: n for term, shape in zip(terms, shapes) for c, n in zip(term, shape)}

    def size(letters: str) -> int:
        return math.prod(sizes[c] for c in letters)
    return compiled_product_takes(size(form.batch), size(form.rows), size(form.inner),
                                  size(form.columns), plan.dtype, 64)   # AVX-512's


def _numpy_name(dtype: str) -> str | None:
    """The dtype's name if numpy knows it (bfloat16 it does not: the plan leaves it out)."""
    try:
        return np.dtype(dtype).name
    except TypeError:
        return None


def _checked_inputs(tensors: Sequence[Any]) -> tuple[list[Any], bool]:
    """The inputs as numpy arrays or as Tensors (one kind for all), and which kind."""
    arrays = []
    for k, tensor in enumerate(tensors):
        if isinstance(tensor, np.generic):
            tensor = np.asarray(tensor)
        if not isinstance(tensor, (np.ndarray, Tensor)):
            raise ArgumentTypeError(
                f"rearrange.einsum takes arrays of one type ({backends.SUPPORTED_ARRAYS}), "
                f"then the pattern; argument {k} is {_kind(tensor)}")
        _check_dtype(k, tensor.dtype)
        arrays.append(tensor)
    kinds = {isinstance(t, Tensor) for t in arrays}
    if len(kinds) > 1:
        first_tensor = next(k for k, t in enumerate(arrays) if isinstance(t, Tensor))
        first_array = next(k for k, t in enumerate(arrays) if not isinstance(t, Tensor))
        raise ArgumentTypeError(
            "rearrange.einsum takes numpy arrays or rearrange.Tensors, not a mix: argument "
            f"{first_array} is a numpy array and argument {first_tensor} a rearrange.Tensor; "
            "convert one (rearrange.from_numpy(a), t.numpy())")
    return arrays, kinds == {True}


# numpy's einsum multiplies and adds: booleans, numbers and Python objects (whose own
# operators it calls). Strings, bytes, dates and records have no product.
_EINSUM_KINDS = {"b": "bool", "i": "integer", "u": "unsigned integer", "f": "float",
                 "c": "complex", "O": "object"}
_OTHER_KINDS = {"U": "str", "S": "bytes", "M": "datetime64", "m": "timedelta64",
                "V": "structured or void"}


def _check_dtype(k: int, dtype: np.dtype | calls.ElementType) -> None:
    """Refuse an input whose dtype einsum cannot multiply, before numpy sees it."""
    if dtype.kind not in _EINSUM_KINDS:
        what = _OTHER_KINDS.get(dtype.kind, "non-numeric")
        raise ArgumentTypeError(
            f"rearrange.einsum multiplies and adds its inputs: argument {k} has dtype "
            f"{dtype} ({what}); expected a bool, integer, float, complex or object dtype")


def _describe(tensor: Any) -> _Operand:
    if isinstance(tensor, Tensor):
        return _Operand(tensor.layout, tensor.dtype.name, tensor.element_size(), "elements")
    layout, unit = calls.numpy_layout(tensor)
    return _Operand(layout, tensor.dtype.name, tensor.itemsize, unit)


def explain_einsum(tensors_or_shapes: Any, pattern: str, *, strides: Sequence[Any] | None = None,
                   dtype: Any = None, **axes_lengths: int) -> EinsumPlan:
    """The plan ``einsum`` follows for these inputs, without touching any data.

    ``tensors_or_shapes`` is a list of inputs: arrays, ``rearrange.Tensor`` s, or shapes
    (tuples of ints; one shape alone may be given bare). For shapes, ``strides`` (one
    tuple per input, in elements; default C-contiguous) and ``dtype`` (one for all, or
    one per input) describe the rest.

    >>> import rearrange.contraction as rc
    >>> plan = rc.explain_einsum([(2, 12), (12, 5)], "b (h d), (h d) e -> b h e", h=3)
    >>> plan.subscripts, plan.output.shape
    ('abc,bcd->abd', (2, 3, 5))
    """
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {_kind(pattern)}")
    items = _operand_list(tensors_or_shapes)
    backend = None if isinstance(items[0], (np.ndarray, np.generic, Tensor)) \
        else backends.backend_for(items[0])
    if backend is not None:
        if strides is not None or dtype is not None:
            raise ArgumentTypeError(
                f"strides= and dtype= describe shapes; {_kind(items[0])} inputs carry their own")
        _one_type(backend, items)
        return _foreign_plan(backend, items, pattern, calls.canonical_lengths(axes_lengths))
    if strides is not None and len(strides) != len(items):
        raise ArgumentTypeError(
            f"strides: expected one tuple per input ({len(items)}), got {len(strides)}")
    dtypes = (list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * len(items))
    if len(dtypes) != len(items):
        raise ArgumentTypeError(
            f"dtype: expected one dtype, or one per input ({len(items)}), got {len(dtypes)}")
    operands = []
    for k, item in enumerate(items):
        layout, name, itemsize, unit = calls.layout_from(
            item, None if strides is None else strides[k], dtypes[k])
        if isinstance(item, (np.ndarray, Tensor)):
            _check_dtype(k, item.dtype)
        elif dtypes[k] is not None:
            _check_dtype(k, calls.dtype_of(dtypes[k]))
        operands.append(_Operand(layout, name, itemsize, unit))
    return _plan_with_context(pattern, operands, calls.canonical_lengths(axes_lengths))


def _operand_list(tensors_or_shapes: Any) -> list[Any]:
    if isinstance(tensors_or_shapes, (np.ndarray, Tensor, np.generic)) \
            or backends.backend_for(tensors_or_shapes) is not None:
        return [tensors_or_shapes]
    if not isinstance(tensors_or_shapes, (list, tuple)):
        raise ArgumentTypeError(
            "explain_einsum takes a list of inputs (arrays, rearrange.Tensors or shapes); "
            f"got {_kind(tensors_or_shapes)}")
    if not tensors_or_shapes:
        raise ArgumentTypeError(
            "explain_einsum needs at least one input; for one 0-d input pass [()]")
    if calls.is_shape(tensors_or_shapes):  # one shape given bare
        return [tuple(tensors_or_shapes)]
    return list(tensors_or_shapes)
