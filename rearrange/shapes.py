"""``parse_shape`` and ``check_shape``: read axis lengths off a shape, or check them.

``parse_shape(x, "b _ h w")`` is einops' function: one name, ``_`` (not read), a number
or a unit per dim, at most one ``...``, and returns ``{"b": ..., "h": ..., "w": ...}``.
``check_shape(x, "b (h w) c", h=4)`` also takes compositions and repeated names, checks
every length it is given or can work out, and returns every length it solved. A shape
that does not fit is a :class:`ShapeMismatchError` with a caret under the dim's text:

>>> import numpy as np
>>> check_shape(np.zeros((2, 12, 3)), "b (h w) c", h=5)
Traceback (most recent call last):
  ...
rearrange.shapes.ShapeMismatchError: dim 1 has size 12, which (h w) cannot split with h=5: 12 is not divisible by 5
  b (h w) c
    ^^^^^
  while checking shape (2, 12, 3) against pattern 'b (h w) c' with h=5

Both are planned once per (pattern, rank) and cached; ``explain_shape`` prints the plan
solved for one shape.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Mapping, Sequence

from . import front
from .caching import PLANS
from .errors import ArgumentTypeError, PatternError, RearrangeError
from .front import PLAIN_INT
from .parsing import (AxisName, EllipsisAxis, ShapePattern, parse_shape_pattern, pattern_error,
                      shorten)
from .plan import JsonDump
from .records import record

__all__ = ["parse_shape", "check_shape", "explain_shape", "ShapeMismatchError", "ShapePlan",
           "ShapeRow"]


class ShapeMismatchError(PatternError):
    """A shape does not fit a pattern: wrong rank, a size that differs from the one the
    pattern or a given length implies, a composition that does not divide.

    A :class:`~rearrange.PatternError`, so a ``RearrangeError``: a ``ValueError`` and a
    ``RuntimeError`` (the class einops raises for these).
    """

    __module__ = "rearrange.shapes"


# --------------------------------------------------------------------------- recipes
# What a pattern means for a shape of a given rank, before the sizes are known: the
# pattern's groups with the ellipsis expanded. Cached by (pattern, op, rank).


@record
class _Dim:
    """The pattern's part for one dim of the shape."""

    members: tuple[str | int, ...]  # axis names ("_" included) and anonymous lengths; () = unit
    start: int                      # its text span (the group, or the '...')
    end: int
    ellipsis: bool = False          # a dim covered by '...': any size, nothing read


@record
class _Recipe:
    pattern: ShapePattern
    dims: tuple[_Dim, ...]
    reads: tuple[tuple[str, int], ...]    # parse_shape: (name, dim) to read, in order
    fixed: tuple[tuple[int, int], ...]    # parse_shape: (dim, the size it must have)


# Entries of the plan cache made here (parse_shape's and check_shape's through the door,
# rearrange.front.run):
# * ("shape-recipe", pattern, op, rank) -> recipe: a recipe depends on the pattern and
#   the rank alone (the shape it was built for appears only in errors, not cached);
#   parse_shape's entry, whose runner reads the shape with it;
# * ("check_shape", pattern, shape, *given lengths) -> the solved lengths (copied on
#   return). Kept and hit only when the shape and the lengths are plain ints (3.0 == 3,
#   True == 1).


def _recipe(pattern: str, op: str, ndim: int, shape: tuple) -> _Recipe:
    """The recipe of ``pattern`` for ``op`` and a shape of ``ndim`` dims, cached."""
    key = ("shape-recipe", pattern, op, ndim)
    recipe = PLANS.get(key)
    if recipe is None:
        recipe = _uncached_recipe(pattern, op, ndim, shape)
        PLANS.put(key, recipe)
    return recipe


def _uncached_recipe(pattern: str, op: str, ndim: int, shape: tuple) -> _Recipe:
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"a pattern must be a str, not {type(pattern).__name__}")
    return _build_recipe(parse_shape_pattern(pattern, op), ndim, shape)


