"""Indexing in einx's notation: ``get_at`` and the functional updates ``set_at``,
``add_at``, ``subtract_at``, with einops' calling convention (arrays first, the pattern
last, axis lengths as keywords)::

    get_at(x, idx, 'b [h w] c, b p [2] -> b p c')          a 2-d gather per batch
    get_at(table, ids, '[v] d, b t -> b t d')               an embedding lookup
    set_at(x, idx, values, 'b [h w] c, b p [2], b p c -> b [h w] c')

The first expression is the indexed array: its bracketed axes are the *indexed* axes.
Each further expression but the update's is an index array; a bracketed axis in it is
its *coordinate axis* (``[2]``: two coordinates, one per indexed axis, in order), an
index array without brackets gives one coordinate. The coordinates of all index arrays,
in argument order, address the indexed axes in their order. An unbracketed axis of the
indexed array that also appears in an index array is a *batch* axis (``b``: each batch
element is indexed with its own coordinates); the other unbracketed axes of the indexed
array are *value* axes (``c``), carried along whole. The result (``get_at``) has the
index arrays' axes and the value axes; the updates return a new array shaped as the
indexed one (no ``->``: the indexed array's expression).

Semantics are einx 0.4.3's for coordinates within range. Out of range, einx ravels the
coordinates into one flat index without checking each axis (``-1`` on an inner axis
reads the previous row's element); here every coordinate is checked against its own
axis, as numpy and torch index: ``-n <= i < n``, a negative ``i`` counting from the
end of *its* axis, anything else a :class:`~rearrange.DimensionError` naming the axis.
(``einx(x, idx % n)`` equals ours.)

The stages (see :class:`IndexPlan`):

* plan — pure: the pattern and the arrays' ranks, shapes and strides say which axes are
  batch, indexed and value axes, how each index array is placed in the result's axis
  order, and the *route* of the gather: ``rows`` when the indexed array's batch and
  indexed axes merge into one axis as a view (then the coordinates become one linear row
  index and the gather is one ``np.take`` / ``index_select`` of whole rows), ``axes``
  otherwise (advanced indexing with one index array per axis, on a permuted view). The
  data array is never copied for the index arithmetic;
* lower — per library (numpy, torch; jax through ``.at``), a runner cached in the one
  plan cache under ``(op, pattern, per array (type, shape, strides, dtype), lengths)``;
* run — the coordinates checked and wrapped (eager), the gather or the scatter.

Under ``torch.compile``/``torch.export`` (traced sizes) nothing is cached and the route
is always ``axes`` (torch's advanced indexing and ``index_put``, which trace); compiled
code cannot check coordinates against the axes before it runs: an out-of-range
coordinate is what torch's compiled indexing makes of it (an assertion at run time on
CPU), never a ``DimensionError``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import front, notation
from .caching import PLANS
from .errors import ArgumentTypeError, DimensionError, PatternError, RearrangeError
from .layout import Layout
from .notation import Brackets, Leaf, Name, Number, Product, Sum
from .parsing import pattern_error, shorten
from .records import record

__all__ = ["get_at", "set_at", "add_at", "subtract_at", "explain_indexing", "IndexPlan",
           "plan_indexing"]

OPERATIONS = ("get_at", "set_at", "add_at", "subtract_at")
_UPDATES = ("set_at", "add_at", "subtract_at")


# --------------------------------------------------------------------------- the plan


@record
class IndexArray:
    """How one index array enters: split into its leaves (``split``: the leaf lengths,
    None when every term is one axis already), its coordinate axis (a leaf position, or
    None: the array is one coordinate), and its other leaves' places in the result's
    index space (``space_order``: those leaves in index-space order, as positions among
    the leaves without the coordinate axis; ``space_shape``: the index-space shape with
    1 where the array lacks an axis)."""

    argument: int                       # position among the call's arrays
    split: tuple[int, ...] | None
    coordinate_axis: int | None
    coordinates: int                    # how many indexed axes it addresses
    space_order: tuple[int, ...]
    space_shape: tuple[int, ...]


@record
class IndexPlan:
    """What a call of ``get_at``/``set_at``/``add_at``/``subtract_at`` runs.

    The indexed array ``x`` is split into its leaves (``x_split``) and permuted
    (``x_order``) into batch, indexed, value axes: a view. Its index space is the
    result's non-value axes (``space``, lengths ``space_shape``), in the output's order.

    ``route`` "rows": that view merges (batch + indexed axes, in ``rows_order``, whose
    lengths are ``rows_shape``) into one axis of ``rows`` rows (``rows_view``: the view's
    shape); coordinate ``k`` (and each batch axis' position) times ``multipliers[k]`` sums
    to a row index; one gather of whole rows (``take``: numpy's ``np.take``, which copies
    an input that is not C-contiguous, so only when the view is). "axes": one index
    array per batch and indexed axis on the ``(batch, indexed, value)`` view.

    The gathered block is ``(space..., value...)``; ``out_order`` permutes it into the
    output's leaves, ``out_shape`` (None: no reshape) makes the output's groups. For the
    updates, ``values_order``/``values_shape`` place the update array in that block, and
    the result is the updated ``x`` rearranged by ``out_order``/``out_shape``.
    """

    op: str
    pattern: str
    x_split: tuple[int, ...] | None
    x_order: tuple[int, ...]
    batch: tuple[str, ...]
    indexed: tuple[tuple[str, int], ...]      # (name, length), in the indexed array's order
    values_axes: tuple[str, ...]              # the value axes, in output order
    space: tuple[str, ...]
    space_shape: tuple[int, ...]
    value_shape: tuple[int, ...]
    index_arrays: tuple[IndexArray, ...]
    batch_places: tuple[int, ...]             # each batch axis' position in the space
    route: str                                # "rows" | "axes"
    rows_order: tuple[int, ...] = ()          # positions among batch + indexed axes
    rows_view: tuple[int, ...] = ()
    multipliers: tuple[int, ...] = ()         # per batch + indexed axis (x_order's order)
    take: bool = False
    out_order: tuple[int, ...] | None = None
    out_shape: tuple[int, ...] | None = None
    values_order: tuple[int, ...] | None = None
    values_split: tuple[int, ...] | None = None
    values_shape: tuple[int, ...] | None = None
    x_shape: tuple[int, ...] = ()
    x_strides: tuple[int, ...] | None = None  # in elements, as planned (None: unknown)

    def __str__(self) -> str:
        return self.explain()

    def explain(self) -> str:
        """The plan as text: which views, which gather or scatter."""
        lines = [f"{self.op} '{shorten(self.pattern)}'"]
        batch = " ".join(self.batch) or "-"
        indexed = " ".join(f"{n}={k}" for n, k in self.indexed)
        lines.append(f"  axes     batch: {batch}; indexed: {indexed}; value: "
                     f"{' '.join(self.values_axes) or '-'}")
        order = "" if self.x_order == tuple(range(len(self.x_order))) else \
            f" permute{self.x_order}"
        split = "" if self.x_split is None else f" split{self.x_split}"
        lines.append(f"  x        view:{split}{order or ' as it is'} "
                     f"(batch, indexed, value)")
        for array in self.index_arrays:
            how = ("one coordinate" if array.coordinate_axis is None else
                   f"{array.coordinates} coordinates along axis {array.coordinate_axis}")
            lines.append(f"  index {array.argument}  view: {how}, each a view broadcast "
                         f"to {array.space_shape} (space {' '.join(self.space) or '-'})")
        kind = "gather" if self.op == "get_at" else "scatter"
        if self.route == "rows":
            lines.append(f"  rows     view of x as {self.rows_view}: batch and indexed axes "
                         f"merged (no copy); row = sum(coordinate * {self.multipliers}), "
                         f"each coordinate checked and wrapped on its own axis")
            if self.op == "get_at":
                how = "np.take(rows, row, axis=0)" if self.take else \
                    "rows[row] (numpy) / index_select (torch)"
            else:
                how = {"set_at": "rows[row] = values",
                       "add_at": "add.at(rows, row, values) (numpy) / index_add (torch)",
                       "subtract_at": "subtract.at(rows, row, values) (numpy) / "
                                      "index_add(alpha=-1) (torch)"}[self.op]
            lines.append(f"  {kind:<8} one {how}")
        else:
            how = "x[batch aranges, coordinates...]" if self.op == "get_at" else \
                "index_put(x, (batch aranges, coordinates...), values" + \
                (", accumulate)" if self.op != "set_at" else ")")
            lines.append(f"  {kind:<8} advanced indexing, one index per batch and indexed "
                         f"axis: {how}")
        if self.op != "get_at":
            lines.append("  copy     x copied once into the result (the caller's array is "
                         "never modified); values broadcast as views")
        if self.out_order is not None or self.out_shape is not None:
            lines.append(f"  output   rearranged: permute{self.out_order or '()'}"
                         f"{'' if self.out_shape is None else f' reshape{self.out_shape}'}")
        return "\n".join(lines)

    def to_svg(self) -> str:
        """A picture of the plan as SVG text: x over its storage, its (batch, indexed,
        value) and rows views, and the result's layout (which rows it reads depends on
        the index data) (see :meth:`rearrange.Plan.to_svg`)."""
        from .picture import indexing_svg

        return indexing_svg(self)

    def _repr_html_(self) -> str:
        """Notebooks: the explain table and the picture."""
        from .picture import html_fragment

        return html_fragment(str(self), self.to_svg())


# --------------------------------------------------------------------------- planning


def _fail(message: str, text: str, term: Any) -> PatternError:
    return pattern_error(message, text, term.start, term.end)


def _top_terms(expression: notation.Expression) -> list[Any]:
    """The terms that are axes of the array: brackets opened."""
    result = []
    for term in expression.terms:
        if type(term) is Brackets:
            result.extend(term.terms)
        else:
            result.append(term)
    return result


def _check_terms(dims: Sequence[Any], text: str, what: str, numbers: bool) -> None:
    """No concatenation anywhere; anonymous axes only where ``numbers`` allows them."""
    for dim in dims:
        if type(dim) is Sum:
            raise _fail(f"'+' (a concatenation) has no meaning in {what}", text, dim.term)
        if type(dim) is Product:
            _check_terms(dim.children, text, what, numbers)
        elif dim.name is None and not numbers:
            raise _fail(f"an anonymous axis ({dim.length}) in {what}; name it", text, dim.term)


def _leaf_names(dims: Sequence[Any]) -> list[str | None]:
    return [leaf.name for leaf in notation.leaves(dims)]


def _has_groups(dims: Sequence[Any]) -> bool:
    return any(type(d) is not Leaf for d in dims)


def _leaf_lengths(dims: Sequence[Any], lengths: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(leaf.length if leaf.name is None else lengths[leaf.name]
                 for leaf in notation.leaves(dims))


def plan_indexing(op: str, pattern: str, shapes: Sequence[Sequence[int]],
                  strides: Sequence[int] | None = None,
                  given: Mapping[str, int] | None = None,
                  route: str | None = None, symbolic: bool = False) -> IndexPlan:
    """The plan of ``op`` for arrays of ``shapes`` (the indexed array first; the update
    array last for the updates), the indexed array's element ``strides`` (None: the route
    is "axes", as under tracing; C-contiguous strides allow "rows"). Raises PatternError
    (with a caret) for a pattern that does not fit.

    ``symbolic``: the sizes are traced (torch's SymInts). Then nothing here compares a
    size with a number: an axis written as a number (``[2]``) takes that length without
    a check (a comparison would pin the trace to the example's size, and dynamo gives
    equal sizes one symbol: ``b`` of 2 would be pinned too), and whether the output
    needs a reshape is read from the pattern, not from the lengths."""
    if not isinstance(pattern, str):
        raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__} "
                                f"{pattern!r}")
    parsed = notation.parse_notation(pattern)
    text = pattern
    updates = op in _UPDATES
    least = 3 if updates else 2
    if len(parsed.inputs) < least:
        what = "an indexed array, index arrays and an update array" if updates else \
            "an indexed array and index arrays"
        raise pattern_error(f"{op} takes {what}: at least {least} input expressions, "
                            f"found {len(parsed.inputs)}", text, 0, len(text))
    if parsed.outputs is None and not updates:
        raise pattern_error("get_at needs an output expression after '->'", text, len(text))
    if parsed.outputs is not None and len(parsed.outputs) != 1:
        extra = parsed.outputs[1]
        raise pattern_error(f"{op} has one output; found {len(parsed.outputs)}", text,
                            extra.start, extra.end)
    if len(parsed.inputs) != len(shapes):
        raise PatternError(f"pattern '{shorten(pattern)}' has {len(parsed.inputs)} input "
                           f"expressions; {op} got {len(shapes)} arrays")
    x_expr = parsed.inputs[0]
    index_exprs = parsed.inputs[1:len(parsed.inputs) - (1 if updates else 0)]
    values_expr = parsed.inputs[-1] if updates else None

    # brackets: the indexed array's mark its indexed axes; an index array's, its
    # coordinate axis (one top-level axis); nowhere else
    x_dims = notation.expand(x_expr, text, rank=len(shapes[0]))
    dots = sum(1 for leaf in notation.leaves(x_dims) if leaf.name and
               leaf.name.startswith("..."))
    _check_terms(x_dims, text, "the indexed array", numbers=False)
    if not any(leaf.marked for leaf in notation.leaves(x_dims)):
        raise pattern_error("the indexed array (first expression) marks no axis to index; "
                            "put its indexed axes in brackets, e.g. 'b [h w] c'", text,
                            x_expr.start, x_expr.end)
    index_dims, coordinate_axes = _index_dims(index_exprs, shapes[1:], text)
    values_dims = None
    if values_expr is not None:
        values_dims = notation.expand(values_expr, text, rank=len(shapes[-1]))
        _check_terms(values_dims, text, "the update array", numbers=True)
        for leaf in notation.leaves(values_dims):
            if leaf.marked:
                raise _fail("the update array (last expression) has no brackets", text,
                            leaf.term)
    all_dims = [x_dims, *index_dims] + ([values_dims] if values_dims is not None else [])
    if symbolic:    # the numbers' lengths as written (see the docstring)
        shapes = [tuple(d.length if type(d) is Leaf and d.name is None else n
                        for d, n in zip(dims, shape)) for dims, shape in zip(all_dims, shapes)]
    lengths = notation.solve(all_dims, shapes, text, given)
    for name in (leaf.name for dims in all_dims for leaf in notation.leaves(dims)):
        if name is not None and name not in lengths:
            raise PatternError(f"pattern '{shorten(pattern)}': no array gives the length "
                               f"of axis {name!r}")

    # the indexed array's axes
    x_leaves = list(notation.leaves(x_dims))
    names = [leaf.name for leaf in x_leaves]
    for leaf in x_leaves:
        if names.count(leaf.name) > 1:
            raise _fail(f"axis {leaf.name!r} appears twice in the indexed array", text,
                        leaf.term)
    index_names: set[str] = set()
    for dims, axis in zip(index_dims, coordinate_axes):
        seen = set()
        for i, leaf in enumerate(notation.leaves(dims)):
            if leaf.marked or leaf.name is None:
                continue
            if leaf.name in seen:
                raise _fail(f"axis {leaf.name!r} appears twice in an index array", text,
                            leaf.term)
            seen.add(leaf.name)
            if any(l.name == leaf.name and l.marked for l in x_leaves):
                raise _fail(f"axis {leaf.name!r} is indexed (in brackets) in the indexed "
                            "array; an index array cannot also run along it", text,
                            leaf.term)
        index_names |= seen
    indexed = [(leaf.name, lengths[leaf.name]) for leaf in x_leaves if leaf.marked]
    batch = [leaf.name for leaf in x_leaves if not leaf.marked and leaf.name in index_names]
    value_names = [leaf.name for leaf in x_leaves if not leaf.marked and
                   leaf.name not in index_names]

    # coordinates: the coordinate axes' lengths, against the indexed axes
    counts = []
    for dims, axis in zip(index_dims, coordinate_axes):
        counts.append(1 if axis is None else notation.length_of(dims[axis], lengths))
    if sum(counts) != len(indexed):
        marked = [t for e in index_exprs for t in e.terms if type(t) is Brackets]
        where = marked[0] if marked else index_exprs[0]
        raise _fail(f"the index arrays give {sum(counts)} coordinate(s) "
                    f"({' + '.join(map(str, counts))}); the indexed array has "
                    f"{len(indexed)} indexed axes ({' '.join(n for n, _ in indexed)})",
                    text, where)

    # the output: its leaves are the index space's and the value axes, each once
    if parsed.outputs is not None:
        out_dims = notation.expand(parsed.outputs[0], text, dots=dots)
        _check_terms(out_dims, text, "the output", numbers=True)
    else:
        out_dims = x_dims
    out_leaves = list(notation.leaves(out_dims))
    out_named = [leaf for leaf in out_leaves if leaf.name is not None]
    for leaf in out_leaves:
        if leaf.name is None and leaf.length != 1:
            raise _fail(f"an anonymous axis ({leaf.length}) in the output; only unit axes "
                        "(1) can be added", text, leaf.term)
        if [l.name for l in out_named].count(leaf.name) > 1 and leaf.name is not None:
            raise _fail(f"axis {leaf.name!r} appears twice in the output", text, leaf.term)
    if updates:
        expected = {leaf.name for leaf in x_leaves}
        for leaf in out_leaves:
            if leaf.name is not None and leaf.name not in expected:
                raise _fail(f"axis {leaf.name!r} is not an axis of the indexed array; "
                            f"{op} returns the indexed array, updated", text, leaf.term)
        marked_out = {leaf.name for leaf in out_leaves if leaf.marked}
        if parsed.outputs is not None and marked_out and \
                marked_out != {n for n, _ in indexed}:
            raise pattern_error("the output's brackets must mark the indexed array's "
                                "indexed axes", text, parsed.outputs[0].start,
                                parsed.outputs[0].end)
        space_names = _updates_space(index_dims, batch)
        missing = expected - {leaf.name for leaf in out_named}
    else:
        for leaf in out_leaves:
            if leaf.marked:
                raise _fail("get_at's output has no brackets (the indexed axes are gone)",
                            text, leaf.term)
            if leaf.name is not None and leaf.name not in index_names and \
                    leaf.name not in value_names:
                if any(n == leaf.name for n, _ in indexed):
                    why = "an indexed axis is consumed by the coordinates"
                else:
                    why = "no input has it"
                raise _fail(f"axis {leaf.name!r} cannot be in the output: {why}", text,
                            leaf.term)
        out_order_names = [leaf.name for leaf in out_named]
        space_names = [n for n in out_order_names if n in index_names]
        missing = (index_names | set(value_names)) - set(out_order_names)
    if missing:
        raise pattern_error(f"axes {sorted(missing)} must appear in the output", text,
                            (parsed.outputs[0] if parsed.outputs else x_expr).start,
                            (parsed.outputs[0] if parsed.outputs else x_expr).end)
    out_value_names = [leaf.name for leaf in out_named if leaf.name in value_names] \
        if not updates else value_names
    space_shape = tuple(lengths[n] for n in space_names)
    value_shape = tuple(lengths[n] for n in out_value_names)

    # the indexed array: (batch, indexed, value) — value axes in output order
    x_split = _leaf_lengths(x_dims, lengths) if _has_groups(x_dims) else None
    position = {name: i for i, name in enumerate(names)}
    indexed_names = [n for n, _ in indexed]
    x_order = tuple(position[n] for n in batch + indexed_names + out_value_names)

    arrays = tuple(_place_index_array(k, dims, axis, count, space_names, lengths)
                   for k, (dims, axis, count) in enumerate(
                       zip(index_dims, coordinate_axes, counts), start=1))
    batch_places = tuple(space_names.index(n) for n in batch)

    # output: from (space..., value...) to the output's leaves
    block = space_names + out_value_names
    out_order = out_shape = None
    if not updates:
        order = tuple(block.index(leaf.name) for leaf in out_named)
        if order != tuple(range(len(order))):
            out_order = order
        if _has_groups(out_dims) or len(out_leaves) != len(out_named):
            out_shape = tuple(notation.length_of(d, lengths) for d in out_dims)
    else:
        order = tuple(position[leaf.name] for leaf in out_named)
        if order != tuple(range(len(order))):
            out_order = order
        if _has_groups(out_dims) or len(out_leaves) != len(out_named) or \
                x_split is not None:
            out_shape = tuple(notation.length_of(d, lengths) for d in out_dims)
    values_order = values_split = values_shape = None
    if values_dims is not None:
        values_split, values_order, values_shape = _place_values(values_dims, block,
                                                                 lengths, text)
    x_shape = tuple(shapes[0])
    leaf_shape = x_split if x_split is not None else x_shape
    plan = IndexPlan(op=op, pattern=pattern, x_split=x_split, x_order=x_order,
                     batch=tuple(batch), indexed=tuple(indexed),
                     values_axes=tuple(out_value_names), space=tuple(space_names),
                     space_shape=space_shape, value_shape=value_shape,
                     index_arrays=arrays, batch_places=batch_places, route="axes",
                     out_order=out_order, out_shape=out_shape, values_order=values_order,
                     values_split=values_split, values_shape=values_shape, x_shape=x_shape,
                     x_strides=None if strides is None else tuple(strides))
    if strides is None or route == "axes":
        return plan
    if x_split is not None:     # a split is always a view: the leaves' strides
        split = Layout(x_shape, tuple(strides), 0).try_view(x_split)
        if split is None:
            return plan
        strides = split.strides
    rows = _rows_route(leaf_shape, strides, x_order, len(batch) + len(indexed))
    if rows is None:
        return plan
    rows_order, rows_view, multipliers, contiguous = rows
    return dataclasses.replace(plan, route="rows", rows_order=rows_order,
                               rows_view=rows_view, multipliers=multipliers,
                               take=contiguous)


def _index_dims(expressions: Sequence[notation.Expression],
                shapes: Sequence[Sequence[int]], text: str
                ) -> tuple[list[tuple[Any, ...]], list[int | None]]:
    """Each index array's Dim trees, and its coordinate axis (a top-level position, or
    None): at most one bracketed axis, a name or a number, never inside a group."""
    index_dims, coordinate_axes = [], []
    for expression, shape in zip(expressions, shapes):
        dims = notation.expand(expression, text, rank=len(shape))
        _check_terms(dims, text, "an index array", numbers=True)
        marked = [i for i, d in enumerate(dims) if d.marked]
        nested = [leaf for d in dims if type(d) is not Leaf for leaf in notation.leaves((d,))
                  if leaf.marked]
        brackets = [t for t in expression.terms if type(t) is Brackets]
        if nested or len(brackets) > 1 or len(marked) > 1 or \
                any(len(b.terms) != 1 or type(b.terms[0]) not in (Name, Number)
                    for b in brackets):
            where = (brackets[1] if len(brackets) > 1 else brackets[0]) if brackets else \
                expression
            raise _fail("an index array has at most one coordinate axis: one axis in "
                        "brackets, e.g. 'b p [2]'", text, where)
        for dim in dims:
            if type(dim) is Leaf and dim.name is None and not dim.marked and dim.length != 1:
                raise _fail(f"an anonymous axis ({dim.length}) in an index array; name it",
                            text, dim.term)
        index_dims.append(dims)
        coordinate_axes.append(marked[0] if marked else None)
    return index_dims, coordinate_axes


def _place_index_array(argument: int, dims: Sequence[Any], axis: int | None, count: int,
                       space: Sequence[str], lengths: Mapping[str, int]) -> IndexArray:
    """How index array ``argument`` (of Dim trees ``dims``, coordinate axis ``axis``)
    broadcasts over the index space ``space``: its leaves without the coordinate axis
    permuted into space order (unit leaves last, dropped by the reshape to
    ``space_shape``)."""
    leaves = list(notation.leaves(dims))
    split = _leaf_lengths(dims, lengths) if _has_groups(dims) else None
    coordinate_leaf = None
    if axis is not None:    # the coordinate axis is top level: its leaf position
        coordinate_leaf = sum(len(list(notation.leaves((d,)))) for d in dims[:axis])
    names = [leaf.name for i, leaf in enumerate(leaves) if i != coordinate_leaf]
    order = tuple(names.index(n) for n in space if n in names) + \
        tuple(i for i, n in enumerate(names) if n is None)
    shape = tuple(lengths[n] if n in names else 1 for n in space)
    return IndexArray(argument, split, coordinate_leaf, count, order, shape)


def _place_values(dims: Sequence[Any], block: Sequence[str], lengths: Mapping[str, int],
                  text: str) -> tuple[tuple[int, ...] | None, tuple[int, ...],
                                      tuple[int, ...]]:
    """The update array's split, permutation and shape that make it broadcast over the
    gathered block ``(space..., value...)``; its axes must be among the block's."""
    leaves = list(notation.leaves(dims))
    names = [leaf.name for leaf in leaves]
    for leaf in leaves:
        if leaf.name is not None and leaf.name not in block:
            raise _fail(f"axis {leaf.name!r} of the update array is neither an index "
                        "array's axis nor a value axis of the indexed array", text, leaf.term)
        if leaf.name is None and leaf.length != 1:
            raise _fail(f"an anonymous axis ({leaf.length}) in the update array; name it",
                        text, leaf.term)
    split = _leaf_lengths(dims, lengths) if _has_groups(dims) else None
    order = tuple(names.index(n) for n in block if n in names) + \
        tuple(i for i, n in enumerate(names) if n is None)
    shape = tuple(lengths[n] if n in names else 1 for n in block)
    return split, order, shape


