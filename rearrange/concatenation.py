"""Concatenation, split and diagonals in ``rearrange``: the plan and its lowerings.

Three shapes of call (einx's notation, einops' calling convention)::

    rearrange((x, y), 'a b c1, a b c2 -> a b (c1 + c2)')   one output written part by part
    rearrange(z, 'a b (c1 + c2) -> a b c1, a b c2', c1=4)  a tuple of views
    rearrange(x, 'b i i -> b i')                           a diagonal: a view

The model. Every input is cut into **pieces**: one per combination of the parts of its
concatenated axes (``(c1 + c2)`` on an input: two slices, views), each split into its
elementary axes (a view: splitting an axis never needs a copy), with a name repeated
on it taken as the diagonal (a view: the axis' stride is the sum of the repeated
axes' strides) and anonymous unit axes dropped. Every output is cut the same way into
**parts**. Piece k fills part k (einx's rule: counted after the concatenations are
decomposed, in order), and its names must all be in the part (a part may add axes of
known length: the piece is broadcast over them, as einx does).

* An output without ``+`` is one part: our own ``rearrange`` (``repeat`` to broadcast)
  of its piece — a view wherever strides allow, as for any rearrange.
* An output with ``+`` is one new array: each piece is written, rearranged, straight
  into its slice of it — one copy per part, never an intermediate. On numpy the copy
  kernel does it, every part in one job (:func:`rearrange.kernel.copy_parts_into`: one
  fork-join of its threads, the work split over them by bytes): into a slice that is
  one block, or whose rows have gaps (an axis concatenated inside another), by row
  copies; a piece that must be transposed into rows with gaps goes through a buffer
  (the kernel's transposes into the buffers, one job, then their rows with the other
  parts); copies under the kernel's thresholds are numpy's ``copyto``. On torch in plain eager without grad: ``empty`` and a copy into each
  slice (the kernel where :func:`~rearrange.backends._torch.kernel_may_copy` allows,
  else ``copy_``); under autograd, transforms or tracing: ``torch.cat`` of the
  rearranged pieces. dask and array-API arrays: their ``concatenate``.

The output's layout (numpy only; :class:`OutputLayout`, which explain prints). A
concatenated output is laid out as its inputs are, numpy's rule for ``concatenate``
(order 'K'): when the pieces' strides agree on one memory order of the output's axes,
the new array is allocated in that order and the output is a transposed view of it, so
that the pattern's transposition becomes the output's strides and each piece is copied
in its own memory order (``'a b, a c -> (b + c) a'`` of C-ordered inputs: each input's
rows into the output's rows, which have gaps; ``'b a, c a -> a (b + c)'``: each input
one block) — ``np.concatenate`` of the same transposes gives that very layout. The
rule, decided from the plan's shapes and strides alone:

* a piece votes on two output axes where its part is longer than 1 along both: the
  axis along which its stride is larger (in absolute value) is further out; along an
  output axis composed of several of its axes, those must merge in the input (the
  stride of the innermost counts); a part of length 0 does not vote;
* the order is used when every pair of output axes longer than 1 has a vote, all votes
  on a pair agree and they make one order; axes of length 1 keep their places (they
  move no memory);
* anything else is C order, the reason said: the pieces disagree, a pair has no vote,
  a part is broadcast (stride 0) along an axis, two strides are equal, a piece is a
  diagonal, the output is empty or has at most one axis longer than 1, the strides are
  unknown (not whole items), or the backend is not numpy (torch, dask and array-API
  outputs are their concatenate's: C order).

:func:`plan_notation` is pure: shapes, strides and lengths in, a frozen
:class:`NotationPlan` out, which prints what runs (``explain``). Lowered runners are
kept in the plan cache under ``("rearrange-notation", pattern, per input (type, layout
key, dtype), copy, lengths)``; inputs with traced sizes are planned on every call and
never cached.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import front, notation
from .caching import PLANS
from .calls import canonical_lengths, numpy_layout
from .errors import ArgumentTypeError, NoViewError, PatternError, RearrangeError
from .notation import Leaf, Sum, expand, parse_notation, pattern_error, solve
from .recipe import is_symbolic
from .records import record
from .tensor import Tensor

__all__ = ["NotationPlan", "Piece", "Part", "OutputLayout", "plan_notation", "rearrange_notation",
           "explain_concatenation", "is_notation_rearrange"]

# Region: per axis, None (the whole axis) or (start, stop) of one part of a concatenation.
Region = tuple["tuple[int, int] | None", ...]


@record
class Piece:
    """One input's share: a view of it, described for planning and for printing."""

    input: int                           # which input
    region: Region                       # the input's slice (its split axes' parts)
    leaf_shape: tuple[int, ...]          # the slice, every composition split (a view)
    leaf_names: tuple[str | None, ...]   # per leaf: its name; None an anonymous unit axis
    names: tuple[str, ...]               # the piece's axes: each name once, in order of
                                         # first appearance (repeats: the diagonal)
    shape: tuple[int, ...]               # the piece's lengths, per name
    strides: tuple[int, ...] | None      # in elements, when the input's strides are known
    text: str                            # the input expression's part, e.g. 'a b c1'

    @property
    def is_diagonal(self) -> bool:
        return len(self.names) < sum(name is not None for name in self.leaf_names)


@record
class OutputLayout:
    """Where a concatenated output's elements lie in its new array: the memory order of
    its axes, and why (see the module's docstring, "The output's layout")."""

    order: tuple[int, ...]               # the output's axes, outermost in memory first
                                         # (0, 1, ..: C order)
    reason: str                          # why this order, in words (explain prints it)

    @property
    def is_c_order(self) -> bool:
        return self.order == tuple(range(len(self.order)))

    def buffer_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The new array's shape: the output's lengths in memory order (the output is
        its ``transpose(argsort(order))``)."""
        return tuple(shape[k] for k in self.order)

    def strides(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The output's strides, in elements."""
        result = [0] * len(shape)
        step = 1
        for k in reversed(self.order):
            result[k] = step
            step *= shape[k]
        return tuple(result)


@record
class Part:
    """One piece written to (or viewed as) its part of one output."""

    piece: int                           # index into NotationPlan.pieces
    output: int                          # which output
    region: Region                       # the output's slice this part fills
    leaf_shape: tuple[int, ...]          # that slice, every composition split
    leaf_names: tuple[str | None, ...]   # per leaf: a piece's name, or None (a unit axis)
    order: tuple[int, ...]               # piece axes in the order of the named leaves
    broadcast: tuple[str, ...]           # names the part adds (the piece repeats over them)
    einops: str                          # the piece to the part, as an einops pattern
    copier: str                          # view | kernel | staged | numpy | torch | dask ...
    copy: str                            # how it runs, in words (explain prints it)
    text: str                            # the output expression's part, e.g. 'a b (c1)'
    copy_order: tuple[int, ...] = ()     # a concatenation's part: its leaves in the
                                         # memory order of the output's slice (the copy
                                         # runs on both sides transposed so); (): the
                                         # leaves are in that order already