def _build_recipe(parsed: ShapePattern, ndim: int, shape: tuple) -> _Recipe:
    side, text = parsed.side, parsed.text
    bare_ellipsis = [k for k, g in enumerate(side.groups)
                     if g.members and type(g.members[0]) is EllipsisAxis]
    fixed_groups = len(side.groups) - len(bare_ellipsis)
    if bare_ellipsis and ndim < fixed_groups:
        raise ShapeMismatchError(
            f"the shape {_fmt(shape)} has {_dims(ndim)}, but the pattern describes "
            f"{_dims(fixed_groups)} besides '...'\n"
            f"{_carets(text, side.start, side.end)}")
    if not bare_ellipsis and ndim != fixed_groups:
        raise ShapeMismatchError(
            f"the shape {_fmt(shape)} has {_dims(ndim)}, but the pattern describes "
            f"{_dims(fixed_groups)}: one group per dim is expected\n"
            f"{_carets(text, side.start, side.end)}")
    dims: list[_Dim] = []
    for group in side.groups:
        members = group.members
        if members and type(members[0]) is EllipsisAxis:
            dims.extend(_Dim((), members[0].start, members[0].end, True)
                        for _ in range(ndim - fixed_groups))
            continue
        names = tuple(m.name if type(m) is AxisName else m.value  # type: ignore[union-attr]
                      for m in members)
        dims.append(_Dim(names, group.start, group.end))
    reads: list[tuple[str, int]] = []
    fixed: list[tuple[int, int]] = []
    if parsed.op == "parse_shape":  # every dim: unit, one name or one number
        for k, dim in enumerate(dims):
            if dim.ellipsis:
                continue
            if not dim.members:
                fixed.append((k, 1))
            elif type(dim.members[0]) is int:
                fixed.append((k, dim.members[0]))  # type: ignore[arg-type]
            elif dim.members[0] != "_":
                reads.append((dim.members[0], k))  # type: ignore[arg-type]
    return _Recipe(parsed, tuple(dims), tuple(reads), tuple(fixed))


# --------------------------------------------------------------------------- shapes of inputs


def _shape_of(x: Any, op: str) -> tuple:
    try:
        shape = x.shape
    except AttributeError:
        shape = None
    except RuntimeError as error:  # torch's nested tensors: sizes that vary have no .shape
        raise ArgumentTypeError(
            f"{op}(): {type(x).__module__}.{type(x).__name__} has no .shape to read "
            f"({error})") from None
    if shape is None:
        raise ArgumentTypeError(
            f"{op}() takes an array or tensor (anything with a .shape); got "
            f"{type(x).__module__}.{type(x).__name__}")
    try:
        return tuple(shape)
    except TypeError:
        raise ArgumentTypeError(f"{op}(): .shape of {type(x).__name__} is not a sequence") from None


def _int_shape(shape: tuple, op: str) -> tuple[int, ...]:
    try:
        return tuple(operator.index(size) for size in shape)
    except TypeError:
        raise ArgumentTypeError(f"{op}() needs a shape of integers; got {shape!r}") from None