def _updates_space(index_dims: Sequence[Any], batch: Sequence[str]) -> list[str]:
    """The updates' index space: the batch axes first, then the index arrays' other axes
    in the order they first appear."""
    names = list(batch)
    for dims in index_dims:
        for leaf in notation.leaves(dims):
            if leaf.name is not None and not leaf.marked and leaf.name not in names:
                names.append(leaf.name)
    return names


_Rows = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], bool]


def _rows_route(leaf_shape: tuple[int, ...], strides: Sequence[int] | None,
                x_order: tuple[int, ...], merged: int) -> _Rows | None:
    """The "rows" route, if the batch and indexed axes (the first ``merged`` of
    ``x_order``) merge into one axis as a view — in the order of decreasing stride,
    whatever their order in the pattern: ``(rows_order, rows_view, multipliers,
    contiguous)``; None when strides forbid it (or are unknown: ``strides`` None)."""
    if strides is None:
        return None
    layout = Layout(leaf_shape, tuple(strides), 0).permute(x_order)
    front = list(range(merged))
    # decreasing stride, size-1 axes last (any stride), ties kept in pattern order
    rows_order = tuple(sorted(front, key=lambda i: (layout.shape[i] == 1,
                                                    -abs(layout.strides[i]))))
    permuted = layout.permute(rows_order + tuple(range(merged, layout.ndim)))
    rows = math.prod(permuted.shape[:merged])
    view = permuted.try_view((rows,) + permuted.shape[merged:])
    if view is None:
        return None
    lengths = [layout.shape[i] for i in rows_order]
    multiplier_of = {}
    running = 1
    for i, length in zip(reversed(rows_order), reversed(lengths)):
        multiplier_of[i] = running
        running *= length
    multipliers = tuple(multiplier_of[i] for i in front)
    return rows_order, view.shape, multipliers, view.is_contiguous()


