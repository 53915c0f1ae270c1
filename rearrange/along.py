"""Brackets in ``reduce`` and ``einsum``, and operations along named axes (einx's
``softmax``, ``log_softmax``, ``flip``, ``roll``, ``sort``, ``argsort``, ``argmax``,
``argmin``), with einops' calling convention: the array first, the pattern last,
keyword-only extras.

Plan, then lower (docs/notation.md)::

    pattern text --parse_notation--> one input expression (and maybe one output)
        --plan_along (per rank, shape-free)--> AlongPlan:
            split   an einops pattern: the input's groups -> its elementary axes (a view)
            op      over the bracketed elementary axes (by index)
            merge   an einops pattern: the op's result -> the output's groups
    run: rearrange(x, split) -> the library's op -> rearrange(result, merge)

The plan depends on the pattern, the input's rank, the caller's lengths and ``shift``
only, never on sizes: it is kept in the one plan cache under that key and serves traced
inputs (torch.compile over changing shapes) as well as concrete ones. Sizes the op needs
(argmax's coordinates) are read from the array when it runs. The rearranges are our
own ``rearrange`` (views wherever strides allow); a flip is a view on numpy (a negative
stride), torch's own ``torch.flip`` elsewhere (torch has no negative strides).

Brackets in ``reduce`` and ``einsum`` are translated to einops patterns as text, the
brackets replaced by spaces so every position in the text stays where it was.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .caching import PLANS
from .errors import ArgumentTypeError, RearrangeError
from . import front
from .front import run_transform
from .notation import (Brackets, Dots, Expression, Group, Leaf, Name, Number, Product, Sum,
                       expand, leaves, parse_notation, walk)
from .parsing import pattern_error
from .records import record

__all__ = ["softmax", "log_softmax", "flip", "roll", "sort", "argsort", "argmax", "argmin",
           "explain_along", "AlongPlan", "AlongExplanation", "plan_along",
           "reduce_pattern", "einsum_pattern", "OPERATIONS"]

#: The operations along bracketed axes, by name.
OPERATIONS = ("softmax", "log_softmax", "flip", "roll", "sort", "argsort", "argmax", "argmin")
# operations that act on exactly one bracketed axis (einx's signature ``[a] -> [a]``)
_ONE_AXIS = ("sort", "argsort")
# operations whose output replaces the bracketed axes by their coordinates
_ARGFIND = ("argmax", "argmin")


# --------------------------------------------------------------------------- the plan


@record
class AlongPlan:
    """What an operation along bracketed axes runs, for inputs of one rank.

    Invariants: ``split`` only splits (a view for any strides); ``axes`` index the
    elementary axes (the split's output), in the order the pattern brackets them;
    ``merge`` takes the op's result (the elementary axes, or for argmax/argmin the
    unbracketed ones followed by a coordinate axis when there are several bracketed
    axes) to the output's groups."""

    op: str
    pattern: str
    split: str | None                       # einops pattern, None: the input is elementary
    split_lengths: tuple[tuple[str, int], ...]  # the lengths the split needs (numbers, given)
    axes: tuple[int, ...]                   # bracketed elementary axes
    elementary: tuple[str, ...]             # the elementary axes' names (for explain)
    merge: str | None                       # einops pattern, None: the result is the output
    merge_lengths: tuple[tuple[str, int], ...]  # its axes' known lengths (checked, not needed)
    shift: tuple[int, ...] | None = None    # roll: one shift per bracketed axis

    def describe_op(self) -> str:
        axes = ", ".join(self.elementary[a] for a in self.axes)
        if self.op == "flip":
            return (f"flip [{axes}]: numpy: a view (each stride negated, the offset moved to "
                    f"the last element); torch, dask, array API: the library's flip (a copy)")
        if self.op == "roll":
            return f"roll [{axes}] by {self.shift}: the library's roll (a new array)"
        if self.op in _ARGFIND:
            return (f"{self.op} over [{axes}]: the library's {self.op} (a new integer array"
                    + (", then each coordinate by // and %)" if len(self.axes) > 1 else ")"))
        if self.op in ("softmax", "log_softmax"):
            steps = ("max, subtract, exp, sum, divide" if self.op == "softmax"
                     else "max, subtract, exp, sum, log, add, subtract")
            return (f"{self.op} over [{axes}]: one new array ({steps} on numpy; torch's "
                    f"{self.op} for one axis)")
        return f"{self.op} along [{axes}]: the library's {self.op} (a new array)"


def _names_of(expression: Expression) -> set[str]:
    found: set[str] = set()

    def walk(terms: Sequence[Any]) -> None:
        for term in terms:
            if type(term) is Name:
                found.add(term.name)
            elif type(term) is Group:
                for part in term.parts:
                    walk(part)
            elif type(term) is Brackets:
                walk(term.terms)
    walk(expression.terms)
    return found