@record
class NotationPlan:
    """What ``rearrange`` does for a notation pattern: its pieces (views of the inputs),
    its outputs' parts, and for each output whether it is one new array written part by
    part (``concatenated``) or its one part's rearrangement (a view where possible)."""

    pattern: str
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    dtype: str | None
    pieces: tuple[Piece, ...]
    parts: tuple[Part, ...]
    concatenated: tuple[bool, ...]       # per output
    joins: tuple[tuple[tuple[int, int], ...], ...]  # per output: (axis, number of parts)
                                         # of each concatenated axis, outermost first
    lengths: tuple[tuple[str, int], ...] # every named axis' length
    backend: str                         # "numpy", "torch", ... (what the copies name)
    input_strides: tuple[tuple[int, ...] | None, ...] = ()  # per input, in elements; None
                                         # (or empty: none given) unknown (pictures only)
    layouts: tuple[OutputLayout | None, ...] = ()  # per output: a concatenation's memory
                                         # order; None for an output that is one part
                                         # (or empty: C order for every output)

    def layout_of(self, out: int) -> OutputLayout:
        """Output ``out``'s memory order (C order where the plan names none)."""
        found = self.layouts[out] if out < len(self.layouts) else None
        if found is None:
            return OutputLayout(tuple(range(len(self.output_shapes[out]))), "C order")
        return found

    def output_strides(self, out: int) -> tuple[int, ...]:
        """A concatenated output's strides (elements) in the array it is a view of."""
        return self.layout_of(out).strides(self.output_shapes[out])

    @property
    def is_view(self) -> bool:
        """Is every output a view of an input?"""
        return not any(self.concatenated) and all(part.copy == "view" for part in self.parts)

    def __str__(self) -> str:
        lines = [f"rearrange {self.pattern!r} ({self.backend}"
                 + (f", {self.dtype})" if self.dtype else ")")]
        for k, piece in enumerate(self.pieces):
            how = ("view: the diagonal, stride = the sum of the repeated axes' strides"
                   if piece.is_diagonal else "view")
            where = _region_text(piece.region)
            lines.append(f"  piece {k}: input {piece.input}{where} as {piece.text!r} "
                         f"-> {piece.shape}: {how}")
        for out, shape in enumerate(self.output_shapes):
            parts = [p for p in self.parts if p.output == out]
            if self.concatenated[out]:
                lines.append(f"  output {out} {shape}: one new array, one copy per part")
                layout = self.layout_of(out)
                if layout.is_c_order:
                    lines.append(f"    layout: C order ({layout.reason})")
                else:
                    lines.append(f"    layout: axes {', '.join(map(str, layout.order))} "
                                 f"outermost first ({layout.reason}): a view of a new "
                                 f"{layout.buffer_shape(shape)} array, strides "
                                 f"{layout.strides(shape)}")
                for part in parts:
                    lines.append(f"    {_region_text(part.region) or '[:]'} <- piece "
                                 f"{part.piece} as {part.text!r}: {part.copy}")
            else:
                part = parts[0]
                lines.append(f"  output {out} {shape}: piece {part.piece} as {part.text!r}: "
                             f"{part.copy}")
        return "\n".join(lines)

    def explain(self) -> str:
        return str(self)

    def to_svg(self) -> str:
        """A picture of the plan as SVG text: each input over its storage, each piece
        (a slice, a diagonal) as the view it is, each output: a view, or for a
        concatenation the new array with each part's place (see
        :meth:`rearrange.Plan.to_svg`)."""
        from .calls import plan_for
        from .picture import notation_svg

        try:
            itemsize = None if self.dtype is None else np.dtype(self.dtype).itemsize
        except TypeError:               # a dtype numpy does not know (torch's bfloat16)
            itemsize = None

        def plan_part(part: Part, layout: Any) -> Any:
            added = _rename_lengths(part)
            return plan_for(part.einops, layout, added, None, self.dtype, itemsize,
                            op="repeat" if added else "rearrange")
        return notation_svg(self, plan_part)

    def _repr_html_(self) -> str:
        """Notebooks: the explain table and the picture."""
        from .picture import html_fragment

        return html_fragment(str(self), self.to_svg())


def _region_text(region: Region) -> str:
    if all(r is None for r in region):
        return ""
    return "[" + ", ".join(":" if r is None else f"{r[0]}:{r[1]}" for r in region) + "]"


# --------------------------------------------------------------------------- recognising


_NAME = re.compile(r"[^\W\d]\w*")


def is_notation_rearrange(pattern: Any) -> bool:
    """Is ``pattern`` one this module runs: a comma or ``+`` (``notation.is_notation``;
    brackets are other families'), or a name repeated on the input (a diagonal)?"""
    if type(pattern) is not str:
        return False
    if "[" in pattern:
        return False
    if "," in pattern or "+" in pattern:
        return True
    # a name twice before '->' (a cheap look first: parsing the notation loads lark)
    names = _NAME.findall(pattern.split("->", 1)[0])
    if len(names) == len(set(names)):
        return False
    try:
        parsed = parse_notation(pattern)
    except RearrangeError:
        return False
    if parsed.outputs is None or len(parsed.inputs) != 1:
        return False
    names = [leaf.name for leaf in _term_names(parsed.inputs[0].terms)]
    return len(names) != len(set(names))


def _term_names(terms: Sequence[Any]) -> list[Any]:
    found = []
    for term in terms:
        if type(term) is notation.Name:
            found.append(term)
        elif type(term) is notation.Group:
            for part in term.parts:
                found.extend(_term_names(part))
        elif type(term) is notation.Brackets:
            found.extend(_term_names(term.terms))
    return found


# --------------------------------------------------------------------------- planning


def _flat_leaves(dim: Any, text: str) -> list[Leaf]:
    """The elementary axes of one axis that holds no concatenation."""
    if type(dim) is Leaf:
        return [dim]
    if type(dim) is Sum:
        raise pattern_error("a concatenation inside a composition is not supported: put "
                            "'+' in a group of its own, e.g. 'a (b + c)'", text,
                            dim.term.start, dim.term.end)
    return [leaf for child in dim.children for leaf in _flat_leaves(child, text)]


def _cells(dims: tuple[Any, ...], lengths: Mapping[str, int],
           text: str) -> list[tuple[Region, tuple[Any, ...]]]:
    """An expression cut at its concatenated axes: per combination of parts (row-major
    over the axes), the region it covers and its axes with each Sum replaced by the part.
    """
    cells: list[tuple[list, list]] = [([], [])]
    for dim in dims:
        if type(dim) is Sum:
            grown = []
            for region, axes in cells:
                start = 0
                for part in dim.parts:
                    stop = start + notation.length_of(part, lengths)
                    grown.append((region + [(start, stop)], axes + [part]))
                    start = stop
            cells = grown
        else:
            for region, axes in cells:
                region.append(None)
                axes.append(dim)
    return [(tuple(region), tuple(axes)) for region, axes in cells]


def _cell_text(axes: Sequence[Any]) -> str:
    return " ".join(notation.dim_text(d) for d in axes)


def _split_strides(region_axes: Sequence[Any], strides: Sequence[int],
                   lengths: Mapping[str, int], text: str) -> tuple[list[Leaf], list[int], list[int]]:
    """Leaves, their lengths and their strides (elements) of axes of ``strides``."""
    leaves: list[Leaf] = []
    shape: list[int] = []
    leaf_strides: list[int] = []
    for dim, stride in zip(region_axes, strides):
        flat = _flat_leaves(dim, text)
        sizes = [notation.length_of(leaf, lengths) for leaf in flat]
        inner = 1
        inner_strides = []
        for size in reversed(sizes):
            inner_strides.append(stride * inner)
            inner *= size
        leaves.extend(flat)
        shape.extend(sizes)
        leaf_strides.extend(reversed(inner_strides))
    return leaves, shape, leaf_strides