# --------------------------------------------------------------------------- lowering
# A runner is ``run(x, *index_arrays[, values]) -> result`` for arrays of the planned
# shapes, strides and dtypes; ``checked``: coordinates are checked against their axes
# (eager), else left to the library (traced).


def _inverse(order: Sequence[int]) -> tuple[int, ...]:
    result = [0] * len(order)
    for i, k in enumerate(order):
        result[k] = i
    return tuple(result)


def _out_of_bounds(plan: IndexPlan, axis: int, value: Any) -> DimensionError:
    name, length = plan.indexed[axis]
    return DimensionError(f"index {int(value)} is out of bounds for axis {name!r} with size "
                          f"{length} ({plan.op} '{shorten(plan.pattern)}'; a coordinate "
                          f"i of an axis of size n needs -n <= i < n)")


def _coordinates(plan: IndexPlan, indices: Sequence[Any], xp: Any) -> list[Any]:
    """Each indexed axis' coordinates, shaped to broadcast over the index space: views of
    the index arrays (split, coordinate picked, permuted, unit axes added)."""
    coordinates = []
    for array, a in zip(plan.index_arrays, indices):
        if array.split is not None:
            a = xp.reshape(a, array.split)
        if array.coordinate_axis is None:
            parts = [a]
        else:
            parts = [a[(slice(None),) * array.coordinate_axis + (i,)]
                     for i in range(array.coordinates)]
        for part in parts:
            if array.space_order != tuple(range(len(array.space_order))):
                part = xp.permute(part, array.space_order)
            coordinates.append(xp.reshape(part, array.space_shape))
    return coordinates