class _Namer:
    """Names for the axes einops patterns need and the notation leaves unnamed (numbers,
    the axes of ``...``): fresh, never one of the pattern's own names."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)
        self.by_key: dict[Any, str] = {}
        self.count = 0

    def name(self, key: Any) -> str:
        name = self.by_key.get(key)
        if name is None:
            while True:
                name = f"ax{self.count}"
                self.count += 1
                if name not in self.taken:
                    break
            self.taken.add(name)
            self.by_key[key] = name
        return name


def _leaf_name(leaf: Leaf, namer: _Namer) -> str:
    if leaf.name is None:
        return namer.name(("number", id(leaf)))
    if leaf.name.startswith("..."):
        return namer.name(leaf.name)
    return leaf.name


def _group_text(dim: Any, names: Mapping[int, str]) -> str:
    if type(dim) is Leaf:
        return names[id(dim)]
    return "(" + " ".join(_group_text(c, names) for c in dim.children) + ")"


def _refuse_concatenation(dims: Sequence[Any], text: str, op: str) -> None:
    for dim in dims:
        if type(dim) is Sum:
            raise pattern_error(f"{op} takes no concatenation ('+'): split the array first",
                                text, dim.term.start, dim.term.end)
        if type(dim) is Product:
            _refuse_concatenation(dim.children, text, op)


def plan_along(op: str, pattern: str, ndim: int, given: tuple[tuple[str, int], ...] = (),
               shift: tuple[int, ...] | None = None) -> AlongPlan:
    """The plan of ``op`` along the bracketed axes of ``pattern`` for an input of
    ``ndim`` axes (pure; PatternError pointing at the text for a pattern ``op`` cannot
    run)."""
    parsed = parse_notation(pattern)
    if len(parsed.inputs) != 1:
        second = parsed.inputs[1]
        raise pattern_error(f"{op} takes one array: one input expression, found "
                            f"{len(parsed.inputs)}", pattern, second.start, second.end)
    if parsed.outputs is not None and len(parsed.outputs) != 1:
        second = parsed.outputs[1]
        raise pattern_error(f"{op} gives one array: one output expression, found "
                            f"{len(parsed.outputs)}", pattern, second.start, second.end)
    source = parsed.inputs[0]
    dims = expand(source, pattern, rank=ndim)
    _refuse_concatenation(dims, pattern, op)
    dots = sum(1 for leaf in leaves(dims) if leaf.name is not None and leaf.name.startswith("..."))
    own_names = _names_of(source)
    for name, _ in given:
        if name not in own_names:
            hint = " (shift= applies to roll only)" if name == "shift" else ""
            raise pattern_error(f"axis length given for {name!r}, which is not an axis of "
                                f"the input (its axes: {', '.join(sorted(own_names)) or 'none'})"
                                + hint,
                                pattern, source.start, max(source.end, source.start + 1))
    namer = _Namer(own_names | (_names_of(parsed.outputs[0]) if parsed.outputs else set()))
    names: dict[int, str] = {}
    lengths: dict[str, int] = dict(given)
    elementary: list[Leaf] = list(leaves(dims))
    for leaf in elementary:
        names[id(leaf)] = _leaf_name(leaf, namer)
        if leaf.name is None:
            lengths[names[id(leaf)]] = leaf.length   # type: ignore[assignment]
    seen: dict[str, Leaf] = {}
    for leaf in elementary:
        if leaf.name is not None and leaf.name in seen:
            raise pattern_error(f"axis {leaf.name!r} appears twice in the input; {op} takes "
                                f"each axis once", pattern, leaf.term.start, leaf.term.end)
        if leaf.name is not None:
            seen[leaf.name] = leaf
    axes = tuple(k for k, leaf in enumerate(elementary) if leaf.marked)
    has_brackets = any(type(t) is Brackets for t in walk(source.terms))
    if not has_brackets or (not axes and op not in ("flip", "roll", "softmax", "log_softmax")):
        raise pattern_error(f"{op} needs the axes it acts on in brackets, e.g. 'a [b] c'; "
                            f"found none", pattern, source.start, max(source.end, source.start + 1))
    if op in _ONE_AXIS and len(axes) != 1:
        extra = elementary[axes[1]].term if len(axes) > 1 else source
        raise pattern_error(f"{op} acts on exactly one axis in brackets; found {len(axes)}",
                            pattern, extra.start, extra.end)
    if op == "roll":
        if shift is None:
            raise ArgumentTypeError("roll() needs shift=: an int, or one int per axis in "
                                    "brackets")
        if len(shift) == 1:
            shift = shift * len(axes)
        elif len(shift) != len(axes):
            raise ArgumentTypeError(f"roll(): shift has {len(shift)} values for "
                                    f"{len(axes)} axes in brackets; give one, or one per axis")
    elif shift is not None:
        raise ArgumentTypeError(f"shift= applies to roll, not {op}")
    split_left = " ".join(_group_text(d, names) for d in dims)
    split_right = " ".join(names[id(leaf)] for leaf in elementary)
    split = None if split_left == split_right else f"{split_left} -> {split_right}"
    # what the op gives: elementary axes, or for argmax/argmin the unbracketed ones and
    # (several bracketed axes) their coordinates last
    if op in _ARGFIND:
        coordinate = namer.name("coordinate") if len(axes) > 1 else None
        result = [names[id(leaf)] for leaf in elementary if not leaf.marked]
        if coordinate is not None:
            result.append(coordinate)
        output = _argfind_output(op, pattern, parsed, source, dims, elementary, names,
                                 coordinate, dots)
    else:
        result = split_right.split() if split_right else []
        output = (split_left if parsed.outputs is None else
                  _explicit_output(op, pattern, parsed.outputs[0], elementary, names, dots))
    merge_left = " ".join(result)
    merge = None if merge_left == output else f"{merge_left} -> {output}"
    return AlongPlan(op, pattern, split, _lengths_in(split, lengths), axes,
                     tuple(names[id(leaf)] for leaf in elementary), merge,
                     _lengths_in(merge, lengths), shift)


def _lengths_in(einops: str | None, lengths: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The lengths an einops pattern's left side names (those it needs to split)."""
    if einops is None:
        return ()
    left = set(einops.split("->")[0].replace("(", " ").replace(")", " ").split())
    return tuple((name, value) for name, value in lengths.items() if name in left)


def _output_dims(op: str, pattern: str, output: Expression, dots: int) -> tuple[Any, ...]:
    dims = expand(output, pattern, dots=dots)
    _refuse_concatenation(dims, pattern, op)
    return dims