def _fmt(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _dims(n: int) -> str:
    return f"{n} dim{'s' if n != 1 else ''}"


def _carets(text: str, start: int, end: int) -> str:
    """The caret lines of pattern_error, for errors of another class."""
    return str(pattern_error("", text, start, max(end, start + 1)))[1:]


def _context(op: str, pattern: str, shape: Sequence[Any], lengths: Mapping[str, Any]) -> str:
    given = "".join(f", {k}={v!r}" for k, v in lengths.items())
    verb = "parsing shape" if op == "parse_shape" else "checking shape"
    with_lengths = f" with {given[2:]}" if given else ""
    return f"  while {verb} {_fmt(shape)} against pattern '{shorten(pattern)}'{with_lengths}"


def _with_context(error: PatternError, op: str, pattern: str, shape: Sequence[Any],
                  lengths: Mapping[str, Any]) -> PatternError:
    """The same error class, its message followed by the call's context."""
    return type(error)(f"{error}\n{_context(op, pattern, shape, lengths)}")


# --------------------------------------------------------------------------- parse_shape


def parse_shape(x: Any, pattern: str) -> dict[str, int]:
    """The lengths of the named dims of ``x``, as einops' ``parse_shape``.

    One term per dim: a name (read), ``_`` (skipped), a number or a unit (``1``, ``()``),
    whose size is checked; ``...`` stands for any number of dims, skipped. ``x`` is
    anything with a ``.shape``: a numpy array, a :class:`rearrange.Tensor`, a torch
    tensor.

    >>> import numpy as np
    >>> parse_shape(np.zeros((2, 3, 5, 7)), 'batch _ h w')
    {'batch': 2, 'h': 5, 'w': 7}
    >>> parse_shape(np.zeros((2, 3, 5, 7)), '... w')
    {'w': 7}
    """
    shape = _shape_of(x, "parse_shape")
    # the warm path: the door's key, one lookup (a miss: the door)
    recipe = PLANS.peek(("shape-recipe", pattern, "parse_shape", len(shape)))
    if recipe is None:
        return front.run(PARSE_SHAPE, x, pattern)
    try:
        return _read(recipe, shape)
    except (RearrangeError, MemoryError, RuntimeError) as error:
        raised = front.failure(PARSE_SHAPE, error, pattern, shape, {}, None)
        if raised is None:
            raise
        raise raised from None


def _read(recipe: _Recipe, shape: tuple) -> dict[str, Any]:
    """parse_shape's runner: the fixed sizes checked, the named ones read."""
    for dim, size in recipe.fixed:
        if shape[dim] != size:
            what = recipe.dims[dim]
            raise ShapeMismatchError(
                f"dim {dim} has size {shape[dim]}, but the pattern says "
                f"{'a unit axis (size 1)' if size == 1 else f'an axis of length {size}'} "
                f"there\n{_carets(recipe.pattern.text, what.start, what.end)}")
    return {name: shape[dim] for name, dim in recipe.reads}


# --------------------------------------------------------------------------- the door
# parse_shape and check_shape as the door (rearrange.front.run) takes them: the input is
# anything with a .shape (no backend: only the shape is read), the entry is the recipe
# (parse_shape) or the solved lengths (check_shape).


def _shape_inputs(op: str) -> Any:
    return lambda x: (None, _shape_of(x, op))


def _read_alike(backend: Any, shape: tuple, lengths: Any, extras: Any) -> bool:
    """A shape reads alike whether its sizes are traced or not: never the traced way."""
    return False


def _as_is(backend: Any, entry: Any, shape: tuple, lengths: Any, extras: Any) -> Any:
    return entry


def _shape_context(op: str) -> Any:
    def context(error: Any, pattern: str, shape: tuple, lengths: Mapping[str, Any],
                extras: Any) -> Any:
        if not isinstance(error, PatternError):
            return error
        return _with_context(error, op, pattern, shape, lengths)
    return context


def _parse_shape_key(backend: Any, shape: tuple, pattern: Any, lengths: Any,
                     extras: Any) -> tuple:
    return ("shape-recipe", pattern, "parse_shape", len(shape))


def _parse_shape_plan(backend: Any, shape: tuple, pattern: Any, lengths: Any,
                      extras: Any) -> _Recipe:
    try:
        return _uncached_recipe(pattern, "parse_shape", len(shape), shape)
    except PatternError as error:
        raise _with_context(error, "parse_shape", pattern, shape, {}) from None


def _check_shape_key(backend: Any, shape: tuple, pattern: Any, lengths: Mapping[str, Any],
                     extras: Any) -> Any:
    # 3.0 == 3 and True == 1: only plain ints may hit (or make) an entry made for ints
    if PLAIN_INT.issuperset(map(type, shape)) and PLAIN_INT.issuperset(map(type, lengths.values())):
        return ("check_shape", pattern, shape, *lengths.items())
    return front.NOT_KEPT


def _check_shape_plan(backend: Any, shape: tuple, pattern: Any, lengths: Mapping[str, Any],
                      extras: Any) -> dict[str, int]:
    try:
        return _solve(pattern, _int_shape(shape, "check_shape"), lengths, rows=False)[0]
    except PatternError as error:
        raise _with_context(error, "check_shape", pattern, shape, lengths) from None


#: parse_shape and check_shape, as the door takes them.
PARSE_SHAPE = front.Operation(
    name="parse_shape", parse_kind="shape", inputs=_shape_inputs("parse_shape"),
    key=_parse_shape_key, plan=_parse_shape_plan, lower=_as_is,
    context=_shape_context("parse_shape"), traced=_read_alike, call=_read)
CHECK_SHAPE = front.Operation(
    name="check_shape", parse_kind="shape", inputs=_shape_inputs("check_shape"),
    key=_check_shape_key, plan=_check_shape_plan, lower=_as_is,
    context=_shape_context("check_shape"), traced=_read_alike,
    call=lambda solved, shape: dict(solved),  # a copy: the caller owns the dict it gets
    canonical=False)  # the context quotes lengths as given (np.int64(3))


# --------------------------------------------------------------------------- check_shape


@record
class ShapeRow:
    """One dim of the shape against its part of the pattern."""

    dim: int
    size: int
    text: str      # the pattern's text for this dim: "b", "(h w)", "_", "()", "..."
    solved: str    # what this dim gave or confirmed, e.g. "w=4 (12 / h=3)"

    def to_dict(self) -> dict[str, Any]:
        return {"dim": self.dim, "size": self.size, "pattern": self.text, "solved": self.solved}


@record
class ShapePlan(JsonDump):
    """How a shape fits a pattern: each dim against the pattern, and every axis length.

    Printable (``str``), JSON-ready (``to_dict``, ``dump``); reading a shape moves no
    data, so ``is_view`` is always True.
    """

    op: str                                   # "check_shape"
    pattern: str
    shape: tuple[int, ...]
    given: tuple[tuple[str, int], ...]         # the lengths passed as keywords
    axis_lengths: tuple[tuple[str, int], ...]  # every named axis, in pattern order
    rows: tuple[ShapeRow, ...]

    @property
    def is_view(self) -> bool:
        return True

    def __str__(self) -> str:
        given = " ".join(f"{n}={v}" for n, v in self.given) or "(none)"
        axes = " ".join(f"{n}={v}" for n, v in self.axis_lengths) or "(none)"
        lines = [
            f"{self.op} '{self.pattern}'",
            f"  shape    {_fmt(self.shape)}",
            f"  given    {given}",
            f"  axes     {axes}",
            "  result   fits: every dim matches the pattern",
        ]
        if not self.rows:
            return "\n".join(lines)
        table = [("dim", "size", "pattern", "solved")]
        table += [(str(r.dim), str(r.size), r.text, r.solved) for r in self.rows]
        widths = [max(len(row[k]) for row in table) for k in range(3)]
        lines.append("")
        for row in table:
            cells = [row[k].ljust(widths[k]) for k in range(3)] + [row[3]]
            lines.append(("  " + "  ".join(cells)).rstrip())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "pattern": self.pattern,
            "shape": list(self.shape),
            "given": dict(self.given),
            "axis_lengths": dict(self.axis_lengths),
            "is_view": self.is_view,
            "rows": [row.to_dict() for row in self.rows],
        }