def _batch_positions(plan: IndexPlan, xp: Any, like: Any) -> list[Any]:
    """Each batch axis' positions (an arange), shaped to broadcast over the index space."""
    result = []
    for name, place in zip(plan.batch, plan.batch_places):
        length = plan.space_shape[place]
        shape = [1] * len(plan.space_shape)
        shape[place] = length
        result.append(xp.reshape(xp.arange(length, like), tuple(shape)))
    return result


class _NumpyOps:
    """numpy's calls for the runners."""

    @staticmethod
    def reshape(a: Any, shape: tuple) -> Any:
        return a.reshape(shape)

    @staticmethod
    def permute(a: Any, order: tuple) -> Any:
        return a.transpose(order)

    @staticmethod
    def arange(n: int, like: Any) -> Any:
        return np.arange(n, dtype=np.intp)

    @staticmethod
    def checked(plan: IndexPlan, axis: int, c: Any, wrap: bool) -> Any:
        """``c`` checked against its axis; negative coordinates wrapped when ``wrap``."""
        if c.size == 0:
            return c
        length = plan.indexed[axis][1]
        low, high = c.min(), c.max()
        if low < -length:
            raise _out_of_bounds(plan, axis, low)
        if high >= length:
            raise _out_of_bounds(plan, axis, high)
        if wrap and low < 0:
            return np.where(c < 0, c + length, c)
        return c

    @staticmethod
    def to_index(c: Any) -> Any:
        return c.astype(np.intp, copy=False)