def _explicit_output(op: str, pattern: str, output: Expression, elementary: list[Leaf],
                     names: Mapping[int, str], dots: int) -> str:
    """The output's groups as einops text, after checking that it holds the input's axes
    with the same brackets (einx: an axis is bracketed everywhere or nowhere)."""
    dims = _output_dims(op, pattern, output, dots)
    by_name = {leaf.name: leaf for leaf in elementary if leaf.name is not None}
    out_names: dict[int, str] = {}
    for leaf in leaves(dims):
        if leaf.name is None:
            if leaf.length != 1 or leaf.marked:
                raise pattern_error(f"a number in the output of {op}: name that axis in "
                                    f"the input and the output", pattern, leaf.term.start,
                                    leaf.term.end)
            out_names[id(leaf)] = "1"
            continue
        source = by_name.get(leaf.name)
        if source is None:
            raise pattern_error(f"axis {leaf.name!r} of the output is not in the input",
                                pattern, leaf.term.start, leaf.term.end)
        if source.marked != leaf.marked:
            where = "inside" if source.marked else "outside"
            raise pattern_error(f"axis {leaf.name!r} is {where} brackets in the input and "
                                f"not in the output; an axis is bracketed everywhere or "
                                f"nowhere", pattern, leaf.term.start, leaf.term.end)
        out_names[id(leaf)] = names[id(source)]
    present = {leaf.name for leaf in leaves(dims)}
    missing = [name for name in by_name if name not in present]
    if missing:
        raise pattern_error(f"axes {', '.join(repr(n.replace('...', '... ')) for n in missing)}"
                            f" of the input are not in the output; {op} keeps every axis",
                            pattern, output.start, max(output.end, output.start + 1))
    return " ".join(_group_text(d, out_names) for d in dims)


def _argfind_output(op: str, pattern: str, parsed: Any, source: Expression,
                    dims: tuple[Any, ...], elementary: list[Leaf], names: Mapping[int, str],
                    coordinate: str | None, dots: int) -> str:
    """argmax/argmin's output as einops text: the input with its one bracket replaced by
    the coordinate axis ``[n]`` (n the number of bracketed axes; ``1`` for one), or the
    explicit output (a ``[n]`` term, or no bracket when one axis is bracketed)."""
    count = sum(1 for leaf in elementary if leaf.marked)
    coordinate_text = coordinate if coordinate is not None else "1"
    if parsed.outputs is None:
        brackets = [t for t in walk(source.terms) if type(t) is Brackets]
        if len(brackets) != 1:
            raise pattern_error(f"{op} without an output needs exactly one '[ ]' in the input "
                                f"(it becomes the coordinates '[{count}]'); found "
                                f"{len(brackets)}: write the output, e.g. '... -> ... [{count}]'",
                                pattern, source.start, source.end)
        return _replace_bracket(dims, names, coordinate_text)
    output = parsed.outputs[0]
    brackets = [t for t in walk(output.terms) if type(t) is Brackets]
    if not brackets:
        if count != 1:
            raise pattern_error(f"{op}: with {count} axes in brackets the output needs their "
                                f"coordinates as '[{count}]'", pattern, output.start,
                                max(output.end, output.start + 1))
        return _explicit_output(op, pattern, output, [l for l in elementary if not l.marked],
                                names, dots)
    inner = brackets[0].terms
    if len(brackets) != 1 or len(inner) != 1 or type(inner[0]) is not Number \
            or inner[0].value != count:
        bad = brackets[1] if len(brackets) > 1 else brackets[0]
        raise pattern_error(f"{op}: the output's brackets hold the coordinates, '[{count}]' "
                            f"for {count} axes in brackets", pattern, bad.start, bad.end)
    dims_out = _output_dims(op, pattern, output, dots)
    out_names: dict[int, str] = {}
    by_name = {leaf.name: leaf for leaf in elementary if leaf.name is not None}
    for leaf in leaves(dims_out):
        if leaf.marked:
            out_names[id(leaf)] = coordinate_text
            continue
        source_leaf = by_name.get(leaf.name) if leaf.name is not None else None
        if source_leaf is None or source_leaf.marked:
            if leaf.name is None and leaf.length == 1:
                out_names[id(leaf)] = "1"
                continue
            what = "is in brackets in the input" if source_leaf is not None else "is not in the input"
            raise pattern_error(f"axis {leaf.name or leaf.length!r} of the output {what}",
                                pattern, leaf.term.start, leaf.term.end)
        out_names[id(leaf)] = names[id(source_leaf)]
    return " ".join(_group_text(d, out_names) for d in dims_out)


def _replace_bracket(dims: Sequence[Any], names: Mapping[int, str], coordinate: str) -> str:
    """The input's groups with the bracketed leaves dropped and the coordinate axis where
    the (one) bracket stood."""
    placed = [False]

    def text(dim: Any) -> str | None:
        if type(dim) is Leaf:
            if dim.marked:
                if placed[0]:
                    return None
                placed[0] = True
                return coordinate
            return names[id(dim)]
        inner = [t for t in (text(c) for c in dim.children) if t is not None]
        return "(" + " ".join(inner) + ")"
    return " ".join(t for t in (text(d) for d in dims) if t is not None)


# --------------------------------------------------------------------------- reduce and einsum