def check_shape(x: Any, pattern: str, **axes_lengths: int) -> dict[str, int]:
    """Check that ``x``'s shape fits ``pattern`` and return every axis length.

    Like :func:`parse_shape`, plus compositions such as ``(h w)`` (all lengths of a group
    but one must be known: given as keywords, or read from another dim), repeated names
    (their lengths must agree) and given lengths, which are checked. A shape that does not
    fit raises :class:`ShapeMismatchError` pointing at the dim's text.

    >>> import numpy as np
    >>> check_shape(np.zeros((2, 12, 3)), 'b (h w) c', h=4)
    {'b': 2, 'h': 4, 'w': 3, 'c': 3}
    >>> check_shape(np.zeros((5, 5)), 'n n')
    {'n': 5}
    """
    shape = _shape_of(x, "check_shape")
    # the warm path: the door's key (_check_shape_key's, written out), one lookup
    if PLAIN_INT.issuperset(map(type, shape)) and PLAIN_INT.issuperset(
            map(type, axes_lengths.values())):
        solved = PLANS.peek(("check_shape", pattern, shape, *axes_lengths.items()))
        if solved is not None:
            return dict(solved)
    return front.run(CHECK_SHAPE, x, pattern, axes_lengths)


def explain_shape(x_or_shape: Any, pattern: str, **axes_lengths: int) -> ShapePlan:
    """The plan of ``check_shape(x, pattern, **axes_lengths)``: each dim of the shape
    against its part of the pattern and what it gave; raises as check_shape does.
    ``x_or_shape`` is anything with a ``.shape``, or a shape (a tuple or list of ints).

    >>> print(explain_shape((2, 12, 3), 'b (h w) c', h=4))
    check_shape 'b (h w) c'
      shape    (2, 12, 3)
      given    h=4
      axes     b=2 h=4 w=3 c=3
      result   fits: every dim matches the pattern
    <BLANKLINE>
      dim  size  pattern  solved
      0    2     b        b=2
      1    12    (h w)    w=3 (12 / h=4)
      2    3     c        c=3
    """
    if isinstance(x_or_shape, (tuple, list)):
        shape = x_or_shape
    else:
        shape = _shape_of(x_or_shape, "explain_shape")
    shape = _int_shape(tuple(shape), "explain_shape")
    try:
        solved, rows = _solve(pattern, shape, axes_lengths, rows=True)
    except PatternError as error:
        raise _with_context(error, "check_shape", pattern, shape, axes_lengths) from None
    return ShapePlan(
        op="check_shape",
        pattern=pattern,
        shape=shape,
        given=tuple((name, operator.index(v)) for name, v in axes_lengths.items()),
        axis_lengths=tuple(solved.items()),
        rows=rows,
    )