def _row_index(plan: IndexPlan, ops: Any, coordinates: list[Any], like: Any) -> Any:
    """sum(coordinate * multiplier) over batch and indexed axes: the row of the merged
    view each element of the index space reads."""
    batch = _batch_positions(plan, ops, like)
    terms = []
    for k, part in enumerate(batch + coordinates):
        multiplier = plan.multipliers[k]
        terms.append(part if multiplier == 1 else part * multiplier)
    row = terms[0]
    for term in terms[1:]:
        row = row + term
    return row


def _values_block(plan: IndexPlan, ops: Any, values: Any) -> Any:
    """The update array as a view shaped to broadcast over (space..., value...)."""
    if plan.values_split is not None:
        values = ops.reshape(values, plan.values_split)
    if plan.values_order != tuple(range(len(plan.values_order))):
        values = ops.permute(values, plan.values_order)
    return ops.reshape(values, plan.values_shape)


def _finish(plan: IndexPlan, ops: Any, result: Any) -> Any:
    if plan.out_order is not None:
        result = ops.permute(result, plan.out_order)
    if plan.out_shape is not None:
        result = ops.reshape(result, plan.out_shape)
    return result


def _rows_permutation(plan: IndexPlan) -> tuple[int, ...]:
    merged = len(plan.rows_order)
    inner = plan.rows_order + tuple(range(merged, len(plan.x_order)))
    return tuple(plan.x_order[i] for i in inner)


def lower_numpy(plan: IndexPlan) -> Callable[..., Any]:
    ops = _NumpyOps
    leaf_shape = plan.x_split
    x_order = plan.x_order
    identity = x_order == tuple(range(len(x_order)))
    rows = plan.route == "rows"
    rows_permutation = _rows_permutation(plan) if rows else ()
    op = plan.op

    def coordinates_of(indices: Sequence[Any]) -> list[Any]:
        found = _coordinates(plan, indices, ops)
        return [ops.checked(plan, k, ops.to_index(c), wrap=rows)
                for k, c in enumerate(found)]

    def leaves_of(x: Any) -> Any:
        return x if leaf_shape is None else x.reshape(leaf_shape)

    if op == "get_at":
        def get(x: Any, *indices: Any) -> Any:
            coordinates = coordinates_of(indices)
            view = leaves_of(x)
            if rows:
                source = view.transpose(rows_permutation).reshape(plan.rows_view)
                row = _row_index(plan, ops, coordinates, x)
                gathered = np.take(source, row, axis=0) if plan.take else source[row]
            else:
                view = view if identity else view.transpose(x_order)
                gathered = view[tuple(_batch_positions(plan, ops, x) + coordinates)]
            return _finish(plan, ops, gathered)
        return get

    def update(x: Any, *rest: Any) -> Any:
        indices, values = rest[:-1], rest[-1]
        coordinates = coordinates_of(indices)
        block = _values_block(plan, ops, values)
        result = np.array(x, order="C", copy=True)     # the caller's x is never written
        view = leaves_of(result)
        if rows:
            target = view.transpose(rows_permutation).reshape(plan.rows_view)
            where: Any = _row_index(plan, ops, coordinates, x)
        else:
            target = view if identity else view.transpose(x_order)
            where = tuple(_batch_positions(plan, ops, x) + coordinates)
        if op == "set_at":
            target[where] = block
        elif op == "add_at":
            np.add.at(target, where, block)
        else:
            np.subtract.at(target, where, block)
        return _finish(plan, ops, view)
    return update


class _TorchOps:
    """torch's calls for the runners."""

    @staticmethod
    def reshape(a: Any, shape: tuple) -> Any:
        return a.reshape(shape)

    @staticmethod
    def permute(a: Any, order: tuple) -> Any:
        return a.permute(order)

    @staticmethod
    def arange(n: Any, like: Any) -> Any:
        return sys.modules["torch"].arange(n, device=like.device)

    @staticmethod
    def checked(plan: IndexPlan, axis: int, c: Any, wrap: bool) -> Any:
        if c.numel() == 0:
            return c
        torch = sys.modules["torch"]
        length = plan.indexed[axis][1]
        low, high = (v.item() for v in torch.aminmax(c))
        if low < -length:
            raise _out_of_bounds(plan, axis, low)
        if high >= length:
            raise _out_of_bounds(plan, axis, high)
        if wrap and low < 0:
            return torch.where(c < 0, c + length, c)
        return c

    @staticmethod
    def to_index(c: Any) -> Any:
        torch = sys.modules["torch"]
        return c if c.dtype == torch.int64 else c.to(torch.int64)