def _term_text(term: Any, drop_marked: bool) -> str | None:
    """``term`` as einops text with its brackets removed (``drop_marked``: without the
    bracketed terms; a group left empty is ``()``, a unit axis, as einx keeps it)."""
    kind = type(term)
    if kind is Name:
        return term.name
    if kind is Number:
        return str(term.value)
    if kind is Dots:
        return "..."
    if kind is Brackets:
        if drop_marked:
            return None
        return " ".join(t for t in (_term_text(x, False) for x in term.terms) if t)
    parts = []
    for part in term.parts:
        parts.append(" ".join(t for t in (_term_text(x, drop_marked) for x in part) if t))
    return "(" + " + ".join(parts) + ")"


@functools.lru_cache(maxsize=1024)
def reduce_pattern(pattern: str) -> str:
    """``reduce``'s bracketed pattern as an einops pattern: the brackets replaced by
    spaces (every position kept) and, without ``->``, the output the input less its
    bracketed axes (compositions keep their other parts: ``'a (b [2])'`` gives
    ``'a (b 2) -> a (b)'``). Checks einx's rules: the output has no brackets, holds no
    bracketed axis and every unbracketed one."""
    parsed = parse_notation(pattern)
    if len(parsed.inputs) != 1 or (parsed.outputs is not None and len(parsed.outputs) != 1):
        where = (parsed.inputs[1] if len(parsed.inputs) != 1 else parsed.outputs[1])  # type: ignore[index]
        raise pattern_error("reduce takes one array and gives one: one expression on each "
                            "side", pattern, where.start, where.end)
    source = parsed.inputs[0]
    if any(type(t) is Group and t.is_concatenation for t in walk(source.terms)):
        bad = next(t for t in walk(source.terms) if type(t) is Group and t.is_concatenation)
        raise pattern_error("reduce takes no concatenation ('+')", pattern, bad.start, bad.end)
    marked, unmarked = _bracket_names(source.terms)
    stripped = pattern.replace("[", " ").replace("]", " ")
    if parsed.outputs is None:
        output = " ".join(t for t in (_term_text(x, True) for x in source.terms) if t)
        return f"{stripped} -> {output}"
    output = parsed.outputs[0]
    for term in walk(output.terms):
        if type(term) is Brackets:
            raise pattern_error("brackets mark the reduced axes in the input; the output "
                                "of reduce has none", pattern, term.start, term.end)
        if type(term) is Name and term.name in marked:
            raise pattern_error(f"axis {term.name!r} is reduced (in brackets in the input) "
                                f"and cannot appear in the output", pattern, term.start,
                                term.end)
    present = _names_of(output)
    missing = [n for n in unmarked if n not in present]
    if missing:
        raise pattern_error(f"axes {', '.join(map(repr, missing))} are not in brackets, so "
                            f"not reduced: the output must keep them", pattern,
                            output.start, max(output.end, output.start + 1))
    return stripped


def _bracket_names(terms: Sequence[Any], inside: bool = False) -> tuple[set[str], list[str]]:
    marked: set[str] = set()
    unmarked: list[str] = []
    for term in terms:
        if type(term) is Name:
            (marked.add(term.name) if inside else unmarked.append(term.name))
        elif type(term) is Brackets:
            m, u = _bracket_names(term.terms, True)
            marked |= m
            unmarked.extend(u)
        elif type(term) is Group:
            for part in term.parts:
                m, u = _bracket_names(part, inside)
                marked |= m
                unmarked.extend(u)
    return marked, unmarked


@functools.lru_cache(maxsize=1024)
def einsum_pattern(pattern: str) -> str:
    """``einsum``'s bracketed pattern (brackets mark the contracted axes: ``'a b [c],
    [c] d -> a b d'``) as our einsum's pattern, the brackets replaced by spaces (every
    position kept). Checks einx's rules: an axis is bracketed everywhere or nowhere, and
    a bracketed axis is not in the output, which has no brackets."""
    parsed = parse_notation(pattern)
    marked_at: dict[str, Any] = {}
    unmarked_at: dict[str, Any] = {}
    for expression in parsed.inputs:
        def note(terms: Sequence[Any], inside: bool) -> None:
            for term in terms:
                if type(term) is Name:
                    (marked_at if inside else unmarked_at).setdefault(term.name, term)
                elif type(term) is Brackets:
                    note(term.terms, True)
                elif type(term) is Group:
                    for part in term.parts:
                        note(part, inside)
        note(expression.terms, False)
    for name, term in marked_at.items():
        if name in unmarked_at:
            other = unmarked_at[name]
            second = max((term, other), key=lambda t: t.start)    # the later one
            raise pattern_error(f"axis {name!r} is in brackets in one place and not in "
                                f"another; an axis is bracketed everywhere or nowhere",
                                pattern, second.start, second.end)
    for output in parsed.outputs or ():
        for term in walk(output.terms):
            if type(term) is Brackets:
                raise pattern_error("brackets mark the contracted axes in the inputs; the "
                                    "output of einsum has none", pattern, term.start, term.end)
            if type(term) is Name and term.name in marked_at:
                raise pattern_error(f"axis {term.name!r} is contracted (in brackets) and "
                                    f"cannot appear in the output", pattern, term.start,
                                    term.end)
    return pattern.replace("[", " ").replace("]", " ")


# --------------------------------------------------------------------------- the libraries
# Each runs ``op`` over elementary axes ``axes`` of ``x`` (sizes read from ``x``).


def _softmax_parts(xp: Any, x: Any, axes: tuple[int, ...], log: bool, amax: Any,
                   keep: Any) -> Any:
    # einx's formula, step for step (results equal to rounding)
    top = amax(x, axes)
    shifted = x - top
    exps = xp.exp(shifted)
    total = keep(exps, axes)
    if log:
        return x - (xp.log(total) + top)
    return exps / total