def _einops_name(name: str, names: dict[str, str]) -> str:
    found = names.get(name)
    if found is None:
        found = names[name] = f"n{len(names)}"
    return found


def plan_notation(pattern: str, shapes: Sequence[Sequence[int]],
                  strides: Sequence[Sequence[int] | None] | None = None,
                  dtype: str | None = None, itemsize: int | None = None,
                  axes_lengths: Mapping[str, int] | None = None,
                  backend: str = "numpy", copy: bool | None = None) -> NotationPlan:
    """The plan for ``rearrange(inputs, pattern)``: inputs of these shapes and (element)
    strides (None: unknown, e.g. dask). Pure. Raises PatternError (with a caret) for a
    pattern that does not fit."""
    parsed = parse_notation(pattern)
    text = pattern
    if parsed.outputs is None:
        raise pattern_error("rearrange needs '->' and the outputs' expressions", text,
                            len(text))
    if len(shapes) != len(parsed.inputs):
        raise pattern_error(
            f"pattern has {len(parsed.inputs)} input expression"
            f"{'s' if len(parsed.inputs) != 1 else ''}, one per array; got "
            f"{len(shapes)} array{'s' if len(shapes) != 1 else ''}", text,
            parsed.inputs[0].start, parsed.inputs[-1].end)
    _check_one_side(parsed, text)
    for expression in parsed.expressions:
        for term in notation.walk(expression.terms):
            if type(term) is notation.Brackets:
                raise pattern_error("brackets mark the axes an operation acts on (reduce, "
                                    "indexing, ...); rearrange takes none", text,
                                    term.start, term.end)
    in_dims = [expand(e, text, rank=len(s)) for e, s in zip(parsed.inputs, shapes)]
    dots = None
    for expression, shape in zip(parsed.inputs, shapes):
        if any(type(t) is notation.Dots for t in _top_axes(expression.terms)):
            # '...' stands for the axes the expression's other terms leave
            dots = len(shape) - sum(1 for t in _top_axes(expression.terms)
                                    if type(t) is not notation.Dots)
            break
    out_dims = [expand(e, text, dots=dots) for e in parsed.outputs]
    given = dict(axes_lengths or {})
    for name, value in given.items():
        if type(value) is not int and not is_symbolic(value) or (type(value) is int
                                                                   and value < 0):
            raise PatternError(f"axis length {name}={value!r} must be a non-negative integer")
    lengths = solve(in_dims, [tuple(s) for s in shapes], text, given)
    # every output axis needs a length: from the inputs or the caller
    for dims in out_dims:
        for leaf in notation.leaves(dims):
            if leaf.name is not None and leaf.name not in lengths:
                raise pattern_error(f"axis {leaf.name!r} has no length: it is on no input; "
                                    f"pass {leaf.name}=...", text, leaf.term.start,
                                    leaf.term.end)
    for dims in in_dims:
        for leaf in notation.leaves(dims):
            if leaf.name is not None and leaf.name not in lengths:
                raise pattern_error(f"axis {leaf.name!r} has no length: pass "
                                    f"{leaf.name}=...", text, leaf.term.start, leaf.term.end)
    # pieces
    pieces: list[Piece] = []
    for k, (dims, shape) in enumerate(zip(in_dims, shapes)):
        row_strides = (list(strides[k]) if strides is not None and strides[k] is not None
                       else None)
        for region, axes in _cells(dims, lengths, text):
            leaves, leaf_shape, leaf_strides = _split_strides(
                axes, row_strides or [0] * len(axes), lengths, text)
            names: list[str] = []
            piece_shape: list[int] = []
            piece_strides: list[int] = []
            for leaf, size, stride in zip(leaves, leaf_shape, leaf_strides):
                if leaf.name is None:
                    if leaf.length != 1:
                        raise pattern_error(
                            f"anonymous axis of length {leaf.length} on an input would be "
                            "dropped: name it", text, leaf.term.start, leaf.term.end)
                    continue
                if leaf.name in names:
                    piece_strides[names.index(leaf.name)] += stride
                    continue
                names.append(leaf.name)
                piece_shape.append(size)
                piece_strides.append(stride)
            pieces.append(Piece(
                k, region, tuple(leaf_shape),
                tuple(leaf.name for leaf in leaves), tuple(names), tuple(piece_shape),
                tuple(piece_strides) if row_strides is not None else None,
                _cell_text(axes)))
    # parts
    cells = [(out, region, axes) for out, dims in enumerate(out_dims)
             for region, axes in _cells(dims, lengths, text)]
    if len(cells) != len(pieces):
        raise pattern_error(
            f"the inputs make {len(pieces)} piece{'s' if len(pieces) != 1 else ''} and the "
            f"outputs {len(cells)} part{'s' if len(cells) != 1 else ''} (counted after "
            "each '+' is taken apart); piece k fills part k, so they must agree",
            text, 0, len(text))
    output_shapes = tuple(tuple(notation.length_of(d, lengths) for d in dims)
                          for dims in out_dims)
    concatenated = tuple(any(type(d) is Sum for d in dims) for dims in out_dims)
    joins = tuple(tuple((k, len(d.parts)) for k, d in enumerate(dims) if type(d) is Sum)
                  for dims in out_dims)
    layouts = tuple(
        _choose_layout(output_shapes[out], [(axes, piece) for (o, _, axes), piece
                                            in zip(cells, pieces) if o == out],
                       lengths, text, backend) if concatenated[out] else None
        for out in range(len(out_dims)))
    parts: list[Part] = []
    for index, ((out, region, axes), piece) in enumerate(zip(cells, pieces)):
        layout = layouts[out]
        parts.append(_plan_part(index, out, region, axes, piece, lengths, text, pattern,
                                output_shapes[out], concatenated[out], dtype, itemsize,
                                backend, copy,
                                None if layout is None else layout.strides(output_shapes[out])))
    return NotationPlan(pattern, tuple(tuple(s) for s in shapes), output_shapes, dtype,
                        tuple(pieces), tuple(parts), concatenated, joins,
                        tuple(lengths.items()), backend,
                        tuple(None if strides is None or strides[k] is None else
                              tuple(strides[k]) for k in range(len(shapes))), layouts)