def lower_torch(plan: IndexPlan, checked: bool = True) -> Callable[..., Any]:
    """The runner for torch tensors. ``checked`` False (traced sizes): no coordinate
    checks (nothing can be read from the data), the "axes" route."""
    torch = sys.modules["torch"]
    ops = _TorchOps
    leaf_shape = plan.x_split
    x_order = plan.x_order
    identity = x_order == tuple(range(len(x_order)))
    rows = plan.route == "rows"
    rows_permutation = _rows_permutation(plan) if rows else ()
    op = plan.op

    def coordinates_of(indices: Sequence[Any]) -> list[Any]:
        found = [ops.to_index(c) for c in _coordinates(plan, indices, ops)]
        if not checked:
            return found
        return [ops.checked(plan, k, c, wrap=rows) for k, c in enumerate(found)]

    def leaves_of(x: Any) -> Any:
        return x if leaf_shape is None else x.reshape(leaf_shape)

    if op == "get_at":
        def get(x: Any, *indices: Any) -> Any:
            coordinates = coordinates_of(indices)
            view = leaves_of(x)
            if rows:
                source = view.permute(rows_permutation).view(plan.rows_view)
                row = _row_index(plan, ops, coordinates, x)
                gathered = source.index_select(0, row.reshape(-1))
                gathered = gathered.view(tuple(row.shape) + tuple(plan.rows_view[1:]))
            else:
                view = view if identity else view.permute(x_order)
                gathered = view[tuple(_batch_positions(plan, ops, x) + coordinates)]
            return _finish(plan, ops, gathered)
        return get

    inverse = _inverse(x_order)
    if rows:    # add_at, subtract_at: one index_add of whole rows into a copy of x
        rows_inverse = _inverse(rows_permutation)
        permuted_shape = tuple((plan.x_split or plan.x_shape)[i] for i in rows_permutation)
        block_shape = tuple(plan.space_shape) + tuple(plan.value_shape)
        source_shape = (math.prod(plan.space_shape),) + tuple(plan.rows_view[1:])
        alpha = 1 if op == "add_at" else -1

        def add_rows(x: Any, *rest: Any) -> Any:
            coordinates = coordinates_of(rest[:-1])
            block = _values_block(plan, ops, rest[-1])
            if block.dtype != x.dtype:
                block = block.to(x.dtype)
            source = block.expand(block_shape).reshape(source_shape)
            row = _row_index(plan, ops, coordinates, x).reshape(-1)
            target = leaves_of(x).permute(rows_permutation).view(plan.rows_view)
            result = torch.index_add(target, 0, row, source, alpha=alpha)
            result = result.reshape(permuted_shape).permute(rows_inverse)
            return _finish(plan, ops, result)
        return add_rows

    def update(x: Any, *rest: Any) -> Any:
        indices, values = rest[:-1], rest[-1]
        coordinates = coordinates_of(indices)
        block = _values_block(plan, ops, values)
        if block.dtype != x.dtype:
            block = block.to(x.dtype)
        if op == "subtract_at":
            block = torch.neg(block)
        view = leaves_of(x)
        view = view if identity else view.permute(x_order)
        where = tuple(_batch_positions(plan, ops, x) + coordinates)
        # out of place: a new tensor, the caller's x untouched; autograd and compile see
        # one index_put
        result = torch.index_put(view, where, block, accumulate=op != "set_at")
        if not identity:
            result = result.permute(inverse)
        return _finish(plan, ops, result)
    return update


# --------------------------------------------------------------------------- the front

_INTEGER_KINDS = frozenset("iu")


def _torch_module(x: Any) -> Any:
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(x, torch.Tensor) else None


def _library(x: Any, op: str) -> str:
    """Which runners take ``x``: "numpy", "torch" or "jax"; anything else refused."""
    if isinstance(x, np.ndarray) and type(x) is np.ndarray:
        return "numpy"
    if _torch_module(x) is not None:
        return "torch"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        return "jax"
    from .tensor import Tensor
    if isinstance(x, Tensor):
        raise ArgumentTypeError(f"{op}() does not take a rearrange.Tensor (it has no "
                                "gather); pass x.numpy() or a torch tensor")
    module = type(x).__module__.split(".")[0]
    if module == "dask":
        raise ArgumentTypeError(f"{op}() does not take dask arrays: their indexing by "
                                "arrays of coordinates computes the index arrays first; "
                                "compute x or use dask's vindex")
    if isinstance(x, np.ndarray):
        raise ArgumentTypeError(f"{op}() takes exact numpy arrays, not the subclass "
                                f"{type(x).__name__}; pass np.asarray(x)")
    raise ArgumentTypeError(f"{op}() takes a numpy array, a torch tensor or a jax array as "
                            f"the indexed array; got {type(x).__module__}."
                            f"{type(x).__name__}")


def _as_library(a: Any, library: str, like: Any, op: str, what: str) -> Any:
    """An index or update array in ``like``'s library (lists and numbers converted;
    numpy arrays moved into torch or jax); another library's arrays refused."""
    if library == "numpy":
        if type(a) is np.ndarray:
            return a
        if isinstance(a, (list, tuple, int, float, complex, bool, np.generic)):
            return np.asarray(a)
    elif library == "torch":
        torch = sys.modules["torch"]
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, (np.ndarray, list, tuple, int, float, complex, bool, np.generic)):
            return torch.as_tensor(a, device=like.device)
    else:
        jnp = sys.modules["jax.numpy"]
        jax = sys.modules["jax"]
        if isinstance(a, jax.Array):
            return a
        if isinstance(a, (np.ndarray, list, tuple, int, float, complex, bool, np.generic)):
            return jnp.asarray(a)
    raise ArgumentTypeError(f"{op}() got {what} of type {type(a).__module__}."
                            f"{type(a).__name__}; with a {library} indexed array it takes "
                            f"{library} arrays (or lists and numbers)")


def _check_index_dtype(a: Any, library: str, op: str, argument: int) -> None:
    """Index arrays hold integers: a float, complex or bool array is refused (a bool
    array would be a mask in numpy and torch, not coordinates)."""
    if library == "torch":
        torch = sys.modules["torch"]
        ok = not (a.is_floating_point() or a.is_complex() or a.dtype == torch.bool)
        dtype = str(a.dtype).removeprefix("torch.")
    else:
        kind = np.dtype(a.dtype).kind
        ok = kind in _INTEGER_KINDS
        dtype = str(a.dtype)
    if not ok:
        raise ArgumentTypeError(f"{op}(): index array {argument} (argument {argument + 1}) "
                                f"has dtype {dtype}; index arrays hold integers")


def _traced(arrays: Sequence[Any], library: str) -> bool:
    """Must the call be planned without sizes or data (no cache, the "axes" route, no
    coordinate checks)? For torch: traced sizes (torch.compile, torch.export), or any
    tracing, dispatch mode or functorch transform (fake tensors have no values to
    check)."""
    if library != "torch":
        return False
    from .backends import _torch
    return any(_torch.traced(a, {}) or not _torch.plain_eager(a) for a in arrays)


def _key_of(a: Any, library: str) -> Any:
    if library == "numpy":      # (as numpy's warm path in _call builds it)
        return (a.shape, a.strides, a.dtype)
    if library == "torch":
        return (a.shape, a.stride(), a.dtype, a.device)
    return (type(a), a.shape, str(a.dtype))


def _split_arguments(op: str, arguments: tuple) -> tuple[tuple, str]:
    if not arguments or not isinstance(arguments[-1], str):
        last = type(arguments[-1]).__name__ if arguments else "nothing"
        raise ArgumentTypeError(f"{op}() takes the arrays first and the pattern last, a "
                                f"str; the last positional argument is {last}")
    return arguments[:-1], arguments[-1]