def _numpy_softmax(x: np.ndarray, axes: tuple[int, ...], log: bool) -> np.ndarray:
    """einx's formula with numpy's ufuncs into one new array (the same values: a ufunc
    writes the same result into ``out=`` as into an array of its own), sparing two
    temporaries of the input's size."""
    top = np.max(x, axis=axes, keepdims=True)
    result = np.subtract(x, top)
    np.exp(result, out=result)
    total = np.sum(result, axis=axes, keepdims=True)
    if log:
        return np.subtract(x, np.log(total) + top, out=result)
    return np.divide(result, total, out=result)


def _coordinates(xp_stack: Callable[[list[Any]], Any], flat: Any,
                 sizes: Sequence[Any]) -> Any:
    """A flat index over axes of ``sizes`` as its coordinates, stacked last (row-major:
    the first axis' coordinate first, as einx gives them)."""
    coordinates = []
    stride = 1
    strides = []
    for size in reversed(sizes):
        strides.append(stride)
        stride = stride * size
    strides.reverse()
    for k, (size, stride_k) in enumerate(zip(sizes, strides)):
        value = flat // stride_k if stride_k != 1 else flat
        coordinates.append(value if k == 0 else value % size)
    return xp_stack(coordinates)


def _move_last(x: Any, axes: tuple[int, ...], permute: Callable[[Any, list[int]], Any]) -> Any:
    rest = [k for k in range(len(x.shape)) if k not in axes]
    order = rest + list(axes)
    return x if order == list(range(len(order))) else permute(x, order)


class _NumpyLike:
    """numpy, dask (``dask.array``) and array-API namespaces (jax.numpy ...)."""

    def __init__(self, xp: Any, kind: str) -> None:
        self.xp = xp
        self.kind = kind

    def run(self, plan: AlongPlan, x: Any) -> Any:
        xp, op, axes = self.xp, plan.op, plan.axes
        if not axes:      # flip, roll, softmax over no axis (a 0-d input: '[]')
            return x if op in ("flip", "roll") else _softmax_parts(
                xp, x, axes, op == "log_softmax", lambda v, a: v, lambda v, a: v)
        if op == "flip":
            if self.kind == "numpy":
                index = [slice(None)] * x.ndim
                for a in axes:
                    index[a] = slice(None, None, -1)
                return x[tuple(index)]
            return xp.flip(x, axis=axes)
        if op == "roll":
            return xp.roll(x, shift=plan.shift, axis=axes)
        if op in ("softmax", "log_softmax"):
            if 0 in x.shape:    # no values: the max has none to take (the dtype as computed)
                return xp.exp(x - x)
            if self.kind == "numpy" and x.dtype.kind == "f":
                return _numpy_softmax(x, axes, op == "log_softmax")
            amax = (lambda v, a: xp.max(v, axis=a, keepdims=True))
            keep = (lambda v, a: xp.sum(v, axis=a, keepdims=True))
            return _softmax_parts(xp, x, axes, op == "log_softmax", amax, keep)
        if op in ("sort", "argsort"):
            (axis,) = axes
            if self.kind == "dask":   # (dask has no sort: one chunk along the axis)
                whole = x.rechunk({axis: -1})
                function = np.sort if op == "sort" else np.argsort
                return whole.map_blocks(function, axis=axis,
                                        dtype=x.dtype if op == "sort" else np.intp)
            return (xp.sort if op == "sort" else xp.argsort)(x, axis=axis)
        # argmax / argmin
        find = xp.argmax if op == "argmax" else xp.argmin
        if len(axes) == 1:
            return find(x, axis=axes[0])
        sizes = [x.shape[a] for a in axes]
        permute = (np.transpose if self.kind == "numpy" else
                   (lambda v, o: v.transpose(o)) if self.kind == "dask" else xp.permute_dims)
        moved = _move_last(x, axes, permute)
        kept = tuple(moved.shape[:len(moved.shape) - len(axes)])
        flat = find(xp.reshape(moved, kept + (math.prod(sizes),)), axis=-1)
        return _coordinates(lambda cs: xp.stack(cs, axis=-1), flat, sizes)


class _Torch:
    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def run(self, plan: AlongPlan, x: Any) -> Any:
        torch, op, axes = self.torch, plan.op, plan.axes
        if not axes:      # flip, roll, softmax over no axis (a 0-d input: '[]')
            return x if op in ("flip", "roll") else _softmax_parts(
                torch, x, axes, op == "log_softmax", lambda v, a: v.detach(), lambda v, a: v)
        if op == "flip":
            return torch.flip(x, dims=axes)
        if op == "roll":
            return torch.roll(x, shifts=plan.shift, dims=axes)
        if op in ("softmax", "log_softmax"):
            if len(axes) == 1:
                function = (torch.nn.functional.softmax if op == "softmax"
                            else torch.nn.functional.log_softmax)
                return function(x, dim=axes[0])
            if any(type(n) is int and n == 0 for n in x.shape):   # nothing for amax
                return torch.exp(x - x)
            # einx's formula; the max is a constant for autograd, as in einx
            amax = (lambda v, a: torch.amax(v, dim=a, keepdim=True).detach())
            keep = (lambda v, a: torch.sum(v, dim=a, keepdim=True))
            return _softmax_parts(torch, x, axes, op == "log_softmax", amax, keep)
        if op == "sort":
            return torch.sort(x, dim=axes[0])[0]
        if op == "argsort":
            return torch.argsort(x, dim=axes[0])
        find = torch.argmax if op == "argmax" else torch.argmin
        if len(axes) == 1:
            return find(x, dim=axes[0])
        sizes = [x.shape[a] for a in axes]
        moved = _move_last(x, axes, lambda v, o: v.permute(o))
        kept = tuple(moved.shape[:moved.dim() - len(axes)])
        flat = find(moved.reshape(kept + (math.prod(sizes),)), dim=-1)
        return _coordinates(lambda cs: torch.stack(cs, dim=-1), flat, sizes)