def _solve(pattern: str, shape: tuple[int, ...], axes_lengths: Mapping[str, Any], *,
           rows: bool) -> tuple[dict[str, int], tuple[ShapeRow, ...]]:
    """Every axis length, from the shape and the given lengths, checked against both.

    A dim whose group has one unknown axis gives it (``size // product of the others``,
    which must divide); names solved there may complete other groups, so the pass repeats
    until nothing changes. Then every group must multiply to its dim's size.
    """
    recipe = _recipe(pattern, "check_shape", len(shape), shape)
    names = recipe.pattern.names
    known: dict[str, int] = {}
    source: dict[str, str] = {}  # where each known length came from, for messages
    for name, length in axes_lengths.items():
        if name not in names:
            raise PatternError(
                f"a length is given for '{name}', which is not an axis of the pattern "
                f"(its axes: {', '.join(names) or 'none'})\n"
                f"{_carets(pattern, 0, len(pattern))}")
        if isinstance(length, bool) or not hasattr(length, "__index__") or length.__index__() <= 0:
            start, end = _first_span(recipe, name)
            raise pattern_error(f"axis length {name}={length!r} must be a positive integer",
                                pattern, start, end)
        known[name] = length.__index__()
        source[name] = "given"

    dims = recipe.dims
    notes: dict[int, str] = {}
    done = [d.ellipsis or d.members == ("_",) for d in dims]
    progress = True
    while progress:
        progress = False
        for k, dim in enumerate(dims):
            if done[k]:
                continue
            size = shape[k]
            unknown = [m for m in dim.members if m == "_" or (type(m) is str and m not in known)]
            if len(unknown) > 1:
                continue
            product = math.prod(known[m] if type(m) is str else m for m in dim.members
                                if not (m == "_" or (type(m) is str and m not in known)))
            done[k] = progress = True
            if not unknown:
                if product != size:
                    raise ShapeMismatchError(_mismatch(recipe, k, size, product, known, source)
                                             + "\n" + _carets(pattern, dim.start, dim.end))
                notes[k] = _confirmed(dim, known, source, k)
                continue
            missing = unknown[0]
            if product == 0 or size % product:
                others = _lengths_text(dim, known)
                why = (f"the other lengths multiply to 0, so {missing} can be any length"
                       if product == 0 else f"{size} is not divisible by {product}")
                raise ShapeMismatchError(
                    f"dim {k} has size {size}, which {_group_text(dim)} cannot split with "
                    f"{others}: {why}\n{_carets(pattern, dim.start, dim.end)}")
            value = size // product
            if len(dim.members) == 1:
                notes[k] = "skipped" if missing == "_" else f"{missing}={value}"
            else:
                notes[k] = (f"{'_' if missing == '_' else missing}={value} "
                            f"({size} / {_lengths_text(dim, known, skip=missing)})")
            if missing != "_":
                known[missing] = value  # type: ignore[index]
                source[missing] = f"dim {k}"  # type: ignore[index]
    for k, dim in enumerate(dims):
        if not done[k]:
            unknown = list(dict.fromkeys(
                m for m in dim.members if type(m) is str and m not in known))
            count = sum(1 for m in dim.members if type(m) is str and (m == "_" or m not in known))
            which = ", ".join(f"{m}=" for m in unknown if m != "_")
            advice = f"; pass all but one of them ({which}...)" if which else ""
            raise PatternError(
                f"cannot solve {_group_text(dim)} at dim {k} of size {shape[k]}: {count} lengths "
                f"are unknown{advice}\n{_carets(pattern, dim.start, dim.end)}")
    solved = {name: known[name] for name in names}
    if not rows:
        return solved, ()
    table = []
    for k, dim in enumerate(dims):
        if dim.ellipsis:
            text, note = "...", "skipped (...)"
        elif dim.members == ("_",):
            text, note = pattern[dim.start:dim.end], "skipped"
        else:
            text, note = pattern[dim.start:dim.end], notes[k]
        table.append(ShapeRow(k, shape[k], text, note))
    return solved, tuple(table)