def _choose_layout(shape: tuple[int, ...], parts: Sequence[tuple[tuple[Any, ...], Piece]],
                   lengths: Mapping[str, int], text: str, backend: str) -> OutputLayout:
    """The memory order of a concatenated output of ``shape``, whose parts (each the
    part's axes, one per output axis, and its piece) are given: the order every piece's
    strides agree on (numpy's concatenate, order 'K'), else C order. The rule, as the
    module's docstring states it: only on numpy with every input's strides known; axes of
    length 1 do not count (they keep their C places); a piece counts on two axes where its
    part is longer than 1 along both, by its stride along each (an axis composed of
    several of its axes needs them to merge: the stride of the innermost); every pair of
    the other axes needs a vote, all votes one way, and no diagonal, no broadcast (stride
    0) and no equal strides. Anything else: C order, the reason said."""
    c_order = tuple(range(len(shape)))
    if backend != "numpy":
        return OutputLayout(c_order, f"{backend}'s concatenate returns it")
    if 0 in shape:
        return OutputLayout(c_order, "an empty output")
    long_axes = [k for k, n in enumerate(shape) if n > 1]
    if len(long_axes) < 2:
        return OutputLayout(c_order, "at most one axis longer than 1: any order is C order")
    votes: dict[tuple[int, int], set[bool]] = {}     # (i, j), i < j: {i outside j?}
    for number, (axes, piece) in enumerate(parts):
        if piece.strides is None:
            return OutputLayout(c_order, "an input's strides are not whole items")
        if piece.is_diagonal:
            return OutputLayout(c_order, f"part {number}'s piece is a diagonal")
        if any(notation.length_of(leaf, lengths) == 0
               for dim in axes for leaf in _flat_leaves(dim, text)):
            continue                            # an empty part copies nothing: no votes
        strides: dict[int, int] = {}            # output axis -> the piece's stride along it
        for k in long_axes:
            runs = []
            for leaf in _flat_leaves(axes[k], text):
                size = notation.length_of(leaf, lengths)
                if size == 1:
                    continue
                if leaf.name is None or leaf.name not in piece.names:
                    return OutputLayout(c_order, f"part {number} is broadcast along "
                                                 f"output axis {k} (stride 0)")
                runs.append((size, piece.strides[piece.names.index(leaf.name)]))
            if not runs:
                continue                        # the part is 1 long here: no vote
            for (_, outer), (size, inner) in zip(runs, runs[1:]):
                if outer != inner * size:
                    return OutputLayout(c_order, f"part {number}'s axes of output axis {k} "
                                                 "do not merge in its input")
            if runs[-1][1] == 0:
                return OutputLayout(c_order, f"part {number} is broadcast along output "
                                             f"axis {k} (stride 0)")
            strides[k] = abs(runs[-1][1])
        for i in strides:
            for j in strides:
                if i < j:
                    if strides[i] == strides[j]:
                        return OutputLayout(c_order, f"part {number} has equal strides "
                                                     f"along output axes {i} and {j}")
                    votes.setdefault((i, j), set()).add(strides[i] > strides[j])
    for i in long_axes:
        for j in long_axes:
            if i < j:
                found = votes.get((i, j), set())
                if not found:
                    return OutputLayout(c_order, f"no part is longer than 1 along both "
                                                 f"output axes {i} and {j}")
                if len(found) > 1:
                    return OutputLayout(c_order, f"the inputs disagree on the order of "
                                                 f"output axes {i} and {j}")
    # every pair decided one way: the axis with more axes inside it is further out (a
    # tournament; a cycle of votes between different parts is refused below)
    outside = {k: sum(1 for j in long_axes if j != k and
                      (True in votes[(k, j)] if k < j else False in votes[(j, k)]))
               for k in long_axes}
    ranked = sorted(long_axes, key=lambda k: -outside[k])
    for a, b in zip(ranked, ranked[1:]):
        if outside[a] == outside[b]:
            return OutputLayout(c_order, "the inputs' votes on the axes' order form a cycle")
    slots = iter(ranked)
    order = tuple(next(slots) if n > 1 else k for k, n in enumerate(shape))
    if order == c_order:
        return OutputLayout(c_order, "the inputs are laid out in it")
    return OutputLayout(order, "as the inputs are laid out: numpy's concatenate, order 'K'")


def _check_one_side(parsed: Any, text: str) -> None:
    """A '+' on both sides of the arrow is refused: a call concatenates (inputs -> an
    output with '+') or splits (an input with '+' -> outputs)."""
    def concatenations(expressions: Sequence[Any]) -> list[Any]:
        return [t for e in expressions for t in notation.walk(e.terms)
                if type(t) is notation.Group and t.is_concatenation]
    joined = concatenations(parsed.outputs)
    if concatenations(parsed.inputs) and joined:
        raise pattern_error("'+' on both sides: concatenate (inputs -> an output with "
                            "'+') or split (an input with '+' -> outputs), not both at once",
                            text, joined[0].start, joined[0].end)


def _top_axes(terms: Sequence[Any]) -> list[Any]:
    found = []
    for term in terms:
        if type(term) is notation.Brackets:
            found.extend(_top_axes(term.terms))
        else:
            found.append(term)
    return found


def _plan_part(index: int, out: int, region: Region, axes: tuple[Any, ...], piece: Piece,
               lengths: Mapping[str, int], text: str, pattern: str,
               output_shape: tuple[int, ...], concatenated: bool, dtype: str | None,
               itemsize: int | None, backend: str, copy: bool | None,
               output_strides: tuple[int, ...] | None) -> Part:
    leaves: list[Leaf] = []
    leaf_shape: list[int] = []
    for dim in axes:
        flat = _flat_leaves(dim, text)
        leaves.extend(flat)
        leaf_shape.extend(notation.length_of(leaf, lengths) for leaf in flat)
    named = [leaf.name for leaf in leaves if leaf.name is not None]
    for leaf in leaves:
        if leaf.name is not None and named.count(leaf.name) > 1:
            raise pattern_error(f"axis {leaf.name!r} twice in an output: a diagonal is "
                                "taken from an input, never written to an output", text,
                                leaf.term.start, leaf.term.end)
    missing = [name for name in piece.names if name not in named]
    if missing:
        # the caret under the part's axes (a Sum's part stands for its whole group)
        spans = [(d.term.start, d.term.end) for d in axes]
        start, end = ((min(a for a, _ in spans), max(b for _, b in spans)) if spans
                      else (len(text), None))
        raise pattern_error(
            f"piece {index} ({piece.text!r} of input {piece.input}) fills output part "
            f"{index} ({_cell_text(axes) or 'a scalar'!r}), which lacks "
            f"{', '.join(map(repr, missing))}: every axis of a piece must be in its part",
            text, start, end)
    # the einops pattern from the piece's axes to the part (names renamed: '...0' is no
    # einops name); anonymous unit leaves become '()' axes or vanish inside a group,
    # anonymous leaves longer than 1 and names the piece lacks are repeated over
    einops_names: dict[str, str] = {}
    source = " ".join(_einops_name(name, einops_names) for name in piece.names)
    broadcast: list[str] = []
    new_names: dict[int, str] = {}

    def leaf_word(leaf: Leaf, position: int) -> str | None:
        if leaf.name is None:
            if leaf.length == 1:
                return None
            new_names[position] = f"r{position}"
            broadcast.append(f"r{position}")
            return f"r{position}"
        if leaf.name not in piece.names:
            broadcast.append(leaf.name)
        return _einops_name(leaf.name, einops_names)

    words = []
    position = 0
    for dim in axes:
        flat = _flat_leaves(dim, text)
        inner = []
        for leaf in flat:
            word = leaf_word(leaf, position)
            position += 1
            if word is not None:
                inner.append(word)
        if type(dim) is Leaf:
            words.append(inner[0] if inner else "()")
        else:
            words.append("(" + " ".join(inner) + ")")
    einops = f"{source} -> {' '.join(words)}"
    leaf_names = tuple(leaf.name if leaf.name is not None else new_names.get(k)
                       for k, leaf in enumerate(leaves))
    order = tuple(piece.names.index(name) for name in named if name in piece.names)
    copy_order: tuple[int, ...] = ()
    dst_strides: list[int] | None = None
    if output_strides is not None:
        # the slice's leaves' strides in the output's array, and the leaves in their
        # memory order (those of length 1 last: they move nothing)
        _, _, dst_strides = _split_strides(axes, output_strides, lengths, text)
        long_leaves = sorted((k for k, n in enumerate(leaf_shape) if n > 1),
                             key=lambda k: -dst_strides[k])
        if long_leaves != sorted(long_leaves):
            copy_order = tuple(long_leaves) + tuple(k for k, n in enumerate(leaf_shape)
                                                    if n <= 1)
    copier, how = _copy_method(piece, leaf_shape, leaf_names, order, region, output_shape,
                               concatenated, dtype, itemsize, backend, copy, einops, lengths,
                               broadcast, dst_strides, copy_order)
    return Part(piece=index, output=out, region=region, leaf_shape=tuple(leaf_shape),
                leaf_names=leaf_names, order=order, broadcast=tuple(broadcast),
                einops=einops, copier=copier, copy=how, text=_cell_text(axes),
                copy_order=copy_order)