_NUMPY = _NumpyLike(np, "numpy")
_libraries: dict[type, Any] = {np.ndarray: _NUMPY}


def _library_of(x: Any, op: str) -> tuple[Any, Any]:
    """``(library, array)`` for ``x``: numpy arrays (and numpy scalars, as 0-d arrays),
    torch tensors, dask arrays, array-API arrays. rearrange.Tensor is refused."""
    library = _libraries.get(type(x))
    if library is not None:
        return library, x
    from .tensor import Tensor
    if isinstance(x, Tensor):
        raise ArgumentTypeError(
            f"{op}() does not take a rearrange.Tensor (it has no {op}); pass its numpy "
            f"view x.numpy(), or a numpy array or torch tensor")
    if isinstance(x, (np.generic, np.ndarray)):
        return _NUMPY, np.asarray(x)
    from . import backends
    backend = backends.backend_for(x)
    if backend is None:
        raise ArgumentTypeError(
            f"{op}() takes a numpy array, a torch tensor, a dask array or an array-API "
            f"array; got {type(x).__module__}.{type(x).__name__}")
    name = backend.__name__.rsplit(".", 1)[-1]
    if name == "_torch":
        import torch
        library = _Torch(torch)
    elif name == "_dask":
        import dask.array as da
        library = _NumpyLike(da, "dask")
    elif name == "_numpy_subclass":
        return _NUMPY, np.asarray(x)
    else:
        library = _NumpyLike(x.__array_namespace__(), "array_api")
    _libraries[type(x)] = library
    return library, x


# --------------------------------------------------------------------------- the front


def _given(op: str, axes_lengths: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    for name, value in axes_lengths.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            if type(value).__name__ == "SymInt":
                continue
            raise ArgumentTypeError(f"{op}(): axis lengths must be integers, got "
                                    f"{name}={value!r}")
    return tuple((name, value if type(value) is int or type(value).__name__ == "SymInt"
                  else int(value)) for name, value in axes_lengths.items())


def _shift_tuple(shift: Any) -> tuple[int, ...]:
    if shift is None:
        raise ArgumentTypeError("roll() needs shift=: an int, or one int per axis in brackets")
    if isinstance(shift, (bool, np.bool_)):
        raise ArgumentTypeError(f"roll(): shift must be an int or ints, got {shift!r}")
    if isinstance(shift, (int, np.integer)):
        return (int(shift),)
    try:
        values = tuple(shift)
    except TypeError:
        raise ArgumentTypeError(f"roll(): shift must be an int or a sequence of ints, got "
                                f"{type(shift).__name__}") from None
    if not values or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                             for v in values):
        raise ArgumentTypeError(f"roll(): shift must be an int or ints, got {shift!r}")
    return tuple(int(v) for v in values)


def _plan(op: str, pattern: Any, ndim: int, given: tuple, shift: tuple | None) -> AlongPlan:
    key = ("along", op, pattern, ndim, given, shift)
    plan = PLANS.get(key)
    if plan is None:
        if not isinstance(pattern, str):
            raise ArgumentTypeError(f"pattern must be a str, got {type(pattern).__name__} "
                                    f"{pattern!r}")
        plan = plan_along(op, pattern, ndim, given, shift)
        PLANS.put(key, plan)
    return plan


_PLAIN = (int, type(None))
_PLAIN_INT = front.PLAIN_INT


def _door_key(op: str) -> Callable[..., Any]:
    def key(library: Any, x: Any, pattern: Any, axes_lengths: Mapping[str, Any],
            shift: Any) -> Any:
        """``("along", op, pattern, array type, rank, shift, *lengths)``: no sizes, so
        traced inputs share it. Only a plain shift and plain-int lengths (canonical:
        3.0 or True stay themselves) meet the cache; anything else is never kept."""
        if type(shift) in _PLAIN and (not axes_lengths or _PLAIN_INT.issuperset(
                map(type, axes_lengths.values()))):
            return ("along", op, pattern, type(x), len(x.shape), shift, *axes_lengths.items())
        return front.NOT_KEPT
    return key


def _door_plan(op: str) -> Callable[..., AlongPlan]:
    def plan(library: Any, x: Any, pattern: Any, axes_lengths: Mapping[str, Any],
             shift: Any) -> AlongPlan:
        """Checks first (the lengths, ``shift``), then the plan for ``x``'s rank."""
        given = _given(op, axes_lengths) if axes_lengths else ()
        shift_values = _shift_tuple(shift) if op == "roll" else None
        return _plan(op, pattern, len(x.shape), given, shift_values)
    return plan


def _door_context(op: str) -> Callable[..., RearrangeError]:
    def context(error: RearrangeError, pattern: Any, x: Any, axes_lengths: Any,
                shift: Any) -> RearrangeError:
        return type(error)(f"{error}\n(in {op}() with pattern {pattern!r})")
    return context


def _operation(op: str) -> front.Operation:
    """``op`` as the door (:func:`rearrange.front.run`) takes it: the backend is the
    array's library (:func:`_library_of`, which refuses what no library takes), the
    extras ``shift``. The plan is shape-free: no call is traced for the door."""
    return front.Operation(
        name=op, parse_kind="notation",
        inputs=lambda x: (_library_of(x, op)[0], x),
        key=_door_key(op), plan=_door_plan(op),
        lower=lambda library, plan, x, axes_lengths, shift: _lower(op, library, plan, x),
        context=_door_context(op), traced=lambda *call: False)