def _group_text(dim: _Dim) -> str:
    if not dim.members:
        return "()"
    parts = [str(m) for m in dim.members]
    return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"


def _lengths_text(dim: _Dim, known: Mapping[str, int], skip: Any = None) -> str:
    """``h=4, 2``: the known lengths of a group, numbers as they are."""
    parts = []
    for m in dim.members:
        if m == skip or m == "_":
            continue
        if type(m) is int:
            parts.append(str(m))
        elif m in known:
            parts.append(f"{m}={known[m]}")
    return ", ".join(parts) or "nothing known"


def _first_span(recipe: _Recipe, name: str) -> tuple[int, int]:
    for group in recipe.pattern.side.groups:
        for member in group.members:
            if type(member) is AxisName and member.name == name:
                return member.start, member.end
    return 0, len(recipe.pattern.text)


def _mismatch(recipe: _Recipe, k: int, size: int, product: int, known: Mapping[str, int],
              source: Mapping[str, str]) -> str:
    dim = recipe.dims[k]
    if not dim.members:
        return f"dim {k} has size {size}, but the pattern says a unit axis (size 1) there"
    if len(dim.members) == 1:
        member = dim.members[0]
        if type(member) is int:
            return f"dim {k} has size {size}, but the pattern says an axis of length {member} there"
        where = "was given" if source[member] == "given" else f"from {source[member]}"
        return f"dim {k} has size {size}, but {member}={known[member]} ({where})"
    origins = [f"{m}={known[m]} ({'given' if source[m] == 'given' else 'from ' + source[m]})"
               for m in dict.fromkeys(m for m in dim.members if type(m) is str)]
    detail = f" with {', '.join(origins)}" if origins else ""
    return f"dim {k} has size {size}, but {_group_text(dim)}{detail} has {product} elements"


def _confirmed(dim: _Dim, known: Mapping[str, int], source: Mapping[str, str], k: int) -> str:
    """The note of a dim that checked lengths known before it: what it confirmed."""
    if not dim.members:
        return "unit: size 1"
    if len(dim.members) == 1 and type(dim.members[0]) is int:
        return f"{dim.members[0]}: matches"
    parts = []
    for m in dict.fromkeys(dim.members):
        if type(m) is int:
            continue
        origin = source[m]
        parts.append(f"{m}={known[m]} ({'given' if origin == 'given' else 'as ' + origin})")
    return ", ".join(parts) + ": matches"