def _copy_method(piece: Piece, leaf_shape: list[int], leaf_names: tuple[str | None, ...],
                 order: tuple[int, ...], region: Region, output_shape: tuple[int, ...],
                 concatenated: bool, dtype: str | None, itemsize: int | None, backend: str,
                 copy: bool | None, einops: str, lengths: Mapping[str, int],
                 broadcast: list[str], dst_strides: Sequence[int] | None = None,
                 copy_order: tuple[int, ...] = ()) -> tuple[str, str]:
    """How one part runs: ``(copier, what explain prints)``. Copiers: ``view`` (a
    view, or our rearrange's copy), ``kernel`` (the copy kernel into the slice: a
    C-contiguous block, or rows with gaps, which it fills by row copies), ``staged``
    (the kernel transposes into a buffer, then copies its rows into a slice whose rows
    have gaps), ``numpy`` (numpy's copyto), or the backend's name. ``dst_strides``: the
    slice's strides per leaf (elements; None: a C-contiguous output's), ``copy_order``
    its leaves in memory order."""
    if not concatenated:
        if backend != "numpy" or piece.strides is None:
            return "view", f"{backend}: rearrange (a view where its strides allow)"
        from .calls import plan_for
        from .layout import Layout

        if broadcast:
            return "view", "repeat: a broadcast view (stride 0 on the added axes)"
        plan = plan_for(einops, Layout(piece.shape, piece.strides, 0), {}, copy, dtype,
                        itemsize, "elements")
        return "view", ("view" if plan.is_view else "a copy by the kernel (as rearrange "
                        "does when no strides express it)")
    assert dst_strides is not None      # a concatenated output always has its layout
    if backend == "torch":
        if piece.strides is None or itemsize is None:
            copier, how = "numpy", "copy_"
        else:
            copier, how = _numpy_copier(piece, leaf_shape, leaf_names, order, dst_strides,
                                        copy_order, itemsize)
        how = how.replace("numpy copyto", "torch's copy_")
        return copier, (f"torch in plain eager without grad: {how} (torch's copy_ where "
                        "the kernel may not copy); torch.cat under autograd, transforms "
                        "or tracing")
    if backend != "numpy":
        return backend, f"{backend}: concatenate"
    if piece.strides is None or itemsize is None:
        return "numpy", "numpy copyto (strides not whole items)"
    return _numpy_copier(piece, leaf_shape, leaf_names, order, dst_strides, copy_order,
                         itemsize)


def _numpy_copier(piece: Piece, leaf_shape: list[int], leaf_names: tuple[str | None, ...],
                  order: tuple[int, ...], dst_strides: Sequence[int],
                  copy_order: tuple[int, ...], itemsize: int) -> tuple[str, str]:
    """The copy of one part into its slice of the output, by the two layouts: the
    source (the piece as the part's leaves) and the slice (``dst_strides`` per leaf),
    both taken in the slice's memory order (``copy_order``)."""
    if piece.strides is None:
        return "numpy", "numpy copyto (strides not whole items)"
    from .kernel.plan import ROW_VARIANTS, is_c_contiguous, plan_copy

    src_strides = _part_source_strides(piece, leaf_names, order)
    ranks = copy_order or range(len(leaf_shape))
    shape = tuple(leaf_shape[k] for k in ranks)
    src = tuple(src_strides[k] * itemsize for k in ranks)
    dst = tuple(dst_strides[k] * itemsize for k in ranks)
    into_block = plan_copy(shape, src, itemsize, "f")     # as if the slice were one block
    if into_block.variant in ("numpy", "empty"):
        return "numpy", "numpy copyto (small: below the kernel's threshold)"
    if is_c_contiguous(shape, dst, itemsize):
        return "kernel", f"a copy by the kernel ({into_block.variant})"
    kernel = plan_copy(shape, src, itemsize, "f", dst_strides_bytes=dst)
    if kernel.variant in ROW_VARIANTS:
        gaps = "" if kernel.variant == "contiguous-memcpy" and not kernel.dst_strides else \
            ", into rows with gaps"
        return "kernel", f"a copy by the kernel ({kernel.variant}{gaps})"
    if into_block.variant in ROW_VARIANTS:
        return "numpy", (f"numpy copyto: rows to rows (the part's rows have gaps; "
                         f"{kernel.reason})")
    return "staged", (f"the kernel ({into_block.variant}) into a buffer, then its rows "
                      "into the part's (they have gaps: an inner concatenation axis)")


def _part_source_strides(piece: Piece, leaf_names: Sequence[str | None],
                         order: Sequence[int]) -> list[int]:
    """The piece's strides (elements) laid out as the part's leaves: 0 where the part
    adds an axis or a unit."""
    assert piece.strides is not None
    result = []
    for name in leaf_names:
        if name is not None and name in piece.names:
            result.append(piece.strides[piece.names.index(name)])
        else:
            result.append(0)
    return result


# --------------------------------------------------------------------------- running


def _backend_of(x: Any) -> tuple[str, Any]:
    """``(name, backend module or None)`` of one input."""
    if type(x) is np.ndarray:
        return "numpy", None
    if isinstance(x, Tensor):
        raise ArgumentTypeError(
            "rearrange with a notation pattern (',', '+', a repeated axis) takes numpy, "
            "torch, dask or array-API arrays; for a rearrange.Tensor pass x.numpy()")
    if isinstance(x, np.generic):
        return "numpy", None
    from . import backends

    backend = backends.backend_for(x)
    if backend is None:
        if isinstance(x, (list, tuple)):
            raise ArgumentTypeError(
                "rearrange with a notation pattern takes one array per input expression; "
                f"got a {type(x).__name__} where an array was expected")
        try:
            np.asarray(x)
        except Exception:       # noqa: BLE001 - reported below as the wrong type
            pass
        if isinstance(x, (int, float, complex, bool)):
            return "numpy", None
        raise ArgumentTypeError(
            f"rearrange takes arrays; got {type(x).__module__}.{type(x).__name__}")
    name = backend.__name__.rsplit(".", 1)[-1].lstrip("_")
    if name == "numpy_subclass":
        return "numpy", None
    return name, backend