#: The operations along bracketed axes as the door takes them.
DOOR: dict[str, front.Operation] = {op: _operation(op) for op in OPERATIONS}


_entries = PLANS.entries


def _run(op: str, x: Any, pattern: Any, shift: Any, axes_lengths: Mapping[str, Any]) -> Any:
    """A call: the warm path ahead of the door — the door's key (:func:`_door_key`)
    written out, one lookup, a hit run with the door's error handling — else
    :func:`rearrange.front.run`. (Only a type :func:`_library_of` took has a kept key.)"""
    if type(shift) in _PLAIN and (not axes_lengths or _PLAIN_INT.issuperset(
            map(type, axes_lengths.values()))):
        try:
            runner = _entries.get(("along", op, pattern, type(x), len(x.shape), shift,
                                   *axes_lengths.items()))
        except (TypeError, AttributeError):     # an unhashable pattern, no shape
            runner = None
        if runner is not None:
            PLANS.hits += 1
            try:
                return runner(x)
            except (RearrangeError, MemoryError, RuntimeError) as error:
                raised = front.failure(DOOR[op], error, pattern, x, axes_lengths, shift)
                if raised is None:
                    raise
                raise raised from None
    return front.run(DOOR[op], x, pattern, axes_lengths, shift)


def _lower(op: str, library: Any, plan: AlongPlan, x: Any) -> Callable[[Any], Any]:
    """The runner of ``plan`` for arrays of ``x``'s type and rank (numpy scalars and
    subclasses taken as numpy arrays)."""
    convert = type(x) is not np.ndarray and library is _NUMPY
    split, split_lengths = plan.split, dict(plan.split_lengths)
    merge, merge_lengths = plan.merge, dict(plan.merge_lengths)
    if library is _NUMPY and op == "flip" and split is None and merge is None and plan.axes:
        # a view: one basic index, each flipped axis by a negative step
        index = tuple(slice(None, None, -1) if k in plan.axes else slice(None)
                      for k in range(len(x.shape)))
        return (lambda v: np.asarray(v)[index]) if convert else (lambda v: v[index])
    run_op = library.run
    argfind = op in _ARGFIND

    def run(value: Any) -> Any:
        if convert:
            value = np.asarray(value)
        if split is not None:
            value = run_transform("rearrange", value, split, None, None, split_lengths)
        if argfind:
            _check_not_empty(op, value, plan.axes)
        value = run_op(plan, value)
        if merge is not None:
            value = run_transform("rearrange", value, merge, None, None, merge_lengths)
        return value
    return run


def _check_not_empty(op: str, x: Any, axes: tuple[int, ...]) -> None:
    for a in axes:
        size = x.shape[a]
        if type(size) is int and size == 0:
            raise RearrangeError(f"{op}() of an empty axis: the bracketed axis {a} has "
                                 f"length 0, which has no {op[3:]}")


def softmax(x: Any, pattern: str, /, **axes_lengths: int) -> Any:
    """The softmax over the bracketed axes (all of them at once), einx's ``softmax``:

    >>> import numpy as np, rearrange as ra
    >>> x = np.log(np.array([[1.0, 3.0], [2.0, 2.0]]))
    >>> ra.softmax(x, 'b [t]')
    array([[0.25, 0.75],
           [0.5 , 0.5 ]])

    The output is the input's expression unless one follows ``->`` (the same axes, the
    same ones bracketed: ``'b [t] h -> h b [t]'``)."""
    return _run("softmax", x, pattern, None, axes_lengths)


def log_softmax(x: Any, pattern: str, /, **axes_lengths: int) -> Any:
    """The log of :func:`softmax` over the bracketed axes, computed as einx does
    (``x - log(sum(exp(x - max))) - max``)."""
    return _run("log_softmax", x, pattern, None, axes_lengths)


def flip(x: Any, pattern: str, /, **axes_lengths: int) -> Any:
    """The bracketed axes reversed. On numpy a view (negative strides) wherever the
    output's groups allow one:

    >>> import numpy as np, rearrange as ra
    >>> x = np.arange(6).reshape(2, 3)
    >>> y = ra.flip(x, 'a [b]')
    >>> y, np.shares_memory(x, y)
    (array([[2, 1, 0],
           [5, 4, 3]]), True)
    """
    return _run("flip", x, pattern, None, axes_lengths)


def roll(x: Any, pattern: str, /, *, shift: int | Sequence[int], **axes_lengths: int) -> Any:
    """The bracketed axes rolled by ``shift`` (an int for every bracketed axis, or one per
    bracketed axis), as ``numpy.roll``: an element moves ``shift`` places forward, those
    past the end come back at the start.

    >>> import numpy as np, rearrange as ra
    >>> ra.roll(np.arange(5), '[a]', shift=2)
    array([3, 4, 0, 1, 2])
    """
    return _run("roll", x, pattern, shift, axes_lengths)


def sort(x: Any, pattern: str, /, **axes_lengths: int) -> Any:
    """The values sorted in ascending order along the one bracketed axis (the library's
    own sort: numpy's default kind, as einx calls it)."""
    return _run("sort", x, pattern, None, axes_lengths)


def argsort(x: Any, pattern: str, /, **axes_lengths: int) -> Any:
    """The indices that sort the one bracketed axis (the library's argsort, as einx:
    ties in numpy's default order, which is not stable)."""
    return _run("argsort", x, pattern, None, axes_lengths)


