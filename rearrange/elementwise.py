"""Elementwise operations by axis name: ``add(x, bias, 'b t c, c')``.

einx's elementwise family (einx 0.4.3 is the oracle) with einops' calling convention:
the arrays first, the pattern last, axis lengths as keywords::

    add(x, bias, 'b t c, c')               output 'b t c' (the input holding every axis)
    multiply(a, b, 'a, b -> a b')          an outer product
    where(mask, x, 0.0, 'a b, a b,')       a scalar is an empty expression
    subtract(x, m, '(a b), a -> a b')      compositions split (a view), merged in the output

The stages, each pure until the last:

* parse — :func:`rearrange.notation.parse_notation`;
* plan — :func:`plan_elementwise`: the output's axes (given after ``->``, else einx's
  rule: the one input expression holding every other input's axis names, unit axes
  ``1`` not counted, and that choice unique) and, per input, how it becomes a view in
  the output's axis order: split its compositions (a reshape that splits a dim is
  always a view), take the diagonal of a name it repeats (one axis whose stride is the
  sum of the two), permute into the output's order and give it a unit axis where it
  lacks one — a broadcast axis of stride 0 once the operation broadcasts it. No step
  copies, whatever the strides. The operation then runs once, writing the output;
* lower — per array family: numpy (``ufunc(*views, order='C')``: numpy allocates the
  output, C-contiguous in the output's axis order, and writes it in one pass), torch
  (``reshape``/``diagonal``/``permute`` and the torch function, so autograd,
  ``torch.compile`` and ``torch.export`` see torch ops), dask and array-API namespaces
  (jax) through their own functions;
* run — the lowered runner, kept in :data:`rearrange.caching.PLANS` under
  ``("elementwise", op, pattern, per input (type, shape, dtype), lengths)``. The runner
  depends on no stride (every step is a view whatever the strides), so strides are not
  part of the key; ``explain_elementwise`` reads them to show each view's strides.

dtypes are the array library's own promotion: the views are handed to numpy's ufunc or
torch's function as they are, Python numbers included (numpy and torch treat them as
"weak" scalars; einx turns them into arrays first, which differs for e.g. a float32
array plus ``1.5``: numpy and this module give float32, einx float64).
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import front
from .caching import PLANS
from .calls import canonical_lengths
from .errors import ArgumentTypeError, PatternError, RearrangeError
from .notation import (Brackets, Dots, Expression, Group, Leaf, Name, Number,
                       expand, leaves, parse_notation, solve)
from .parsing import pattern_error, shorten
from .recipe import is_symbolic
from .records import record

__all__ = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "logaddexp",
           "where", "explain_elementwise", "plan_elementwise", "ElementwisePlan",
           "InputView", "ELEMENTWISE_OPS"]


@record
class Operation:
    """What an elementwise operation computes and how many inputs it takes."""

    name: str
    min_inputs: int
    max_inputs: int | None   # None: any number, folded left ((x0 op x1) op x2 ...)
    numpy: str               # numpy's function (a ufunc, or ``where``)
    torch: str               # torch's function


#: The operations, by their public name.
ELEMENTWISE_OPS: dict[str, Operation] = {op.name: op for op in (
    Operation("add", 1, None, "add", "add"),
    Operation("subtract", 2, 2, "subtract", "sub"),
    Operation("multiply", 1, None, "multiply", "mul"),
    Operation("divide", 2, 2, "divide", "div"),
    Operation("maximum", 1, None, "maximum", "maximum"),
    Operation("minimum", 1, None, "minimum", "minimum"),
    Operation("logaddexp", 1, None, "logaddexp", "logaddexp"),
    Operation("where", 3, 3, "where", "where"),
)}

_SCALAR_TYPES = (bool, int, float, complex)
_PYTHON_NUMBERS = frozenset(_SCALAR_TYPES)
_PLAIN_INT = frozenset({int})


# --------------------------------------------------------------------------- the plan


@record
class InputView:
    """How one input becomes a view in the output's axis order. The steps, each a view
    and each skipped when None/empty: ``split`` (reshape into the elementary axes),
    ``diagonals`` (for each pair of axes of one name, in turn: the diagonal, which
    replaces the pair by one axis at the end), ``permutation`` (into the output's order),
    ``unit_shape`` (reshape inserting unit axes where the output has an axis the input
    lacks; leading ones are left to broadcasting)."""

    expression: str                     # the input's expression ('' for a scalar)
    scalar: bool                        # a Python number: handed to the operation as is
    shape: tuple[Any, ...]              # the input's shape
    strides: tuple[int, ...] | None     # the input's strides in elements (None: unknown)
    split: tuple[Any, ...] | None
    diagonals: tuple[tuple[int, int], ...]
    permutation: tuple[int, ...] | None
    unit_shape: tuple[Any, ...] | None
    view_shape: tuple[Any, ...]         # the view, over every output axis: 1 where it lacks
    view_strides: tuple[int, ...] | None  # ... and its strides: 0 where it lacks the axis


@record
class ElementwisePlan:
    """An elementwise operation as it runs: every input a view (:class:`InputView`) in
    the order of the output's elementary axes, the operation run once over them into a
    fresh output of ``axes`` lengths, reshaped into ``output_shape`` (a view: the output
    is C-contiguous) when the output expression groups axes."""

    op: str
    pattern: str
    output_expression: str
    axes: tuple[tuple[str, Any], ...]   # the output's elementary axes and their lengths
    output_shape: tuple[Any, ...]
    inputs: tuple[InputView, ...]
    expand_first: bool   # some output axis is in no input: the first view is broadcast
                         # to every output axis (stride 0) so the result has them all
    grouped: bool        # the output has compositions or unit axes: a reshape at the end
                         # (a view: the fresh output is C-contiguous)

    @property
    def is_view(self) -> bool:
        """Every input is read through a view: always (no step of the plan copies)."""
        return True

    @property
    def elementary_shape(self) -> tuple[Any, ...]:
        return tuple(length for _, length in self.axes)

    def computation(self, library: str = "numpy") -> str:
        """The one computation, written as the library's calls over the views x0, x1...
        (numpy: the ufunc allocates the output, C-contiguous, with ``order='C'``; a third
        input and more are folded into it, in place where the dtype allows)."""
        operation = ELEMENTWISE_OPS[self.op]
        names = [f"x{k}" for k in range(len(self.inputs))]
        numpy = library == "numpy"
        function = f"np.{operation.numpy}" if numpy else f"torch.{operation.torch}"
        if len(names) == 1:
            return f"a copy of {names[0]}"
        if operation.name == "where":
            if numpy and self.grouped:
                return "out = np.empty(...); np.copyto(out, x2); np.copyto(out, x1, where=x0)"
            return f"{function}({', '.join(names)})"
        call = f"{function}(x0, x1{', order=' + repr('C') if numpy else ''})"
        if len(names) == 2:
            return call
        rest = "; ".join(f"{function}(out, {name}{', out=out' if numpy else ''})"
                         for name in names[2:])
        return f"out = {call}; {rest}"

    def __str__(self) -> str:
        axes = " ".join(name for name, _ in self.axes)
        lines = [f"{self.op} '{shorten(self.pattern)}' over axes ({axes}) "
                 f"{_shape_text(self.elementary_shape)}: every input a view, one "
                 "computation, no copy"]
        for k, view in enumerate(self.inputs):
            where = f"x{k}  '{view.expression}'"
            if view.scalar:
                lines.append(f"  {where}: a Python number, broadcast by the operation")
                continue
            steps = []
            if view.split is not None:
                steps.append(f"split {_shape_text(view.split)}")
            for first, second in view.diagonals:
                steps.append(f"diagonal of axes {first} and {second}")
            if view.permutation is not None:
                steps.append(f"permute {view.permutation}")
            if view.unit_shape is not None:
                steps.append(f"unit axes {_shape_text(view.unit_shape)}")
            strides = ("" if view.strides is None
                       else f" strides {_shape_text(view.strides)}")
            view_strides = ("" if view.view_strides is None
                            else f" strides {_shape_text(view.view_strides)}")
            lacks = [name for (name, _), size, (_, length) in
                     zip(self.axes, view.view_shape, self.axes) if size == 1 and length != 1]
            broadcast = f" (stride 0 on {' '.join(lacks)})" if lacks else ""
            lines.append(f"  {where} shape {_shape_text(view.shape)}{strides} -> view "
                         f"{_shape_text(self.elementary_shape)}{view_strides}{broadcast}"
                         f": {', '.join(steps) if steps else 'the array itself'}")
        lines.append(f"  run: {self.computation('numpy')}  (numpy; torch: "
                     f"{self.computation('torch')})")
        if self.expand_first:
            lines.append("  (x0 broadcast to every output axis first: some output axis "
                         "is in no input)")
        if self.grouped:
            lines.append(f"  output '{self.output_expression}': reshape to "
                         f"{_shape_text(self.output_shape)} (a view of the fresh output)")
        return "\n".join(lines)

    def explain(self) -> str:
        return str(self)

    def to_svg(self) -> str:
        """A picture of the plan as SVG text: each input over its storage, the view
        the operation reads of it (stride 0 on the axes it lacks), the new array (see
        :meth:`rearrange.Plan.to_svg`)."""
        from .picture import elementwise_svg

        return elementwise_svg(self)

    def _repr_html_(self) -> str:
        """Notebooks: the explain table and the picture."""
        from .picture import html_fragment

        return html_fragment(str(self), self.to_svg())


def _shape_text(values: Sequence[Any]) -> str:
    inner = ", ".join(str(v) for v in values)
    return f"({inner},)" if len(values) == 1 else f"({inner})"


# --------------------------------------------------------------------------- planning


def _check_terms(expression: Expression, text: str) -> None:
    """Brackets and concatenations mean nothing to an elementwise operation."""
    stack = list(expression.terms)
    while stack:
        term = stack.pop()
        if type(term) is Brackets:
            raise pattern_error("brackets '[ ]' are not allowed in an elementwise "
                                "operation: every axis is elementwise", text, term.start,
                                term.end)
        if type(term) is Group:
            if term.is_concatenation:
                raise pattern_error("a concatenation '+' is not allowed in an elementwise "
                                    "operation", text, term.start, term.end)
            stack.extend(t for part in term.parts for t in part)


def _has_number(expression: Expression) -> bool:
    stack = list(expression.terms)
    while stack:
        term = stack.pop()
        if type(term) is Number:
            return True
        if type(term) is Group:
            stack.extend(t for part in term.parts for t in part)
    return False


def _names(expression: Expression, index: int) -> frozenset:
    """The axis names einx's rule compares: names, '...' (one name for the run), and
    each number other than 1 a name of its own (einx gives every number a unique name)."""
    found = set()
    stack = [(term, k) for k, term in enumerate(expression.terms)]
    while stack:
        term, k = stack.pop()
        if type(term) is Name:
            found.add(term.name)
        elif type(term) is Dots:
            found.add("...")
        elif type(term) is Number:
            if term.value != 1:
                found.add(("number", index, term.start))
        elif type(term) is Group:
            stack.extend((t, k) for part in term.parts for t in part)
    return frozenset(found)


def _same_expression_key(expression: Expression, text: str, index: int) -> Any:
    """Two input expressions einx counts as one candidate output: the same terms (an
    expression with a number never equals another: einx names each number uniquely)."""
    if _has_number(expression):
        return ("unique", index)
    return " ".join(text[expression.start:expression.end].split()).replace("( ", "(") \
        .replace(" )", ")")


def implicit_output(pattern: Any) -> int:
    """The index of the input whose expression is the output (einx's rule, exactly): the
    one input expression that holds the axis names of every other input (unit axes
    ``1`` not counted), that choice unique (equal expressions count once)."""
    inputs = pattern.inputs
    if len(inputs) == 1:
        return 0
    names = [_names(expression, k) for k, expression in enumerate(inputs)]
    parents: dict[Any, int] = {}
    for i, parent in enumerate(names):
        if all(child <= parent for j, child in enumerate(names) if j != i):
            parents.setdefault(_same_expression_key(inputs[i], pattern.text, i), i)
    if len(parents) != 1:
        found = ("no input expression holds the axis names of every other input"
                 if not parents else
                 "several input expressions hold the axis names of every other input ("
                 + ", ".join(repr(pattern.text[inputs[i].start:inputs[i].end])
                             for i in parents.values()) + ")")
        raise pattern_error(
            f"the output expression is missing and cannot be inferred: {found}; write it "
            "after '->' (einx's rule: the output is the one input expression that holds "
            "the axis names of every other input, unit axes '1' not counted)",
            pattern.text, 0, len(pattern.text))
    return next(iter(parents.values()))


def _leaf_keys(dims: Sequence[Any], index: int) -> list[Any]:
    """Each elementary axis' identity: its name; a number other than 1 an axis of its
    own (identified by the input and position it comes from); a unit axis None."""
    keys = []
    for leaf in leaves(dims):
        if leaf.name is not None:
            keys.append(leaf.name)
        elif leaf.length == 1:
            keys.append(None)
        else:
            keys.append(("number", index, leaf.term.start))
    return keys


def _leaf_lengths(dims: Sequence[Any], lengths: Mapping[str, Any]) -> list[Any]:
    return [leaf.length if leaf.name is None else lengths[leaf.name] for leaf in leaves(dims)]


def _split_strides(dims: Sequence[Any], strides: Sequence[int],
                   lengths: Mapping[str, Any]) -> list[int]:
    """The strides of the elementary axes, each dim's stride split over its leaves."""
    result: list[int] = []
    for dim, stride in zip(dims, strides):
        sizes = _leaf_lengths((dim,), lengths)
        inner = []
        for size in reversed(sizes):
            inner.append(stride)
            stride = stride * size
        result.extend(reversed(inner))
    return result


def plan_elementwise(op: str, pattern: str, shapes: Sequence[tuple[Any, ...] | None],
                     axes_lengths: Mapping[str, Any] | None = None,
                     strides: Sequence[tuple[int, ...] | None] | None = None) -> ElementwisePlan:
    """The plan of ``op`` over inputs of ``shapes`` (None: a Python number), from the
    pattern, the shapes and the given lengths (``strides``, in elements, only for the
    plan's text). Raises PatternError (with a caret) for a pattern that does not fit."""
    operation = ELEMENTWISE_OPS[op]
    parsed = parse_notation(pattern)
    text = parsed.text
    count = len(parsed.inputs)
    if count != len(shapes):
        raise PatternError(f"pattern has {count} input expression{'s' * (count != 1)}; "
                           f"{op}() got {len(shapes)} array{'s' * (len(shapes) != 1)}\n"
                           f"  pattern '{shorten(text)}'")
    if count < operation.min_inputs or (operation.max_inputs is not None
                                        and count > operation.max_inputs):
        wanted = (f"exactly {operation.min_inputs}" if operation.max_inputs ==
                  operation.min_inputs else f"at least {operation.min_inputs}")
        raise PatternError(f"{op}() takes {wanted} input{'s' * (operation.min_inputs != 1)}"
                           f"; got {count}\n  pattern '{shorten(text)}'")
    if parsed.outputs is not None and len(parsed.outputs) != 1:
        raise pattern_error(f"{op}() has one output; the pattern has "
                            f"{len(parsed.outputs)} output expressions", text,
                            parsed.outputs[0].start, parsed.outputs[-1].end)
    for expression in parsed.expressions:
        _check_terms(expression, text)
    for name, length in (axes_lengths or {}).items():
        if is_symbolic(length):
            continue
        if isinstance(length, bool) or not hasattr(length, "__index__") \
                or length.__index__() < 0:
            raise PatternError(f"axis length {name}={length!r} must be a non-negative "
                               f"integer\n  pattern '{shorten(text)}'")
    # how many axes '...' stands for: the same in every input that shows it at the top
    dots = None
    for expression, shape in zip(parsed.inputs, shapes):
        count_here = _dots_count(expression, 0 if shape is None else len(shape))
        if count_here is None:
            continue
        if dots is not None and count_here != dots:
            raise pattern_error(f"'...' stands for {dots} axes in one input and "
                                f"{count_here} in another", text, expression.start,
                                expression.end)
        dots = count_here
    input_dims = [expand(expression, text, rank=0 if shape is None else len(shape),
                         dots=dots) for expression, shape in zip(parsed.inputs, shapes)]
    lengths = solve(input_dims, [() if s is None else s for s in shapes], text,
                    axes_lengths or {})
    if parsed.outputs is None:
        chosen = implicit_output(parsed)
        output_expression = parsed.inputs[chosen]
        output_dims = input_dims[chosen]
        output_keys = _leaf_keys(output_dims, chosen)
    else:
        chosen = None
        output_expression = parsed.outputs[0]
        if _has_dots(output_expression) and dots is None:
            raise pattern_error("'...' in the output stands for axes that no input shows",
                                text, output_expression.start, output_expression.end)
        output_dims = expand(output_expression, text, dots=dots)
        output_keys = _leaf_keys(output_dims, -1)
    # the output's axes: no name twice, every one with a length
    seen: set = set()
    for leaf, key in zip(leaves(output_dims), output_keys):
        if key is None:
            continue
        if key in seen:
            raise pattern_error(f"axis {leaf.name!r} appears twice in the output", text,
                                leaf.term.start, leaf.term.end)
        seen.add(key)
        if leaf.name is not None and leaf.name not in lengths:
            raise pattern_error(f"axis {_display(leaf.name)!r} of the output is in no input; "
                                f"give its length ({_display(leaf.name)}=...)", text,
                                leaf.term.start, leaf.term.end)
    axes = tuple((_axis_label(leaf), length) for leaf, length in
                 zip(leaves(output_dims), _leaf_lengths(output_dims, lengths)))
    output_shape = tuple(_dim_length(dim, lengths) for dim in output_dims)
    positions = {key: k for k, key in enumerate(output_keys) if key is not None}
    views = []
    covered: set = set()
    for k, (expression, dims, shape) in enumerate(zip(parsed.inputs, input_dims, shapes)):
        keys = _leaf_keys(dims, k)   # (the implicit output's keys are its input's)
        views.append(_input_view(expression, text, dims, keys, shape, lengths, positions,
                                 output_keys, None if strides is None else strides[k]))
        covered.update(key for key in keys if key is not None)
    missing = [key for key in positions if key not in covered]
    return ElementwisePlan(op, text, text[output_expression.start:output_expression.end],
                           axes, output_shape, tuple(views), bool(missing),
                           any(type(dim) is not Leaf for dim in output_dims)
                           or None in output_keys)


def _dots_count(expression: Expression, rank: int) -> int | None:
    """How many axes a top-level '...' of ``expression`` stands for in an array of
    ``rank`` axes (None without one; too few axes is :func:`expand`'s error)."""
    if not any(type(term) is Dots for term in expression.terms):
        return None
    return max(0, rank - (len(expression.terms) - 1))


def _has_dots(expression: Expression) -> bool:
    stack = list(expression.terms)
    while stack:
        term = stack.pop()
        if type(term) is Dots:
            return True
        if type(term) is Group:
            stack.extend(t for part in term.parts for t in part)
    return False


def _display(name: str) -> str:
    return "..." if name.startswith("...") else name


def _axis_label(leaf: Leaf) -> str:
    if leaf.name is not None:
        return leaf.name
    return str(leaf.length)


def _dim_length(dim: Any, lengths: Mapping[str, Any]) -> Any:
    if type(dim) is Leaf:
        return dim.length if dim.name is None else lengths[dim.name]
    return math.prod(_dim_length(child, lengths) for child in dim.children)


def _input_view(expression: Expression, text: str, dims: Sequence[Any], keys: list[Any],
                shape: tuple[Any, ...] | None, lengths: Mapping[str, Any],
                positions: Mapping[Any, int], output_keys: list[Any],
                strides: tuple[int, ...] | None) -> InputView:
    source = text[expression.start:expression.end]
    rank = len(output_keys)
    if shape is None:
        return InputView(source, True, (), None, None, (), None, None, (1,) * rank,
                         (0,) * rank)
    sizes = _leaf_lengths(dims, lengths)
    split = None if all(type(d) is Leaf for d in dims) else tuple(sizes)
    elementary_strides = (None if strides is None
                          else _split_strides(dims, strides, lengths))
    # unit axes of the input (a '1') go: a reshape without them (still a view)
    if None in keys:
        kept = [k for k, key in enumerate(keys) if key is not None]
        split = tuple(sizes[k] for k in kept)
        keys = [keys[k] for k in kept]
        sizes = [sizes[k] for k in kept]
        if elementary_strides is not None:
            elementary_strides = [elementary_strides[k] for k in kept]
    # a name twice: its diagonal, one axis at the end whose stride is the sum
    diagonals = []
    names = list(keys)
    while True:
        repeated = next((name for name in names if names.count(name) > 1), None)
        if repeated is None:
            break
        first = names.index(repeated)
        second = names.index(repeated, first + 1)
        diagonals.append((first, second))
        size = sizes[first]
        names = [n for k, n in enumerate(names) if k not in (first, second)] + [repeated]
        sizes = [s for k, s in enumerate(sizes) if k not in (first, second)] + [size]
        if elementary_strides is not None:
            stride = elementary_strides[first] + elementary_strides[second]
            elementary_strides = [s for k, s in enumerate(elementary_strides)
                                  if k not in (first, second)] + [stride]
    for name in names:
        if name not in positions:
            leaf = next(l for l in leaves(dims) if (l.name or None) == name) \
                if isinstance(name, str) else None
            where = (leaf.term.start, leaf.term.end) if leaf is not None else \
                (expression.start, expression.end)
            label = repr(_display(name)) if isinstance(name, str) else "of a number"
            raise pattern_error(f"input axis {label} is not in the output: an elementwise "
                                "operation keeps every axis (reduce it first)", text, *where)
    order = sorted(range(len(names)), key=lambda k: positions[names[k]])
    permutation = None if order == list(range(len(names))) else tuple(order)
    present = {names[k]: (sizes[k], None if elementary_strides is None
                          else elementary_strides[k]) for k in range(len(names))}
    view_shape = tuple(present[key][0] if key in present else 1 for key in output_keys)
    view_strides = None if strides is None else tuple(
        present[key][1] if key in present else 0 for key in output_keys)
    # unit axes where the output has an axis the input lacks (leading ones: broadcasting)
    first_present = next((k for k, key in enumerate(output_keys) if key in present),
                         len(output_keys))
    trimmed = view_shape[first_present:]
    unit_shape = None if len(trimmed) == len(names) else trimmed
    return InputView(source, False, tuple(shape), None if strides is None else tuple(strides),
                     split, tuple(diagonals), permutation, unit_shape, view_shape, view_strides)


# --------------------------------------------------------------------------- lowering

Runner = Callable[[Sequence[Any]], Any]


def _numpy_view(view: InputView, full: tuple[int, ...] | None) -> Callable[[Any], Any]:
    """The input's view as numpy method calls (each one a view: see :class:`InputView`)."""
    split, diagonals, permutation, unit_shape = (view.split, view.diagonals,
                                                 view.permutation, view.unit_shape)
    if full is not None:    # broadcast to every output axis (stride 0 where it lacks one)
        unit_shape = view.view_shape
    if not diagonals and full is None:
        if split is None and permutation is None and unit_shape is None:
            return lambda x: x
        if split is None and unit_shape is None:
            return lambda x: x.transpose(permutation)
        if split is None and permutation is None:
            return lambda x: x.reshape(unit_shape)
        if permutation is None and unit_shape is None:
            return lambda x: x.reshape(split)

    def make(x: Any) -> Any:
        if split is not None:
            x = x.reshape(split)
        for first, second in diagonals:
            x = x.diagonal(0, first, second)
        if permutation is not None:
            x = x.transpose(permutation)
        if unit_shape is not None:
            x = x.reshape(unit_shape)
        if full is not None:
            x = np.broadcast_to(x, full)
        return x
    return make


def lower_numpy(plan: ElementwisePlan, samples: Sequence[Any]) -> Runner:
    """The plan as numpy calls: the views, then the ufunc once with ``order='C'`` (numpy
    allocates the output C-contiguous in the output's axis order and applies its own
    dtype promotion, Python numbers as weak scalars). A third input and more are folded
    into that output in place where numpy's promotion of ``(output, input)`` keeps the
    output's dtype (read from ``samples``, the call's inputs: the runner is kept per
    dtype), else into a fresh output, as ``ufunc(ufunc(x0, x1), x2)`` would."""
    operation = ELEMENTWISE_OPS[plan.op]
    function = getattr(np, operation.numpy)
    full = plan.elementary_shape
    # the first view covers every output axis when the others alone would not, or when
    # later inputs are folded into the first result (which must have the full shape)
    broadcast_first = plan.expand_first or (len(plan.inputs) > 2
                                            and operation.name != "where")
    makers = [None if view.scalar else
              _numpy_view(view, full if k == 0 and broadcast_first else None)
              for k, view in enumerate(plan.inputs)]
    regroup = plan.output_shape if plan.grouped else None
    if len(makers) == 1:
        make = makers[0]

        def run1(arrays: Sequence[Any]) -> Any:
            x = arrays[0]
            result = np.array(x if make is None else make(x), order="C", copy=True)
            return result if regroup is None else result.reshape(regroup)
        return run1
    if operation.name == "where":
        make0, make1, make2 = (m or _same for m in makers)
        if regroup is None:
            def run_where(arrays: Sequence[Any]) -> Any:
                c, x, y = arrays
                return np.where(make0(c), make1(x), make2(y))
            return run_where

        def run_where_into(arrays: Sequence[Any]) -> Any:
            # np.where has no out= and lays its result out in its inputs' memory order,
            # which the final reshape would then copy: write a C-contiguous output
            # instead, y everywhere then x where the condition holds (the dtype is
            # np.where's: numpy's promotion of x and y)
            c, x, y = make0(arrays[0]), make1(arrays[1]), make2(arrays[2])
            out = np.empty(full, dtype=np.result_type(x, y))
            np.copyto(out, y)
            np.copyto(out, x, where=c)
            return out.reshape(regroup)
        return run_where_into
    if len(makers) == 2:
        make0, make1 = (m or _same for m in makers)

        def run2(arrays: Sequence[Any]) -> Any:
            result = function(make0(arrays[0]), make1(arrays[1]), order="C")
            return result if regroup is None else result.reshape(regroup)
        return run2
    in_place = _fold_in_place(function, samples)

    def run(arrays: Sequence[Any]) -> Any:
        views = [x if make is None else make(x) for make, x in zip(makers, arrays)]
        result = function(views[0], views[1], order="C")
        for view, into in zip(views[2:], in_place):
            result = function(result, view, out=result) if into else \
                function(result, view, order="C")
        return result if regroup is None else result.reshape(regroup)
    return run


def _same(x: Any) -> Any:
    return x


def _operand_type(x: Any) -> Any:
    """What numpy's dtype resolution takes for ``x``: a Python number's type (a weak
    scalar), else the dtype."""
    return type(x) if isinstance(x, _SCALAR_TYPES) else np.asarray(x).dtype


def _fold_in_place(function: Any, samples: Sequence[Any]) -> list[bool]:
    """For each input after the second: can ``function(result, x)`` write into
    ``result``, i.e. does numpy's promotion keep the result's dtype? (A 0-d result, the
    output of numbers alone, is a numpy scalar: never in place.)"""
    dtype = function.resolve_dtypes((_operand_type(samples[0]), _operand_type(samples[1]),
                                     None))[-1]
    scalar_output = all(np.ndim(x) == 0 for x in samples)
    flags = []
    for x in samples[2:]:
        resolved = function.resolve_dtypes((dtype, _operand_type(x), None))[-1]
        flags.append(resolved == dtype and not scalar_output)
        dtype = resolved
    return flags


def _torch_view(view: InputView, full: tuple[Any, ...] | None) -> Callable[[Any], Any]:
    split, diagonals, permutation = view.split, view.diagonals, view.permutation
    unit_shape = view.view_shape if full is not None else view.unit_shape

    def make(x: Any) -> Any:
        if split is not None:
            x = x.reshape(split)
        for first, second in diagonals:
            x = x.diagonal(0, first, second)
        if permutation is not None:
            x = x.permute(permutation)
        if unit_shape is not None:
            x = x.reshape(unit_shape)
        if full is not None:
            x = x.expand(full)
        return x
    return make


def lower_torch(plan: ElementwisePlan) -> Runner:
    """The plan as torch ops (``reshape``, ``diagonal``, ``permute``, ``expand`` and the
    torch function), so autograd, ``torch.compile`` and ``torch.export`` see torch's own
    ops. Python numbers stay Python numbers for ``add``/``sub``/``mul``/``div``/``where``
    (torch's weak scalars); ``maximum``/``minimum``/``logaddexp`` take tensors, so a
    number becomes a 0-d tensor, which torch's promotion ranks like a number."""
    torch = sys.modules["torch"]
    operation = ELEMENTWISE_OPS[plan.op]
    function = getattr(torch, operation.torch)
    full = plan.elementary_shape
    makers = [None if view.scalar else
              _torch_view(view, full if k == 0 and plan.expand_first else None)
              for k, view in enumerate(plan.inputs)]
    regroup = plan.output_shape if plan.grouped else None
    wants_tensors = operation.name in ("maximum", "minimum", "logaddexp")

    def run(arrays: Sequence[Any]) -> Any:
        views = []
        for make, x in zip(makers, arrays):
            if isinstance(x, torch.Tensor):
                x = x if make is None else make(x)
            else:   # a number (a numpy scalar or 0-d array: its value, a number too)
                if isinstance(x, (np.ndarray, np.generic)):
                    x = x.item()
                if wants_tensors:
                    device = next(a.device for a in arrays if isinstance(a, torch.Tensor))
                    x = torch.tensor(x, device=device)
            views.append(x)
        if len(views) == 1:
            result = views[0].clone()
        elif operation.name == "where":
            result = function(*views)
        else:
            result = function(views[0], views[1])
            for view in views[2:]:
                result = function(result, view)
        return result if regroup is None else result.reshape(regroup)
    return run


def lower_namespace(plan: ElementwisePlan, xp: Any) -> Runner:
    """The plan through an array namespace (dask.array, jax.numpy, any array-API
    namespace): ``reshape``, ``diagonal``, ``permute_dims``/``transpose``,
    ``broadcast_to`` and the namespace's function."""
    operation = ELEMENTWISE_OPS[plan.op]
    function = getattr(xp, operation.numpy)
    permute = getattr(xp, "permute_dims", None) or xp.transpose
    full = plan.elementary_shape
    regroup = plan.output_shape if plan.grouped else None

    def view_of(view: InputView, x: Any, expand_it: bool) -> Any:
        if view.scalar:
            return x
        if view.split is not None:
            x = xp.reshape(x, view.split)
        for first, second in view.diagonals:
            diagonal = getattr(xp, "diagonal", None)
            if diagonal is None:
                raise ArgumentTypeError(f"{type(x).__module__} has no diagonal: a pattern "
                                        "that repeats an axis name needs one")
            x = diagonal(x, 0, first, second)
        if view.permutation is not None:
            x = permute(x, view.permutation)
        shape = view.view_shape if expand_it else view.unit_shape
        if shape is not None:
            x = xp.reshape(x, shape)
        if expand_it:
            x = xp.broadcast_to(x, full)
        return x

    def run(arrays: Sequence[Any]) -> Any:
        views = [view_of(view, x, k == 0 and plan.expand_first)
                 for k, (view, x) in enumerate(zip(plan.inputs, arrays))]
        if len(views) == 1:
            result = xp.asarray(views[0], copy=True) if hasattr(xp, "asarray") else views[0]
        elif operation.name == "where":
            result = function(*views)
        else:
            result = function(views[0], views[1])
            for view in views[2:]:
                result = function(result, view)
        if regroup is not None:
            result = xp.reshape(result, regroup)
        return result
    return run


# --------------------------------------------------------------------------- the front


_ndarray = np.ndarray


#: a type seen before -> its family and namespace (None for numpy and torch): a
#: type's family never changes.
_families: dict[type, tuple[str, Any]] = {}


def _family_of_type(x: Any, position: int, op: str) -> tuple[str, Any]:
    from . import backends
    from .tensor import Tensor

    kind = type(x)
    if isinstance(x, (np.ndarray, np.generic)) and backends.backend_for(x) is None:
        return "numpy", None
    if isinstance(x, Tensor):
        raise ArgumentTypeError(f"{op}() does not take rearrange.Tensor inputs (argument "
                                f"{position + 1}); convert with .numpy() or use numpy "
                                "or torch arrays")
    backend = backends.backend_for(x)
    name = None if backend is None else backend.__name__.rsplit(".", 1)[-1]
    if name == "_torch":
        return "torch", None
    if name == "_dask":
        return "dask", sys.modules["dask.array"]
    if name == "_array_api":
        return "array_api", x.__array_namespace__()
    raise ArgumentTypeError(
        f"{op}() takes numpy arrays, torch tensors, dask arrays, array-API arrays or "
        f"Python numbers; argument {position + 1} is {kind.__module__}.{kind.__name__}")


def _family(arrays: Sequence[Any], op: str) -> tuple[str, Any]:
    """The array family of a call (``'numpy'``, ``'torch'``, ``'dask'``, ``'array_api'``)
    and, for a namespace family, its namespace. Python numbers fit any family; arrays of
    two families, a ``rearrange.Tensor`` or anything else are an ArgumentTypeError."""
    family = None
    namespace = None
    for position, x in enumerate(arrays):
        kind = type(x)
        if kind in _PYTHON_NUMBERS or isinstance(x, np.generic) or (
                kind is _ndarray and x.ndim == 0):
            continue    # numbers, numpy scalars and 0-d numpy arrays go with any family
        known = _families.get(kind)
        if known is None:
            known = _family_of_type(x, position, op)
            if known[0] != "array_api":   # (an array-API type's namespace may vary)
                _families[kind] = known
        this = known[0]
        if family is None:
            family, namespace = known
        elif family != this:
            raise ArgumentTypeError(f"{op}() got arrays of two kinds, {family} and {this}: "
                                    "convert them to one first")
    return family or "numpy", namespace


def _shape_of(x: Any) -> tuple[Any, ...] | None:
    if isinstance(x, _SCALAR_TYPES):
        return None
    return tuple(x.shape)


def _strides_of(x: Any) -> tuple[int, ...] | None:
    if isinstance(x, _SCALAR_TYPES):
        return None
    if isinstance(x, (np.ndarray, np.generic)):
        x = np.asarray(x)
        if x.itemsize and all(s % x.itemsize == 0 for s in x.strides):
            return tuple(s // x.itemsize for s in x.strides)
        return None
    stride = getattr(x, "stride", None)
    if callable(stride):
        try:
            return tuple(stride())
        except (RuntimeError, TypeError):
            return None
    return None


def _key(op: str, pattern: str, arrays: Sequence[Any], lengths: Mapping[str, Any]) -> Any:
    """The plan cache's key of a call: ``("elementwise", op, pattern, ...)``, then per
    input its shape and dtype (an exact numpy array), its type (a Python number) or its
    type, shape and dtype (anything else), then the lengths — what the runner depends
    on (every step is a view whatever the strides: no stride is in it). NOT_KEPT under
    ``torch.jit.trace`` (a runner would bake the traced sizes in); torch.compile's
    SymInts make the key unhashable, which the door treats the same way."""
    key: list[Any] = ["elementwise", op, pattern]
    for x in arrays:
        kind = type(x)
        if kind is _ndarray:
            key.append(x.shape)
            key.append(x.dtype)
        elif kind in _PYTHON_NUMBERS:
            key.append(kind)
        else:
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(x, torch.Tensor) and \
                    torch._C._get_tracing_state() is not None:
                return front.NOT_KEPT
            key.append((kind, tuple(x.shape), x.dtype))
    if lengths:
        key.extend(lengths.items())
    return tuple(key)


def _traced(backend: tuple[str, Any], arrays: Sequence[Any], lengths: Mapping[str, Any],
            extras: Any) -> bool:
    """Are the call's sizes traced (torch.compile / torch.export SymInts, or
    torch.jit.trace)? Then it is planned over them and its runner is never kept."""
    if backend[0] != "torch":
        return False
    from .backends import _torch
    return any(_torch.traced(x, lengths) for x in arrays if isinstance(x, sys.modules[
        "torch"].Tensor))


def _door_plan(op: str) -> Callable[..., ElementwisePlan]:
    def plan(backend: Any, arrays: Sequence[Any], pattern: str, lengths: Mapping[str, Any],
             extras: Any) -> ElementwisePlan:
        try:
            return plan_elementwise(op, pattern, [_shape_of(x) for x in arrays], lengths)
        except RearrangeError as error:
            raise _context(error, pattern, arrays, lengths, op) from None
    return plan


def _door_lower(backend: tuple[str, Any], plan: ElementwisePlan, arrays: Sequence[Any],
                lengths: Mapping[str, Any], extras: Any) -> Runner:
    family, namespace = backend
    if family == "numpy":
        return lower_numpy(plan, arrays)
    if family == "torch":
        return lower_torch(plan)
    return lower_namespace(plan, namespace)


def _door_traced(op: str) -> Callable[..., Runner]:
    plan = _door_plan(op)

    def lower_traced(backend: Any, arrays: Sequence[Any], pattern: str,
                     lengths: Mapping[str, Any], extras: Any) -> Runner:
        return _door_lower(backend, plan(backend, arrays, pattern, lengths, extras), arrays,
                           lengths, extras)
    return lower_traced


def _context(error: RearrangeError, pattern: str, arrays: Sequence[Any],
             lengths: Mapping[str, Any], op: str) -> RearrangeError:
    """``error`` with the call's context line, unless it quotes the pattern already."""
    if f"pattern '{shorten(pattern)}'" in str(error):
        return error
    shapes = ", ".join("a number" if isinstance(x, _SCALAR_TYPES) else str(tuple(x.shape))
                       for x in arrays)
    given = "".join(f", {name}={value}" for name, value in lengths.items())
    return type(error)(f"{error}\n  {op}() with pattern '{shorten(pattern)}', inputs of "
                       f"shapes {shapes}{given}")


def _operation(op: str) -> Any:
    """``op`` as the door (:func:`rearrange.front.run`) takes it: the inputs are the
    list of arrays, the "backend" the call's array family and its namespace."""
    return front.Operation(
        name=op, parse_kind="notation",
        inputs=lambda arrays: (_family(arrays, op), arrays),
        key=lambda backend, arrays, pattern, lengths, extras: _key(op, pattern, arrays,
                                                                   lengths),
        plan=_door_plan(op), lower=_door_lower,
        context=lambda error, pattern, arrays, lengths, extras: _context(
            error, pattern, arrays, lengths, op),
        traced=_traced, lower_traced=_door_traced(op), call=functools.partial(_checked_call, op))


def _checked_call(op: str, runner: Runner, arrays: Any) -> Any:
    """The door's ``call`` (and the warm path's): the runner, with numpy's OverflowError
    for a Python number that its array's dtype cannot hold (NEP 50: ``int8 array + 300``)
    as an ArgumentTypeError that says what to do."""
    try:
        return runner(arrays)
    except OverflowError as error:
        raise _number_error(op, error) from None


def _number_error(op: str, error: OverflowError) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{op}(): {error}: a Python number takes the dtype of the arrays it meets (numpy's "
        "and torch's rule for Python scalars); pass it as an array or a numpy scalar of a "
        "wider dtype (np.int64(300)) to widen the result")


#: Every elementwise operation as the door takes it.
OPERATIONS: dict[str, Any] = {op: _operation(op) for op in ELEMENTWISE_OPS}


def _run(op: str, args: tuple[Any, ...], lengths: dict[str, Any]) -> Any:
    """An elementwise call: ``args`` are the arrays then the pattern. numpy arrays and
    Python numbers with integer lengths look their runner up here (:func:`_key`,
    written out); the rest of every call is the door's."""
    if not args:
        raise ArgumentTypeError(f"{op}() takes the arrays, then the pattern")
    *arrays, pattern = args
    if type(pattern) is not str:
        raise ArgumentTypeError(f"{op}() takes the arrays first and the pattern last; the "
                                f"last argument is {type(pattern).__name__}, not a str")
    key: list[Any] = ["elementwise", op, pattern]
    for x in arrays:
        kind = type(x)
        if kind is _ndarray:
            key.append(x.shape)
            key.append(x.dtype)
        elif kind in _PYTHON_NUMBERS:
            key.append(kind)
        else:
            break
    else:
        if not lengths or _PLAIN_INT.issuperset(map(type, lengths.values())):
            if lengths:
                key.extend(lengths.items())
            runner = PLANS.peek(tuple(key))
            if runner is not None:
                try:
                    return _checked_call(op, runner, arrays)
                except (RearrangeError, MemoryError, RuntimeError) as error:
                    raised = front.failure(OPERATIONS[op], error, pattern, arrays, lengths,
                                           None)
                    if raised is None:
                        raise
                    raise raised from None
    return front.run(OPERATIONS[op], arrays, pattern, lengths)


def add(*args: Any, **axes_lengths: Any) -> Any:
    """The sum of the inputs, by axis name: ``add(x, bias, 'b t c, c')``.

    The arrays come first, the pattern last (einx's notation, one expression per input,
    an empty expression for a Python number or 0-d array), axis lengths as keywords.
    Without ``->`` the output is the one input expression that holds every other
    input's axis names (einx's rule); more than two inputs are summed left to right.

    >>> import numpy as np, rearrange as ra
    >>> ra.add(np.zeros((2, 3)), np.arange(3), 'a b, b')
    array([[0., 1., 2.],
           [0., 1., 2.]])
    >>> ra.add(np.arange(2), np.arange(3), 'a, b -> b a').shape
    (3, 2)
    """
    return _run("add", args, axes_lengths)


def subtract(*args: Any, **axes_lengths: Any) -> Any:
    """The first input minus the second, by axis name: ``subtract(x, mean, 'b c, c')``
    (see :func:`add` for the pattern)."""
    return _run("subtract", args, axes_lengths)


def multiply(*args: Any, **axes_lengths: Any) -> Any:
    """The product of the inputs, by axis name: ``multiply(a, b, 'a, b -> a b')`` (an
    outer product; see :func:`add` for the pattern)."""
    return _run("multiply", args, axes_lengths)


def divide(*args: Any, **axes_lengths: Any) -> Any:
    """The first input divided by the second (true division), by axis name (see
    :func:`add` for the pattern)."""
    return _run("divide", args, axes_lengths)


def maximum(*args: Any, **axes_lengths: Any) -> Any:
    """The elementwise maximum of the inputs, by axis name (see :func:`add`)."""
    return _run("maximum", args, axes_lengths)


def minimum(*args: Any, **axes_lengths: Any) -> Any:
    """The elementwise minimum of the inputs, by axis name (see :func:`add`)."""
    return _run("minimum", args, axes_lengths)


def logaddexp(*args: Any, **axes_lengths: Any) -> Any:
    """``log(exp(x0) + exp(x1) + ...)`` of the inputs, by axis name (see :func:`add`)."""
    return _run("logaddexp", args, axes_lengths)


def where(*args: Any, **axes_lengths: Any) -> Any:
    """``x`` where ``condition`` holds, else ``y``, by axis name:
    ``where(condition, x, y, 'a b, b, a b')`` (see :func:`add` for the pattern).

    >>> import numpy as np, rearrange as ra
    >>> ra.where(np.array([True, False]), np.ones((3, 2)), 0.0, 'b, a b, -> a b')
    array([[1., 0.],
           [1., 0.],
           [1., 0.]])
    """
    return _run("where", args, axes_lengths)


def explain_elementwise(*args: Any, op: str = "add", **axes_lengths: Any) -> ElementwisePlan:
    """The plan of an elementwise operation, without running it: the inputs (arrays, or
    shapes as tuples of ints, or Python numbers), then the pattern. Each input is shown
    as the view the operation reads (its strides, 0 on the axes it lacks) and the one
    computation that writes the output.

    >>> import rearrange as ra
    >>> print(ra.explain_elementwise((4, 8), (8,), 'a b, b', op='add'))
    add 'a b, b': every input a view over the output's axes (a b) of lengths (4, 8), the operation run once (no copy)
      x0  'a b' shape (4, 8) strides (8, 1) -> view (4, 8) strides (8, 1): as it is
      x1  'b' shape (8,) strides (1,) -> view (4, 8) strides (0, 1) (stride 0 on a)
      run: np.add(x0, x1, order='C')  (numpy; torch: torch.add(x0, x1))
    """
    if op not in ELEMENTWISE_OPS:
        raise ArgumentTypeError(f"explain_elementwise: op must be one of "
                                f"{', '.join(map(repr, ELEMENTWISE_OPS))}, got {op!r}")
    if not args or type(args[-1]) is not str:
        raise ArgumentTypeError("explain_elementwise() takes the inputs (arrays, shapes or "
                                "numbers), then the pattern")
    *inputs, pattern = args
    shapes: list[tuple[int, ...] | None] = []
    strides: list[tuple[int, ...] | None] = []
    for x in inputs:
        if isinstance(x, (tuple, list)) and all(isinstance(n, int) for n in x):
            shape = tuple(x)
            shapes.append(shape)
            strides.append(tuple(math.prod(shape[k + 1:]) for k in range(len(shape))))
        else:
            shapes.append(_shape_of(x))
            strides.append(_strides_of(x))
    if axes_lengths:
        axes_lengths = dict(canonical_lengths(axes_lengths))
    return plan_elementwise(op, pattern, shapes, axes_lengths, strides)