def _inputs(tensor: Any, parsed_inputs: int, pattern: str) -> list[Any]:
    """The call's arrays, one per input expression."""
    if parsed_inputs == 1:
        if isinstance(tensor, (list, tuple)):
            if not tensor:
                raise ArgumentTypeError("rearrange got an empty list")
            # without a comma a list keeps einops' meaning: stacked on a new first axis
            from .front import backend_of

            backend, array = backend_of(tensor, "rearrange")
            return [array if not isinstance(array, Tensor) else array.numpy()]
        return [tensor]
    if not isinstance(tensor, (list, tuple)):
        raise pattern_error(
            f"pattern has {parsed_inputs} input expressions (one per array); got one "
            f"{type(tensor).__name__}: pass a list or tuple of {parsed_inputs} arrays",
            pattern, 0, pattern.find("->") if "->" in pattern else len(pattern))
    return list(tensor)


def rearrange_notation(tensor: Any, pattern: str, copy: bool | None,
                       axes_lengths: Mapping[str, Any]) -> Any:
    """``rearrange`` for a notation pattern (see the module's docstring): the call's
    arrays, one per input expression, then :func:`rearrange.front.run` of
    :data:`NOTATION`. numpy's warm path ahead of it: the door's key (:func:`_key`)
    written out from the arrays' layouts (plain-int lengths), one lookup; a hit runs
    with the door's error handling."""
    kind = type(tensor)
    if not axes_lengths or _PLAIN_INT.issuperset(map(type, axes_lengths.values())):
        key: Any = None
        if kind is _ndarray:
            key = (_TAG, pattern, copy, tuple(axes_lengths.items()),
                   ((_ndarray, tensor.shape, tensor.strides, tensor.dtype),))
            arrays: Any = (tensor,)
        elif (kind is tuple or kind is list) and len(tensor) > 1:
            # several arrays: one per input expression (a single array in a list is
            # stacked, as einops does, and is not this key's)
            layouts: list[Any] = []
            for array in tensor:
                if type(array) is not _ndarray:
                    break
                layouts.append((_ndarray, array.shape, array.strides, array.dtype))
            else:
                key = (_TAG, pattern, copy, tuple(axes_lengths.items()), tuple(layouts))
                arrays = tensor
        if key is not None:
            runner = _entries.get(key)
            if runner is not None:
                PLANS.hits += 1
                try:
                    return runner(arrays)
                except (RearrangeError, MemoryError, RuntimeError) as error:
                    raised = front.failure(NOTATION, error, pattern, arrays, axes_lengths,
                                           copy)
                    if raised is None:
                        raise
                    raise raised from None
    arrays = _inputs(tensor, len(parse_notation(pattern).inputs), pattern)
    return front.run(NOTATION, arrays, pattern, axes_lengths, copy)


_PLAIN_INT = front.PLAIN_INT
_ndarray = np.ndarray
_entries = PLANS.entries
# The plan cache's tag of a notation rearrange's key (:func:`_key`)
_TAG = "rearrange-notation"


def _door_inputs(arrays: Sequence[Any]) -> tuple[tuple[str, Any], list[Any]]:
    """``((library name, backend module or None), the arrays)``: one library for all
    (numpy scalars and subclasses as numpy arrays), else an ArgumentTypeError."""
    kinds = [_backend_of(a) for a in arrays]
    names = {name for name, _ in kinds}
    if len(names) > 1:
        raise ArgumentTypeError(f"rearrange got a mix of array types: {', '.join(sorted(names))}")
    name, backend = kinds[0]
    if name == "numpy":
        arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in arrays]
    return (name, backend), list(arrays)


def _key(library: tuple[str, Any], arrays: Sequence[Any], pattern: str,
         axes_lengths: Mapping[str, Any], copy: bool | None) -> Any:
    """``(_TAG, pattern, copy, lengths, per array its :func:`_layout_key`)``, as the
    warm path in :func:`rearrange_notation` writes it for numpy."""
    name, backend = library
    return (_TAG, pattern, copy, tuple(axes_lengths.items()),
            tuple(_layout_key(name, backend, a) for a in arrays))


def _door_plan(library: tuple[str, Any], arrays: Sequence[Any], pattern: str,
               axes_lengths: Mapping[str, Any], copy: bool | None) -> NotationPlan:
    """The plan, and copy=False refused for a concatenation; errors with the call's
    context."""
    name, backend = library
    try:
        plan = _plan_for_arrays(name, backend, arrays, pattern, axes_lengths, copy)
        if copy is False and any(plan.concatenated):
            raise NoViewError("copy=False asks for views; a concatenation writes a new array")
        return plan
    except RearrangeError as error:
        raise _context(error, pattern, arrays, axes_lengths, copy) from None


def _door_lower(library: tuple[str, Any], plan: NotationPlan, arrays: Sequence[Any],
                axes_lengths: Mapping[str, Any], copy: bool | None) -> Callable:
    name, backend = library
    return _lower(plan, name, backend, copy)


def _door_traced(library: tuple[str, Any], arrays: Sequence[Any],
                 axes_lengths: Mapping[str, Any], copy: bool | None) -> bool:
    name, backend = library
    return backend is not None and any(_hook(backend, "traced")(a, axes_lengths)
                                       for a in arrays)


def _door_lower_traced(library: tuple[str, Any], arrays: Sequence[Any], pattern: str,
                       axes_lengths: Mapping[str, Any], copy: bool | None) -> Callable:
    return _door_lower(library, _door_plan(library, arrays, pattern, axes_lengths, copy),
                       arrays, axes_lengths, copy)


def _context(error: RearrangeError, pattern: str, arrays: Sequence[Any],
             axes_lengths: Mapping[str, Any], copy: bool | None) -> RearrangeError:
    from .calls import with_context

    shapes = [tuple(a.shape) for a in arrays]
    return with_context(error, pattern, shapes[0] if len(shapes) == 1 else shapes,
                        axes_lengths)


#: ``rearrange`` with a notation pattern as the door takes it: the inputs are the call's
#: arrays (one per input expression), the extras ``copy``.
NOTATION = front.Operation(
    name="rearrange", parse_kind="notation", inputs=_door_inputs, key=_key,
    plan=_door_plan, lower=_door_lower, context=_context, traced=_door_traced,
    lower_traced=_door_lower_traced)


def _hook(backend: Any, name: str) -> Any:
    from .backends.protocol import hook

    return hook(backend, name)


def _layout_key(name: str, backend: Any, array: Any) -> Any:
    """One input's part of :func:`_key`: numpy's ``(ndarray, shape, strides, dtype)``;
    another library's ``(type, backend.cache_key(array))`` (kept nested: torch's
    cache_key is a list — unhashable — for traced sizes, and must stay so)."""
    if name == "numpy":
        return _ndarray, array.shape, array.strides, array.dtype
    return type(array), backend.cache_key(array)