def _prepared(op: str, x: Any, others: tuple) -> tuple[str, list[Any]]:
    """The call's library and its arrays, all of it (index and update arrays converted).
    Index dtypes are checked when a runner is planned (the cache key holds them)."""
    library = _library(x, op)
    updates = op in _UPDATES
    arrays = [x]
    for k, a in enumerate(others, start=1):
        last = updates and k == len(others)
        arrays.append(_as_library(a, library, x, op, "the update array" if last else
                                  f"index array {k}"))
    return library, arrays


def _check_index_dtypes(op: str, library: str, arrays: Sequence[Any]) -> None:
    index_arrays = arrays[1:-1] if op in _UPDATES else arrays[1:]
    for k, a in enumerate(index_arrays, start=1):
        _check_index_dtype(a, library, op, k)


def _plan_for(op: str, pattern: str, library: str, arrays: Sequence[Any],
              axes_lengths: Mapping[str, Any], traced: bool) -> IndexPlan:
    shapes = [tuple(a.shape) for a in arrays]
    # the strides the rows route is planned for (None: the "axes" route)
    strides = None
    x = arrays[0]
    if traced or library == "jax":
        pass
    elif library == "numpy" and op in _UPDATES:     # the result: a C-contiguous copy of x
        strides = Layout.contiguous(shapes[0]).strides
    elif library == "numpy":
        itemsize = x.itemsize
        if itemsize and all(s % itemsize == 0 for s in x.strides):
            strides = tuple(s // itemsize for s in x.strides)
    elif op != "set_at":
        # torch: get_at reads rows of x; add_at/subtract_at index_add into rows of x's own
        # layout (the out-of-place copy keeps it); set_at is one index_put (axes)
        strides = tuple(x.stride())
    return plan_indexing(op, pattern, shapes, strides, axes_lengths, symbolic=traced)


def _lower(plan: IndexPlan, library: str, traced: bool) -> Callable[..., Any]:
    if library == "numpy":
        return lower_numpy(plan)
    if library == "torch":
        return lower_torch(plan, checked=not traced)
    return lower_jax(plan)


def _with_call(error: RearrangeError, op: str, pattern: str, arrays: Sequence[Any]
               ) -> RearrangeError:
    if f"'{shorten(pattern)}'" in str(error):
        return error
    shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
    return type(error)(f"{error}\n  while {op} with pattern '{shorten(pattern)}': "
                       f"shapes {shapes}")


def _check_lengths(axes_lengths: Mapping[str, Any]) -> None:
    """The caller's lengths are integers (the door made them canonical: 3.0 and True
    reach here as themselves, never equal to an int, so never a kept entry's hit)."""
    from .recipe import is_symbolic
    for name, value in axes_lengths.items():
        if type(value) is not int and not is_symbolic(value):
            raise PatternError(f"axis length {name}={value!r} must be an integer")


def _door_plan(op: str, traced: bool) -> Callable[..., IndexPlan]:
    """The door's planner (traced: the plan for traced sizes, never kept): the index
    dtypes, the lengths, then the plan, its errors with the call's context."""
    def plan(library: str, arrays: Sequence[Any], pattern: str,
             axes_lengths: Mapping[str, Any], extras: Any) -> IndexPlan:
        _check_index_dtypes(op, library, arrays)
        try:
            _check_lengths(axes_lengths)
            return _plan_for(op, pattern, library, arrays, axes_lengths, traced)
        except RearrangeError as error:
            raise _with_call(error, op, pattern, arrays) from None
    return plan


def _door_key(op: str) -> Callable[..., Any]:
    def key(library: str, arrays: Sequence[Any], pattern: str,
            axes_lengths: Mapping[str, Any], extras: Any) -> Any:
        """``(op, library, pattern, per array its layout key, lengths)`` — numpy's warm
        path in :func:`_call` builds the same tuple; traced calls are never kept."""
        if _traced(arrays, library):
            return front.NOT_KEPT
        return (op, library, pattern, tuple(_key_of(a, library) for a in arrays),
                tuple(axes_lengths.items()))
    return key


def _door_lower(library: str, plan: IndexPlan, arrays: Sequence[Any],
                axes_lengths: Mapping[str, Any], extras: Any) -> Callable[..., Any]:
    return _lower(plan, library, traced=False)


def _door_traced(op: str) -> Callable[..., Callable[..., Any]]:
    plan = _door_plan(op, traced=True)

    def lower_traced(library: str, arrays: Sequence[Any], pattern: str,
                     axes_lengths: Mapping[str, Any], extras: Any) -> Callable[..., Any]:
        return _lower(plan(library, arrays, pattern, axes_lengths, extras), library,
                      traced=True)
    return lower_traced


def _run(op: str, runner: Callable[..., Any], arrays: Sequence[Any]) -> Any:
    """The runner on the call's arrays, the libraries' own refusals as ours (the door
    adds the call's context): an out-of-range coordinate on the axes route, numpy's
    ufunc.at refusing the update array's dtype."""
    try:
        return runner(*arrays)
    except IndexError as error:         # the library's own bounds check (axes route)
        raise DimensionError(f"{error}") from None
    except TypeError as error:
        if not type(error).__name__.startswith("UFunc"):
            raise
        raise ArgumentTypeError(f"{op}(): the update array's dtype does not fit x's: "
                                f"{error}") from None


def _door_inputs(op: str, call: tuple[Any, tuple]) -> tuple[str, list[Any]]:
    x, others = call
    return _prepared(op, x, others)


def _operation(op: str) -> front.Operation:
    """``op`` as the door (:func:`rearrange.front.run`) takes it: the inputs are ``(x,
    the index and update arrays)``, the backend the call's library."""
    return front.Operation(
        name=op, parse_kind="notation",
        inputs=functools.partial(_door_inputs, op),
        key=_door_key(op), plan=_door_plan(op, traced=False), lower=_door_lower,
        context=lambda error, pattern, arrays, lengths, extras: _with_call(
            error, op, pattern, arrays),
        traced=lambda library, arrays, lengths, extras: _traced(arrays, library),
        lower_traced=_door_traced(op),
        call=functools.partial(_run, op))


#: get_at, set_at, add_at and subtract_at as the door takes them.
DOOR: dict[str, front.Operation] = {op: _operation(op) for op in OPERATIONS}

_ndarray = np.ndarray
_entries = PLANS.entries
_PLAIN_INT = front.PLAIN_INT


def _call(op: str, x: Any, arguments: tuple, axes_lengths: Mapping[str, Any]) -> Any:
    # numpy's warm path: exact numpy arrays and plain-int lengths only, the door's key
    # written out, one dict lookup; a hit runs with the door's error handling
    if type(x) is _ndarray and arguments and type(arguments[-1]) is str and \
            all(type(a) is _ndarray for a in arguments[:-1]) and \
            (not axes_lengths or _PLAIN_INT.issuperset(map(type, axes_lengths.values()))):
        key = (op, "numpy", arguments[-1], ((x.shape, x.strides, x.dtype),
               *[(a.shape, a.strides, a.dtype) for a in arguments[:-1]]),
               tuple(axes_lengths.items()))
        runner = _entries.get(key)
        if runner is not None:
            PLANS.hits += 1
            arrays = (x, *arguments[:-1])
            try:
                return _run(op, runner, arrays)
            except (RearrangeError, MemoryError, RuntimeError) as error:
                raised = front.failure(DOOR[op], error, arguments[-1], arrays, axes_lengths,
                                       None)
                if raised is None:
                    raise
                raise raised from None
    others, pattern = _split_arguments(op, arguments)
    return front.run(DOOR[op], (x, others), pattern, axes_lengths)


def get_at(x: Any, /, *arguments: Any, **axes_lengths: Any) -> Any:
    """The elements of ``x`` at coordinates given by index arrays, in einx's notation:
    ``get_at(x, idx, ..., pattern)``. Brackets in ``x``'s expression mark the indexed
    axes; a bracketed axis of an index array holds coordinates (one per indexed axis);
    axes of ``x`` that the index arrays share are batch axes. See the module's docstring.

    >>> import numpy as np, rearrange as ra
    >>> table = np.arange(12.).reshape(4, 3)
    >>> ra.get_at(table, np.array([[3, 0]]), '[v] d, b t -> b t d')
    array([[[ 9., 10., 11.],
            [ 0.,  1.,  2.]]])
    >>> x = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    >>> ra.get_at(x, np.array([[[2, 3], [0, -1]], [[1, 1], [0, 0]]]), 'b [h w], b p [2] -> b p')
    array([[11,  3],
           [17, 12]])
    """
    return _call("get_at", x, arguments, axes_lengths)


def set_at(x: Any, /, *arguments: Any, **axes_lengths: Any) -> Any:
    """A new array: ``x`` with the update array's values written at the coordinates the
    index arrays give: ``set_at(x, idx, ..., values, pattern)`` (no ``->``: the result
    has ``x``'s expression). ``x`` is not modified. Where coordinates repeat, one of
    their values is kept (numpy: the last; torch: unspecified, as ``index_put``).

    >>> import numpy as np, rearrange as ra
    >>> ra.set_at(np.zeros((2, 3)), np.array([2, 0]), np.array([5., 6.]), 'b [h], b, b')
    array([[0., 0., 5.],
           [6., 0., 0.]])
    """
    return _call("set_at", x, arguments, axes_lengths)


def add_at(x: Any, /, *arguments: Any, **axes_lengths: Any) -> Any:
    """A new array: ``x`` plus the update array's values at the coordinates the index
    arrays give, repeated coordinates accumulating: ``add_at(x, idx, ..., values,
    pattern)``. ``x`` is not modified.

    >>> import numpy as np, rearrange as ra
    >>> ra.add_at(np.zeros(4), np.array([1, 1, 3]), np.array([1., 2., 5.]), '[n], p, p')
    array([0., 3., 0., 5.])
    """
    return _call("add_at", x, arguments, axes_lengths)


def subtract_at(x: Any, /, *arguments: Any, **axes_lengths: Any) -> Any:
    """A new array: ``x`` minus the update array's values at the coordinates the index
    arrays give, repeated coordinates accumulating. ``x`` is not modified.

    >>> import numpy as np, rearrange as ra
    >>> ra.subtract_at(np.zeros(3), np.array([0, 0]), np.array([1., 2.]), '[n], p, p')
    array([-3.,  0.,  0.])
    """
    return _call("subtract_at", x, arguments, axes_lengths)


def explain_indexing(x: Any, /, *arguments: Any, op: str = "get_at",
                     **axes_lengths: Any) -> IndexPlan:
    """The plan ``op`` follows for these arrays, without running it: arrays (or shapes
    — tuples of ints — for C-contiguous numpy arrays) first, the pattern last. Its text
    (``str(plan)``) says which views are taken and which gather or scatter runs.

    >>> import rearrange as ra
    >>> plan = ra.explain_indexing((50000, 512), (32, 128), '[v] d, b t -> b t d')
    >>> plan.route, plan.rows_view, plan.take
    ('rows', (50000, 512), True)
    >>> print(str(plan).splitlines()[-1])
      gather   one np.take(rows, row, axis=0)
    """
    if op not in OPERATIONS:
        raise ArgumentTypeError(f"explain_indexing: op must be one of "
                                f"{', '.join(map(repr, OPERATIONS))}, got {op!r}")
    others, pattern = _split_arguments(op, arguments)
    if isinstance(x, tuple) and all(isinstance(n, int) for n in x):
        shapes = [x] + [tuple(s) for s in others]
        strides = Layout.contiguous(x).strides
        return plan_indexing(op, pattern, shapes, strides, axes_lengths)
    library, arrays = _prepared(op, x, others)
    _check_index_dtypes(op, library, arrays)
    return _plan_for(op, pattern, library, arrays, axes_lengths, _traced(arrays, library))


# --------------------------------------------------------------------------- jax


class _JaxOps:
    """jax's calls: jax arrays are immutable, updates are ``x.at[...]``."""

    @staticmethod
    def reshape(a: Any, shape: tuple) -> Any:
        return a.reshape(shape)

    @staticmethod
    def permute(a: Any, order: tuple) -> Any:
        return a.transpose(order)

    @staticmethod
    def arange(n: int, like: Any) -> Any:
        return sys.modules["jax.numpy"].arange(n)

    @staticmethod
    def checked(plan: IndexPlan, axis: int, c: Any, wrap: bool) -> Any:
        """Checked where the values are concrete (eager); under ``jax.jit`` jax's own
        rule holds (out-of-range coordinates are clamped by gathers, dropped by
        scatters)."""
        jax = sys.modules["jax"]
        if not isinstance(c, jax.core.Tracer):
            _NumpyOps.checked(plan, axis, np.asarray(c), wrap=False)
        return c


def lower_jax(plan: IndexPlan) -> Callable[..., Any]:
    """jax: the "axes" route (advanced indexing; ``.at[...]`` for the updates)."""
    ops = _JaxOps
    x_order = plan.x_order
    identity = x_order == tuple(range(len(x_order)))
    inverse = _inverse(x_order)
    op = plan.op

    def prepared(x: Any, indices: Sequence[Any]) -> tuple[Any, tuple]:
        coordinates = [ops.checked(plan, k, c, wrap=False)
                       for k, c in enumerate(_coordinates(plan, indices, ops))]
        view = x if plan.x_split is None else x.reshape(plan.x_split)
        view = view if identity else view.transpose(x_order)
        return view, tuple(_batch_positions(plan, ops, x) + coordinates)

    if op == "get_at":
        def get(x: Any, *indices: Any) -> Any:
            view, where = prepared(x, indices)
            return _finish(plan, ops, view[where])
        return get

    def update(x: Any, *rest: Any) -> Any:
        view, where = prepared(x, rest[:-1])
        block = _values_block(plan, ops, rest[-1])
        at = view.at[where]
        result = at.set(block) if op == "set_at" else \
            at.add(block) if op == "add_at" else at.subtract(block)
        if not identity:
            result = result.transpose(inverse)
        return _finish(plan, ops, result)
    return update