def argmax(x: Any, pattern: str, /, **axes_lengths: int) -> Any:
    """The coordinates of the maximum over the bracketed axes, as einx gives them:
    without an output, the one bracket becomes an axis of the coordinates, ``[n]`` for
    n bracketed axes (so ``'b [t] c'`` gives shape ``(b, 1, c)``; write ``'b [t] c -> b
    c'`` for ``(b, c)``). The first of equal maxima wins.

    >>> import numpy as np, rearrange as ra
    >>> x = np.array([[[0, 5], [7, 1]], [[9, 0], [0, 0]]])
    >>> ra.argmax(x, 'a [b c]')
    array([[1, 0],
           [0, 0]])
    >>> ra.argmax(x, 'a b [c] -> a b')
    array([[1, 0],
           [0, 0]])
    """
    return _run("argmax", x, pattern, None, axes_lengths)


def argmin(x: Any, pattern: str, /, **axes_lengths: int) -> Any:
    """The coordinates of the minimum over the bracketed axes (see :func:`argmax`)."""
    return _run("argmin", x, pattern, None, axes_lengths)


# --------------------------------------------------------------------------- explain


@record
class AlongExplanation:
    """What an operation along bracketed axes does to one input: the split (a view),
    the op (a view for numpy's flip, else what is computed) and the merge (a view, or
    the one copy the output's groups need)."""

    plan: AlongPlan
    input_shape: tuple[int, ...]
    split: Any          # the split's Plan (rearrange.Plan), or None
    merge: Any          # the merge's Plan, or None
    input: Any = None   # the input's Layout (its strides, for the picture); None: unknown

    def __str__(self) -> str:
        lines = [f"{self.plan.op}(x, {self.plan.pattern!r}) for an input of shape "
                 f"{self.input_shape}"]
        if self.split is None:
            lines.append("1. input: its axes as they are (no split)")
        else:
            lines.append(f"1. split {self.plan.split!r}: "
                         + ("a view" if self.split.is_view else "a copy")
                         + f" of shape {self.split.output.shape}")
        lines.append("2. " + self.plan.describe_op())
        if self.merge is None:
            lines.append("3. output: the op's result as it is")
        else:
            lines.append(f"3. merge {self.plan.merge!r}: "
                         + ("a view" if self.merge.is_view else "one copy (the kernel)")
                         + f" of shape {self.merge.output.shape}")
        return "\n".join(lines)

    @property
    def is_view(self) -> bool:
        """The whole operation is a view of the input (numpy's flip, no copy needed)."""
        return (self.plan.op == "flip" and (self.split is None or self.split.is_view)
                and (self.merge is None or self.merge.is_view))

    def to_svg(self) -> str:
        """A picture of the plan as SVG text: the input, its split, the op (numpy's flip
        a view with negated strides) and the merge into the output (see
        :meth:`rearrange.Plan.to_svg`)."""
        from .picture import along_svg

        return along_svg(self)

    def _repr_html_(self) -> str:
        """Notebooks: the explain table and the picture."""
        from .picture import html_fragment

        return html_fragment(str(self), self.to_svg())


def explain_along(x_or_shape: Any, pattern: str, *, op: str, shift: Any = None,
                  strides: Sequence[int] | None = None, dtype: Any = None,
                  **axes_lengths: int) -> AlongExplanation:
    """The plan ``op`` (one of :data:`OPERATIONS`) follows for this input (an array or a
    shape, with ``strides`` in elements and ``dtype``), as numpy runs it, without
    touching data.

    >>> import rearrange as ra
    >>> print(ra.explain((2, 3, 4), 'a [b] c', op='flip'))
    flip(x, 'a [b] c') for an input of shape (2, 3, 4)
    1. input: its axes as they are (no split)
    2. flip [b]: numpy: a view (each stride negated, the offset moved to the last element); torch, dask, array API: the library's flip (a copy)
    3. output: the op's result as it is
    """
    from .calls import layout_from, plan_for
    from .layout import Layout, flipped

    if op not in OPERATIONS:
        raise RearrangeError(f"explain_along: op must be one of {', '.join(OPERATIONS)}, "
                             f"got {op!r}")
    if not isinstance(x_or_shape, (tuple, list, np.ndarray, np.generic)):
        library, array = _library_of(x_or_shape, op)
        x_or_shape, dtype = tuple(int(n) for n in array.shape), str(array.dtype).replace(
            "torch.", "")
        try:
            np.dtype(dtype)
        except TypeError:
            dtype = None
    layout, dtype_name, itemsize, unit = layout_from(x_or_shape, strides, dtype)
    given = _given(op, axes_lengths) if axes_lengths else ()
    plan = plan_along(op, pattern, layout.ndim, given,
                      _shift_tuple(shift) if op == "roll" else None)
    split = None
    elementary = layout
    if plan.split is not None:
        split = plan_for(plan.split, layout, dict(plan.split_lengths), None, dtype_name, itemsize, unit)
        elementary = split.output
    merge = None
    if plan.merge is not None:
        if op == "flip":
            result, result_unit = flipped(elementary, plan.axes), unit
        else:
            shape = _result_shape(plan, elementary.shape)
            result, result_unit = Layout.contiguous(shape), "elements"
            if op in _ARGFIND or op == "argsort":
                dtype_name, itemsize = "int64", 8
        merge = plan_for(plan.merge, result, dict(plan.merge_lengths), None, dtype_name, itemsize, result_unit)
    return AlongExplanation(plan, tuple(layout.shape), split, merge, layout)


def _result_shape(plan: AlongPlan, shape: Sequence[int]) -> tuple[int, ...]:
    if plan.op not in _ARGFIND:
        return tuple(shape)
    kept = tuple(n for k, n in enumerate(shape) if k not in plan.axes)
    return kept + ((len(plan.axes),) if len(plan.axes) > 1 else ())