def _plan_for_arrays(name: str, backend: Any, arrays: Sequence[Any], pattern: str,
                     axes_lengths: Mapping[str, Any], copy: bool | None) -> NotationPlan:
    shapes = [tuple(a.shape) for a in arrays]
    if name == "numpy":
        layouts = [numpy_layout(a) for a in arrays]
        strides = [lay.strides if unit == "elements" else None for lay, unit in layouts]
        dtype = np.result_type(*arrays)
        return plan_notation(pattern, shapes, strides, dtype.name, dtype.itemsize,
                             axes_lengths, "numpy", copy)
    if name == "torch":
        # traced sizes: no strides, so no copy is planned from sizes (a guard each)
        traced = not all(type(n) is int for shape in shapes for n in shape)
        strides = None if traced else [tuple(a.stride()) for a in arrays]
        dtype = str(arrays[0].dtype).removeprefix("torch.")
        return plan_notation(pattern, shapes, strides, dtype, arrays[0].element_size(),
                             axes_lengths, "torch", copy)
    return plan_notation(pattern, shapes, None, str(arrays[0].dtype), None, axes_lengths,
                         name, copy)


def _slices(region: Region) -> tuple[slice, ...]:
    return tuple(slice(None) if r is None else slice(r[0], r[1]) for r in region)


def _lower(plan: NotationPlan, name: str, backend: Any, copy: bool | None) -> Callable:
    if name == "numpy":
        return _lower_numpy(plan, copy)
    return _lower_generic(plan, name, backend, copy)


def _numpy_piece(piece: Piece) -> Callable[[np.ndarray], np.ndarray]:
    """The view of an input that is ``piece``."""
    index = _slices(piece.region)
    sliced = any(r is not None for r in piece.region)
    leaf_shape = piece.leaf_shape
    positions: list[list[int]] = [[] for _ in piece.names]
    for k, leaf in enumerate(piece.leaf_names):
        if leaf is not None:
            positions[piece.names.index(leaf)].append(k)
    diagonal = piece.is_diagonal
    shape = piece.shape
    as_strided = np.lib.stride_tricks.as_strided

    def view(x: np.ndarray) -> np.ndarray:
        if sliced:
            x = x[index]
        x = x.reshape(leaf_shape)       # splitting axes: always a view
        if diagonal:
            strides = x.strides
            return as_strided(x, shape, tuple(sum(strides[p] for p in group)
                                              for group in positions),
                              writeable=x.flags.writeable)
        return x.reshape(shape)         # dropping unit axes: a view
    return view


def _lower_numpy(plan: NotationPlan, copy: bool | None) -> Callable:
    piece_views = [_numpy_piece(p) for p in plan.pieces]
    outputs: list[Callable] = []
    for out, shape in enumerate(plan.output_shapes):
        parts = [p for p in plan.parts if p.output == out]
        if not plan.concatenated[out]:
            outputs.append(_numpy_view_output(parts[0], plan, piece_views, copy))
        else:
            outputs.append(_numpy_concatenation(parts, shape, plan, piece_views))
    dtype = np.dtype(plan.dtype) if plan.dtype else None
    single = len(outputs) == 1
    if single:
        make = outputs[0]
        return lambda arrays: make(arrays, dtype)

    def run(arrays: Sequence[np.ndarray]) -> Any:
        results = tuple(make(arrays, dtype) for make in outputs)
        return results[0] if single else results
    return run


def _numpy_view_output(part: Part, plan: NotationPlan, piece_views: list, copy: bool | None
                       ) -> Callable:
    piece = plan.pieces[part.piece]
    view = piece_views[part.piece]
    renamed = _rename_lengths(part)

    def make(arrays: Sequence[np.ndarray], dtype: Any) -> np.ndarray:
        x = view(arrays[piece.input])
        return _transform(x, part.einops, copy, renamed)
    return make


def _transform(x: Any, pattern: str, copy: bool | None, added: Mapping[str, int]) -> Any:
    """Our own rearrange of a piece (``repeat`` when the part adds axes of ``added``
    lengths): a view wherever strides allow, else the planned copy."""
    from .front import run_transform

    return run_transform("repeat" if added else "rearrange", x, pattern, None, copy, added)


def _rename_lengths(part: Part) -> dict[str, int]:
    """The lengths of the axes a part adds, under their einops names."""
    if not part.broadcast:
        return {}
    target = part.einops.split(" -> ")[1]
    # the einops names of the added names: position-wise through the part's leaves
    # (an anonymous unit leaf has no word: '()' or nothing inside a group)
    words = target.replace("(", " ").replace(")", " ").split()
    lengths = {}
    named = [n for n in part.leaf_names if n is not None]
    sizes = [s for n, s in zip(part.leaf_names, part.leaf_shape) if n is not None]
    for word, name, size in zip(words, named, sizes):
        if name in part.broadcast:
            lengths[word] = size
    return lengths


def _numpy_source(piece: Piece, part: Part, view: Callable, input_shape: tuple[int, ...]
                  ) -> tuple[Callable[[np.ndarray], np.ndarray], tuple[int, ...]]:
    """The piece as a view shaped like the part's leaves (a unit axis where the part has
    an axis the piece lacks), with only the numpy calls that change something; and that
    view's shape."""
    unit_shape = tuple(s if n is not None and n in piece.names else 1
                       for n, s in zip(part.leaf_names, part.leaf_shape))
    order = part.order
    permuted = tuple(piece.shape[k] for k in order)
    plain = not piece.is_diagonal and all(r is None for r in piece.region)
    if plain and order == tuple(range(len(order))):
        if unit_shape == input_shape:
            return (lambda x: x), unit_shape
        return (lambda x: x.reshape(unit_shape)), unit_shape
    if plain and piece.shape == input_shape:
        if permuted == unit_shape:
            return (lambda x: x.transpose(order)), unit_shape
        return (lambda x: x.transpose(order).reshape(unit_shape)), unit_shape
    return (lambda x: view(x).transpose(order).reshape(unit_shape)), unit_shape


def _numpy_concatenation(parts: list[Part], shape: tuple[int, ...], plan: NotationPlan,
                         piece_views: list) -> Callable:
    """One concatenated output: a new array in the plan's layout (C order, or its axes
    in the inputs' memory order: the output a transposed view of it), each part's piece
    copied into its slice, both taken in the slice's memory order."""
    from .kernel import copy_parts_into

    layout = plan.layout_of(parts[0].output)
    buffer_shape = layout.buffer_shape(shape)
    inverse = tuple(layout.order.index(k) for k in range(len(shape)))
    c_order = layout.is_c_order
    steps = []
    for part in parts:
        piece = plan.pieces[part.piece]
        source, unit_shape = _numpy_source(piece, part, piece_views[part.piece],
                                           plan.input_shapes[piece.input])
        region_shape = tuple(n if r is None else r[1] - r[0]
                             for n, r in zip(shape, part.region))
        memory_shape = tuple(part.leaf_shape[k] for k in part.copy_order)
        steps.append((piece.input, source, unit_shape != part.leaf_shape,
                      region_shape != part.leaf_shape, part.leaf_shape,
                      _slices(part.region), part.copier, part.copy_order, memory_shape))
    copyto, empty, broadcast_to = np.copyto, np.empty, np.broadcast_to

    def make(arrays: Sequence[np.ndarray], dtype: Any) -> np.ndarray:
        if c_order:
            out = empty(shape, dtype=dtype)
        else:
            out = empty(buffer_shape, dtype=dtype).transpose(inverse)
        into_buffers = []       # staged parts' transposing copies, each into a buffer
        into_slices = []        # the kernel's copies into the slices: one job
        for (source, src_of, broadcast, split, leaf_shape, index, copier, copy_order,
             memory_shape) in steps:
            src = src_of(arrays[source])
            dst = out[index]
            if split:
                dst = dst.reshape(leaf_shape)       # splitting axes: always a view
            if copier == "numpy" or src.dtype != dtype:
                copyto(dst, src, casting="unsafe")
                continue
            if broadcast:
                src = broadcast_to(src, leaf_shape)
            if copy_order:                          # both in the slice's memory order
                dst, src = dst.transpose(copy_order), src.transpose(copy_order)
            if copier == "kernel":
                into_slices.append((dst, src))
            else:   # staged: a transposing copy into a buffer, then rows into the gaps
                buffer = empty(memory_shape if copy_order else leaf_shape, dtype)
                into_buffers.append((buffer, src))
                into_slices.append((dst, buffer))
        # Every part in one fork-join of the kernel's threads (the buffers first: their
        # rows are parts' sources), each part copied once, by the kernel where its rules
        # take it (else numpy's copy, as copy_into would).
        if into_buffers:
            copy_parts_into(into_buffers)
        if into_slices:
            copy_parts_into(into_slices)
        return out
    return make


def _lower_generic(plan: NotationPlan, name: str, backend: Any, copy: bool | None) -> Callable:
    """torch, dask, array-API: pieces by indexing, reshape and (for a diagonal) the
    backend's einsum; parts by our own rearrange/repeat; concatenated outputs by the
    backend's concat (torch in plain eager without grad: empty + a copy per slice)."""
    pieces = [_generic_piece(p, backend) for p in plan.pieces]
    makers = []
    for out, shape in enumerate(plan.output_shapes):
        parts = [p for p in plan.parts if p.output == out]
        makers.append((out, shape, parts))

    def part_value(part: Part, arrays: Sequence[Any]) -> Any:
        piece = plan.pieces[part.piece]
        x = pieces[part.piece](arrays[piece.input])
        return _transform(x, part.einops, copy, _rename_lengths(part))

    def run(arrays: Sequence[Any]) -> Any:
        results = []
        for out, shape, parts in makers:
            if not plan.concatenated[out]:
                results.append(part_value(parts[0], arrays))
                continue
            if name == "torch":
                from .backends._torch import plain_eager

                if all(plain_eager(a) for a in arrays) and not _grad(arrays):
                    results.append(_torch_into(plan, parts, shape, arrays, pieces))
                    continue
            results.append(_joined(plan, parts, arrays, part_value, backend))
        return results[0] if len(results) == 1 else tuple(results)
    return run


def _grad(arrays: Sequence[Any]) -> bool:
    import torch

    return torch.is_grad_enabled() and any(a.requires_grad for a in arrays)


def _joined(plan: NotationPlan, parts: list[Part], arrays: Sequence[Any],
            part_value: Callable, backend: Any) -> Any:
    """The parts of one output concatenated along its split axes, the last first."""
    values = [part_value(p, arrays) for p in parts]
    # parts are row-major over the concatenated axes: join the innermost first
    for axis, count in reversed(plan.joins[parts[0].output]):
        values = [backend.concat(values[i:i + count], axis)
                  for i in range(0, len(values), count)]
    return values[0]


def _torch_into(plan: NotationPlan, parts: list[Part], shape: tuple[int, ...],
                arrays: Sequence[Any], pieces: list) -> Any:
    """torch in plain eager without grad: one new tensor, a copy into each slice (the
    copy kernel where it may copy and the slice is contiguous, else torch's copy_)."""
    import torch

    from .backends._torch import kernel_may_copy
    from .kernel import copy_into

    dtype = arrays[0].dtype
    for a in arrays[1:]:
        dtype = torch.promote_types(dtype, a.dtype)
    out = torch.empty(shape, dtype=dtype, device=arrays[0].device)
    for part in parts:
        piece = plan.pieces[part.piece]
        src = pieces[part.piece](arrays[piece.input]).permute(part.order)
        unit_shape = tuple(s if n is not None and n in piece.names else 1
                           for n, s in zip(part.leaf_names, part.leaf_shape))
        src = src.reshape(unit_shape).expand(part.leaf_shape)
        dst = out[_slices(part.region)].view(part.leaf_shape)
        if part.copier == "numpy" or src.dtype != dtype or not kernel_may_copy(src):
            dst.copy_(src)
            continue
        target = dst if part.copier == "kernel" else torch.empty(part.leaf_shape,
                                                                 dtype=dtype)
        try:
            target_memory, source = target.numpy(), src.numpy()
        except TypeError:           # a dtype numpy cannot view (bfloat16, ...)
            dst.copy_(src)
            continue
        copy_into(target_memory, source)
        if target is not dst:       # staged: rows into the slice's gapped rows
            dst.copy_(target)
    return out


def _generic_piece(piece: Piece, backend: Any) -> Callable[[Any], Any]:
    index = _slices(piece.region)
    sliced = any(r is not None for r in piece.region)
    leaf_shape = piece.leaf_shape
    shape = piece.shape
    subscripts = None
    if piece.is_diagonal:
        letters = {}
        for leaf in piece.leaf_names:
            if leaf is not None and leaf not in letters:
                letters[leaf] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[
                    len(letters)]
        kept = tuple(s for s, n in zip(leaf_shape, piece.leaf_names) if n is not None)
        source = "".join(letters[n] for n in piece.leaf_names if n is not None)
        subscripts = (kept, f"{source}->{''.join(letters[n] for n in piece.names)}")

    def view(x: Any) -> Any:
        if sliced:
            x = x[index]
        x = backend.reshape(x, leaf_shape)
        if subscripts is not None:
            return backend.einsum(subscripts[1], backend.reshape(x, subscripts[0]))
        return backend.reshape(x, shape)
    return view


# --------------------------------------------------------------------------- explain


def explain_concatenation(x_or_shapes: Any, pattern: str, *, strides: Any = None,
                          dtype: Any = None, copy: bool | None = None,
                          **axes_lengths: int) -> NotationPlan:
    """The plan ``rearrange(x_or_shapes, pattern)`` follows, without touching data:
    arrays (numpy or torch: their strides count) or shapes (C-contiguous, or
    ``strides=`` one tuple per input, in elements) and ``dtype``."""
    parsed = parse_notation(pattern)
    if len(parsed.inputs) == 1 and not (isinstance(x_or_shapes, (list, tuple)) and
                                        x_or_shapes and not _is_shape(x_or_shapes)
                                        and len(x_or_shapes) == 1):
        items = [x_or_shapes]
    elif isinstance(x_or_shapes, (list, tuple)):
        items = list(x_or_shapes)
    else:
        items = [x_or_shapes]
    axes_lengths = canonical_lengths(axes_lengths)
    if all(_is_shape(item) for item in items):
        shapes = [tuple(int(n) for n in item) for item in items]
        from .layout import row_major_strides

        if strides is None:
            strides = [row_major_strides(s) for s in shapes]
        name = np.dtype(dtype or "float32")
        return plan_notation(pattern, shapes, [tuple(s) for s in strides], name.name,
                             name.itemsize, axes_lengths, "numpy", copy)
    kinds = [_backend_of(item) for item in items]
    backend_name, backend = kinds[0]
    arrays = [np.asarray(a) if backend_name == "numpy" else a for a in items]
    return _plan_for_arrays(backend_name, backend, arrays, pattern, axes_lengths, copy)


def _is_shape(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(n, (int, np.integer))
                                            and not isinstance(n, bool) for n in value)
